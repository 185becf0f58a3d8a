use super::*;

const FILE: &str = r#"$ORIGIN example.test.
$TTL 3600
@   IN SOA ns1 hostmaster (
        2024010101 ; serial
        7200 900 1209600 300 )
    IN NS ns1
    IN NS ns2.example.net.
    IN MX 10 mail
ns1 IN A 192.0.2.53
www 300 IN A 192.0.2.10
www 300 IN A 192.0.2.11
    IN AAAA 2001:db8::10
api IN CNAME www
sub IN NS ns1.sub
ns1.sub IN A 192.0.2.54
_443._tcp.www IN TLSA 3 1 1 8cb0fc6c527506a053f4f14c8464bebbd6dede2738d11468dd953d7d6a3021f1
@ IN HTTPS 1 . alpn=h2
@ RRSIG SOA 13 2 3600 20300101000000 20200101000000 1 example.test. AAAA
$ORIGIN 2.example.test.
x IN TXT "a \"quoted\" string" "two"
y 2h IN CNAME www.example.test.
"#;

#[test]
fn a_zone_reads_into_the_domains_keys() {
    let got = read(FILE, "example.zone", None).unwrap();
    assert_eq!(got.domain, "example.test");
    let b = Value::Object(got.body.clone());
    assert_eq!(b["ttl"], 3600);
    assert_eq!(
        b["nameservers"],
        json!(["ns1.example.test", "ns2.example.net"])
    );
    assert_eq!(
        b["soa"],
        json!({"mname": "ns1.example.test", "rname": "hostmaster.example.test", "refresh": 7200, "retry": 900, "expire": 1209600, "minimum": 300})
    );
    let records = b["record"].as_array().unwrap();
    let find = |name: &str, ty: &str| {
        records
            .iter()
            .find(|r| r["name"] == name && r["type"] == ty)
            .unwrap_or_else(|| panic!("{name} {ty} in {records:#?}"))
    };
    assert_eq!(find("@", "MX")["values"], json!(["10 mail"]));
    assert_eq!(
        find("www", "A")["addresses"],
        json!([{"ip": "192.0.2.10"}, {"ip": "192.0.2.11"}])
    );
    assert_eq!(find("www", "A")["ttl"], 300);
    // Without a TTL of its own a record takes $TTL (RFC 2308 §4), as BIND
    // reads it: here the domain's, so it has no ttl key.
    assert_eq!(find("www", "AAAA")["ttl"], Value::Null);
    assert_eq!(
        find("api", "CNAME")["addresses"],
        json!([{"target": "www.example.test"}])
    );
    assert_eq!(find("sub", "NS")["values"], json!(["ns1.sub"]));
    assert_eq!(
        find("ns1.sub", "A")["addresses"],
        json!([{"ip": "192.0.2.54"}])
    );
    // Below another $ORIGIN, names are written absolute.
    assert_eq!(
        find("x.2", "TXT")["values"],
        json!(["\"a \\\"quoted\\\" string\" \"two\""])
    );
    assert_eq!(find("y.2", "CNAME")["ttl"], 7200);
    assert_eq!(got.lines[&("www".to_string(), "A".to_string())], 10);
    assert!(
        got.notes
            .iter()
            .any(|n| n.contains("serial 2024010101 is not kept")),
        "{:?}",
        got.notes
    );
    assert!(
        got.notes
            .iter()
            .any(|n| n.contains("1 DNSSEC records left out")),
        "{:?}",
        got.notes
    );
}

#[test]
fn errors_name_the_file_and_line() {
    for (text, wanted) in [
        (
            "$TTL 60\n@ SOA a b 1 2 3 4 5\n",
            "f: line 2: @ before any $ORIGIN",
        ),
        (
            "$ORIGIN z.test.\n$INCLUDE other\n",
            "f: line 2: $INCLUDE is not read",
        ),
        (
            "$ORIGIN z.test.\n$TTL 60\n@ SOA a b 1 2 3 4 5\n@ NS a\nw A 300.1.1.1\n",
            "f: line 5: \"300.1.1.1\" is not an address",
        ),
        (
            "$ORIGIN z.test.\n$TTL 60\n@ SOA a b 1 2 3 4 5\n@ NS a\nw CH TXT \"x\"\n",
            "f: line 5: class CH: only IN is served",
        ),
        (
            "$ORIGIN z.test.\n@ 60 SOA a b 1 2 3 4 5\n@ NS a\nw TLSA 3 1 1 ab\n",
            "f: line 4: \"3 1 1 ab\" is not valid TLSA data",
        ),
        (
            "$ORIGIN z.test.\n@ 60 SOA a b 1 2 3 4 5\n@ NS a\nw BOGUS x\n",
            "f: line 4: \"BOGUS\" is not a record type",
        ),
        (
            "$ORIGIN z.test.\n@ 60 SOA a b 1 2 3 4 5\n@ NS a\nw.other.test. A 192.0.2.1\n",
            "f: line 4: w.other.test. is outside the zone z.test",
        ),
        (
            "$ORIGIN z.test.\n@ 60 SOA a b 1 2 3 4 5\nw A 192.0.2.1\n",
            "f: no NS record at z.test",
        ),
        (
            "$ORIGIN z.test.\n@ 60 SOA a b 1 2 3 4 5\n@ NS a\nd DNAME x\n",
            "f: line 4: DNAME records cannot be imported",
        ),
        (
            "w A 192.0.2.1\n",
            "f: line 1: \"w\" is relative and no $ORIGIN comes before it",
        ),
    ] {
        let errs = read(text, "f", None).unwrap_err();
        assert!(
            errs.iter().any(|e| e.starts_with(wanted)),
            "{text}\nwanted {wanted}\ngot {errs:?}"
        );
    }
}

#[test]
fn ttls_take_bind_units() {
    assert_eq!(ttl_value("3600"), Some(3600));
    assert_eq!(ttl_value("1h30m"), Some(5400));
    assert_eq!(ttl_value("1W"), Some(604_800));
    for bad in ["", "h", "1x", "10m5", "99999999999"] {
        assert_eq!(ttl_value(bad), None, "{bad}");
    }
}
