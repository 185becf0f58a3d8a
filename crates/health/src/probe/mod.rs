//! Health-check probers: one probe of one target, bounded by a timeout,
//! giving an [`Outcome`] whose `reason` is meant for operators
//! (`status 503`, `connect refused`, `timeout after 3000 ms`, ...).
//!
//! Every probe opens its own connection (health checks must see connection
//! failures) and never panics.

mod dns;
mod exec;
mod grpc;
mod http;
mod icmp;
pub mod inputs;
mod prometheus;
mod tcp;

use std::fmt;
use std::io;
use std::net::{IpAddr, SocketAddr};
use std::sync::Arc;
use std::time::{Duration, Instant};

use rustls::ClientConfig;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::CryptoProvider;
use rustls_pki_types::{CertificateDer, ServerName, UnixTime};
use tokio::net::TcpStream;

/// Where a probe goes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Host {
    Ip(IpAddr),
    /// Resolved with `tokio::net::lookup_host` at probe time.
    Name(String),
    /// A name's addresses, resolved and let through the [`Fence`]: what the
    /// probers connect to.
    Resolved(String, Vec<IpAddr>),
}

impl fmt::Display for Host {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Host::Ip(ip) => write!(f, "{ip}"),
            Host::Name(name) | Host::Resolved(name, _) => f.write_str(name),
        }
    }
}

/// The addresses probes may reach, from the node settings.
///
/// Link-local addresses (169.254.0.0/16, fe80::/10), where cloud metadata
/// services answer, are refused unless `allow_link_local_probes` is set; when
/// `probe_networks` is given, only addresses inside those networks are
/// probed. A refused probe fails with a reason that names the setting.
///
/// Both rules judge the IPv4 address an IPv6 form stands for (see
/// [`embedded_v4`]): `::ffff:169.254.169.254`, `::169.254.169.254` and
/// `64:ff9b::a9fe:a9fe` all reach 169.254.169.254.
#[derive(Debug, Clone, Default)]
pub struct Fence {
    pub allow_link_local: bool,
    /// Empty: any address (but link-local, as above).
    pub only: Vec<gtm_model::node::Network>,
}

/// Why the fence refuses an address (the IPv4 address when the address
/// embeds one).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Fenced {
    #[error(
        "{0} is link-local (where metadata services answer): probes there are refused unless the node setting allow_link_local_probes = true"
    )]
    LinkLocal(IpAddr),
    #[error("{0} is outside the node setting probe_networks; probes there are refused")]
    Outside(IpAddr),
}

impl Fence {
    /// `Ok` when probes may go to `ip`, else which setting refuses it.
    pub fn check(&self, ip: IpAddr) -> Result<(), Fenced> {
        let ip = match ip {
            IpAddr::V6(v6) => embedded_v4(v6).map_or(ip, IpAddr::V4),
            IpAddr::V4(_) => ip,
        };
        let link_local = match ip {
            IpAddr::V4(v4) => v4.is_link_local(),
            IpAddr::V6(v6) => (v6.segments()[0] & 0xffc0) == 0xfe80,
        };
        if link_local && !self.allow_link_local {
            return Err(Fenced::LinkLocal(ip));
        }
        if !self.only.is_empty() && !self.only.iter().any(|n| n.contains(ip)) {
            return Err(Fenced::Outside(ip));
        }
        Ok(())
    }
}

pub use gtm_model::addr::embedded_v4;

/// The address probed, with the name used as Host header and TLS SNI /
/// verification name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Target {
    pub host: Host,
    pub port: u16,
    pub server_name: String,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HttpVersion {
    Http1,
    Http2,
}

#[derive(Debug, Clone, PartialEq)]
pub enum ProbeKind {
    Http {
        tls: bool,
        version: HttpVersion,
        path: String,
        /// Inclusive ranges, e.g. `vec![(200, 399)]`.
        expect_status: Vec<(u16, u16)>,
        /// Substring looked for in the first 1,024 bytes of the body.
        expect_body: Option<String>,
        tls_verify: bool,
        proxy_protocol: bool,
        /// Keep the connection open between probes (HTTP/1 keep-alive, or
        /// one HTTP/2 connection) instead of one connection per probe.
        reuse_connection: bool,
    },
    Tcp {
        send: Option<String>,
        expect: Option<String>,
        proxy_protocol: bool,
    },
    Tls {
        send: Option<String>,
        expect: Option<String>,
        tls_verify: bool,
        proxy_protocol: bool,
    },
    Dns {
        query_name: String,
        query_type: u16,
        expect_rcode: u8,
        expect_answer: Option<String>,
    },
    Icmp,
    Grpc {
        service: String,
        tls: bool,
        tls_verify: bool,
    },
    Exec {
        command: Vec<String>,
    },
    /// An instant query; `$address` stands for the target.
    Prometheus {
        url: String,
        query: String,
        expect: gtm_model::compare::Comparison,
    },
    /// Reads the instance's last report (docs/health.md, "Inputs").
    Push {
        /// The instance's key (`beat@192.0.2.10`, or `beat`).
        key: String,
        stale_after: Duration,
    },
    /// Fails while an alert carrying these labels fires.
    Alertmanager {
        labels: std::collections::BTreeMap<String, String>,
    },
}

impl ProbeKind {
    /// Whether the kind reads reported inputs instead of probing.
    pub fn is_input(&self) -> bool {
        matches!(self, Self::Push { .. } | Self::Alertmanager { .. })
    }
}

#[derive(Debug, Clone, PartialEq)]
pub struct ProbeSpec {
    pub kind: ProbeKind,
    pub timeout: Duration,
    /// A success slower than this is a failure ("slow is down").
    pub max_latency: Option<Duration>,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Outcome {
    pub ok: bool,
    pub reason: String,
    pub elapsed: Duration,
}

/// What a check instance's probes keep from one to the next: with
/// `reuse_connection`, its open HTTP connection. Dropped with the instance.
#[derive(Debug, Default)]
pub struct Session {
    http: Option<http::Kept>,
}

impl Session {
    /// Whether a connection is kept open for the next probe.
    pub fn holds_connection(&self) -> bool {
        self.http.is_some()
    }
}

/// Why a probe judged its target down, as the address's reason shows it
/// (`status 503`, `connection refused` ...): a verdict shown and logged,
/// never matched on, so plain text (docs/decisions.md, "Errors").
pub(crate) type Down = String;

/// The result of a prober before timing: `Ok(reason)` (up) or
/// `Err(reason)` (down).
pub(crate) type ProbeResult = Result<String, Down>;

/// TLS client configurations for one verification mode.
#[derive(Debug)]
pub(crate) struct TlsConfigs {
    /// No ALPN (plain TLS probe).
    pub plain: Arc<ClientConfig>,
    /// ALPN `http/1.1`.
    pub http1: Arc<ClientConfig>,
    /// ALPN `h2` (HTTP/2 and gRPC).
    pub h2: Arc<ClientConfig>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Alpn {
    None,
    Http1,
    H2,
}

impl TlsConfigs {
    fn new(provider: &Arc<CryptoProvider>, verify: bool) -> Result<Self, rustls::Error> {
        let make = |alpn: &[&[u8]]| -> Result<Arc<ClientConfig>, rustls::Error> {
            let builder = ClientConfig::builder_with_provider(provider.clone())
                .with_safe_default_protocol_versions()?;
            let mut config = if verify {
                let roots = rustls::RootCertStore {
                    roots: webpki_roots::TLS_SERVER_ROOTS.to_vec(),
                };
                builder.with_root_certificates(roots).with_no_client_auth()
            } else {
                builder
                    .dangerous()
                    .with_custom_certificate_verifier(Arc::new(AcceptAnyCert {
                        provider: provider.clone(),
                    }))
                    .with_no_client_auth()
            };
            config.alpn_protocols = alpn.iter().map(|p| p.to_vec()).collect();
            // A probe is one connection: no session resumption, so every probe
            // sees the full handshake (and the current certificate).
            config.resumption = rustls::client::Resumption::disabled();
            Ok(Arc::new(config))
        };
        Ok(TlsConfigs {
            plain: make(&[])?,
            http1: make(&[b"http/1.1"])?,
            h2: make(&[b"h2"])?,
        })
    }

    pub fn get(&self, alpn: Alpn) -> Arc<ClientConfig> {
        match alpn {
            Alpn::None => self.plain.clone(),
            Alpn::Http1 => self.http1.clone(),
            Alpn::H2 => self.h2.clone(),
        }
    }
}

/// Certificate verifier for "TLS verification off": any certificate is
/// accepted; handshake signatures are still checked with the provider.
#[derive(Debug)]
struct AcceptAnyCert {
    provider: Arc<CryptoProvider>,
}

impl ServerCertVerifier for AcceptAnyCert {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.provider.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<rustls::SignatureScheme> {
        self.provider
            .signature_verification_algorithms
            .supported_schemes()
    }
}

/// Runs probes. Cheap to share (`Arc<Prober>`); holds the TLS client
/// configurations and whether exec checks are allowed on this device.
#[derive(Debug)]
pub struct Prober {
    /// (verifying, accept-any); `Err` only if building the rustls configs
    /// failed (then TLS probes fail with that reason instead of panicking).
    tls: Result<(TlsConfigs, TlsConfigs), rustls::Error>,
    allow_exec: bool,
    /// Swapped by a reload (SIGHUP) of the node settings.
    fence: arc_swap::ArcSwap<Fence>,
    /// The committed health inputs push and alertmanager checks read.
    inputs: Arc<inputs::Inputs>,
}

impl Prober {
    pub fn new(allow_exec: bool) -> Self {
        Self::fenced(allow_exec, Fence::default())
    }

    pub fn fenced(allow_exec: bool, fence: Fence) -> Self {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let tls = TlsConfigs::new(&provider, true)
            .and_then(|verifying| Ok((verifying, TlsConfigs::new(&provider, false)?)));
        Prober {
            tls,
            allow_exec,
            fence: arc_swap::ArcSwap::from_pointee(fence),
            inputs: Arc::default(),
        }
    }

    /// The prober reading `inputs` (the engine installs the committed ones
    /// there).
    pub fn reading(mut self, inputs: Arc<inputs::Inputs>) -> Self {
        self.inputs = inputs;
        self
    }

    /// Whether a push instance that started `running` ago has no report
    /// yet and is still within its `stale_after`: it gives no result.
    pub fn waits(&self, spec: &ProbeSpec, running: Duration) -> bool {
        match &spec.kind {
            ProbeKind::Push { key, stale_after } => {
                inputs::waits(&self.inputs.load(), key, *stale_after, running)
            }
            _ => false,
        }
    }

    /// Replaces the fence: probes started from now on follow it.
    pub fn set_fence(&self, fence: Fence) {
        self.fence.store(Arc::new(fence));
    }

    /// Whether the fence lets probes reach `ip` now (Test now asks before
    /// it probes, to ask another device when this one may not).
    pub fn admits(&self, ip: IpAddr) -> Result<(), Fenced> {
        self.fence.load().check(ip)
    }

    /// The target with its name resolved, every address let through the
    /// fence; probers connect only to what this returns.
    /// A name whose addresses are partly refused is probed on the others.
    async fn resolve_fenced(&self, target: &Target) -> Result<Target, Down> {
        let mut refused = None;
        let fence = self.fence.load();
        let allowed: Vec<IpAddr> = resolve(target)
            .await?
            .iter()
            .map(SocketAddr::ip)
            .filter(|ip| match fence.check(*ip) {
                Ok(()) => true,
                Err(why) => {
                    refused.get_or_insert(why.to_string());
                    false
                }
            })
            .collect();
        if allowed.is_empty() {
            return Err(refused.unwrap_or_else(|| "no target address".to_string()));
        }
        Ok(Target {
            host: Host::Resolved(target.host.to_string(), allowed),
            ..target.clone()
        })
    }

    /// Runs one probe of `target`. Never panics; the whole probe (resolution,
    /// connection, handshake, exchange) is bounded by `spec.timeout`.
    pub async fn probe(&self, spec: &ProbeSpec, target: &Target) -> Outcome {
        self.probe_in(spec, target, &mut Session::default()).await
    }

    /// Runs one probe of `target` as [`Prober::probe`] does, in the session
    /// of a check instance: a connection kept from its last probe is used
    /// again, and one this probe opens may be kept for the next.
    pub async fn probe_in(
        &self,
        spec: &ProbeSpec,
        target: &Target,
        session: &mut Session,
    ) -> Outcome {
        let start = Instant::now();
        let run = self.run(&spec.kind, target, session);
        let result = match tokio::time::timeout(spec.timeout, run).await {
            Ok(result) => result,
            Err(_) => Err(format!("timeout after {} ms", spec.timeout.as_millis())),
        };
        let elapsed = start.elapsed();
        let (ok, reason) = match result {
            Ok(reason) => match spec.max_latency {
                Some(max) if elapsed > max => (
                    false,
                    format!(
                        "slow: {reason} in {} ms, over max_latency {} ms",
                        elapsed.as_millis(),
                        max.as_millis()
                    ),
                ),
                _ => (true, reason),
            },
            Err(reason) => (false, reason),
        };
        tracing::trace!(target = %target.host, port = target.port, ok, %reason, "probe");
        Outcome {
            ok,
            reason,
            elapsed,
        }
    }

    async fn run(&self, kind: &ProbeKind, target: &Target, session: &mut Session) -> ProbeResult {
        // A command runs here, inputs are read here, and a Prometheus
        // check's target only names what it asks about (its server is
        // fenced itself): nothing to fence.
        let resolved;
        let target = if matches!(
            kind,
            ProbeKind::Exec { .. }
                | ProbeKind::Prometheus { .. }
                | ProbeKind::Push { .. }
                | ProbeKind::Alertmanager { .. }
        ) {
            target
        } else {
            resolved = self.resolve_fenced(target).await?;
            &resolved
        };
        match kind {
            ProbeKind::Http {
                tls,
                version,
                path,
                expect_status,
                expect_body,
                tls_verify,
                proxy_protocol,
                reuse_connection,
            } => {
                let params = http::HttpParams {
                    tls: *tls,
                    version: *version,
                    path,
                    expect_status,
                    expect_body: expect_body.as_deref(),
                    tls_verify: *tls_verify,
                    proxy_protocol: *proxy_protocol,
                    reuse_connection: *reuse_connection,
                };
                http::probe(self, &params, target, &mut session.http).await
            }
            ProbeKind::Tcp {
                send,
                expect,
                proxy_protocol,
            } => tcp::probe_tcp(target, send.as_deref(), expect.as_deref(), *proxy_protocol).await,
            ProbeKind::Tls {
                send,
                expect,
                tls_verify,
                proxy_protocol,
            } => {
                tcp::probe_tls(
                    self,
                    target,
                    send.as_deref(),
                    expect.as_deref(),
                    *tls_verify,
                    *proxy_protocol,
                )
                .await
            }
            ProbeKind::Dns {
                query_name,
                query_type,
                expect_rcode,
                expect_answer,
            } => {
                dns::probe(
                    target,
                    query_name,
                    *query_type,
                    *expect_rcode,
                    expect_answer.as_deref(),
                )
                .await
            }
            ProbeKind::Icmp => icmp::probe(target).await,
            ProbeKind::Grpc {
                service,
                tls,
                tls_verify,
            } => grpc::probe(self, target, service, *tls, *tls_verify).await,
            ProbeKind::Exec { command } => {
                if !self.allow_exec {
                    return Err(
                        "exec checks are disabled on this device (node setting allow_exec)"
                            .to_string(),
                    );
                }
                exec::probe(target, command).await
            }
            ProbeKind::Prometheus { url, query, expect } => {
                let address = inputs::address_text(target);
                prometheus::probe(self, url, query, expect, &address).await
            }
            ProbeKind::Push { key, stale_after } => inputs::push_result(
                &self.inputs.load(),
                key,
                *stale_after,
                gtm_model::clock::now_ms(),
            )
            .unwrap_or_else(|| Err(inputs::never_reported(*stale_after))),
            ProbeKind::Alertmanager { labels } => {
                inputs::alert_result(&self.inputs.load(), labels, &inputs::address_text(target))
            }
        }
    }

    pub(crate) fn tls_config(&self, verify: bool, alpn: Alpn) -> Result<Arc<ClientConfig>, Down> {
        match &self.tls {
            Ok((verifying, any)) => Ok(if verify { verifying } else { any }.get(alpn)),
            Err(e) => Err(format!("TLS client setup failed: {e}")),
        }
    }
}

// ---------------------------------------------------------------------------
// Helpers shared by the probers.

/// The socket addresses of a target, resolving names at probe time.
pub(crate) async fn resolve(target: &Target) -> Result<Vec<SocketAddr>, Down> {
    match &target.host {
        Host::Ip(ip) => Ok(vec![SocketAddr::new(*ip, target.port)]),
        Host::Resolved(_, ips) => Ok(ips
            .iter()
            .map(|ip| SocketAddr::new(*ip, target.port))
            .collect()),
        Host::Name(name) if name.trim().is_empty() => Err("no target address".to_string()),
        Host::Name(name) => {
            // An IP literal given as a name needs no resolver.
            if let Ok(ip) = name
                .trim_start_matches('[')
                .trim_end_matches(']')
                .parse::<IpAddr>()
            {
                return Ok(vec![SocketAddr::new(ip, target.port)]);
            }
            match tokio::net::lookup_host((name.as_str(), target.port)).await {
                Ok(addrs) => {
                    let addrs: Vec<SocketAddr> = addrs.collect();
                    if addrs.is_empty() {
                        Err(format!("cannot resolve {name}"))
                    } else {
                        Ok(addrs)
                    }
                }
                Err(_) => Err(format!("cannot resolve {name}")),
            }
        }
    }
}

/// Operator-facing text for a connection-level I/O error.
pub(crate) fn connect_error(e: &io::Error) -> String {
    match e.kind() {
        io::ErrorKind::ConnectionRefused => "connect refused".to_string(),
        io::ErrorKind::HostUnreachable | io::ErrorKind::NetworkUnreachable => {
            "host unreachable".to_string()
        }
        // EHOSTUNREACH, ENETUNREACH on Linux.
        _ if matches!(e.raw_os_error(), Some(113 | 101)) => "host unreachable".to_string(),
        _ => format!("connect failed: {e}"),
    }
}

/// Opens a TCP connection to the target (first address that answers; the
/// first error is reported when none does).
pub(crate) async fn connect(target: &Target) -> Result<TcpStream, Down> {
    let addrs = resolve(target).await?;
    let mut first_err = None;
    for addr in addrs {
        match TcpStream::connect(addr).await {
            Ok(stream) => {
                let _ = stream.set_nodelay(true);
                // Close with a reset, as health checkers do: no FIN exchange
                // and no TIME_WAIT per probe, a third of the packets.
                let _ = socket2::SockRef::from(&stream).set_linger(Some(std::time::Duration::ZERO));
                return Ok(stream);
            }
            Err(e) => {
                if first_err.is_none() {
                    first_err = Some(connect_error(&e));
                }
            }
        }
    }
    Err(first_err.unwrap_or_else(|| format!("cannot resolve {}", target.host)))
}

/// Text for a write/read failure after the connection was established.
pub(crate) fn io_error(what: &str, e: &io::Error) -> String {
    match e.kind() {
        io::ErrorKind::ConnectionRefused => "connect refused".to_string(),
        io::ErrorKind::ConnectionReset => format!("{what} failed: connection reset"),
        io::ErrorKind::UnexpectedEof => format!("{what} failed: connection closed"),
        _ => format!("{what} failed: {e}"),
    }
}

/// Escapes `bytes` for a reason text, truncated to 64 characters.
pub(crate) fn escape_truncated(bytes: &[u8]) -> String {
    let text = String::from_utf8_lossy(bytes);
    let escaped: String = text.escape_debug().collect();
    if escaped.chars().count() > 64 {
        let mut s: String = escaped.chars().take(64).collect();
        s.push('…');
        s
    } else {
        escaped
    }
}

/// The name used for TLS: `server_name`, or the target itself when empty.
pub(crate) fn tls_name(target: &Target) -> String {
    if target.server_name.is_empty() {
        target.host.to_string()
    } else {
        target.server_name.clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn probe_future_is_send() {
        fn assert_send<T: Send>(_: &T) {}
        let prober = Prober::new(false);
        let spec = ProbeSpec {
            kind: ProbeKind::Icmp,
            timeout: Duration::from_secs(1),
            max_latency: None,
        };
        let target = Target {
            host: Host::Name(String::new()),
            port: 0,
            server_name: String::new(),
        };
        let fut = prober.probe(&spec, &target);
        assert_send(&fut);
    }

    #[tokio::test]
    async fn a_new_fence_applies_to_the_next_probe() {
        let prober = Prober::new(false);
        let target = Target {
            host: Host::Ip("10.1.2.3".parse().unwrap()),
            port: 80,
            server_name: "10.1.2.3".into(),
        };
        assert!(prober.resolve_fenced(&target).await.is_ok());
        prober.set_fence(Fence {
            allow_link_local: false,
            only: vec![gtm_model::node::Network::try_from("192.0.2.0/24".to_string()).unwrap()],
        });
        let refused = prober.resolve_fenced(&target).await.unwrap_err();
        assert!(refused.contains("probe_networks"), "{refused}");
        prober.set_fence(Fence::default());
        assert!(prober.resolve_fenced(&target).await.is_ok());
    }

    #[test]
    fn the_fence_judges_every_ipv6_form_of_an_ipv4_address() {
        let open = Fence::default();
        for text in [
            "169.254.169.254",
            "::ffff:169.254.169.254",
            "::169.254.169.254",
            "64:ff9b::a9fe:a9fe",
            "64:ff9b::169.254.0.1",
            "fe80::1",
            "febf::1",
        ] {
            let ip: IpAddr = text.parse().unwrap();
            let refused = open.check(ip).expect_err(text).to_string();
            assert!(refused.contains("link-local"), "{text}: {refused}");
            assert!(refused.contains("allow_link_local_probes"), "{text}");
        }
        for text in [
            "192.0.2.1",
            "::ffff:192.0.2.1",
            "::192.0.2.1",
            "64:ff9b::c000:201",
            "2001:db8::a9fe:a9fe",
            "64:ff9c::a9fe:a9fe",
            "::1",
            "::",
        ] {
            let ip: IpAddr = text.parse().unwrap();
            assert_eq!(open.check(ip), Ok(()), "{text}");
        }
        let allowed = Fence {
            allow_link_local: true,
            only: Vec::new(),
        };
        assert_eq!(allowed.check("::169.254.169.254".parse().unwrap()), Ok(()));

        // probe_networks judges the IPv4 address too: a loopback-only fence
        // takes every form of 127.0.0.1 and no form of anything else.
        let loopback = Fence {
            allow_link_local: false,
            only: vec![
                "127.0.0.0/8".to_string().try_into().unwrap(),
                "::1".to_string().try_into().unwrap(),
            ],
        };
        for text in [
            "127.0.0.1",
            "::ffff:127.0.0.1",
            "::127.0.0.1",
            "64:ff9b::7f00:1",
            "::1",
        ] {
            assert_eq!(loopback.check(text.parse().unwrap()), Ok(()), "{text}");
        }
        for text in [
            "192.0.2.1",
            "::ffff:192.0.2.1",
            "::192.0.2.1",
            "64:ff9b::c000:201",
        ] {
            let refused = loopback
                .check(text.parse().unwrap())
                .expect_err(text)
                .to_string();
            assert!(refused.contains("probe_networks"), "{text}: {refused}");
        }
    }

    #[tokio::test]
    async fn empty_target_and_refused() {
        let prober = Prober::new(false);
        let spec = ProbeSpec {
            kind: ProbeKind::Tcp {
                send: None,
                expect: None,
                proxy_protocol: false,
            },
            timeout: Duration::from_secs(1),
            max_latency: None,
        };
        let empty = Target {
            host: Host::Name(String::new()),
            port: 80,
            server_name: String::new(),
        };
        let o = prober.probe(&spec, &empty).await;
        assert_eq!((o.ok, o.reason.as_str()), (false, "no target address"));
        assert_eq!(escape_truncated(b"a\"\r\n"), "a\\\"\\r\\n");
    }
}
