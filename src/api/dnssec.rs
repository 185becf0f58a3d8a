//! A domain's DNSSEC state on this device (`gtm domain dnssec status`,
//! `gtm domain ds`): whether it is signed, its keys' DNSKEY and DS records
//! (never a private key), and when the signatures served expire.

use axum::{
    Json,
    extract::{Path, State},
};

use super::{ApiError, ApiState, ErrorKind};
use crate::engine::dnssec::DomainDnssec;

pub(crate) async fn status(
    State(state): State<ApiState>,
    Path(name): Path<String>,
) -> Result<Json<DomainDnssec>, ApiError> {
    state.engine.domain_dnssec(&name).map(Json).ok_or_else(|| {
        ApiError::new(
            ErrorKind::NotFound,
            format!("no domain named \"{}\"", name.trim_end_matches('.')),
        )
    })
}
