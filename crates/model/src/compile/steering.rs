//! A steered record's mode, balance, answers and fail-safe values.

use std::collections::HashSet;

use hickory_server::proto::rr::Name;

use super::{
    BUILTIN_SCENARIOS, Cx, DrCondition, DrSpec, ModeCx, ModeSpec, Refs, Steering,
    rdata::answer_rdata,
};
use crate::config::{Balance, Mode, Record, RecordType};

impl Cx {
    pub(super) fn steering(
        &mut self,
        path: &str,
        r: &Record,
        apex: &Name,
        domain_mode: Mode,
        m: &ModeCx,
        refs: &Refs,
    ) -> Option<Steering> {
        let mode = r.options().mode.unwrap_or(domain_mode);
        let balance = r.options().balance.unwrap_or_default();
        if r.addresses.is_empty() {
            self.err(path, "needs at least one address");
        }
        if mode != Mode::DisasterRecovery {
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
        let mode_spec = match mode {
            Mode::Standalone => ModeSpec::Standalone,
            Mode::DisasterRecovery => {
                let condition = match r.options().dr_condition.as_deref() {
                    None | Some("automatic") => DrCondition::Automatic,
                    Some(s) => {
                        match s.strip_prefix("scenario:") {
                            Some(name)
                                if refs.scenarios.contains(name)
                                    || BUILTIN_SCENARIOS.contains(&name) =>
                            {
                                DrCondition::Scenario(name.into())
                            }
                            Some(name) => {
                                self.err(
                                    path,
                                    format!("dr_condition: unknown scenario \"{name}\""),
                                );
                                DrCondition::Automatic
                            }
                            None => {
                                self.err(path, format!("dr_condition \"{s}\" is not \"automatic\" or \"scenario:NAME\""));
                                DrCondition::Automatic
                            }
                        }
                    }
                };
                match (m.main_dc, m.dr_dc) {
                    (Some(main), Some(dr)) => ModeSpec::DisasterRecovery(Box::new(DrSpec {
                        main,
                        dr,
                        condition,
                        on_no_healthy: r.options().dr_on_no_healthy.unwrap_or(true),
                        failback: r.options().failback.unwrap_or_default(),
                    })),
                    _ => {
                        self.err(
                            path,
                            "disaster-recovery mode needs main_dc and dr_dc on the domain",
                        );
                        return None;
                    }
                }
            }
            Mode::Datacenter => ModeSpec::Datacenter {
                order: m.dc_order.clone().into(),
                count: u32::try_from(m.dcs_to_select.unwrap_or(1)).unwrap_or(u32::MAX),
            },
        };
        let max_answers = r.options().max_answers.unwrap_or(match balance {
            // A name has one CNAME (RFC 2181 §10.1): several targets are
            // candidates, one is answered.
            _ if r.kind == RecordType::Cname => 1,
            Balance::RoundRobin | Balance::Random => usize::MAX,
            Balance::Weighted | Balance::Priority | Balance::Persist => 1,
        });
        if max_answers == 0 {
            self.err(path, "max_answers must be 1 or more");
        }
        if r.kind == RecordType::Cname && max_answers > 1 {
            self.err(
                path,
                format!("max_answers = {max_answers}: a CNAME answers one target (RFC 2181 §10.1); its several targets are candidates, one of them is answered"),
            );
        }
        let topology = r.options().topology.unwrap_or(false);
        let mut addresses = Vec::with_capacity(r.addresses.len());
        let mut seen = HashSet::new();
        for (i, a) in r.addresses.iter().enumerate() {
            let apath = format!("{path} / address {}", i + 1);
            if let Some(addr) =
                self.address(&apath, r.kind, a, apex, balance, topology, &mode_spec, refs)
            {
                let display = addr.display();
                if seen.contains(&display) {
                    self.err(&apath, format!("{display} is listed twice"));
                } else {
                    seen.insert(display);
                }
                addresses.push(addr);
            }
        }
        let mut fail_safe = Vec::with_capacity(r.options().fail_safe.len());
        for v in &r.options().fail_safe {
            match answer_rdata(r.kind, v) {
                Ok(d) => fail_safe.push(d),
                Err(e) => self.err(path, format!("fail_safe: {e}")),
            }
        }
        Some(Steering {
            mode: mode_spec,
            balance,
            // Beyond 2^32 - 1 candidates, as many as all.
            max_answers: u32::try_from(max_answers).unwrap_or(u32::MAX),
            fail_safe: fail_safe.into(),
            on_no_healthy: r.options().on_no_healthy.unwrap_or_default(),
            topology,
            addresses: addresses.into(),
        })
    }
}
