#![allow(clippy::print_stdout)] // a benchmark helper says what it wrote
//! Writes the GeoIP databases `scripts/bench-dns.sh` serves its `near-ecs`
//! and `asn-ecs` records with: `city.mmdb` (a GeoLite2-City layout: the
//! 256 /24 networks of 81.2.0.0/16, each with a country, a subdivision and
//! a location) and `asn.mmdb` (a GeoLite2-ASN layout:
//! 81.2.0.0/16 in AS64500). Run: `cargo run --release --example bench-geo -- DIR`.

use std::path::PathBuf;

#[derive(serde::Serialize)]
struct Code {
    iso_code: &'static str,
}

#[derive(serde::Serialize)]
struct Continent {
    code: &'static str,
}

#[derive(serde::Serialize)]
struct Location {
    latitude: f64,
    longitude: f64,
    accuracy_radius: u16,
}

#[derive(serde::Serialize)]
struct City {
    country: Code,
    continent: Continent,
    subdivisions: Vec<Code>,
    location: Location,
}

#[derive(serde::Serialize)]
struct Asn {
    autonomous_system_number: u32,
    autonomous_system_organization: &'static str,
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let dir: PathBuf = std::env::args_os()
        .nth(1)
        .ok_or("usage: bench-geo DIR")?
        .into();
    let mut city = mmdb_writer::Writer::new("GeoLite2-City");
    for i in 0..256u32 {
        let net: mmdb_writer::ipnet::IpNet = format!("81.2.{i}.0/24").parse()?;
        // Spread over Europe: 40–60° N, 10° W–30° E.
        let entry = City {
            country: Code { iso_code: "FR" },
            continent: Continent { code: "EU" },
            subdivisions: vec![Code { iso_code: "IDF" }],
            location: Location {
                latitude: 40.0 + f64::from(i % 20),
                longitude: -10.0 + f64::from(i % 40),
                accuracy_radius: 50,
            },
        };
        city.insert(net, &entry)?;
    }
    std::fs::write(dir.join("city.mmdb"), city.to_bytes()?)?;
    let mut asn = mmdb_writer::Writer::new("GeoLite2-ASN");
    let net: mmdb_writer::ipnet::IpNet = "81.2.0.0/16".parse()?;
    asn.insert(
        net,
        &Asn {
            autonomous_system_number: 64500,
            autonomous_system_organization: "Bench Carrier",
        },
    )?;
    std::fs::write(dir.join("asn.mmdb"), asn.to_bytes()?)?;
    println!("wrote {}/city.mmdb and asn.mmdb", dir.display());
    Ok(())
}
