//! Writes the seed corpora of the fuzz targets into `fuzz/corpus/<target>/`
//! and exits: run `fuzz/target/x86_64-unknown-linux-gnu/release/seeds` from
//! the repository root after `cargo +nightly fuzz build -s none`. It is
//! built as a fuzz target only so that it links with the instrumented
//! libraries. Every seed is a real message: queries as resolvers send them,
//! configurations from `config/`, Raft bodies encoded as gtm-cluster
//! encodes them, reports as devices send them.
#![no_main]

use std::{collections::BTreeMap, io::Cursor, path::Path};

use gtm_fuzz::{ZONE, query};
use hickory_server::proto::{
    op::{Edns, Message},
    rr::{
        Name, RecordType,
        rdata::opt::{ClientSubnet, EdnsOption},
    },
};
use openraft::{
    CommittedLeaderId, Entry, EntryPayload, LogId, Membership, SnapshotMeta, StoredMembership,
    Vote,
    error::{Fatal, RaftError},
    raft::{
        AppendEntriesRequest, AppendEntriesResponse, SnapshotResponse, VoteRequest, VoteResponse,
    },
};

openraft::declare_raft_types!(
    /// The same shapes as gtm-cluster's type configuration.
    Config:
        D = gtm_cluster::Proposal,
        R = Vec<u8>,
        NodeId = u64,
        Node = gtm_cluster::NodeInfo,
        SnapshotData = Cursor<Vec<u8>>,
);

/// The same shape as gtm-cluster's snapshot data.
#[derive(serde::Serialize)]
struct SnapshotData {
    kv: BTreeMap<String, Vec<u8>>,
    last_applied: Option<LogId<u64>>,
    membership: StoredMembership<u64, gtm_cluster::NodeInfo>,
}

fn write(target: &str, name: &str, bytes: &[u8]) {
    let dir = Path::new("fuzz/corpus").join(target);
    std::fs::create_dir_all(&dir).expect("creating the corpus directory");
    std::fs::write(dir.join(name), bytes).expect("writing a seed");
}

fn bin<T: serde::Serialize>(value: &T) -> Vec<u8> {
    bincode::serde::encode_to_vec(value, bincode::config::standard()).expect("encoding a seed")
}

libfuzzer_sys::fuzz_target!(
    init: {
        if write_all() {
            std::process::exit(0);
        }
    },
    |_data: &[u8]| {}
);

/// Writes every corpus; true when done.
fn write_all() -> bool {
    dns();
    configs();
    conditions();
    raft();
    reports();
    transfers();
    true
}

/// A primary's answers to a transfer of `example.test`, framed as over
/// TCP after the selector byte (`transfer_in`): an AXFR in two messages,
/// an IXFR of two differences from the target's held serial 7, and the
/// one SOA of a zone that is current.
fn transfers() {
    use hickory_server::proto::{
        op::{MessageType, OpCode},
        rr::{
            RData, Record,
            rdata::{A, SOA},
        },
    };
    let zone = Name::from_ascii("example.test.").expect("literal name");
    let soa = |serial: u32| {
        let ns = Name::from_ascii("ns1.example.test.").expect("literal name");
        let admin = Name::from_ascii("admin.example.test.").expect("literal name");
        let data = SOA::new(ns, admin, serial, 3600, 600, 86400, 60);
        Record::from_rdata(zone.clone(), 300, RData::SOA(data))
    };
    let a = |name: &str, last: u8| {
        let owner = Name::from_ascii(format!("{name}.example.test.")).expect("literal name");
        Record::from_rdata(owner, 60, RData::A(A::new(192, 0, 2, last)))
    };
    let framed = |selector: u8, messages: Vec<Vec<Record>>| {
        let mut out = vec![selector];
        for records in messages {
            let mut m = Message::new(1, MessageType::Response, OpCode::Query);
            m.answers.extend(records);
            let bytes = m.to_vec().expect("encoding an answer");
            out.extend_from_slice(&(bytes.len() as u16).to_be_bytes());
            out.extend_from_slice(&bytes);
        }
        out
    };
    let axfr = vec![vec![soa(8), a("a", 1)], vec![a("b", 9), soa(8)]];
    write("transfer_in", "axfr", &framed(0, axfr));
    let ixfr = vec![
        vec![soa(9), soa(7), a("www", 2), soa(8), a("www", 3)],
        vec![soa(8), soa(9), a("c", 4), soa(9)],
    ];
    write("transfer_in", "ixfr", &framed(1, ixfr));
    write("transfer_in", "current", &framed(1, vec![vec![soa(7)]]));
}

fn dns() {
    let names = [
        "www.example.test.",
        "WWW.Example.TEST.",
        "dr.example.test.",
        "w.example.test.",
        "geo.example.test.",
        "sticky.example.test.",
        "many.example.test.",
        "x.wild.example.test.",
        "alias.example.test.",
        "outside.example.test.",
        "example.test.",
        "_sip._udp.example.test.",
        "big.example.test.",
        "missing.example.test.",
        "www.other.test.",
        "elsewhere.invalid.",
    ];
    let types = [
        RecordType::A,
        RecordType::AAAA,
        RecordType::TXT,
        RecordType::MX,
        RecordType::ANY,
    ];
    let mut stream = Vec::new();
    let mut n = 0u8;
    for (i, name) in names.iter().enumerate() {
        let rtype = types[i % types.len()];
        let variants: [(&str, Box<dyn Fn(&mut Message)>); 4] = [
            ("edns", Box::new(|_| {})),
            ("plain", Box::new(|m| m.edns = None)),
            (
                "ecs",
                Box::new(|m| {
                    if let Some(e) = m.edns.as_mut() {
                        let ecs: ClientSubnet = "81.2.69.0/24".parse().expect("literal subnet");
                        e.options_mut().insert(EdnsOption::Subnet(ecs));
                    }
                }),
            ),
            (
                "do512",
                Box::new(|m| {
                    let mut e = Edns::new();
                    e.set_max_payload(512);
                    e.set_dnssec_ok(true);
                    m.set_edns(e);
                }),
            ),
        ];
        let owner = Name::from_ascii(name).expect("literal name");
        for (variant, edit) in variants.iter().take(if i < 8 { 4 } else { 2 }) {
            let mut m = query(owner.clone(), rtype, true);
            edit(&mut m);
            let bytes = m.to_vec().expect("encoding a query");
            n = n.wrapping_add(37);
            let mut udp = vec![n];
            udp.extend_from_slice(&bytes);
            let label = name.trim_end_matches('.').replace('.', "_");
            write("udp_query", &format!("{label}-{rtype}-{variant}"), &udp);
            if *variant != "do512" {
                let mut tcp = vec![n];
                tcp.extend_from_slice(&(bytes.len() as u16).to_be_bytes());
                tcp.extend_from_slice(&bytes);
                write("tcp_framing", &format!("{label}-{rtype}-{variant}"), &tcp);
                stream.extend_from_slice(&(bytes.len() as u16).to_be_bytes());
                stream.extend_from_slice(&bytes);
            }
        }
    }
    // Several messages on one connection, then a cut one.
    let mut pipelined = vec![0u8];
    pipelined.extend_from_slice(&stream[..stream.len().min(400)]);
    write("tcp_framing", "pipelined", &pipelined);
    // A query whose answer must be truncated, and a question that is a
    // pointer.
    let hex =
        "abcd000000010000000000010362696704636f6e660474657374000001000100002904d0000000000000";
    let bytes: Vec<u8> = (0..hex.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&hex[i..i + 2], 16).expect("literal hex"))
        .collect();
    write(
        "udp_query",
        "issue-truncation",
        &[[0u8].as_slice(), &bytes].concat(),
    );
    let pointer = [
        0u8, 0x12, 0x34, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0xc0, 0x04, 0, 1, 0, 1,
    ];
    write("udp_query", "pointer-into-header", &pointer);
}

fn configs() {
    write("config", "fuzz-zone.toml", ZONE.as_bytes());
    for entry in std::fs::read_dir("config").expect("reading config/") {
        let path = entry.expect("a config entry").path();
        if path.extension().is_some_and(|e| e == "toml") {
            let name = path
                .file_name()
                .expect("a file name")
                .to_string_lossy()
                .into_owned();
            write(
                "config",
                &name,
                &std::fs::read(&path).expect("reading a config"),
            );
        }
    }
    let small = [
        ("empty.toml", ""),
        (
            "txt.toml",
            "[[domain]]\nname = \"a.test\"\nnameservers = [\"ns.a.test\"]\n[[domain.record]]\nname = \"t\"\ntype = \"TXT\"\nvalues = [\"\\\"one\\\" \\\"two\\\"\"]\n",
        ),
        (
            "cname.toml",
            "[[domain]]\nname = \"a.test\"\nnameservers = [\"ns.a.test\"]\n[[domain.record]]\nname = \"c\"\ntype = \"CNAME\"\naddresses = [{ target = \"d.a.test\" }, { target = \"e.a.test\" }]\n",
        ),
        (
            "scenario.toml",
            "[[check]]\nname = \"web\"\ntype = \"tcp\"\nport = 80\n[[scenario]]\nname = \"s\"\ncondition = \"AT LEAST 1 OF (web@192.0.2.1, web@192.0.2.2) UNLESS web@192.0.2.3\"\n[[domain]]\nname = \"a.test\"\nnameservers = [\"ns.a.test\"]\n[[domain.record]]\nname = \"www\"\ntype = \"A\"\nmode = \"datacenter\"\naddresses = [{ ip = \"192.0.2.1\", hc = \"check:web\" }, { ip = \"192.0.2.2\", hc = \"scenario:s\" }]\n",
        ),
    ];
    for (name, text) in small {
        write("config", name, text.as_bytes());
    }
}

fn conditions() {
    let all = [
        "web",
        "web@192.0.2.10",
        "web@2001:db8::1",
        "NOT web",
        "NOT NOT web",
        "a AND b",
        "a OR b",
        "a AND b OR c",
        "a AND (b OR c)",
        "(a AND b) AND c",
        "a UNLESS b",
        "a UNLESS b UNLESS c",
        "a OR b UNLESS c OR d",
        "NOT (web@192.0.2.10 OR web@192.0.2.11) UNLESS maintenance",
        "web1 AND (db1 OR db2) UNLESS maint",
        "AT LEAST 2 OF (a, b, c@2001:db8::1)",
        "at least 1 of (a AND b, NOT c)",
        "AT LEAST 3 OF (a, b)",
        "((((a))))",
        "a.b-c_d",
        "a AND",
        "(a",
        "a)",
        "AND",
        "web@",
        "web@999.1.1.1",
    ];
    for (i, text) in all.iter().enumerate() {
        write("condition", &format!("c{i:02}"), text.as_bytes());
    }
}

fn raft() {
    let leader = |term, node| CommittedLeaderId::new(term, node);
    let log_id = |term, index| LogId::new(leader(term, 1), index);
    let node = |name: &str, dc: &str, port: u16| gtm_cluster::NodeInfo {
        name: name.into(),
        datacenter: dc.into(),
        api_addr: format!("http://127.0.0.1:{port}"),
    };
    let members = BTreeMap::from([(1u64, node("a", "dc1", 8053)), (2, node("b", "dc2", 8054))]);
    let membership = Membership::new(vec![members.keys().copied().collect()], members.clone());
    let command = gtm_node::command::Command::new(
        gtm_model::actor::Actor {
            user: "admin".into(),
            device: "a".into(),
        },
        None,
        gtm_node::command::Action::ApplyConfig {
            text: ZONE[..200].to_string(),
        },
    );
    let put = gtm_cluster::Proposal(command.encode().expect("a command encodes").into());
    let append = AppendEntriesRequest::<Config> {
        vote: Vote::new_committed(3, 1),
        prev_log_id: Some(log_id(3, 7)),
        entries: vec![
            Entry {
                log_id: log_id(3, 8),
                payload: EntryPayload::Normal(put),
            },
            Entry {
                log_id: log_id(3, 9),
                payload: EntryPayload::Membership(membership.clone()),
            },
            Entry {
                log_id: log_id(3, 10),
                payload: EntryPayload::Blank,
            },
        ],
        leader_commit: Some(log_id(3, 7)),
    };
    let heartbeat = AppendEntriesRequest::<Config> {
        vote: Vote::new_committed(3, 1),
        prev_log_id: Some(log_id(3, 10)),
        entries: vec![],
        leader_commit: Some(log_id(3, 10)),
    };
    // The selector byte picks the body: see RpcBody::ALL.
    let seed = |kind: u8, name: &str, body: Vec<u8>| {
        write("raft_rpc", name, &[[kind].as_slice(), &body].concat());
    };
    seed(0, "append", bin(&append));
    seed(0, "heartbeat", bin(&heartbeat));
    seed(
        1,
        "vote",
        bin(&VoteRequest::new(Vote::new(4, 2), Some(log_id(3, 10)))),
    );
    seed(
        1,
        "vote-empty",
        bin(&VoteRequest::<u64>::new(Vote::new(1, 1), None)),
    );
    let stored = StoredMembership::new(Some(log_id(3, 9)), membership);
    let data = SnapshotData {
        kv: BTreeMap::from([("config".to_string(), b"version = 1".to_vec())]),
        last_applied: Some(log_id(3, 10)),
        membership: stored.clone(),
    };
    let meta = SnapshotMeta {
        last_log_id: Some(log_id(3, 10)),
        last_membership: stored,
        snapshot_id: "3-10-1".into(),
    };
    seed(
        2,
        "snapshot",
        bin(&(Vote::new_committed(3, 1), meta, bin(&data))),
    );
    type AppendReply = Result<AppendEntriesResponse<u64>, RaftError<u64>>;
    seed(
        3,
        "append-ok",
        bin(&AppendReply::Ok(AppendEntriesResponse::Success)),
    );
    seed(
        3,
        "append-conflict",
        bin(&AppendReply::Ok(AppendEntriesResponse::Conflict)),
    );
    seed(
        3,
        "append-partial",
        bin(&AppendReply::Ok(AppendEntriesResponse::PartialSuccess(
            Some(log_id(3, 8)),
        ))),
    );
    seed(
        3,
        "append-higher",
        bin(&AppendReply::Ok(AppendEntriesResponse::HigherVote(
            Vote::new(5, 2),
        ))),
    );
    seed(
        3,
        "append-fatal",
        bin(&AppendReply::Err(RaftError::Fatal(Fatal::Stopped))),
    );
    type VoteReply = Result<VoteResponse<u64>, RaftError<u64>>;
    seed(
        4,
        "vote-granted",
        bin(&VoteReply::Ok(VoteResponse::new(
            Vote::new(4, 2),
            Some(log_id(3, 10)),
            true,
        ))),
    );
    type SnapshotReply = Result<SnapshotResponse<u64>, Fatal<u64>>;
    seed(
        5,
        "snapshot-ok",
        bin(&SnapshotReply::Ok(SnapshotResponse::new(
            Vote::new_committed(3, 1),
        ))),
    );
}

fn reports() {
    let report = serde_json::json!({
        "device": "b",
        "datacenter": "dc2",
        "checks": [
            { "check": "web@192.0.2.10", "state": "OK", "reason": "HTTP 200", "since_ms": 1700000000000u64, "restored": false },
            { "check": "web@192.0.2.11", "state": "No Data", "reason": "", "since_ms": 0, "restored": true }
        ],
        "scenarios": [{ "scenario": "dc1-down", "active": false, "pending": null }],
        "records": [{
            "record": "www.example.test/A",
            "status": null,
            "active": ["192.0.2.10"],
            "decision": "Main: healthy addresses"
        }],
        "events": [
            { "seq": 1, "time_ms": 1700000000000u64, "device": "b", "kind": "config", "object": "version 1", "text": "configuration version 1 applied (3 changes)" },
            { "seq": 2, "time_ms": 1700000000100u64, "device": "b", "kind": "record", "object": "www.example.test/A", "text": "status OK" },
            { "seq": 2, "time_ms": 1700000000100u64, "device": "b", "kind": "check", "object": "web@192.0.2.10", "text": "repeated" }
        ]
    });
    // As the device encodes it: through the real type.
    let report: gtm_node::peers::Report = serde_json::from_value(report).expect("a valid report");
    write(
        "peer_report",
        "report",
        &serde_json::to_vec(&report).expect("a report"),
    );
    write(
        "peer_report",
        "empty",
        br#"{"device":"","datacenter":"","checks":[],"scenarios":[],"records":[],"events":[]}"#,
    );
}
