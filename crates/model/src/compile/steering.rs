//! A steered record's mode, balance, answers and fail-safe values.

use std::collections::HashSet;

use hickory_server::proto::rr::RData;

use super::{
    AddressSpec, BUILTIN_SCENARIOS, Cx, DomainCx, DrCondition, DrSpec, Extra, ModeSpec, Refs,
    RuleSpec, RuleTarget, Steering,
    address::AddressCx,
    rdata::answer_rdata,
    regions::{self, read_client},
};
use crate::config::{Balance, Mode, Record, RecordType};

impl Cx {
    /// How a steered record (A, AAAA, CNAME; MX or SRV with addresses) of the domain `within` describes is
    /// answered. `None` when its mode cannot be: the rest is still checked
    /// where it can be.
    pub(super) fn steering(
        &mut self,
        path: &str,
        r: &Record,
        within: &DomainCx,
    ) -> Option<Steering> {
        let mode = r.options().mode.unwrap_or(within.mode);
        let balance = r.options().balance.unwrap_or_default();
        if r.addresses.is_empty() {
            self.err(path, "needs at least one address");
        }
        if mode != Mode::DisasterRecovery {
            self.dr_keys_outside_dr(path, r);
        }
        let mode_spec = self.mode_spec(path, r, mode, within)?;
        let max_answers = self.max_answers(path, r, balance);
        let topology = r.options().topology.unwrap_or(false);
        let of = AddressCx {
            kind: r.kind,
            apex: within.apex,
            balance,
            topology,
            mode: &mode_spec,
            refs: within.refs,
        };
        let addresses = self.addresses(path, r, &of);
        let fail_safe = self.fail_safe(path, r, within.apex);
        let (rules, rule_set) = self.rules(path, r, within);
        let nearest = r.options().nearest.unwrap_or(false);
        if nearest
            && !addresses.iter().any(|a| {
                a.dc()
                    .and_then(|dc| within.refs.datacenters.get(dc))
                    .is_some_and(|d| d.location.is_some())
            })
        {
            self.err(
                path,
                "nearest = true needs an address in a datacenter with a latitude and longitude",
            );
        }
        Some(Steering {
            mode: mode_spec,
            balance,
            // Beyond 2^32 - 1 candidates, as many as all.
            max_answers: u32::try_from(max_answers).unwrap_or(u32::MAX),
            on_no_healthy: r.options().on_no_healthy.unwrap_or_default(),
            topology,
            nearest,
            addresses: addresses.into(),
            extra: Extra::of(
                fail_safe.into(),
                rules.into(),
                rule_set,
                within.view.map(Box::from),
            ),
        })
    }

    /// The record's topology rules, or its domain's when it has none of
    /// its own (checked once, with the domain: [`Cx::domain_rules`]). A
    /// domain's rule naming an address the record lacks does not apply to
    /// it; the record's own must name one of its addresses.
    fn rules(&mut self, path: &str, r: &Record, within: &DomainCx) -> (Vec<RuleSpec>, u32) {
        let own = &r.options().topology_rules;
        let (rules, inherited) = if own.is_empty() {
            (within.rules, true)
        } else {
            (&own[..], false)
        };
        let set = within
            .refs
            .sets
            .get(&regions::set_key(rules))
            .copied()
            .unwrap_or(0);
        let mut out = Vec::with_capacity(rules.len());
        for (i, rule) in rules.iter().enumerate() {
            let at = format!("{path} / topology rule {}", i + 1);
            let report = !inherited;
            let (matcher, weight) = self.rule_client(&at, rule, within.refs, report);
            let target = match (&rule.datacenter, &rule.group, &rule.address) {
                (Some(dc), None, None) => self.rule_dc(&at, dc, within.refs, report),
                (None, Some(group), None) => {
                    let found = r.addresses.iter().position(|a| a.group() == Some(group));
                    if found.is_none() && report {
                        self.err(
                            &at,
                            format!("group \"{group}\" is not a group of the record's addresses"),
                        );
                    }
                    found.map(|i| RuleTarget::Group(i as u32))
                }
                (None, None, Some(address)) => {
                    let found = r.addresses.iter().position(|a| {
                        a.ip.is_some_and(|ip| ip.to_string() == *address)
                            || a.target()
                                .is_some_and(|t| crate::config::same_name(t, address))
                    });
                    if found.is_none() && report {
                        self.err(
                            &at,
                            format!("address \"{address}\" is not one of the record's"),
                        );
                    }
                    found.map(|i| RuleTarget::Address(i as u32))
                }
                _ => {
                    if report {
                        self.err(&at, "give one of datacenter, group or address");
                    }
                    None
                }
            };
            if let (Some(matcher), Some(target)) = (matcher, target) {
                out.push(RuleSpec {
                    matcher,
                    target,
                    weight,
                });
            }
        }
        (out, set)
    }

    /// Checks a domain's topology rules once (its records take them).
    pub(super) fn domain_rules(
        &mut self,
        path: &str,
        rules: &[crate::config::TopologyRule],
        refs: &Refs,
    ) {
        for (i, rule) in rules.iter().enumerate() {
            let at = format!("{path} / topology rule {}", i + 1);
            self.rule_client(&at, rule, refs, true);
            match (&rule.datacenter, &rule.group, &rule.address) {
                (Some(dc), None, None) => {
                    self.rule_dc(&at, dc, refs, true);
                }
                (None, Some(_), None) | (None, None, Some(_)) => {}
                _ => self.err(&at, "give one of datacenter, group or address"),
            }
        }
    }

    /// A rule's client place (its matcher) and weight; errors said when
    /// `report`.
    fn rule_client(
        &mut self,
        at: &str,
        rule: &crate::config::TopologyRule,
        refs: &Refs,
        report: bool,
    ) -> (Option<u32>, u32) {
        let weight = rule.weight.unwrap_or(1);
        if weight == 0 && report {
            self.err(at, "weight must be 1 or more");
        }
        let matcher = match read_client(&rule.client) {
            Ok(client) => {
                let found = refs.places.get(&client.key()).copied();
                if let (None, regions::Client::Region(name), true) = (found, &client, report) {
                    self.err(at, format!("unknown region \"{name}\""));
                }
                found
            }
            Err(e) => {
                if report {
                    self.err(at, e);
                }
                None
            }
        };
        (matcher, weight)
    }

    fn rule_dc(&mut self, at: &str, dc: &str, refs: &Refs, report: bool) -> Option<RuleTarget> {
        let found = refs.dcs.get(dc).copied().map(RuleTarget::Datacenter);
        if found.is_none() && report {
            self.err(at, format!("unknown datacenter \"{dc}\""));
        }
        found
    }

    /// Refuses the keys of disaster recovery on a record in another mode.
    fn dr_keys_outside_dr(&mut self, path: &str, r: &Record) {
        for (set, key) in [
            (r.options().dr_condition.is_some(), "dr_condition"),
            (r.options().dr_on_no_healthy.is_some(), "dr_on_no_healthy"),
            (r.options().failback.is_some(), "failback"),
        ] {
            if set {
                self.err(
                    path,
                    format!("{key} applies to disaster-recovery mode only"),
                );
            }
        }
    }

    /// The record's mode with the domain's datacenters. `None` for
    /// disaster recovery on a domain without both its datacenters.
    fn mode_spec(
        &mut self,
        path: &str,
        r: &Record,
        mode: Mode,
        within: &DomainCx,
    ) -> Option<ModeSpec> {
        let m = within.dcs;
        match mode {
            Mode::Standalone => Some(ModeSpec::Standalone),
            Mode::DisasterRecovery => {
                let condition = self.dr_condition(path, r, within.refs);
                match (m.main_dc, m.dr_dc) {
                    (Some(main), Some(dr)) => Some(ModeSpec::DisasterRecovery(Box::new(DrSpec {
                        main,
                        dr,
                        condition,
                        on_no_healthy: r.options().dr_on_no_healthy.unwrap_or(true),
                        failback: r.options().failback.unwrap_or_default(),
                    }))),
                    _ => {
                        self.err(
                            path,
                            "disaster-recovery mode needs main_dc and dr_dc on the domain",
                        );
                        None
                    }
                }
            }
            Mode::Datacenter => Some(ModeSpec::Datacenter {
                order: m.dc_order.clone().into(),
                count: u32::try_from(m.dcs_to_select.unwrap_or(1)).unwrap_or(u32::MAX),
            }),
        }
    }

    /// `dr_condition`: `automatic` (the default) or a scenario, built-in
    /// or defined. What is not reads as automatic, with its error.
    fn dr_condition(&mut self, path: &str, r: &Record, refs: &Refs) -> DrCondition {
        let Some(s) = r
            .options()
            .dr_condition
            .as_deref()
            .filter(|s| *s != "automatic")
        else {
            return DrCondition::Automatic;
        };
        match s.strip_prefix("scenario:") {
            Some(name) if refs.scenarios.contains(name) || BUILTIN_SCENARIOS.contains(&name) => {
                DrCondition::Scenario(name.into())
            }
            Some(name) => {
                self.err(path, format!("dr_condition: unknown scenario \"{name}\""));
                DrCondition::Automatic
            }
            None => {
                self.err(
                    path,
                    format!("dr_condition \"{s}\" is not \"automatic\" or \"scenario:NAME\""),
                );
                DrCondition::Automatic
            }
        }
    }

    /// How many addresses an answer holds: `max_answers`, else all for
    /// round-robin and random, one otherwise and for a CNAME.
    fn max_answers(&mut self, path: &str, r: &Record, balance: Balance) -> usize {
        let max_answers = r.options().max_answers.unwrap_or(match balance {
            // A name has one CNAME (RFC 2181 §10.1): several targets are
            // candidates, one is answered.
            _ if r.kind == RecordType::CNAME => 1,
            Balance::RoundRobin | Balance::Random => usize::MAX,
            Balance::Weighted | Balance::Priority | Balance::Persist => 1,
        });
        if max_answers == 0 {
            self.err(path, "max_answers must be 1 or more");
        }
        if r.kind == RecordType::CNAME && max_answers > 1 {
            self.err(
                path,
                format!(
                    "max_answers = {max_answers}: a CNAME answers one target (RFC 2181 §10.1); its several targets are candidates, one of them is answered"
                ),
            );
        }
        max_answers
    }

    /// The record's addresses that compile, each listed once.
    fn addresses(&mut self, path: &str, r: &Record, of: &AddressCx) -> Vec<AddressSpec> {
        let mut addresses = Vec::with_capacity(r.addresses.len());
        let mut seen = HashSet::new();
        for (i, a) in r.addresses.iter().enumerate() {
            let apath = format!("{path} / address {}", i + 1);
            if let Some(addr) = self.address(&apath, a, of) {
                let display = addr.display();
                if seen.contains(&display) {
                    self.err(&apath, format!("{display} is listed twice"));
                } else {
                    seen.insert(display);
                }
                addresses.push(addr);
            }
        }
        addresses
    }

    /// The values answered when no address is healthy.
    fn fail_safe(
        &mut self,
        path: &str,
        r: &Record,
        apex: &hickory_server::proto::rr::Name,
    ) -> Vec<RData> {
        let mut fail_safe = Vec::with_capacity(r.options().fail_safe.len());
        for v in &r.options().fail_safe {
            match answer_rdata(r.kind, v, apex) {
                Ok(d) => fail_safe.push(d),
                Err(e) => self.err(path, format!("fail_safe: {e}")),
            }
        }
        fail_safe
    }
}
