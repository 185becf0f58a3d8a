//! Arbitrary text as an RFC 1035 master file (`gtm zone import`).
//!
//! Asserts: reading never panics; every error names the file (and a line
//! within the text when it names one); what reads is a domain body whose
//! every value reads again as its type, and which writes as TOML.
#![no_main]

use gtm_model::{compile::read_value, config::RecordType, zonefile};
use hickory_server::proto::rr::Name;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let lines = text.lines().count().max(1);
    match zonefile::read(text, "f", None) {
        Err(errors) => {
            for e in errors {
                assert!(e.starts_with("f: ") || e.starts_with("--domain"), "{e}");
                if let Some(rest) = e.strip_prefix("f: line ") {
                    let n: usize = rest
                        .split(':')
                        .next()
                        .and_then(|n| n.parse().ok())
                        .unwrap_or_else(|| panic!("no line number: {e}"));
                    assert!((1..=lines + 1).contains(&n), "line {n} of {lines}: {e}");
                }
            }
        }
        Ok(imported) => {
            let apex = Name::from_ascii(format!("{}.", imported.domain)).expect("the domain is a name");
            let records = imported.body.get("record").and_then(|r| r.as_array()).cloned().unwrap_or_default();
            for r in records {
                let kind: RecordType = r["type"].as_str().unwrap_or_default().parse().expect("a type");
                for v in r["values"].as_array().into_iter().flatten() {
                    let v = v.as_str().expect("a value is text");
                    if let Err(e) = read_value(kind, v, &apex) {
                        panic!("{kind} {v:?} was read, and does not read again: {e}");
                    }
                }
            }
            toml::to_string(&serde_json::Value::Object(imported.body)).expect("the body writes as TOML");
        }
    }
});
