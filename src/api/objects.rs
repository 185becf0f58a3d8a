//! Create, read, update and delete of single configuration objects.
//!
//! Each write edits a copy of the applied configuration and sends the whole
//! of it through the same path as `PUT /api/v1/config`: validated as one,
//! replicated as one Raft entry, all or nothing. `PUT` creates or replaces
//! (a retried `PUT` changes nothing the second time; a domain's records and
//! a record's addresses stay unless the body lists them); `DELETE` of something
//! absent is `not-found`. `?dry_run=true` returns the changes without
//! applying; `?version=N` refuses the write (`conflict`) unless the applied
//! configuration is still version N, for clients that read, edit and write.

use axum::{
    Json,
    extract::{Path, Query, State},
};
use serde::{Deserialize, Serialize, de::DeserializeOwned};
use serde_json::{Map, Value};

use super::{ApiError, ApiState, ApplyResult, ErrorKind};
use crate::model::{
    self, Config,
    config::{Address, Check, Datacenter, Domain, Record, Scenario, Service},
};

/// Options of every object write.
#[derive(Debug, Default, Deserialize, schemars::JsonSchema)]
pub struct WriteOptions {
    #[serde(default)]
    pub dry_run: bool,
    /// Apply only if the configuration is still at this version.
    #[serde(default)]
    pub version: Option<u64>,
}

/// A top-level list of the configuration whose items have a unique name.
pub trait Collection: Serialize + DeserializeOwned + Clone + Send + 'static {
    /// Singular, as errors name it.
    const NOUN: &'static str;
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
    ($t:ty, $noun:literal, $field:ident $(, $key:literal => $children:ident)?) => {
        impl Collection for $t {
            const NOUN: &'static str = $noun;
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

collection!(Datacenter, "datacenter", datacenters);
collection!(Check, "check", checks);
collection!(Scenario, "scenario", scenarios);
collection!(Service, "service", services);
collection!(Domain, "domain", domains, "record" => records);

/// Names compare as DNS names do: without case, and a final dot is optional.
fn same_name(a: &str, b: &str) -> bool {
    a.trim_end_matches('.')
        .eq_ignore_ascii_case(b.trim_end_matches('.'))
}

/// `what` is not in the applied configuration.
fn not_found(what: String) -> ApiError {
    super::not_found(format!("{what} is not in the configuration"))
}

fn find<T: Collection>(config: &Config, name: &str) -> Result<usize, ApiError> {
    T::items(config)
        .iter()
        .position(|x| same_name(x.name(), name))
        .ok_or_else(|| not_found(format!("{} \"{name}\"", T::NOUN)))
}

pub async fn list<T: Collection>(State(state): State<ApiState>) -> Json<Vec<T>> {
    Json(state.engine.with_config(|c| T::items(c).to_vec()))
}

pub async fn show<T: Collection>(
    State(state): State<ApiState>,
    Path(name): Path<String>,
) -> Result<Json<T>, ApiError> {
    let item = state
        .engine
        .with_config(|c| Ok::<_, ApiError>(T::items(c)[find::<T>(c, &name)?].clone()))?;
    Ok(Json(item))
}

pub async fn put<T: Collection>(
    State(state): State<ApiState>,
    Path(name): Path<String>,
    Query(options): Query<WriteOptions>,
    Json(mut body): Json<Map<String, Value>>,
) -> Result<Json<ApplyResult>, ApiError> {
    if let Some(given) = body.get("name") {
        name_matches(T::NOUN, &name, given.as_str().unwrap_or_default())?;
    }
    body.insert("name".into(), name.clone().into());
    let keep_children = T::CHILDREN.is_some_and(|key| !body.contains_key(key));
    let mut item: T = serde_json::from_value(body.into()).map_err(|e| {
        ApiError::new(
            ErrorKind::BadRequest,
            format!("{} \"{name}\": {e}", T::NOUN),
        )
    })?;
    item.set_name(name.clone());
    edit(&state, &options, |config| {
        let items = T::items_mut(config);
        match items.iter().position(|x| same_name(x.name(), &name)) {
            Some(i) => {
                if keep_children {
                    item.keep_children(&mut items[i]);
                }
                items[i] = item;
            }
            None => items.push(item),
        }
        Ok(())
    })
    .await
}

pub async fn delete<T: Collection>(
    State(state): State<ApiState>,
    Path(name): Path<String>,
    Query(options): Query<WriteOptions>,
) -> Result<Json<ApplyResult>, ApiError> {
    edit(&state, &options, |config| {
        let i = find::<T>(config, &name)?;
        T::items_mut(config).remove(i);
        Ok(())
    })
    .await
}

/// A body may leave the name out; if it gives one, it is the path's.
fn name_matches(noun: &str, path: &str, body: &str) -> Result<(), ApiError> {
    if same_name(path, body) {
        Ok(())
    } else {
        Err(ApiError::new(
            ErrorKind::BadRequest,
            format!(
                "the body names {noun} \"{body}\" but the path names \"{path}\"; rename by deleting and creating"
            ),
        ))
    }
}

/// A record in a domain, by owner name and type.
fn record_index(domain: &Domain, name: &str, rtype: &str) -> Result<usize, ApiError> {
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

/// A record of the applied configuration, read in place.
fn read_record<R>(
    state: &ApiState,
    (domain, name, rtype): &(String, String, String),
    read: impl FnOnce(&Record) -> R,
) -> Result<R, ApiError> {
    state.engine.with_config(|c| {
        let d = &c.domains[find::<Domain>(c, domain)?];
        Ok(read(&d.records[record_index(d, name, rtype)?]))
    })
}

pub async fn list_records(
    State(state): State<ApiState>,
    Path(domain): Path<String>,
) -> Result<Json<Vec<Record>>, ApiError> {
    let records = state.engine.with_config(|c| {
        Ok::<_, ApiError>(c.domains[find::<Domain>(c, &domain)?].records.clone())
    })?;
    Ok(Json(records))
}

pub async fn show_record(
    State(state): State<ApiState>,
    Path(path): Path<(String, String, String)>,
) -> Result<Json<Record>, ApiError> {
    Ok(Json(read_record(&state, &path, Record::clone)?))
}

/// A record PUT: the path gives the name and type (a body may repeat them).
pub async fn put_record(
    State(state): State<ApiState>,
    Path((domain, name, rtype)): Path<(String, String, String)>,
    Query(options): Query<WriteOptions>,
    Json(mut fields): Json<Map<String, Value>>,
) -> Result<Json<ApplyResult>, ApiError> {
    if let Some(given) = fields.get("name") {
        name_matches("record", &name, given.as_str().unwrap_or_default())?;
    }
    if let Some(k) = fields.get("type")
        && !k.as_str().is_some_and(|k| k.eq_ignore_ascii_case(&rtype))
    {
        return Err(ApiError::new(
            ErrorKind::BadRequest,
            format!("the body's type {k} is not the path's {rtype}"),
        ));
    }
    fields.insert("name".into(), name.clone().into());
    fields.insert("type".into(), rtype.to_ascii_uppercase().into());
    // Addresses have routes of their own: a body without them keeps them.
    let keep_addresses = !fields.contains_key("addresses");
    let record: Record = serde_json::from_value(fields.into())
        .map_err(|e| ApiError::new(ErrorKind::BadRequest, format!("record {name} {rtype}: {e}")))?;
    edit(&state, &options, |config| {
        let d = domain_mut(config, &domain)?;
        match record_index(d, &name, &rtype) {
            Ok(i) => {
                let mut record = record;
                if keep_addresses {
                    record.addresses = std::mem::take(&mut d.records[i].addresses);
                }
                d.records[i] = record;
            }
            Err(_) => d.records.push(record),
        }
        Ok(())
    })
    .await
}

pub async fn delete_record(
    State(state): State<ApiState>,
    Path((domain, name, rtype)): Path<(String, String, String)>,
    Query(options): Query<WriteOptions>,
) -> Result<Json<ApplyResult>, ApiError> {
    edit(&state, &options, |config| {
        let d = domain_mut(config, &domain)?;
        let i = record_index(d, &name, &rtype)?;
        d.records.remove(i);
        Ok(())
    })
    .await
}

/// An address is named by its IP or, in a CNAME record, its target.
fn address_key(a: &Address) -> String {
    match (&a.ip, &a.target) {
        (Some(ip), _) => ip.to_string(),
        (None, Some(t)) => t.clone(),
        (None, None) => String::new(),
    }
}

fn same_address(a: &Address, key: &str) -> bool {
    match key.parse::<std::net::IpAddr>() {
        Ok(ip) => a.ip == Some(ip),
        Err(_) => a.target.as_deref().is_some_and(|t| same_name(t, key)),
    }
}

pub async fn list_addresses(
    State(state): State<ApiState>,
    Path(path): Path<(String, String, String)>,
) -> Result<Json<Vec<Address>>, ApiError> {
    Ok(Json(read_record(&state, &path, |r| r.addresses.clone())?))
}

pub async fn put_address(
    State(state): State<ApiState>,
    Path((domain, name, rtype, key)): Path<(String, String, String, String)>,
    Query(options): Query<WriteOptions>,
    Json(mut address): Json<Address>,
) -> Result<Json<ApplyResult>, ApiError> {
    // The path names the address: an IP, or a CNAME target.
    match key.parse::<std::net::IpAddr>() {
        Ok(ip) => {
            if address.ip.is_some_and(|given| given != ip) {
                return Err(ApiError::new(
                    ErrorKind::BadRequest,
                    format!(
                        "the body's ip {} is not the path's {ip}",
                        address_key(&address)
                    ),
                ));
            }
            address.ip = Some(ip);
        }
        Err(_) => {
            if address
                .target
                .as_deref()
                .is_some_and(|t| !same_name(t, &key))
            {
                return Err(ApiError::new(
                    ErrorKind::BadRequest,
                    format!("the body's target is not the path's {key}"),
                ));
            }
            address.target = Some(key.clone());
        }
    }
    edit(&state, &options, |config| {
        let d = domain_mut(config, &domain)?;
        let i = record_index(d, &name, &rtype)?;
        let addresses = &mut d.records[i].addresses;
        match addresses.iter().position(|a| same_address(a, &key)) {
            Some(j) => addresses[j] = address,
            None => addresses.push(address),
        }
        Ok(())
    })
    .await
}

pub async fn delete_address(
    State(state): State<ApiState>,
    Path((domain, name, rtype, key)): Path<(String, String, String, String)>,
    Query(options): Query<WriteOptions>,
) -> Result<Json<ApplyResult>, ApiError> {
    edit(&state, &options, |config| {
        let d = domain_mut(config, &domain)?;
        let i = record_index(d, &name, &rtype)?;
        let record = &mut d.records[i];
        let j = record
            .addresses
            .iter()
            .position(|a| same_address(a, &key))
            .ok_or_else(|| not_found(format!("address {key} of record {name} {rtype}")))?;
        record.addresses.remove(j);
        Ok(())
    })
    .await
}

/// Applies `change` to a copy of the applied configuration, then writes the
/// result as one configuration. Nothing changes when `change` or the
/// validation fails.
async fn edit(
    state: &ApiState,
    options: &WriteOptions,
    change: impl FnOnce(&mut Config) -> Result<(), ApiError>,
) -> Result<Json<ApplyResult>, ApiError> {
    // One edit at a time on this device, so two clients do not both start
    // from the same version and lose one's change.
    let _one = state.edits.lock().await;
    let version = state.engine.version();
    if let Some(expected) = options.version
        && expected != version
    {
        return Err(ApiError::new(
            ErrorKind::Conflict,
            format!(
                "the configuration is at version {version}, not {expected}; read it again and retry"
            ),
        ));
    }
    let mut config = state.engine.config();
    change(&mut config)?;
    model::compile(&config).map_err(ApiError::invalid)?;
    if options.dry_run || state.engine.is_applied(&config) {
        // A retried write that is already applied changes nothing.
        return Ok(Json(ApplyResult {
            applied: false,
            version,
            changes: state.engine.changes(&config),
        }));
    }
    let text = toml::to_string_pretty(&config).map_err(|e| {
        ApiError::new(
            ErrorKind::Internal,
            format!("the configuration cannot be written as TOML: {e}"),
        )
    })?;
    super::writable(state)?;
    let (version, changes) = state.replication.apply(text, config).await?;
    Ok(Json(ApplyResult {
        applied: true,
        version,
        changes,
    }))
}
