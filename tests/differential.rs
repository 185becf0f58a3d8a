//! The fast path and the general path give the same answers.
//!
//! Every question is asked of both paths with the same balance draws; when
//! the fast path takes a question, its response must decode to the same
//! message as the general path's.

use std::net::SocketAddr;

use gtm_dns::{
    fast,
    handler::{DnsState, Handler, answer_udp},
    snapshot::{Draw, Snapshot},
};
use gtm_engine::Engine;
use gtm_geo::Geo;
use hickory_server::proto::{
    op::Message,
    rr::{
        RecordType,
        rdata::opt::{EdnsOption, NSIDPayload},
    },
};

use crate::support::*;

fn with_nsid(mut m: Message) -> Message {
    if let Some(edns) = m.edns.as_mut() {
        edns.options_mut()
            .insert(EdnsOption::NSID(NSIDPayload::new(Vec::new()).unwrap()));
    }
    m
}

fn with_do(mut m: Message) -> Message {
    if let Some(edns) = m.edns.as_mut() {
        edns.set_dnssec_ok(true);
    }
    m
}

#[test]
fn fast_and_general_paths_agree() {
    paths_agree(ZONE, false);
}

/// With DO on a signed zone, the fast path's precomputed signatures and
/// proofs are the general path's.
#[test]
fn fast_and_general_paths_agree_on_signed_answers() {
    paths_agree(&crate::dnssec::signed_zone(), true);
}

/// With views: a private subnet is in the internal view, whose `www` and
/// `intranet` replace and add to the others' (docs/views.md), and each
/// path decides the view alike.
#[test]
fn fast_and_general_paths_agree_with_views() {
    let config = format!(
        "[[view]]\nname = \"internal\"\nclients = [\"10.0.0.0/8\", \"fd00::/8\"]\n{ZONE}\n\
         [[domain.record]]\nname = \"www\"\ntype = \"A\"\nview = \"internal\"\n\
         addresses = [{{ ip = \"10.0.0.10\" }}]\n\n\
         [[domain.record]]\nname = \"missing\"\ntype = \"A\"\nview = \"internal\"\n\
         addresses = [{{ ip = \"10.0.0.20\" }}]\n"
    );
    paths_agree(&config, false);
}

/// A steered record answering its fail-safe value (its one address
/// down): the fast path writes the Extended DNS Error the general path
/// adds (crate `ede`), and takes such questions (with and without EDNS).
#[test]
fn fast_and_general_paths_agree_on_fail_safe_answers() {
    let config = format!(
        "{ZONE}\n[[domain.record]]\nname = \"fs\"\ntype = \"A\"\n\
         fail_safe = [\"192.0.2.250\", \"192.0.2.251\"]\n\
         addresses = [{{ ip = \"192.0.2.20\", hc = \"check:web\" }}]\n"
    );
    let down = |engine: &Engine| {
        let check = gtm_model::condition::CheckRef {
            name: "web".into(),
            address: Some("192.0.2.20".parse().unwrap()),
        };
        engine.set_check(&check, gtm_resolve::CheckState::Error, "set by the test");
    };
    let fast_fail_safe = paths_agree_after(&config, false, down);
    assert!(
        fast_fail_safe > 0,
        "the fast path answered no fail-safe question with EDNS"
    );
}

fn paths_agree(config: &str, signed: bool) {
    paths_agree_after(config, signed, |_| {});
}

/// Asks both paths every question once `setup` has run on the engine;
/// returns how many fast-path answers carried an Extended DNS Error.
fn paths_agree_after(config: &str, signed: bool, setup: impl Fn(&Engine)) -> usize {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("country.mmdb");
    crate::geo::write_mmdb(&db);
    let state = DnsState::new(Snapshot::default(), Geo::open(&db).unwrap(), 1232);
    let prepared = gtm_engine::Prepared::new(
        1,
        &Default::default(),
        gtm_model::parse(config).unwrap(),
        &state,
    )
    .unwrap();
    let engine = Engine::new("diff", prepared, state.clone(), None);
    if signed {
        use gtm_dns::dnssec::keys::{KeyMaterial, ZoneKeys};
        let key = KeyMaterial::generate(Default::default(), 0).unwrap();
        engine.set_keys([("example.test".to_string(), ZoneKeys::first(key, 0))].into());
        assert!(engine.signing_window().is_some());
    }
    setup(&engine);
    let handler = Handler {
        state: engine.dns().clone(),
    };
    let src: SocketAddr = "127.0.0.1:5353".parse().unwrap();

    let names = [
        "www.example.test.",
        "WWW.Example.TEST.",
        "dr.example.test.",
        "w.example.test.",
        "geo.example.test.",
        "sticky.example.test.",
        "v6.example.test.",
        "alias.example.test.",
        "example.test.",
        "_sip._udp.example.test.",
        "big.example.test.",
        "missing.example.test.",
        "x.wild.example.test.",
        "other.test.",
        "fs.example.test.",
    ];
    let types = [
        RecordType::A,
        RecordType::AAAA,
        RecordType::MX,
        RecordType::TXT,
        RecordType::SOA,
        RecordType::NS,
        RecordType::CNAME,
        RecordType::SRV,
        RecordType::CAA,
    ];
    let mut asked = 0;
    let mut fast_taken = 0;
    let mut fast_ede = 0;
    for (i, name) in names.iter().enumerate() {
        for rtype in types {
            for variant in 0..7 {
                let m = match variant {
                    0 if signed => with_do(query(name, rtype)),
                    2 if signed => with_do(with_ecs(query(name, rtype), "81.2.69.0/24")),
                    0 => query(name, rtype),
                    1 => without_edns(query(name, rtype)),
                    2 => with_ecs(query(name, rtype), "81.2.69.0/24"),
                    3 => with_ecs(query(name, rtype), "3.3.3.0/24"),
                    // Private subnets: no place, scoped to the subnet.
                    4 => with_ecs(query(name, rtype), "10.1.2.0/24"),
                    5 => with_ecs(query(name, rtype), "fd00:1:2::/56"),
                    // NSID: the fast path declines, the general path answers.
                    _ => with_nsid(query(name, rtype)),
                };
                let bytes = m.to_vec().unwrap();
                for seed in 0..3u64 {
                    asked += 1;
                    let seed = seed + i as u64 * 7;
                    let mut out = Vec::new();
                    let took = fast::answer(
                        &handler.state,
                        &bytes,
                        src.ip(),
                        &mut Draw::new(seed),
                        &mut out,
                    );
                    let general = answer_udp(&handler, &bytes, src, &mut Draw::new(seed))
                        .expect("general path answers");
                    assert!(
                        !(took && variant == 6),
                        "{name} {rtype}: the fast path leaves NSID to the general path"
                    );
                    if took {
                        fast_taken += 1;
                        let f = Message::from_vec(&out).expect("fast path response decodes");
                        let g = Message::from_vec(&general).unwrap();
                        assert_eq!(
                            f.metadata, g.metadata,
                            "{name} {rtype} variant {variant}: header"
                        );
                        assert_eq!(f.queries, g.queries, "{name} {rtype}: question");
                        assert_eq!(
                            f.answers, g.answers,
                            "{name} {rtype} variant {variant} seed {seed}: answers"
                        );
                        assert_eq!(f.authorities, g.authorities, "{name} {rtype}: authority");
                        assert_eq!(f.additionals, g.additionals, "{name} {rtype}: additional");
                        assert_eq!(
                            format!("{:?}", f.edns),
                            format!("{:?}", g.edns),
                            "{name} {rtype} variant {variant}: EDNS"
                        );
                        fast_ede += usize::from(ede(&f).is_some());
                    }
                }
            }
        }
    }
    assert!(
        fast_taken * 2 > asked,
        "the fast path takes most questions: {fast_taken} of {asked}"
    );
    fast_ede
}
