//! `[geoip]`: where the GeoIP databases are fetched from.

use super::Cx;
use crate::config::Config;

impl Cx {
    /// `[geoip] source` and `asn_source` must be http(s) URLs whose only
    /// placeholders are `{year}` and `{month}`.
    pub(super) fn geoip(&mut self, config: &Config) {
        let Some(geoip) = &config.geoip else {
            return;
        };
        if let Some(source) = &geoip.source {
            self.source_url("geoip / source", source);
        }
        if let Some(source) = &geoip.asn_source {
            self.source_url("geoip / asn_source", source);
        }
    }

    fn source_url(&mut self, path: &str, source: &str) {
        let rest = source
            .strip_prefix("https://")
            .or_else(|| source.strip_prefix("http://"));
        let Some(rest) = rest else {
            self.err(
                path,
                format!("\"{source}\" is not an http:// or https:// URL"),
            );
            return;
        };
        let host = rest.split(['/', '?', '#']).next().unwrap_or_default();
        if host.is_empty() {
            self.err(path, format!("\"{source}\" has no host"));
        }
        if source.chars().any(|c| c.is_whitespace() || c.is_control()) {
            self.err(
                path,
                format!("\"{source}\" contains a space or a control character"),
            );
        }
        let unfilled = source.replace("{year}", "").replace("{month}", "");
        if unfilled.contains('{') || unfilled.contains('}') {
            self.err(
                path,
                format!("\"{source}\": only {{year}} and {{month}} are filled in"),
            );
        }
    }
}
