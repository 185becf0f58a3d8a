//! `[geoip]`: where the GeoIP database is fetched from.

use super::Cx;
use crate::config::Config;

impl Cx {
    /// `[geoip] source` must be an http(s) URL whose only placeholders are
    /// `{year}` and `{month}`.
    pub(super) fn geoip(&mut self, config: &Config) {
        let Some(source) = config.geoip.as_ref().and_then(|g| g.source.as_deref()) else {
            return;
        };
        let path = "geoip / source";
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
