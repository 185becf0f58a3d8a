//! The `notify` worker (RFC 1996, docs/transfer.md): tells every secondary
//! of a zone about each new serial, with a TSIG-signed NOTIFY over UDP,
//! retried with backoff until the secondary answers.
//!
//! It also moves the serial when health moves a steered record's default
//! answer (what a secondary serves): four times a second it compares each
//! transferred zone's default answers with what it saw, and on a change
//! gives the zone's SOA a new serial ([`super::xfr::next_serial`]). A new
//! configuration brings a serial with the snapshot it installs, and the
//! worker's first look at that snapshot gives another: answers that
//! changed between the build and that look are covered too. With each
//! serial it gives, it records the zone's view in the transfer journal
//! (`xfr::journal`), which AXFR and IXFR serve.
//!
//! Its state per secondary is in `gtm status` ([`NotifyStatus`]).

use std::{
    collections::HashMap,
    net::{IpAddr, SocketAddr},
    sync::Arc,
    time::{Duration, Instant},
};

use hickory_server::proto::{
    op::{Message, MessageType, OpCode, Query, ResponseCode},
    rr::{Name, RData, RecordType, TSigVerifier},
};
use tokio::net::UdpSocket;
use tokio_util::sync::CancellationToken;

use super::{
    handler::DnsState,
    snapshot::{RrsetAnswer, RrsetSlot, Snapshot, hash_bytes, static_answer},
    tsig,
    xfr::{self, NotifyStatus, journal::Journal},
};
use gtm_model::value::Value;

/// How often the worker looks at the zones and the due NOTIFYs.
const LOOK_EVERY: Duration = Duration::from_millis(250);
/// The first retry waits this long; each next one twice as long.
const FIRST_RETRY: Duration = Duration::from_secs(1);
/// The longest wait between two tries.
const MAX_RETRY: Duration = Duration::from_secs(60);
/// Tries without an answer before a secondary shows as `failing`.
const FAILING_AFTER: u32 = 3;

/// What the worker knows of one transferred zone.
struct Zone {
    /// The snapshot it was read from (its address: a new one is a new
    /// configuration).
    snapshot: usize,
    /// The zone's steered records.
    steered: Vec<Arc<RrsetSlot>>,
    /// Their answers as last seen, held so that a replaced answer is told
    /// by its address (cheap for a large zone): only then is the digest
    /// computed again.
    seen: Vec<Arc<RrsetAnswer>>,
    /// A digest of their default answers.
    digest: u64,
    serial: u32,
    /// The signatures of its NSEC chain, kept between views.
    nsec: xfr::NsecCache,
}

/// One secondary of one zone.
struct Target {
    status: NotifyStatus,
    address: SocketAddr,
    apex: Name,
    /// Its zone's key and view ([`xfr::TransferZone`]).
    zone: String,
    view: Option<Box<str>>,
    next_try: Instant,
    /// The NOTIFY in flight: its ID and the verifier of its answer.
    pending: Option<(u16, TSigVerifier)>,
}

/// Runs the worker until `stop`. NOTIFYs leave from the first address of
/// `sources` of the secondary's family (the DNS listeners: the address a
/// secondary knows its primary by), or from the one the system picks when
/// the listener is a wildcard.
pub async fn run(state: DnsState, sources: Vec<IpAddr>, stop: CancellationToken) {
    let mut zones: HashMap<String, Zone> = HashMap::new();
    let mut targets: Vec<Target> = Vec::new();
    let mut v4: Option<UdpSocket> = None;
    let mut v6: Option<UdpSocket> = None;
    let mut buf = vec![0u8; 4096];
    let mut buf6 = vec![0u8; 4096];
    loop {
        tokio::select! {
            () = tokio::time::sleep(LOOK_EVERY) => {}
            got = recv(v4.as_ref(), &mut buf) => {
                if let Some((len, from)) = got {
                    answered(&mut targets, &buf[..len.min(buf.len())], from);
                }
                publish(&state, &targets);
                continue;
            }
            got = recv(v6.as_ref(), &mut buf6) => {
                if let Some((len, from)) = got {
                    answered(&mut targets, &buf6[..len.min(buf6.len())], from);
                }
                publish(&state, &targets);
                continue;
            }
            () = stop.cancelled() => return,
        }
        let snapshot = state.snapshot.load_full();
        let transfer_zones = state.transfers.zones.load_full();
        // Recording a view reads (and may sign) the whole zone: off the
        // runtime's threads.
        let transfers = state.transfers.clone();
        let (snap, wanted) = (snapshot.clone(), transfer_zones.clone());
        zones = match tokio::task::spawn_blocking(move || {
            look(&snap, &wanted, &mut zones, &transfers.journal);
            zones
        })
        .await
        {
            Ok(zones) => zones,
            Err(e) => {
                tracing::error!(error = %e, "the notify worker's look failed; it starts over");
                HashMap::new()
            }
        };
        // The targets follow the configured secondaries.
        let mut wanted = Vec::new();
        for z in transfer_zones.iter() {
            let Some(serial) = zones.get(&z.key).map(|t| t.serial) else {
                continue;
            };
            for s in &z.secondaries {
                wanted.push((z, s.address, s.key.clone(), serial));
            }
        }
        targets.retain(|t| {
            wanted
                .iter()
                .any(|(z, a, k, _)| z.key == t.zone && *a == t.address && *k == t.status.key)
        });
        for (z, address, key, serial) in wanted {
            let now = Instant::now();
            match targets
                .iter_mut()
                .find(|t| t.zone == z.key && t.address == address && t.status.key == key)
            {
                Some(t) if t.status.serial == serial => {}
                Some(t) => {
                    // A new serial: notify it from the start.
                    t.status.serial = serial;
                    t.status.state = "pending".into();
                    t.status.attempts = 0;
                    t.status.error = None;
                    t.next_try = now;
                    t.pending = None;
                }
                None => targets.push(Target {
                    status: NotifyStatus {
                        domain: z.key.clone(),
                        secondary: address.to_string(),
                        key,
                        serial,
                        state: "pending".into(),
                        attempts: 0,
                        error: None,
                        answered_ms: None,
                    },
                    address,
                    apex: z.apex.clone(),
                    zone: z.key.clone(),
                    view: z.view.clone(),
                    next_try: now,
                    pending: None,
                }),
            }
        }
        let keys = state.tsig.load();
        for t in targets.iter_mut() {
            if t.status.state == "answered" || Instant::now() < t.next_try {
                continue;
            }
            let socket = match t.address {
                SocketAddr::V4(_) => &mut v4,
                SocketAddr::V6(_) => &mut v6,
            };
            if socket.is_none() {
                let any: IpAddr = match t.address {
                    SocketAddr::V4(_) => [0, 0, 0, 0].into(),
                    SocketAddr::V6(_) => [0u16; 8].into(),
                };
                let ip = sources
                    .iter()
                    .find(|ip| ip.is_ipv4() == t.address.is_ipv4() && !ip.is_unspecified())
                    .copied()
                    .unwrap_or(any);
                let any = SocketAddr::new(ip, 0);
                match UdpSocket::bind(any).await {
                    Ok(s) => *socket = Some(s),
                    Err(e) => {
                        t.status.error = Some(format!("cannot open a UDP socket: {e}"));
                        t.next_try = Instant::now() + MAX_RETRY;
                        continue;
                    }
                }
            }
            let Some(socket) = socket.as_ref() else {
                continue;
            };
            send(t, socket, &keys, &snapshot).await;
        }
        publish(&state, &targets);
    }
}

/// Reads one datagram from `socket`, or waits forever when there is none.
async fn recv(socket: Option<&UdpSocket>, buf: &mut [u8]) -> Option<(usize, SocketAddr)> {
    match socket {
        Some(s) => s.recv_from(buf).await.ok(),
        None => std::future::pending().await,
    }
}

/// Follows each transferred zone's snapshot and default answers, giving a
/// zone a new serial when a default answer changed under the same
/// snapshot.
fn look(
    snapshot: &Arc<Snapshot>,
    wanted: &[xfr::TransferZone],
    zones: &mut HashMap<String, Zone>,
    journal: &Journal,
) {
    let address = Arc::as_ptr(snapshot) as usize;
    zones.retain(|key, _| wanted.iter().any(|z| z.key == *key));
    journal.retain(|key| wanted.iter().any(|z| z.key == key));
    for z in wanted {
        let Some(index) = snapshot.zone_named(&z.apex, z.view.as_deref()) else {
            zones.remove(&z.key);
            continue;
        };
        match zones.get_mut(&z.key) {
            Some(zone) if zone.snapshot == address => {
                let same = zone
                    .steered
                    .iter()
                    .zip(&zone.seen)
                    .all(|(slot, seen)| Arc::ptr_eq(&slot.answer.load(), seen));
                if same {
                    continue;
                }
                zone.seen = zone.steered.iter().map(|s| s.answer.load_full()).collect();
                let digest = digest(&zone.seen);
                if digest != zone.digest {
                    zone.digest = digest;
                    if let Some(serial) = reserial(snapshot, index) {
                        tracing::info!(zone = %z.key, serial, "a steered record's default answer changed: new serial");
                        zone.serial = serial;
                        record(snapshot, index, &z.key, &mut zone.nsec, journal);
                    }
                }
            }
            _ => {
                let slots = snapshot.watched_slots(index);
                // A new snapshot: its steered answers were stored after its
                // serial was given, and may have changed before this look.
                // A serial of its own covers whatever a transfer read since.
                let seen: Vec<Arc<RrsetAnswer>> =
                    slots.iter().map(|s| s.answer.load_full()).collect();
                let serial = reserial(snapshot, index)
                    .or_else(|| xfr::serial(snapshot, index))
                    .unwrap_or_default();
                let mut nsec = zones.remove(&z.key).map(|z| z.nsec).unwrap_or_default();
                record(snapshot, index, &z.key, &mut nsec, journal);
                zones.insert(
                    z.key.clone(),
                    Zone {
                        snapshot: address,
                        digest: digest(&seen),
                        seen,
                        steered: slots,
                        serial,
                        nsec,
                    },
                );
            }
        }
    }
}

/// Records zone `index`'s view at its new serial in the journal, which
/// transfers serve. On a failure the journal keeps the previous view (and
/// says so in the log): transfers go on serving it.
fn record(
    snapshot: &Snapshot,
    index: usize,
    key: &str,
    nsec: &mut xfr::NsecCache,
    journal: &Journal,
) {
    let records = match xfr::view(snapshot, index, nsec) {
        Ok(records) => records,
        Err(e) => {
            tracing::error!(zone = %key, error = %e, "cannot sign the zone's transfer view; transfers serve the previous one");
            return;
        }
    };
    if let Err(e) = journal.record(key, &records) {
        tracing::error!(zone = %key, error = %e, "cannot record the zone's transfer view; transfers serve the previous one");
    }
}

/// A digest of the default answers (first variant) of steered records.
fn digest(answers: &[Arc<RrsetAnswer>]) -> u64 {
    let mut bytes = Vec::new();
    for answer in answers {
        if let Some(group) = answer.groups.get(answer.default_group()) {
            for v in group.values.iter().take(group.max_answers as usize) {
                bytes.extend_from_slice(&v.to_bytes().unwrap_or_default());
            }
        }
        bytes.push(0xff);
    }
    hash_bytes(&bytes)
}

/// Gives zone `index` of `snapshot` a new serial: its SOA answer is
/// replaced by one with [`xfr::next_serial`]. Returns the serial.
fn reserial(snapshot: &Snapshot, index: usize) -> Option<u32> {
    let apex = &snapshot.zones.get(index)?.apex;
    let slot = snapshot.apex_slot(index, RecordType::SOA)?;
    let old = slot.answer.load();
    let record = old.groups.first()?.first(apex)?;
    let RData::SOA(soa) = &record.data else {
        return None;
    };
    let mut soa = soa.clone();
    let serial = xfr::next_serial();
    soa.serial = serial;
    // Signed again when the zone is signed.
    let values = vec![Value::from(RData::SOA(soa))];
    let answer = static_answer(apex, record.ttl, values, slot.signer.as_deref()).ok()?;
    slot.answer.store(Arc::new(answer));
    Some(serial)
}

/// Sends (again) the NOTIFY of `t`'s serial, and schedules the next try.
async fn send(t: &mut Target, socket: &UdpSocket, keys: &tsig::TsigKeys, snapshot: &Snapshot) {
    t.status.attempts += 1;
    let wait = FIRST_RETRY
        .saturating_mul(1 << t.status.attempts.saturating_sub(1).min(6))
        .min(MAX_RETRY);
    t.next_try = Instant::now() + wait;
    if t.status.attempts > FAILING_AFTER {
        t.status.state = "failing".into();
        if t.status.error.is_none() {
            t.status.error = Some(format!("no answer to {} NOTIFYs", t.status.attempts - 1));
        }
    }
    let Some(signer) = tsig::signer_for(keys, &t.status.key) else {
        t.status.state = "failing".into();
        t.status.error = Some(format!("the cluster has no TSIG key \"{}\"", t.status.key));
        return;
    };
    let id = fastrand::u16(..);
    let mut m = Message::new(id, MessageType::Query, OpCode::Notify);
    m.metadata.authoritative = true;
    m.add_query(Query::query(t.apex.clone(), RecordType::SOA));
    // The SOA with the new serial (RFC 1996 §3.7: a hint the secondary may use).
    if let Some(slot) = snapshot
        .zone_named(&t.apex, t.view.as_deref())
        .and_then(|z| snapshot.apex_slot(z, RecordType::SOA))
    {
        let answer = slot.answer.load();
        if let Some(record) = answer.groups.first().and_then(|g| g.first(&t.apex)) {
            m.add_answer(record);
        }
    }
    let verifier = match m.finalize(&signer, tsig::now_secs()) {
        Ok(v) => v,
        Err(e) => {
            t.status.error = Some(format!("cannot sign the NOTIFY: {e}"));
            return;
        }
    };
    let Ok(bytes) = m.to_vec() else {
        t.status.error = Some("cannot encode the NOTIFY".into());
        return;
    };
    match socket.send_to(&bytes, t.address).await {
        Ok(_) => t.pending = verifier.map(|v| (id, v)),
        Err(e) => t.status.error = Some(format!("cannot send to {}: {e}", t.address)),
    }
}

/// Takes an answer to a NOTIFY in flight: the secondary acknowledged the
/// serial when it answers NOERROR, signed with the key.
fn answered(targets: &mut [Target], bytes: &[u8], from: SocketAddr) {
    let Some(id) = bytes.get(..2).map(|b| u16::from_be_bytes([b[0], b[1]])) else {
        return;
    };
    let Some(t) = targets.iter_mut().find(|t| {
        t.address.ip().to_canonical() == from.ip().to_canonical()
            && t.pending.as_ref().is_some_and(|(pid, _)| *pid == id)
    }) else {
        return;
    };
    let Some((_, mut verifier)) = t.pending.take() else {
        return;
    };
    match verifier.verify(bytes) {
        Ok(response) if response.metadata.response_code == ResponseCode::NoError => {
            t.status.state = "answered".into();
            t.status.error = None;
            t.status.answered_ms = Some(gtm_model::clock::now_ms());
            tracing::info!(zone = %t.status.domain, secondary = %t.address, serial = t.status.serial, "NOTIFY answered");
        }
        Ok(response) => {
            t.status.state = "failing".into();
            t.status.error = Some(format!(
                "the secondary answered {}",
                response.metadata.response_code
            ));
        }
        Err(e) => {
            t.status.state = "failing".into();
            t.status.error = Some(format!("the answer's TSIG does not verify: {e}"));
        }
    }
}

/// Publishes the targets' state for `gtm status`.
fn publish(state: &DnsState, targets: &[Target]) {
    let statuses = targets.iter().map(|t| t.status.clone()).collect();
    *state
        .transfers
        .notify
        .lock()
        .unwrap_or_else(|p| p.into_inner()) = statuses;
}
