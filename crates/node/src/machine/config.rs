//! The configuration path of the state machine: a command that changes the
//! configuration (adopt, apply, edit, rollback) becomes the new text, is
//! proven servable, and is committed with its history entry, its parts and
//! the zone versions it moves.

use std::sync::Arc;

use gtm_cluster::{
    Map, Write,
    parts::{Part, Splice},
};

use super::{
    CONFIG_KEY, Change, Current, GtmMachine, Parsed, VERSION_KEY, config_text, describe, dnssec,
    has_config,
    history::{
        HISTORY_TEXT_BUDGET, HistoryEntry, LINES_KEPT, history_entry, history_key, history_writes,
        kept_changes,
    },
    invalid, operator, parts, rejected, text_hash, touched_domain, tsig,
    zone_versions::zone_version_writes,
};
use crate::command::{Action, Command, Edit, Outcome};
use gtm_model as model;
use gtm_model::{Config, error::ErrorKind, text::Layout};

/// The configuration a command asks for, before it is proven.
struct Proposed {
    config: Config,
    text: Splice,
    /// What history says was asked: `apply`, `create check web`, ….
    what: String,
    version: u64,
    layout: Option<Layout>,
}

/// The committed text's parts, and their bytes when an edit takes from
/// them (looked up once, for the edit and for its parts).
struct Committed<'a> {
    list: Vec<parts::PartRef>,
    pieces: Option<Vec<Part<'a>>>,
}

impl GtmMachine {
    /// Applies a configuration command to the committed map at `version`.
    pub(super) fn configure(
        &self,
        kv: &Map,
        index: u64,
        version: u64,
        current: Current,
        mut command: Command,
    ) -> Change {
        let list = parts::current_list(kv).unwrap_or_default();
        let pieces = match &command.action {
            Action::Edit(_) | Action::Update(_) | Action::Transfer(_) | Action::Promote { .. } => {
                parts::pieces(kv, &list)
            }
            _ => None,
        };
        let committed = Committed { list, pieces };
        // Where the committed text's parts lie: known when this machine
        // wrote it, read from it otherwise (an operator's text, or after
        // a restart).
        let layout = match (current.layout.clone(), &committed.pieces) {
            (None, Some(pieces)) => self.layout_of(kv, &current.config, pieces),
            (layout, _) => layout,
        };
        // An applied text becomes the map's parts without a copy: taken
        // out of the command, which nothing reads it from after this.
        let given = match &mut command.action {
            Action::ApplyConfig { text } | Action::Adopt { text, .. } => std::mem::take(text),
            _ => String::new(),
        };
        let proposed = match &command.action {
            Action::Adopt { version: v, .. } => adopt(kv, given, *v),
            Action::ApplyConfig { .. } => self.apply(index, given, &current.config, version),
            Action::Edit(e) => edit(e, &current.config, layout.as_ref(), &committed, version),
            Action::Rollback { version: to } => rollback(kv, *to, &current.config, version),
            Action::Update(u) => dynamic(u, &current.config, layout.as_ref(), &committed, version),
            Action::Transfer(t) => {
                transfer(t, &current.config, layout.as_ref(), &committed, version)
            }
            Action::Promote { domain } => promote(
                domain,
                &current.config,
                layout.as_ref(),
                &committed,
                version,
            ),
            Action::Drain { .. }
            | Action::SetCheck { .. }
            | Action::Resume { .. }
            | Action::AddSchedule(_)
            | Action::AddForcedSchedule(_)
            | Action::CancelSchedule { .. }
            | Action::FireSchedule { .. }
            | Action::SkipSchedule { .. }
            | Action::Dnssec(_)
            | Action::RotateCookieSecret { .. }
            | Action::Account(_)
            | Action::Tsig(_)
            | Action::Push { .. }
            | Action::Alerts { .. } => Err(rejected(
                ErrorKind::Internal,
                "an operator command reached the configuration path",
            )),
        };
        match proposed {
            Ok(proposed) => {
                self.commit(kv, index, version, &current, proposed, &command, committed)
            }
            Err(change) => change,
        }
    }

    fn apply(
        &self,
        index: u64,
        given: String,
        current: &Config,
        version: u64,
    ) -> Result<Proposed, Change> {
        let config = match self.take_parse(index, &given) {
            Some(Ok(c)) => c,
            Some(Err(e)) => return Err(invalid(e)),
            None => model::parse_like(&given, Some(current)).map_err(invalid)?,
        };
        // Where its parts lie, read once here rather than by the first edit.
        let layout = Layout::of(&given, &config);
        Ok(Proposed {
            config,
            text: Splice::whole(given.into_bytes()),
            what: "apply".to_string(),
            version: version + 1,
            layout,
        })
    }

    /// Proves `proposed` servable and commits it: the text as parts, its
    /// history entry, the zone versions it moves, the operator state it
    /// drops; the engine takes the proof's build.
    #[allow(clippy::too_many_arguments)]
    fn commit(
        &self,
        kv: &Map,
        index: u64,
        version: u64,
        current: &Current,
        proposed: Proposed,
        command: &Command,
        committed: Committed<'_>,
    ) -> Change {
        let Proposed {
            config: new,
            text,
            what,
            version: new_version,
            layout,
        } = proposed;
        let proven = match gtm_engine::servable(&new, &current.config, current.zones.as_deref()) {
            Ok(p) => p,
            Err(e) => return invalid(e),
        };
        // The secondaries' keys are the cluster's, not the text's: checked
        // against the keys committed before this command.
        if let Some(errors) = tsig::unknown_keys(kv, &new) {
            return invalid(errors);
        }
        if new == *current.config && has_config(kv) {
            // A retried apply of what is applied makes no new version.
            return Change {
                writes: Vec::new(),
                outcome: Outcome::Applied {
                    version,
                    index,
                    changed: false,
                    changes: Vec::new(),
                },
            };
        }
        let all = gtm_engine::diff(&current.config, &new);
        let changes = kept_changes(&all, new_version);
        let changes_in_all = (all.len() > LINES_KEPT).then_some(all.len());
        let entry = HistoryEntry {
            version: new_version,
            time_ms: command.time_ms,
            actor: command.actor.clone(),
            command: command.id.to_string(),
            what,
            changes: changes.clone(),
            changes_in_all,
            text: None,
            text_bytes: Some(text.len()),
        };
        // The configuration the device started with (version 0: the demo
        // or the one it was given), kept as the first version of history
        // so that it can be shown, diffed and rolled back to.
        let start = (version == 0 && new_version > 0 && command.history_keep > 1)
            .then(|| start_entry(kv, command))
            .flatten();
        // The text as parts: those it shares with the committed one are
        // not written again.
        let Some((list, mut writes)) =
            parts::keep(kv, text, &committed.list, committed.pieces.as_deref())
        else {
            return rejected(
                ErrorKind::Internal,
                "a part of the committed text is missing from the map",
            );
        };
        let list_value = parts::encode_list(&list);
        let hash = text_hash(&list_value);
        writes.push(Write::Put {
            key: parts::LIST_KEY.into(),
            value: list_value,
        });
        if kv.contains_key(CONFIG_KEY) {
            writes.push(Write::Delete {
                key: CONFIG_KEY.into(),
            });
        }
        writes.push(Write::Put {
            key: VERSION_KEY.into(),
            value: new_version.to_string().into_bytes(),
        });
        writes.extend(start);
        writes.extend(history_writes(
            kv,
            entry,
            list,
            command.history_keep as usize,
            HISTORY_TEXT_BUDGET,
        ));
        let adopt = matches!(command.action, Action::Adopt { .. });
        writes.extend(zone_version_writes(
            kv,
            &current.config,
            &new,
            &proven.compiled,
            (version, new_version),
            adopt,
        ));
        // The keys the command brought for the domains it signs: served
        // signed from the first answer of the version that signs them.
        let (keys, key_lines) = dnssec::first_keys(kv, &new, command);
        writes.extend(keys);
        // Operator state naming what the new configuration lacks drops
        // out; the keys made are logged there.
        writes.extend(operator::prune(
            kv,
            &proven.compiled,
            &key_lines,
            &command.actor,
        ));
        writes.extend(super::inputs::prune(kv, &new));
        *self.parsed.lock().unwrap_or_else(|p| p.into_inner()) = Some(Parsed {
            hash,
            config: Arc::new(new),
            zones: Some(proven.compiled.zones.clone()),
            compiled: Some(proven),
            layout,
        });
        Change {
            writes,
            outcome: Outcome::Applied {
                version: new_version,
                index,
                changed: true,
                changes,
            },
        }
    }
}

/// The history entry of version 0, the committed text a device started
/// with, when the map holds that text and no entry for it yet (a cluster
/// adopts its first version with an entry of its own). It holds its text
/// itself: it has no parts list, and falls out of history like any other.
fn start_entry(kv: &Map, command: &Command) -> Option<Write> {
    if !has_config(kv) || kv.contains_key(&history_key(0)) {
        return None;
    }
    let text = String::from_utf8(config_text(kv)?).ok()?;
    let entry = HistoryEntry {
        version: 0,
        time_ms: command.time_ms,
        actor: gtm_model::actor::Actor {
            user: "start".into(),
            device: command.actor.device.clone(),
        },
        command: "0".repeat(32),
        what: "the configuration the device started with".into(),
        changes: Vec::new(),
        changes_in_all: None,
        text_bytes: None,
        text: Some(text),
    };
    Some(Write::Put {
        key: history_key(0),
        value: serde_json::to_vec(&entry).ok()?,
    })
}

/// `gtm cluster init`: the first device's configuration, keeping its
/// version; only onto a map with none.
fn adopt(kv: &Map, given: String, version: u64) -> Result<Proposed, Change> {
    if has_config(kv) {
        return Err(rejected(
            ErrorKind::AlreadyClustered,
            "the cluster has a configuration already",
        ));
    }
    let config = model::parse(&given).map_err(invalid)?;
    let layout = Layout::of(&given, &config);
    Ok(Proposed {
        config,
        text: Splice::whole(given.into_bytes()),
        what: "adopt".to_string(),
        version,
        layout,
    })
}

/// One object put or deleted: the domains the edit did not touch are
/// copied from the text before, when this machine wrote it.
fn edit(
    e: &Edit,
    current: &Arc<Config>,
    layout: Option<&Layout>,
    committed: &Committed<'_>,
    version: u64,
) -> Result<Proposed, Change> {
    let mut config = (**current).clone();
    if let Err(e) = super::edit::apply(&mut config, e) {
        return Err(Change {
            writes: Vec::new(),
            outcome: Outcome::Rejected(e),
        });
    }
    let what = describe(e, super::edit::existed(current, e));
    written(
        config,
        current,
        layout,
        committed,
        touched_domain(e),
        what,
        version,
    )
}

/// An RFC 2136 dynamic update ([`super::update`]): its domain changed,
/// the others copied from the text before, as for an edit.
fn dynamic(
    u: &gtm_dns::update::Update,
    current: &Arc<Config>,
    layout: Option<&Layout>,
    committed: &Committed<'_>,
    version: u64,
) -> Result<Proposed, Change> {
    let config = super::update::apply(current, u)?;
    let what = format!("dynamic update of {} (key {})", u.zone, u.key);
    written(
        config,
        current,
        layout,
        committed,
        Some(&u.zone),
        what,
        version,
    )
}

/// A zone transferred in from a domain's primary
/// ([`super::transfer_in`]): its domain changed, as for an edit.
fn transfer(
    t: &crate::command::Transferred,
    current: &Arc<Config>,
    layout: Option<&Layout>,
    committed: &Committed<'_>,
    version: u64,
) -> Result<Proposed, Change> {
    let config = super::transfer_in::transferred(current, t)?;
    let what = format!(
        "transfer of {} from {} (serial {})",
        t.domain, t.primary, t.serial
    );
    written(
        config,
        current,
        layout,
        committed,
        Some(&t.domain),
        what,
        version,
    )
}

/// `gtm domain promote`: the domain's transferred records its own.
fn promote(
    domain: &str,
    current: &Arc<Config>,
    layout: Option<&Layout>,
    committed: &Committed<'_>,
    version: u64,
) -> Result<Proposed, Change> {
    let config = super::transfer_in::promoted(current, domain)?;
    let what = format!("promote {domain}: its transferred records are its own");
    written(
        config,
        current,
        layout,
        committed,
        Some(domain),
        what,
        version,
    )
}

/// `config`, changed from `current` in the domain `touched` (or in no
/// domain) alone, as the next version's text.
fn written(
    config: Config,
    current: &Arc<Config>,
    layout: Option<&Layout>,
    committed: &Committed<'_>,
    touched: Option<&str>,
    what: String,
    version: u64,
) -> Result<Proposed, Change> {
    let before = layout
        .zip(committed.pieces.as_deref())
        .map(|(layout, text)| model::text::Before {
            text,
            layout,
            config: current,
            touched,
        });
    let (text, layout) = model::text::write(&config, before).map_err(|e| {
        rejected(
            ErrorKind::Internal,
            format!("the configuration cannot be written as TOML: {e}"),
        )
    })?;
    Ok(Proposed {
        config,
        text,
        what,
        version: version + 1,
        layout: Some(layout),
    })
}

/// Back to the text of version `to`, while history keeps it.
fn rollback(kv: &Map, to: u64, current: &Config, version: u64) -> Result<Proposed, Change> {
    let Some(entry) = history_entry(kv, to) else {
        return Err(rejected(
            ErrorKind::NotFound,
            format!(
                "version {to} is not in the configuration history (gtm config history lists what is kept)"
            ),
        ));
    };
    let Some(text) = entry.text else {
        return Err(rejected(
            ErrorKind::NotFound,
            format!(
                "version {to} is in the history without its text (older versions keep only their changes); it cannot be rolled back to"
            ),
        ));
    };
    let config = model::parse_like(&text, Some(current)).map_err(invalid)?;
    let layout = Layout::of(&text, &config);
    Ok(Proposed {
        config,
        text: Splice::whole(text.into_bytes()),
        what: format!("rollback to {to}"),
        version: version + 1,
        layout,
    })
}
