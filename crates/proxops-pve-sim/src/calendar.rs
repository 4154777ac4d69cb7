//! PVE calendar events (the `pve-calendar-event` format of backup job schedules): the grammar
//! and the next-event rule of proxmox-time `calendar_event.rs` (`CalendarEvent::from_str`,
//! `compute_next_event`), which pve-manager `PVE/API2/Backup.pm` `index` uses for a job's
//! `next-run`. The simulated nodes keep UTC, so local time and `UTC` events agree.

/// One component's accepted values: `5`, `1..5`, `0/15`, `1..20/3`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Value {
    Single(u32),
    Range(u32, u32),
    Repeated {
        start: u32,
        step: u32,
        end: Option<u32>,
    },
}

impl Value {
    fn contains(self, v: u32) -> bool {
        match self {
            Value::Single(s) => s == v,
            Value::Range(a, b) => (a..=b).contains(&v),
            Value::Repeated { start, step, end } => {
                v >= start
                    && end.is_none_or(|e| v <= e)
                    // A step of 0 repeats nothing: only `start` itself.
                    && (v - start).is_multiple_of(step)
            }
        }
    }
}

/// A list of values; empty means every value (`*`).
fn any_of(list: &[Value], v: u32) -> bool {
    list.is_empty() || list.iter().any(|x| x.contains(v))
}

/// A parsed calendar event.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CalendarEvent {
    /// Bit 0 Monday … bit 6 Sunday; 0 means every day.
    weekdays: u8,
    year: Vec<Value>,
    month: Vec<Value>,
    day: Vec<Value>,
    hour: Vec<Value>,
    minute: Vec<Value>,
    second: Vec<Value>,
}

const ZERO: &[Value] = &[Value::Single(0)];

fn at_midnight() -> CalendarEvent {
    CalendarEvent {
        hour: ZERO.to_vec(),
        minute: ZERO.to_vec(),
        second: ZERO.to_vec(),
        ..Default::default()
    }
}

fn weekday(word: &str) -> Option<u8> {
    let day = match word.to_ascii_lowercase().as_str() {
        "mon" | "monday" => 0,
        "tue" | "tuesday" => 1,
        "wed" | "wednesday" => 2,
        "thu" | "thursday" => 3,
        "fri" | "friday" => 4,
        "sat" | "saturday" => 5,
        "sun" | "sunday" => 6,
        _ => return None,
    };
    Some(day)
}

/// `mon`, `mon..fri` or a wrapping `sat..tue`, as a bit set.
fn weekday_range(text: &str) -> Option<u8> {
    let (a, b) = match text.split_once("..") {
        Some((a, b)) => (weekday(a)?, weekday(b)?),
        None => (weekday(text)?, weekday(text)?),
    };
    let days = if a <= b {
        (a..=b).collect::<Vec<_>>()
    } else {
        (a..7).chain(0..=b).collect()
    };
    Some(days.into_iter().fold(0, |set, d| set | (1 << d)))
}

fn number(text: &str, max: u32) -> Result<u32, String> {
    if text.is_empty() || !text.bytes().all(|b| b.is_ascii_digit()) {
        return Err(format!("expected a number at '{text}'"));
    }
    match text.parse::<u32>() {
        Ok(n) if n < max => Ok(n),
        _ => Err(format!("time value too large at '{text}'")),
    }
}

/// One comma-separated component: `*`, `*/step` (from `start`), or a list of values.
fn component(text: &str, start: u32, max: u32) -> Result<Vec<Value>, String> {
    if let Some(rest) = text.strip_prefix('*') {
        return match rest.strip_prefix('/') {
            Some(step) => {
                let step = number(step, max)?;
                if step == 0 {
                    return Err(format!("invalid repetition at '{text}'"));
                }
                Ok(vec![Value::Repeated {
                    start,
                    step,
                    end: None,
                }])
            }
            None if rest.is_empty() => Ok(Vec::new()),
            None => Err(format!("unexpected '{rest}'")),
        };
    }
    text.split(',')
        .map(|item| {
            let (range, step) = match item.split_once('/') {
                Some((r, s)) => (r, Some(number(s, max)?)),
                None => (item, None),
            };
            let (first, end) = match range.split_once("..") {
                Some((a, b)) => (number(a, max)?, Some(number(b, max)?)),
                None => (number(range, max)?, None),
            };
            if end.is_some_and(|e| first > e) {
                return Err(format!("range start is bigger than end at '{item}'"));
            }
            Ok(match (end, step) {
                (_, Some(step)) => Value::Repeated {
                    start: first,
                    step,
                    end,
                },
                (Some(e), None) => Value::Range(first, e),
                (None, None) => Value::Single(first),
            })
        })
        .collect()
}

impl CalendarEvent {
    /// Parses an event (`daily`, `mon..fri 02:30`, `*-*-01 00:00`, `*/15`, `sat 21:00 UTC`).
    pub fn parse(text: &str) -> Result<Self, String> {
        let text = text
            .strip_suffix("UTC")
            .map_or(text, |t| t.trim_end_matches(' '));
        let mut event = match text {
            "minutely" => Some(CalendarEvent {
                second: ZERO.to_vec(),
                ..Default::default()
            }),
            "hourly" => Some(CalendarEvent {
                minute: ZERO.to_vec(),
                second: ZERO.to_vec(),
                ..Default::default()
            }),
            "daily" => Some(at_midnight()),
            "weekly" => Some(CalendarEvent {
                weekdays: 1,
                ..at_midnight()
            }),
            "monthly" => Some(CalendarEvent {
                day: vec![Value::Single(1)],
                ..at_midnight()
            }),
            "yearly" | "annually" => Some(CalendarEvent {
                day: vec![Value::Single(1)],
                month: vec![Value::Single(1)],
                ..at_midnight()
            }),
            "quarterly" => Some(CalendarEvent {
                day: vec![Value::Single(1)],
                month: [1, 4, 7, 10].map(Value::Single).to_vec(),
                ..at_midnight()
            }),
            "semiannually" | "semi-annually" => Some(CalendarEvent {
                day: vec![Value::Single(1)],
                month: [1, 7].map(Value::Single).to_vec(),
                ..at_midnight()
            }),
            _ => None,
        };
        if let Some(event) = event.take() {
            return Ok(event);
        }
        let mut words = text.split(' ').filter(|w| !w.is_empty()).peekable();
        let mut out = CalendarEvent::default();
        let mut any = false;
        if let Some(first) = words
            .peek()
            .filter(|w| w.starts_with(|c: char| c.is_ascii_alphabetic()))
        {
            for range in first.split(',') {
                out.weekdays |=
                    weekday_range(range).ok_or_else(|| format!("invalid weekday at '{range}'"))?;
            }
            words.next();
            any = true;
        }
        let mut date = None;
        let mut time = None;
        for word in words {
            if date.is_none() && time.is_none() && word.contains('-') {
                date = Some(word);
            } else if time.is_none() {
                time = Some(word);
            } else {
                return Err(format!("unexpected '{word}'"));
            }
        }
        if let Some(date) = date {
            let parts: Vec<&str> = date.split('-').collect();
            let (year, month, day) = match parts.as_slice() {
                [y, m, d] => (component(y, 0, 2200)?, *m, *d),
                [m, d] => (Vec::new(), *m, *d),
                _ => return Err(format!("invalid date spec at '{date}'")),
            };
            out.year = year;
            out.month = component(month, 1, 13)?;
            out.day = component(day, 1, 32)?;
            any = true;
        }
        match time {
            Some(time) => {
                let parts: Vec<&str> = time.split(':').collect();
                let (hour, minute, second) = match parts.as_slice() {
                    [m] => (Vec::new(), component(m, 0, 60)?, ZERO.to_vec()),
                    [h, m] => (component(h, 0, 24)?, component(m, 0, 60)?, ZERO.to_vec()),
                    [h, m, s] => (
                        component(h, 0, 24)?,
                        component(m, 0, 60)?,
                        component(s, 0, 60)?,
                    ),
                    _ => return Err(format!("invalid time spec at '{time}'")),
                };
                (out.hour, out.minute, out.second) = (hour, minute, second);
                any = true;
            }
            None => {
                (out.hour, out.minute, out.second) = (ZERO.to_vec(), ZERO.to_vec(), ZERO.to_vec())
            }
        }
        if !any {
            return Err("expected a date or time specification".into());
        }
        Ok(out)
    }

    /// The first event strictly after `last` (seconds since the epoch, UTC); `None` when there
    /// is none within the years it can still match.
    pub fn next_after(&self, last: i64) -> Option<i64> {
        let start = last.checked_add(1)?;
        let first_day = start.div_euclid(86_400);
        let first_second = start.rem_euclid(86_400) as u32;
        // Enough days for a leap day seen across a century's skipped leap year.
        for day in first_day..first_day + 366 * 9 {
            let (y, m, d) = civil_from_days(day);
            if !self.year.is_empty() && !any_of(&self.year, y) {
                // No later year can match: none ever again.
                if !self.year.iter().any(|v| year_reaches(*v, y)) {
                    return None;
                }
            } else if any_of(&self.month, m)
                && any_of(&self.day, d)
                && (self.weekdays == 0 || self.weekdays & (1 << weekday_of(day)) != 0)
            {
                let from = if day == first_day { first_second } else { 0 };
                if let Some(secs) = self.first_time_from(from) {
                    return Some(day * 86_400 + i64::from(secs));
                }
            }
        }
        None
    }

    /// The first second of a day at or after `from` whose hour, minute and second match.
    fn first_time_from(&self, from: u32) -> Option<u32> {
        let (fh, fm, fs) = (from / 3600, from / 60 % 60, from % 60);
        for h in (fh..24).filter(|h| any_of(&self.hour, *h)) {
            let m0 = if h == fh { fm } else { 0 };
            for m in (m0..60).filter(|m| any_of(&self.minute, *m)) {
                let s0 = if h == fh && m == fm { fs } else { 0 };
                if let Some(s) = (s0..60).find(|s| any_of(&self.second, *s)) {
                    return Some(h * 3600 + m * 60 + s);
                }
            }
        }
        None
    }
}

fn year_reaches(v: Value, year: u32) -> bool {
    match v {
        Value::Single(s) => s > year,
        Value::Range(_, e) => e > year,
        Value::Repeated { end, .. } => end.is_none_or(|e| e > year),
    }
}

/// The UTC date of a day number since 1970-01-01 (`None` outside jiff's range, years -9999 to
/// 9999).
fn date_of(day: i64) -> Option<jiff::civil::Date> {
    let ts = jiff::Timestamp::from_second(day.checked_mul(86_400)?).ok()?;
    Some(ts.to_zoned(jiff::tz::TimeZone::UTC).date())
}

/// Monday 0 … Sunday 6 of a day number.
fn weekday_of(day: i64) -> u32 {
    date_of(day).map_or(0, |d| d.weekday().to_monday_zero_offset() as u32)
}

/// Year, month, day of a day number since 1970-01-01 (the proleptic Gregorian calendar); years
/// before 0 or past jiff's range read as year 0.
fn civil_from_days(z: i64) -> (u32, u32, u32) {
    match date_of(z) {
        Some(d) => (
            u32::try_from(d.year()).unwrap_or(0),
            d.month() as u32,
            d.day() as u32,
        ),
        None => (0, 1, 1),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// 2026-12-06 (a Sunday) 01:30:00 UTC.
    const SUN_0130: i64 = 1_796_520_600;

    fn next(spec: &str, from: i64) -> i64 {
        CalendarEvent::parse(spec)
            .unwrap_or_else(|e| panic!("{spec}: {e}"))
            .next_after(from)
            .unwrap_or_else(|| panic!("{spec}: no next event"))
    }

    #[test]
    fn the_epoch_of_the_test_day_is_what_it_claims() {
        assert_eq!(civil_from_days(SUN_0130 / 86_400), (2026, 12, 6));
        assert_eq!(weekday_of(SUN_0130 / 86_400), 6);
    }

    #[test]
    fn next_events_follow_proxmox_time() {
        let day = SUN_0130 - 5400; // 2026-12-06 00:00
        for (spec, want) in [
            ("02:00", day + 2 * 3600),
            ("01:00", day + 86_400 + 3600),
            ("daily", day + 86_400),
            ("hourly", day + 2 * 3600),
            ("*/15", SUN_0130 + 15 * 60),
            ("weekly", day + 86_400),
            ("sat 21:00", day + 6 * 86_400 + 21 * 3600),
            ("mon..fri 01:00", day + 86_400 + 3600),
            ("sun 01:30", day + 7 * 86_400 + 5400),
            ("sun 01:30:01", SUN_0130 + 1),
            ("monthly", day + 26 * 86_400),
            ("*-12-24 18:00", day + 18 * 86_400 + 18 * 3600),
            ("2027-01-01", day + 26 * 86_400),
            ("sat..mon 3:00", day + 3 * 3600),
            ("0/6:00", day + 6 * 3600),
            ("2,22:30 UTC", day + 2 * 3600 + 1800),
        ] {
            assert_eq!(next(spec, SUN_0130), want, "{spec}");
        }
    }

    #[test]
    fn a_past_year_has_no_next_event() {
        let event = CalendarEvent::parse("2020-01-01").unwrap();
        assert_eq!(event.next_after(SUN_0130), None);
    }

    #[test]
    fn malformed_events_are_refused() {
        for bad in [
            "",
            "25:00",
            "noday 01:00",
            "1..0",
            "*/0",
            "01:00 02:00 03:00",
            "12-40",
        ] {
            assert!(CalendarEvent::parse(bad).is_err(), "{bad:?} parsed");
        }
    }
}
