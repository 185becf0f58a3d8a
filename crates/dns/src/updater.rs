//! The seam through which the DNS layer hands a verified RFC 2136 update
//! up to what decides it (the device's replicated state), and the form the
//! update travels in (docs/transfer.md, "Dynamic update"). The answering
//! itself is `update`.

use std::{
    future::Future,
    pin::Pin,
    sync::{
        Arc, OnceLock,
        atomic::{AtomicUsize, Ordering},
    },
    time::Duration,
};

use serde::{Deserialize, Serialize};

pub use hickory_server::proto::op::ResponseCode;

/// Updates waiting for their outcome on one device at once.
pub const MAX_IN_FLIGHT: usize = 64;
/// Records (prerequisites and changes together) one update may carry.
pub const MAX_RECORDS: usize = 300;
/// How long an update waits for its command's outcome before SERVFAIL.
pub const DEADLINE: Duration = Duration::from_secs(30);

/// Class NONE (RFC 2136 §2.4, §2.5).
pub const CLASS_NONE: u16 = 254;
/// Class ANY.
pub const CLASS_ANY: u16 = 255;
/// Class IN.
pub const CLASS_IN: u16 = 1;
/// Type ANY.
pub const TYPE_ANY: u16 = 255;

/// A verified update as the replicated command carries it: names lower
/// case without the final dot, data in zone-file syntax with absolute
/// names. Stored in the Raft log: fields are only ever appended.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Update {
    /// The TSIG key it was signed with (as the cluster keeps its name).
    pub key: String,
    /// The zone section's name.
    pub zone: String,
    pub prerequisites: Vec<UpdateRr>,
    pub updates: Vec<UpdateRr>,
}

/// One record of an update's prerequisite or update section.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct UpdateRr {
    pub name: String,
    pub class: u16,
    pub rtype: u16,
    pub ttl: u32,
    /// `None`: no data (RDLENGTH 0).
    pub data: Option<String>,
}

/// The outcome of an update, as its response code.
pub type Decision = Pin<Box<dyn Future<Output = ResponseCode> + Send>>;

/// Decides verified updates: the device's replicated state does.
pub trait Updater: Send + Sync + 'static {
    /// Applies `update` and answers with its response code. `id` names the
    /// request (its MAC): a retransmission of the same message has the
    /// same, so it is applied once.
    fn update(&self, id: [u8; 16], update: Update) -> Decision;
}

/// Whether (and by what) this device decides updates, and how many wait.
#[derive(Default)]
pub struct Updates {
    serving: OnceLock<Serving>,
    in_flight: AtomicUsize,
}

pub(crate) struct Serving {
    pub(crate) runtime: tokio::runtime::Handle,
    pub(crate) updater: Arc<dyn Updater>,
}

impl std::fmt::Debug for Updates {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Updates")
            .field("serving", &self.serving.get().is_some())
            .field("in_flight", &self.in_flight.load(Ordering::Relaxed))
            .finish()
    }
}

impl Updates {
    /// What decides updates, once the device serves them.
    pub(crate) fn serving(&self) -> Option<&Serving> {
        self.serving.get()
    }

    /// Decides updates from now on with `updater`, on `runtime`. Until
    /// then (and when it is never called) an UPDATE gets NOTIMP. Only the
    /// first call counts.
    pub fn serve(&self, runtime: tokio::runtime::Handle, updater: Arc<dyn Updater>) {
        let _ = self.serving.set(Serving { runtime, updater });
    }

    /// A place among the updates in flight, or `None` when all are taken.
    pub(crate) fn seat(self: &Arc<Self>) -> Option<Seat> {
        let before = self.in_flight.fetch_add(1, Ordering::AcqRel);
        if before >= MAX_IN_FLIGHT {
            self.in_flight.fetch_sub(1, Ordering::AcqRel);
            return None;
        }
        Some(Seat(self.clone()))
    }
}

/// A place among the updates in flight, given back when dropped.
pub(crate) struct Seat(Arc<Updates>);

impl Drop for Seat {
    fn drop(&mut self) {
        self.0.in_flight.fetch_sub(1, Ordering::AcqRel);
    }
}

/// The response code a refusal's message names first (`YXDOMAIN: ...`),
/// as the state machine writes it ([`refusal`]).
pub fn code_of(message: &str) -> Option<ResponseCode> {
    let (name, _) = message.split_once(':')?;
    Some(match name {
        "FORMERR" => ResponseCode::FormErr,
        "SERVFAIL" => ResponseCode::ServFail,
        "NXDOMAIN" => ResponseCode::NXDomain,
        "REFUSED" => ResponseCode::Refused,
        "YXDOMAIN" => ResponseCode::YXDomain,
        "YXRRSET" => ResponseCode::YXRRSet,
        "NXRRSET" => ResponseCode::NXRRSet,
        "NOTAUTH" => ResponseCode::NotAuth,
        "NOTZONE" => ResponseCode::NotZone,
        _ => return None,
    })
}

/// A refusal's message: the response code's name, then why.
pub fn refusal(code: ResponseCode, why: &str) -> String {
    let name = match code {
        ResponseCode::FormErr => "FORMERR",
        ResponseCode::NXDomain => "NXDOMAIN",
        ResponseCode::Refused => "REFUSED",
        ResponseCode::YXDomain => "YXDOMAIN",
        ResponseCode::YXRRSet => "YXRRSET",
        ResponseCode::NXRRSet => "NXRRSET",
        ResponseCode::NotAuth => "NOTAUTH",
        ResponseCode::NotZone => "NOTZONE",
        _ => "SERVFAIL",
    };
    format!("{name}: {why}")
}
