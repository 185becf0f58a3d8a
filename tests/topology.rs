//! Topology rules over real UDP (docs/topology.md): branch offices whose
//! resolvers have addresses of their own (127.0.130.x and 127.0.131.x on
//! loopback, and ::1), private ECS subnets, a country from a database
//! built here; each answer's ECS scope is the block the rule decided; a
//! region edited as an object moves the answers; explain names the rule.

use std::net::{IpAddr, SocketAddr};

use hickory_server::proto::{op::Message, rr::RecordType};

use crate::{geo::write_mmdb, support::*};

const CONFIG: &str = r#"
[[datacenter]]
name = "east"

[[datacenter]]
name = "west"

[[region]]
name = "branch-a"
networks = ["127.0.130.0/24", "10.20.0.0/16"]
exclude_networks = ["10.20.99.0/24"]

[[region]]
name = "branch-b"
networks = ["127.0.131.0/24", "10.30.0.0/16"]

[[domain]]
name = "topo.test"
nameservers = ["ns1.topo.test"]
topology_rules = [
  { client = "region:branch-a", datacenter = "east" },
  { client = "region:branch-b", datacenter = "west" },
  { client = "::1/128", datacenter = "west" },
  { client = "country:DE", address = "192.0.2.20" },
]

[[domain.record]]
name = "www"
type = "A"
addresses = [{ ip = "192.0.2.10", dc = "east" }, { ip = "192.0.2.20", dc = "west" }]

[[domain.record]]
name = "near"
type = "A"
addresses = [{ ip = "192.0.2.30", dc = "east" }, { ip = "192.0.2.40", dc = "west" }]
topology_rules = [{ client = "10.20.5.0/24", datacenter = "west" }]
"#;

/// Asks `name A` of `server` from the address `from`, with `ecs` when
/// given.
async fn ask_from(from: IpAddr, server: SocketAddr, name: &str, ecs: Option<&str>) -> Message {
    let mut q = query(name, RecordType::A);
    if let Some(subnet) = ecs {
        q = with_ecs(q, subnet);
    }
    Message::from_vec(&udp_raw_from(from, server, &q.to_vec().unwrap()).await).unwrap()
}

/// The answer's addresses, sorted.
fn sorted(m: &Message) -> Vec<String> {
    let mut a = answers(m);
    a.sort();
    a
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn branch_offices_get_their_datacenter_by_resolver_address_and_ecs() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("country.mmdb");
    write_mmdb(&db);
    let d = TestDevice::start_with(CONFIG, Some(db)).await;
    let v4 = d.v4();
    let ip = |s: &str| s.parse::<IpAddr>().unwrap();

    // By the resolver's own address.
    for (from, want) in [
        ("127.0.130.7", vec!["192.0.2.10"]),
        ("127.0.131.7", vec!["192.0.2.20"]),
        ("127.0.132.7", vec!["192.0.2.10", "192.0.2.20"]),
    ] {
        let r = ask_from(ip(from), v4, "www.topo.test.", None).await;
        assert_eq!(sorted(&r), want, "from {from}");
        assert_eq!(ecs_scope(&r), None, "no ECS asked, none told");
    }
    // IPv6: the rule of ::1/128.
    let r = ask_from(ip("::1"), d.v6(), "www.topo.test.", None).await;
    assert_eq!(sorted(&r), ["192.0.2.20"], "from ::1");

    // By ECS (private subnets, as enterprise resolvers send them), each
    // answer scoped to the block its rule decided.
    for (subnet, want, want_scope) in [
        ("10.20.1.0/24", vec!["192.0.2.10"], 18),
        ("10.20.200.0/24", vec!["192.0.2.10"], 17),
        ("10.30.4.0/24", vec!["192.0.2.20"], 16),
        ("10.20.99.0/24", vec!["192.0.2.10", "192.0.2.20"], 24),
        ("81.2.69.0/24", vec!["192.0.2.20"], 24),
    ] {
        let r = ask_from(ip("127.0.0.1"), v4, "www.topo.test.", Some(subnet)).await;
        assert_eq!(sorted(&r), want, "ECS {subnet}");
        assert_eq!(ecs_scope(&r), Some(want_scope), "ECS {subnet}: scope");
    }
    // A record's own rule replaces the domain's: 10.20.5.0/24 goes west,
    // the rest of branch-a has no rule there.
    let r = ask_from(ip("127.0.0.1"), v4, "near.topo.test.", Some("10.20.5.0/24")).await;
    assert_eq!(sorted(&r), ["192.0.2.40"]);
    assert_eq!(ecs_scope(&r), Some(24));
    let r = ask_from(ip("127.0.130.7"), v4, "near.topo.test.", None).await;
    assert_eq!(sorted(&r), ["192.0.2.30", "192.0.2.40"]);

    // Explain names the rule and how closely it held the client.
    let out = run_gtm(
        &d,
        &[
            "record",
            "explain",
            "www.topo.test",
            "A",
            "--ecs",
            "10.30.4.0/24",
            "--json",
        ],
    );
    assert!(out.code == Some(0), "{}", out.stderr);
    let explained: serde_json::Value = serde_json::from_str(&out.stdout).unwrap();
    let rule = explained["steps"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["step"] == "rule")
        .expect("a rule step");
    assert_eq!(
        rule["outcome"], "rule 2 (region:branch-b → datacenter west, weight 1)",
        "{explained}"
    );
    assert!(
        rule["reason"]
            .as_str()
            .unwrap()
            .contains("by a /16 network"),
        "{rule}"
    );

    // The preview lists the rules with what each answers now.
    let out = run_gtm(&d, &["record", "preview", "www.topo.test", "A", "--json"]);
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    let preview: serde_json::Value = serde_json::from_str(&out.stdout).unwrap();
    let rules = preview["rules"].as_array().expect("rules");
    assert_eq!(rules.len(), 4, "{preview}");
    assert_eq!(rules[0]["client"], "region:branch-a");
    assert_eq!(rules[0]["target"], "datacenter east");
    assert_eq!(rules[0]["skipped"], false);
    assert_eq!(rules[0]["active"][0]["ip"], "192.0.2.10", "{preview}");
    assert_eq!(rules[2]["client"], "::1/128");
    let text = run_gtm(&d, &["record", "preview", "www.topo.test", "A"]);
    assert!(
        text.stdout
            .contains("rule 2 region:branch-b → datacenter west (weight 1): 192.0.2.20"),
        "{}",
        text.stdout
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_region_edited_as_an_object_moves_the_answers_and_bad_ones_are_refused() {
    let d = TestDevice::start(CONFIG).await;
    let v4 = d.v4();
    let from: IpAddr = "127.0.133.7".parse().unwrap();
    let r = ask_from(from, v4, "www.topo.test.", None).await;
    assert_eq!(sorted(&r), ["192.0.2.10", "192.0.2.20"]);
    // The region gains the office's resolvers: they go east.
    let file = d.dir.path().join("region.toml");
    std::fs::write(
        &file,
        "networks = [\"127.0.130.0/24\", \"127.0.133.0/24\", \"10.20.0.0/16\"]\nexclude_networks = [\"10.20.99.0/24\"]\n",
    )
    .unwrap();
    let out = run_gtm(
        &d,
        &[
            "region",
            "put",
            "branch-a",
            "--file",
            file.to_str().unwrap(),
        ],
    );
    assert!(out.code == Some(0), "{} {}", out.stdout, out.stderr);
    let r = ask_from(from, v4, "www.topo.test.", None).await;
    assert_eq!(sorted(&r), ["192.0.2.10"]);
    let shown = run_gtm(&d, &["region", "show", "branch-a", "--json"]);
    assert!(shown.stdout.contains("127.0.133.0/24"), "{}", shown.stdout);
    // A network with host bits set is refused, naming the value and the
    // region; nothing changes.
    std::fs::write(&file, "networks = [\"127.0.133.1/24\"]\n").unwrap();
    let out = run_gtm(
        &d,
        &[
            "region",
            "put",
            "branch-a",
            "--file",
            file.to_str().unwrap(),
        ],
    );
    assert_ne!(out.code, Some(0));
    assert!(
        out.stderr.contains(
            "region branch-a: network \"127.0.133.1/24\" has host bits set: write 127.0.133.0/24"
        ),
        "{}",
        out.stderr
    );
    let r = ask_from(from, v4, "www.topo.test.", None).await;
    assert_eq!(sorted(&r), ["192.0.2.10"], "nothing half-applied");
    // A region a rule names cannot be deleted from under it.
    let out = run_gtm(&d, &["region", "delete", "branch-b"]);
    assert_ne!(out.code, Some(0));
    assert!(
        out.stderr.contains("unknown region \"branch-b\""),
        "{}",
        out.stderr
    );
}

#[derive(serde::Serialize)]
struct CityEntry {
    country: IsoCode,
    continent: ContinentCode,
    subdivisions: Vec<IsoCode>,
    #[serde(skip_serializing_if = "Option::is_none")]
    location: Option<Location>,
}

#[derive(serde::Serialize)]
struct Location {
    latitude: f64,
    longitude: f64,
    accuracy_radius: u16,
}

#[derive(serde::Serialize)]
struct IsoCode {
    iso_code: &'static str,
}

#[derive(serde::Serialize)]
struct ContinentCode {
    code: &'static str,
}

/// A GeoLite2-City-shaped database: 3.3.1.0/24 in Los Angeles,
/// California, 3.3.2.0/24 in New York (first subdivision), 3.3.3.0/24 in
/// Denver, the US with no subdivision, 3.3.4.0/24 in Paris, 3.3.5.0/24
/// in the US with no location.
fn write_city_mmdb(path: &std::path::Path) {
    let mut w = mmdb_writer::Writer::new("GeoLite2-City");
    for (net, country, continent, subdivisions, location) in [
        (
            "3.3.1.0/24",
            "US",
            "NA",
            vec!["CA"],
            Some((34.0522, -118.2437)),
        ),
        (
            "3.3.2.0/24",
            "US",
            "NA",
            vec!["NY", "XX"],
            Some((40.7128, -74.0060)),
        ),
        ("3.3.3.0/24", "US", "NA", vec![], Some((39.7392, -104.9903))),
        (
            "3.3.4.0/24",
            "FR",
            "EU",
            vec!["IDF"],
            Some((48.8566, 2.3522)),
        ),
        ("3.3.5.0/24", "US", "NA", vec![], None),
    ] {
        let net: mmdb_writer::ipnet::IpNet = net.parse().unwrap();
        let entry = CityEntry {
            country: IsoCode { iso_code: country },
            continent: ContinentCode { code: continent },
            subdivisions: subdivisions
                .into_iter()
                .map(|iso_code| IsoCode { iso_code })
                .collect(),
            location: location.map(|(latitude, longitude)| Location {
                latitude,
                longitude,
                accuracy_radius: 20,
            }),
        };
        w.insert(net, &entry).unwrap();
    }
    std::fs::write(path, w.to_bytes().unwrap()).unwrap();
}

/// US states from a City database: California's clients go west, New
/// York's east, the rest of the US by its country rule.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn subdivisions_of_a_city_database_steer_by_state() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("city.mmdb");
    write_city_mmdb(&db);
    let config = r#"
[[datacenter]]
name = "east"

[[datacenter]]
name = "west"

[[region]]
name = "west-coast"
subdivisions = ["US-CA", "US-OR", "US-WA"]

[[domain]]
name = "states.test"
nameservers = ["ns1.states.test"]

[[domain.record]]
name = "www"
type = "A"
addresses = [
  { ip = "192.0.2.10", dc = "east" },
  { ip = "192.0.2.20", dc = "west" },
  { ip = "192.0.2.30", dc = "east" },
]
topology_rules = [
  { client = "region:west-coast", datacenter = "west" },
  { client = "subdivision:US-NY", address = "192.0.2.10" },
  { client = "country:US", address = "192.0.2.30" },
]
"#;
    let d = TestDevice::start_with(config, Some(db)).await;
    let local: IpAddr = "127.0.0.1".parse().unwrap();
    for (subnet, want) in [
        ("3.3.1.0/24", "192.0.2.20"),
        ("3.3.2.0/24", "192.0.2.10"),
        ("3.3.3.0/24", "192.0.2.30"),
    ] {
        let r = ask_from(local, d.v4(), "www.states.test.", Some(subnet)).await;
        assert_eq!(sorted(&r), [want], "ECS {subnet}");
        assert_eq!(
            ecs_scope(&r),
            Some(24),
            "ECS {subnet}: the database's network"
        );
    }
    let out = run_gtm(&d, &["geoip", "lookup", "3.3.1.7", "--json"]);
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    let found: serde_json::Value = serde_json::from_str(&out.stdout).unwrap();
    assert_eq!(found["subdivision"], "US-CA", "{found}");
    assert_eq!(found["latitude"], 34.0522, "{found}");
    assert_eq!(found["longitude"], -118.2437, "{found}");
}

/// Nearest by distance from a City database's locations: each client
/// gets the datacenter nearest to it with a candidate, a drained one
/// sends its clients to the next nearest, a rule still comes first, and
/// a client with no location gets every candidate.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_nearest_datacenter_with_a_candidate_answers_each_client() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("city.mmdb");
    write_city_mmdb(&db);
    let config = r#"
[[datacenter]]
name = "west"
latitude = 37.7749
longitude = -122.4194

[[datacenter]]
name = "east"
latitude = 40.7128
longitude = -74.0060

[[datacenter]]
name = "fra"
latitude = 50.1109
longitude = 8.6821

[[domain]]
name = "near.test"
nameservers = ["ns1.near.test"]

[[domain.record]]
name = "www"
type = "A"
nearest = true
addresses = [
  { ip = "192.0.2.10", dc = "west" },
  { ip = "192.0.2.20", dc = "east" },
  { ip = "192.0.2.30", dc = "fra" },
]
topology_rules = [{ client = "10.1.0.0/16", datacenter = "fra" }]
"#;
    let d = TestDevice::start_with(config, Some(db)).await;
    let local: IpAddr = "127.0.0.1".parse().unwrap();
    let server = d.v4();
    let ask = |subnet: &'static str| async move {
        let r = ask_from(local, server, "www.near.test.", Some(subnet)).await;
        (sorted(&r), ecs_scope(&r))
    };
    for (subnet, want) in [
        ("3.3.1.0/24", "192.0.2.10"),
        ("3.3.2.0/24", "192.0.2.20"),
        ("3.3.3.0/24", "192.0.2.10"),
        ("3.3.4.0/24", "192.0.2.30"),
    ] {
        assert_eq!(
            ask(subnet).await,
            (vec![want.to_string()], Some(24)),
            "ECS {subnet}: the nearest, scoped to the database's network"
        );
    }
    // A rule comes first: its /16, whatever the distance.
    assert_eq!(
        ask("10.1.2.0/24").await,
        (vec!["192.0.2.30".into()], Some(16))
    );
    // No location: every candidate.
    let (all, _) = ask("3.3.5.0/24").await;
    assert_eq!(all, ["192.0.2.10", "192.0.2.20", "192.0.2.30"]);

    let out = run_gtm(
        &d,
        &[
            "record",
            "explain",
            "www.near.test",
            "A",
            "--ecs",
            "3.3.3.0/24",
            "--json",
        ],
    );
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    let explained: serde_json::Value = serde_json::from_str(&out.stdout).unwrap();
    let step = explained["steps"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["step"] == "nearest")
        .unwrap_or_else(|| panic!("a nearest step: {explained}"));
    assert_eq!(step["outcome"], "datacenter west", "{step}");
    let reason = step["reason"].as_str().unwrap();
    assert!(
        reason.contains("west 1") && reason.contains("east 2"),
        "{reason}"
    );

    // West drained: Los Angeles and Denver go to the next nearest, east.
    let out = run_gtm(&d, &["dc", "drain", "west"]);
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    assert_eq!(ask("3.3.1.0/24").await.0, ["192.0.2.20"]);
    assert_eq!(ask("3.3.3.0/24").await.0, ["192.0.2.20"]);
    let out = run_gtm(&d, &["record", "preview", "www.near.test", "A"]);
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    assert!(
        out.stdout.contains("nearest west: skipped (no candidate)")
            && out.stdout.contains("nearest east: 192.0.2.20"),
        "{}",
        out.stdout
    );
}

/// A rule that names a group answers from the group's healthy addresses,
/// across datacenters; a group with none left is skipped; preview and
/// explain name the group.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_rule_sends_a_branch_to_a_group_of_addresses() {
    let config = r#"
[[datacenter]]
name = "east"

[[datacenter]]
name = "west"

[[domain]]
name = "groups.test"
nameservers = ["ns1.groups.test"]

[[domain.record]]
name = "app"
type = "A"
addresses = [
  { ip = "192.0.2.71", dc = "east", group = "edge" },
  { ip = "192.0.2.72", dc = "west", group = "edge" },
  { ip = "192.0.2.73", dc = "east", group = "core" },
]
topology_rules = [
  { client = "127.0.140.0/24", group = "edge" },
  { client = "127.0.141.0/24", group = "core" },
]
"#;
    let d = TestDevice::start_with(config, None).await;
    let server = d.v4();
    let ask = |from: &'static str| async move {
        let from: IpAddr = from.parse().unwrap();
        sorted(&ask_from(from, server, "app.groups.test.", None).await)
    };
    assert_eq!(ask("127.0.140.9").await, ["192.0.2.71", "192.0.2.72"]);
    assert_eq!(ask("127.0.141.9").await, ["192.0.2.73"]);
    assert_eq!(
        ask("127.0.142.9").await,
        ["192.0.2.71", "192.0.2.72", "192.0.2.73"]
    );
    // Each rule counted the response it decided.
    let out = run_gtm(&d, &["record", "stats", "app.groups.test", "A", "--json"]);
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    let stats: serde_json::Value = serde_json::from_str(&out.stdout).unwrap();
    let rules = &stats["rules"];
    assert_eq!(rules[0]["text"], "127.0.140.0/24 → group edge", "{stats}");
    assert_eq!(rules[0]["answers"], 1, "{stats}");
    assert_eq!(rules[1]["answers"], 1, "{stats}");
    assert_eq!(stats["answers"], 3, "{stats}");
    let metrics = metrics(&d).await;
    let line = "gtm_topology_rule_answers_total{record=\"app.groups.test/A\",rule=\"2: 127.0.141.0/24 → group core\"} 1";
    assert!(metrics.contains(line), "missing {line:?} in:\n{metrics}");

    // The core group drained: its branch falls through to every
    // candidate left, and the preview says the rule is skipped.
    let out = run_gtm(&d, &["record", "drain", "192.0.2.73", "--force"]);
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    assert_eq!(ask("127.0.141.9").await, ["192.0.2.71", "192.0.2.72"]);
    // A skipped rule decided nothing: its count stays.
    let out = run_gtm(&d, &["record", "stats", "app.groups.test", "A"]);
    assert!(
        out.stdout.contains("2: 127.0.141.0/24 → group core")
            && out
                .stdout
                .lines()
                .any(|l| l.starts_with("2: 127.0.141.0/24") && l.trim_end().ends_with(" 1")),
        "{}",
        out.stdout
    );
    // Status lists every rule with its answer now and what it decided.
    let out = run_gtm(&d, &["status"]);
    let line = |text: &str| {
        out.stdout
            .lines()
            .find(|l| l.contains(text))
            .map(|l| l.split_whitespace().collect::<Vec<_>>().join(" "))
            .unwrap_or_default()
    };
    assert_eq!(
        line("2: 127.0.141.0/24"),
        "app.groups.test/A 2: 127.0.141.0/24 → group core skipped (no candidate) 1",
        "{}",
        out.stdout
    );
    assert!(
        line("1: 127.0.140.0/24")
            .starts_with("app.groups.test/A 1: 127.0.140.0/24 → group edge 192.0.2.71"),
        "{}",
        out.stdout
    );
    let out = run_gtm(&d, &["record", "preview", "app.groups.test", "A"]);
    assert!(
        out.stdout
            .contains("rule 1 127.0.140.0/24 → group edge (weight 1): 192.0.2.71")
            && out
                .stdout
                .contains("rule 2 127.0.141.0/24 → group core (weight 1): skipped (no candidate)"),
        "{}",
        out.stdout
    );
    let out = run_gtm(
        &d,
        &[
            "record",
            "explain",
            "app.groups.test",
            "A",
            "--client",
            "127.0.140.9",
        ],
    );
    assert!(
        out.stdout
            .contains("rule 1 (127.0.140.0/24 → group edge, weight 1)"),
        "{}",
        out.stdout
    );
}

/// The NOERROR answers to A queries a device has given.
async fn answered_a(d: &TestDevice) -> u64 {
    let text = metrics(d).await;
    text.lines()
        .find_map(|l| l.strip_prefix("gtm_dns_responses_total{type=\"A\",rcode=\"NOERROR\"} "))
        .map_or(0, |v| v.trim().parse().unwrap())
}

/// A validating-free unbound with its ECS subnet cache in front: an answer
/// a /16 rule decided is reused for every /24 of that /16, and for no
/// other client.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_resolver_caches_a_rules_answer_for_exactly_its_prefix() {
    let Some(binary) = unbound_binary() else {
        return;
    };
    let config = r#"
[[datacenter]]
name = "east"

[[datacenter]]
name = "west"

[[region]]
name = "office"
networks = ["10.20.0.0/16"]

[[domain]]
name = "cache.test"
nameservers = ["ns1.cache.test"]

[[domain.record]]
name = "www"
type = "A"
ttl = 300
addresses = [{ ip = "192.0.2.10", dc = "east" }, { ip = "192.0.2.20", dc = "west" }]
topology_rules = [
  { client = "region:office", datacenter = "east" },
  { client = "0.0.0.0/0", datacenter = "west" },
]
"#;
    let d = TestDevice::start(config).await;
    let u = Unbound::start(&binary, "cache.test", d.v4(), ECS_CACHE).await;
    let via = async |subnet: &str| {
        let m = udp(
            u.addr,
            &with_ecs(query("www.cache.test.", RecordType::A), subnet),
        )
        .await;
        sorted(&m)
    };
    let before = answered_a(&d).await;
    assert_eq!(via("10.20.1.0/24").await, ["192.0.2.10"]);
    let asked = answered_a(&d).await;
    assert_eq!(
        asked,
        before + 1,
        "the first client of the /16 is asked for"
    );
    // Other /24s of the same /16: from unbound's cache.
    for subnet in ["10.20.77.0/24", "10.20.200.0/24"] {
        assert_eq!(via(subnet).await, ["192.0.2.10"], "{subnet}");
    }
    assert_eq!(answered_a(&d).await, asked, "the /16's answer was reused");
    // Just outside it: asked for, and answered otherwise.
    assert_eq!(via("10.21.0.0/24").await, ["192.0.2.20"]);
    assert_eq!(
        answered_a(&d).await,
        asked + 1,
        "a client outside the /16 is asked for"
    );
}

/// A pair: regions and rules are replicated configuration. A region
/// edited through the follower moves both devices' answers, and a device
/// killed and restarted answers by the region as edited.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn topology_edited_on_one_device_steers_both_and_survives_a_restart() {
    use crate::cluster::Proc;
    let config = r#"
[[datacenter]]
name = "east"
latitude = 40.7128
longitude = -74.0060

[[datacenter]]
name = "west"
latitude = 37.7749
longitude = -122.4194

[[region]]
name = "office"
networks = ["10.20.0.0/16"]

[[domain]]
name = "pair-topo.test"
nameservers = ["ns1.pair-topo.test"]

[[domain.record]]
name = "www"
type = "A"
addresses = [{ ip = "192.0.2.10", dc = "east" }, { ip = "192.0.2.20", dc = "west" }]
topology_rules = [
  { client = "region:office", datacenter = "east" },
  { client = "0.0.0.0/0", datacenter = "west" },
]

[[domain.record]]
name = "near"
type = "A"
nearest = true
addresses = [{ ip = "192.0.2.11", dc = "east" }, { ip = "192.0.2.21", dc = "west" }]

[[domain.record]]
name = "grp"
type = "A"
addresses = [
  { ip = "192.0.2.12", dc = "east", group = "edge" },
  { ip = "192.0.2.22", dc = "west", group = "edge" },
  { ip = "192.0.2.32", dc = "west" },
]
topology_rules = [{ client = "region:office", group = "edge" }]
"#;
    let root = tempfile::tempdir().unwrap();
    let db = root.path().join("city.mmdb");
    write_city_mmdb(&db);
    let geo = format!("geoip_file = \"{}\"", db.display());
    let (a, mut b) = tokio::task::block_in_place(|| {
        let a = Proc::start_with(root.path(), "gtm1", "east", "127.0.136.1", &geo);
        let b = Proc::start_with(root.path(), "gtm2", "west", "127.0.136.2", &geo);
        a.ok(&["cluster", "init"]);
        b.join(&a);
        a.apply_ok(config);
        (a, b)
    });
    let local: IpAddr = "127.0.0.1".parse().unwrap();
    // Waits (bounded) until `p` answers each name and ECS subnet as wanted.
    let until_named = async |p: &Proc, name: &str, want: &[(&str, &str)]| {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
        loop {
            let mut got = Vec::new();
            for (subnet, _) in want {
                let m = ask_from(local, p.dns(), name, Some(subnet)).await;
                got.push(sorted(&m).join(" "));
            }
            if got.iter().zip(want).all(|(g, (_, w))| g == w) {
                return;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "{} answers {got:?}, not {want:?}",
                p.name
            );
            tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        }
    };
    let until = async |p: &Proc, want: &[(&str, &str)]| {
        until_named(p, "www.pair-topo.test.", want).await;
    };
    // Nearest by distance: Los Angeles and Denver west, New York east; the
    // office's group across both datacenters.
    let near_before = [
        ("3.3.1.0/24", "192.0.2.21"),
        ("3.3.2.0/24", "192.0.2.11"),
        ("3.3.3.0/24", "192.0.2.21"),
    ];
    let grp = [("10.20.1.0/24", "192.0.2.12 192.0.2.22")];
    for p in [&a, &b] {
        until_named(p, "near.pair-topo.test.", &near_before).await;
        until_named(p, "grp.pair-topo.test.", &grp).await;
    }
    let before = [
        ("10.20.1.0/24", "192.0.2.10"),
        ("10.21.1.0/24", "192.0.2.20"),
    ];
    until(&a, &before).await;
    until(&b, &before).await;
    // Through the follower: the office moves to 10.21.0.0/16.
    let file = root.path().join("office.toml");
    std::fs::write(&file, "networks = [\"10.21.0.0/16\"]\n").unwrap();
    let out = b.gtm(&["region", "put", "office", "--file", file.to_str().unwrap()]);
    assert!(out.status.success(), "{out:?}");
    let after = [
        ("10.20.1.0/24", "192.0.2.20"),
        ("10.21.1.0/24", "192.0.2.10"),
    ];
    until(&a, &after).await;
    until(&b, &after).await;
    // Through the follower: east's bias of +50 draws Denver (2,620 km
    // counts 1,310, against 1,520 to the west).
    let east = root.path().join("east.toml");
    std::fs::write(
        &east,
        "latitude = 40.7128\nlongitude = -74.0060\nbias = 50\n",
    )
    .unwrap();
    let out = b.gtm(&["dc", "put", "east", "--file", east.to_str().unwrap()]);
    assert!(out.status.success(), "{out:?}");
    let near_after = [
        ("3.3.1.0/24", "192.0.2.21"),
        ("3.3.2.0/24", "192.0.2.11"),
        ("3.3.3.0/24", "192.0.2.11"),
    ];
    until_named(&a, "near.pair-topo.test.", &near_after).await;
    until_named(&b, "near.pair-topo.test.", &near_after).await;
    // kill -9 and a restart: the region and the bias as edited, from the
    // device's store.
    b.kill();
    b.restart();
    until(&b, &after).await;
    until_named(&b, "near.pair-topo.test.", &near_after).await;
    let grp_after = [("10.21.1.0/24", "192.0.2.12 192.0.2.22")];
    until_named(&b, "grp.pair-topo.test.", &grp_after).await;
    drop(a);
}
