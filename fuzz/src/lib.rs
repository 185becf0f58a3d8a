//! What gtm's fuzz targets share: the fixed configuration the DNS targets
//! answer from, the device state built from it, and the strict parser every
//! response must pass.

use std::{net::SocketAddr, sync::LazyLock};

use gtm_dns::{handler::{DnsState, Handler}, snapshot::Snapshot};
use gtm_engine::{Engine, Prepared};
use gtm_geo::Geo;
use hickory_server::proto::{
    op::Message,
    serialize::binary::{BinDecodable, BinDecoder},
};

/// A realistic configuration: steered records with DR, weighted, persist
/// and topology balance, static records of every common type (a TXT RRset
/// too large for 512 bytes among them), a CNAME, a wildcard, two zones, the
/// second with an apex alias, a delegation with glue, HTTPS, LOC and a type
/// written generically.
pub const ZONE: &str = r#"
[[datacenter]]
name = "dc1"
country = "DE"
continent = "EU"

[[datacenter]]
name = "dc2"
country = "US"
continent = "NA"

[[check]]
name = "web"
type = "http"

[[scenario]]
name = "dc1-down"
condition = "NOT (web@192.0.2.10 OR web@192.0.2.11)"

[[domain]]
name = "example.test"
ttl = 30
main_dc = "dc1"
dr_dc = "dc2"
nameservers = ["ns1.example.test", "ns2.example.test"]
soa = { minimum = 20 }

[[domain.record]]
name = "www"
type = "A"
ttl = 60
addresses = [
  { ip = "192.0.2.10", dc = "dc1", hc = "check:web" },
  { ip = "192.0.2.11", dc = "dc1", hc = "check:web" },
]

[[domain.record]]
name = "dr"
type = "A"
mode = "disaster-recovery"
fail_safe = ["192.0.2.250"]
addresses = [
  { ip = "192.0.2.20", dc = "dc1", hc = "check:web" },
  { ip = "198.51.100.20", dc = "dc2" },
]

[[domain.record]]
name = "w"
type = "A"
balance = "weighted"
addresses = [
  { ip = "192.0.2.40", weight = 1 },
  { ip = "192.0.2.41", weight = 3 },
  { ip = "192.0.2.42", weight = 0 },
]

[[domain.record]]
name = "geo"
type = "A"
topology = true
addresses = [
  { ip = "192.0.2.50", countries = ["DE"] },
  { ip = "192.0.2.51", continents = ["EU"] },
  { ip = "192.0.2.52" },
]

[[domain.record]]
name = "geo"
type = "AAAA"
topology = true
addresses = [
  { ip = "2001:db8::50", countries = ["DE"] },
  { ip = "2001:db8::52" },
]

[[domain.record]]
name = "sticky"
type = "A"
balance = "persist"
addresses = [{ ip = "192.0.2.60" }, { ip = "192.0.2.61" }, { ip = "192.0.2.62" }]

[[domain.record]]
name = "many"
type = "A"
addresses = [
  { ip = "192.0.2.100" }, { ip = "192.0.2.101" }, { ip = "192.0.2.102" }, { ip = "192.0.2.103" },
  { ip = "192.0.2.104" }, { ip = "192.0.2.105" }, { ip = "192.0.2.106" }, { ip = "192.0.2.107" },
  { ip = "192.0.2.108" }, { ip = "192.0.2.109" }, { ip = "192.0.2.110" }, { ip = "192.0.2.111" },
  { ip = "192.0.2.112" }, { ip = "192.0.2.113" }, { ip = "192.0.2.114" }, { ip = "192.0.2.115" },
  { ip = "192.0.2.116" }, { ip = "192.0.2.117" }, { ip = "192.0.2.118" }, { ip = "192.0.2.119" },
  { ip = "192.0.2.120" }, { ip = "192.0.2.121" }, { ip = "192.0.2.122" }, { ip = "192.0.2.123" },
  { ip = "192.0.2.124" }, { ip = "192.0.2.125" }, { ip = "192.0.2.126" }, { ip = "192.0.2.127" },
  { ip = "192.0.2.128" }, { ip = "192.0.2.129" }, { ip = "192.0.2.130" }, { ip = "192.0.2.131" },
]

[[domain.record]]
name = "*.wild"
type = "A"
addresses = [{ ip = "192.0.2.70" }]

[[domain.record]]
name = "v6"
type = "AAAA"
addresses = [{ ip = "2001:db8::1" }]

[[domain.record]]
name = "alias"
type = "CNAME"
addresses = [{ target = "www.example.test" }]

[[domain.record]]
name = "outside"
type = "CNAME"
addresses = [{ target = "www.other.test" }]

[[domain.record]]
name = "@"
type = "MX"
values = ["10 mail.example.test."]

[[domain.record]]
name = "@"
type = "TXT"
values = ["\"hello world\""]

[[domain.record]]
name = "_sip._udp"
type = "SRV"
values = ["10 5 5060 sip.example.test."]

[[domain.record]]
name = "@"
type = "CAA"
values = ["0 issue \"ca.example.net\""]

[[domain.record]]
name = "big"
type = "TXT"
values = [
  "\"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\"",
  "\"bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb\"",
  "\"cccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccc\"",
]

[[domain]]
name = "other.test"
nameservers = ["ns1.example.test"]

[[domain.record]]
name = "www"
type = "A"
balance = "round-robin"
addresses = [{ ip = "203.0.113.1" }, { ip = "203.0.113.2" }]

[[domain.record]]
name = "@"
type = "A"
alias = "www"

[[domain.record]]
name = "sub"
type = "NS"
values = ["ns1.sub", "ns.example.net."]

[[domain.record]]
name = "ns1.sub"
type = "A"
addresses = [{ ip = "203.0.113.53" }]

[[domain.record]]
name = "@"
type = "HTTPS"
values = ["1 . alpn=h2,h3 port=8443"]

[[domain.record]]
name = "geo"
type = "LOC"
values = ["52 22 23 N 4 53 32 E -2m"]

[[domain.record]]
name = "x"
type = "TYPE65280"
values = ['\# 4 0A000001']
"#;

/// The client addresses a fuzz input picks from (its first byte): placed
/// ones (DE, FR, US), unplaced, private, loopback and IPv6.
pub const SOURCES: [&str; 8] = [
    "81.2.69.7:5353",
    "2.2.2.2:5353",
    "3.3.3.3:5353",
    "198.51.100.9:5353",
    "10.1.2.3:5353",
    "127.0.0.1:5353",
    "[2001:db8::7]:5353",
    "[::1]:5353",
];

/// The client address for a selector byte.
pub fn source(selector: u8) -> SocketAddr {
    SOURCES[usize::from(selector) % SOURCES.len()]
        .parse()
        .expect("literal address")
}

/// The answering side of one device serving [`ZONE`]. The engine is kept:
/// it owns the state the handler reads.
#[derive(Debug)]
pub struct Device {
    pub engine: Engine,
    pub handler: Handler,
}

/// The device every DNS target asks, built once per process.
pub fn device() -> &'static Device {
    static DEVICE: LazyLock<Device> = LazyLock::new(|| {
        let state = DnsState::new(Snapshot::default(), geo(), 1232);
        let config = gtm_model::parse(ZONE).expect("the fuzz configuration parses");
        let prepared = Prepared::new(1, &Default::default(), config, &state)
            .expect("the fuzz configuration compiles");
        let engine = Engine::new("fuzz", prepared, state, None);
        let handler = Handler {
            state: engine.dns().clone(),
        };
        Device { engine, handler }
    });
    &DEVICE
}

/// A small country database: 81.2.69.0/24 DE, 2.2.2.0/24 FR, 3.3.0.0/16 US.
pub fn geo() -> Geo {
    #[derive(serde::Serialize)]
    struct Code<'a> {
        iso_code: &'a str,
    }
    #[derive(serde::Serialize)]
    struct ContinentCode<'a> {
        code: &'a str,
    }
    #[derive(serde::Serialize)]
    struct Entry<'a> {
        country: Code<'a>,
        continent: ContinentCode<'a>,
    }
    let mut w = mmdb_writer::Writer::new("GeoLite2-Country");
    for (net, cc, cont) in [
        ("81.2.69.0/24", "DE", "EU"),
        ("2.2.2.0/24", "FR", "EU"),
        ("3.3.0.0/16", "US", "NA"),
    ] {
        let net: mmdb_writer::ipnet::IpNet = net.parse().expect("literal network");
        w.insert(
            net,
            &Entry {
                country: Code { iso_code: cc },
                continent: ContinentCode { code: cont },
            },
        )
        .expect("inserting a literal network");
    }
    let path = std::env::temp_dir().join(format!("gtm-fuzz-{}.mmdb", std::process::id()));
    std::fs::write(&path, w.to_bytes().expect("encoding the database"))
        .expect("writing the database");
    let geo = Geo::open(&path).expect("opening the database");
    let _ = std::fs::remove_file(&path);
    geo
}

/// Decodes a response as a strict client does: the whole message, with no
/// byte left after the counted records.
pub fn strict_decode(bytes: &[u8]) -> Result<Message, String> {
    let mut decoder = BinDecoder::new(bytes);
    let message = Message::read(&mut decoder).map_err(|e| e.to_string())?;
    if !decoder.is_empty() {
        return Err(format!("{} bytes after the last record", decoder.len()));
    }
    Ok(message)
}

/// Lower-case hex, for reproducers in assertion messages.
pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// A query as a stub resolver sends it: RD set, EDNS with a 1,232-byte
/// payload when `edns`.
pub fn query(
    name: hickory_server::proto::rr::Name,
    rtype: hickory_server::proto::rr::RecordType,
    edns: bool,
) -> Message {
    use hickory_server::proto::op::{Edns, MessageType, OpCode, Query};
    let mut m = Message::new(0x4242, MessageType::Query, OpCode::Query);
    m.metadata.recursion_desired = true;
    m.add_query(Query::query(name, rtype));
    if edns {
        let mut e = Edns::new();
        e.set_max_payload(1232);
        m.set_edns(e);
    }
    m
}
