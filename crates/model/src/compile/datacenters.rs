//! `[[datacenter]]`: names, countries and continents.

use super::{Cx, DcSpec, unique};
use crate::{
    config::Config,
    place::{Continent, Country},
};

impl Cx {
    pub(super) fn datacenters(&mut self, config: &Config) -> Vec<DcSpec> {
        unique(
            self,
            "datacenter",
            config.datacenters.iter().map(|d| d.name.as_str()),
        );
        config
            .datacenters
            .iter()
            .map(|d| {
                let path = format!("datacenter {}", d.name);
                let country = d.country.as_deref().and_then(|c| {
                    let parsed = Country::parse(c);
                    if parsed.is_none() {
                        self.err(
                            &path,
                            format!("country \"{c}\" is not an ISO 3166 two-letter code"),
                        );
                    }
                    parsed
                });
                let continent = d
                    .continent
                    .as_deref()
                    .and_then(|c| self.continent(&path, c));
                DcSpec {
                    name: d.name.clone(),
                    country,
                    continent,
                }
            })
            .collect()
    }

    pub(super) fn continent(&mut self, path: &str, text: &str) -> Option<Continent> {
        let parsed = Continent::parse(text);
        if parsed.is_none() {
            self.err(
                path,
                format!("continent \"{text}\" is not one of AF, AN, AS, EU, NA, OC, SA"),
            );
        }
        parsed
    }
}
