//! Reports taken in whole and as changes.

use super::*;
use gtm_resolve::Status;

fn status(record: &str, status: Status) -> RecordStatus {
    RecordStatus {
        record: record.into(),
        status: Some(status),
        active: vec!["192.0.2.1".into()],
        decision: "the main addresses answer".into(),
        held: false,
    }
}

fn report(at: Option<RecordsAt>) -> Report {
    Report {
        device: "gtm2".into(),
        datacenter: "dc1".into(),
        version: 3,
        geoip: String::new(),
        geoip_info: None,
        checks: Vec::new(),
        scenarios: Vec::new(),
        records: RecordStates::default(),
        events: Vec::new(),
        records_at: at,
        records_base: None,
        changed: Vec::new(),
        page: None,
    }
}

fn at(epoch: u64, generation: u64) -> RecordsAt {
    RecordsAt { epoch, generation }
}

fn held(peers: &Peers) -> Vec<RecordStatus> {
    peers.reports.lock().unwrap()["gtm2"].2.statuses()
}

fn changes(from: Option<RecordsAt>, base: u64, changed: Vec<(usize, RecordStatus)>) -> Report {
    Report {
        records_base: Some(base),
        changed,
        ..report(from)
    }
}

#[test]
fn changes_apply_to_the_list_they_follow_and_nothing_else() {
    let peers = Peers::default();
    let mut whole = report(Some(at(7, 4)));
    whole.records = RecordStates::new(vec![status("a/A", Status::Ok), status("b/A", Status::Ok)]);
    assert_eq!(peers.receive(whole).held, Some(Held::At(at(7, 4))));
    let mut news = peers.subscribe();
    news.mark_unchanged();

    // The changes since generation 4: b went down.
    let answer = peers.receive(changes(
        Some(at(7, 6)),
        4,
        vec![(1, status("b/A", Status::Dr))],
    ));
    assert_eq!(answer.held, Some(Held::At(at(7, 6))));
    assert_eq!(
        held(&peers),
        [status("a/A", Status::Ok), status("b/A", Status::Dr)]
    );
    assert!(news.has_changed().unwrap(), "the console hears of it");
    news.mark_unchanged();
    // No change: nothing new for the console.
    peers.receive(changes(Some(at(7, 6)), 6, Vec::new()));
    assert!(!news.has_changed().unwrap());

    // Changes to a list not held (another generation, another process,
    // a place past its end) are not taken in: the held states stay, of no
    // known point, so the next report is whole.
    for refused in [
        changes(Some(at(7, 9)), 5, vec![(0, status("a/A", Status::Dr))]),
        changes(Some(at(8, 9)), 6, vec![(0, status("a/A", Status::Dr))]),
        changes(Some(at(7, 9)), 6, vec![(2, status("c/A", Status::Dr))]),
        changes(None, 6, vec![(0, status("a/A", Status::Dr))]),
    ] {
        // Each from the list at 6 again.
        let mut again = report(Some(at(7, 6)));
        again.records =
            RecordStates::new(vec![status("a/A", Status::Ok), status("b/A", Status::Dr)]);
        peers.receive(again);
        assert_eq!(peers.receive(refused).held, None);
        assert_eq!(
            held(&peers),
            [status("a/A", Status::Ok), status("b/A", Status::Dr)]
        );
    }
    // Once of no point, even changes from the right generation wait for
    // a whole list.
    let answer = peers.receive(changes(Some(at(7, 7)), 6, Vec::new()));
    assert_eq!(answer.held, None);
}

#[test]
fn a_report_of_an_earlier_version_is_taken_whole() {
    let peers = Peers::default();
    let json = serde_json::json!({
        "device": "gtm2", "datacenter": "dc1",
        "checks": [], "scenarios": [], "events": [],
        "records": [{"record": "a/A", "status": "OK", "active": [], "decision": ""}],
    });
    let old: Report = serde_json::from_value(json).unwrap();
    assert_eq!(peers.receive(old).held, None);
    assert_eq!(held(&peers).len(), 1);
}

fn page(from: RecordsAt, start: usize, total: usize, records: Vec<RecordStatus>) -> Report {
    Report {
        page: Some(Page { from, start, total }),
        records: RecordStates::new(records),
        ..report(None)
    }
}

fn pages(from: RecordsAt, next: usize) -> Option<Held> {
    Some(Held::Pages { from, next })
}

/// A list in pages is held once its last page is in; until then the list
/// held before stays on show, and pages out of turn are not taken.
#[test]
fn a_list_in_pages_is_held_once_every_page_is_in() {
    let peers = Peers::default();
    let mut whole = report(Some(at(7, 4)));
    whole.records = RecordStates::new(vec![status("a/A", Status::Ok)]);
    peers.receive(whole);
    let (a, b, c) = (
        status("a/A", Status::Dr),
        status("b/A", Status::Ok),
        status("c/A", Status::Ok),
    );
    let from = at(8, 2);
    let answer = peers.receive(page(from, 0, 3, vec![a.clone(), b.clone()]));
    assert_eq!(answer.held, pages(from, 2));
    assert_eq!(
        held(&peers),
        [status("a/A", Status::Ok)],
        "the old list stays on show"
    );
    // Changes to the old list are no longer taken.
    assert_eq!(
        peers.receive(changes(Some(at(7, 5)), 4, Vec::new())).held,
        None
    );
    // Out of turn (a place already held, another list, past the end): not
    // taken; the answer says where the pages stand.
    for wrong in [
        page(from, 1, 3, vec![c.clone()]),
        page(at(8, 3), 2, 3, vec![c.clone()]),
        page(from, 2, 4, vec![c.clone()]),
    ] {
        assert_eq!(peers.receive(wrong).held, pages(from, 2));
    }
    let mut news = peers.subscribe();
    news.mark_unchanged();
    let answer = peers.receive(page(from, 2, 3, vec![c.clone()]));
    assert_eq!(answer.held, Some(Held::At(from)));
    assert_eq!(held(&peers), [a.clone(), b, c.clone()]);
    assert!(news.has_changed().unwrap(), "the console hears of it");
    // Then the changes since the first page's point.
    let answer = peers.receive(changes(Some(at(8, 5)), 2, vec![(0, c.clone())]));
    assert_eq!(answer.held, Some(Held::At(at(8, 5))));
    assert_eq!(held(&peers)[0], c);

    // A page past a list's end drops the pages; one that follows none is
    // not taken.
    let from = at(9, 1);
    assert_eq!(
        peers
            .receive(page(from, 0, 1, vec![a.clone(), a.clone()]))
            .held,
        None
    );
    assert_eq!(peers.receive(page(from, 1, 2, vec![a.clone()])).held, None);
    // An empty list is whole at once.
    assert_eq!(
        peers.receive(page(from, 0, 0, Vec::new())).held,
        Some(Held::At(from))
    );
    assert!(held(&peers).is_empty());
}

#[test]
fn a_large_report_has_the_time_its_size_needs() {
    assert_eq!(
        report_timeout(10_000),
        REPORT_BASE + Duration::from_millis(1)
    );
    // A million records' whole list, about 100 MB: 11.5 s, not 1.5.
    assert_eq!(report_timeout(100_000_000), Duration::from_millis(11_500));
}

/// The answer says how far the reporter's events are held: a device that
/// restarted holds none and says 0, so they are sent again.
#[test]
fn an_answer_says_how_far_the_reporters_events_are_held() {
    let event = |seq: u64| Event {
        seq,
        time_ms: seq,
        device: "gtm2".into(),
        kind: gtm_engine::EventKind::Device,
        severity: gtm_engine::Severity::Warning,
        object: "gtm2".into(),
        text: format!("event {seq}"),
    };
    let peers = Peers::default();
    let mut r = report(None);
    r.events = vec![event(1), event(2), event(3)];
    assert_eq!(peers.receive(r).events_through, Some(3));
    // Again: nothing new, nothing held twice.
    let mut r = report(None);
    r.events = vec![event(2), event(3)];
    assert_eq!(peers.receive(r).events_through, Some(3));
    assert_eq!(peers.events().len(), 3);
    let restarted = Peers::default();
    assert_eq!(restarted.receive(report(None)).events_through, Some(0));
}
