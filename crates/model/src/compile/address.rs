//! One address of a steered record.

use hickory_server::proto::rr::Name;

use super::{AddressSpec, BUILTIN_SCENARIOS, Cx, Hc, ModeSpec, Refs, rdata::answer_rdata};
use crate::{
    condition::CheckRef,
    config::{Address, Balance, CheckType, RecordType},
    place::Country,
    value::Value,
};

impl Cx {
    #[allow(clippy::too_many_arguments)]
    pub(super) fn address(
        &mut self,
        path: &str,
        kind: RecordType,
        a: &Address,
        _apex: &Name,
        balance: Balance,
        topology: bool,
        mode: &ModeSpec,
        refs: &Refs,
    ) -> Option<AddressSpec> {
        let before = self.errors.len();
        let value = match (kind, a.ip, a.target()) {
            (RecordType::Cname, None, Some(t)) => answer_rdata(kind, t),
            (RecordType::Cname, _, _) => {
                Err("a CNAME address needs target = \"name\" (and no ip)".to_string())
            }
            (_, Some(ip), None) => answer_rdata(kind, &ip.to_string()),
            (_, _, Some(_)) => Err(format!("{} addresses take ip, not target", kind.as_str())),
            (_, None, None) => Err("needs ip = \"...\"".to_string()),
        };
        let value = value.map_err(|e| self.err(path, e)).ok();
        let dc = match a.dc() {
            Some(name) => match refs.dcs.get(name) {
                Some(id) => Some(*id),
                None => {
                    self.err(path, format!("unknown datacenter \"{name}\""));
                    None
                }
            },
            None => None,
        };
        match mode {
            ModeSpec::DisasterRecovery(spec) => match dc {
                Some(d) if d == spec.main || d == spec.dr => {}
                Some(_) => self.err(
                    path,
                    "in disaster-recovery mode an address must be in the domain's main_dc or dr_dc",
                ),
                None if a.dc().is_none() => self.err(
                    path,
                    "in disaster-recovery mode every address needs dc = main_dc or dr_dc",
                ),
                None => {}
            },
            ModeSpec::Datacenter { .. } if a.dc().is_none() => {
                self.err(path, "in datacenter mode every address needs dc = \"...\"")
            }
            _ => {}
        }
        let hc = match a.hc() {
            None | Some("static") => Hc::Static,
            Some("disabled") => Hc::Disabled,
            Some(text) => {
                if let Some(name) = text.strip_prefix("scenario:") {
                    if BUILTIN_SCENARIOS.contains(&name) {
                        self.err(path, format!("the built-in scenario \"{name}\" is not offered as an HC; use hc = \"static\" or \"disabled\""));
                    } else if !refs.scenarios.contains(name) {
                        self.err(path, format!("unknown scenario \"{name}\""));
                    }
                    Hc::Scenario(Box::new(name.into()))
                } else if let Some(name) = text.strip_prefix("check:") {
                    match refs.checks.get(name) {
                        None => self.err(path, format!("unknown check \"{name}\"")),
                        Some(c) if c.target.is_some() => self.err(path, format!("check \"{name}\" has a fixed target; use a template check (no target) or name it in a scenario")),
                        Some(_) => {}
                    }
                    let address = match (a.ip, refs.checks.get(name)) {
                        (_, Some(c)) if c.kind == CheckType::Manual => None,
                        (Some(ip), _) => Some(ip),
                        (None, _) => None,
                    };
                    Hc::Check(Box::new(CheckRef {
                        name: name.to_string(),
                        address,
                    }))
                } else {
                    self.err(
                        path,
                        format!(
                            "hc \"{text}\" is not static, disabled, scenario:NAME or check:NAME"
                        ),
                    );
                    Hc::Static
                }
            }
        };
        if a.weight().is_some() && balance != Balance::Weighted {
            self.err(path, "weight applies only with balance = \"weighted\"");
        }
        if (!a.countries().is_empty() || !a.continents().is_empty()) && !topology {
            self.err(
                path,
                "countries and continents apply only with topology = true on the record",
            );
        }
        let countries = a
            .countries()
            .iter()
            .filter_map(|c| {
                let parsed = Country::parse(c);
                if parsed.is_none() {
                    self.err(
                        path,
                        format!("country \"{c}\" is not an ISO 3166 two-letter code"),
                    );
                }
                parsed
            })
            .collect();
        let continents = a
            .continents()
            .iter()
            .filter_map(|c| self.continent(path, c))
            .collect();
        let value = value?;
        (self.errors.len() == before).then(|| {
            let target = match (&a.ip, a.target()) {
                (None, Some(t)) => Some(t.trim_end_matches('.').to_ascii_lowercase().into()),
                _ => None,
            };
            let weight = a.weight().unwrap_or(1);
            AddressSpec::new(
                Value::from(value),
                target,
                dc,
                hc,
                weight,
                countries,
                continents,
            )
        })
    }
}
