//! A running device: start-up, in the order it happens, and shutdown.

use std::{
    fs,
    net::SocketAddr,
    path::{Path, PathBuf},
    sync::Arc,
    time::Duration,
};

mod store_copy;

use anyhow::{Context, Result};
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

use gtm_api as api;
use gtm_api::ApiState;
use gtm_cluster::{NodeInfo, Store};
use gtm_dns::{handler::DnsState, server::DnsServer};
use gtm_engine::store_writer;
use gtm_engine::{Engine, Prepared, Stored};
use gtm_geo::Geo;
use gtm_health::{probe::Prober, scheduler};
use gtm_model as model;
use gtm_model::node::NodeSettings;
use gtm_node::identity::{self, write_private};
use gtm_node::replication::Replication;
use gtm_node::workers::{Observed, Workers};
use gtm_node::{
    peers::{self, Peers},
    tls::{self, Tls},
};
use store_copy::StoreCopy;

/// The embedded demo configuration, served on first start without a node file.
pub const DEMO_CONFIG: &str = include_str!("../config/demo.toml");

/// Where the CLI finds a local device.
pub const API_FILE: &str = "api-address";
pub use gtm_node::identity::TOKEN_FILE;

/// A started device.
#[derive(Debug)]
pub struct Device {
    pub engine: Arc<Engine>,
    pub replication: Arc<Replication>,
    pub dns_addrs: Vec<SocketAddr>,
    pub api_addr: SocketAddr,
    pub token: String,
    dns: Arc<DnsServerSlot>,
    /// Every long-running task, by name, with the one token that stops them.
    pub workers: Arc<Workers>,
    probes: ProbeRuntime,
    /// The copy of the store it serves from, when its data directory was
    /// read-only at start-up.
    store_copy: Option<StoreCopy>,
    /// The API's TLS server side and the peer clients' identity and trust,
    /// swapped by a reload.
    tls: Option<tls::Live>,
    prober: Arc<Prober>,
    data_dir: PathBuf,
}

/// The DNS listeners, watched by the registry while they run and taken out
/// to be stopped.
#[derive(Debug, Default)]
struct DnsServerSlot(std::sync::Mutex<Option<DnsServer>>);

impl DnsServerSlot {
    fn alive(&self) -> bool {
        self.0
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .as_ref()
            .is_some_and(DnsServer::alive)
    }

    /// Whether the `i`th DNS worker runs; None once the server is stopped.
    fn worker_alive(&self, i: usize) -> Option<bool> {
        self.0
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .as_ref()
            .map(|dns| dns.worker_alive(i))
    }

    fn take(&self) -> Option<DnsServer> {
        self.0.lock().unwrap_or_else(|p| p.into_inner()).take()
    }
}

/// How many times a restartable worker is started again after it failed.
const WORKER_RESTARTS: u64 = 5;

/// How long a stop waits for the workers.
const STOP_DEADLINE: Duration = Duration::from_secs(10);

/// The probe runtime, shut down without blocking when the device goes, even
/// from inside another runtime.
#[derive(Debug)]
struct ProbeRuntime(Option<tokio::runtime::Runtime>);

impl Drop for ProbeRuntime {
    fn drop(&mut self) {
        if let Some(runtime) = self.0.take() {
            runtime.shutdown_background();
        }
    }
}

impl Device {
    /// Starts a device. `demo`: seed an empty store with the demo
    /// configuration, and skip listeners that cannot bind (IPv6 may be off).
    pub async fn start(settings: NodeSettings, demo: bool) -> Result<Self> {
        let dir = &settings.data_dir;
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
        let store_copy = if store_writer::read_only(dir) {
            let copy = StoreCopy::make(dir)?;
            tracing::error!(data_dir = %dir.display(), copy = %copy.path().display(), "the data directory is read-only: serving from a copy of the store, outside the cluster's Raft, until it can be written");
            Some(copy)
        } else {
            None
        };
        let store = Store::open(store_copy.as_ref().map_or(dir.as_path(), StoreCopy::path))?
            .with_event_retention(
                settings
                    .event_retention
                    .unwrap_or(gtm_cluster::DEFAULT_EVENT_RETENTION),
            );

        let geo = open_geo(&settings, demo)?;
        let payload = settings.edns_payload.unwrap_or(1232);
        settings.validate().map_err(anyhow::Error::msg)?;
        let dns_state = DnsState::new(Default::default(), geo, payload).with_nsid(settings.nsid());
        let engine = Arc::new(start_engine(
            &settings.name,
            &store,
            dir,
            &dns_state,
            demo,
            store_copy.is_some(),
        )?);

        let cpus = gtm_dns::cpus::Split::new(&settings.dns_cpus)?;
        let workers = settings.udp_workers.unwrap_or_else(|| match &cpus {
            Some(split) => split.dns.len(),
            None => std::thread::available_parallelism().map_or(1, |n| n.get()),
        });
        let mut listen = Vec::new();
        for addr in &settings.dns_listen {
            // In the demo, an address this machine lacks (no IPv6) is
            // skipped; one that another program holds is an error.
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
        let dns = DnsServer::start(&listen, workers, cpus.as_ref(), dns_state).await?;
        let dns_addrs = dns.addrs.clone();
        let dns_names = dns.workers().to_vec();
        let dns = Arc::new(DnsServerSlot(std::sync::Mutex::new(Some(dns))));
        let workers = Arc::new(Workers::new());
        let here = tokio::runtime::Handle::current();
        for (i, name) in dns_names.iter().enumerate() {
            let dns = dns.clone();
            workers.watch(name, move || match dns.worker_alive(i) {
                Some(true) => Observed::running(),
                Some(false) => Observed::failed("it ended: this address is not fully served"),
                None => Observed::stopped(),
            });
        }
        {
            let engine = engine.clone();
            workers.watch(api::STORE_WORKER, move || match engine.storage_fault() {
                Some(fault) => Observed::failed(fault.to_string()),
                None => Observed::running(),
            });
        }

        let token = identity::api_token(dir)?;
        let listener = TcpListener::bind(settings.api_listen)
            .await
            .with_context(|| format!("cannot listen for the API on {}", settings.api_listen))?;
        let api_addr = listener.local_addr()?;
        let tls = match (&settings.tls_cert, &settings.tls_key) {
            (Some(cert), Some(key)) => Some(Tls::load(cert, key, settings.tls_ca.as_deref())?),
            (None, None) => None,
            _ => anyhow::bail!("the node settings need both tls_cert and tls_key, or neither"),
        };
        let scheme = if tls.is_some() { "https" } else { "http" };
        if store_copy.is_none() {
            write_private(&dir.join(API_FILE), &format!("{scheme}://{api_addr}\n"))?;
            match &tls {
                Some(t) => fs::write(dir.join(tls::CA_FILE), &t.trust_pem)?,
                None => {
                    let _ = fs::remove_file(dir.join(tls::CA_FILE));
                }
            }
        }
        let tls = tls.map(tls::Live::new);
        // Clients of the other devices: with TLS they show this device's
        // certificate (mutual TLS); all share the one a reload replaces.
        let peer_client = |timeout| match &tls {
            Some(t) => tls::peer_client(&t.peer, timeout),
            None => tls::http_client(None, timeout),
        };
        let prober = Arc::new(Prober::fenced(
            settings.allow_exec,
            gtm_health::probe::Fence {
                allow_link_local: settings.allow_link_local_probes,
                only: settings.probe_networks.clone(),
            },
        ));
        let probes = probe_runtime(cpus.map(|split| split.rest))?;
        {
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
        let info = NodeInfo {
            name: settings.name.clone(),
            datacenter: settings.datacenter.clone(),
            api_addr: settings
                .advertise_api
                .clone()
                .unwrap_or_else(|| format!("{scheme}://{api_addr}")),
        };
        let replication = Replication::start(
            &store,
            dir,
            info,
            engine.clone(),
            peer_client(Duration::from_secs(35))?,
            peer_client(Duration::from_secs(30))?,
            store_copy.is_some(),
        )
        .await?;
        replication.set_history_keep(settings.history_keep());
        {
            let r = replication.clone();
            workers.watch(api::RAFT_WORKER, move || match r.fault() {
                Some(why) => Observed::failed(why),
                None if r.clustered() => Observed::running(),
                None => Observed::idle(),
            });
        }
        // Hands what Raft commits to the engine.
        workers.spawn(
            &here,
            "raft-install",
            replication.clone().install_committed(workers.token()),
        );
        let device = engine.device().to_string();
        // Fires due schedules while this device leads (or is alone).
        restarting(&workers, "schedule", {
            let (r, device, stop) = (replication.clone(), device.clone(), workers.token());
            move || gtm_node::workers::schedule::run(r.clone(), device.clone(), stop.clone())
        });
        // Makes missing DNSSEC keys (while leading) and signs again when a
        // new signing window begins.
        restarting(&workers, "dnssec", {
            let (r, e, stop, mtls) = (
                replication.clone(),
                engine.clone(),
                workers.token(),
                tls.is_some(),
            );
            move || {
                gtm_node::workers::dnssec::run(
                    r.clone(),
                    e.clone(),
                    device.clone(),
                    mtls,
                    stop.clone(),
                )
            }
        });
        // Makes and rotates the DNS cookie secret while this device leads
        // (or is alone).
        restarting(&workers, "cookie-secret", {
            let (r, e, stop) = (replication.clone(), engine.clone(), workers.token());
            move || gtm_node::workers::cookie_secret::run(r.clone(), e.clone(), stop.clone())
        });
        // NOTIFYs to the secondaries of transferred zones (docs/transfer.md).
        restarting(&workers, "notify", {
            let (dns, stop) = (engine.dns().clone(), workers.token());
            let sources: Vec<_> = listen.iter().map(|a| a.ip()).collect();
            move || gtm_dns::notify::run(dns.clone(), sources.clone(), stop.clone())
        });
        let peers = Arc::new(Peers::default());
        // Exchanges reports with the other devices.
        restarting(&workers, "peers", {
            let http = peer_client(Duration::from_millis(1500))?;
            let (p, r, e, stop) = (
                peers.clone(),
                replication.clone(),
                engine.clone(),
                workers.token(),
            );
            let dc = settings.datacenter.clone();
            move || {
                peers::run(
                    http.clone(),
                    p.clone(),
                    r.clone(),
                    e.clone(),
                    dc.clone(),
                    stop.clone(),
                )
            }
        });
        if store_copy.is_none() {
            workers.spawn(
                &here,
                "geoip-refresh",
                geoip_refresh(engine.clone(), dir.clone(), workers.token()),
            );
        }
        let api_state = ApiState {
            engine: engine.clone(),
            replication: replication.clone(),
            peers,
            datacenter: settings.datacenter.clone(),
            prober: prober.clone(),
            store,
            data_dir: dir.clone(),
            token: token.clone().into(),
            sessions: Arc::new(gtm_node::access::sessions::Sessions::new()),
            mutual_tls: tls.is_some(),
            peer_http: peer_client(Duration::from_secs(3))?,
            workers: workers.clone(),
            validations: Arc::default(),
        };
        // The console's pages answer HTML, errors included: merged outside
        // the API's JSON error layer.
        let router = api::router(api_state.clone()).merge(gtm_api::console::router(api_state));
        let stop = workers.token();
        let server_tls = tls.as_ref().map(|t| t.server.clone());
        workers.spawn(&here, "api", async move {
            match server_tls {
                Some(config) => tls::serve(listener, router, config, stop).await,
                None => {
                    let serve = axum::serve(
                        listener,
                        router.into_make_service_with_connect_info::<std::net::SocketAddr>(),
                    )
                    .with_graceful_shutdown(stop.cancelled_owned());
                    if let Err(e) = serve.await {
                        tracing::error!(error = %e, "API server failed");
                    }
                }
            }
        });
        tracing::info!(device = %settings.name, dns = ?dns_addrs, api = %api_addr, data_dir = %dir.display(), "device started");
        let logged = engine.clone();
        let _ = tokio::task::spawn_blocking(move || log_start(&logged)).await;
        Ok(Self {
            engine,
            replication,
            dns_addrs,
            api_addr,
            token,
            dns,
            workers,
            probes: ProbeRuntime(Some(probes)),
            store_copy,
            tls,
            prober,
            data_dir: dir.clone(),
        })
    }

    /// Applies what a reload (SIGHUP) of the node settings can change
    /// without a restart: the TLS certificate, key and trusted CA, for the
    /// API's connections accepted and the connections to the other devices
    /// made from now on, and the probe fences. Nothing is changed when the
    /// certificate files do not load.
    pub fn reload(&self, settings: &NodeSettings) -> Result<()> {
        let tls = match (&settings.tls_cert, &settings.tls_key, &self.tls) {
            (Some(cert), Some(key), Some(_)) => {
                Some(Tls::load(cert, key, settings.tls_ca.as_deref())?)
            }
            (None, None, None) => None,
            _ => anyhow::bail!(
                "turning TLS on or off (tls_cert, tls_key) needs a restart of the device"
            ),
        };
        if let (Some(t), Some(live)) = (tls, &self.tls) {
            let trust_pem = t.trust_pem.clone();
            live.replace(t);
            // The reload is applied by now: a CA file the CLI cannot be
            // given is worth a warning, not a failed reload.
            if self.store_copy.is_none()
                && let Err(e) = fs::write(self.data_dir.join(tls::CA_FILE), &trust_pem)
            {
                tracing::warn!(file = %self.data_dir.join(tls::CA_FILE).display(), error = %e, "cannot write the trusted certificates for the CLI");
            }
        }
        self.prober.set_fence(gtm_health::probe::Fence {
            allow_link_local: settings.allow_link_local_probes,
            only: settings.probe_networks.clone(),
        });
        Ok(())
    }

    /// Whether the device still serves: every DNS worker and the API
    /// listener are running. The service watchdog is fed only while it is.
    /// (Another failed worker leaves the device degraded, not dead: it is
    /// reported, and restarted when it can be.)
    pub fn alive(&self) -> bool {
        self.dns.alive() && self.workers.up("api")
    }

    /// Resolves once a device that started on a copy of its store (its data
    /// directory was read-only) can write its own store again: it should
    /// then be stopped and started again. Never resolves otherwise.
    pub async fn reopened(&self) {
        match self.engine.storage_reopened() {
            Some(mut reopened) if self.store_copy.is_some() => {
                if reopened.wait_for(|r| *r).await.is_err() {
                    std::future::pending::<()>().await;
                }
            }
            _ => std::future::pending().await,
        }
    }

    pub async fn stop(self) {
        let name = self.engine.device().to_string();
        self.engine.record_event(
            gtm_engine::EventKind::Device,
            name.clone(),
            format!("device {name} stopping"),
        );
        let late = self.workers.stop(STOP_DEADLINE).await;
        if !late.is_empty() {
            tracing::error!(workers = ?late, deadline = ?STOP_DEADLINE, "workers did not stop in time; ended");
        }
        drop(self.probes);
        let engine = self.engine.clone();
        // Written and released: the store can be opened again at once.
        let _ = tokio::task::spawn_blocking(move || engine.close_storage()).await;
        self.replication.shutdown().await;
        if let Some(dns) = self.dns.take() {
            dns.stop().await;
        }
        drop(self.store_copy);
    }
}

/// Logs the device's start, saying so when the run before ended without
/// a stop (a crash, kill -9, power loss): its last device event is a start.
fn log_start(engine: &Engine) {
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
    engine.record_event(gtm_engine::EventKind::Device, me, text);
}

/// The engine, serving the stored configuration. One that does not parse,
/// validate or build (stored by another binary version, or committed by
/// the cluster and never installed here) does not stop the device: it
/// serves the last configuration that installed (or none) and reports
/// itself degraded, naming the version and the reason.
fn start_engine(
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
fn probe_runtime(cpus: Option<Vec<usize>>) -> Result<tokio::runtime::Runtime> {
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

/// The database a device starts with: the one it installed itself
/// (downloaded or imported into its data directory: the operator's latest
/// choice), else the node's `geoip_file`, else in the demo the embedded
/// demo database, else none.
fn open_geo(settings: &NodeSettings, demo: bool) -> Result<Geo> {
    if let Some(geo) = gtm_geo::install::open_installed(&settings.data_dir)? {
        return Ok(geo);
    }
    match &settings.geoip_file {
        Some(p) => Ok(Geo::open(p)?),
        None if demo => Ok(Geo::from_bytes(
            gtm_geo::DEMO_DATABASE.to_vec(),
            "the embedded demo database",
            "embedded demo database",
        )?),
        None => Ok(Geo::none()),
    }
}

/// Runs the worker `name` on the current runtime, restarted when it fails.
fn restarting<F: std::future::Future<Output = ()> + Send + 'static>(
    workers: &Workers,
    name: &str,
    mut make: impl FnMut() -> F + Send + 'static,
) {
    let here = tokio::runtime::Handle::current();
    workers.spawn_restarting(&here, name, WORKER_RESTARTS, move || Some(make()));
}

/// The task that keeps the device's database fresh (`[geoip] update`).
fn geoip_refresh(
    engine: Arc<Engine>,
    data_dir: PathBuf,
    stop: CancellationToken,
) -> impl std::future::Future<Output = ()> + Send + 'static {
    let (settings, current, swap, log) = (engine.clone(), engine.clone(), engine.clone(), engine);
    gtm_geo::refresh::run(
        data_dir,
        move || settings.with_config(|c| (c.geoip_source().to_string(), c.geoip_monthly())),
        move || current.geoip().info().cloned(),
        move |geo| swap.install_geoip(geo),
        move |text| log.record_event(gtm_engine::EventKind::Geoip, "geoip".into(), text),
        stop,
    )
}
