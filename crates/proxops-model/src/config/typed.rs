//! Configuration values written as text and read as a type (`30s`, `never`): parsed once when
//! the file is decoded, so that every later use reads the value, not the text again. A text
//! that does not parse is kept (to be reported at its node, with its code, by the checks of
//! [`ConfigFile::check`](super::ConfigFile::check) and the sinks' checks), and makes the file
//! unusable: no one is handed such a configuration.

use crate::quantity::parse_duration;
use schemars::JsonSchema;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use std::time::Duration;

/// A type a configuration text is read as.
pub trait FromConfigText: Sized {
    /// The value of `text`, if it is one.
    fn from_config_text(text: &str) -> Option<Self>;
}

/// A positive duration such as `30s`, `5m`, `1h30m` or `250ms`.
impl FromConfigText for Duration {
    fn from_config_text(text: &str) -> Option<Duration> {
        parse_duration(text).filter(|d| !d.is_zero())
    }
}

/// A configuration value: its text as written, and what it reads as.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Typed<T> {
    text: String,
    value: Option<T>,
}

/// A positive duration of a configuration file.
pub type ConfigDuration = Typed<Duration>;

impl<T: FromConfigText> Typed<T> {
    /// `text`, read.
    pub fn parse(text: &str) -> Typed<T> {
        Typed {
            text: text.to_owned(),
            value: T::from_config_text(text),
        }
    }
}

impl<T: FromConfigText> From<&str> for Typed<T> {
    fn from(text: &str) -> Typed<T> {
        Typed::parse(text)
    }
}

impl<T: Copy> Typed<T> {
    /// The value; `None` when the text does not read as one (reported by the checks: a
    /// configuration that passed them has every value).
    pub fn value(&self) -> Option<T> {
        self.value
    }
}

impl<T> Typed<T> {
    /// The text as written.
    pub fn text(&self) -> &str {
        &self.text
    }
}

impl<T> Serialize for Typed<T> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.text)
    }
}

impl<'de, T: FromConfigText> Deserialize<'de> for Typed<T> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Typed<T>, D::Error> {
        String::deserialize(d).map(|text| Typed::parse(&text))
    }
}

/// In the schema, the text it is written as.
impl<T> JsonSchema for Typed<T> {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        String::schema_name()
    }

    fn json_schema(generator: &mut schemars::SchemaGenerator) -> schemars::Schema {
        String::json_schema(generator)
    }

    fn inline_schema() -> bool {
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Reminder;

    #[test]
    fn texts_are_read_once_and_kept() {
        let d = ConfigDuration::parse("1h30m");
        assert_eq!(d.value(), Some(Duration::from_secs(5400)));
        assert_eq!(d.text(), "1h30m");
        for bad in ["0s", "soon", "30", ""] {
            assert_eq!(ConfigDuration::parse(bad).value(), None, "{bad}");
        }
        assert_eq!(
            Typed::<Reminder>::parse("never").value(),
            Some(Reminder::Never)
        );
        assert_eq!(
            Typed::<Reminder>::parse("30m").value(),
            Some(Reminder::After(Duration::from_secs(1800)))
        );
        assert_eq!(Typed::<Reminder>::parse("0s").value(), None);
        let json = serde_json::to_string(&d).unwrap_or_default();
        assert_eq!(json, "\"1h30m\"");
        let back: ConfigDuration = serde_json::from_str(&json).unwrap_or_else(|_| "x".into());
        assert_eq!(back, d);
    }
}
