//! One address of a steered record: its value, datacenter, health and
//! topology.

use hickory_server::proto::rr::{Name, RData};

use super::{
    AddressSpec, BUILTIN_SCENARIOS, Cx, DcId, Hc, ModeSpec, Refs,
    rdata::{DataError, answer_rdata},
};
use crate::{
    condition::CheckRef,
    config::{Address, Balance, CheckType, RecordType},
    place::{Continent, Country},
    value::Value,
};

/// What the addresses of a record are read against: the record's type,
/// domain, balance, topology and mode, and what the configuration defines.
pub(super) struct AddressCx<'a> {
    pub(super) kind: RecordType,
    /// Relative names in an MX or SRV address's value are under it.
    pub(super) apex: &'a Name,
    pub(super) balance: Balance,
    pub(super) topology: bool,
    pub(super) mode: &'a ModeSpec,
    pub(super) refs: &'a Refs<'a>,
}

/// What is wrong with the value of an address.
#[derive(Debug, thiserror::Error)]
enum ValueError {
    /// The target or the IP given does not read.
    #[error(transparent)]
    Data(#[from] DataError),
    #[error("a CNAME address needs target = \"name\" (and no ip)")]
    CnameWithoutTarget,
    /// A target on an A or AAAA record.
    #[error("{ty} addresses take ip, not target", ty = .0.as_str())]
    TargetNotIp(RecordType),
    #[error("needs ip = \"...\"")]
    NoIp,
    /// An MX or SRV address without its data.
    #[error("{ty} addresses need value = \"...\" (the record's data, e.g. \"{example}\"); ip is the address its check probes", ty = .0.as_str(), example = if *.0 == RecordType::MX { "10 mx1" } else { "0 5 5060 sip1" })]
    NoValue(RecordType),
    /// A value on an A, AAAA or CNAME address.
    #[error("value applies to MX and SRV addresses; {ty} addresses take {takes}", ty = .0.as_str(), takes = if *.0 == RecordType::CNAME { "target" } else { "ip" })]
    ValueNotData(RecordType),
}

/// The answer's data of an address of a `kind` record.
fn address_value(kind: RecordType, a: &Address, apex: &Name) -> Result<RData, ValueError> {
    if kind.steers_values() {
        return match (a.value(), a.target()) {
            (_, Some(_)) => Err(ValueError::TargetNotIp(kind)),
            (Some(v), None) => Ok(answer_rdata(kind, v, apex)?),
            (None, None) => Err(ValueError::NoValue(kind)),
        };
    }
    if a.value().is_some() {
        return Err(ValueError::ValueNotData(kind));
    }
    Ok(match (kind, a.ip, a.target()) {
        (RecordType::CNAME, None, Some(t)) => answer_rdata(kind, t, apex)?,
        (RecordType::CNAME, _, _) => return Err(ValueError::CnameWithoutTarget),
        (_, Some(ip), None) => answer_rdata(kind, &ip.to_string(), apex)?,
        (_, _, Some(_)) => return Err(ValueError::TargetNotIp(kind)),
        (_, None, None) => return Err(ValueError::NoIp),
    })
}

impl Cx {
    /// An address of a record `of` describes, refused whole on any error.
    pub(super) fn address(
        &mut self,
        path: &str,
        a: &Address,
        of: &AddressCx,
    ) -> Option<AddressSpec> {
        let before = self.errors.len();
        let value = self.address_value(path, of, a);
        let dc = self.address_dc(path, a, of.refs);
        self.dc_in_mode(path, a, dc, of.mode);
        let hc = self.hc(path, a, of);
        if a.weight().is_some() && of.balance != Balance::Weighted {
            self.err(path, "weight applies only with balance = \"weighted\"");
        }
        let (countries, continents) = self.places(path, a, of.topology);
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
            .in_group(a.group().map(Box::from))
        })
    }

    /// The answer's data: a CNAME's target, the IP of an A or AAAA, or an
    /// MX's or SRV's value.
    fn address_value(&mut self, path: &str, of: &AddressCx, a: &Address) -> Option<RData> {
        address_value(of.kind, a, of.apex)
            .map_err(|e| self.err(path, e.to_string()))
            .ok()
    }

    /// The datacenter the address names, if it names one that exists.
    fn address_dc(&mut self, path: &str, a: &Address, refs: &Refs) -> Option<DcId> {
        let name = a.dc()?;
        let id = refs.dcs.get(name).copied();
        if id.is_none() {
            self.err(path, format!("unknown datacenter \"{name}\""));
        }
        id
    }

    /// The datacenter the record's mode needs: the domain's main or DR
    /// one in disaster recovery, any in datacenter mode.
    fn dc_in_mode(&mut self, path: &str, a: &Address, dc: Option<DcId>, mode: &ModeSpec) {
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
    }

    /// The HC field: static (the default), disabled, a scenario or a
    /// template check.
    fn hc(&mut self, path: &str, a: &Address, of: &AddressCx) -> Hc {
        let refs = of.refs;
        let text = match a.hc() {
            None | Some("static") => return Hc::Static,
            Some("disabled") => return Hc::Disabled,
            Some(text) => text,
        };
        if let Some(name) = text.strip_prefix("scenario:") {
            if BUILTIN_SCENARIOS.contains(&name) {
                self.err(
                    path,
                    format!(
                        "the built-in scenario \"{name}\" is not offered as an HC; use hc = \"static\" or \"disabled\""
                    ),
                );
            } else if !refs.scenarios.contains(name) {
                self.err(path, format!("unknown scenario \"{name}\""));
            }
            Hc::Scenario(Box::new(name.into()))
        } else if let Some(name) = text.strip_prefix("check:") {
            self.hc_check(path, a, name, of)
        } else {
            self.err(
                path,
                format!("hc \"{text}\" is not static, disabled, scenario:NAME or check:NAME"),
            );
            Hc::Static
        }
    }

    /// `hc = "check:NAME"`: a template check, probed against the address
    /// (a manual check against none).
    fn hc_check(&mut self, path: &str, a: &Address, name: &str, of: &AddressCx) -> Hc {
        let refs = of.refs;
        match refs.checks.get(name) {
            None => self.err(path, format!("unknown check \"{name}\"")),
            Some(c) if c.target.is_some() => self.err(
                path,
                format!(
                    "check \"{name}\" has a fixed target; use a template check (no target) or name it in a scenario"
                ),
            ),
            Some(_) => {}
        }
        if of.kind.steers_values()
            && a.ip.is_none()
            && refs
                .checks
                .get(name)
                .is_some_and(|c| c.kind != CheckType::Manual)
        {
            self.err(
                path,
                format!(
                    "check \"{name}\" probes an address: an {} address it checks needs ip = \"...\", the address of its target",
                    of.kind.as_str()
                ),
            );
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
    }

    /// The countries and continents whose clients get the address, only
    /// with topology on the record.
    fn places(
        &mut self,
        path: &str,
        a: &Address,
        topology: bool,
    ) -> (Box<[Country]>, Box<[Continent]>) {
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
        (countries, continents)
    }
}
