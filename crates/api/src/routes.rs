//! Every route of a device, in one table: the router is built from it, the
//! OpenAPI document is written from it, and the security test walks it.

use axum::{
    http::Method,
    routing::{MethodFilter, MethodRouter, on},
};
use schemars::{JsonSchema, Schema, SchemaGenerator, generate::SchemaSettings};
use serde_json::{Map, Value, json};

use gtm_model::error::ApiError;

use super::{
    AlertTest, ApiState, ApplyResult, CheckStateRequest, ClusterMessage, DrainAddress,
    DrainDatacenter, GeoLookup, GeoipStatus, JoinCommand, NewToken, ProbeRequest, StatusReport,
    TestRequest, TestResult, TokenRequest, TokenResponse, UserRequest, WhoAmI, accounts, alerts,
    checks, cluster, config, dnssec, drains, events, geoip, history, inputs, objects, peer,
    records, schedules, stats, status, tsig, zones,
};
use gtm_engine::{CheckStatus, Event, Explain, Preview, RecordView};
use gtm_model::config::{
    Address, Check, Datacenter, Domain, Notifier, Record, Region, Scenario, Service, View,
};
use gtm_node::access::Role;

/// Who may call a route.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Access {
    /// `/health` and `/metrics`.
    Public,
    /// A bearer token or a console session (docs/access.md) whose role is
    /// at least [`Op::role`].
    Token,
    /// Device to device: the cluster secret header.
    ClusterSecret,
}

type SchemaFn = fn(&mut SchemaGenerator) -> Schema;

fn schema<T: JsonSchema>(g: &mut SchemaGenerator) -> Schema {
    g.subschema_for::<T>()
}

/// What a request carries or a response gives.
#[derive(Clone, Copy, Debug)]
pub enum Payload {
    None,
    Json(SchemaFn),
    /// TOML text (a configuration).
    Toml,
    /// Plain text.
    Text,
    /// Bytes (a GeoIP database).
    Binary,
}

/// One operation: method and path, and what the document says of it.
#[derive(Debug)]
pub struct Op {
    pub method: Method,
    /// axum syntax, `{name}` for a path parameter.
    pub path: &'static str,
    pub access: Access,
    /// The least role a `Token` route needs: by default viewer to read
    /// (GET) and admin to change anything; operator actions say so.
    pub role: Role,
    pub summary: &'static str,
    pub body: Payload,
    pub response: Payload,
    /// Query parameters: name, type (`boolean`, `integer`, `string`), meaning.
    pub query: &'static [(&'static str, &'static str, &'static str)],
    pub handler: MethodRouter<ApiState>,
}

const WRITE_QUERY: &[(&str, &str, &str)] = &[
    (
        "dry_run",
        "boolean",
        "show the changes, and each record's answers on every device; apply nothing",
    ),
    (
        "version",
        "integer",
        "apply only if the configuration is still at this version (else 409 conflict)",
    ),
    (
        "force",
        "boolean",
        "write even if a device would answer a record with nothing (else 409 conflict)",
    ),
];

fn op(
    method: Method,
    path: &'static str,
    access: Access,
    summary: &'static str,
    handler: MethodRouter<ApiState>,
) -> Op {
    let role = if method == Method::GET {
        Role::Viewer
    } else {
        Role::Admin
    };
    Op {
        method,
        path,
        access,
        role,
        summary,
        body: Payload::None,
        response: Payload::None,
        query: &[],
        handler,
    }
}

impl Op {
    fn body(mut self, body: Payload) -> Self {
        self.body = body;
        self
    }
    fn returns(mut self, response: Payload) -> Self {
        self.response = response;
        self
    }
    fn role(mut self, role: Role) -> Self {
        self.role = role;
        self
    }
    fn query(mut self, query: &'static [(&'static str, &'static str, &'static str)]) -> Self {
        self.query = query;
        self
    }
}

fn filter(method: &Method) -> MethodFilter {
    MethodFilter::try_from(method.clone()).expect("the table uses standard methods")
}

macro_rules! handler {
    ($method:expr, $f:expr) => {
        on(filter(&$method), $f)
    };
}

/// The five named collections: list, show, put, delete.
fn collection<T: objects::Collection + JsonSchema>(
    ops: &mut Vec<Op>,
    list_path: &'static str,
    item_path: &'static str,
) {
    use Access::Token;
    ops.push(
        op(
            Method::GET,
            list_path,
            Token,
            "List, as configured",
            handler!(Method::GET, objects::list::<T>),
        )
        .returns(Payload::Json(schema::<Vec<T>>)),
    );
    ops.push(
        op(
            Method::GET,
            item_path,
            Token,
            "Show one, as configured",
            handler!(Method::GET, objects::show::<T>),
        )
        .returns(Payload::Json(schema::<T>)),
    );
    ops.push(
        op(
            Method::PUT,
            item_path,
            Token,
            "Create or replace one, whole (the path names it; keys absent take their defaults)",
            handler!(Method::PUT, objects::put::<T>),
        )
        .body(Payload::Json(schema::<T>))
        .returns(Payload::Json(schema::<ApplyResult>))
        .query(WRITE_QUERY),
    );
    ops.push(
        op(
            Method::PATCH,
            item_path,
            Token,
            "Change the keys given and keep the others (JSON merge patch: null resets a key); creates it when absent",
            handler!(Method::PATCH, objects::patch::<T>),
        )
        .body(Payload::Json(schema::<Value>))
        .returns(Payload::Json(schema::<ApplyResult>))
        .query(WRITE_QUERY),
    );
    ops.push(
        op(
            Method::DELETE,
            item_path,
            Token,
            "Delete one",
            handler!(Method::DELETE, objects::delete::<T>),
        )
        .returns(Payload::Json(schema::<ApplyResult>))
        .query(WRITE_QUERY),
    );
}

/// Every route of the device.
pub fn operations() -> Vec<Op> {
    use Access::{ClusterSecret, Public, Token};
    use Payload::{Binary, Json as J, Text, Toml};
    let mut ops = vec![
        op(Method::GET, "/health", Public, "Liveness: 200 while the device runs; the body is ok, or degraded with the conditions", handler!(Method::GET, status::health))
            .returns(Text),
        op(Method::GET, "/metrics", Public, "Prometheus metrics (text format)", handler!(Method::GET, super::metrics::metrics))
            .returns(Text),
        op(Method::GET, "/api/v1/openapi.json", Token, "This document", handler!(Method::GET, openapi_json))
            .returns(J(schema::<Value>)),
        op(Method::GET, "/api/v1/zones/{name}/file", Token, "A served zone as an RFC 1035 master file, as this device answers it now (steered records as their default answer, or as comments)", handler!(Method::GET, zones::export))
            .returns(Text)
            .query(&[("view", "string", "the view whose zone to write (default: the zone every client gets)"), ("steered", "string", "answer (default): steered records as their default answer now; comment: as comments only")]),
        op(Method::GET, "/api/v1/config", Token, "Export the applied configuration (TOML), or a version kept in history", handler!(Method::GET, history::export))
            .returns(Toml)
            .query(&[("version", "integer", "this version's text, from the configuration history (404 when not kept)")]),
        op(Method::GET, "/api/v1/config/history", Token, "The configuration versions kept, newest first: who, when, what, changes", handler!(Method::GET, history::list))
            .returns(J(schema::<Vec<history::HistoryItem>>)),
        op(Method::GET, "/api/v1/config/diff", Token, "Field-level changes from one kept version to another", handler!(Method::GET, history::diff))
            .returns(J(schema::<history::ConfigDiff>))
            .query(&[("from", "integer", "the older version"), ("to", "integer", "the newer version")]),
        op(Method::POST, "/api/v1/config/rollback", Token, "Make a kept version's configuration current again, as a new version", handler!(Method::POST, history::rollback))
            .body(J(schema::<history::RollbackRequest>))
            .returns(J(schema::<ApplyResult>))
            .query(&[("dry_run", "boolean", "return the changes from the applied configuration, and each record's answers on every device; apply nothing"), ("force", "boolean", "roll back even if a device would answer a record with nothing (else 409 conflict)")]),
        op(Method::GET, "/api/v1/commands/{id}", Token, "What became of a command (applied, rejected or unknown), e.g. after an outcome-unknown answer", handler!(Method::GET, history::command))
            .returns(J(schema::<history::CommandStatus>)),
        op(Method::PUT, "/api/v1/config", Token, "Apply a whole configuration (TOML), atomically", handler!(Method::PUT, config::apply_config))
            .body(Toml)
            .returns(J(schema::<ApplyResult>))
            .query(&[("dry_run", "boolean", "return the changes; apply nothing"), ("allow_empty", "boolean", "apply a configuration with no domain over one that has some (else 409 confirmation-needed)"), ("version", "integer", "apply only if the configuration is still at this version (else 409 conflict)"), ("force", "boolean", "apply even if a device would answer a record with nothing (else 409 conflict)")]),
        op(Method::POST, "/api/v1/config/validate", Token, "Validate a configuration (TOML); apply nothing", handler!(Method::POST, config::validate_config))
            .body(Toml)
            .returns(J(schema::<ApplyResult>)),
        op(Method::GET, "/api/v1/status", Token, "Records, checks and scenarios on this device and its peers", handler!(Method::GET, status::status))
            .returns(J(schema::<StatusReport>)),
        op(Method::GET, "/api/v1/events", Token, "The GTM Logs; follow=true streams NDJSON", handler!(Method::GET, events::events))
            .returns(J(schema::<Vec<Event>>))
            .query(&[
                ("record", "string", "only this record, e.g. www.example.test/A"),
                ("kind", "string", "record, check, scenario, operator, config, datacenter, geoip or device"),
                ("since", "string", "only events newer than this, e.g. 10m"),
                ("follow", "boolean", "keep the response open and stream new events as NDJSON"),
                ("all", "boolean", "every device's events, from the peer reports"),
                ("device", "string", "only the events of this device (with all=true, any device of the cluster)"),
                ("limit", "integer", "at most this many, the newest that match"),
                ("before", "integer", "only events older than this (ms since the epoch): pages back from the oldest time_ms of the previous page"),
            ]),
    ];
    ops.push(
        op(
            Method::GET,
            "/api/v1/names",
            Token,
            "The names of every configured object, without their contents",
            handler!(Method::GET, objects::names),
        )
        .returns(Payload::Json(schema::<objects::Names>)),
    );
    collection::<Datacenter>(
        &mut ops,
        "/api/v1/datacenters",
        "/api/v1/datacenters/{name}",
    );
    collection::<Region>(&mut ops, "/api/v1/regions", "/api/v1/regions/{name}");
    collection::<View>(&mut ops, "/api/v1/views", "/api/v1/views/{name}");
    collection::<Check>(&mut ops, "/api/v1/checks", "/api/v1/checks/{name}");
    collection::<Scenario>(&mut ops, "/api/v1/scenarios", "/api/v1/scenarios/{name}");
    collection::<Service>(&mut ops, "/api/v1/services", "/api/v1/services/{name}");
    collection::<Domain>(&mut ops, "/api/v1/domains", "/api/v1/domains/{name}");
    collection::<Notifier>(&mut ops, "/api/v1/notifiers", "/api/v1/notifiers/{name}");
    const RECORD: &str = "/api/v1/domains/{domain}/records/{name}/{rtype}";
    const ADDRESS: &str = "/api/v1/domains/{domain}/records/{name}/{rtype}/addresses/{address}";
    ops.extend([
        op(
            Method::GET,
            "/api/v1/domains/{domain}/records",
            Token,
            "The records of a domain, as configured",
            handler!(Method::GET, objects::list_records),
        )
        .returns(J(schema::<Vec<Record>>)),
        op(
            Method::GET,
            RECORD,
            Token,
            "Show a record (name relative to the domain, @ for the apex)",
            handler!(Method::GET, objects::show_record),
        )
        .returns(J(schema::<Record>)),
        op(
            Method::PUT,
            RECORD,
            Token,
            "Create or replace a record",
            handler!(Method::PUT, objects::put_record),
        )
        .body(J(schema::<Record>))
        .returns(J(schema::<ApplyResult>))
        .query(WRITE_QUERY),
        op(
            Method::PATCH,
            RECORD,
            Token,
            "Change a record's keys given and keep the others (JSON merge patch); creates it when absent",
            handler!(Method::PATCH, objects::patch_record),
        )
        .body(J(schema::<Value>))
        .returns(J(schema::<ApplyResult>))
        .query(WRITE_QUERY),
        op(
            Method::DELETE,
            RECORD,
            Token,
            "Delete a record",
            handler!(Method::DELETE, objects::delete_record),
        )
        .returns(J(schema::<ApplyResult>))
        .query(WRITE_QUERY),
        op(
            Method::GET,
            "/api/v1/domains/{domain}/records/{name}/{rtype}/addresses",
            Token,
            "The addresses of a record",
            handler!(Method::GET, objects::list_addresses),
        )
        .returns(J(schema::<Vec<Address>>)),
        op(
            Method::PUT,
            ADDRESS,
            Token,
            "Add or replace an address (an IP, or a CNAME target)",
            handler!(Method::PUT, objects::put_address),
        )
        .body(J(schema::<Address>))
        .returns(J(schema::<ApplyResult>))
        .query(WRITE_QUERY),
        op(
            Method::PATCH,
            ADDRESS,
            Token,
            "Change an address's keys given (dc, hc, weight, ...) and keep the others; adds it when absent",
            handler!(Method::PATCH, objects::patch_address),
        )
        .body(J(schema::<Value>))
        .returns(J(schema::<ApplyResult>))
        .query(WRITE_QUERY),
        op(
            Method::DELETE,
            ADDRESS,
            Token,
            "Remove an address",
            handler!(Method::DELETE, objects::delete_address),
        )
        .returns(J(schema::<ApplyResult>))
        .query(WRITE_QUERY),
        op(
            Method::GET,
            "/api/v1/records/{name}/{rtype}/preview",
            Token,
            "What a record answers now and why (name is the full owner name)",
            handler!(Method::GET, records::preview),
        )
        .returns(J(schema::<Preview>))
        .query(&[("device", "string", "computed by this device of the cluster")]),
        op(
            Method::GET,
            "/api/v1/records/{name}/{rtype}/explain",
            Token,
            "A record's resolution for one client, step by step (each address's health, the mode and DR condition, the datacenters, the client's place, the balance, the fail-safe), ending in the exact answer DNS gives that client now",
            handler!(Method::GET, records::explain),
        )
        .returns(J(schema::<Explain>))
        .query(&[
            (
                "client",
                "string",
                "the query's source address (default 127.0.0.1, placed nowhere)",
            ),
            (
                "ecs",
                "string",
                "the client subnet the query carries (ECS), ADDRESS/PREFIX",
            ),
            ("device", "string", "computed by this device of the cluster"),
        ]),
        op(
            Method::GET,
            "/api/v1/domains/{name}/dnssec",
            Token,
            "A domain's DNSSEC state on this device: signed or not, its keys as DNSKEY and DS records, when the signatures served expire",
            handler!(Method::GET, dnssec::status),
        )
        .returns(J(schema::<gtm_engine::dnssec::DomainDnssec>)),
        op(
            Method::POST,
            "/api/v1/domains/{name}/promote",
            Token,
            "A domain transferred in from a primary keeps what it serves as its own records and no longer has a primary (docs/transfer.md, \"Transfer in\")",
            handler!(Method::POST, zones::promote),
        )
        .returns(Payload::Json(schema::<ApplyResult>)),
        op(
            Method::POST,
            "/api/v1/domains/{name}/dnssec/rollover",
            Token,
            "One step of a key rollover: publish a new key, swap to it, retire the old one (each refused before its wait is over)",
            handler!(Method::POST, dnssec::rollover),
        )
        .body(J(schema::<dnssec::RolloverRequest>))
        .returns(J(schema::<gtm_engine::dnssec::DomainDnssec>)),
        op(
            Method::GET,
            "/api/v1/records/{name}/{rtype}/stats",
            Token,
            "A record's answer counts on this device: responses that held it, and each address they carried",
            handler!(Method::GET, stats::stats),
        )
        .returns(J(schema::<stats::DeviceRecordStats>)),
        op(
            Method::POST,
            "/api/v1/records/{name}/{rtype}/resume",
            Token,
            "Return to the Main DC after a manual-failback DR",
            handler!(Method::POST, records::resume),
        )
        .role(Role::Operator)
        .returns(J(schema::<Preview>)),
        op(
            Method::PUT,
            "/api/v1/checks/{name}/state",
            Token,
            "Set a manual check: ok or error",
            handler!(Method::PUT, checks::set_check_state),
        )
        .role(Role::Operator)
        .body(J(schema::<CheckStateRequest>))
        .returns(J(schema::<Vec<CheckStatus>>)),
        op(
            Method::POST,
            "/api/v1/checks/{name}/push",
            Token,
            "Report a push check's state (ok or error), for an address or the check's target; answered once committed",
            handler!(Method::POST, inputs::push),
        )
        .role(Role::Reporter)
        .body(J(schema::<inputs::PushRequest>))
        .returns(J(schema::<Vec<CheckStatus>>)),
        op(
            Method::GET,
            "/api/v1/alerts",
            Token,
            "Each notifier's delivery state on this device: delivered, failures, dropped, queued, open alerts, the last error",
            handler!(Method::GET, alerts::list),
        )
        .returns(J(schema::<Vec<gtm_alerts::NotifierStatus>>)),
        op(
            Method::POST,
            "/api/v1/alerts/{name}/test",
            Token,
            "Send a test message through a notifier now, from this device (operator); 404 for an unknown notifier",
            handler!(Method::POST, alerts::test),
        )
        .role(Role::Operator)
        .returns(J(schema::<AlertTest>)),
        op(
            Method::POST,
            "/api/v1/inputs/alertmanager",
            Token,
            "Alertmanager's webhook receiver: alerts firing or resolved set the alertmanager checks whose labels they carry; answered once committed",
            handler!(Method::POST, inputs::alertmanager),
        )
        .role(Role::Reporter)
        .body(J(schema::<inputs::AlertmanagerNotification>))
        .returns(J(schema::<inputs::AlertsTaken>)),
        op(
            Method::POST,
            "/api/v1/checks/{name}/test",
            Token,
            "Test now: one probe, nothing saved",
            handler!(Method::POST, checks::test_check),
        )
        .role(Role::Operator)
        .body(J(schema::<TestRequest>))
        .returns(J(schema::<TestResult>)),
        op(
            Method::POST,
            "/api/v1/probe",
            Token,
            "Test now of a check not saved: validated with the configuration, probed once, nothing saved",
            handler!(Method::POST, checks::test_unsaved),
        )
        .role(Role::Operator)
        .body(J(schema::<ProbeRequest>))
        .returns(J(schema::<TestResult>)),
        op(
            Method::PUT,
            "/api/v1/drain/address",
            Token,
            "Drain an address out of answers, or back",
            handler!(Method::PUT, drains::drain_address),
        )
        .role(Role::Operator)
        .body(J(schema::<DrainAddress>))
        .returns(J(schema::<Vec<RecordView>>)),
        op(
            Method::PUT,
            "/api/v1/drain/datacenter",
            Token,
            "Drain a datacenter out of answers, or back",
            handler!(Method::PUT, drains::drain_datacenter),
        )
        .role(Role::Operator)
        .body(J(schema::<DrainDatacenter>))
        .returns(J(schema::<Vec<RecordView>>)),
        op(
            Method::GET,
            "/api/v1/drains",
            Token,
            "The active drains (replicated), with who made them and when",
            handler!(Method::GET, drains::drains),
        )
        .returns(J(schema::<Vec<gtm_model::operator::Drain>>)),
        op(Method::GET, "/api/v1/schedules", Token, "Scheduled operator actions: pending, fired, failed and cancelled (replicated)", handler!(Method::GET, schedules::list))
            .returns(J(schema::<Vec<gtm_node::machine::schedule::Schedule>>)),
        op(Method::POST, "/api/v1/schedules", Token, "Schedule a drain, undrain, check set or resume at a time (and its reverse at until); a dry run says what it would be and what its action would change now", handler!(Method::POST, schedules::add))
            .role(Role::Operator)
            .body(J(schema::<schedules::ScheduleRequest>))
            .returns(J(schema::<schedules::AddAnswer>))
            .query(&[("dry_run", "boolean", "check it as an add does and answer the schedule it would be with what its action would change if it fired now; add nothing"), ("force", "boolean", "add it even if its action would leave a record with no answer on some device now, and fire it even so")]),
        op(Method::DELETE, "/api/v1/schedules/{id}", Token, "Cancel a schedule before it (or its reverse) fires", handler!(Method::DELETE, schedules::cancel))
            .role(Role::Operator)
            .returns(J(schema::<gtm_node::machine::schedule::Schedule>)),
        op(Method::GET, "/api/v1/whoami", Token, "The user or token this request acts as, and its role (any role)", handler!(Method::GET, accounts::whoami))
            .role(Role::Reporter)
            .returns(J(schema::<WhoAmI>)),
        op(Method::GET, "/api/v1/accounts", Token, "Users and tokens with their roles (never a secret)", handler!(Method::GET, accounts::list))
            .role(Role::Admin)
            .returns(J(schema::<Vec<gtm_node::access::accounts::AccountInfo>>)),
        op(Method::PUT, "/api/v1/users/{name}", Token, "Add a user, or change its role or password", handler!(Method::PUT, accounts::put_user))
            .body(J(schema::<UserRequest>))
            .returns(J(schema::<gtm_node::access::accounts::AccountInfo>)),
        op(Method::DELETE, "/api/v1/users/{name}", Token, "Remove a user (its sessions end)", handler!(Method::DELETE, accounts::delete_user))
            .returns(J(schema::<Vec<gtm_node::access::accounts::AccountInfo>>)),
        op(Method::POST, "/api/v1/tokens", Token, "Create a named API token with a role; the token is shown once", handler!(Method::POST, accounts::create_token))
            .body(J(schema::<TokenRequest>))
            .returns(J(schema::<NewToken>)),
        op(Method::DELETE, "/api/v1/tokens/{name}", Token, "Revoke a named token", handler!(Method::DELETE, accounts::delete_token))
            .returns(J(schema::<Vec<gtm_node::access::accounts::AccountInfo>>)),
        op(Method::GET, "/api/v1/tsig", Token, "The cluster's TSIG keys: names and algorithms, never a secret", handler!(Method::GET, tsig::list))
            .role(Role::Admin)
            .returns(J(schema::<Vec<gtm_dns::tsig::TsigKeyInfo>>)),
        op(Method::POST, "/api/v1/tsig", Token, "Add a TSIG key (HMAC-SHA256); its secret is made by the device and shown once", handler!(Method::POST, tsig::add))
            .body(J(schema::<tsig::TsigKeyRequest>))
            .returns(J(schema::<gtm_dns::tsig::NewTsigKey>)),
        op(Method::DELETE, "/api/v1/tsig/{name}", Token, "Delete a TSIG key no secondaries (a domain's or the catalog's) and no update grant name", handler!(Method::DELETE, tsig::delete))
            .returns(J(schema::<Vec<gtm_dns::tsig::TsigKeyInfo>>)),
        op(
            Method::POST,
            "/api/v1/cluster/init",
            Token,
            "Make this device the first member of a cluster",
            handler!(Method::POST, cluster::cluster_init),
        )
        .returns(J(schema::<ClusterMessage>)),
        op(
            Method::GET,
            "/api/v1/cluster/token",
            Token,
            "The join token of the cluster",
            handler!(Method::GET, cluster::cluster_token),
        )
        .role(Role::Admin)
        .returns(J(schema::<TokenResponse>)),
        op(
            Method::POST,
            "/api/v1/cluster/join",
            Token,
            "Join this device to a cluster through a member",
            handler!(Method::POST, cluster::cluster_join),
        )
        .body(J(schema::<JoinCommand>))
        .returns(J(schema::<Value>)),
        op(
            Method::POST,
            "/api/v1/cluster/leave",
            Token,
            "Leave the cluster",
            handler!(Method::POST, cluster::cluster_leave),
        )
        .returns(J(schema::<Value>)),
        op(
            Method::GET,
            "/api/v1/cluster/status",
            Token,
            "Members, leader, term, applied index, last contact",
            handler!(Method::GET, cluster::cluster_status),
        )
        .returns(J(schema::<Value>)),
        op(
            Method::POST,
            "/api/v1/cluster/recover",
            Token,
            "Continue alone after the permanent loss of the peer",
            handler!(Method::POST, cluster::cluster_recover),
        )
        .returns(J(schema::<ClusterMessage>)),
        op(
            Method::GET,
            "/api/v1/geoip/lookup/{ip}",
            Token,
            "Where an address is, as the DNS path sees it",
            handler!(Method::GET, geoip::lookup),
        )
        .returns(J(schema::<GeoLookup>)),
        op(
            Method::GET,
            "/api/v1/geoip",
            Token,
            "This device's GeoIP database (name, build date, age, source) and the configured source",
            handler!(Method::GET, geoip::show),
        )
        .returns(J(schema::<GeoipStatus>)),
        op(
            Method::POST,
            "/api/v1/geoip/download",
            Token,
            "Download the GeoIP database from the configured source now, on this device",
            handler!(Method::POST, geoip::download),
        )
        .query(&[("kind", "string", "asn: the ASN database, from [geoip] asn_source; else the country or City one")])
        .role(Role::Operator)
        .returns(J(schema::<GeoipStatus>)),
        op(
            Method::PUT,
            "/api/v1/geoip",
            Token,
            "Install a country, City or ASN .mmdb (checked first)",
            handler!(Method::PUT, geoip::import),
        )
        .query(&[("kind", "string", "asn: an ASN database, installed beside the country or City one; else that one")])
        .body(Binary)
        .returns(J(schema::<GeoLookup>)),
        // Device to device; not in the OpenAPI document.
        op(
            Method::POST,
            "/cluster/v1/join",
            ClusterSecret,
            "A device asks the leader to add it",
            handler!(Method::POST, peer::peer_join),
        ),
        op(
            Method::POST,
            "/cluster/v1/leave",
            ClusterSecret,
            "A device asks the leader to remove it",
            handler!(Method::POST, peer::peer_leave),
        ),
        op(
            Method::POST,
            "/cluster/v1/report",
            ClusterSecret,
            "A peer's report: checks, scenarios, records, events",
            handler!(Method::POST, peer::peer_report),
        ),
        op(
            Method::GET,
            "/cluster/v1/preview/{name}/{rtype}",
            ClusterSecret,
            "A record's preview as this device computes it",
            handler!(Method::GET, peer::peer_preview),
        ),
        op(
            Method::POST,
            "/cluster/v1/what-if",
            ClusterSecret,
            "What an operator action would change on this device now",
            handler!(Method::POST, peer::peer_what_if),
        ),
        op(
            Method::GET,
            "/cluster/v1/explain/{name}/{rtype}",
            ClusterSecret,
            "A record's resolution for one client as this device computes it",
            handler!(Method::GET, peer::peer_explain),
        ),
        op(
            Method::POST,
            "/cluster/v1/probe",
            ClusterSecret,
            "Test now for another device: one probe from this device, where the check runs",
            handler!(Method::POST, checks::test_now::peer_probe),
        ),
    ]);
    ops
}

async fn openapi_json() -> axum::Json<Value> {
    axum::Json(openapi())
}

/// The OpenAPI 3.1 document of the token-guarded and public routes.
pub fn openapi() -> Value {
    let mut generator = SchemaSettings::draft2020_12()
        .with(|s| s.definitions_path = "#/components/schemas/".into())
        .into_generator();
    let error = generator.subschema_for::<ApiError>();
    let mut paths: Map<String, Value> = Map::new();
    for op in operations() {
        if op.access == Access::ClusterSecret {
            continue;
        }
        let mut parameters: Vec<Value> = op
            .path
            .split('/')
            .filter_map(|seg| seg.strip_prefix('{')?.strip_suffix('}'))
            .map(|name| {
                json!({"name": name, "in": "path", "required": true, "schema": {"type": "string"}})
            })
            .collect();
        parameters.extend(op.query.iter().map(|(name, kind, meaning)| {
            json!({"name": name, "in": "query", "required": false, "description": meaning, "schema": {"type": kind}})
        }));
        if op.method != Method::GET {
            parameters.push(command_header());
        }
        let mut operation = json!({
            "summary": op.summary,
            "operationId": operation_id(&op.method, op.path),
            "parameters": parameters,
            "responses": {
                "200": {"description": "done", "content": content(op.response, &mut generator)},
                "default": {"description": "an error: HTTP status, stable label, what to fix",
                            "content": {"application/json": {"schema": error}}},
            },
        });
        if op.access == Access::Public {
            operation["security"] = json!([]);
        } else {
            operation["x-gtm-role"] = json!(op.role.as_str());
        }
        if !matches!(op.body, Payload::None) {
            operation["requestBody"] =
                json!({"required": true, "content": content(op.body, &mut generator)});
        }
        // OpenAPI writes path parameters as axum does.
        paths
            .entry(op.path.to_string())
            .or_insert_with(|| json!({}))
            .as_object_mut()
            .expect("a path item is an object")
            .insert(op.method.as_str().to_ascii_lowercase(), operation);
    }
    json!({
        "openapi": "3.1.0",
        "info": {
            "title": "gtm device API",
            "version": env!("CARGO_PKG_VERSION"),
            "description": "Every route but /health and /metrics needs Authorization: Bearer <token> (the api-token file in the device's data directory). Errors are JSON: {\"error\": label, \"message\": what to fix}. See docs/api.md.",
        },
        "components": {
            "securitySchemes": {"token": {"type": "http", "scheme": "bearer"}},
            "schemas": generator.take_definitions(true),
        },
        "security": [{"token": []}],
        "paths": paths,
    })
}

/// The client's command id, taken by every write
/// (`history::client_command_id`): the CLI sends one with each command, so
/// that a retried write is applied once and `GET /api/v1/commands/{id}`
/// finds its fate after an outcome-unknown answer.
fn command_header() -> Value {
    json!({
        "name": gtm_node::command::COMMAND_HEADER,
        "in": "header",
        "required": false,
        "description": "The command id this write makes its command under (32 hex digits, new for each command): sent again with a retry, the write is applied once; GET /api/v1/commands/{id} says what became of it. Another value is refused (400 bad-request) before anything is done.",
        "schema": {"type": "string", "pattern": "^[0-9a-fA-F]{32}$"},
    })
}

fn content(payload: Payload, generator: &mut SchemaGenerator) -> Value {
    match payload {
        Payload::None => json!({}),
        Payload::Json(schema) => json!({"application/json": {"schema": schema(generator)}}),
        Payload::Toml => json!({"application/toml": {"schema": {"type": "string"}}}),
        Payload::Text => json!({"text/plain": {"schema": {"type": "string"}}}),
        Payload::Binary => {
            json!({"application/octet-stream": {"schema": {"type": "string", "contentMediaType": "application/octet-stream"}}})
        }
    }
}

/// `PUT /api/v1/checks/{name}` → `put_checks_name`.
fn operation_id(method: &Method, path: &str) -> String {
    let words: Vec<&str> = path
        .trim_start_matches("/api/v1")
        .split('/')
        .filter(|s| !s.is_empty())
        .map(|s| s.trim_matches(|c| c == '{' || c == '}'))
        .collect();
    format!(
        "{}_{}",
        method.as_str().to_ascii_lowercase(),
        words.join("_")
    )
    .replace(['.', '-'], "_")
}
