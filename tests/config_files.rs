//! Every file in config/ parses and validates.

#[test]
fn every_shipped_configuration_is_valid() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("config");
    let mut checked = 0;
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "toml") {
            let text = std::fs::read_to_string(&path).unwrap();
            if path
                .file_name()
                .is_some_and(|n| n.to_string_lossy().starts_with("node"))
            {
                gtm_model::node::NodeSettings::parse(&text)
                    .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            } else {
                let config =
                    gtm_model::parse(&text).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
                gtm_model::compile(&config).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
            }
            checked += 1;
        }
    }
    assert!(
        checked >= 2,
        "config/ holds the demo and the commented example"
    );
}

#[test]
fn errors_name_the_object_and_nothing_is_compiled() {
    let text = r#"
[[datacenter]]
name = "dc1"

[[check]]
name = "web"
type = "tcp"
interval = "2s"
timeout = "5s"
path = "/x"
reuse_connection = true

[[domain]]
name = "example.test"
nameservers = ["ns1.example.test"]

[[domain.record]]
name = "www"
type = "A"
addresses = [
  { ip = "192.0.2.1" },
  { ip = "192.0.2.2", hc = "check:nope" },
  { ip = "192.0.2.3", hc = "scenario:dc2-up" },
  { ip = "2001:db8::1" },
]
"#;
    let config = gtm_model::parse(text).unwrap();
    let errors: Vec<String> = gtm_model::compile(&config).unwrap_err().lines();
    for expected in [
        "check web: path applies to http, https and http2 checks only",
        "check web: reuse_connection applies to http, https and http2 checks only",
        "check web: timeout 5s is longer than interval 2s: a probe must end before the next starts",
        "domain example.test / record www A / address 2: unknown check \"nope\"",
        "domain example.test / record www A / address 3: unknown scenario \"dc2-up\"",
        "domain example.test / record www A / address 4: \"2001:db8::1\" is not an IPv4 address, as an A record needs",
    ] {
        assert!(
            errors.iter().any(|e| e == expected),
            "missing {expected:?} in {errors:#?}"
        );
    }
}

#[test]
fn toml_errors_say_the_line() {
    let err = gtm_model::parse("[[domain]]\nname = \"x.test\"\nbogus = 1\n").unwrap_err();
    let text = err.to_string();
    assert!(text.contains("line 3") && text.contains("bogus"), "{text}");
}
