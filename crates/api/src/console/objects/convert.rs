//! An object's JSON (as the API reads and writes it) to the form's fields
//! and back. The form changes only the keys it shows: every other key of
//! the object (a domain's SOA, its secondaries) is kept as it is.

use serde_json::{Map, Value};

use super::kinds::{Field, Input, Kind};
use crate::console::fields::{Fields, Problems, split_list};

/// The form's fields for an object.
pub fn fields_of(kind: &Kind, object: &Map<String, Value>) -> Fields {
    let mut f = Fields::default();
    for field in kind.fields {
        let Some(value) = object.get(field.key) else {
            continue;
        };
        let text = match (field.input, value) {
            (_, Value::String(s)) => s.clone(),
            (Input::Lines, Value::Array(items)) => words(items).join("\n"),
            (Input::Labels, Value::Object(labels)) => labels
                .iter()
                .map(|(k, v)| format!("{k} = {}", v.as_str().unwrap_or_default()))
                .collect::<Vec<_>>()
                .join("\n"),
            (_, Value::Array(items)) => words(items).join(", "),
            (_, Value::Null) => String::new(),
            (_, other) => other.to_string(),
        };
        f.set(field.key, text);
    }
    f
}

fn words(items: &[Value]) -> Vec<String> {
    items
        .iter()
        .map(|v| match v {
            Value::String(s) => s.clone(),
            other => other.to_string(),
        })
        .collect()
}

/// Whether a field applies to the object the form describes: a check's
/// field applies to the check types it names.
pub fn applies(field: &Field, f: &Fields) -> bool {
    field.types.is_empty() || field.types.contains(&f.get("type"))
}

/// The object the form describes: `base` (the object as it is, or empty)
/// with each field's key set from the form, or left out when the field is
/// empty or does not apply. A field that cannot be read is a problem
/// beside it.
pub fn object_of(
    kind: &Kind,
    f: &Fields,
    mut base: Map<String, Value>,
    problems: &mut Problems,
) -> Map<String, Value> {
    for field in kind.fields.iter().filter(|x| x.key != "name") {
        let text = f.get(field.key);
        if text.is_empty() || !applies(field, f) {
            base.remove(field.key);
            continue;
        }
        let value = match field.input {
            Input::Text | Input::Condition | Input::Choice(_) | Input::Datacenter => {
                Value::String(text.to_string())
            }
            Input::Number => match text.parse::<u64>() {
                Ok(n) => Value::from(n),
                Err(_) => {
                    problems.add(
                        Some(field.key.to_string()),
                        format!("{}: \"{text}\" is not a whole number", field.key),
                    );
                    continue;
                }
            },
            Input::Flag => match text {
                "true" => Value::Bool(true),
                "false" => Value::Bool(false),
                other => {
                    problems.add(
                        Some(field.key.to_string()),
                        format!("{}: \"{other}\" is not yes or no", field.key),
                    );
                    continue;
                }
            },
            Input::List => Value::from(split_list(text)),
            Input::Lines => Value::from(
                text.lines()
                    .map(str::trim)
                    .filter(|l| !l.is_empty())
                    .map(str::to_string)
                    .collect::<Vec<_>>(),
            ),
            Input::Labels => {
                let mut labels = Map::new();
                for line in text.lines().map(str::trim).filter(|l| !l.is_empty()) {
                    match line.split_once('=') {
                        Some((k, v)) => {
                            labels.insert(k.trim().to_string(), Value::from(v.trim()));
                        }
                        None => problems.add(
                            Some(field.key.to_string()),
                            format!("{}: \"{line}\" is not name = value", field.key),
                        ),
                    }
                }
                Value::Object(labels)
            }
        };
        base.insert(field.key.to_string(), value);
    }
    base
}

/// The field an error of the configuration names: the first key of the
/// form its detail (after the object's path) starts with, else the one it
/// names as a word.
pub fn field_of(kind: &Kind, error: &str) -> Option<String> {
    let detail = error.split_once(": ").map_or(error, |(_, d)| d);
    let mut keys: Vec<&str> = kind.fields.iter().map(|f| f.key).collect();
    // The longest first: `tls_verify` before `tls`.
    keys.sort_by_key(|k| std::cmp::Reverse(k.len()));
    let word = |k: &str| {
        detail
            .split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .any(|w| w == k)
    };
    keys.iter()
        .find(|k| {
            detail.starts_with(**k)
                && !detail[k.len()..].starts_with(|c: char| c.is_ascii_alphanumeric() || c == '_')
        })
        .or_else(|| keys.iter().find(|k| **k != "name" && word(k)))
        .map(|k| k.to_string())
}

#[cfg(test)]
mod tests {
    use super::super::kinds::{CHECKS, DOMAINS};
    use super::*;

    #[test]
    fn a_check_round_trips_through_its_form() {
        let check: Map<String, Value> = serde_json::from_str(
            r#"{"name":"web","type":"http","port":8080,"path":"/health","tls_verify":false,"command":[]}"#,
        )
        .unwrap();
        let f = fields_of(&CHECKS, &check);
        assert_eq!(f.get("port"), "8080");
        assert_eq!(f.get("tls_verify"), "false");
        let mut p = Problems::default();
        let mut back = object_of(&CHECKS, &f, Map::new(), &mut p);
        back.insert("name".into(), "web".into());
        assert!(p.is_empty());
        let mut want = check.clone();
        want.remove("command");
        // tls_verify does not apply to http: the form leaves it out.
        want.remove("tls_verify");
        assert_eq!(back, want);
    }

    #[test]
    fn a_field_that_cannot_be_read_is_named() {
        let mut f = Fields::default();
        f.set("type", "tcp");
        f.set("port", "eighty");
        let mut p = Problems::default();
        object_of(&CHECKS, &f, Map::new(), &mut p);
        assert_eq!(p.all, ["port: \"eighty\" is not a whole number"]);
        assert!(p.has("port"));
    }

    #[test]
    fn keys_the_form_does_not_show_are_kept() {
        let domain: Map<String, Value> =
            serde_json::from_str(r#"{"name":"example.test","soa":{"refresh":60},"ttl":30}"#)
                .unwrap();
        let mut f = fields_of(&DOMAINS, &domain);
        f.set("ttl", "");
        let mut p = Problems::default();
        let back = object_of(&DOMAINS, &f, domain.clone(), &mut p);
        assert_eq!(back.get("soa"), domain.get("soa"));
        assert!(!back.contains_key("ttl"));
    }

    #[test]
    fn errors_find_the_fields_they_name() {
        assert_eq!(
            field_of(
                &CHECKS,
                "check web: tls_verify applies to https checks only"
            )
            .as_deref(),
            Some("tls_verify")
        );
        assert_eq!(
            field_of(&CHECKS, "check web: a dns check needs query_name").as_deref(),
            Some("query_name")
        );
        assert_eq!(
            field_of(
                &DOMAINS,
                "domain example.test: main_dc: unknown datacenter \"dc9\""
            )
            .as_deref(),
            Some("main_dc")
        );
        assert_eq!(field_of(&CHECKS, "something else"), None);
    }
}
