//! A primary's answers to a zone transfer (`gtm_dns::xfr_in::Incoming`),
//! as the `transfer-in` worker reads them message by message: an AXFR, or
//! an IXFR from a held zone.
//!
//! Input: one selector byte (bit 0: an IXFR from a held zone of three
//! records at serial 7; bit 1: signed, every answer checked with a key),
//! then 2-byte-length-prefixed messages.
//! Asserts: reading never panics; a whole transfer's text starts with the
//! zone's SOA at the serial it reports, holds one line per record and
//! reads the same when fed again; an IXFR that says the zone is current
//! gives the held zone's serial and records back; nothing more is taken
//! once the zone is whole.
#![no_main]

use gtm_dns::{
    tsig,
    xfr_in::{Chain, How, Incoming, Zone},
};
use hickory_server::proto::rr::Name;
use libfuzzer_sys::fuzz_target;

/// Messages read from one input at most.
const MAX_MESSAGES: usize = 32;
/// The time every message is read at.
const NOW: u64 = 1_800_000_000;

fn held() -> Zone {
    let text = "example.test. 300 IN SOA ns1.example.test. admin.example.test. 7 3600 600 86400 60\n\
                a.example.test. 60 IN A 192.0.2.1\n\
                www.example.test. 60 IN A 192.0.2.2\n";
    Zone {
        serial: 7,
        text: text.into(),
        records: 3,
        refresh: 3600,
    }
}

/// Reads `messages` as one transfer (checked with a key when `signed`):
/// its outcome and how many were read.
fn read(
    held: Option<&Zone>,
    signed: bool,
    messages: &[&[u8]],
) -> (Option<Result<(Zone, How), String>>, usize) {
    let zone = Name::from_ascii("example.test.").unwrap();
    let chain = signed
        .then(|| tsig::signer("xfr", &[7; 32]))
        .flatten()
        .map(|signer| Chain::new(signer, vec![9; 32]));
    let Ok(mut incoming) = Incoming::new(zone, held, chain) else {
        return (None, 0);
    };
    for (i, m) in messages.iter().enumerate() {
        match incoming.message(m, NOW) {
            Ok(None) => {}
            Ok(Some(done)) => {
                // Nothing more is taken once the zone is whole.
                assert!(incoming.message(m, NOW).is_err());
                return (Some(Ok(done)), i + 1);
            }
            Err(e) => return (Some(Err(e)), i + 1),
        }
    }
    (None, messages.len())
}

fuzz_target!(|data: &[u8]| {
    let Some((&selector, mut stream)) = data.split_first() else {
        return;
    };
    let kept = held();
    let held = (selector & 1 == 1).then_some(&kept);
    let signed = selector & 2 == 2;
    let mut messages = Vec::new();
    while messages.len() < MAX_MESSAGES {
        let Some((len, rest)) = stream.split_first_chunk::<2>() else {
            break;
        };
        let len = usize::from(u16::from_be_bytes(*len));
        let Some(message) = rest.get(..len) else {
            break;
        };
        messages.push(message);
        stream = &rest[len..];
    }
    let (outcome, _) = read(held, signed, &messages);
    if let Some(Ok((zone, how))) = &outcome {
        let first = zone.text.lines().next().unwrap_or_default();
        let fields: Vec<&str> = first.split(' ').collect();
        assert_eq!(fields.get(2..4), Some(&["IN", "SOA"][..]), "{first}");
        assert_eq!(
            fields.get(6),
            Some(&zone.serial.to_string().as_str()),
            "{first}"
        );
        assert_eq!(zone.text.lines().count(), zone.records, "{}", zone.text);
        // Current: the held zone's serial and records (the SOA line is
        // the primary's answer's).
        if *how == How::Current
            && let Some(held) = held
        {
            assert_eq!(zone.serial, held.serial);
            let records = |z: &Zone| {
                z.text
                    .lines()
                    .skip(1)
                    .map(str::to_string)
                    .collect::<Vec<_>>()
            };
            assert_eq!(
                records(zone),
                records(held),
                "current, yet not the held records"
            );
        }
    }
    // The same messages read again give the same outcome.
    assert_eq!(read(held, signed, &messages).0, outcome);
});
