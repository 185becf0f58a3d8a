//! Puts and deletes of single configuration objects, as the state machine
//! applies them to the committed configuration (and a dry run to the
//! applied one).
//!
//! `Put` creates or replaces (a retried put changes nothing the second
//! time; a domain's records and a record's addresses stay unless the body
//! lists them); `Patch` merges the keys it is given into the object and
//! keeps the others (RFC 7396 JSON merge patch: `null` resets a key), or
//! creates the object when there is none; `Delete` of something absent is
//! `not-found`.

use std::sync::Arc;

use serde::{Serialize, de::DeserializeOwned};
use serde_json::{Map, Value};

use crate::command::{Edit, Kind};
use gtm_model::error::{ApiError, ErrorKind};
use gtm_model::{
    Config,
    config::{
        Address, Check, Datacenter, Domain, Notifier, Record, Region, Scenario, Service, View,
        same_name,
    },
};

/// A top-level list of the configuration whose items have a unique name.
pub trait Collection: Serialize + DeserializeOwned + Clone + Send + 'static {
    /// Singular, as errors name it.
    const NOUN: &'static str;
    const KIND: Kind;
    fn items(config: &Config) -> &[Arc<Self>];
    fn items_mut(config: &mut Config) -> &mut Vec<Arc<Self>>;
    fn name(&self) -> &str;
    fn set_name(&mut self, name: String);
    /// The key of a list with routes of its own (a domain's `record`): a
    /// `PUT` whose body leaves it out keeps the list as it is.
    const CHILDREN: Option<&'static str> = None;
    /// Takes that list from the object being replaced.
    fn keep_children(&mut self, _replaced: &Self) {}
}

macro_rules! collection {
    ($t:ty, $noun:literal, $kind:ident, $field:ident $(, $key:literal => $children:ident)?) => {
        impl Collection for $t {
            const NOUN: &'static str = $noun;
            const KIND: Kind = Kind::$kind;
            fn items(config: &Config) -> &[Arc<Self>] {
                &config.$field
            }
            fn items_mut(config: &mut Config) -> &mut Vec<Arc<Self>> {
                &mut config.$field
            }
            fn name(&self) -> &str {
                &self.name
            }
            fn set_name(&mut self, name: String) {
                self.name = name;
            }
            $(
                const CHILDREN: Option<&'static str> = Some($key);
                fn keep_children(&mut self, replaced: &Self) {
                    self.$children = replaced.$children.clone();
                }
            )?
        }
    };
}

collection!(Datacenter, "datacenter", Datacenter, datacenters);
collection!(Region, "region", Region, regions);
collection!(View, "view", View, views);
collection!(Check, "check", Check, checks);
collection!(Scenario, "scenario", Scenario, scenarios);
collection!(Service, "service", Service, services);
collection!(Domain, "domain", Domain, domains, "record" => records);
collection!(Notifier, "notifier", Notifier, notifiers);

/// `what` is not in the configuration.
pub fn not_found(what: String) -> ApiError {
    ApiError::not_found(format!("{what} is not in the configuration"))
}

pub fn find<T: Collection>(config: &Config, name: &str) -> Result<usize, ApiError> {
    T::items(config)
        .iter()
        .position(|x| same_name(x.name(), name))
        .ok_or_else(|| not_found(format!("{} \"{name}\"", T::NOUN)))
}

/// A record in a domain, by owner name and type.
pub fn record_index(domain: &Domain, name: &str, rtype: &str) -> Result<usize, ApiError> {
    domain
        .records
        .iter()
        .position(|r| same_name(&r.name, name) && r.kind.as_str().eq_ignore_ascii_case(rtype))
        .ok_or_else(|| {
            not_found(format!(
                "record {name} {} in domain \"{}\"",
                rtype.to_ascii_uppercase(),
                domain.name
            ))
        })
}

/// The domain, its own copy when it is shared with another version.
fn domain_mut<'c>(config: &'c mut Config, name: &str) -> Result<&'c mut Domain, ApiError> {
    let i = find::<Domain>(config, name)?;
    Ok(Arc::make_mut(&mut config.domains[i]))
}

fn same_address(a: &Address, key: &str) -> bool {
    match key.parse::<std::net::IpAddr>() {
        Ok(ip) => a.ip == Some(ip),
        Err(_) => a.target().is_some_and(|t| same_name(t, key)),
    }
}

fn decode<T: DeserializeOwned>(what: &str, json: &str) -> Result<T, ApiError> {
    serde_json::from_str(json)
        .map_err(|e| ApiError::new(ErrorKind::BadRequest, format!("{what}: {e}")))
}

/// Whether the object an edit names is in `config` (before the edit):
/// history says a put of one that was not there created it.
pub fn existed(config: &Config, edit: &Edit) -> bool {
    let record = |domain: &str, name: &str, rtype: &str| {
        find::<Domain>(config, domain).ok().and_then(|d| {
            let d = &config.domains[d];
            record_index(d, name, rtype)
                .ok()
                .map(|r| d.records[r].clone())
        })
    };
    match edit {
        Edit::Put { kind, name, .. }
        | Edit::Patch { kind, name, .. }
        | Edit::Delete { kind, name } => match kind {
            Kind::Datacenter => find::<Datacenter>(config, name).is_ok(),
            Kind::Region => find::<Region>(config, name).is_ok(),
            Kind::View => find::<View>(config, name).is_ok(),
            Kind::Notifier => find::<Notifier>(config, name).is_ok(),
            Kind::Check => find::<Check>(config, name).is_ok(),
            Kind::Scenario => find::<Scenario>(config, name).is_ok(),
            Kind::Service => find::<Service>(config, name).is_ok(),
            Kind::Domain => find::<Domain>(config, name).is_ok(),
        },
        Edit::PutRecord {
            domain,
            name,
            rtype,
            ..
        }
        | Edit::PatchRecord {
            domain,
            name,
            rtype,
            ..
        }
        | Edit::DeleteRecord {
            domain,
            name,
            rtype,
        } => record(domain, name, rtype).is_some(),
        Edit::PutAddress {
            domain,
            name,
            rtype,
            key,
            ..
        }
        | Edit::PatchAddress {
            domain,
            name,
            rtype,
            key,
            ..
        }
        | Edit::DeleteAddress {
            domain,
            name,
            rtype,
            key,
        } => record(domain, name, rtype)
            .is_some_and(|r| r.addresses.iter().any(|a| same_address(a, key))),
    }
}

/// Applies `edit` to `config`. On an error `config` may be partly changed:
/// the caller works on a copy.
pub fn apply(config: &mut Config, edit: &Edit) -> Result<(), ApiError> {
    match edit {
        Edit::Put {
            kind,
            name,
            json,
            keep_children,
        } => match kind {
            Kind::Datacenter => put::<Datacenter>(config, name, json, *keep_children),
            Kind::Region => put::<Region>(config, name, json, *keep_children),
            Kind::View => put::<View>(config, name, json, *keep_children),
            Kind::Notifier => put::<Notifier>(config, name, json, *keep_children),
            Kind::Check => put::<Check>(config, name, json, *keep_children),
            Kind::Scenario => put::<Scenario>(config, name, json, *keep_children),
            Kind::Service => put::<Service>(config, name, json, *keep_children),
            Kind::Domain => put::<Domain>(config, name, json, *keep_children),
        },
        Edit::Delete { kind, name } => match kind {
            Kind::Datacenter => delete::<Datacenter>(config, name),
            Kind::Region => delete::<Region>(config, name),
            Kind::View => delete::<View>(config, name),
            Kind::Notifier => delete::<Notifier>(config, name),
            Kind::Check => delete::<Check>(config, name),
            Kind::Scenario => delete::<Scenario>(config, name),
            Kind::Service => delete::<Service>(config, name),
            Kind::Domain => delete::<Domain>(config, name),
        },
        Edit::PutRecord {
            domain,
            name,
            rtype,
            json,
            keep_addresses,
        } => {
            let mut record: Record = decode(&format!("record {name} {rtype}"), json)?;
            let d = domain_mut(config, domain)?;
            match record_index(d, name, rtype) {
                Ok(i) => {
                    if *keep_addresses {
                        record.addresses = d.records[i].addresses.clone();
                    }
                    d.records[i] = record.into();
                }
                Err(_) => d.records.push(record.into()),
            }
            Ok(())
        }
        Edit::DeleteRecord {
            domain,
            name,
            rtype,
        } => {
            let d = domain_mut(config, domain)?;
            let i = record_index(d, name, rtype)?;
            d.records.remove(i);
            Ok(())
        }
        Edit::PutAddress {
            domain,
            name,
            rtype,
            key,
            json,
        } => {
            let address: Address = decode(&format!("address {key}"), json)?;
            let d = domain_mut(config, domain)?;
            let i = record_index(d, name, rtype)?;
            let addresses = &mut Arc::make_mut(&mut d.records[i]).addresses;
            match addresses.iter().position(|a| same_address(a, key)) {
                Some(j) => addresses[j] = address,
                None => change_list(addresses, |l| l.push(address)),
            }
            Ok(())
        }
        Edit::DeleteAddress {
            domain,
            name,
            rtype,
            key,
        } => {
            let d = domain_mut(config, domain)?;
            let i = record_index(d, name, rtype)?;
            let record = Arc::make_mut(&mut d.records[i]);
            let j = record
                .addresses
                .iter()
                .position(|a| same_address(a, key))
                .ok_or_else(|| not_found(format!("address {key} of record {name} {rtype}")))?;
            change_list(&mut record.addresses, |l| {
                l.remove(j);
            });
            Ok(())
        }
        Edit::Patch { kind, name, json } => match kind {
            Kind::Datacenter => patch::<Datacenter>(config, name, json),
            Kind::Region => patch::<Region>(config, name, json),
            Kind::View => patch::<View>(config, name, json),
            Kind::Notifier => patch::<Notifier>(config, name, json),
            Kind::Check => patch::<Check>(config, name, json),
            Kind::Scenario => patch::<Scenario>(config, name, json),
            Kind::Service => patch::<Service>(config, name, json),
            Kind::Domain => patch::<Domain>(config, name, json),
        },
        Edit::PatchRecord {
            domain,
            name,
            rtype,
            json,
        } => {
            let what = format!("record {name} {rtype}");
            let d = domain_mut(config, domain)?;
            let i = record_index(d, name, rtype).ok();
            let mut record: Record = merged(&what, i.map(|i| &*d.records[i]), json)?;
            // The name is the one written (its case), the type the path's.
            record.name = match i {
                Some(i) => d.records[i].name.clone(),
                None => name.as_str().into(),
            };
            if !record.kind.as_str().eq_ignore_ascii_case(rtype) {
                return Err(ApiError::new(
                    ErrorKind::BadRequest,
                    format!("{what}: the type cannot change to {}", record.kind.as_str()),
                ));
            }
            match i {
                Some(i) => d.records[i] = record.into(),
                None => d.records.push(record.into()),
            }
            Ok(())
        }
        Edit::PatchAddress {
            domain,
            name,
            rtype,
            key,
            json,
        } => {
            let what = format!("address {key} of record {name} {rtype}");
            let d = domain_mut(config, domain)?;
            let i = record_index(d, name, rtype)?;
            let addresses = &mut Arc::make_mut(&mut d.records[i]).addresses;
            let j = addresses.iter().position(|a| same_address(a, key));
            let address: Address = merged(&what, j.map(|j| &addresses[j]), json)?;
            if !same_address(&address, key) {
                return Err(ApiError::new(
                    ErrorKind::BadRequest,
                    format!(
                        "{what}: the address itself cannot change; delete it and add the new one"
                    ),
                ));
            }
            match j {
                Some(j) => addresses[j] = address,
                None => change_list(addresses, |l| l.push(address)),
            }
            Ok(())
        }
    }
}

/// Changes a list held at its length as a `Vec`, and holds the result at
/// its length again.
fn change_list<T>(list: &mut Box<[T]>, change: impl FnOnce(&mut Vec<T>)) {
    let mut items = std::mem::take(list).into_vec();
    change(&mut items);
    *list = items.into();
}

/// `current` (when there is one) with the keys of the JSON object `patch`
/// merged in; the object `patch` describes when there is none.
fn merged<T: Serialize + DeserializeOwned>(
    what: &str,
    current: Option<&T>,
    patch: &str,
) -> Result<T, ApiError> {
    let bad = |e: String| ApiError::new(ErrorKind::BadRequest, format!("{what}: {e}"));
    let patch: Value = serde_json::from_str(patch).map_err(|e| bad(e.to_string()))?;
    if !patch.is_object() {
        return Err(bad("an update is an object of the keys to change".into()));
    }
    let mut value = match current {
        Some(c) => serde_json::to_value(c).map_err(|e| bad(e.to_string()))?,
        None => Value::Object(Map::new()),
    };
    merge_patch(&mut value, patch);
    serde_json::from_value(value).map_err(|e| bad(e.to_string()))
}

/// RFC 7396: objects merge key by key, `null` removes a key, anything else
/// (arrays included) replaces.
fn merge_patch(target: &mut Value, patch: Value) {
    match patch {
        Value::Object(patch) => {
            if !target.is_object() {
                *target = Value::Object(Map::new());
            }
            if let Value::Object(map) = target {
                for (key, value) in patch {
                    if value.is_null() {
                        map.remove(&key);
                    } else {
                        merge_patch(map.entry(key).or_insert(Value::Null), value);
                    }
                }
            }
        }
        patch => *target = patch,
    }
}

fn patch<T: Collection>(config: &mut Config, name: &str, json: &str) -> Result<(), ApiError> {
    let what = format!("{} \"{name}\"", T::NOUN);
    let items = T::items_mut(config);
    let i = items.iter().position(|x| same_name(x.name(), name));
    let mut item: T = merged(&what, i.map(|i| &*items[i]), json)?;
    match i {
        Some(i) => {
            let kept = items[i].name().to_string();
            item.set_name(kept);
            items[i] = Arc::new(item);
        }
        None => {
            item.set_name(name.to_string());
            items.push(Arc::new(item));
        }
    }
    Ok(())
}

fn put<T: Collection>(
    config: &mut Config,
    name: &str,
    json: &str,
    keep_children: bool,
) -> Result<(), ApiError> {
    let mut item: T = decode(&format!("{} \"{name}\"", T::NOUN), json)?;
    item.set_name(name.to_string());
    let items = T::items_mut(config);
    match items.iter().position(|x| same_name(x.name(), name)) {
        Some(i) => {
            if keep_children {
                item.keep_children(&items[i]);
            }
            items[i] = Arc::new(item);
        }
        None => items.push(Arc::new(item)),
    }
    Ok(())
}

fn delete<T: Collection>(config: &mut Config, name: &str) -> Result<(), ApiError> {
    let i = find::<T>(config, name)?;
    T::items_mut(config).remove(i);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config() -> Config {
        gtm_model::parse(
            r#"
[[datacenter]]
name = "dc1"

[[check]]
name = "web"
type = "tcp"
target = "127.0.0.1"
port = 80
interval = "5s"

[[domain]]
name = "example.test"
nameservers = ["ns1.example.test"]

[[domain.record]]
name = "www"
type = "A"
ttl = 60
addresses = [{ ip = "192.0.2.1", dc = "dc1", hc = "check:web" }]
"#,
        )
        .unwrap()
    }

    fn patch_address(json: &str) -> Edit {
        Edit::PatchAddress {
            domain: "example.test".into(),
            name: "www".into(),
            rtype: "A".into(),
            key: "192.0.2.1".into(),
            json: json.into(),
        }
    }

    #[test]
    fn an_edit_copies_the_domain_it_touches_and_shares_the_rest() {
        let mut current = config();
        let mut other = Domain::clone(&current.domains[0]);
        other.name = "other.test".into();
        current.domains.push(Arc::new(other));
        let mut new = current.clone();
        let put = Edit::PutRecord {
            domain: "other.test".into(),
            name: "api".into(),
            rtype: "A".into(),
            json: r#"{"name":"api","type":"A","addresses":[{"ip":"192.0.2.7"}]}"#.into(),
            keep_addresses: false,
        };
        apply(&mut new, &put).unwrap();
        assert!(Arc::ptr_eq(&current.domains[0], &new.domains[0]));
        assert!(!Arc::ptr_eq(&current.domains[1], &new.domains[1]));
        assert_eq!(current.domains[1].records.len(), 1, "the version before");
        assert_eq!(new.domains[1].records.len(), 2);
        assert_ne!(current, new);
    }

    #[test]
    fn a_patch_keeps_what_it_does_not_name_and_null_resets() {
        let mut c = config();
        apply(
            &mut c,
            &patch_address(r#"{"ip":"192.0.2.1","hc":"disabled"}"#),
        )
        .unwrap();
        let a = &c.domains[0].records[0].addresses[0];
        assert_eq!(a.dc(), Some("dc1"));
        assert_eq!(
            serde_json::to_value(a).unwrap()["hc"],
            serde_json::json!("disabled")
        );
        apply(&mut c, &patch_address(r#"{"ip":"192.0.2.1","dc":null}"#)).unwrap();
        assert_eq!(c.domains[0].records[0].addresses[0].dc(), None);

        let interval = Edit::Patch {
            kind: Kind::Check,
            name: "WEB".into(),
            json: r#"{"name":"WEB","interval":"10s"}"#.into(),
        };
        apply(&mut c, &interval).unwrap();
        let check = serde_json::to_value(&c.checks[0]).unwrap();
        assert_eq!(check["name"], "web", "the name keeps its case");
        assert_eq!(check["interval"], "10s");
        assert_eq!(check["port"], 80);
    }

    #[test]
    fn a_patch_creates_what_is_absent_and_refuses_to_change_identity() {
        let mut c = config();
        apply(
            &mut c,
            &Edit::PatchAddress {
                domain: "example.test".into(),
                name: "www".into(),
                rtype: "A".into(),
                key: "192.0.2.2".into(),
                json: r#"{"ip":"192.0.2.2","weight":2}"#.into(),
            },
        )
        .unwrap();
        assert_eq!(c.domains[0].records[0].addresses.len(), 2);

        let e = apply(&mut c, &patch_address(r#"{"ip":"192.0.2.9"}"#)).unwrap_err();
        assert!(e.message.contains("cannot change"), "{}", e.message);
        let e = apply(
            &mut c,
            &Edit::PatchRecord {
                domain: "example.test".into(),
                name: "www".into(),
                rtype: "A".into(),
                json: r#"{"name":"www","type":"AAAA"}"#.into(),
            },
        )
        .unwrap_err();
        assert!(e.message.contains("type cannot change"), "{}", e.message);
        let e = apply(&mut c, &patch_address("[1]")).unwrap_err();
        assert!(e.message.contains("object"), "{}", e.message);
    }

    #[test]
    fn a_view_is_put_patched_and_deleted_by_name() {
        let mut c = config();
        let view = |json: &str| Edit::Put {
            kind: Kind::View,
            name: "internal".into(),
            json: json.into(),
            keep_children: false,
        };
        let put = view(r#"{"name":"internal","clients":["10.0.0.0/8"]}"#);
        assert!(!existed(&c, &put));
        apply(&mut c, &put).unwrap();
        assert!(existed(&c, &put));
        assert_eq!(c.views.len(), 1);
        assert_eq!(c.views[0].clients, ["10.0.0.0/8"]);

        let patch = Edit::Patch {
            kind: Kind::View,
            name: "INTERNAL".into(),
            json: r#"{"clients":["10.0.0.0/8","country:DE"]}"#.into(),
        };
        apply(&mut c, &patch).unwrap();
        assert_eq!(c.views.len(), 1);
        assert_eq!(c.views[0].name, "internal", "the name keeps its case");
        assert_eq!(c.views[0].clients, ["10.0.0.0/8", "country:DE"]);

        let e = apply(&mut c, &view(r#"{"name":"internal","networks":[]}"#)).unwrap_err();
        assert!(e.message.starts_with("view"), "{}", e.message);

        let delete = Edit::Delete {
            kind: Kind::View,
            name: "internal".into(),
        };
        apply(&mut c, &delete).unwrap();
        assert!(c.views.is_empty());
        let e = apply(&mut c, &delete).unwrap_err();
        assert!(e.message.contains("view \"internal\""), "{}", e.message);
    }
}
