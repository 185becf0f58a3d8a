//! A record's answer counts on this device (`gtm record stats`): the
//! responses that held the record, and each address they carried. Counts
//! are per device (each counts the queries it answers) and start at zero
//! when the device starts; `/metrics` has the same numbers.

use axum::{
    Json,
    extract::{Path, State},
};
use hickory_server::proto::rr::{Name, RecordType};
use serde::{Deserialize, Serialize};

use gtm_model::error::ApiError;

use super::ApiState;

use gtm_dns::counters::RecordStats;
use gtm_model::error::ErrorKind;

/// A record's counts and the device that counted them.
#[derive(Debug, Clone, Serialize, Deserialize, schemars::JsonSchema)]
pub struct DeviceRecordStats {
    pub device: String,
    #[serde(flatten)]
    pub stats: RecordStats,
}

pub(crate) async fn stats(
    State(state): State<ApiState>,
    Path((name, rtype)): Path<(String, String)>,
) -> Result<Json<DeviceRecordStats>, ApiError> {
    let bad = |what: String| ApiError::new(ErrorKind::BadRequest, what);
    let mut owner =
        Name::from_ascii(&name).map_err(|e| bad(format!("record name {name:?}: {e}")))?;
    owner.set_fqdn(true);
    let label = super::record_label(&name, &rtype);
    let (rtype, view) = gtm_model::names::type_and_view(&rtype);
    let kind: RecordType = rtype
        .to_ascii_uppercase()
        .parse()
        .map_err(|_| bad(format!("record type {rtype:?} is not a DNS record type")))?;
    let stats = state
        .engine
        .record_stats(&owner, kind, view)
        .ok_or_else(|| {
            ApiError::new(
                ErrorKind::NotFound,
                format!("no record {label} (see gtm status for the records)"),
            )
        })?;
    Ok(Json(DeviceRecordStats {
        device: state.engine.device().to_string(),
        stats,
    }))
}
