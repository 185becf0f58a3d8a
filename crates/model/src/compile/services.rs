//! `[[service]]`: the domains each service groups.

use std::collections::{HashMap, HashSet};

use super::{Cx, normal, unique};
use crate::config::Config;

impl Cx {
    pub(super) fn services(&mut self, config: &Config) {
        unique(
            self,
            "service",
            config.services.iter().map(|s| s.name.as_str()),
        );
        let domains: HashSet<String> = config.domains.iter().map(|d| normal(&d.name)).collect();
        let mut owner: HashMap<String, &str> = HashMap::new();
        for s in &config.services {
            for d in &s.domains {
                let path = format!("service {}", s.name);
                if !domains.contains(&normal(d)) {
                    self.err(&path, format!("unknown domain \"{d}\""));
                } else if let Some(other) = owner.insert(normal(d), &s.name) {
                    self.err(
                        &path,
                        format!("domain \"{d}\" already belongs to service \"{other}\""),
                    );
                }
            }
        }
    }
}
