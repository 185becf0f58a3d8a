//! GeoIP placement and ECS scope, with a country database built here.

use std::{net::IpAddr, path::Path};

use hickory_server::proto::rr::{RecordType, rdata::opt::EdnsOption};
use serde::Serialize;

use crate::support::*;

#[derive(Serialize)]
struct Code {
    iso_code: &'static str,
}

#[derive(Serialize)]
struct ContinentCode {
    code: &'static str,
}

#[derive(Serialize)]
struct Entry {
    country: Code,
    continent: ContinentCode,
}

/// A country database of type `kind` built at `epoch` (seconds) placing
/// each `(network, country, continent)`.
pub fn mmdb_bytes(
    kind: &str,
    epoch: u64,
    entries: &[(&str, &'static str, &'static str)],
) -> Vec<u8> {
    let built = std::time::UNIX_EPOCH + std::time::Duration::from_secs(epoch);
    let mut w = mmdb_writer::Writer::builder(kind)
        .build_epoch(built)
        .build();
    for (net, cc, cont) in entries {
        let net: mmdb_writer::ipnet::IpNet = net.parse().unwrap();
        w.insert(
            net,
            &Entry {
                country: Code { iso_code: cc },
                continent: ContinentCode { code: cont },
            },
        )
        .unwrap();
    }
    w.to_bytes().unwrap()
}

/// A GeoLite2-Country-shaped database: 81.2.69.0/24 in DE, 2.2.2.0/24 in
/// FR, 3.3.0.0/16 in the US.
pub fn write_mmdb(path: &Path) {
    let mut w = mmdb_writer::Writer::new("GeoLite2-Country");
    for (net, cc, cont) in [
        ("81.2.69.0/24", "DE", "EU"),
        ("2.2.2.0/24", "FR", "EU"),
        ("3.3.0.0/16", "US", "NA"),
    ] {
        let net: mmdb_writer::ipnet::IpNet = net.parse().unwrap();
        w.insert(
            net,
            &Entry {
                country: Code { iso_code: cc },
                continent: ContinentCode { code: cont },
            },
        )
        .unwrap();
    }
    std::fs::write(path, w.to_bytes().unwrap()).unwrap();
}

#[tokio::test]
async fn clients_are_placed_by_ecs_country_then_continent_then_default() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("country.mmdb");
    write_mmdb(&db);
    let d = TestDevice::start_with(ZONE, Some(db)).await;
    for (subnet, expect, scope) in [
        ("81.2.69.0/24", "192.0.2.50", 24),  // Germany
        ("2.2.2.0/24", "192.0.2.51", 24),    // France: Europe
        ("3.3.3.0/24", "192.0.2.52", 16),    // US: the default; the database network is a /16
        ("10.1.2.0/24", "192.0.2.52", 24),   // private: no place, scoped to its subnet
        ("198.18.5.0/24", "192.0.2.52", 24), // benchmarking: unroutable, as private
        ("240.1.2.0/24", "192.0.2.52", 24),  // reserved: unroutable, as private
    ] {
        let r = udp(
            d.v4(),
            &with_ecs(query("geo.example.test.", RecordType::A), subnet),
        )
        .await;
        assert_eq!(answers(&r), [expect], "{subnet}");
        let echoed = r
            .edns
            .unwrap()
            .options()
            .options
            .iter()
            .find_map(|(_, o)| match o {
                EdnsOption::Subnet(s) => Some((s.addr(), s.source_prefix(), s.scope_prefix())),
                _ => None,
            });
        let sent: IpAddr = subnet.split('/').next().unwrap().parse().unwrap();
        assert_eq!(
            echoed,
            Some((sent, 24, scope)),
            "{subnet}: address and source echoed, scope as decided"
        );
    }
    // Without ECS a loopback client has no place: the default.
    let r = udp(d.v4(), &query("geo.example.test.", RecordType::A)).await;
    assert_eq!(answers(&r), ["192.0.2.52"]);
}

#[test]
fn lookup_shows_place_as_the_dns_path_sees_it() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("country.mmdb");
    write_mmdb(&db);
    let geo = gtm_geo::Geo::open(&db).unwrap();
    let de = gtm_api::lookup_in(&geo, "81.2.69.7".parse().unwrap());
    assert_eq!(
        (de.country.as_deref(), de.continent.as_deref(), de.prefix),
        (Some("DE"), Some("EU"), 24)
    );
    let private = gtm_api::lookup_in(&geo, "192.168.1.1".parse().unwrap());
    assert_eq!(private.country, None);
    assert!(private.note.unwrap().contains("default records"));
    let none = gtm_api::lookup_in(&gtm_geo::Geo::none(), "81.2.69.7".parse().unwrap());
    assert_eq!(none.country, None);
}

#[test]
fn a_corrupt_database_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let bad = dir.path().join("bad.mmdb");
    std::fs::write(&bad, b"this is not a database").unwrap();
    assert!(gtm_geo::Geo::open(&bad).is_err());
}

/// A damaged database file (a stored file the device reads at start) is
/// refused or answers "no place": every one-byte change and every cut of a
/// real database, opened and looked up, and nothing panics.
#[test]
fn every_damaged_copy_of_a_database_is_refused_or_located_without_panic() {
    let dir = tempfile::tempdir().unwrap();
    let good = dir.path().join("good.mmdb");
    write_mmdb(&good);
    let bytes = std::fs::read(&good).unwrap();
    let path = dir.path().join("damaged.mmdb");
    let addresses: Vec<IpAddr> = [
        "81.2.69.7",
        "2.2.2.2",
        "3.3.3.3",
        "8.8.8.8",
        "2001:4860::1",
        "::ffff:81.2.69.7",
        "2a00:1450::1",
    ]
    .iter()
    .map(|a| a.parse().unwrap())
    .collect();
    let mut opened = 0;
    let mut try_copy = |copy: &[u8]| {
        std::fs::write(&path, copy).unwrap();
        if let Ok(geo) = gtm_geo::Geo::open(&path) {
            opened += 1;
            for ip in &addresses {
                let _ = geo.locate(*ip);
            }
        }
    };
    for i in 0..bytes.len() {
        for flip in [0xFF, 0x01, 0x80] {
            let mut copy = bytes.clone();
            copy[i] ^= flip;
            try_copy(&copy);
        }
    }
    for cut in (0..bytes.len()).step_by(7) {
        try_copy(&bytes[..cut]);
    }
    assert!(opened > 0, "some damage (in unused bytes) still opens");
}

/// The demo's embedded database, generated here (never downloaded):
/// 81.2.69.0/24 in DE, 2.2.2.0/24 in FR, 3.3.0.0/16 in the US, built
/// 2026-11-01. With `GTM_WRITE_DEMO_MMDB=1` it rewrites `crates/geo/src/demo.mmdb`;
/// otherwise it checks the committed file is exactly this.
#[test]
fn the_demo_database_is_generated_here() {
    let epoch = std::time::UNIX_EPOCH + std::time::Duration::from_secs(1_793_491_200);
    let mut w = mmdb_writer::Writer::builder("GTM-Demo-Country")
        .build_epoch(epoch)
        .build();
    for (net, cc, cont) in [
        ("81.2.69.0/24", "DE", "EU"),
        ("2.2.2.0/24", "FR", "EU"),
        ("3.3.0.0/16", "US", "NA"),
    ] {
        let net: mmdb_writer::ipnet::IpNet = net.parse().unwrap();
        w.insert(
            net,
            &Entry {
                country: Code { iso_code: cc },
                continent: ContinentCode { code: cont },
            },
        )
        .unwrap();
    }
    let bytes = w.to_bytes().unwrap();
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("crates/geo/src/demo.mmdb");
    if std::env::var_os("GTM_WRITE_DEMO_MMDB").is_some() {
        std::fs::write(&path, &bytes).unwrap();
    }
    assert_eq!(
        gtm_geo::DEMO_DATABASE,
        bytes.as_slice(),
        "crates/geo/src/demo.mmdb is not what this test generates: run it with GTM_WRITE_DEMO_MMDB=1"
    );
    let geo = gtm_geo::Geo::from_bytes(bytes, "demo", "demo").unwrap();
    let info = geo.info().unwrap();
    assert_eq!(
        (info.name.as_str(), info.built.as_str()),
        ("GTM-Demo-Country", "2026-11-01")
    );
}
