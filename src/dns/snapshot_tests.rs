//! A zone that did not change is kept whole from one snapshot to the next.

use std::sync::Arc;

use hickory_server::proto::rr::{Name, RData, RecordType as Rt};

use super::snapshot::{Snapshot, wire_key};
use crate::model::compile::{Compiled, compile};

fn domain(name: &str, txt: &str) -> String {
    format!(
        "[[domain]]\nname = \"{name}\"\nnameservers = [\"ns1.{name}\"]\n\n\
         [[domain.record]]\nname = \"www\"\ntype = \"TXT\"\nvalues = [\"{txt}\"]\n\n\
         [[domain.record]]\nname = \"web.deep\"\ntype = \"A\"\naddresses = [{{ ip = \"192.0.2.1\" }}]\n"
    )
}

fn compiled(domains: &[(&str, &str)]) -> Compiled {
    let text: String = domains.iter().map(|(n, t)| domain(n, t)).collect();
    compile(&crate::model::parse(&text).unwrap()).unwrap()
}

fn build(compiled: &Compiled, previous: &Snapshot) -> Snapshot {
    Snapshot::build(compiled, previous, &[], &[]).unwrap()
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
    assert_eq!(second.zones[1].steered, 1..2);
    assert_eq!(second.zones[0].steered, 0..1);
    let kept = second.slot(&name("web.deep.a.test."), Rt::A).unwrap();
    assert!(Arc::ptr_eq(&second.steered[1], kept));
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
