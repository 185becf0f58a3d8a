//! The steps of a device's start-up, in the order [`super::Device::start`]
//! takes them: the data directory and the store, the engine, the DNS
//! listeners, the API's socket and TLS, then the workers.

use std::{
    fs,
    net::SocketAddr,
    path::{Path, PathBuf},
    sync::Arc,
};

use anyhow::{Context, Result};
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

use gtm_api as api;
use gtm_api::ApiState;
use gtm_cluster::Store;
use gtm_dns::{dnstap, handler::DnsState};
use gtm_engine::store_writer;
use gtm_engine::{Engine, Prepared, Stored};
use gtm_geo::{Db, Geo, Kind};
use gtm_health::{probe::Prober, scheduler};
use gtm_model as model;
use gtm_model::node::NodeSettings;
use gtm_node::identity::write_private;
use gtm_node::replication::Replication;
use gtm_node::workers::{Observed, Workers};
use gtm_node::{
    peers::{self, Peers},
    tls::{self, Tls},
};

use super::{API_FILE, DEMO_CONFIG, DnsServerSlot, StoreCopy, WORKER_RESTARTS};

/// Makes the data directory, owner only, with room to open the store; on
/// a read-only filesystem, a copy of the store to serve from (outside
/// Raft, until the directory can be written).
pub(super) fn prepare_data_dir(dir: &Path) -> Result<Option<StoreCopy>> {
    check_data_dir(dir)?;
    fs::create_dir_all(dir)
        .with_context(|| format!("cannot create data directory {}", dir.display()))?;
    // The store holds DNSSEC keys and account digests: owner only. A
    // directory that cannot be changed (read-only) is served anyway.
    {
        use std::os::unix::fs::PermissionsExt;
        if let Err(e) = fs::set_permissions(dir, fs::Permissions::from_mode(0o700)) {
            tracing::warn!(data_dir = %dir.display(), error = %e, "cannot make the data directory owner-only");
        }
    }
    // On a full filesystem the reserve is given back first: the store
    // needs room to open, and the device serves from what it holds.
    store_writer::make_room(dir);
    // On a read-only one, from a copy of the store (it cannot be opened
    // where it is), outside Raft, until the directory can be written.
    if !store_writer::read_only(dir) {
        return Ok(None);
    }
    let copy = StoreCopy::make(dir)?;
    tracing::error!(data_dir = %dir.display(), copy = %copy.path().display(), "the data directory is read-only: serving from a copy of the store, outside the cluster's Raft, until it can be written");
    Ok(Some(copy))
}

/// Whether `dir` can be the data directory, changing nothing: a directory
/// whose contents can be listed, or, when missing, one that can be made
/// inside the nearest directory that exists.
pub(super) fn check_data_dir(dir: &Path) -> Result<()> {
    match fs::metadata(dir) {
        Ok(meta) if meta.is_dir() => {
            fs::read_dir(dir)
                .with_context(|| format!("cannot read the directory {}", dir.display()))?;
            Ok(())
        }
        Ok(_) => anyhow::bail!("{} exists and is not a directory", dir.display()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            let Some(parent) = dir
                .ancestors()
                .skip(1)
                .find(|a| a.as_os_str().is_empty() || a.exists())
            else {
                return Ok(());
            };
            let parent = if parent.as_os_str().is_empty() {
                Path::new(".")
            } else {
                parent
            };
            if !parent.is_dir() {
                anyhow::bail!(
                    "{} does not exist and cannot be made: {} is not a directory",
                    dir.display(),
                    parent.display()
                );
            }
            Ok(())
        }
        Err(e) => Err(anyhow::Error::new(e).context(format!("cannot read {}", dir.display()))),
    }
}

/// The API's TLS material: both `tls_cert` and `tls_key` loaded (with
/// `tls_ca`), or neither given.
pub(super) fn load_tls(settings: &NodeSettings) -> Result<Option<Tls>> {
    match (&settings.tls_cert, &settings.tls_key) {
        (Some(cert), Some(key)) => Ok(Some(Tls::load(cert, key, settings.tls_ca.as_deref())?)),
        (None, None) => Ok(None),
        _ => anyhow::bail!("the node settings need both tls_cert and tls_key, or neither"),
    }
}

/// The DNS listen addresses of the node settings. In the demo, an address
/// this machine lacks (no IPv6) is skipped; one that another program holds
/// is an error.
pub(super) fn dns_listen(settings: &NodeSettings, demo: bool) -> Result<Vec<SocketAddr>> {
    if settings.dns_listen.is_empty() {
        anyhow::bail!("no address to listen for DNS on: give at least one in dns_listen");
    }
    let mut listen = Vec::new();
    for addr in &settings.dns_listen {
        if demo && let Err(e) = std::net::UdpSocket::bind(addr) {
            if e.kind() == std::io::ErrorKind::AddrInUse {
                anyhow::bail!(
                    "cannot listen for DNS on {addr}: {e} (is another gtm or DNS server running?)"
                );
            }
            tracing::warn!(%addr, error = %e, "cannot listen here; skipped");
            continue;
        }
        listen.push(*addr);
    }
    if listen.is_empty() {
        anyhow::bail!("no DNS listener could be opened (dns_listen in the node settings)");
    }
    Ok(listen)
}

/// Binds the listeners of zone transfers over TLS (`xot_listen`) and
/// serves each as the worker `dns-xot ADDR`, with the device's TLS (the
/// settings are validated: TLS is on when there are any). Their addresses,
/// port 0 resolved.
pub(super) fn spawn_xot(
    workers: &Workers,
    listen: &[SocketAddr],
    tls: Option<&tls::Live>,
    dns: &gtm_dns::handler::DnsState,
) -> Result<Vec<SocketAddr>> {
    let Some(tls) = tls else {
        return Ok(Vec::new());
    };
    let mut bound = Vec::new();
    for addr in listen {
        let listener = gtm_dns::tcp::bind(*addr).map_err(|e| {
            anyhow::anyhow!("cannot listen for zone transfers over TLS on {addr}: {e}")
        })?;
        let local = listener.local_addr()?;
        let handler = gtm_dns::handler::Handler { state: dns.clone() };
        workers.spawn(
            &tokio::runtime::Handle::current(),
            &format!("dns-xot {local}"),
            gtm_dns::xot::serve(listener, handler, tls.xot.clone(), workers.token()),
        );
        bound.push(local);
    }
    Ok(bound)
}

/// Registers the DNS workers and the store as watched workers.
pub(super) fn watch_dns_and_store(
    workers: &Workers,
    dns: &Arc<DnsServerSlot>,
    names: &[String],
    engine: &Arc<Engine>,
) {
    for (i, name) in names.iter().enumerate() {
        let dns = dns.clone();
        workers.watch(name, move || match dns.worker_alive(i) {
            Some(true) => Observed::running(),
            Some(false) => Observed::failed("it ended: this address is not fully served"),
            None => Observed::stopped(),
        });
    }
    let engine = engine.clone();
    workers.watch(api::STORE_WORKER, move || match engine.storage_fault() {
        Some(fault) => Observed::failed(fault.to_string()),
        None => Observed::running(),
    });
}

/// The dnstap of the node settings, `None` when `[dnstap]` is absent
/// (the settings are validated: an output is named).
pub(super) fn dnstap_settings(settings: &NodeSettings) -> Option<dnstap::Settings> {
    use gtm_model::node::{DnstapMessage, DnstapOutput};
    let d = settings.dnstap.as_ref()?;
    let output = match d.output().ok()? {
        DnstapOutput::Unix(p) => dnstap::Output::Unix(p),
        DnstapOutput::Tcp(a) => dnstap::Output::Tcp(a),
        DnstapOutput::File(p) => dnstap::Output::File(p),
    };
    Some(dnstap::Settings {
        output,
        queries: d.messages.contains(&DnstapMessage::AuthQuery),
        responses: d.messages.contains(&DnstapMessage::AuthResponse),
        sample: d.sample(),
        buffer: d.buffer(),
        identity: d
            .identity
            .clone()
            .unwrap_or_else(|| settings.name.clone())
            .into(),
        version: format!("gtm {}", env!("CARGO_PKG_VERSION")).into(),
    })
}

/// Registers dnstap as a watched worker: idle while off, running while
/// on, with why its output is not open as its last error.
pub(super) fn watch_dnstap(workers: &Workers, dnstap: &Arc<dnstap::Dnstap>) {
    let dnstap = dnstap.clone();
    workers.watch("dnstap", move || {
        let Some(output) = dnstap.output() else {
            return Observed::idle();
        };
        let stats = dnstap.stats();
        let mut seen = Observed::running();
        if !stats.connected.load(std::sync::atomic::Ordering::Relaxed) {
            seen.error = Some(match stats.error() {
                Some(why) => format!("{output} not open: {why}"),
                None => format!("{output} not open yet"),
            });
        }
        seen
    });
}

/// The API's bound socket, its TLS material and the scheme it answers.
pub(super) struct ApiSocket {
    pub(super) listener: TcpListener,
    pub(super) addr: SocketAddr,
    pub(super) tls: Option<Tls>,
    pub(super) scheme: &'static str,
}

/// Binds the API listener and loads its TLS material; when the data
/// directory is `writable`, writes the address (and the CA the CLI trusts)
/// there for the CLI.
pub(super) async fn open_api(settings: &NodeSettings, writable: bool) -> Result<ApiSocket> {
    let dir = &settings.data_dir;
    let tls = load_tls(settings)?;
    let listener = TcpListener::bind(settings.api_listen)
        .await
        .with_context(|| format!("cannot listen for the API on {}", settings.api_listen))?;
    let addr = listener.local_addr()?;
    let scheme = if tls.is_some() { "https" } else { "http" };
    if writable {
        write_private(&dir.join(API_FILE), &format!("{scheme}://{addr}\n"))?;
        match &tls {
            Some(t) => fs::write(dir.join(tls::CA_FILE), &t.trust_pem)?,
            None => {
                let _ = fs::remove_file(dir.join(tls::CA_FILE));
            }
        }
    }
    Ok(ApiSocket {
        listener,
        addr,
        tls,
        scheme,
    })
}

/// The health scheduler, on the probe runtime.
pub(super) fn spawn_health(
    workers: &Workers,
    probes: &tokio::runtime::Runtime,
    engine: &Arc<Engine>,
    prober: &Arc<Prober>,
    settings: &NodeSettings,
) {
    let (instances, engine, prober) = (engine.instances(), engine.clone(), prober.clone());
    let (dc, stop) = (settings.datacenter.clone(), workers.token());
    let max = settings.max_concurrent_probes.unwrap_or(1000);
    workers.spawn_restarting(
        probes.handle(),
        "health-scheduler",
        WORKER_RESTARTS,
        move || {
            Some(scheduler::run(
                instances.clone(),
                engine.clone(),
                prober.clone(),
                dc.clone(),
                max,
                stop.clone(),
            ))
        },
    );
}

/// Raft watched, and the workers of replicated state: what Raft commits
/// handed to the engine; schedules fired, DNSSEC keys made and the cookie
/// secret rotated while this device leads (or is alone).
pub(super) fn spawn_replicated(
    workers: &Workers,
    judge: &Arc<gtm_node::judge::Judge>,
    transfer_in: &Arc<gtm_node::workers::transfer_in::TransferIn>,
) {
    let (replication, engine) = (&judge.replication, &judge.engine);
    {
        let r = replication.clone();
        workers.watch(api::RAFT_WORKER, move || match r.fault() {
            Some(why) => Observed::failed(why),
            None if r.clustered() => Observed::running(),
            None => Observed::idle(),
        });
    }
    workers.spawn(
        &tokio::runtime::Handle::current(),
        "raft-install",
        replication.clone().install_committed(workers.token()),
    );
    let device = engine.device().to_string();
    restarting(workers, "schedule", {
        let (j, device, stop) = (judge.clone(), device.clone(), workers.token());
        move || gtm_node::workers::schedule::run(j.clone(), device.clone(), stop.clone())
    });
    // Also signs again when a new signing window begins.
    restarting(workers, "dnssec", {
        let (r, e, stop) = (replication.clone(), engine.clone(), workers.token());
        move || gtm_node::workers::dnssec::run(r.clone(), e.clone(), device.clone(), stop.clone())
    });
    // A domain's primary that cannot be transferred from degrades the
    // device until it can.
    // It also takes the NOTIFYs the device's DNS receives.
    let transfer_in = transfer_in.clone();
    {
        let t = transfer_in.clone();
        workers.watch("zones-in", move || t.observed());
    }
    engine.dns().notices.serve(transfer_in.clone());
    restarting(workers, "transfer-in", {
        let (r, e, stop) = (replication.clone(), engine.clone(), workers.token());
        let device = engine.device().to_string();
        move || {
            gtm_node::workers::transfer_in::run(
                r.clone(),
                e.clone(),
                device.clone(),
                transfer_in.clone(),
                stop.clone(),
            )
        }
    });
    restarting(workers, "cookie-secret", {
        let (r, e, stop) = (replication.clone(), engine.clone(), workers.token());
        move || gtm_node::workers::cookie_secret::run(r.clone(), e.clone(), stop.clone())
    });
}

/// Exchanges reports with the other devices over `http`.
pub(super) fn spawn_peers(
    workers: &Workers,
    http: reqwest::Client,
    peers: &Arc<Peers>,
    replication: &Arc<Replication>,
    engine: &Arc<Engine>,
    datacenter: &str,
) {
    let (p, r, e, stop) = (
        peers.clone(),
        replication.clone(),
        engine.clone(),
        workers.token(),
    );
    let dc = datacenter.to_string();
    restarting(workers, "peers", move || {
        peers::run(
            http.clone(),
            p.clone(),
            r.clone(),
            e.clone(),
            dc.clone(),
            stop.clone(),
        )
    });
}

/// Serves the API and the console on `listener` (with TLS when
/// `server_tls`), gzipped for clients that ask. The console's pages answer
/// HTML, errors included: merged outside the API's JSON error layer.
pub(super) fn spawn_api(
    workers: &Workers,
    listener: TcpListener,
    state: ApiState,
    server_tls: Option<tls::ServerConfigs>,
) {
    let router = api::router(state.clone())
        .merge(gtm_api::console::router(state))
        .layer(api::compression::layer());
    let stop = workers.token();
    workers.spawn(&tokio::runtime::Handle::current(), "api", async move {
        match server_tls {
            Some(config) => tls::serve(listener, router, config, stop).await,
            None => {
                let serve = axum::serve(
                    listener,
                    router.into_make_service_with_connect_info::<SocketAddr>(),
                )
                .with_graceful_shutdown(stop.cancelled_owned());
                if let Err(e) = serve.await {
                    tracing::error!(error = %e, "API server failed");
                }
            }
        }
    });
}

/// Logs the device's start, saying so when the run before ended without
/// a stop (a crash, kill -9, power loss): its last device event is a start.
pub(super) fn log_start(engine: &Engine) {
    let me = engine.device().to_string();
    let started = format!("device {me} started");
    let last = engine
        .events_page(None, 0, 1, |e| {
            e.kind == gtm_engine::EventKind::Device && e.device == me
        })
        .ok()
        .and_then(|mut page| page.pop());
    let unclean = last.is_some_and(|e| e.text.starts_with(&started));
    let text = format!(
        "{started}{} (gtm {}, configuration version {})",
        if unclean {
            " after an unclean stop: the run before ended without stopping"
        } else {
            ""
        },
        env!("CARGO_PKG_VERSION"),
        engine.version()
    );
    let severity = if unclean {
        gtm_engine::Severity::Warning
    } else {
        gtm_engine::Severity::Info
    };
    engine.record_event(gtm_engine::EventKind::Device, severity, me, text);
}

/// The engine, serving the stored configuration. One that does not parse,
/// validate or build (stored by another binary version, or committed by
/// the cluster and never installed here) does not stop the device: it
/// serves the last configuration that installed (or none) and reports
/// itself degraded, naming the version and the reason.
pub(super) fn start_engine(
    name: &str,
    store: &Store,
    dir: &Path,
    dns: &DnsState,
    demo: bool,
    on_copy: bool,
) -> Result<Engine> {
    let kept = match store.load_config()? {
        Some(stored) => stored,
        None => gtm_cluster::StoredConfig {
            version: 0,
            text: if demo {
                DEMO_CONFIG.into()
            } else {
                String::new()
            },
            zone_versions: Vec::new(),
        },
    };
    let prepare = |kept: &gtm_cluster::StoredConfig| -> Result<Prepared, String> {
        let config = model::parse(&kept.text).map_err(|e| format!("it does not parse: {e}"))?;
        let zone_versions = kept.zone_versions.iter().cloned().collect();
        Prepared::new(kept.version, &zone_versions, config, dns)
            .map_err(|e| format!("it does not validate here: {e}"))
    };
    let stored = Stored::load(store.clone(), dir, on_copy)?;
    let version = kept.version;
    let reason = match prepare(&kept) {
        Ok(prepared) => {
            if store.last_good_config()?.is_some() {
                // Installed at last (a newer binary): it is the good one now.
                store.save_config(&kept.kept())?;
            }
            return Ok(Engine::new(name, prepared, dns.clone(), Some(stored)));
        }
        Err(reason) => reason,
    };
    drop(kept);
    tracing::error!(version, %reason, "the stored configuration cannot be installed; serving the last good one");
    let empty = || Prepared::new(0, &Default::default(), model::Config::default(), dns);
    let prepared = match store.last_good_config()?.flatten() {
        Some(good) => match prepare(&good) {
            Ok(prepared) => prepared,
            Err(why) => {
                tracing::error!(version = good.version, reason = %why, "the last good configuration cannot be installed either");
                empty()?
            }
        },
        None => empty()?,
    };
    let engine = Engine::new(name, prepared, dns.clone(), Some(stored));
    engine.install_failed(version, &reason);
    Ok(engine)
}

/// The runtime probes run on: its own threads in the `SCHED_IDLE` class
/// (falling back to nice 19), so that thousands of probes a second only use
/// CPU time the DNS workers leave, instead of delaying answers; with
/// `dns_cpus`, on the CPUs `cpus` left to everything else.
pub(super) fn probe_runtime(cpus: Option<Vec<usize>>) -> Result<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .thread_name("probe")
        .enable_all()
        .on_thread_start(move || {
            if let Some(cpus) = &cpus
                && let Err(e) = gtm_dns::cpus::pin_current_thread(cpus)
            {
                tracing::warn!(error = %e, "cannot keep a probe thread off the DNS CPUs");
            }
            // SAFETY: both calls act on the calling thread only (pid/who 0 is
            // the calling task on Linux); lowering priority needs no privilege.
            unsafe {
                let param = libc::sched_param { sched_priority: 0 };
                if libc::sched_setscheduler(0, libc::SCHED_IDLE, &param) != 0 {
                    libc::setpriority(libc::PRIO_PROCESS, 0, 19);
                }
            }
        })
        .build()
        .context("starting the probe runtime")
}

/// The databases a device starts with. The country or City one: the one
/// it installed itself (downloaded or imported into its data directory:
/// the operator's latest choice), else the node's `geoip_file`, else in
/// the demo the embedded demo database, else none. The ASN one: the one
/// it installed, else none.
pub(super) fn open_geo(settings: &NodeSettings, demo: bool) -> Result<Geo> {
    let place = match gtm_geo::install::open_installed(Kind::Place, &settings.data_dir)? {
        Some(db) => Some(db),
        None => match &settings.geoip_file {
            Some(p) => Some(Db::open(Kind::Place, p)?),
            None if demo => Some(Db::from_bytes(
                Kind::Place,
                gtm_geo::DEMO_DATABASE.to_vec(),
                "the embedded demo database",
                "embedded demo database",
            )?),
            None => None,
        },
    };
    let asn = gtm_geo::install::open_installed(Kind::Asn, &settings.data_dir)?;
    let mut geo = Geo::none();
    for db in place.into_iter().chain(asn) {
        geo = geo.with(db);
    }
    Ok(geo)
}

/// Runs the worker `name` on the current runtime, restarted when it fails.
pub(super) fn restarting<F: std::future::Future<Output = ()> + Send + 'static>(
    workers: &Workers,
    name: &str,
    mut make: impl FnMut() -> F + Send + 'static,
) {
    let here = tokio::runtime::Handle::current();
    workers.spawn_restarting(&here, name, WORKER_RESTARTS, move || Some(make()));
}

/// The task that keeps the device's database of `kind` fresh (`[geoip]
/// update`).
pub(super) fn geoip_refresh(
    kind: Kind,
    engine: Arc<Engine>,
    data_dir: PathBuf,
    stop: CancellationToken,
) -> impl std::future::Future<Output = ()> + Send + 'static {
    let (settings, current, swap, log) = (engine.clone(), engine.clone(), engine.clone(), engine);
    gtm_geo::refresh::run(
        kind,
        data_dir,
        move || {
            settings.with_config(|c| {
                let source = match kind {
                    Kind::Place => Some(c.geoip_source().to_string()),
                    Kind::Asn => c.asn_source().map(str::to_string),
                };
                (source, c.geoip_monthly())
            })
        },
        move || current.geoip().database(kind).map(|d| d.info().clone()),
        move |db| swap.install_geoip(db),
        move |severity, text| {
            log.record_event(gtm_engine::EventKind::Geoip, severity, "geoip".into(), text)
        },
        stop,
    )
}

/// The device's alert workers (docs/operations.md, "Alerts"): the
/// engine's events handed to them as they are logged, the configuration's
/// notifiers at each version, a tick four times a second. A notifier's
/// delivery runs on its own task and never holds these up.
pub(super) fn spawn_alerts(
    workers: &Workers,
    engine: &Arc<Engine>,
    replication: &Arc<Replication>,
    datacenter: &str,
) -> Arc<gtm_alerts::Alerts> {
    let leads = {
        let r = replication.clone();
        move || !r.clustered() || r.status().state == gtm_cluster::NodeState::Leader
    };
    let alerts = gtm_alerts::Alerts::new(engine.device(), datacenter, leads, workers.token());
    alerts.configure(&engine.config().notifiers);
    let (engine, worker, stop) = (engine.clone(), alerts.clone(), workers.token());
    let datacenter = datacenter.to_string();
    workers.spawn(&tokio::runtime::Handle::current(), "alerts", async move {
        let mut events = engine.subscribe_events();
        let mut versions = engine.applied_version();
        let mut tick = tokio::time::interval(std::time::Duration::from_millis(250));
        loop {
            tokio::select! {
                event = events.recv() => match event {
                    Ok(e) => worker.notice(&gtm_alerts::Notice {
                        seq: e.seq,
                        time_ms: e.time_ms,
                        device: e.device,
                        datacenter: datacenter.clone(),
                        kind: e.kind.as_str().to_string(),
                        severity: e.severity,
                        object: e.object,
                        text: e.text,
                    }),
                    Err(tokio::sync::broadcast::error::RecvError::Lagged(n)) => {
                        tracing::warn!(missed = n, "alerts fell behind the event log; {n} events were not judged");
                    }
                    Err(tokio::sync::broadcast::error::RecvError::Closed) => return,
                },
                changed = versions.changed() => {
                    if changed.is_err() {
                        return;
                    }
                    worker.configure(&engine.config().notifiers);
                }
                _ = tick.tick() => worker.tick(),
                () = stop.cancelled() => return,
            }
        }
    });
    alerts
}
