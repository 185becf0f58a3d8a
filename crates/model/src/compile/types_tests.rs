//! Every record type's values, and delegations: what compiles, into what
//! bytes, and what is refused with its path.

use hickory_server::proto::serialize::binary::BinEncodable;

use super::*;
use crate::config::RecordType;

const HEAD: &str = r#"
[[domain]]
name = "example.test"
nameservers = ["ns1.example.test"]
"#;

fn record(name: &str, ty: &str, values: &[&str]) -> String {
    let values: Vec<String> = values.iter().map(|v| format!("'{v}'")).collect();
    format!(
        "[[domain.record]]\nname = \"{name}\"\ntype = \"{ty}\"\nvalues = [{}]\n",
        values.join(", ")
    )
}

fn compiled(records: &str) -> Result<Compiled, Vec<String>> {
    let config = crate::parse(&format!("{HEAD}{records}")).map_err(|e| e.lines())?;
    compile(&config).map_err(|e| e.lines())
}

/// The wire bytes of the one value of the one record of `records`.
fn wire(records: &str) -> Vec<u8> {
    let c = compiled(records).unwrap_or_else(|e| panic!("{records}: {e:?}"));
    match &c.zones[0].records[0].content {
        Content::Static(data) => data[0].to_bytes().unwrap(),
        Content::Steered(_) | Content::Alias(_) => panic!("static"),
    }
}

fn refused(records: &str, path: &str, why: &str) {
    let errs = compiled(records).err().unwrap_or_default();
    assert!(
        errs.iter().any(|e| e.starts_with(path) && e.contains(why)),
        "{records}\nwanted {path}: …{why}…\ngot {errs:?}"
    );
}

#[test]
fn each_type_reads_into_its_wire_form() {
    let hex = |s: &str| -> Vec<u8> {
        (0..s.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
            .collect()
    };
    // PTR, relative to the zone.
    assert_eq!(
        wire(&record("10", "PTR", &["host"])),
        b"\x04host\x07example\x04test\x00"
    );
    // TLSA 3 1 1 with a SHA-256 digest.
    let digest = "8cb0fc6c527506a053f4f14c8464bebbd6dede2738d11468dd953d7d6a3021f1";
    assert_eq!(
        wire(&record(
            "_443._tcp.www",
            "TLSA",
            &[&format!("3 1 1 {digest}")]
        )),
        [vec![3, 1, 1], hex(digest)].concat()
    );
    // SSHFP 4 2 (Ed25519, SHA-256).
    assert_eq!(
        wire(&record("host", "SSHFP", &[&format!("4 2 {digest}")])),
        [vec![4, 2], hex(digest)].concat()
    );
    // NAPTR (RFC 3403's example form).
    let naptr = wire(&record(
        "sip",
        "NAPTR",
        &[r#"100 10 "S" "SIP+D2U" "" _sip._udp.example.test."#],
    ));
    assert_eq!(&naptr[..4], &[0, 100, 0, 10]);
    // LOC, RFC 1876's example.
    assert_eq!(
        wire(&record("geo", "LOC", &["42 21 54 N 71 06 18 W -24m 30m"])).len(),
        16
    );
    // Any type generically, and a known one written generically.
    assert_eq!(
        wire(&record("x", "TYPE65280", &[r"\# 4 0A000001"])),
        [10, 0, 0, 1]
    );
    assert_eq!(
        wire(&record("m", "MX", &[r"\# 5 000A016100"])),
        [0, 10, 1, b'a', 0]
    );
    // HTTPS: parameters put in key order, the target relative to the zone.
    let https = wire(&record("@", "HTTPS", &[r#"1 svc port=8443 alpn=h2,h3"#]));
    assert_eq!(&https[..2], &[0, 1]);
    let params = &https[2 + b"\x03svc\x07example\x04test\x00".len()..];
    assert_eq!(&params[..2], &[0, 1], "alpn (key 1) before port (key 3)");
}

#[test]
fn each_types_rules_are_judged_with_the_values_path() {
    let at = "domain example.test / record";
    refused(
        &record("t", "TLSA", &["3 1 1 abcd"]),
        &format!("{at} t TLSA / value 1"),
        "matching type 1 (SHA-256) takes a 32-byte digest, not 2 bytes",
    );
    refused(
        &record("t", "TLSA", &["4 1 1 abcd"]),
        &format!("{at} t TLSA / value 1"),
        "not valid TLSA data",
    );
    refused(
        &record("h", "SSHFP", &["4 2 abcd"]),
        &format!("{at} h SSHFP / value 1"),
        "takes a 32-byte digest",
    );
    refused(
        &record("@", "HTTPS", &["0 svc.example.net. alpn=h2"]),
        &format!("{at} @ HTTPS / value 1"),
        "AliasMode (SvcPriority 0) takes no SvcParams",
    );
    refused(
        &record("@", "SVCB", &["1 . mandatory=port alpn=h2"]),
        &format!("{at} @ SVCB / value 1"),
        "mandatory lists port, which is not given",
    );
    refused(
        &record("@", "HTTPS", &["1 . no-default-alpn"]),
        &format!("{at} @ HTTPS / value 1"),
        "no-default-alpn needs alpn",
    );
    refused(
        &record("@", "HTTPS", &["1 . port=1 port=2"]),
        &format!("{at} @ HTTPS / value 1"),
        "is given twice",
    );
    refused(
        &record("x", "TYPE65280", &["10.0.0.1"]),
        &format!("{at} x TYPE65280 / value 1"),
        r"written in the generic form, \# LENGTH HEX",
    );
    refused(
        &record("x", "TYPE65280", &[r"\# 5 0A000001"]),
        &format!("{at} x TYPE65280 / value 1"),
        "the length says 5 bytes and the data has 4",
    );
    refused(
        &record("m", "MX", &[r"\# 3 000A01"]),
        &format!("{at} m MX / value 1"),
        "the bytes are not MX data",
    );
    refused(
        &record("g", "LOC", &["91 N 0 E 0"]),
        &format!("{at} g LOC / value 1"),
        "out of range",
    );
    for (ty, why) in [
        ("SOA", "the domain's soa"),
        ("RRSIG", "made by gtm when the domain is signed"),
        ("DNAME", "DNAME is not served"),
        ("ANY", "meta-type"),
    ] {
        refused(
            &record("x", ty, &["1"]),
            &format!("{at} x {ty}"),
            &format!("{ty} records cannot be configured"),
        );
        refused(&record("x", ty, &["1"]), &format!("{at} x {ty}"), why);
    }
}

#[test]
fn delegations_take_ns_ds_and_glue_and_refuse_what_would_be_occluded() {
    let ds = "12345 13 2 8cb0fc6c527506a053f4f14c8464bebbd6dede2738d11468dd953d7d6a3021f1";
    let good = [
        record("sub", "NS", &["ns1.sub", "ns.other.test."]),
        record("sub", "DS", &[ds]),
        "[[domain.record]]\nname = \"ns1.sub\"\ntype = \"A\"\naddresses = [{ ip = \"192.0.2.53\" }]\n".into(),
    ]
    .concat();
    let c = compiled(&good).unwrap();
    let zone = &c.zones[0];
    let key =
        |s: &str| crate::names::wire_key(&hickory_server::proto::rr::Name::from_ascii(s).unwrap());
    assert_eq!(zone.cuts.len(), 1);
    assert_eq!(
        zone.cut_of(&key("ns1.sub.example.test.")),
        Some(&*key("sub.example.test."))
    );
    assert_eq!(zone.cut_of(&key("www.example.test.")), None);

    let at = "domain example.test / record";
    refused(
        &format!("{good}{}", record("www.sub", "TXT", &["\"x\""])),
        &format!("{at} www.sub TXT"),
        "is below the delegation sub.example.test. (its NS record)",
    );
    refused(
        &format!("{good}{}", record("sub", "TXT", &["\"x\""])),
        &format!("{at} sub TXT"),
        "only NS and DS are served there",
    );
    refused(
        &record("other", "DS", &[ds]),
        &format!("{at} other DS"),
        "add an NS record at other.example.test. too",
    );
    refused(
        &record("@", "NS", &["ns9.example.net."]),
        &format!("{at} @ NS"),
        "the apex NS set is the domain's nameservers",
    );
    refused(
        &record("@", "DS", &[ds]),
        &format!("{at} @ DS"),
        "belongs in the parent zone",
    );
    refused(
        &record("*", "NS", &["ns9.example.net."]),
        &format!("{at} * NS"),
        "a wildcard cannot be delegated",
    );
    refused(
        &format!(
            "{}{}",
            record("sub", "NS", &["ns9.example.net."]),
            record("deeper.sub", "NS", &["ns9.example.net."])
        ),
        &format!("{at} deeper.sub NS"),
        "is below the delegation sub.example.test.",
    );
    assert_eq!(RecordType::NS.code(), 2);
}

#[test]
fn data_is_written_back_as_it_reads() {
    use crate::compile::presentation;
    let apex = hickory_server::proto::rr::Name::from_ascii("example.test.").unwrap();
    for (ty, value, written) in [
        (
            "HTTPS",
            "1 . port=8443 alpn=h2,h3 ipv4hint=192.0.2.1",
            r#"1 . alpn="h2,h3" port=8443 ipv4hint=192.0.2.1"#,
        ),
        ("SVCB", "0 svc", "0 svc.example.test."),
        ("TXT", r#""a \"b\"" "c""#, r#""a \"b\"" "c""#),
        (
            "LOC",
            "52 22 23 N 4 53 32 E -2m",
            "52 22 23.000 N 4 53 32.000 E -2.00m 1.00m 10000.00m 10.00m",
        ),
        ("TYPE65280", r"\# 4 0a000001", r"\# 4 0A000001"),
        ("MX", "10 mail", "10 mail.example.test."),
    ] {
        let kind: RecordType = ty.parse().unwrap();
        let data = read_value(kind, value, &apex).unwrap();
        assert_eq!(presentation(kind, &data), written, "{ty} {value}");
        assert_eq!(
            read_value(kind, written, &apex).unwrap(),
            data,
            "{ty} {written}"
        );
    }
}

#[test]
fn an_alias_names_a_record_of_its_type_in_its_domain() {
    let www =
        "[[domain.record]]\nname = \"www\"\ntype = \"A\"\naddresses = [{ ip = \"192.0.2.1\" }]\n";
    let alias = |target: &str, extra: &str| {
        format!("[[domain.record]]\nname = \"@\"\ntype = \"A\"\nalias = \"{target}\"\n{extra}")
    };
    let c = compiled(&format!("{www}{}", alias("www", ""))).unwrap();
    let apex = crate::names::wire_key(
        &hickory_server::proto::rr::Name::from_ascii("example.test.").unwrap(),
    );
    assert!(c.zones[0].is_alias(&apex, RecordType::A));
    assert!(!c.zones[0].is_alias(&apex, RecordType::AAAA));
    let at = "domain example.test / record @ A";
    refused(
        &alias("nowhere", ""),
        at,
        "alias: nowhere.example.test. has no A record in the domain",
    );
    refused(
        &format!("{www}{}", alias("www", "ttl = 60\n")),
        at,
        "ttl: an alias answers with its target's answer",
    );
    refused(
        &format!("{www}{}", alias("www.other.test.", "")),
        at,
        "is outside the domain",
    );
    refused(
        &format!(
            "{www}{}[[domain.record]]\nname = \"b\"\ntype = \"A\"\nalias = \"@\"\n",
            alias("www", "")
        ),
        "domain example.test / record b A",
        "alias: the A record of example.test. is an alias itself",
    );
    refused(
        "[[domain.record]]\nname = \"@\"\ntype = \"TXT\"\nalias = \"www\"\n",
        "domain example.test / record @ TXT",
        "only A and AAAA records are aliases",
    );
}

#[test]
fn mx_and_srv_records_with_addresses_are_steered_with_their_data_as_values() {
    let check = "[[check]]\nname = \"smtp\"\ntype = \"tcp\"\nport = 25\n\n";
    let mx = |addresses: &str| {
        format!(
            "{HEAD}{check}[[domain.record]]\nname = \"@\"\ntype = \"MX\"\naddresses = [{addresses}]\n"
        )
    };
    let text = mx(
        "{ value = \"10 mx1\", ip = \"192.0.2.25\", hc = \"check:smtp\" }, { value = \"20 mx2.other.test.\" }",
    );
    let c = compile(&crate::parse(&text).unwrap()).unwrap();
    let Content::Steered(s) = &c.zones[0].records[0].content else {
        panic!("steered");
    };
    let shown: Vec<String> = s.addresses.iter().map(|a| a.display()).collect();
    assert_eq!(shown, ["10 mx1.example.test.", "20 mx2.other.test."]);
    // The check probes the address given beside the data.
    assert!(
        matches!(&s.addresses[0].hc, Hc::Check(r) if r.address == Some("192.0.2.25".parse().unwrap()))
    );
    // Round-robin answers every candidate by default.
    assert_eq!(s.max_answers, u32::MAX);

    let errors = |text: &str| {
        crate::parse(text)
            .map_err(|e| e.lines())
            .and_then(|c| compile(&c).map(|_| ()).map_err(|e| e.lines()))
            .err()
            .unwrap_or_default()
    };
    let has = |text: &str, path: &str, why: &str| {
        let errs = errors(text);
        assert!(
            errs.iter().any(|e| e.starts_with(path) && e.contains(why)),
            "wanted {path}: …{why}…\ngot {errs:?}"
        );
    };
    let at = "domain example.test / record @ MX / address 1";
    has(
        &mx("{ value = \"10 mx1\", hc = \"check:smtp\" }"),
        at,
        "needs ip = \"...\", the address of its target",
    );
    has(
        &mx("{ ip = \"192.0.2.25\" }"),
        at,
        "MX addresses need value = \"...\"",
    );
    has(&mx("{ value = \"mx1\" }"), at, "mx1");
    has(
        &mx("{ target = \"mx1\" }"),
        at,
        "MX addresses take ip, not target",
    );
    has(
        &format!(
            "{HEAD}[[domain.record]]\nname = \"www\"\ntype = \"A\"\naddresses = [{{ ip = \"192.0.2.1\", value = \"x\" }}]\n"
        ),
        "domain example.test / record www A / address 1",
        "value applies to MX and SRV addresses; A addresses take ip",
    );
    has(
        &format!(
            "{HEAD}[[domain.record]]\nname = \"@\"\ntype = \"MX\"\nvalues = [\"10 a\"]\naddresses = [{{ value = \"20 b\" }}]\n"
        ),
        "domain example.test / record @ MX",
        "take values = [...] (static) or addresses = [...] (steered), not both",
    );
    // SRV, with its fail-safe written as its data.
    let srv = format!(
        "{HEAD}[[domain.record]]\nname = \"_sip._udp\"\ntype = \"SRV\"\nfail_safe = [\"30 0 5060 last\"]\naddresses = [{{ value = \"0 5 5060 sip1\" }}]\n"
    );
    let c = compile(&crate::parse(&srv).unwrap()).unwrap();
    let Content::Steered(s) = &c.zones[0].records[0].content else {
        panic!("steered");
    };
    assert_eq!(s.fail_safe()[0].to_string(), "30 0 5060 last.example.test.");
}
