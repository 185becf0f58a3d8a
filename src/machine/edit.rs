//! Puts and deletes of single configuration objects, as the state machine
//! applies them to the committed configuration (and a dry run to the
//! applied one).
//!
//! `Put` creates or replaces (a retried put changes nothing the second
//! time; a domain's records and a record's addresses stay unless the body
//! lists them); `Delete` of something absent is `not-found`.

use serde::{Serialize, de::DeserializeOwned};

use crate::api::{ApiError, ErrorKind};
use crate::command::{Edit, Kind};
use crate::model::{
    Config,
    config::{Address, Check, Datacenter, Domain, Record, Scenario, Service},
};

/// A top-level list of the configuration whose items have a unique name.
pub trait Collection: Serialize + DeserializeOwned + Clone + Send + 'static {
    /// Singular, as errors name it.
    const NOUN: &'static str;
    const KIND: Kind;
    fn items(config: &Config) -> &[Self];
    fn items_mut(config: &mut Config) -> &mut Vec<Self>;
    fn name(&self) -> &str;
    fn set_name(&mut self, name: String);
    /// The key of a list with routes of its own (a domain's `record`): a
    /// `PUT` whose body leaves it out keeps the list as it is.
    const CHILDREN: Option<&'static str> = None;
    /// Moves that list from the object being replaced.
    fn keep_children(&mut self, _replaced: &mut Self) {}
}

macro_rules! collection {
    ($t:ty, $noun:literal, $kind:ident, $field:ident $(, $key:literal => $children:ident)?) => {
        impl Collection for $t {
            const NOUN: &'static str = $noun;
            const KIND: Kind = Kind::$kind;
            fn items(config: &Config) -> &[Self] {
                &config.$field
            }
            fn items_mut(config: &mut Config) -> &mut Vec<Self> {
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
                fn keep_children(&mut self, replaced: &mut Self) {
                    self.$children = std::mem::take(&mut replaced.$children);
                }
            )?
        }
    };
}

collection!(Datacenter, "datacenter", Datacenter, datacenters);
collection!(Check, "check", Check, checks);
collection!(Scenario, "scenario", Scenario, scenarios);
collection!(Service, "service", Service, services);
collection!(Domain, "domain", Domain, domains, "record" => records);

/// Names compare as DNS names do: without case, and a final dot is optional.
pub fn same_name(a: &str, b: &str) -> bool {
    a.trim_end_matches('.')
        .eq_ignore_ascii_case(b.trim_end_matches('.'))
}

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

fn domain_mut<'c>(config: &'c mut Config, name: &str) -> Result<&'c mut Domain, ApiError> {
    let i = find::<Domain>(config, name)?;
    Ok(&mut config.domains[i])
}

fn same_address(a: &Address, key: &str) -> bool {
    match key.parse::<std::net::IpAddr>() {
        Ok(ip) => a.ip == Some(ip),
        Err(_) => a.target.as_deref().is_some_and(|t| same_name(t, key)),
    }
}

fn decode<T: DeserializeOwned>(what: &str, json: &str) -> Result<T, ApiError> {
    serde_json::from_str(json)
        .map_err(|e| ApiError::new(ErrorKind::BadRequest, format!("{what}: {e}")))
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
            Kind::Check => put::<Check>(config, name, json, *keep_children),
            Kind::Scenario => put::<Scenario>(config, name, json, *keep_children),
            Kind::Service => put::<Service>(config, name, json, *keep_children),
            Kind::Domain => put::<Domain>(config, name, json, *keep_children),
        },
        Edit::Delete { kind, name } => match kind {
            Kind::Datacenter => delete::<Datacenter>(config, name),
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
                        record.addresses = std::mem::take(&mut d.records[i].addresses);
                    }
                    d.records[i] = record;
                }
                Err(_) => d.records.push(record),
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
            let addresses = &mut d.records[i].addresses;
            match addresses.iter().position(|a| same_address(a, key)) {
                Some(j) => addresses[j] = address,
                None => addresses.push(address),
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
            let record = &mut d.records[i];
            let j = record
                .addresses
                .iter()
                .position(|a| same_address(a, key))
                .ok_or_else(|| not_found(format!("address {key} of record {name} {rtype}")))?;
            record.addresses.remove(j);
            Ok(())
        }
    }
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
                item.keep_children(&mut items[i]);
            }
            items[i] = item;
        }
        None => items.push(item),
    }
    Ok(())
}

fn delete<T: Collection>(config: &mut Config, name: &str) -> Result<(), ApiError> {
    let i = find::<T>(config, name)?;
    T::items_mut(config).remove(i);
    Ok(())
}
