//! `[[scenario]]`: conditions over checks.

use std::collections::HashMap;

use super::{CheckSpec, Cx, ScenarioSpec, unique};
use crate::{
    condition::{self, Expr},
    config::{CheckType, Config},
};

/// Built-in scenarios: not offered as an HC, usable as a DR condition.
pub const BUILTIN_SCENARIOS: [&str; 2] = ["always", "never"];

impl Cx {
    pub(super) fn scenarios(
        &mut self,
        config: &Config,
        checks: &HashMap<&str, &CheckSpec>,
    ) -> Vec<ScenarioSpec> {
        unique(
            self,
            "scenario",
            config.scenarios.iter().map(|s| s.name.as_str()),
        );
        let mut out = Vec::new();
        for s in &config.scenarios {
            let path = format!("scenario {}", s.name);
            if BUILTIN_SCENARIOS.contains(&s.name.as_str()) {
                self.err(
                    &path,
                    format!("\"{}\" is a built-in scenario; choose another name", s.name),
                );
            }
            let condition = self.condition(&path, "condition", &s.condition, checks);
            let verify = s
                .verify
                .as_deref()
                .map(|v| self.condition(&path, "verify", v, checks));
            if let (Some(condition), Some(verify)) =
                (condition, verify.unwrap_or(Some(Expr::And(vec![]))))
            {
                out.push(ScenarioSpec {
                    name: s.name.clone(),
                    condition,
                    verify: s.verify.as_ref().map(|_| verify),
                });
            }
        }
        out
    }

    fn condition(
        &mut self,
        path: &str,
        key: &str,
        text: &str,
        checks: &HashMap<&str, &CheckSpec>,
    ) -> Option<Expr> {
        let expr = match condition::parse(text) {
            Ok(e) => e,
            Err(e) => {
                self.err(path, format!("{key}: {e}"));
                return None;
            }
        };
        let before = self.errors.len();
        for r in expr.refs() {
            match checks.get(r.name.as_str()) {
                None => self.err(path, format!("{key}: unknown check \"{}\"", r.name)),
                Some(c) => match (&r.address, c.target.is_some() || c.kind == CheckType::Manual) {
                    (Some(_), true) => self.err(
                        path,
                        format!("{key}: check \"{}\" is not a template, so it takes no @address", r.name),
                    ),
                    (None, false) => self.err(
                        path,
                        format!("{key}: check \"{}\" is a template; name the address it probes, e.g. {}@192.0.2.10", r.name, r.name),
                    ),
                    _ => {}
                },
            }
        }
        (self.errors.len() == before).then_some(expr)
    }
}
