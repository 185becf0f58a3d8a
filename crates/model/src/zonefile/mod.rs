//! RFC 1035 master files read into a domain's configuration
//! (`gtm zone import`): `$ORIGIN`, `$TTL`, relative names, blank owners,
//! multi-line entries, every type gtm serves.
//!
//! The apex SOA gives the domain's `soa` (not its serial: gtm numbers its
//! serials, docs/configuration.md) and TTL, the apex NS set its
//! `nameservers`; A, AAAA and CNAME become records with addresses (static
//! health), every other type records with values. DNSSEC records are left
//! out (gtm signs a domain itself). `$INCLUDE` is refused: a file is
//! imported alone. Every error names its line.

use std::collections::HashMap;

use hickory_server::proto::rr::{Name, RData};
use serde_json::{Map, Value, json};

use crate::{
    compile::{absolute, presentation, read_value},
    config::RecordType,
};

mod lex;

/// A master file read as one domain's configuration.
#[derive(Debug, Clone)]
pub struct Imported {
    /// The domain's name, without its final dot.
    pub domain: String,
    /// The domain's keys the file gives (`ttl`, `nameservers`, `soa`,
    /// `record`), as the API's domain object takes them.
    pub body: Map<String, Value>,
    /// The line each record (by name and type, as its path names it)
    /// starts on.
    pub lines: HashMap<(String, String), usize>,
    /// What was read differently from the file, each with its line.
    pub notes: Vec<String>,
}

/// Reads `text` (a master file called `label` in errors) as the zone
/// `domain`, or the zone its SOA names. Errors are `label: line N: why`.
pub fn read(text: &str, label: &str, domain: Option<&str>) -> Result<Imported, Vec<String>> {
    let at = |line: usize, why: &str| format!("{label}: line {line}: {why}");
    let entries = lex::entries(text).map_err(|(line, why)| vec![at(line, &why)])?;
    let mut reader = Reader::default();
    let mut errors = Vec::new();
    for e in &entries {
        if let Err(why) = reader.entry(e) {
            errors.push(at(e.line, &why));
        }
    }
    let apex = match domain {
        Some(d) => absolute(d, &Name::root()).map_err(|e| vec![format!("--domain {d}: {e}")])?,
        None => match reader.records.iter().find(|r| r.kind == RecordType::SOA) {
            Some(soa) => soa.owner.clone(),
            None => {
                errors.push(format!(
                    "{label}: no SOA record names the zone; give --domain"
                ));
                return Err(errors);
            }
        },
    };
    let imported = reader.domain(&apex, label, &mut errors);
    if errors.is_empty() {
        Ok(imported)
    } else {
        Err(errors)
    }
}

/// One record of the file, read.
#[derive(Debug, Clone)]
struct Read {
    line: usize,
    owner: Name,
    ttl: u32,
    kind: RecordType,
    data: RData,
    /// Its data as written, when relative names in it are relative to the
    /// zone's apex (no `$ORIGIN` moved them).
    text: String,
    origin: Name,
}

#[derive(Debug, Default)]
struct Reader {
    origin: Option<Name>,
    default_ttl: Option<u32>,
    last_owner: Option<Name>,
    last_ttl: Option<u32>,
    records: Vec<Read>,
    /// DNSSEC records left out, with the first one's line.
    dnssec: Option<(usize, usize)>,
}

impl Reader {
    fn entry(&mut self, e: &lex::Entry) -> Result<(), String> {
        let words = &e.words;
        let first = words.first().map(String::as_str).unwrap_or_default();
        if first.starts_with('$') && !e.blank_owner {
            return self.directive(first, words.get(1..).unwrap_or_default());
        }
        let (owner, rest) = if e.blank_owner {
            let owner = self
                .last_owner
                .clone()
                .ok_or("the first record has no owner (it starts with a blank)")?;
            (owner, &words[..])
        } else {
            (self.name(first)?, words.get(1..).unwrap_or_default())
        };
        let mut rest = rest.iter().map(String::as_str).peekable();
        let mut ttl = None;
        for _ in 0..2 {
            match rest.peek() {
                Some(w) if ttl.is_none() && ttl_value(w).is_some() => {
                    ttl = ttl_value(w);
                    rest.next();
                }
                Some(w) if is_class(w) => {
                    if !w.eq_ignore_ascii_case("IN") {
                        return Err(format!("class {w}: only IN is served"));
                    }
                    rest.next();
                }
                _ => {}
            }
        }
        let ty = rest.next().ok_or("the record has no type")?;
        let kind: RecordType = ty
            .parse()
            .map_err(|e: crate::rtype::UnknownType| e.to_string())?;
        let text = rest.collect::<Vec<_>>().join(" ");
        let ttl = ttl
            .or(self.default_ttl)
            .or(self.last_ttl)
            .ok_or("the record has no TTL and no $TTL comes before it")?;
        self.last_owner = Some(owner.clone());
        self.last_ttl = Some(ttl);
        if is_dnssec(kind) {
            let (first, count) = self.dnssec.get_or_insert((e.line, 0));
            let _ = first;
            *count += 1;
            return Ok(());
        }
        let origin = self.origin.clone().unwrap_or_else(Name::root);
        let data = match kind {
            RecordType::SOA => soa(&text, &origin)?,
            RecordType::A | RecordType::AAAA => {
                let ip: std::net::IpAddr = text
                    .parse()
                    .map_err(|_| format!("\"{text}\" is not an address"))?;
                match (kind, ip) {
                    (RecordType::A, std::net::IpAddr::V4(v4)) => RData::A(v4.into()),
                    (RecordType::AAAA, std::net::IpAddr::V6(v6)) => RData::AAAA(v6.into()),
                    _ => return Err(format!("\"{text}\" is not an address of the type {kind}")),
                }
            }
            RecordType::CNAME => RData::CNAME(hickory_server::proto::rr::rdata::CNAME(absolute(
                &text, &origin,
            )?)),
            k if k.refusal().is_some() => {
                return Err(format!(
                    "{k} records cannot be imported: {}",
                    k.refusal().unwrap_or_default()
                ));
            }
            _ => read_value(kind, &text, &origin)?,
        };
        self.records.push(Read {
            line: e.line,
            owner,
            ttl,
            kind,
            data,
            text,
            origin,
        });
        Ok(())
    }

    fn directive(&mut self, name: &str, args: &[String]) -> Result<(), String> {
        let arg = args.first().map(String::as_str);
        match (name.to_ascii_uppercase().as_str(), arg) {
            ("$ORIGIN", Some(origin)) => {
                let base = self.origin.clone().unwrap_or_else(Name::root);
                self.origin = Some(absolute(origin, &base)?);
                Ok(())
            }
            ("$TTL", Some(ttl)) => {
                self.default_ttl =
                    Some(ttl_value(ttl).ok_or_else(|| format!("$TTL {ttl} is not a TTL"))?);
                Ok(())
            }
            ("$INCLUDE", _) => Err(
                "$INCLUDE is not read: a file is imported alone; put the included file's records in it"
                    .into(),
            ),
            ("$ORIGIN" | "$TTL", None) => Err(format!("{name} needs a value")),
            _ => Err(format!("{name} is not a directive gtm reads ($ORIGIN, $TTL)")),
        }
    }

    /// An owner as written: `@`, absolute, or relative to `$ORIGIN`.
    fn name(&self, word: &str) -> Result<Name, String> {
        let origin = self.origin.clone();
        match (word, origin) {
            ("@", Some(o)) => Ok(o),
            ("@", None) => Err("@ before any $ORIGIN".into()),
            (w, Some(o)) => absolute(w, &o),
            (w, None) if w.ends_with('.') => absolute(w, &Name::root()),
            (w, None) => Err(format!(
                "\"{w}\" is relative and no $ORIGIN comes before it"
            )),
        }
    }

    /// The records read, as domain `apex`'s keys.
    fn domain(self, apex: &Name, label: &str, errors: &mut Vec<String>) -> Imported {
        let at = |line: usize, why: String| format!("{label}: line {line}: {why}");
        let domain = apex.to_string().trim_end_matches('.').to_string();
        let mut notes = Vec::new();
        if let Some((line, count)) = self.dnssec {
            notes.push(format!(
                "line {line}: {count} DNSSEC records left out: gtm signs a domain itself (gtm domain dnssec enable {domain})"
            ));
        }
        let mut body = Map::new();
        let mut order: Vec<(String, RecordType)> = Vec::new();
        let mut sets: HashMap<(String, RecordType), (usize, u32, Vec<Value>)> = HashMap::new();
        let mut nameservers = Vec::new();
        let mut soa_ttl = None;
        for r in &self.records {
            if !apex.zone_of(&r.owner) {
                errors.push(at(
                    r.line,
                    format!("{} is outside the zone {domain}", r.owner),
                ));
                continue;
            }
            let relative = relative(&r.owner, apex);
            match (r.kind, relative.as_str()) {
                (RecordType::SOA, "@") => {
                    if soa_ttl.is_some() {
                        errors.push(at(r.line, "a second SOA record".into()));
                    }
                    soa_ttl = Some(r.ttl);
                    if let RData::SOA(s) = &r.data {
                        if s.serial != 0 {
                            notes.push(format!(
                                "line {}: the SOA serial {} is not kept: gtm numbers the domain's serials",
                                r.line,
                                s.serial
                            ));
                        }
                        body.insert(
                            "soa".into(),
                            json!({
                                "mname": name_value(&s.mname),
                                "rname": name_value(&s.rname),
                                "refresh": s.refresh,
                                "retry": s.retry,
                                "expire": s.expire,
                                "minimum": s.minimum,
                            }),
                        );
                    }
                    continue;
                }
                (RecordType::SOA, _) => {
                    errors.push(at(r.line, "an SOA record below the apex".into()));
                    continue;
                }
                (RecordType::NS, "@") => {
                    if let RData::NS(ns) = &r.data {
                        nameservers.push((r.line, r.ttl, name_value(&ns.0)));
                    }
                    continue;
                }
                _ => {}
            }
            let value = match &r.data {
                RData::A(a) => json!({ "ip": a.to_string() }),
                RData::AAAA(a) => json!({ "ip": a.to_string() }),
                RData::CNAME(c) => json!({ "target": name_value(&c.0) }),
                _ if r.origin == *apex => Value::String(r.text.clone()),
                other => Value::String(presentation(r.kind, other)),
            };
            let key = (relative, r.kind);
            match sets.get_mut(&key) {
                Some((first, ttl, values)) => {
                    if *ttl != r.ttl {
                        notes.push(format!(
                            "line {}: TTL {} differs from the {} of the same records on line {first}; {ttl} is kept",
                            r.line, r.ttl, ttl
                        ));
                    }
                    if !values.contains(&value) {
                        values.push(value);
                    }
                }
                None => {
                    order.push(key.clone());
                    sets.insert(key, (r.line, r.ttl, vec![value]));
                }
            }
        }
        let Some(ttl) = soa_ttl else {
            errors.push(format!("{label}: no SOA record at {domain}"));
            return Imported {
                domain,
                body,
                lines: HashMap::new(),
                notes,
            };
        };
        body.insert("ttl".into(), json!(ttl));
        if nameservers.is_empty() {
            errors.push(format!("{label}: no NS record at {domain}"));
        }
        for (line, ns_ttl, _) in &nameservers {
            if *ns_ttl != ttl {
                notes.push(format!(
                    "line {line}: the apex NS set takes the domain's TTL {ttl} (the file gives {ns_ttl})"
                ));
                break;
            }
        }
        body.insert(
            "nameservers".into(),
            Value::Array(
                nameservers
                    .into_iter()
                    .map(|(_, _, n)| Value::String(n))
                    .collect(),
            ),
        );
        let mut lines = HashMap::new();
        let mut records = Vec::new();
        for key in order {
            let Some((line, rttl, values)) = sets.remove(&key) else {
                continue;
            };
            let (name, kind) = key;
            let mut record = Map::new();
            record.insert("name".into(), json!(name));
            record.insert("type".into(), json!(kind.to_string()));
            if rttl != ttl {
                record.insert("ttl".into(), json!(rttl));
            }
            let field = if kind.is_steerable() {
                "addresses"
            } else {
                "values"
            };
            record.insert(field.into(), Value::Array(values));
            lines.insert((name, kind.to_string()), line);
            records.push(Value::Object(record));
        }
        body.insert("record".into(), Value::Array(records));
        Imported {
            domain,
            body,
            lines,
            notes,
        }
    }
}

/// An SOA's data: mname rname serial refresh retry expire minimum, the
/// timers in seconds or with units.
fn soa(text: &str, origin: &Name) -> Result<RData, String> {
    let words: Vec<&str> = text.split_ascii_whitespace().collect();
    let [mname, rname, serial, timers @ ..] = &words[..] else {
        return Err("an SOA is mname rname serial refresh retry expire minimum".into());
    };
    let serial: u32 = serial
        .parse()
        .map_err(|_| format!("SOA serial \"{serial}\" is not a number"))?;
    let timers: Vec<u32> = timers
        .iter()
        .map(|t| {
            ttl_value(t).ok_or_else(|| format!("SOA timer \"{t}\" is not a number of seconds"))
        })
        .collect::<Result<_, _>>()?;
    let [refresh, retry, expire, minimum] = timers[..] else {
        return Err("an SOA is mname rname serial refresh retry expire minimum".into());
    };
    let to_i32 = |v: u32| i32::try_from(v).map_err(|_| format!("SOA timer {v} is over 2147483647"));
    Ok(RData::SOA(hickory_server::proto::rr::rdata::SOA::new(
        absolute(mname, origin)?,
        absolute(rname, origin)?,
        serial,
        to_i32(refresh)?,
        to_i32(retry)?,
        to_i32(expire)?,
        minimum,
    )))
}

/// A TTL: seconds, or BIND's units (`1h30m`, `2d`, `1w`); at most
/// 2147483647 (RFC 2181 §8).
pub fn ttl_value(word: &str) -> Option<u32> {
    if word.is_empty() {
        return None;
    }
    if word.bytes().all(|b| b.is_ascii_digit()) {
        return word.parse::<u32>().ok().filter(|v| *v <= i32::MAX as u32);
    }
    let mut total: u64 = 0;
    let mut number: Option<u64> = None;
    for c in word.chars() {
        if let Some(d) = c.to_digit(10) {
            number = Some(
                number
                    .unwrap_or(0)
                    .checked_mul(10)?
                    .checked_add(u64::from(d))?,
            );
            continue;
        }
        let unit = match c.to_ascii_lowercase() {
            's' => 1,
            'm' => 60,
            'h' => 3600,
            'd' => 86_400,
            'w' => 604_800,
            _ => return None,
        };
        total = total.checked_add(number.take()?.checked_mul(unit)?)?;
    }
    if number.is_some() {
        return None;
    }
    u32::try_from(total).ok().filter(|v| *v <= i32::MAX as u32)
}

fn is_class(word: &str) -> bool {
    ["IN", "CH", "HS", "CS", "ANY", "NONE"]
        .iter()
        .any(|c| c.eq_ignore_ascii_case(word))
        || word
            .get(..5)
            .is_some_and(|p| p.eq_ignore_ascii_case("CLASS"))
}

/// The records a signed zone's file holds that gtm makes itself.
fn is_dnssec(kind: RecordType) -> bool {
    matches!(kind.code(), 46 | 47 | 48 | 50 | 51 | 59 | 60 | 63)
}

/// `owner` relative to `apex`: `@`, or its labels above the apex.
fn relative(owner: &Name, apex: &Name) -> String {
    if owner == apex {
        return "@".into();
    }
    let owner = owner.to_string();
    let suffix = format!(".{apex}");
    owner.strip_suffix(&suffix).unwrap_or(&owner).to_string()
}

/// A name as the configuration writes it: absolute, no final dot.
fn name_value(name: &Name) -> String {
    name.to_string().trim_end_matches('.').to_string()
}

#[cfg(test)]
mod tests;
