//! Commands: every change to replicated state, as it travels through the
//! Raft log (docs/design-commands.md).
//!
//! A device that receives an operator's request builds a [`Command`] (the
//! intent, never a computed result) and proposes it; every device's state
//! machine ([`crate::machine`]) applies it to the committed state and the
//! proposer gets the [`Outcome`] back. Commands are bincode behind a format
//! byte; outcomes are JSON (they are also kept in the replicated map).

use serde::{Deserialize, Serialize};

use gtm_model::{actor::Actor, drain::DrainTarget, error::ApiError};

/// The format byte in front of every encoded command. A device refuses
/// (rejects, never applies) a command of a format it does not know.
/// Format 2 added [`Command::history_keep`], format 3
/// [`Command::keys`]; formats 1 and 2 are still read.
pub const FORMAT: u8 = 3;

/// A command's id: 16 random bytes, shown as 32 hex digits, chosen by the
/// client that sent the request (`x-gtm-command`, so it can ask what became
/// of a write whose answer it never got) or else by the device that
/// received it. A command delivered twice (a retried forward, a client
/// repeating its id) is applied once; the second delivery gets the first
/// outcome.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct CommandId(pub [u8; 16]);

impl CommandId {
    pub fn random() -> Self {
        Self(gtm_model::random::bytes::<16>().unwrap_or_else(|_| {
            // No /dev/urandom: time and a counter still make ids unique
            // enough for deduplication on this device.
            use std::sync::atomic::{AtomicU64, Ordering};
            static COUNTER: AtomicU64 = AtomicU64::new(0);
            let mut id = [0u8; 16];
            id[..8].copy_from_slice(&gtm_model::clock::now_ms().to_be_bytes());
            id[8..].copy_from_slice(&COUNTER.fetch_add(1, Ordering::Relaxed).to_be_bytes());
            id
        }))
    }
}

/// Text that is not a command id.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("command id \"{0}\": give 32 hex digits")]
pub struct CommandIdError(pub String);

impl std::str::FromStr for CommandId {
    type Err = CommandIdError;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        let bad = || CommandIdError(text.to_string());
        let trimmed = text.trim();
        if trimmed.len() != 32 || !trimmed.is_ascii() {
            return Err(bad());
        }
        let mut id = [0u8; 16];
        for (i, byte) in id.iter_mut().enumerate() {
            let pair = trimmed.get(2 * i..2 * i + 2).ok_or_else(bad)?;
            *byte = u8::from_str_radix(pair, 16).map_err(|_| bad())?;
        }
        Ok(Self(id))
    }
}

/// The header a client names the id of the command its write makes in,
/// so it can ask `GET /api/v1/commands/{id}` what became of a write whose
/// answer it never got.
pub const COMMAND_HEADER: &str = "x-gtm-command";

tokio::task_local! {
    /// The id the client chose for the command its request makes (taken
    /// by the first command made while serving it).
    static CLIENT_ID: std::cell::Cell<Option<CommandId>>;
}

/// Serves a request whose client chose `id` for the command it makes:
/// the first [`Command::new`] within `work` takes it. A request that makes
/// more than one command gives the others ids of their own, so none is
/// taken for a delivery of another.
pub async fn with_client_id<F: std::future::Future>(id: CommandId, work: F) -> F::Output {
    CLIENT_ID.scope(std::cell::Cell::new(Some(id)), work).await
}

impl std::fmt::Display for CommandId {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        for b in self.0 {
            write!(f, "{b:02x}")?;
        }
        Ok(())
    }
}

/// One change to replicated state.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Command {
    pub id: CommandId,
    pub actor: Actor,
    /// When the request was received (ms since the epoch): the time history
    /// shows, the same on every device.
    pub time_ms: u64,
    /// `?version=N`: apply only if the configuration is still at version N
    /// (a compare-and-set checked by the state machine, cluster-wide).
    pub expect_version: Option<u64>,
    pub action: Action,
    /// The configuration versions history keeps, the proposing device's
    /// `history_keep` node setting: carried in the command so every device
    /// prunes alike.
    pub history_keep: u32,
    /// DNSSEC keys made by the proposing device for the signed domains the
    /// configuration this command makes would have with no key (an apply,
    /// edit or rollback that signs a domain): the machine keeps those still
    /// keyless when it applies, so the domain is served signed from its
    /// first answer on every device. Empty for other commands.
    pub keys: Vec<(String, gtm_dns::dnssec::keys::KeyMaterial)>,
}

/// A command of format 2 (before `keys`).
#[derive(Deserialize)]
struct CommandV2 {
    id: CommandId,
    actor: Actor,
    time_ms: u64,
    expect_version: Option<u64>,
    action: Action,
    history_keep: u32,
}

/// A command of format 1 (before `history_keep`).
#[derive(Deserialize)]
struct CommandV1 {
    id: CommandId,
    actor: Actor,
    time_ms: u64,
    expect_version: Option<u64>,
    action: Action,
}

/// What a command does.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum Action {
    /// `gtm cluster init`: the first device's configuration becomes the
    /// cluster's, keeping its version. Only onto a map with none.
    Adopt { text: String, version: u64 },
    /// `gtm config apply`: the whole configuration.
    ApplyConfig { text: String },
    /// A put or delete of one configuration object.
    Edit(Edit),
    /// `gtm config rollback N`: configuration version N again, as a new
    /// version.
    Rollback { version: u64 },
    /// `gtm record drain`/`undrain`, `gtm dc drain`/`undrain`: takes a
    /// target out of answers on every device, or puts it back (an undrain
    /// names exactly an active drain).
    Drain { target: DrainTarget, drained: bool },
    /// `gtm check set`: a manual check's state, `ok` or `error`.
    SetCheck { check: String, state: String },
    /// `gtm record resume`: releases a manual-failback DR hold of one
    /// record (a label `www.example.test/A`) on every device.
    Resume { record: String },
    /// `gtm user ...`, `gtm token ...`: an account made, changed or
    /// removed (docs/access.md). Never moves the configuration version.
    Account(AccountChange),
    /// `gtm schedule add`: an operator action (a drain or undrain, a check
    /// set, a resume) to apply at a time, and its reverse at `until`
    /// (docs/cluster.md, "Scheduled changes"). Appended last: earlier
    /// variants keep their encoding.
    AddSchedule(Box<ScheduleSpec>),
    /// `gtm schedule cancel ID`: a pending schedule never fires (nor its
    /// reverse, when only that is left).
    CancelSchedule { id: u64 },
    /// Proposed by the leader (or a device in no cluster) once a schedule is
    /// due: applies its action (`reverse`: the reverse at `until`) and marks
    /// it fired in the same command, so it fires once. The command's
    /// `time_ms` is the firing time.
    FireSchedule { id: u64, reverse: bool },
    /// A zone's DNSSEC keys (docs/dnssec.md): never in the configuration
    /// text, history or exports.
    Dnssec(DnssecChange),
    /// Proposed by the leader (or a device in no cluster) when the cluster
    /// has no DNS cookie secret, and then every `[cookies] rotate`: the new
    /// secret (made by the proposer, so every device applies the same
    /// bytes) becomes current and the current one previous. `replaces`: the
    /// creation time of the secret it replaces (`None`: there is none), so
    /// of two leaders' proposals in a row only the first rotates.
    RotateCookieSecret {
        secret: gtm_dns::cookies::Secret,
        replaces: Option<u64>,
    },
    /// `gtm tsig add`/`delete`: a TSIG key made or removed (docs/transfer.md).
    /// Never moves the configuration version.
    Tsig(TsigChange),
    /// `gtm schedule add --force`: as [`Action::AddSchedule`], and its
    /// firings are not judged: one that would leave a record with no
    /// answer on some device fires even so. Appended last.
    AddForcedSchedule(Box<ScheduleSpec>),
    /// Proposed by the leader instead of [`Action::FireSchedule`] when a
    /// due schedule is not forced and its firing would leave a record with
    /// no answer on some device (`gtm_node::judge`): the schedule is
    /// marked skipped with `why`, a warning on every device, and nothing
    /// else changes. Appended last.
    SkipSchedule { id: u64, reverse: bool, why: String },
    /// `POST /api/v1/checks/{name}/push`: a push check instance's report
    /// (docs/health.md, "Inputs"). Appended last.
    Push {
        check: String,
        address: Option<std::net::IpAddr>,
        ok: bool,
        reason: String,
    },
    /// `POST /api/v1/inputs/alertmanager`: alerts an Alertmanager reported
    /// firing or resolved. Appended last.
    Alerts { alerts: Vec<AlertReport> },
    /// An RFC 2136 dynamic update a device received, signed with a TSIG
    /// key of the cluster (docs/transfer.md, "Dynamic update"): its
    /// prerequisites judged and its changes made to the committed
    /// configuration, as a new version, or refused whole. Appended last.
    Update(Box<gtm_dns::update::Update>),
    /// A zone transferred in from a domain's primary (docs/transfer.md,
    /// "Transfer in"): its records replace the domain's transferred ones,
    /// its SOA fields, TTL and apex NS set become the domain's, as a new
    /// version, or refused whole. Appended last.
    Transfer(Box<Transferred>),
    /// `gtm domain promote NAME`: a domain transferred in keeps what it
    /// serves as its own records, and no longer has a primary. Appended
    /// last.
    Promote { domain: String },
}

/// A zone as a transfer from a domain's primary gave it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Transferred {
    /// The domain, as the configuration names it.
    pub domain: String,
    /// The primary's address, as the configuration gave it when the
    /// transfer started: a domain whose primary changed since refuses it.
    pub primary: String,
    /// The primary's SOA serial of the zone.
    pub serial: u32,
    /// The zone as a master file (one record per line, absolute names).
    pub zone: String,
}

/// One alert of an Alertmanager's notification.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct AlertReport {
    pub fingerprint: String,
    pub firing: bool,
    pub labels: std::collections::BTreeMap<String, String>,
    pub summary: String,
}

/// A change to a zone's DNSSEC keys. Keys are made by the device that
/// proposes the change, so every device applies the same key.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum DnssecChange {
    /// The first key of signed domains (proposed by the leader for every
    /// domain with `dnssec = true` and no key, in one command so the
    /// answers are signed again once): refused, whole, when one of them
    /// has a key.
    AddKeys {
        keys: Vec<(String, gtm_dns::dnssec::keys::KeyMaterial)>,
    },
    /// `gtm domain dnssec rollover NAME STEP`: one step of a key rollover
    /// (docs/dnssec.md), refused before its wait is over.
    Rollover { domain: String, step: RolloverStep },
}

/// The steps of a rollover of a domain's combined key.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum RolloverStep {
    /// A new key (made by the device receiving the request) joins the
    /// DNSKEY set and CDS/CDNSKEY, not signing yet.
    Publish {
        key: gtm_dns::dnssec::keys::KeyMaterial,
    },
    /// The published key signs; the old one is retired (still in the
    /// DNSKEY set, no longer in CDS/CDNSKEY).
    Swap,
    /// The retired key leaves the DNSKEY set.
    Retire,
}

/// A change to the cluster's TSIG keys. A new key's secret is generated by
/// the device that received the request and travels in the command, so
/// every device holds the same bytes; `Debug` never shows it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum TsigChange {
    /// Creates a key; refused when one of that name exists.
    Add {
        name: String,
        algorithm: String,
        secret: gtm_dns::tsig::Secret,
    },
    /// Removes a key; refused while a domain's secondaries name it.
    Delete { name: String },
}

/// A scheduled operator action as asked for; times in ms since the epoch
/// (UTC), computed by the receiving device.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, schemars::JsonSchema)]
pub struct ScheduleSpec {
    pub at_ms: u64,
    #[serde(default)]
    pub until_ms: Option<u64>,
    /// A `Drain`, `SetCheck` or `Resume` action.
    #[schemars(with = "serde_json::Value")]
    pub action: Action,
}

/// A change to the cluster's accounts. Secrets travel only as digests,
/// made by the device that received the request.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum AccountChange {
    /// Creates a user, or replaces its role and (when given) its password.
    PutUser {
        name: String,
        role: crate::access::Role,
        /// argon2id PHC string; `None` keeps the user's password (an
        /// existing user only).
        password: Option<String>,
    },
    DeleteUser {
        name: String,
    },
    /// Creates a token; refused when one of that name exists.
    PutToken {
        name: String,
        role: crate::access::Role,
        digest: String,
    },
    DeleteToken {
        name: String,
    },
}

/// The configuration lists whose items have a unique name.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Kind {
    Datacenter,
    Check,
    Scenario,
    Service,
    Domain,
    // Appended last: stored commands name kinds by position.
    Region,
    View,
    Notifier,
}

impl Kind {
    pub fn noun(self) -> &'static str {
        match self {
            Self::Datacenter => "datacenter",
            Self::Check => "check",
            Self::Scenario => "scenario",
            Self::Service => "service",
            Self::Domain => "domain",
            Self::Region => "region",
            Self::View => "view",
            Self::Notifier => "notifier",
        }
    }
}

impl Edit {
    /// The edit in words: `write check web`, `delete record
    /// www.example.test/A`, `write address 192.0.2.1 of
    /// www.example.test/A`.
    pub fn describe(&self) -> String {
        match self {
            Self::Put { kind, name, .. } | Self::Patch { kind, name, .. } => {
                format!("write {} {name}", kind.noun())
            }
            Self::Delete { kind, name } => format!("delete {} {name}", kind.noun()),
            Self::PutRecord {
                domain,
                name,
                rtype,
                ..
            }
            | Self::PatchRecord {
                domain,
                name,
                rtype,
                ..
            } => format!("write record {}", record_of(domain, name, rtype)),
            Self::DeleteRecord {
                domain,
                name,
                rtype,
            } => format!("delete record {}", record_of(domain, name, rtype)),
            Self::PutAddress {
                domain,
                name,
                rtype,
                key,
                ..
            }
            | Self::PatchAddress {
                domain,
                name,
                rtype,
                key,
                ..
            } => format!("write address {key} of {}", record_of(domain, name, rtype)),
            Self::DeleteAddress {
                domain,
                name,
                rtype,
                key,
            } => format!("delete address {key} of {}", record_of(domain, name, rtype)),
        }
    }
}

/// `www.example.test/A` of a record named relative to its domain (`@`:
/// the apex).
fn record_of(domain: &str, name: &str, rtype: &str) -> String {
    let domain = domain.trim_end_matches('.');
    let owner = match name.trim_end_matches('.') {
        "" | "@" => domain.to_string(),
        n if n.eq_ignore_ascii_case(domain)
            || n.to_ascii_lowercase()
                .ends_with(&format!(".{}", domain.to_ascii_lowercase())) =>
        {
            n.to_string()
        }
        n => format!("{n}.{domain}"),
    };
    format!(
        "{}/{}",
        owner.to_ascii_lowercase(),
        rtype.to_ascii_uppercase()
    )
}

/// A put or delete of one object. Bodies are the object as JSON, already
/// checked for shape by the receiving device (a body that does not decode is
/// a 400 there); the state machine decodes it again.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum Edit {
    /// Creates or replaces; `keep_children`: a domain body without
    /// `record` keeps the domain's records.
    Put {
        kind: Kind,
        name: String,
        json: String,
        keep_children: bool,
    },
    Delete {
        kind: Kind,
        name: String,
    },
    /// `keep_addresses`: a body without `addresses` keeps the record's.
    PutRecord {
        domain: String,
        name: String,
        rtype: String,
        json: String,
        keep_addresses: bool,
    },
    DeleteRecord {
        domain: String,
        name: String,
        rtype: String,
    },
    /// `key`: the address's IP or, in a CNAME record, its target.
    PutAddress {
        domain: String,
        name: String,
        rtype: String,
        key: String,
        json: String,
    },
    DeleteAddress {
        domain: String,
        name: String,
        rtype: String,
        key: String,
    },
    // Variants are only ever added at the end: stored commands name them by
    // position.
    /// Merges `json` (some of the object's keys, as a JSON object) into the
    /// object: keys given replace, keys absent are kept, `null` resets a
    /// key to its default (RFC 7396). Creates the object from `json` when
    /// there is none.
    Patch {
        kind: Kind,
        name: String,
        json: String,
    },
    /// [`Edit::Patch`] of a record.
    PatchRecord {
        domain: String,
        name: String,
        rtype: String,
        json: String,
    },
    /// [`Edit::Patch`] of one address of a record.
    PatchAddress {
        domain: String,
        name: String,
        rtype: String,
        key: String,
        json: String,
    },
}

/// What became of a command: the same on every device.
#[derive(Debug, Clone, Serialize, Deserialize)]
#[serde(rename_all = "lowercase", tag = "outcome")]
pub enum Outcome {
    /// Committed and applied. `changed` is false for a command that changed
    /// nothing (a retried apply of what is already applied).
    Applied {
        version: u64,
        /// The log index that applied it: a device waits until it has
        /// installed the state up to here before it answers.
        index: u64,
        changed: bool,
        changes: Vec<String>,
    },
    /// Refused by the state machine: nothing changed anywhere, and nothing
    /// ever will for this command. The error as the API gives it.
    Rejected(ApiError),
}

/// Why a command could not be encoded, or bytes could not be read as one.
#[derive(Debug, thiserror::Error)]
pub enum CommandError {
    #[error("encoding a command: {0}")]
    Encode(bincode::error::EncodeError),
    /// The format byte in front is one this device does not read.
    #[error(
        "the command has format {found}; this device reads format {FORMAT} (a newer gtm proposed it?)"
    )]
    Format { found: u8 },
    #[error("the command is empty")]
    Empty,
    #[error("the command does not decode: {0}")]
    Decode(bincode::error::DecodeError),
    /// It decoded from fewer bytes than it was given.
    #[error("the command has {trailing} trailing bytes")]
    Trailing { trailing: usize },
}

/// Why an outcome a state machine gave could not be read.
#[derive(Debug, thiserror::Error)]
#[error("unreadable outcome: {0}")]
pub struct OutcomeError(serde_json::Error);

impl Command {
    /// A command received now on `device` from `user`.
    pub fn new(actor: Actor, expect_version: Option<u64>, action: Action) -> Self {
        let chosen = CLIENT_ID.try_with(|id| id.take()).ok().flatten();
        Self {
            id: chosen.unwrap_or_else(CommandId::random),
            actor,
            time_ms: gtm_model::clock::now_ms(),
            expect_version,
            action,
            history_keep: gtm_model::node::HISTORY_KEPT as u32,
            keys: Vec::new(),
        }
    }

    pub fn encode(&self) -> Result<Vec<u8>, CommandError> {
        // Room for a configuration's text from the start: grown by
        // doubling, a 6 MB text's command took 11 MB.
        let text = match &self.action {
            Action::ApplyConfig { text } | Action::Adopt { text, .. } => text.len(),
            _ => 0,
        };
        let mut bytes = Vec::with_capacity(text + 512);
        bytes.push(FORMAT);
        bincode::serde::encode_into_std_write(self, &mut bytes, bincode::config::standard())
            .map_err(CommandError::Encode)?;
        Ok(bytes)
    }

    pub fn decode(bytes: &[u8]) -> Result<Self, CommandError> {
        match bytes.split_first() {
            Some((&FORMAT, rest)) => decode_exact(rest),
            Some((2, rest)) => {
                let v2: CommandV2 = decode_exact(rest)?;
                Ok(Self {
                    id: v2.id,
                    actor: v2.actor,
                    time_ms: v2.time_ms,
                    expect_version: v2.expect_version,
                    action: v2.action,
                    history_keep: v2.history_keep,
                    keys: Vec::new(),
                })
            }
            Some((1, rest)) => {
                let v1: CommandV1 = decode_exact(rest)?;
                Ok(Self {
                    id: v1.id,
                    actor: v1.actor,
                    time_ms: v1.time_ms,
                    expect_version: v1.expect_version,
                    action: v1.action,
                    history_keep: gtm_model::node::HISTORY_KEPT as u32,
                    keys: Vec::new(),
                })
            }
            Some((&found, _)) => Err(CommandError::Format { found }),
            None => Err(CommandError::Empty),
        }
    }
}

/// Bincode of one value that fills `bytes` exactly.
fn decode_exact<T: serde::de::DeserializeOwned>(bytes: &[u8]) -> Result<T, CommandError> {
    let config = bincode::config::standard().with_limit::<{ 256 << 20 }>();
    let (value, read) =
        bincode::serde::decode_from_slice(bytes, config).map_err(CommandError::Decode)?;
    if read != bytes.len() {
        return Err(CommandError::Trailing {
            trailing: bytes.len() - read,
        });
    }
    Ok(value)
}

impl Outcome {
    pub fn encode(&self) -> Vec<u8> {
        serde_json::to_vec(self).unwrap_or_default()
    }

    pub fn decode(bytes: &[u8]) -> Result<Self, OutcomeError> {
        serde_json::from_slice(bytes).map_err(OutcomeError)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn commands_round_trip_and_unknown_formats_are_refused() {
        let command = Command::new(
            Actor {
                user: "admin".into(),
                device: "gtm1".into(),
            },
            Some(3),
            Action::Edit(Edit::Put {
                kind: Kind::Check,
                name: "web".into(),
                json: r#"{"name":"web","type":"http"}"#.into(),
                keep_children: false,
            }),
        );
        let bytes = command.encode().unwrap();
        assert_eq!(Command::decode(&bytes).unwrap(), command);
        let mut newer = bytes.clone();
        newer[0] = FORMAT + 1;
        assert!(
            Command::decode(&newer)
                .unwrap_err()
                .to_string()
                .contains(&format!("format {}", FORMAT + 1))
        );
        assert!(Command::decode(&[]).is_err());
        assert!(Command::decode(&bytes[..bytes.len() - 1]).is_err());
    }

    /// A stored command names its object kind by position: a kind added
    /// later takes the next one and the others keep theirs.
    #[test]
    fn object_kinds_keep_their_stored_positions() {
        let kinds = [
            Kind::Datacenter,
            Kind::Check,
            Kind::Scenario,
            Kind::Service,
            Kind::Domain,
            Kind::Region,
            Kind::View,
        ];
        for (i, kind) in kinds.into_iter().enumerate() {
            let bytes = bincode::serde::encode_to_vec(kind, bincode::config::standard()).unwrap();
            assert_eq!(bytes, [i as u8], "{}", kind.noun());
        }
    }

    #[test]
    fn format_1_commands_still_decode_with_the_default_history_length() {
        #[derive(Serialize)]
        struct V1<'a> {
            id: CommandId,
            actor: &'a Actor,
            time_ms: u64,
            expect_version: Option<u64>,
            action: &'a Action,
        }
        let mut command = Command::new(Actor::default(), None, Action::Rollback { version: 4 });
        command.history_keep = 7;
        let mut bytes = vec![1u8];
        let v1 = V1 {
            id: command.id,
            actor: &command.actor,
            time_ms: command.time_ms,
            expect_version: None,
            action: &command.action,
        };
        bincode::serde::encode_into_std_write(&v1, &mut bytes, bincode::config::standard())
            .unwrap();
        let decoded = Command::decode(&bytes).unwrap();
        assert_eq!(decoded.action, command.action);
        assert_eq!(decoded.history_keep, gtm_model::node::HISTORY_KEPT as u32);
    }

    #[test]
    fn format_2_commands_still_decode_with_no_keys() {
        #[derive(Serialize)]
        struct V2<'a> {
            id: CommandId,
            actor: &'a Actor,
            time_ms: u64,
            expect_version: Option<u64>,
            action: &'a Action,
            history_keep: u32,
        }
        let command = Command::new(Actor::default(), Some(2), Action::Rollback { version: 1 });
        let mut bytes = vec![2u8];
        let v2 = V2 {
            id: command.id,
            actor: &command.actor,
            time_ms: command.time_ms,
            expect_version: Some(2),
            action: &command.action,
            history_keep: 9,
        };
        bincode::serde::encode_into_std_write(&v2, &mut bytes, bincode::config::standard())
            .unwrap();
        let decoded = Command::decode(&bytes).unwrap();
        assert_eq!(decoded.action, command.action);
        assert_eq!(decoded.history_keep, 9);
        assert!(decoded.keys.is_empty());
    }

    #[tokio::test]
    async fn a_client_id_goes_to_the_first_command_of_its_request_only() {
        let id: CommandId = "00112233445566778899aabbccddeeff".parse().unwrap();
        assert_eq!(id.to_string(), "00112233445566778899aabbccddeeff");
        for bad in [
            "",
            "0011",
            "00112233445566778899aabbccddeegg",
            "é0112233445566778899aabbccddeef",
        ] {
            assert!(bad.parse::<CommandId>().is_err(), "{bad}");
        }
        let make = || Command::new(Actor::default(), None, Action::Rollback { version: 1 });
        let (first, second) = with_client_id(id, async { (make(), make()) }).await;
        assert_eq!(first.id, id);
        assert_ne!(second.id, id);
        assert_ne!(make().id, id, "outside its request");
    }
}
