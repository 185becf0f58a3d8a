//! Reports taken in whole and as changes.

use super::*;
use crate::resolve::Status;

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
        records: Vec::new(),
        events: Vec::new(),
        records_at: at,
        records_base: None,
        changed: Vec::new(),
    }
}

fn at(epoch: u64, generation: u64) -> RecordsAt {
    RecordsAt { epoch, generation }
}

fn held(peers: &Peers) -> Vec<RecordStatus> {
    peers.reports.lock().unwrap()["gtm2"].1.records.clone()
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
    whole.records = vec![status("a/A", Status::Ok), status("b/A", Status::Ok)];
    assert_eq!(peers.receive(whole).records_at, Some(at(7, 4)));
    let mut news = peers.subscribe();
    news.mark_unchanged();

    // The changes since generation 4: b went down.
    let answer = peers.receive(changes(
        Some(at(7, 6)),
        4,
        vec![(1, status("b/A", Status::Dr))],
    ));
    assert_eq!(answer.records_at, Some(at(7, 6)));
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
        again.records = vec![status("a/A", Status::Ok), status("b/A", Status::Dr)];
        peers.receive(again);
        assert_eq!(peers.receive(refused).records_at, None);
        assert_eq!(
            held(&peers),
            [status("a/A", Status::Ok), status("b/A", Status::Dr)]
        );
    }
    // Once of no point, even changes from the right generation wait for
    // a whole list.
    let answer = peers.receive(changes(Some(at(7, 7)), 6, Vec::new()));
    assert_eq!(answer.records_at, None);
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
    assert_eq!(peers.receive(old).records_at, None);
    assert_eq!(held(&peers).len(), 1);
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
