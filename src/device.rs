//! A running device: start-up, in the order it happens, and shutdown.

use std::{fs, net::SocketAddr, path::PathBuf, sync::Arc, time::Duration};

mod start;
mod store_copy;

use anyhow::Result;

use gtm_api::ApiState;
use gtm_cluster::{NodeInfo, Store};
use gtm_dns::{dnstap::Dnstap, handler::DnsState, server::DnsServer};
use gtm_engine::Engine;
use gtm_health::probe::Prober;
use gtm_model::node::NodeSettings;
use gtm_node::identity;
use gtm_node::peers::Peers;
use gtm_node::replication::Replication;
use gtm_node::tls::{self, Tls};
use gtm_node::workers::Workers;
use store_copy::StoreCopy;

/// The embedded demo configuration, served on first start without a node file.
pub const DEMO_CONFIG: &str = include_str!("../config/demo.toml");

/// Where the CLI finds a local device.
pub const API_FILE: &str = "api-address";
pub use gtm_node::identity::TOKEN_FILE;

/// A node setting `Device::start` would refuse, and why.
#[derive(Debug)]
pub struct NodeProblem {
    /// The node setting at fault.
    pub key: &'static str,
    pub error: anyhow::Error,
}

impl std::fmt::Display for NodeProblem {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Each cause once: some errors repeat their source in their own
        // text.
        let mut text = String::new();
        for cause in self.error.chain().map(ToString::to_string) {
            if !text.ends_with(&cause) {
                if !text.is_empty() {
                    text.push_str(": ");
                }
                text.push_str(&cause);
            }
        }
        // An error that names its setting already (`dns_cpus[0]`) is not
        // named twice.
        if text.starts_with(&format!("node setting {}", self.key)) {
            f.write_str(&text)
        } else {
            write!(f, "node setting {}: {text}", self.key)
        }
    }
}

/// The node setting a TLS error of `settings` is about.
fn tls_setting(settings: &NodeSettings, error: &anyhow::Error) -> &'static str {
    use tls::TlsError as E;
    match error.downcast_ref::<E>() {
        Some(E::ReadCertificate { .. } | E::CertificateNotPem { .. } | E::NoCertificate { .. }) => {
            "tls_cert"
        }
        Some(E::ReadTrusted { .. } | E::Trusted(_) | E::ClientVerifier(_))
            if settings.tls_ca.is_some() =>
        {
            "tls_ca"
        }
        Some(E::ReadTrusted { .. } | E::Trusted(_) | E::ClientVerifier(_)) => "tls_cert",
        Some(_) => "tls_key",
        // Only one of the two given: the one missing.
        None if settings.tls_cert.is_some() => "tls_key",
        None => "tls_cert",
    }
}

/// A started device.
#[derive(Debug)]
pub struct Device {
    pub engine: Arc<Engine>,
    pub replication: Arc<Replication>,
    pub dns_addrs: Vec<SocketAddr>,
    /// The listeners of zone transfers over TLS (`xot_listen`), bound.
    pub xot_addrs: Vec<SocketAddr>,
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
    /// dnstap output, started and changed by the node settings.
    dnstap: Arc<Dnstap>,
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
        let store_copy = start::prepare_data_dir(dir)?;
        let store = Store::open(store_copy.as_ref().map_or(dir.as_path(), StoreCopy::path))?
            .with_event_retention(
                settings
                    .event_retention
                    .unwrap_or(gtm_cluster::DEFAULT_EVENT_RETENTION),
            );

        let geo = start::open_geo(&settings, demo)?;
        let payload = settings.edns_payload.unwrap_or(1232);
        settings.validate()?;
        let dns_state = DnsState::new(Default::default(), geo, payload).with_nsid(settings.nsid());
        let engine = Arc::new(start::start_engine(
            &settings.name,
            &store,
            dir,
            &dns_state,
            demo,
            store_copy.is_some(),
        )?);

        let cpus = gtm_dns::cpus::Split::new(&settings.dns_cpus)?;
        let udp_workers = settings.udp_workers.unwrap_or_else(|| match &cpus {
            Some(split) => split.dns.len(),
            None => std::thread::available_parallelism().map_or(1, |n| n.get()),
        });
        let listen = start::dns_listen(&settings, demo)?;
        let dnstap = Arc::new(Dnstap::new(dns_state.dnstap.clone(), dns_state.geo.clone()));
        dnstap.apply(start::dnstap_settings(&settings));
        let dns = DnsServer::start(&listen, udp_workers, cpus.as_ref(), dns_state).await?;
        let dns_addrs = dns.addrs.clone();
        let dns_names = dns.workers().to_vec();
        let dns = Arc::new(DnsServerSlot(std::sync::Mutex::new(Some(dns))));
        let workers = Arc::new(Workers::new());
        start::watch_dns_and_store(&workers, &dns, &dns_names, &engine);
        start::watch_dnstap(&workers, &dnstap);

        let token = identity::api_token(dir)?;
        let api = start::open_api(&settings, store_copy.is_none()).await?;
        let tls = api.tls.map(tls::Live::new);
        let xot_addrs =
            start::spawn_xot(&workers, &settings.xot_listen, tls.as_ref(), engine.dns())?;
        // Clients of the other devices: with TLS they show this device's
        // certificate (mutual TLS); all share the one a reload replaces.
        let peer_client = |timeout| match &tls {
            Some(t) => tls::peer_client(&t.peer, timeout),
            None => tls::http_client(None, timeout),
        };
        let prober = Arc::new(
            Prober::fenced(
                settings.allow_exec,
                gtm_health::probe::Fence {
                    allow_link_local: settings.allow_link_local_probes,
                    only: settings.probe_networks.clone(),
                },
            )
            .reading(engine.inputs()),
        );
        let probes = start::probe_runtime(cpus.map(|split| split.rest))?;
        start::spawn_health(&workers, &probes, &engine, &prober, &settings);
        let info = NodeInfo {
            name: settings.name.clone(),
            datacenter: settings.datacenter.clone(),
            api_addr: settings
                .advertise_api
                .clone()
                .unwrap_or_else(|| format!("{}://{}", api.scheme, api.addr)),
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
        replication.set_mutual_tls(tls.is_some());
        let peers = Arc::new(Peers::default());
        let peer_http = peer_client(Duration::from_secs(3))?;
        let judge = Arc::new(gtm_node::judge::Judge {
            engine: engine.clone(),
            peers: peers.clone(),
            replication: replication.clone(),
            http: peer_http.clone(),
        });
        // RFC 2136 updates are judged on every device and decided by the
        // replicated state from now on.
        engine.dns().updates.serve(
            tokio::runtime::Handle::current(),
            Arc::new(gtm_node::updates::DnsUpdates::new(&judge, &settings.name)),
        );
        let transfer_in = Arc::new(gtm_node::workers::transfer_in::TransferIn::new(&engine));
        start::spawn_replicated(&workers, &judge, &transfer_in);
        let alerts = start::spawn_alerts(&workers, &engine, &replication, &settings.datacenter);
        // NOTIFYs to the secondaries of transferred zones (docs/transfer.md).
        start::restarting(&workers, "notify", {
            let (dns, stop) = (engine.dns().clone(), workers.token());
            let sources: Vec<_> = listen.iter().map(|a| a.ip()).collect();
            move || gtm_dns::notify::run(dns.clone(), sources.clone(), stop.clone())
        });
        start::spawn_peers(
            &workers,
            peer_client(Duration::from_millis(1500))?,
            &peers,
            &replication,
            &engine,
            &settings.datacenter,
        );
        if store_copy.is_none() {
            for (name, kind) in [
                ("geoip-refresh", gtm_geo::Kind::Place),
                ("asn-refresh", gtm_geo::Kind::Asn),
            ] {
                workers.spawn(
                    &tokio::runtime::Handle::current(),
                    name,
                    start::geoip_refresh(kind, engine.clone(), dir.clone(), workers.token()),
                );
            }
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
            peer_http,
            workers: workers.clone(),
            validations: Arc::default(),
            alerts,
            transfer_in,
        };
        let api_addr = api.addr;
        start::spawn_api(
            &workers,
            api.listener,
            api_state,
            tls.as_ref().map(|t| t.server.clone()),
        );
        tracing::info!(device = %settings.name, dns = ?dns_addrs, api = %api_addr, data_dir = %dir.display(), "device started");
        let logged = engine.clone();
        let _ = tokio::task::spawn_blocking(move || start::log_start(&logged)).await;
        Ok(Self {
            engine,
            replication,
            dns_addrs,
            xot_addrs,
            api_addr,
            token,
            dns,
            workers,
            probes: ProbeRuntime(Some(probes)),
            store_copy,
            tls,
            prober,
            dnstap,
            data_dir: dir.clone(),
        })
    }

    /// What `start` would refuse in `settings` before it binds a socket
    /// (`gtm node check`): each problem with the node setting it is about.
    /// Reads the files the settings name and changes nothing; whether the
    /// listen addresses can be bound is known only by binding them.
    pub fn check(settings: &NodeSettings) -> Vec<NodeProblem> {
        let mut problems = Vec::new();
        let mut check = |key: &'static str, result: Result<()>| {
            if let Err(error) = result {
                problems.push(NodeProblem { key, error });
            }
        };
        check("data_dir", start::check_data_dir(&settings.data_dir));
        let geo_key = if settings.geoip_file.is_some() {
            "geoip_file"
        } else {
            "data_dir"
        };
        check(geo_key, start::open_geo(settings, false).map(drop));
        check(
            "dns_cpus",
            gtm_dns::cpus::Split::new(&settings.dns_cpus)
                .map(drop)
                .map_err(Into::into),
        );
        check("dns_listen", start::dns_listen(settings, false).map(drop));
        if let Err(error) = start::load_tls(settings) {
            let key = tls_setting(settings, &error);
            problems.push(NodeProblem { key, error });
        }
        problems
    }

    /// Applies what a reload (SIGHUP) of the node settings can change
    /// without a restart: the TLS certificate, key and trusted CA, for the
    /// API's and the zone transfers' over TLS connections accepted and the connections to the other devices
    /// made from now on, the probe fences, and dnstap (a changed `[dnstap]`
    /// starts a new output; the one before writes what it holds and
    /// closes). Nothing is changed when the certificate files do not load.
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
        self.dnstap.apply(start::dnstap_settings(settings));
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
            gtm_engine::Severity::Info,
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
        // After the listeners: their last answers are written too.
        self.dnstap.stop().await;
        drop(self.store_copy);
    }
}
