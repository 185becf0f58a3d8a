//! A steered answer's decision in words, for `Dnstap.extra`: one line of
//! `key=value` fields after the word `gtm`, in a fixed order, each present
//! only when it applies (docs/operations.md, "dnstap"):
//!
//! ```text
//! gtm record=www.example.test/A mode=datacenter view=internal client=10.1.2.0/24 place=EU/DE asn=64500 rule=1:region:eu nearest=dc1 dc=dc1 answer=192.0.2.10,192.0.2.11 kind=addresses reason=rule scope=24
//! ```
//!
//! Made by the writer, off the DNS workers, from what the answer path
//! noted ([`Steered`]): the record's configuration in the snapshot it
//! answered from, the answer it served, and the group and variant it
//! chose. Where the client was placed comes from the query path's own
//! code ([`explain_choice`], as `gtm record explain` uses it) over that
//! same answer.

use std::{collections::HashMap, fmt::Write as _, sync::Arc};

use gtm_geo::Geo;
use gtm_model::{
    compile::{Content, ModeSpec, RecordSpec},
    value::Value,
};
use gtm_resolve::PlaceKey;

use super::Steered;
use crate::snapshot::{NO_RULE, Snapshot, explain_choice, wire_type};

/// Records looked up at most before the lookups are forgotten.
const REMEMBERED: usize = 4096;

/// A steered record as the words name it.
#[derive(Debug)]
struct Known {
    spec: Arc<RecordSpec>,
    /// `record=`'s value.
    label: String,
}

/// The records of one owner looked up: per zone and type, the record.
type Owned = Vec<(usize, u16, Option<Arc<Known>>)>;

/// The decisions' words, with the records already looked up in the
/// snapshot served (a record is found by reading its zone's list).
#[derive(Debug, Default)]
pub struct Words {
    /// The snapshot the remembered records are of.
    snapshot: usize,
    /// By owner (lower-case wire form).
    records: HashMap<Box<[u8]>, Owned>,
    remembered: usize,
}

impl Words {
    /// The decision of `s` as `Dnstap.extra` text; `None` when its record
    /// is not a steered record of the snapshot it was answered from.
    pub fn text(&mut self, s: &Steered, geo: &Geo) -> Option<String> {
        let known = self.record(s)?;
        let Content::Steered(steering) = &known.spec.content else {
            return None;
        };
        let snap = &s.snapshot;
        let mut out = String::with_capacity(160);
        out.push_str("gtm record=");
        push_value(&mut out, &known.label);
        out.push_str(match &steering.mode {
            ModeSpec::Standalone => " mode=standalone",
            ModeSpec::DisasterRecovery(_) => " mode=disaster-recovery",
            ModeSpec::Datacenter { .. } => " mode=datacenter",
        });
        if !snap.views.is_empty() {
            let (view, _) = snap.view_of(geo, &s.client);
            out.push_str(" view=");
            push_value(&mut out, snap.view_name(view));
        }
        let chosen = explain_choice(&s.answer, &snap.topology, geo, &s.client);
        match (chosen.placed_by, chosen.source) {
            (None, _) => out.push_str(" client=none"),
            (Some(ip), Some(prefix)) => {
                let _ = write!(out, " client={ip}/{prefix}");
            }
            (Some(ip), None) => {
                let _ = write!(out, " client={ip}");
            }
        }
        if let Some(located) = &chosen.located {
            out.push_str(" place=");
            let place = &located.place;
            let start = out.len();
            let part = |out: &mut String, text: Option<&dyn std::fmt::Display>| {
                if let Some(t) = text {
                    if out.len() > start {
                        out.push('/');
                    }
                    let _ = write!(out, "{t}");
                }
            };
            part(&mut out, place.continent.as_ref().map(|c| c as _));
            part(&mut out, place.country.as_ref().map(|c| c as _));
            part(&mut out, place.subdivision.as_ref().map(|c| c as _));
            if out.len() == start {
                out.push_str("unknown");
            }
        }
        if let Some(asn) = chosen.asn {
            let _ = write!(out, " asn={asn}");
        }
        let rule = (s.choice.rule != NO_RULE).then_some(s.choice.rule as usize);
        if let Some(i) = rule {
            let _ = write!(out, " rule={}", i + 1);
            if let Some(m) = steering
                .rules()
                .get(i)
                .and_then(|r| snap.topology.matchers.get(r.matcher as usize))
            {
                out.push(':');
                push_value(&mut out, &m.name);
            }
        }
        let nearest = chosen
            .nearest
            .filter(|n| rule.is_none() && n.group == s.choice.group)
            .and_then(|n| s.answer.nearest().get(n.index))
            .and_then(|n| snap.datacenters.get(n.dc));
        if let Some(dc) = nearest {
            out.push_str(" nearest=");
            push_value(&mut out, dc);
        }
        // The answer: its records, the datacenters of its addresses, and
        // whether they are the fail-safe values.
        let group = s.answer.groups.get(s.choice.group);
        let sources: Vec<usize> = group
            .map(|g| g.sources(s.choice.variant).collect())
            .unwrap_or_default();
        let mut dcs: Vec<&str> = Vec::new();
        for &i in &sources {
            if let Some(dc) = steering
                .addresses
                .get(i)
                .and_then(|a| a.dc())
                .and_then(|d| snap.datacenters.get(d))
                && !dcs.contains(&dc.as_str())
            {
                dcs.push(dc);
            }
        }
        if !dcs.is_empty() {
            out.push_str(" dc=");
            push_list(&mut out, dcs.iter().copied());
        }
        out.push_str(" answer=");
        if let Some(g) = group {
            for (i, value) in g.variant_values(s.choice.variant).enumerate() {
                if i > 0 {
                    out.push(',');
                }
                match value {
                    Value::A(ip) => {
                        let _ = write!(out, "{ip}");
                    }
                    Value::Aaaa(ip) => {
                        let _ = write!(out, "{ip}");
                    }
                    Value::Other(data) => push_value(&mut out, &data.to_string()),
                }
            }
        }
        let fail_safe = sources.iter().any(|&i| i >= steering.addresses.len());
        out.push_str(match (sources.is_empty(), fail_safe) {
            (true, _) => " kind=empty",
            (false, true) => " kind=fail-safe",
            (false, false) => " kind=addresses",
        });
        out.push_str(if rule.is_some() {
            " reason=rule"
        } else if nearest.is_some() {
            " reason=nearest"
        } else if chosen.entry.is_some_and(|e: PlaceKey| {
            s.answer
                .places()
                .iter()
                .any(|(k, g)| *k == e && *g == s.choice.group)
        }) {
            " reason=place"
        } else {
            " reason=default"
        });
        if s.client.ecs.is_some() {
            let _ = write!(out, " scope={}", s.choice.scope);
        }
        Some(out)
    }

    /// The steered record `s` answered from, remembered per snapshot.
    fn record(&mut self, s: &Steered) -> Option<Arc<Known>> {
        let snap: &Snapshot = &s.snapshot;
        let at = std::ptr::from_ref(snap) as usize;
        if at != self.snapshot || self.remembered >= REMEMBERED {
            self.records.clear();
            self.remembered = 0;
            self.snapshot = at;
        }
        if let Some(found) = self
            .records
            .get(&*s.owner)
            .and_then(|list| list.iter().find(|(z, t, _)| *z == s.zone && *t == s.rtype))
        {
            return found.2.clone();
        }
        let found = find(snap, s.zone, &s.owner, s.rtype)
            .or_else(|| {
                // A view's zone answers some names from the zone every
                // client gets: the record is that zone's.
                let shared = snap.zone_at(&s.owner)?;
                find(snap, shared, &s.owner, s.rtype)
            })
            .map(|spec| {
                Arc::new(Known {
                    label: spec.label(),
                    spec,
                })
            });
        self.records
            .entry(s.owner.clone())
            .or_default()
            .push((s.zone, s.rtype, found.clone()));
        self.remembered += 1;
        found
    }
}

/// The steered record of zone `zone` at `owner` of type `rtype`.
fn find(snap: &Snapshot, zone: usize, owner: &[u8], rtype: u16) -> Option<Arc<RecordSpec>> {
    snap.zones
        .get(zone)?
        .spec
        .records
        .iter()
        .find(|r| {
            *r.owner == *owner
                && u16::from(wire_type(r.kind)) == rtype
                && matches!(r.content, Content::Steered(_))
        })
        .cloned()
}

/// A value without spaces: a space is written `%20` and `%` `%25`, so
/// fields split at spaces and values at `,` (a comma is `%2C`).
fn push_value(out: &mut String, value: &str) {
    for c in value.chars() {
        match c {
            ' ' => out.push_str("%20"),
            '%' => out.push_str("%25"),
            ',' => out.push_str("%2C"),
            c if c.is_control() => out.push('?'),
            c => out.push(c),
        }
    }
}

fn push_list<'a>(out: &mut String, values: impl Iterator<Item = &'a str>) {
    for (i, v) in values.enumerate() {
        if i > 0 {
            out.push(',');
        }
        push_value(out, v);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_never_hold_a_space_or_a_comma() {
        let mut out = String::new();
        push_list(&mut out, ["10 mx.example.test.", "50%,x"].into_iter());
        assert_eq!(out, "10%20mx.example.test.,50%25%2Cx");
    }
}
