//! A zone that did not change is kept whole from one snapshot to the next.

use std::sync::Arc;

use hickory_server::proto::rr::{Name, RData, RecordType as Rt};

use super::{Snapshot, wire_key};
use gtm_model::compile::{Compiled, compile};

fn domain(name: &str, txt: &str) -> String {
    format!(
        "[[domain]]\nname = \"{name}\"\nnameservers = [\"ns1.{name}\"]\n\n\
         [[domain.record]]\nname = \"www\"\ntype = \"TXT\"\nvalues = [\"{txt}\"]\n\n\
         [[domain.record]]\nname = \"web.deep\"\ntype = \"A\"\naddresses = [{{ ip = \"192.0.2.1\" }}]\n"
    )
}

fn compiled(domains: &[(&str, &str)]) -> Compiled {
    let text: String = domains.iter().map(|(n, t)| domain(n, t)).collect();
    compile(&gtm_model::parse(&text).unwrap()).unwrap()
}

fn build(compiled: &Compiled, previous: &Snapshot) -> Snapshot {
    Snapshot::build(compiled, previous, None, &[], &[]).unwrap()
}

fn name(n: &str) -> Name {
    Name::from_ascii(n).unwrap()
}

/// Whether `a` and `b` answer `owner`/`rtype` from the very same slot.
fn shared(a: &Snapshot, b: &Snapshot, owner: &str, rtype: Rt) -> bool {
    let (x, y) = (a.slot(&name(owner), rtype), b.slot(&name(owner), rtype));
    Arc::ptr_eq(x.unwrap(), y.unwrap())
}

fn txt(snap: &Snapshot, owner: &str) -> String {
    let answer = snap.slot(&name(owner), Rt::TXT).unwrap().answer.load();
    match answer.groups[0].values[0].rdata() {
        RData::TXT(t) => t.to_string(),
        other => panic!("{other:?}"),
    }
}

#[test]
fn an_unchanged_zone_is_kept_and_a_changed_one_built_again() {
    let first = build(
        &compiled(&[("a.test", "1"), ("b.test", "1")]),
        &Snapshot::default(),
    );
    // b.test moves before a.test and changes; a.test does not change.
    let second = build(&compiled(&[("b.test", "2"), ("a.test", "1")]), &first);

    for (owner, rtype) in [
        ("www.a.test.", Rt::TXT),
        ("web.deep.a.test.", Rt::A),
        ("a.test.", Rt::SOA),
    ] {
        assert!(shared(&first, &second, owner, rtype), "{owner} {rtype}");
    }
    assert!(!shared(&first, &second, "www.b.test.", Rt::TXT));
    assert_eq!(txt(&second, "www.b.test."), "2");
    assert_eq!(txt(&second, "www.a.test."), "1");

    // The kept zone's names, empty non-terminal included, are its own at
    // its new place; its steered slot is where its records put it.
    for owner in ["a.test.", "deep.a.test.", "web.deep.a.test."] {
        let (zone, _) = second.find(&wire_key(&name(owner))).unwrap();
        assert_eq!(zone, 1, "{owner}");
    }
    assert_eq!(second.zones[1].apex, name("a.test."));
    assert_eq!(second.steered_range(1), Some(1..2));
    assert_eq!(second.steered_range(0), Some(0..1));
    let kept = second.slot(&name("web.deep.a.test."), Rt::A).unwrap();
    assert!(Arc::ptr_eq(second.steered_slot(1).unwrap(), kept));
    assert!(Arc::ptr_eq(second.zones[1].steered.get(0).unwrap(), kept));
    assert_eq!(second.zone_nodes(1).count(), 4, "apex, www, deep, web.deep");
}

/// Whether `a` and `b` hold the very same node for `owner`.
fn same_node(a: &Snapshot, b: &Snapshot, owner: &str) -> bool {
    let key = wire_key(&name(owner));
    std::ptr::eq(a.node(&key).unwrap(), b.node(&key).unwrap())
}

#[test]
fn a_kept_zone_shares_its_nodes_wherever_it_is() {
    let first = build(
        &compiled(&[("a.test", "1"), ("b.test", "1")]),
        &Snapshot::default(),
    );
    let second = build(&compiled(&[("a.test", "1"), ("b.test", "2")]), &first);
    for owner in ["a.test.", "www.a.test.", "deep.a.test.", "web.deep.a.test."] {
        assert!(same_node(&first, &second, owner), "{owner}");
    }
    for owner in ["b.test.", "www.b.test."] {
        assert!(!same_node(&first, &second, owner), "{owner}");
    }
    // Moved (b.test removed before it): the same nodes at its new place.
    let third = build(&compiled(&[("b.test", "2"), ("a.test", "1")]), &second);
    let moved = build(&compiled(&[("a.test", "1")]), &third);
    assert!(same_node(&third, &moved, "www.a.test."));
    assert_eq!(moved.find(&wire_key(&name("www.a.test."))).unwrap().0, 0);
    assert!(shared(&third, &moved, "www.a.test.", Rt::TXT));
    assert!(moved.node(&wire_key(&name("www.b.test."))).is_none());
    // The first snapshot dropped, the second still answers from them.
    drop(first);
    assert_eq!(txt(&second, "www.a.test."), "1");
}

#[test]
fn a_name_is_answered_from_the_innermost_zone_and_nested_zones_are_kept() {
    let first = build(
        &compiled(&[("a.test", "1"), ("sub.a.test", "1")]),
        &Snapshot::default(),
    );
    let at = |snap: &Snapshot, owner: &str| snap.find(&wire_key(&name(owner))).map(|f| f.0);
    assert_eq!(at(&first, "www.a.test."), Some(0));
    assert_eq!(at(&first, "sub.a.test."), Some(1));
    assert_eq!(at(&first, "www.sub.a.test."), Some(1));
    assert_eq!(at(&first, "nowhere.test."), None);
    assert_eq!(first.zone_of(&name("Other.WWW.Sub.A.test.")), Some(1));
    assert_eq!(first.zone_of(&name("deep.a.test.")), Some(0));

    // The parent changes, its child is kept, and each still answers its own.
    let second = build(&compiled(&[("a.test", "2"), ("sub.a.test", "1")]), &first);
    assert!(!shared(&first, &second, "www.a.test.", Rt::TXT));
    assert!(shared(&first, &second, "www.sub.a.test.", Rt::TXT));
    assert_eq!(txt(&second, "www.a.test."), "2");
    assert_eq!(txt(&second, "www.sub.a.test."), "1");
    // The child goes: its names are the parent's again, as empty ones.
    let third = build(&compiled(&[("a.test", "2")]), &second);
    assert!(shared(&second, &third, "www.a.test.", Rt::TXT));
    assert_eq!(at(&third, "sub.a.test."), None);
}

/// What a zone answers, in an order of its own: per name its slots' types
/// and answers' wire forms, and its NODATA body; then the zone's steered
/// slots by name and type, in order.
fn answers(snap: &Snapshot, zone: usize) -> (Vec<String>, Vec<String>) {
    let data = &snap.zones[zone];
    let mut names: Vec<String> = data
        .nodes
        .iter()
        .map(|(key, node)| {
            let slots: Vec<String> = node
                .rrsets
                .iter()
                .map(|s| {
                    format!(
                        "{} {:?}",
                        s.rtype,
                        s.answer
                            .load()
                            .groups
                            .iter()
                            .map(|g| &g.wire)
                            .collect::<Vec<_>>()
                    )
                })
                .collect();
            let nodata = [&*node.nodata_wire, &data.nodata_tail[..]].concat();
            format!("{key:?} {slots:?} {nodata:?}")
        })
        .collect();
    names.sort();
    let steered = data
        .steered
        .iter()
        .map(|slot| {
            let (key, _) = data
                .nodes
                .iter()
                .find(|(_, n)| n.rrsets.iter().any(|s| Arc::ptr_eq(s, slot)))
                .expect("a steered slot is at a name of its zone");
            format!("{key:?} {}", slot.rtype)
        })
        .collect();
    (names, steered)
}

fn zone(records: &[&str], ns: &str) -> Compiled {
    let text = gtm_model::domain_text(ns, records);
    compile(&gtm_model::parse(&text).unwrap()).unwrap()
}

#[test]
fn a_changed_zone_is_built_from_its_build_before_as_a_whole_build_would_be() {
    let base = [
        "www TXT one",
        "web.deep A 192.0.2.1",
        "api A 192.0.2.2",
        "mail MX 10 mx.a.test.",
        "x.y.z TXT deep",
    ];
    // Each step: the records, the nameserver, and whether the zone can be
    // built from the step before (`api` A then keeps its slot).
    let steps: Vec<(Vec<&str>, &str, bool)> = vec![
        (base.to_vec(), "ns1.a.test", false),
        // Replaced.
        (
            vec!["www TXT two", base[1], base[2], base[3], base[4]],
            "ns1.a.test",
            true,
        ),
        // A steered record replaced.
        (
            vec![
                "www TXT two",
                "web.deep A 192.0.2.9",
                base[2],
                base[3],
                base[4],
            ],
            "ns1.a.test",
            true,
        ),
        // Appended: a new name under a new empty non-terminal, and a type
        // at a name that has one.
        (
            vec![
                "www TXT two",
                "web.deep A 192.0.2.9",
                base[2],
                base[3],
                base[4],
                "new.sub TXT new",
                "www A 192.0.2.3",
            ],
            "ns1.a.test",
            true,
        ),
        // Removed: the only record under `deep` (its name goes), the record
        // under `x.y.z` (`y.z` and `z` go), one type of two at `www`.
        (
            vec![
                "www TXT two",
                base[2],
                base[3],
                base[4],
                "new.sub TXT new",
                "www A 192.0.2.3",
            ],
            "ns1.a.test",
            true,
        ),
        (
            vec![
                "www TXT two",
                base[2],
                base[3],
                "new.sub TXT new",
                "www A 192.0.2.3",
            ],
            "ns1.a.test",
            true,
        ),
        (
            vec![base[2], base[3], "new.sub TXT new", "www A 192.0.2.3"],
            "ns1.a.test",
            true,
        ),
        (
            vec![base[2], base[3], "www A 192.0.2.3"],
            "ns1.a.test",
            true,
        ),
        // The apex's NS records change, the records do not.
        (
            vec![base[2], base[3], "www A 192.0.2.3"],
            "ns1.a.test\", \"ns2.a.test",
            true,
        ),
        // The SOA's primary (the first nameserver) changes: built whole.
        (
            vec![base[2], base[3], "www A 192.0.2.3"],
            "ns2.a.test",
            false,
        ),
        // Inserted before the end: built whole.
        (
            vec![base[2], "in.between TXT x", base[3], "www A 192.0.2.3"],
            "ns2.a.test",
            false,
        ),
    ];
    let mut before = Snapshot::default();
    for (serial, (records, ns, derived)) in steps.into_iter().enumerate() {
        let compiled = zone(&records, ns);
        let serials = [serial as u32 + 10];
        let next = Snapshot::build(&compiled, &before, None, &[], &serials).unwrap();
        let whole = Snapshot::build(&compiled, &Snapshot::default(), None, &[], &serials).unwrap();
        assert_eq!(
            answers(&next, 0),
            answers(&whole, 0),
            "step {serial}: {records:?}"
        );
        assert_eq!(next.zones[0].serial, serials[0]);
        assert_eq!(
            next.steered_order(),
            whole.steered_order(),
            "step {serial}: {records:?}"
        );
        let api_kept = !before.zones.is_empty() && shared(&before, &next, "api.a.test.", Rt::A);
        assert_eq!(api_kept, derived, "step {serial}: {records:?}");
        before = next;
    }
}

fn refs(r: &[String]) -> Vec<&str> {
    r.iter().map(String::as_str).collect()
}

/// A zone derived from its build before shares every shard of its names
/// that the change did not touch (the one of the changed name, and the
/// apex's with its new SOA): a write copies a shard, not the zone.
#[test]
fn a_derived_zone_copies_only_the_shards_its_change_touches() {
    let records: Vec<String> = (0..10_000).map(|i| format!("r{i} A 192.0.2.1")).collect();
    let mut changed = records.clone();
    changed[4321] = "r4321 A 192.0.2.2".to_string();
    let before = Snapshot::build(
        &zone(&refs(&records), "ns1.a.test"),
        &Snapshot::default(),
        None,
        &[],
        &[1],
    )
    .unwrap();
    let compiled = zone(&refs(&changed), "ns1.a.test");
    let next = Snapshot::build(&compiled, &before, None, &[], &[2]).unwrap();
    assert_eq!(next.zones[0].derived_from, Some(0));
    let whole = Snapshot::build(&compiled, &Snapshot::default(), None, &[], &[2]).unwrap();
    assert_eq!(answers(&next, 0), answers(&whole, 0));
    let shards = next.zones[0].nodes.shards();
    assert!(shards >= 4, "{shards}");
    let shared = next.zones[0].nodes.shared_with(&before.zones[0].nodes);
    assert!(shared >= shards - 2, "{shared} of {shards}");
}

/// The address of `owner`/`rtype`'s slot in `snap`: a proof is moved into
/// the build, so a slot taken from it is known by its address.
fn slot_at(snap: &Snapshot, owner: &str, rtype: Rt) -> *const super::RrsetSlot {
    Arc::as_ptr(snap.slot(&name(owner), rtype).unwrap())
}

#[test]
fn a_zone_the_proof_built_whole_is_taken_from_it_with_its_serial() {
    let records = ["www TXT one", "web.deep A 192.0.2.1", "api A 192.0.2.2"];
    let compiled = zone(&records, "ns1.a.test");
    let serials = [42];
    let whole = Snapshot::build(&compiled, &Snapshot::default(), None, &[], &serials).unwrap();
    // The state machine's proof: unsigned, the spec's serial.
    let prove = || Snapshot::build(&compiled, &Snapshot::default(), None, &[], &[]).unwrap();

    // A new zone.
    let proof = prove();
    let (api, soa) = (
        slot_at(&proof, "api.a.test.", Rt::A),
        slot_at(&proof, "a.test.", Rt::SOA),
    );
    assert_ne!(answers(&proof, 0), answers(&whole, 0), "the spec's serial");
    let next =
        Snapshot::build(&compiled, &Snapshot::default(), Some(proof), &[], &serials).unwrap();
    assert_eq!(answers(&next, 0), answers(&whole, 0));
    assert_eq!(next.zones[0].serial, 42);
    assert_eq!(next.steered_order(), whole.steered_order());
    // Its slots are the proof's, but for the apex's (its serial is set),
    // and nothing of it comes from the snapshot before: the engine
    // evaluates its records as new.
    assert_eq!(slot_at(&next, "api.a.test.", Rt::A), api);
    assert_ne!(slot_at(&next, "a.test.", Rt::SOA), soa);
    assert_eq!(next.zones[0].derived_from, None);
    assert_eq!(next.zones[0].kept_from, None);

    // A zone the snapshot before has names of (the same apex, built from
    // an older spec, too different to derive from): taken from the proof
    // too, its records counting where they counted.
    let before = Snapshot::build(
        &zone(&["www TXT old", "web.deep A 192.0.2.1"], "ns1.a.test"),
        &Snapshot::default(),
        None,
        &[],
        &[1],
    )
    .unwrap();
    let proof = prove();
    let web = slot_at(&proof, "web.deep.a.test.", Rt::A);
    let next = Snapshot::build(&compiled, &before, Some(proof), &[], &serials).unwrap();
    assert_eq!(answers(&next, 0), answers(&whole, 0));
    assert_eq!(next.zones[0].derived_from, None);
    assert_eq!(slot_at(&next, "web.deep.a.test.", Rt::A), web);
    let slot = |snap: &Snapshot, owner: &str| snap.slot(&name(owner), Rt::A).unwrap().clone();
    let (now, then) = (
        slot(&next, "web.deep.a.test."),
        slot(&before, "web.deep.a.test."),
    );
    assert!(now.counters.ptr_eq(&then.counters));
    assert!(Arc::ptr_eq(next.steered_slot(0).unwrap(), &now));
    // A record new to the zone counts from nothing.
    let api = slot(&next, "api.a.test.");
    assert_eq!(
        api.counters
            .answers()
            .load(std::sync::atomic::Ordering::Relaxed),
        0
    );
    assert!(Arc::ptr_eq(next.steered_slot(1).unwrap(), &api));

    // A proof of only some of a zone's records (a changed domain's) is
    // not taken.
    let part = zone(&records[..1], "ns1.a.test");
    let partial = Snapshot::build(&part, &Snapshot::default(), None, &[], &[]).unwrap();
    // Held here, so that no slot of the build can take its place.
    let www = partial.slot(&name("www.a.test."), Rt::TXT).unwrap().clone();
    let next = Snapshot::build(
        &compiled,
        &Snapshot::default(),
        Some(partial),
        &[],
        &serials,
    )
    .unwrap();
    assert_eq!(answers(&next, 0), answers(&whole, 0));
    assert!(!Arc::ptr_eq(
        next.slot(&name("www.a.test."), Rt::TXT).unwrap(),
        &www
    ));
}

/// A large zone holds a group and an answer per record: a group of one
/// candidate in an unsigned zone fits mimalloc's 48-byte class (it took
/// 80), and an answer with its `Arc` the 48-byte one (it took 64, then
/// 56: its place table and rules are boxed together).
#[test]
fn a_group_fits_48_bytes_and_an_answer_32() {
    assert!(std::mem::size_of::<super::Group>() <= 48);
    assert!(std::mem::size_of::<super::RrsetAnswer>() <= 32);
}

/// Records at the edges of what compiles are built too: a TXT of one
/// empty string, a string longer than 255 bytes (split), and 48 KB of
/// TXT at one name (under the 60,000 bytes a name may take).
#[test]
fn records_at_the_edges_of_what_compiles_build() {
    let txt = |name: &str, values: &str| {
        format!(
            "[[domain]]\nname = \"example.test\"\nnameservers = [\"ns1.example.test\"]\n\n\
             [[domain.record]]\nname = \"{name}\"\ntype = \"TXT\"\nvalues = [{values}]\n"
        )
    };
    let fits: Vec<String> = (0..200)
        .map(|i| format!("'\"{i:03}{}\"'", "v".repeat(237)))
        .collect();
    for text in [
        txt("t", "'\"\"'"),
        txt("dkim", &format!("'\"{}\"'", "k".repeat(300))),
        txt("big", &fits.join(", ")),
    ] {
        let compiled = compile(&gtm_model::parse(&text).unwrap()).unwrap();
        assert!(
            Snapshot::build(&compiled, &Snapshot::default(), None, &[], &[]).is_ok(),
            "{}",
            &text[..120.min(text.len())]
        );
    }
}

/// `explain_choice` tells what `choose` does, for every balance and for
/// clients placed by source, by ECS, by a private ECS network or not at
/// all: the same group and ECS scope, every variant a draw picks is one it
/// lists, and every one it lists is drawn.
#[test]
fn explain_choice_names_what_choose_picks() {
    use super::{Client, Draw, choose, explain_choice};
    use crate::wire::Ecs;
    use std::{collections::HashSet, net::IpAddr};

    let mut text = String::from("[[domain]]\nname = \"c.test\"\nnameservers = [\"ns1.c.test\"]\n");
    for balance in ["round-robin", "random", "weighted", "persist", "priority"] {
        // Weighted: 1, 3 and 0 (never answered while another can be).
        let weight = |w: u32| match balance {
            "weighted" => format!(", weight = {w}"),
            _ => String::new(),
        };
        text.push_str(&format!(
            "[[domain.record]]\nname = \"{balance}\"\ntype = \"A\"\nbalance = \"{balance}\"\n\
             addresses = [{{ ip = \"192.0.2.1\"{} }}, {{ ip = \"192.0.2.2\"{} }}, {{ ip = \"192.0.2.3\"{} }}]\n",
            weight(1),
            weight(3),
            weight(0)
        ));
    }
    text.push_str(
        "[[domain.record]]\nname = \"geo\"\ntype = \"A\"\ntopology = true\naddresses = [\
         { ip = \"192.0.2.50\", countries = [\"DE\"] }, { ip = \"192.0.2.51\", continents = [\"EU\"] },\
         { ip = \"192.0.2.52\" }, { ip = \"192.0.2.53\" }]\n",
    );
    text.push_str(
        "[[domain.record]]\nname = \"ruled\"\ntype = \"A\"\naddresses = [\
         { ip = \"192.0.2.60\" }, { ip = \"192.0.2.61\" }, { ip = \"192.0.2.62\" }]\n\
         topology_rules = [{ client = \"10.1.0.0/16\", address = \"192.0.2.61\" },\
         { client = \"country:GB\", address = \"192.0.2.62\" }]\n",
    );
    // Each record's answer as the engine makes it: evaluated with every
    // address healthy, topology's places included.
    struct AllUp;
    impl gtm_resolve::HealthView for AllUp {
        fn check(&self, _: &gtm_model::condition::CheckRef) -> gtm_resolve::CheckState {
            gtm_resolve::CheckState::Ok
        }
        fn scenario_active(&self, _: &str) -> bool {
            true
        }
    }
    let compiled = compile(&gtm_model::parse(&text).unwrap()).unwrap();
    let topology = &*compiled.topology;
    let answer_of = |owner: &str| {
        let spec = compiled.zones[0]
            .records
            .iter()
            .find(|r| r.label() == format!("{owner}.c.test/A"))
            .unwrap();
        let gtm_model::compile::Content::Steered(steering) = &spec.content else {
            panic!("{owner} is steered");
        };
        let eval = gtm_resolve::evaluate(
            &spec.label(),
            steering,
            &compiled.datacenters,
            &AllUp,
            None,
            Default::default(),
        );
        super::steered_answer(
            &name(&format!("{owner}.c.test.")),
            30,
            steering,
            &eval.answers,
            None,
        )
        .unwrap()
    };
    let geo = gtm_geo::Geo::from_bytes(gtm_geo::DEMO_DATABASE.to_vec(), "demo", "test").unwrap();
    let ecs = |net: &str, prefix: u8| {
        let address: IpAddr = net.parse().unwrap();
        Some(Ecs {
            family: if address.is_ipv4() { 1 } else { 2 },
            source_prefix: prefix,
            address,
        })
    };
    let clients = [
        Client {
            src: "127.0.0.1".parse().unwrap(),
            ecs: None,
        },
        Client {
            src: "2.2.2.9".parse().unwrap(),
            ecs: None,
        },
        Client {
            src: "127.0.0.1".parse().unwrap(),
            ecs: ecs("81.2.69.0", 24),
        },
        Client {
            src: "127.0.0.1".parse().unwrap(),
            ecs: ecs("3.3.0.0", 20),
        },
        Client {
            src: "127.0.0.1".parse().unwrap(),
            ecs: ecs("10.1.2.0", 24),
        },
        Client {
            src: "81.2.69.1".parse().unwrap(),
            ecs: ecs("0.0.0.0", 0),
        },
    ];
    for owner in [
        "round-robin",
        "random",
        "weighted",
        "persist",
        "priority",
        "geo",
        "ruled",
    ] {
        let answer = answer_of(owner);
        assert_eq!(answer.places().is_empty(), owner != "geo", "{owner}");
        assert_eq!(answer.rules().is_empty(), owner != "ruled", "{owner}");
        for client in &clients {
            let told = explain_choice(&answer, topology, &geo, client);
            let mut draw = Draw::new(7);
            let mut drawn = HashSet::new();
            for _ in 0..300 {
                let c = choose(&answer, topology, &geo, client, &mut draw);
                assert_eq!(
                    (c.group, c.scope),
                    (told.group, told.scope),
                    "{owner} {client:?}"
                );
                assert!(
                    told.variants.iter().any(|&(v, _)| v == c.variant),
                    "{owner} {client:?}: variant {} not in {:?}",
                    c.variant,
                    told.variants
                );
                drawn.insert(c.variant);
            }
            assert_eq!(drawn.len(), told.variants.len(), "{owner} {client:?}");
        }
    }
    // The rule of 10.1.0.0/16 answers the private ECS 10.1.2.0/24, scoped
    // to the /16 that decided it; a client no rule holds gets them all.
    let ruled = answer_of("ruled");
    let chosen = |client: &Client| {
        let told = explain_choice(&ruled, topology, &geo, client);
        let records: Vec<String> = ruled.groups[told.group]
            .values
            .iter()
            .map(|v| v.rdata().to_string())
            .collect();
        (told.rule.map(|r| r.rule), records, told.scope)
    };
    assert_eq!(
        chosen(&clients[4]),
        (Some(0), vec!["192.0.2.61".to_string()], 16)
    );
    let nowhere = Client {
        src: "127.0.0.1".parse().unwrap(),
        ecs: ecs("192.0.2.0", 24),
    };
    let (rule, records, _) = chosen(&nowhere);
    assert_eq!((rule, records.len()), (None, 3));
}
