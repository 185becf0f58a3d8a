//! `[[view]]` (docs/views.md): checked, each view's client places as
//! matchers of the topology, and the rule set that classes clients by
//! them.

use std::{collections::HashMap, sync::Arc};

use super::{
    Cx, ViewSpec, ZoneSpec,
    regions::{read_client, view_set_key},
    unique,
};
use crate::config::Config;

/// The name no view may take: the zone every other client gets.
pub const DEFAULT_VIEW: &str = "default";

impl Cx {
    /// The views, each with its places' matchers, and the index of their
    /// rule set. Their places are checked as a rule's client is.
    pub(super) fn views(
        &mut self,
        config: &Config,
        places: &HashMap<String, u32>,
        sets: &HashMap<Vec<String>, u32>,
    ) -> (Vec<ViewSpec>, u32) {
        unique(self, "view", config.views.iter().map(|v| v.name.as_str()));
        let mut views = Vec::with_capacity(config.views.len());
        for v in &config.views {
            let path = format!("view {}", v.name);
            if v.name.eq_ignore_ascii_case(DEFAULT_VIEW) {
                self.err(
                    &path,
                    "\"default\" names the zone of the clients no view holds: choose another name",
                );
            }
            if v.name.contains(['@', '/']) || v.name.chars().any(char::is_whitespace) {
                self.err(&path, "a view's name has no @, / or spaces");
            }
            if v.clients.is_empty() {
                self.err(&path, "clients: a view needs at least one client place");
            }
            let mut matchers = Vec::with_capacity(v.clients.len());
            for (i, client) in v.clients.iter().enumerate() {
                let at = format!("{path} / clients[{i}]");
                match read_client(client) {
                    Ok(c) => match places.get(&c.key()) {
                        Some(m) => matchers.push(*m),
                        None => self.err(&at, format!("unknown place \"{client}\"")),
                    },
                    Err(e) => self.err(&at, e),
                }
            }
            views.push(ViewSpec {
                name: v.name.clone(),
                matchers: matchers.into_boxed_slice(),
            });
        }
        let set = view_set_key(config)
            .and_then(|k| sets.get(&k).copied())
            .unwrap_or(0);
        (views, set)
    }
}

/// The zones the clients of view `view` (0: of none) are answered from,
/// each with every record a query finds in it: the view's own, and the
/// others' of the names no view's zone has.
pub(super) fn zones_seen(zones: &[Arc<ZoneSpec>], view: u16) -> Vec<Arc<ZoneSpec>> {
    let own: Vec<&Arc<ZoneSpec>> = zones
        .iter()
        .filter(|z| view != 0 && z.view_index() == view)
        .collect();
    let mut seen: Vec<Arc<ZoneSpec>> = zones
        .iter()
        .filter(|z| z.view.is_none() && !own.iter().any(|o| o.apex == z.apex))
        .cloned()
        .collect();
    seen.extend(own.into_iter().map(|z| match &z.view {
        Some(v) if !v.inherited.is_empty() => {
            Arc::new(z.with_records(z.all_records().cloned().collect()))
        }
        _ => z.clone(),
    }));
    seen
}
