use std::sync::Arc;

use hickory_server::proto::rr::RData;

use super::*;

const HEAD: &str = r#"
[[domain]]
name = "example.test"
nameservers = ["ns1.example.test"]
"#;

fn config(records: &str) -> Config {
    match crate::parse(&format!("{HEAD}{records}")) {
        Ok(c) => c,
        Err(e) => panic!("test configuration parses: {e}"),
    }
}

/// A compiled address per address of a large configuration: what
/// most addresses lack behind one box, it fits 64 bytes (it took 160,
/// then 128, then 72), mimalloc's class of a one-address list.
#[test]
fn a_compiled_address_fits_64_bytes() {
    assert!(std::mem::size_of::<AddressSpec>() <= 64);
}

/// A compiled record, one per record behind an `Arc`: its owner in
/// wire form, not a hickory `Name` (80 bytes inline; the record took
/// 104).
#[test]
fn a_compiled_record_fits_40_bytes() {
    assert!(std::mem::size_of::<RecordSpec>() <= 40);
}

/// A steered record's compiled form, one per record in its box: its
/// lists boxed at their length, its disaster recovery boxed, it fits
/// mimalloc's 64-byte class (with an `Arc`'s counts it took 128, then
/// 112, then 80).
#[test]
fn a_steering_fits_64_bytes() {
    assert!(std::mem::size_of::<Steering>() <= 64);
}

/// The errors of a configuration, as `path: message`.
fn errors(records: &str) -> Vec<String> {
    match compile(&config(records)) {
        Ok(_) => Vec::new(),
        Err(e) => e.lines().into_iter().collect(),
    }
}

fn txt(name: &str, value: &str) -> String {
    format!("[[domain.record]]\nname = \"{name}\"\ntype = \"TXT\"\nvalues = ['\"{value}\"']\n")
}

#[test]
fn a_signed_domain_with_secondaries_expires_within_a_week() {
    let domain = |expire: u32, dnssec: bool| {
        format!(
            "dnssec = {dnssec}\nsecondaries = [{{ address = \"192.0.2.53\", key = \"k\" }}]\nsoa = {{ expire = {expire} }}\n"
        )
    };
    assert!(errors(&domain(604_800, true)).is_empty());
    assert!(errors(&domain(1_209_600, false)).is_empty());
    assert_eq!(
        errors(&domain(1_209_600, true)),
        [
            "domain example.test / soa.expire: 1209600 is over 604800 (one week): a secondary of a signed domain would go on serving signatures after they expire (docs/transfer.md)"
        ]
    );
}

#[test]
fn geoip_source_must_be_an_http_url_with_known_placeholders() {
    let errs = |table: &str| match crate::parse(&format!("{table}\n{HEAD}")) {
        Ok(c) => match compile(&c) {
            Ok(_) => Vec::new(),
            Err(e) => e.lines().into_iter().collect(),
        },
        Err(e) => e.lines().into_iter().collect(),
    };
    assert!(
        errs("[geoip]\nsource = \"https://h.test/c-{year}-{month}.mmdb.gz\"\nupdate = \"off\"")
            .is_empty()
    );
    assert!(errs("[geoip]\nupdate = \"monthly\"").is_empty());
    assert_eq!(
        errs("[geoip]\nsource = \"ftp://h.test/c.mmdb\""),
        ["geoip / source: \"ftp://h.test/c.mmdb\" is not an http:// or https:// URL"]
    );
    assert_eq!(
        errs("[geoip]\nsource = \"https://h.test/{day}.mmdb\""),
        ["geoip / source: \"https://h.test/{day}.mmdb\": only {year} and {month} are filled in"]
    );
    assert_eq!(
        errs("[geoip]\nsource = \"https:///x\""),
        ["geoip / source: \"https:///x\" has no host"]
    );
    assert!(errs("[geoip]\nupdate = \"weekly\"")[0].contains("weekly"));
}

#[test]
fn an_unchanged_domain_keeps_its_compiled_zone() {
    let text = |a: &str, check: &str| {
        format!(
            "{check}[[domain]]\nname = \"a.test\"\nnameservers = [\"ns1.a.test\"]\n\n\
             [[domain.record]]\nname = \"www\"\ntype = \"TXT\"\nvalues = [\"{a}\"]\n\n\
             [[domain]]\nname = \"b.test\"\nnameservers = [\"ns1.b.test\"]\n"
        )
    };
    let parse = |t: String| crate::parse(&t).unwrap();
    let first_config = parse(text("1", ""));
    let first = compile(&first_config).unwrap();
    let before = Some((&first_config, first.zones.as_slice()));
    let second = compile_from(&parse(text("2", "")), before).unwrap();
    assert!(!Arc::ptr_eq(&first.zones[0], &second.zones[0]));
    assert!(Arc::ptr_eq(&first.zones[1], &second.zones[1]));
    assert_eq!(second.zones[1].apex.to_string(), "b.test.");

    // A check is read by steered records: every zone is compiled again.
    let check = "[[check]]\nname = \"c\"\ntype = \"tcp\"\ntarget = \"127.0.0.1\"\nport = 9\n";
    let third = compile_from(&parse(text("1", check)), before).unwrap();
    assert!(
        third
            .zones
            .iter()
            .zip(&first.zones)
            .all(|(a, b)| !Arc::ptr_eq(a, b))
    );
    assert_eq!(*third.zones[1], *first.zones[1]);
}

#[test]
fn the_soa_serial_follows_the_version_unless_set_and_wraps() {
    let serial = |soa: &str, version: u64| {
        let text = HEAD.replace("nameservers", &format!("{soa}\nnameservers"));
        let compiled = compile(&crate::parse(&text).unwrap()).unwrap();
        compiled.zones[0].serial_at(version)
    };
    assert_eq!(serial("", 7), 7);
    assert_eq!(serial("", u64::from(u32::MAX)), u32::MAX);
    // RFC 1982: past 2^32 - 1 the serial wraps to 0 and counts on.
    assert_eq!(serial("", u64::from(u32::MAX) + 1), 0);
    assert_eq!(serial("", u64::from(u32::MAX) + 5), 4);
    assert_eq!(serial("soa = { serial = 42 }", 7), 42);
}

#[test]
fn a_check_is_the_same_when_only_its_datacenter_index_moves() {
    let checks = |dcs: &str| {
        let text = format!(
            "{dcs}[[check]]\nname = \"web\"\ntype = \"tcp\"\ntarget = \"192.0.2.1\"\nrun_on = \"dc2\"\n{HEAD}"
        );
        compile(&crate::parse(&text).unwrap()).unwrap().checks
    };
    let two = "[[datacenter]]\nname = \"dc1\"\n[[datacenter]]\nname = \"dc2\"\n";
    let before = checks(two);
    let after = checks(&format!("[[datacenter]]\nname = \"dc0\"\n{two}"));
    assert_ne!(before[0].run_on, after[0].run_on);
    assert!(before[0].same_check(&after[0]));
    let other = checks(&two.replace("dc1", "dc3"));
    assert!(before[0].same_check(&other[0]));
    let mut changed = after[0].clone();
    changed.port += 1;
    assert!(!before[0].same_check(&changed));
}

#[test]
fn a_check_interval_over_a_day_is_refused_with_its_path() {
    let check = |interval: &str| {
        format!("[[check]]\nname = \"web\"\ntype = \"tcp\"\ninterval = \"{interval}\"\n")
    };
    assert_eq!(
        errors(&check("5124095576030h")),
        [
            "check web: interval 5124095576030h is longer than 24h, the longest a check may wait between probes"
        ]
    );
    assert!(
        errors(&check("24h")).is_empty(),
        "{:?}",
        errors(&check("24h"))
    );
}

#[test]
fn health_inputs_and_max_latency_are_validated_with_their_paths() {
    let check = |body: &str| format!("[[check]]\nname = \"c\"\n{body}\n");
    assert!(errors(&check("type = \"prometheus\"\nurl = \"http://127.0.0.1:9090\"\nquery = 'up{instance=\"$address\"}'\nexpect = \">= 1\"\nmax_latency = \"1s\"")).is_empty());
    assert!(errors(&check("type = \"push\"\nstale_after = \"30s\"")).is_empty());
    assert!(errors(&check("type = \"alertmanager\"\nlabels = { alertname = \"Down\", instance = \"$address:9100\" }")).is_empty());
    assert_eq!(
        errors(&check("type = \"prometheus\"")),
        [
            "check c: a prometheus check needs url (url = \"http://127.0.0.1:9090\")",
            "check c: a prometheus check needs query (query = 'up{instance=\"$address:9100\"}')",
            "check c: a prometheus check needs expect (expect = \"== 1\")",
        ]
    );
    assert_eq!(
        errors(&check(
            "type = \"prometheus\"\nurl = \"ftp://p\"\nquery = \"up\"\nexpect = \"about 1\""
        )),
        [
            "check c: expect: \"about 1\" is not a comparison: write an operator (<, <=, >, >=, ==, !=) and a number, e.g. \"< 0.05\"",
            "check c: url: \"ftp://p\" is not an http:// or https:// URL",
        ]
    );
    assert_eq!(
        errors(&check(
            "type = \"prometheus\"\nurl = \"http://p:9090/?x=1\"\nquery = \"up\"\nexpect = \"> 0\""
        )),
        [
            "check c: url: \"http://p:9090/?x=1\" must be the server's base URL, without a query, a fragment or spaces (/api/v1/query is added)"
        ]
    );
    assert_eq!(
        errors(&check("type = \"alertmanager\"")),
        [
            "check c: an alertmanager check needs labels = { alertname = \"...\" } (the labels an alert must carry)"
        ]
    );
    assert_eq!(
        errors(&check(
            "type = \"push\"\ntimeout = \"1s\"\nlabels = { a = \"b\" }"
        )),
        [
            "check c: labels applies to alertmanager checks only",
            "check c: timeout does not apply to a push check: it is reported to, never probed",
        ]
    );
    assert_eq!(
        errors(&check(
            "type = \"push\"\nmax_latency = \"1s\"\nstale_after = \"0s\""
        )),
        [
            "check c: max_latency applies to probed (all but manual, push and alertmanager) checks only",
            "check c: stale_after must be more than 0s",
        ]
    );
    assert_eq!(
        errors(&check(
            "type = \"tcp\"\ntimeout = \"2s\"\nmax_latency = \"2s\""
        )),
        [
            "check c: max_latency 2s is not shorter than timeout 2s: a probe that slow times out first"
        ]
    );
}

#[test]
fn data_that_does_not_read_back_is_refused() {
    // Found by the `config` fuzz target: a CAA tag with a quote in it
    // is written by hickory but refused by every reader.
    let errs = errors(
        "[[domain.record]]\nname = \"c\"\ntype = \"CAA\"\nvalues = ['0 isse\"u ca.example.net\"']\n",
    );
    assert!(
        errs.len() == 1 && errs[0].contains("CAA data does not read back"),
        "{errs:?}"
    );
    assert!(errors("[[domain.record]]\nname = \"c\"\ntype = \"CAA\"\nvalues = ['0 issue \"ca.example.net\"']\n").is_empty());
}

#[test]
fn a_txt_value_without_a_string_is_refused() {
    // Found by the `config` fuzz target: an empty value made a TXT
    // record with no string, which a strict reader refuses.
    let errs = errors("[[domain.record]]\nname = \"t\"\ntype = \"TXT\"\nvalues = [\"\"]\n");
    assert!(
        errs.len() == 1 && errs[0].contains("holds no TXT string"),
        "{errs:?}"
    );
    // One empty string compiles (and builds: dns::snapshot's tests).
    assert!(compile(&config(&txt("t", ""))).is_ok());
}

#[test]
fn a_long_txt_string_is_split_into_255_byte_strings_and_builds() {
    let long = "k".repeat(300);
    let c = config(&txt("dkim", &long));
    let compiled = match compile(&c) {
        Ok(c) => c,
        Err(e) => panic!("{e}"),
    };
    let Content::Static(data) = &compiled.zones[0].records[0].content else {
        panic!("TXT is static");
    };
    let RData::TXT(t) = &data[0] else {
        panic!("TXT data");
    };
    let lens: Vec<usize> = t.txt_data.iter().map(|s| s.len()).collect();
    assert_eq!(lens, [255, 45]);
    let joined: Vec<u8> = t.txt_data.iter().flat_map(|s| s.iter().copied()).collect();
    assert_eq!(joined, long.as_bytes());
    // Short strings, and several of them, stay as written.
    let c =
        config("[[domain.record]]\nname = \"x\"\ntype = \"TXT\"\nvalues = ['\"a\" \"\" \"b\"']\n");
    let Ok(compiled) = compile(&c) else {
        panic!("valid");
    };
    let Content::Static(data) = &compiled.zones[0].records[0].content else {
        panic!("TXT is static");
    };
    let RData::TXT(t) = &data[0] else {
        panic!("TXT data");
    };
    let lens: Vec<usize> = t.txt_data.iter().map(|s| s.len()).collect();
    assert_eq!(lens, [1, 0, 1]);
}

#[test]
fn records_larger_than_a_message_are_refused_with_their_path() {
    // 70 KB of TXT at one name: 300 values of 240 bytes.
    let values: Vec<String> = (0..300)
        .map(|i| format!("'\"{i:03}{}\"'", "v".repeat(237)))
        .collect();
    let big = format!(
        "[[domain.record]]\nname = \"big\"\ntype = \"TXT\"\nvalues = [{}]\n",
        values.join(", ")
    );
    let errs = errors(&big);
    assert_eq!(errs.len(), 1, "{errs:?}");
    assert!(
        errs[0].starts_with(
            "domain example.test / record big TXT: the records of big.example.test. take 7"
        ),
        "{errs:?}"
    );
    assert!(errs[0].contains("at most 60000 fit"), "{errs:?}");
    // Two sets that fit alone but not together (an ANY answer).
    let half: Vec<String> = (0..130)
        .map(|i| format!("'\"{i:03}{}\"'", "v".repeat(237)))
        .collect();
    let two = format!(
        "[[domain.record]]\nname = \"two\"\ntype = \"TXT\"\nvalues = [{0}]\n[[domain.record]]\nname = \"two\"\ntype = \"MX\"\nvalues = ['10 mx.example.test.']\n[[domain.record]]\nname = \"two\"\ntype = \"CAA\"\nvalues = ['0 issue \"{1}\"']\n",
        half.join(", "),
        "c".repeat(30_000)
    );
    let errs = errors(&two);
    assert_eq!(errs.len(), 1, "{errs:?}");
    assert!(
        errs[0].starts_with(
            "domain example.test / records two TXT MX CAA: the records of two.example.test. take"
        ),
        "{errs:?}"
    );
    // Steered records count their largest possible answer: 4,000
    // addresses answered together exceed a message, one at a time not.
    let many: Vec<String> = (0..4000)
        .map(|i| format!("{{ ip = \"10.0.{}.{}\" }}", i / 250, i % 250))
        .collect();
    let a = |balance: &str| {
        format!(
            "[[domain.record]]\nname = \"many\"\ntype = \"A\"\nbalance = \"{balance}\"\naddresses = [{}]\n",
            many.join(", ")
        )
    };
    let errs = errors(&a("round-robin"));
    assert!(
        errs.len() == 1 && errs[0].starts_with("domain example.test / record many A: the records of many.example.test. take 64000 bytes"),
        "{errs:?}"
    );
    assert_eq!(errors(&a("priority")), Vec::<String>::new());
    // What fits compiles (and builds: dns::snapshot's tests).
    let fits: Vec<String> = (0..200)
        .map(|i| format!("'\"{i:03}{}\"'", "v".repeat(237)))
        .collect();
    let c = config(&format!(
        "[[domain.record]]\nname = \"big\"\ntype = \"TXT\"\nvalues = [{}]\n",
        fits.join(", ")
    ));
    assert!(compile(&c).is_ok(), "48 KB fits");
}

#[test]
fn a_cname_answers_one_target_and_is_alone_at_its_name() {
    let two = "[[domain.record]]\nname = \"media\"\ntype = \"CNAME\"\nmax_answers = 2\naddresses = [{ target = \"a.cdn.test\" }, { target = \"b.cdn.test\" }]\n";
    assert_eq!(
        errors(two),
        [
            "domain example.test / record media CNAME: max_answers = 2: a CNAME answers one target (RFC 2181 §10.1); its several targets are candidates, one of them is answered"
        ]
    );
    // Several candidates, one answered: valid, one at a time.
    let candidates = "[[domain.record]]\nname = \"media\"\ntype = \"CNAME\"\naddresses = [{ target = \"a.cdn.test\" }, { target = \"b.cdn.test\" }]\n";
    let Ok(compiled) = compile(&config(candidates)) else {
        panic!("valid");
    };
    let Content::Steered(s) = &compiled.zones[0].records[0].content else {
        panic!("steered");
    };
    assert_eq!(s.max_answers, 1);
    let with_txt = format!(
        "{candidates}{}[[domain.record]]\nname = \"media\"\ntype = \"A\"\naddresses = [{{ ip = \"192.0.2.1\" }}]\n",
        txt("media", "x")
    );
    assert_eq!(
        errors(&with_txt),
        [
            "domain example.test / record media CNAME: TXT, A shares its name; a CNAME must be alone at its name (RFC 1034 §3.6.2)"
        ]
    );
    let apex = "[[domain.record]]\nname = \"@\"\ntype = \"CNAME\"\naddresses = [{ target = \"a.cdn.test\" }]\n";
    assert_eq!(
        errors(apex),
        ["domain example.test / record @ CNAME: the apex cannot be a CNAME (it holds SOA and NS)"]
    );
}

fn cname(name: &str, targets: &[&str]) -> String {
    let list: Vec<String> = targets
        .iter()
        .map(|t| format!("{{ target = \"{t}\" }}"))
        .collect();
    format!(
        "[[domain.record]]\nname = \"{name}\"\ntype = \"CNAME\"\nbalance = \"priority\"\naddresses = [{}]\n",
        list.join(", ")
    )
}

#[test]
fn cname_loops_are_refused() {
    assert_eq!(
        errors(&cname("self", &["self.example.test"])),
        [
            "domain example.test / record self CNAME: CNAME loop: self.example.test. → self.example.test."
        ]
    );
    let two = format!(
        "{}{}",
        cname("a", &["b.example.test"]),
        cname("b", &["a.example.test"])
    );
    assert_eq!(
        errors(&two),
        [
            "domain example.test / record a CNAME: CNAME loop: a.example.test. → b.example.test. → a.example.test."
        ]
    );
    // Through a candidate that is not the first, and through a wildcard.
    let via = format!(
        "{}{}",
        cname("a", &["out.other.test", "x.w.example.test"]),
        cname("*.w", &["a.example.test"])
    );
    let errs = errors(&via);
    assert_eq!(errs.len(), 1, "{errs:?}");
    assert!(errs[0].contains("CNAME loop: "), "{errs:?}");
    // A chain that ends, or leaves the zones, is no loop.
    let chain = format!(
        "{}{}{}",
        cname("a", &["b.example.test"]),
        cname("b", &["c.example.test"]),
        cname("c", &["elsewhere.test"])
    );
    assert_eq!(errors(&chain), Vec::<String>::new());
    // A long chain is followed without recursion.
    let long: String = (0..20_000)
        .map(|i| cname(&format!("n{i}"), &[&format!("n{}.example.test", i + 1)]))
        .collect::<String>()
        + &cname("n20000", &["n0.example.test"]);
    let errs = errors(&long);
    assert_eq!(errs.len(), 1);
    assert!(errs[0].starts_with(
        "domain example.test / record n0 CNAME: CNAME loop: n0.example.test. → n1.example.test."
    ));
}

#[test]
fn overlong_names_are_refused_with_their_path() {
    let label = "l".repeat(64);
    let errs = errors(&txt(&label, "x"));
    assert_eq!(errs.len(), 1, "{errs:?}");
    assert!(
        errs[0].starts_with(&format!("domain example.test / record {label} TXT: ")),
        "{errs:?}"
    );
    let long = vec!["a".repeat(60); 5].join(".");
    let errs = errors(&txt(&long, "x"));
    assert_eq!(errs.len(), 1, "{errs:?}");
    assert!(
        errs[0].starts_with(&format!("domain example.test / record {long} TXT: ")),
        "{errs:?}"
    );
    let target = format!("{}.test", vec!["b".repeat(60); 5].join("."));
    let errs = errors(&cname("c", &[&target]));
    assert_eq!(errs.len(), 1, "{errs:?}");
    assert!(
        errs[0].starts_with("domain example.test / record c CNAME / address 1: "),
        "{errs:?}"
    );
}
