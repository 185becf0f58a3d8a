//! `[[datacenter]]`: names, countries, continents and locations.

use super::{Cx, DcSpec, unique};
use crate::{
    config::{Config, Datacenter},
    place::{Continent, Coordinates, Country, Degrees},
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
                let location = self.location(&path, d);
                let bias = d.bias.unwrap_or(0);
                if !(-99..=99).contains(&bias) {
                    self.err(&path, format!("bias {bias} is not between -99 and 99"));
                } else if bias != 0 && location.is_none() {
                    self.err(&path, "bias needs latitude and longitude");
                }
                DcSpec {
                    name: d.name.clone(),
                    country,
                    continent,
                    location,
                    bias: bias.clamp(-99, 99),
                }
            })
            .collect()
    }

    /// A datacenter's latitude and longitude, both or neither.
    fn location(&mut self, path: &str, d: &Datacenter) -> Option<Coordinates> {
        match (d.latitude, d.longitude) {
            (None, None) => None,
            (Some(Degrees(lat)), Some(Degrees(lon))) => {
                if !(-90.0..=90.0).contains(&lat) {
                    self.err(path, format!("latitude {lat} is not between -90 and 90"));
                }
                if !(-180.0..=180.0).contains(&lon) {
                    self.err(path, format!("longitude {lon} is not between -180 and 180"));
                }
                Coordinates::from_degrees(lat, lon)
            }
            (Some(_), None) => {
                self.err(path, "latitude needs longitude");
                None
            }
            (None, Some(_)) => {
                self.err(path, "longitude needs latitude");
                None
            }
        }
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
