//! The text formats of `/metrics`, chosen by the scraper's `Accept`.

use prometheus_client::registry::Registry;

/// The exposition formats `/metrics` speaks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Format {
    /// The Prometheus text format 0.0.4 (the default: what `curl` and older scrapers get).
    Prometheus,
    /// OpenMetrics text 1.0.0 (counters' families without `_total`, `# EOF` at the end), for
    /// a scraper whose `Accept` prefers it, as Prometheus's own does.
    OpenMetrics,
}

/// The content type of OpenMetrics text 1.0.0 (the OpenMetrics specification's own).
const OPENMETRICS_CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

impl Format {
    /// The format an `Accept` header prefers: OpenMetrics only when it ranks (by `q`) above
    /// the Prometheus text format; an OpenMetrics range of a version other than 1.0.0, or
    /// none at all, leaves the default.
    pub fn negotiate(accept: Option<&str>) -> Format {
        let (mut open, mut text) = (0.0_f64, 0.0_f64);
        for range in accept.unwrap_or_default().split(',') {
            let mut parts = range.split(';').map(str::trim);
            let media = parts.next().unwrap_or_default().to_ascii_lowercase();
            let (mut q, mut version) = (1.0_f64, None);
            for p in parts {
                let Some((k, v)) = p.split_once('=') else {
                    continue;
                };
                match k.trim().to_ascii_lowercase().as_str() {
                    "q" => q = v.trim().parse().unwrap_or(0.0),
                    "version" => version = Some(v.trim().trim_matches('"').to_owned()),
                    _ => {}
                }
            }
            match media.as_str() {
                "application/openmetrics-text"
                    if version.as_deref().is_none_or(|v| v == "1.0.0") =>
                {
                    open = open.max(q);
                }
                "text/plain" | "text/*" | "*/*" => text = text.max(q),
                _ => {}
            }
        }
        if open > text {
            Format::OpenMetrics
        } else {
            Format::Prometheus
        }
    }

    /// The `Content-Type` of the format.
    pub fn content_type(self) -> &'static str {
        match self {
            Format::Prometheus => prometheus_client::encoding::prometheus_text::CONTENT_TYPE,
            Format::OpenMetrics => OPENMETRICS_CONTENT_TYPE,
        }
    }

    /// `registry` in this format.
    pub fn encode(self, registry: &Registry) -> Result<String, std::fmt::Error> {
        let mut out = String::new();
        match self {
            Format::Prometheus => {
                prometheus_client::encoding::prometheus_text::encode(&mut out, registry)?;
            }
            Format::OpenMetrics => prometheus_client::encoding::text::encode(&mut out, registry)?,
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::metrics::Metrics;

    #[test]
    fn a_scraper_gets_openmetrics_only_when_it_prefers_it() {
        use Format::{OpenMetrics, Prometheus};
        for (accept, want) in [
            (None, Prometheus),
            (Some("*/*"), Prometheus),
            (Some("text/plain"), Prometheus),
            // Prometheus 3's default scrape protocols.
            (
                Some(
                    "application/openmetrics-text;version=1.0.0;escaping=allow-utf-8;q=0.5,\
                     application/openmetrics-text;version=0.0.1;q=0.4,\
                     text/plain;version=0.0.4;q=0.3,*/*;q=0.2",
                ),
                OpenMetrics,
            ),
            (Some("application/openmetrics-text"), OpenMetrics),
            (
                Some("text/plain;q=1, application/openmetrics-text;q=0.5"),
                Prometheus,
            ),
            // Only 1.0.0 is spoken.
            (
                Some("application/openmetrics-text;version=2.0.0"),
                Prometheus,
            ),
            (Some("application/json"), Prometheus),
        ] {
            assert_eq!(Format::negotiate(accept), want, "{accept:?}");
        }
        assert_eq!(
            Prometheus.content_type(),
            "text/plain; version=0.0.4; charset=utf-8"
        );
        let m = Metrics::default();
        m.pass();
        let mut registry = Registry::default();
        m.register(registry.sub_registry_with_prefix("proxops"));
        let open = OpenMetrics.encode(&registry).unwrap_or_default();
        assert!(open.ends_with("# EOF\n"), "{open}");
        assert_eq!(Prometheus.encode(&registry).unwrap_or_default(), {
            let mut out = String::new();
            prometheus_client::encoding::prometheus_text::encode(&mut out, &registry)
                .unwrap_or_default();
            out
        });
    }
}
