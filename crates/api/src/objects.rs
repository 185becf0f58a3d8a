//! Create, read, update and delete of single configuration objects.
//!
//! Reads answer from the applied configuration. Each write is one command
//! ([`gtm_node::command::Edit`]) proposed to the cluster: the state machine
//! applies it to the committed configuration and validates the result as a
//! whole, all or nothing (see [`gtm_node::machine::edit`] for what put,
//! patch and delete do). `?dry_run=true` applies the edit to a copy of the applied
//! configuration and returns the changes; `?version=N` refuses the write
//! (`conflict`) unless the committed configuration is still version N, a
//! compare-and-set checked cluster-wide.

use std::sync::Arc;

use axum::{
    Extension, Json,
    extract::{Path, Query, State},
};
use serde::Deserialize;
use serde_json::{Map, Value};

use gtm_model::error::ApiError;

use super::{ApiState, ApplyResult};

use gtm_model as model;
use gtm_model::config::{
    Address, Check, Datacenter, Domain, Notifier, Record, Region, Scenario, Service, View,
    same_name,
};
use gtm_model::error::ErrorKind;
use gtm_node::access::Principal;
pub use gtm_node::machine::edit::Collection;
use gtm_node::{
    command::{Action, Edit},
    machine::edit::{self, find, record_index},
};

/// Options of every object write.
#[derive(Debug, Default, Deserialize, schemars::JsonSchema)]
pub struct WriteOptions {
    #[serde(default)]
    pub dry_run: bool,
    /// Apply only if the configuration is still at this version.
    #[serde(default)]
    pub version: Option<u64>,
    /// Write even if a device would answer a record with nothing.
    #[serde(default)]
    pub force: bool,
}

/// The names of every configured object, without their contents: what a
/// client needs to find the domain a record name is in, at any size.
#[derive(Debug, serde::Serialize, Deserialize, schemars::JsonSchema)]
pub struct Names {
    pub datacenters: Vec<String>,
    pub regions: Vec<String>,
    pub views: Vec<String>,
    pub checks: Vec<String>,
    pub scenarios: Vec<String>,
    pub services: Vec<String>,
    pub domains: Vec<String>,
    #[serde(default)]
    pub notifiers: Vec<String>,
}

pub async fn names(State(state): State<ApiState>) -> Json<Names> {
    fn of<T: Collection>(config: &model::Config) -> Vec<String> {
        T::items(config)
            .iter()
            .map(|i| i.name().to_owned())
            .collect()
    }
    Json(state.engine.with_config(|c| Names {
        datacenters: of::<Datacenter>(c),
        regions: of::<Region>(c),
        views: of::<View>(c),
        checks: of::<Check>(c),
        scenarios: of::<Scenario>(c),
        services: of::<Service>(c),
        domains: of::<Domain>(c),
        notifiers: of::<Notifier>(c),
    }))
}

fn json_of<T: serde::Serialize>(value: &T) -> Result<String, ApiError> {
    serde_json::to_string(value).map_err(ApiError::internal)
}

pub async fn list<T: Collection>(State(state): State<ApiState>) -> Json<Vec<T>> {
    Json(
        state
            .engine
            .with_config(|c| T::items(c).iter().map(|x| T::clone(x)).collect()),
    )
}

pub async fn show<T: Collection>(
    State(state): State<ApiState>,
    Path(name): Path<String>,
) -> Result<Json<T>, ApiError> {
    let item = state
        .engine
        .with_config(|c| Ok::<_, ApiError>(T::clone(&T::items(c)[find::<T>(c, &name)?])))?;
    Ok(Json(item))
}

pub async fn put<T: Collection>(
    State(state): State<ApiState>,
    Extension(who): Extension<Principal>,
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
    let edit = Edit::Put {
        kind: T::KIND,
        name,
        json: json_of(&item)?,
        keep_children,
    };
    write(&state, &who, &options, edit).await
}

/// `PATCH`: the keys given change, the others stay (`null` resets one);
/// an object that is not there is created from the keys.
pub async fn patch<T: Collection>(
    State(state): State<ApiState>,
    Extension(who): Extension<Principal>,
    Path(name): Path<String>,
    Query(options): Query<WriteOptions>,
    Json(mut body): Json<Map<String, Value>>,
) -> Result<Json<ApplyResult>, ApiError> {
    if let Some(given) = body.get("name") {
        name_matches(T::NOUN, &name, given.as_str().unwrap_or_default())?;
    }
    body.insert("name".into(), name.clone().into());
    let edit = Edit::Patch {
        kind: T::KIND,
        name,
        json: json_of(&body)?,
    };
    write(&state, &who, &options, edit).await
}

pub async fn delete<T: Collection>(
    State(state): State<ApiState>,
    Extension(who): Extension<Principal>,
    Path(name): Path<String>,
    Query(options): Query<WriteOptions>,
) -> Result<Json<ApplyResult>, ApiError> {
    let edit = Edit::Delete {
        kind: T::KIND,
        name,
    };
    write(&state, &who, &options, edit).await
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
) -> Result<Json<Vec<Arc<Record>>>, ApiError> {
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

/// A record body: the path gives the name and type (a body may repeat them).
fn record_body(name: &str, rtype: &str, fields: &mut Map<String, Value>) -> Result<(), ApiError> {
    if let Some(given) = fields.get("name") {
        name_matches("record", name, given.as_str().unwrap_or_default())?;
    }
    if let Some(k) = fields.get("type")
        && !k.as_str().is_some_and(|k| k.eq_ignore_ascii_case(rtype))
    {
        return Err(ApiError::new(
            ErrorKind::BadRequest,
            format!("the body's type {k} is not the path's {rtype}"),
        ));
    }
    fields.insert("name".into(), name.into());
    fields.insert("type".into(), rtype.to_ascii_uppercase().into());
    Ok(())
}

pub async fn put_record(
    State(state): State<ApiState>,
    Extension(who): Extension<Principal>,
    Path((domain, name, rtype)): Path<(String, String, String)>,
    Query(options): Query<WriteOptions>,
    Json(mut fields): Json<Map<String, Value>>,
) -> Result<Json<ApplyResult>, ApiError> {
    record_body(&name, &rtype, &mut fields)?;
    // Addresses have routes of their own: a body without them keeps them.
    let keep_addresses = !fields.contains_key("addresses");
    let record: Record = serde_json::from_value(fields.into())
        .map_err(|e| ApiError::new(ErrorKind::BadRequest, format!("record {name} {rtype}: {e}")))?;
    let edit = Edit::PutRecord {
        domain,
        name,
        rtype,
        json: json_of(&record)?,
        keep_addresses,
    };
    write(&state, &who, &options, edit).await
}

/// `PATCH` of a record: the keys given change, the others stay.
pub async fn patch_record(
    State(state): State<ApiState>,
    Extension(who): Extension<Principal>,
    Path((domain, name, rtype)): Path<(String, String, String)>,
    Query(options): Query<WriteOptions>,
    Json(mut fields): Json<Map<String, Value>>,
) -> Result<Json<ApplyResult>, ApiError> {
    record_body(&name, &rtype, &mut fields)?;
    let edit = Edit::PatchRecord {
        domain,
        name,
        rtype,
        json: json_of(&fields)?,
    };
    write(&state, &who, &options, edit).await
}

pub async fn delete_record(
    State(state): State<ApiState>,
    Extension(who): Extension<Principal>,
    Path((domain, name, rtype)): Path<(String, String, String)>,
    Query(options): Query<WriteOptions>,
) -> Result<Json<ApplyResult>, ApiError> {
    let edit = Edit::DeleteRecord {
        domain,
        name,
        rtype,
    };
    write(&state, &who, &options, edit).await
}

pub async fn list_addresses(
    State(state): State<ApiState>,
    Path(path): Path<(String, String, String)>,
) -> Result<Json<Vec<Address>>, ApiError> {
    Ok(Json(read_record(&state, &path, |r| r.addresses.to_vec())?))
}

pub async fn put_address(
    State(state): State<ApiState>,
    Extension(who): Extension<Principal>,
    Path((domain, name, rtype, key)): Path<(String, String, String, String)>,
    Query(options): Query<WriteOptions>,
    Json(mut fields): Json<Map<String, Value>>,
) -> Result<Json<ApplyResult>, ApiError> {
    address_body(&key, &mut fields)?;
    let address: Address = serde_json::from_value(fields.into())
        .map_err(|e| ApiError::new(ErrorKind::BadRequest, format!("address {key}: {e}")))?;
    let edit = Edit::PutAddress {
        domain,
        name,
        rtype,
        key,
        json: json_of(&address)?,
    };
    write(&state, &who, &options, edit).await
}

/// `PATCH` of an address: the keys given change (`dc`, `hc`, `weight`,
/// ...), the others stay; an address that is not there is added.
pub async fn patch_address(
    State(state): State<ApiState>,
    Extension(who): Extension<Principal>,
    Path((domain, name, rtype, key)): Path<(String, String, String, String)>,
    Query(options): Query<WriteOptions>,
    Json(mut fields): Json<Map<String, Value>>,
) -> Result<Json<ApplyResult>, ApiError> {
    address_body(&key, &mut fields)?;
    let edit = Edit::PatchAddress {
        domain,
        name,
        rtype,
        key,
        json: json_of(&fields)?,
    };
    write(&state, &who, &options, edit).await
}

/// The path names the address: an IP, or a CNAME target; a body may repeat
/// it, and gets it.
fn address_body(key: &str, fields: &mut Map<String, Value>) -> Result<(), ApiError> {
    match key.parse::<std::net::IpAddr>() {
        Ok(ip) => {
            if let Some(given) = fields.get("ip")
                && given.as_str().and_then(|g| g.parse().ok()) != Some(ip)
            {
                return Err(ApiError::new(
                    ErrorKind::BadRequest,
                    format!("the body's ip {given} is not the path's {ip}"),
                ));
            }
            fields.insert("ip".into(), ip.to_string().into());
        }
        Err(_) => {
            if let Some(given) = fields.get("target")
                && !given.as_str().is_some_and(|t| same_name(t, key))
            {
                return Err(ApiError::new(
                    ErrorKind::BadRequest,
                    format!("the body's target {given} is not the path's {key}"),
                ));
            }
            fields.insert("target".into(), key.into());
        }
    }
    Ok(())
}

pub async fn delete_address(
    State(state): State<ApiState>,
    Extension(who): Extension<Principal>,
    Path((domain, name, rtype, key)): Path<(String, String, String, String)>,
    Query(options): Query<WriteOptions>,
) -> Result<Json<ApplyResult>, ApiError> {
    let edit = Edit::DeleteAddress {
        domain,
        name,
        rtype,
        key,
    };
    write(&state, &who, &options, edit).await
}

/// Proposes `edit`, or with `dry_run` applies it to a copy of the applied
/// configuration and returns what would change.
async fn write(
    state: &ApiState,
    who: &Principal,
    options: &WriteOptions,
    edit: Edit,
) -> Result<Json<ApplyResult>, ApiError> {
    let engine = state.engine.clone();
    let (expected, dry_run) = (options.version, options.dry_run);
    let probe = edit.clone();
    let (current, config, dry) = super::checking(&state.validations, move |cancel| {
        let version = engine.version();
        if dry_run
            && let Some(expected) = expected
            && expected != version
        {
            return Err(super::config::conflict(version, expected));
        }
        let current = engine.config();
        let mut config = model::Config::clone(&current);
        edit::apply(&mut config, &probe)?;
        let dry = if dry_run {
            model::compile_until(&config, cancel).map_err(super::refused)?;
            Some(ApplyResult::dry(
                version,
                gtm_engine::diff(&current, &config),
            ))
        } else {
            None
        };
        Ok((current, Arc::new(config), dry))
    })
    .await??;
    let judged = state
        .judge()
        .config(&edit.describe(), current, config)
        .await;
    if let Some(mut dry) = dry {
        dry.devices = judged;
        return Ok(Json(dry));
    }
    super::writable(state)?;
    if !options.force
        && let Some(refusal) = judged.as_ref().and_then(|j| j.refusal("write it anyway"))
    {
        return Err(refusal);
    }
    let applied = state
        .replication
        .propose(state.actor(who), options.version, Action::Edit(edit))
        .await?;
    Ok(Json(ApplyResult::from(applied)))
}
