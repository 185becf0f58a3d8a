//! DNSSEC key commands in the state machine (docs/dnssec.md). A key
//! command does not move the configuration version; its GTM Logs line
//! names the key by its tag, never its bytes.

use gtm_cluster::Map;

use super::{Change, operator, rejected};
use crate::command::{Action, Command, DnssecChange, Edit, Kind, Outcome, RolloverStep};
use gtm_cluster::Write;
use gtm_dns::dnssec::keys::{
    KeyMaterial, KeyState, Published, ZoneKey, ZoneKeys, keyring_of, map_key,
};
use gtm_model::{Config, error::ErrorKind};

/// Applies a DNSSEC command; `None` for other commands.
pub(super) fn run(
    kv: &Map,
    index: u64,
    version: u64,
    current: &Config,
    command: &Command,
) -> Option<Change> {
    let Action::Dnssec(change) = &command.action else {
        return None;
    };
    Some(match change {
        DnssecChange::AddKeys { keys } => add_keys(kv, index, version, current, command, keys),
        DnssecChange::Rollover { domain, step } => {
            rollover(kv, index, version, current, command, domain, step)
        }
    })
}

/// The applied outcome of a key command: `writes`, a GTM Logs line per
/// `lines` entry on `object`s, and the operator notes.
fn applied(
    kv: &Map,
    index: u64,
    version: u64,
    command: &Command,
    mut writes: Vec<Write>,
    lines: Vec<(String, String)>,
) -> Change {
    let mut notes = operator::state_of(kv);
    for (object, line) in &lines {
        operator::note(&mut notes, object, format!("{line} ({})", command.actor));
    }
    writes.push(operator::put(&notes));
    Change {
        writes,
        outcome: Outcome::Applied {
            version,
            index,
            changed: true,
            changes: lines.into_iter().map(|(_, l)| l).collect(),
        },
    }
}

/// The signed domain `domain` names in `current`: its name (lower-case, no
/// final dot), its apex and the domain; or why not.
fn signed_domain<'c>(
    current: &'c Config,
    domain: &str,
) -> Result<
    (
        String,
        hickory_proto::rr::Name,
        &'c gtm_model::config::Domain,
    ),
    Change,
> {
    let wanted = domain.trim_end_matches('.').to_ascii_lowercase();
    let Some(d) = current
        .domains
        .iter()
        .find(|d| d.name.trim_end_matches('.').eq_ignore_ascii_case(&wanted))
    else {
        return Err(rejected(
            ErrorKind::NotFound,
            format!("no domain named \"{wanted}\""),
        ));
    };
    if d.dnssec != Some(true) {
        return Err(rejected(
            ErrorKind::BadRequest,
            format!("domain \"{wanted}\" is not signed (dnssec = true makes it so)"),
        ));
    }
    let apex = hickory_proto::rr::Name::from_ascii(format!("{wanted}."))
        .map_err(|e| rejected(ErrorKind::BadRequest, e.to_string()))?;
    Ok((wanted, apex, d))
}

fn tag_of(key: &KeyMaterial, apex: &hickory_proto::rr::Name) -> Result<u16, Change> {
    // A key that does not sign here would not sign anywhere.
    Published::of(key, apex)
        .map(|p| p.tag)
        .map_err(|e| rejected(ErrorKind::BadRequest, e.to_string()))
}

fn add_keys(
    kv: &Map,
    index: u64,
    version: u64,
    current: &Config,
    command: &Command,
    keys: &[(String, KeyMaterial)],
) -> Change {
    let kept = keyring_of(kv);
    let mut writes = Vec::new();
    let mut lines = Vec::new();
    for (domain, key) in keys {
        let (wanted, apex, _) = match signed_domain(current, domain) {
            Ok(found) => found,
            Err(refused) => return refused,
        };
        if kept.contains_key(&wanted) || lines.iter().any(|(o, _)| *o == format!("domain {wanted}"))
        {
            return rejected(
                ErrorKind::Conflict,
                format!("domain \"{wanted}\" has a key already"),
            );
        }
        let tag = match tag_of(key, &apex) {
            Ok(t) => t,
            Err(refused) => return refused,
        };
        lines.push((
            format!("domain {wanted}"),
            format!(
                "DNSSEC key {tag} (algorithm {}) made for {wanted}",
                key.algorithm.number()
            ),
        ));
        writes.push(put_keys(
            &wanted,
            &ZoneKeys::first(key.clone(), command.time_ms),
        ));
    }
    if writes.is_empty() {
        return rejected(ErrorKind::BadRequest, "no key to add");
    }
    applied(kv, index, version, command, writes, lines)
}

/// The keys a configuration command brought ([`Command::keys`]) for the
/// domains `new` signs that have no key committed: their writes, and a
/// GTM Logs line per key on `domain NAME`. A key for a domain `new` does
/// not sign, or that has a key already (made by a command applied in
/// between), is left out: the command still applies.
pub(super) fn first_keys(
    kv: &Map,
    new: &Config,
    command: &Command,
) -> (Vec<Write>, Vec<(String, String)>) {
    if command.keys.is_empty() {
        return (Vec::new(), Vec::new());
    }
    let kept = keyring_of(kv);
    let mut writes = Vec::new();
    let mut lines: Vec<(String, String)> = Vec::new();
    for (domain, key) in &command.keys {
        let Ok((wanted, apex, _)) = signed_domain(new, domain) else {
            continue;
        };
        let object = format!("domain {wanted}");
        if kept.contains_key(&wanted) || lines.iter().any(|(o, _)| *o == object) {
            continue;
        }
        let Ok(tag) = tag_of(key, &apex) else {
            continue;
        };
        lines.push((
            object,
            format!(
                "DNSSEC key {tag} (algorithm {}) made for {wanted}",
                key.algorithm.number()
            ),
        ));
        writes.push(put_keys(
            &wanted,
            &ZoneKeys::first(key.clone(), command.time_ms),
        ));
    }
    (writes, lines)
}

impl super::GtmMachine {
    /// The domains the configuration `action` makes would sign with no key
    /// committed in `kv`, with their algorithm: the proposing device makes
    /// their keys and sends them in the command ([`Command::keys`]). Empty
    /// for an action that makes no configuration or signs no new domain,
    /// and when the committed configuration or the text does not parse
    /// (the command is refused then, or the leader's `dnssec` worker makes
    /// the key after all).
    pub fn keyless_after(
        &self,
        kv: &Map,
        action: &Action,
    ) -> Vec<(String, gtm_model::config::KeyAlgorithm)> {
        let signed = |config: &Config| -> Vec<(String, gtm_model::config::KeyAlgorithm)> {
            config
                .domains
                .iter()
                .filter(|d| d.dnssec == Some(true))
                .map(|d| {
                    (
                        d.name.trim_end_matches('.').to_ascii_lowercase(),
                        d.dnssec_algorithm.unwrap_or_default(),
                    )
                })
                .collect()
        };
        let wanted = match action {
            Action::ApplyConfig { text } | Action::Adopt { text, .. } => {
                match self.offered_config(text, signed) {
                    Some(found) => found,
                    None => match gtm_model::parse(text) {
                        Ok(config) => signed(&config),
                        Err(_) => return Vec::new(),
                    },
                }
            }
            // Only a domain's own put or patch can sign it.
            Action::Edit(
                edit @ (Edit::Put {
                    kind: Kind::Domain,
                    name: domain,
                    ..
                }
                | Edit::Patch {
                    kind: Kind::Domain,
                    name: domain,
                    ..
                }),
            ) => {
                let Ok(current) = self.peek_current(kv) else {
                    return Vec::new();
                };
                let mut config = (*current).clone();
                if super::edit::apply(&mut config, edit).is_err() {
                    return Vec::new();
                }
                let domain = domain.trim_end_matches('.').to_ascii_lowercase();
                signed(&config)
                    .into_iter()
                    .filter(|(d, _)| *d == domain)
                    .collect()
            }
            Action::Rollback { version } => {
                let Some(text) = super::history::history_entry(kv, *version).and_then(|e| e.text)
                else {
                    return Vec::new();
                };
                match gtm_model::parse(&text) {
                    Ok(config) => signed(&config),
                    Err(_) => return Vec::new(),
                }
            }
            _ => return Vec::new(),
        };
        if wanted.is_empty() {
            return wanted;
        }
        let kept = keyring_of(kv);
        wanted
            .into_iter()
            .filter(|(d, _)| !kept.contains_key(d))
            .collect()
    }
}

fn put_keys(domain: &str, keys: &ZoneKeys) -> Write {
    Write::Put {
        key: map_key(domain),
        value: serde_json::to_vec(keys).unwrap_or_default(),
    }
}

/// The longest TTL of a domain's records (and of its SOA, NS and DNSKEY,
/// which take the domain's): how long a cache may hold what a key signed.
fn longest_ttl(d: &gtm_model::config::Domain) -> u64 {
    let domain = d.ttl.unwrap_or(gtm_model::compile::DEFAULT_TTL);
    d.records
        .iter()
        .map(|r| r.ttl.unwrap_or(domain))
        .chain([domain])
        .max()
        .map_or(0, u64::from)
}

fn rollover(
    kv: &Map,
    index: u64,
    version: u64,
    current: &Config,
    command: &Command,
    domain: &str,
    step: &RolloverStep,
) -> Change {
    let (wanted, apex, d) = match signed_domain(current, domain) {
        Ok(found) => found,
        Err(refused) => return refused,
    };
    let Some(mut keys) = keyring_of(kv).remove(&wanted) else {
        return rejected(
            ErrorKind::NotFound,
            format!("domain \"{wanted}\" has no key yet"),
        );
    };
    let object = format!("domain {wanted}");
    let dnskey_ttl = u64::from(d.ttl.unwrap_or(gtm_model::compile::DEFAULT_TTL));
    let not_yet = |what: &str, since_ms: u64, wait_s: u64| {
        let at = since_ms + wait_s * 1000;
        (command.time_ms < at).then(|| {
            rejected(
                ErrorKind::Conflict,
                format!(
                    "{what} of {wanted} is allowed from {} ({wait_s} s after the last step: caches may hold the old state that long), not before",
                    gtm_model::when::iso_ms(at)
                ),
            )
        })
    };
    let in_rollover = keys.keys.iter().any(|k| k.state != KeyState::Active);
    let line = match step {
        RolloverStep::Publish { key } => {
            if in_rollover {
                return rejected(
                    ErrorKind::Conflict,
                    format!(
                        "a rollover of {wanted} is under way: finish it (swap, then retire) first"
                    ),
                );
            }
            let tag = match tag_of(key, &apex) {
                Ok(t) => t,
                Err(refused) => return refused,
            };
            keys.keys.push(ZoneKey {
                key: key.clone(),
                state: KeyState::Published,
                since_ms: command.time_ms,
            });
            format!("DNSSEC key {tag} published for {wanted}: add its DS at the parent, then swap")
        }
        RolloverStep::Swap => {
            let Some(new) = keys.in_state(KeyState::Published).cloned() else {
                return rejected(
                    ErrorKind::Conflict,
                    format!("{wanted} has no published key to swap to (publish one first)"),
                );
            };
            if let Some(refused) = not_yet("the swap", new.since_ms, dnskey_ttl) {
                return refused;
            }
            for k in &mut keys.keys {
                k.state = match k.state {
                    KeyState::Published => KeyState::Active,
                    KeyState::Active => KeyState::Retired,
                    KeyState::Retired => KeyState::Retired,
                };
                k.since_ms = command.time_ms;
            }
            let tag = tag_of(&new.key, &apex).unwrap_or_default();
            format!(
                "DNSSEC key {tag} signs {wanted}; the old key is retired: remove its DS at the parent, then retire"
            )
        }
        RolloverStep::Retire => {
            let Some(old) = keys.in_state(KeyState::Retired).cloned() else {
                return rejected(
                    ErrorKind::Conflict,
                    format!("{wanted} has no retired key (swap first)"),
                );
            };
            if let Some(refused) = not_yet("retiring the old key", old.since_ms, longest_ttl(d)) {
                return refused;
            }
            keys.keys.retain(|k| k.state != KeyState::Retired);
            let tag = tag_of(&old.key, &apex).unwrap_or_default();
            format!("DNSSEC key {tag} removed from {wanted}: the rollover is done")
        }
    };
    applied(
        kv,
        index,
        version,
        command,
        vec![put_keys(&wanted, &keys)],
        vec![(object, line)],
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{
        command::Command,
        machine::{CONFIG_KEY, GtmMachine},
    };
    use gtm_dns::dnssec::keys::KeyMaterial;
    use gtm_model::{actor::Actor, config::KeyAlgorithm};

    fn apply(machine: &GtmMachine, kv: &mut Map, action: Action) -> Outcome {
        apply_at(machine, kv, action, gtm_model::clock::now_ms())
    }

    fn apply_at(machine: &GtmMachine, kv: &mut Map, action: Action, time_ms: u64) -> Outcome {
        let mut command = Command::new(Actor::default(), None, action);
        command.time_ms = time_ms;
        crate::machine::apply_for_test(machine, kv, 1, &command)
    }

    #[test]
    fn a_signed_domain_gets_one_key_and_the_key_stays_out_of_the_configuration() {
        let machine = GtmMachine::default();
        let mut kv = Map::new();
        kv.insert(
            CONFIG_KEY.to_string(),
            b"[[domain]]\nname = \"example.test\"\ndnssec = true\n\n[[domain]]\nname = \"plain.test\"\n\n[[domain]]\nname = \"new.test\"\ndnssec = true\n"
                .to_vec()
                .into(),
        );
        let add = |domain: &str| {
            Action::Dnssec(DnssecChange::AddKeys {
                keys: vec![(
                    domain.into(),
                    KeyMaterial::generate(KeyAlgorithm::Ecdsap256sha256, 1).unwrap(),
                )],
            })
        };
        assert!(matches!(
            apply(&machine, &mut kv, add("Example.Test.")),
            Outcome::Applied { changed: true, .. }
        ));
        let keys = keyring_of(&kv);
        assert_eq!(keys.len(), 1);
        assert!(keys.contains_key("example.test"));
        // A second key is refused: the first one's DS may be at the parent.
        let Outcome::Rejected(e) = apply(&machine, &mut kv, add("example.test")) else {
            panic!("a second key was taken");
        };
        assert_eq!(e.error, ErrorKind::Conflict);
        let Outcome::Rejected(e) = apply(&machine, &mut kv, add("plain.test")) else {
            panic!("an unsigned domain took a key");
        };
        assert_eq!(e.error, ErrorKind::BadRequest);
        let Outcome::Rejected(e) = apply(&machine, &mut kv, add("other.test")) else {
            panic!("an unknown domain took a key");
        };
        assert_eq!(e.error, ErrorKind::NotFound);
        // One refused key refuses the whole command.
        let mut both = add("new.test");
        if let (
            Action::Dnssec(DnssecChange::AddKeys { keys }),
            Action::Dnssec(DnssecChange::AddKeys { keys: more }),
        ) = (&mut both, add("plain.test"))
        {
            keys.extend(more);
        }
        assert!(matches!(
            apply(&machine, &mut kv, both),
            Outcome::Rejected(_)
        ));
        assert_eq!(keyring_of(&kv).len(), 1);
        // The configuration text never holds the key.
        let text = String::from_utf8(kv[CONFIG_KEY].to_vec()).unwrap();
        assert!(!text.contains("pkcs8"));
    }

    #[test]
    fn a_rollover_publishes_swaps_and_retires_each_after_its_wait() {
        use crate::command::RolloverStep;
        let machine = GtmMachine::default();
        let mut kv = Map::new();
        kv.insert(
            CONFIG_KEY.to_string(),
            b"[[domain]]\nname = \"example.test\"\nttl = 60\ndnssec = true\n\n[[domain.record]]\nname = \"www\"\ntype = \"TXT\"\nttl = 300\nvalues = [\"\\\"x\\\"\"]\n"
                .to_vec()
                .into(),
        );
        let key = || KeyMaterial::generate(KeyAlgorithm::Ecdsap256sha256, 1).unwrap();
        let t0 = 1_000_000;
        let first = Action::Dnssec(DnssecChange::AddKeys {
            keys: vec![("example.test".into(), key())],
        });
        assert!(matches!(
            apply_at(&machine, &mut kv, first, t0),
            Outcome::Applied { .. }
        ));
        let step = |step| {
            Action::Dnssec(DnssecChange::Rollover {
                domain: "example.test".into(),
                step,
            })
        };
        let states = |kv: &Map| -> Vec<KeyState> {
            keyring_of(kv)["example.test"]
                .keys
                .iter()
                .map(|k| k.state)
                .collect()
        };
        let refused = |o: Outcome| match o {
            Outcome::Rejected(e) => e.message,
            Outcome::Applied { .. } => panic!("applied"),
        };
        // Nothing to swap or retire before a publish.
        refused(apply_at(&machine, &mut kv, step(RolloverStep::Swap), t0));
        refused(apply_at(&machine, &mut kv, step(RolloverStep::Retire), t0));
        let publish = step(RolloverStep::Publish { key: key() });
        assert!(matches!(
            apply_at(&machine, &mut kv, publish, t0),
            Outcome::Applied { .. }
        ));
        assert_eq!(states(&kv), [KeyState::Active, KeyState::Published]);
        // One rollover at a time.
        let again = step(RolloverStep::Publish { key: key() });
        refused(apply_at(&machine, &mut kv, again, t0));
        // The swap waits the DNSKEY TTL (the domain's, 60 s) and says until when.
        let early = refused(apply_at(
            &machine,
            &mut kv,
            step(RolloverStep::Swap),
            t0 + 59_000,
        ));
        assert!(early.contains("60 s"), "{early}");
        assert!(matches!(
            apply_at(&machine, &mut kv, step(RolloverStep::Swap), t0 + 60_000),
            Outcome::Applied { .. }
        ));
        assert_eq!(states(&kv), [KeyState::Retired, KeyState::Active]);
        // Retiring waits the longest TTL of the zone (the TXT's 300 s).
        refused(apply_at(
            &machine,
            &mut kv,
            step(RolloverStep::Retire),
            t0 + 359_000,
        ));
        assert!(matches!(
            apply_at(&machine, &mut kv, step(RolloverStep::Retire), t0 + 360_000),
            Outcome::Applied { .. }
        ));
        assert_eq!(states(&kv), [KeyState::Active]);
    }
}
