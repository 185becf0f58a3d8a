//! Starting devices and asking them questions the way DNS clients do.

use std::{
    net::SocketAddr,
    path::{Path, PathBuf},
    process::{Child, Command, Stdio},
    time::{Duration, Instant},
};

use gtm::device::Device;
use gtm_model::node::NodeSettings;
use hickory_server::proto::{
    op::{Edns, Message, MessageType, OpCode, Query},
    rr::{
        Name, RecordType,
        rdata::opt::{ClientSubnet, EdnsOption},
    },
};
use tokio::{
    io::{AsyncReadExt, AsyncWriteExt},
    net::{TcpStream, UdpSocket},
};

pub struct TestDevice {
    pub device: Device,
    pub dir: tempfile::TempDir,
}

impl TestDevice {
    /// A device on 127.0.0.1 and ::1, port 0, serving `config`.
    pub async fn start(config: &str) -> Self {
        Self::start_with(config, None).await
    }

    pub async fn start_with(config: &str, geoip: Option<PathBuf>) -> Self {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().to_path_buf();
        Self::start_full(config, geoip, &path, Some(dir)).await
    }

    /// A device whose node settings `set` changes from a test device's.
    pub async fn start_set(config: &str, set: impl FnOnce(&mut NodeSettings)) -> Self {
        let dir = tempfile::tempdir().expect("temp dir");
        let mut settings = Self::settings(dir.path(), None);
        set(&mut settings);
        let device = Device::start(settings, false).await.expect("device starts");
        apply_text(&device, config)
            .await
            .expect("test config is valid");
        Self { device, dir }
    }

    /// A device on a data directory the caller keeps (for restarts).
    pub async fn start_in(config: &str, data_dir: &std::path::Path) -> Self {
        Self::start_full(config, None, data_dir, None).await
    }

    /// A device as `gtm serve` starts one without a node file: serving
    /// the embedded demo configuration (version 0), nothing applied.
    pub async fn start_demo() -> Self {
        let dir = tempfile::tempdir().expect("temp dir");
        let device = Device::start(Self::settings(dir.path(), None), true)
            .await
            .expect("device starts");
        Self { device, dir }
    }

    /// The node settings of a test device: loopback, port 0.
    pub fn settings(data_dir: &std::path::Path, geoip: Option<PathBuf>) -> NodeSettings {
        NodeSettings {
            name: "test1".into(),
            dns_listen: vec!["127.0.0.1:0".parse().unwrap(), "[::1]:0".parse().unwrap()],
            api_listen: "127.0.0.1:0".parse().unwrap(),
            geoip_file: geoip,
            udp_workers: Some(1),
            // Tests probe loopback only; anything else would be a bug.
            probe_networks: vec![
                "127.0.0.0/8".to_string().try_into().unwrap(),
                "::1".to_string().try_into().unwrap(),
            ],
            ..NodeSettings::demo(data_dir.to_path_buf())
        }
    }

    async fn start_full(
        config: &str,
        geoip: Option<PathBuf>,
        data_dir: &std::path::Path,
        owned: Option<tempfile::TempDir>,
    ) -> Self {
        let dir = match owned {
            Some(d) => d,
            None => tempfile::tempdir().expect("temp dir"),
        };
        let settings = Self::settings(data_dir, geoip);
        let device = Device::start(settings, false).await.expect("device starts");
        apply_text(&device, config)
            .await
            .expect("test config is valid");
        Self { device, dir }
    }

    pub fn v4(&self) -> SocketAddr {
        self.device.dns_addrs[0]
    }

    pub fn v6(&self) -> SocketAddr {
        self.device.dns_addrs[1]
    }
}

/// A query as `dig` sends it: RD set, EDNS unless `edns` is None.
pub fn query(name: &str, rtype: RecordType) -> Message {
    let mut m = Message::new(fastrand::u16(..), MessageType::Query, OpCode::Query);
    m.metadata.recursion_desired = true;
    m.add_query(Query::query(Name::from_ascii(name).unwrap(), rtype));
    let mut edns = Edns::new();
    edns.set_max_payload(1232);
    m.set_edns(edns);
    m
}

pub fn with_ecs(mut m: Message, subnet: &str) -> Message {
    let ecs: ClientSubnet = subnet.parse().unwrap();
    m.edns
        .as_mut()
        .unwrap()
        .options_mut()
        .insert(EdnsOption::Subnet(ecs));
    m
}

pub fn without_edns(mut m: Message) -> Message {
    m.edns = None;
    m
}

pub async fn udp_raw(server: SocketAddr, bytes: &[u8]) -> Vec<u8> {
    let from: std::net::IpAddr = if server.is_ipv6() {
        std::net::Ipv6Addr::LOCALHOST.into()
    } else {
        std::net::Ipv4Addr::LOCALHOST.into()
    };
    udp_raw_from(from, server, bytes).await
}

/// Sends `bytes` to `server` from the address `from` (a resolver of its
/// own on loopback) and returns the answer.
pub async fn udp_raw_from(from: std::net::IpAddr, server: SocketAddr, bytes: &[u8]) -> Vec<u8> {
    let socket = UdpSocket::bind(SocketAddr::new(from, 0))
        .await
        .expect("bind the resolver's address");
    socket.send_to(bytes, server).await.unwrap();
    let mut buf = vec![0u8; 65535];
    let n = tokio::time::timeout(Duration::from_secs(5), socket.recv(&mut buf))
        .await
        .expect("an answer within 5 s")
        .unwrap();
    buf.truncate(n);
    buf
}

pub async fn udp(server: SocketAddr, m: &Message) -> Message {
    let raw = udp_raw(server, &m.to_vec().unwrap()).await;
    let resp = Message::from_vec(&raw).expect("a well-formed response");
    assert_eq!(resp.metadata.id, m.metadata.id, "response id matches");
    resp
}

pub async fn tcp(server: SocketAddr, m: &Message) -> Message {
    let mut stream = TcpStream::connect(server).await.unwrap();
    let bytes = m.to_vec().unwrap();
    stream
        .write_all(&(bytes.len() as u16).to_be_bytes())
        .await
        .unwrap();
    stream.write_all(&bytes).await.unwrap();
    let mut len = [0u8; 2];
    tokio::time::timeout(Duration::from_secs(5), stream.read_exact(&mut len))
        .await
        .expect("an answer within 5 s")
        .unwrap();
    let mut buf = vec![0u8; u16::from_be_bytes(len) as usize];
    stream.read_exact(&mut buf).await.unwrap();
    Message::from_vec(&buf).unwrap()
}

/// The answer section's data as text, in order.
pub fn answers(m: &Message) -> Vec<String> {
    m.answers.iter().map(|r| r.data.to_string()).collect()
}

pub const ZONE: &str = r#"
[[datacenter]]
name = "dc1"
country = "DE"
continent = "EU"

[[datacenter]]
name = "dc2"
country = "US"
continent = "NA"

[[check]]
name = "web"
type = "http"

[[scenario]]
name = "dc1-down"
condition = "NOT (web@192.0.2.10 OR web@192.0.2.11)"

[[domain]]
name = "example.test"
ttl = 30
main_dc = "dc1"
dr_dc = "dc2"
nameservers = ["ns1.example.test", "ns2.example.test"]
soa = { minimum = 20 }

[[domain.record]]
name = "www"
type = "A"
ttl = 60
addresses = [
  { ip = "192.0.2.10", dc = "dc1", hc = "check:web" },
  { ip = "192.0.2.11", dc = "dc1", hc = "check:web" },
]

[[domain.record]]
name = "dr"
type = "A"
mode = "disaster-recovery"
fail_safe = ["192.0.2.250"]
addresses = [
  { ip = "192.0.2.20", dc = "dc1", hc = "check:web" },
  { ip = "198.51.100.20", dc = "dc2" },
]

[[domain.record]]
name = "w"
type = "A"
balance = "weighted"
addresses = [
  { ip = "192.0.2.40", weight = 1 },
  { ip = "192.0.2.41", weight = 3 },
  { ip = "192.0.2.42", weight = 0 },
]

[[domain.record]]
name = "geo"
type = "A"
topology = true
addresses = [
  { ip = "192.0.2.50", countries = ["DE"] },
  { ip = "192.0.2.51", continents = ["EU"] },
  { ip = "192.0.2.52" },
]

[[domain.record]]
name = "sticky"
type = "A"
balance = "persist"
addresses = [{ ip = "192.0.2.60" }, { ip = "192.0.2.61" }, { ip = "192.0.2.62" }]

[[domain.record]]
name = "*.wild"
type = "A"
addresses = [{ ip = "192.0.2.70" }]

[[domain.record]]
name = "v6"
type = "AAAA"
addresses = [{ ip = "2001:db8::1" }]

[[domain.record]]
name = "alias"
type = "CNAME"
addresses = [{ target = "www.example.test" }]

[[domain.record]]
name = "@"
type = "MX"
values = ["10 mail.example.test."]

[[domain.record]]
name = "@"
type = "TXT"
values = ["\"hello world\""]

[[domain.record]]
name = "_sip._udp"
type = "SRV"
values = ["10 5 5060 sip.example.test."]

[[domain.record]]
name = "@"
type = "CAA"
values = ["0 issue \"ca.example.net\""]

[[domain.record]]
name = "big"
type = "TXT"
values = [
  "\"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\"",
  "\"bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb\"",
  "\"cccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccccc\"",
  "\"dddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddddd\"",
]
"#;

/// The device's `/metrics` text.
pub async fn metrics(d: &TestDevice) -> String {
    gtm_node::tls::http_client(None, std::time::Duration::from_secs(10))
        .unwrap()
        .get(format!("http://{}/metrics", d.device.api_addr))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap()
}

/// `GET` of an API path on `d` with its token, as JSON.
pub async fn api_get(d: &TestDevice, path: &str) -> serde_json::Value {
    gtm_node::tls::http_client(None, None)
        .unwrap()
        .get(format!("http://{}{path}", d.device.api_addr))
        .bearer_auth(&d.device.token)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap_or_else(|e| panic!("GET {path}: not JSON: {e}"))
}

/// What a `gtm` command printed and how it exited.
#[derive(Debug)]
pub struct Run {
    pub code: Option<i32>,
    pub stdout: String,
    pub stderr: String,
}

/// Runs the `gtm` binary as a client of `d` (its data directory gives the
/// API address and token).
pub fn run_gtm(d: &TestDevice, args: &[&str]) -> Run {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_gtm"))
        .arg("--data-dir")
        .arg(d.dir.path())
        .args(args)
        .output()
        .expect("gtm runs");
    Run {
        code: out.status.code(),
        stdout: String::from_utf8_lossy(&out.stdout).into(),
        stderr: String::from_utf8_lossy(&out.stderr).into(),
    }
}

/// Applies a whole configuration through the device's command path, as
/// `gtm config apply` does.
pub async fn apply_text(
    device: &Device,
    text: &str,
) -> Result<gtm_node::replication::Applied, gtm_node::replication::ApplyError> {
    let actor = gtm_model::actor::Actor {
        user: "test".into(),
        device: device.engine.device().to_string(),
    };
    device
        .replication
        .propose(
            actor,
            None,
            gtm_node::command::Action::ApplyConfig {
                text: text.to_string(),
            },
        )
        .await
}

/// A real unbound on loopback, killed (by its PID) when dropped.
pub struct Unbound {
    child: Child,
    pub addr: SocketAddr,
    _dir: tempfile::TempDir,
}

impl Drop for Unbound {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The unbound binary, or `None` when it is absent and CI is unset.
/// unbound's ECS subnet cache, sending ECS to loopback servers.
pub const ECS_CACHE: &str = r#"  module-config: "subnetcache iterator"
  send-client-subnet: 127.0.0.1
  max-client-subnet-ipv4: 24"#;

/// unbound validating (with its ECS subnet cache), trusting `ds` (a DS
/// record in zone-file form).
pub fn validating(ds: &str) -> String {
    format!(
        "  module-config: \"subnetcache validator iterator\"\n  send-client-subnet: 127.0.0.1\n  max-client-subnet-ipv4: 24\n  trust-anchor: \"{ds}\"\n  val-log-level: 2"
    )
}

pub fn unbound_binary() -> Option<PathBuf> {
    let found = ["/usr/sbin/unbound", "/usr/local/sbin/unbound"]
        .iter()
        .map(PathBuf::from)
        .find(|p| p.exists())
        .or_else(|| {
            let out = Command::new("sh")
                .args(["-c", "command -v unbound"])
                .output()
                .ok()?;
            let path = String::from_utf8(out.stdout).ok()?;
            let path = path.trim();
            (!path.is_empty()).then(|| PathBuf::from(path))
        });
    if found.is_none() {
        assert!(
            std::env::var_os("CI").is_none(),
            "unbound is required in CI (.ci/run installs it)"
        );
        eprintln!("unbound not installed: skipping");
    }
    found
}

fn free_port() -> u16 {
    free_port_on("127.0.0.1")
}

/// A port free on `ip` now, for UDP and for TCP.
pub fn free_port_on(ip: &str) -> u16 {
    let udp = std::net::UdpSocket::bind(format!("{ip}:0")).unwrap();
    let port = udp.local_addr().unwrap().port();
    std::net::TcpListener::bind(format!("{ip}:{port}"))
        .map(|_| port)
        .unwrap_or_else(|_| free_port_on(ip))
}

/// Polls `ready` every 50 ms until it holds, for at most 60 s (generous:
/// CI runs the chaos test's processes beside these on two cores).
pub async fn until(what: &str, mut ready: impl AsyncFnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while !ready().await {
        assert!(Instant::now() < deadline, "timed out waiting for: {what}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The python of the venv `.ci/run` makes (target/venv-integrations, with
/// tests/requirements.txt), when it can import `module`; `None` (the test
/// is skipped) when it cannot and CI is unset.
pub fn venv_python(module: &str) -> Option<PathBuf> {
    let python =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("target/venv-integrations/bin/python");
    let has = python.exists()
        && Command::new(&python)
            .args(["-c", &format!("import {module}")])
            .status()
            .is_ok_and(|s| s.success());
    if !has {
        assert!(
            std::env::var_os("CI").is_none(),
            "{module} is required in CI (.ci/run installs tests/requirements.txt into target/venv-integrations)"
        );
        eprintln!("{module} not installed: skipping");
        return None;
    }
    Some(python)
}

/// Waits (bounded) until `name A` answers `ip` alone at `server`.
pub async fn until_a(server: SocketAddr, name: &str, ip: &str) {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let r = udp(server, &query(name, RecordType::A)).await;
        if answers(&r) == [ip] {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "{name} answers {:?}, not {ip}",
            answers(&r)
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// A daemon a test started, killed by its PID when dropped.
pub struct Daemon(pub Child);

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

impl Unbound {
    /// Starts unbound resolving `zone` at `upstream`, with `settings` (its
    /// modules and what they need: [`ECS_CACHE`], [`validating`]).
    pub async fn start(binary: &Path, zone: &str, upstream: SocketAddr, settings: &str) -> Self {
        for _ in 0..5 {
            let dir = tempfile::tempdir().unwrap();
            let port = free_port();
            let d = dir.path().display();
            let conf = format!(
                r#"server:
  interface: 127.0.0.1@{port}
  port: {port}
  do-ip6: no
  do-daemonize: no
  chroot: ""
  username: ""
  directory: "{d}"
  pidfile: "{d}/unbound.pid"
  use-syslog: no
  logfile: ""
  verbosity: 1
  num-threads: 1
  outgoing-interface: 127.0.0.1
  access-control: 127.0.0.0/8 allow
  do-not-query-localhost: no
  qname-minimisation: no
{settings}
  # .test is one of unbound's default empty zones (RFC 6761).
  local-zone: "test." nodefault
stub-zone:
  name: "{zone}"
  stub-addr: {ip}@{uport}
remote-control:
  control-enable: no
"#,
                ip = upstream.ip(),
                uport = upstream.port(),
            );
            let conf_path = dir.path().join("unbound.conf");
            std::fs::write(&conf_path, conf).unwrap();
            let log = std::fs::File::create(dir.path().join("unbound.log")).unwrap();
            let mut child = Command::new(binary)
                .arg("-d")
                .arg("-c")
                .arg(&conf_path)
                .stdout(Stdio::null())
                .stderr(log)
                .spawn()
                .expect("unbound starts");
            let addr: SocketAddr = format!("127.0.0.1:{port}").parse().unwrap();
            // Ready when it answers; a port taken meanwhile ends it early.
            let deadline = Instant::now() + Duration::from_secs(20);
            while Instant::now() < deadline {
                if child.try_wait().ok().flatten().is_some() {
                    break;
                }
                let sock = tokio::net::UdpSocket::bind("127.0.0.1:0").await.unwrap();
                let q = query(&format!("{zone}."), RecordType::SOA);
                sock.send_to(&q.to_vec().unwrap(), addr).await.unwrap();
                let mut buf = [0u8; 4096];
                if let Ok(Ok(_)) =
                    tokio::time::timeout(Duration::from_millis(500), sock.recv(&mut buf)).await
                {
                    return Self {
                        child,
                        addr,
                        _dir: dir,
                    };
                }
            }
            let log = std::fs::read_to_string(dir.path().join("unbound.log")).unwrap_or_default();
            let _ = child.kill();
            let _ = child.wait();
            eprintln!("unbound did not come up on port {port}; retrying:\n{log}");
        }
        panic!("unbound never came up");
    }
}

/// A tool from Debian's `package`, or `None` (the test is skipped) when it
/// is absent and CI is unset; with CI set a missing tool fails the test
/// (.ci/run installs them).
pub fn tool(name: &str, package: &str) -> Option<PathBuf> {
    let found = ["/usr/bin", "/usr/sbin", "/usr/local/bin", "/usr/local/sbin"]
        .iter()
        .map(|d| PathBuf::from(d).join(name))
        .find(|p| p.exists());
    if found.is_none() {
        assert!(
            std::env::var_os("CI").is_none(),
            "{name} is required in CI (.ci/run installs {package})"
        );
        eprintln!("{name} not installed ({package}): skipping");
    }
    found
}

/// The ECS scope prefix an answer carries, if it has a client subnet.
pub fn ecs_scope(m: &Message) -> Option<u8> {
    m.edns
        .as_ref()?
        .options()
        .options
        .iter()
        .find_map(|(_, o)| match o {
            EdnsOption::Subnet(s) => Some(s.scope_prefix()),
            _ => None,
        })
}

/// The Extended DNS Error (RFC 8914) of a response: its INFO-CODE and
/// EXTRA-TEXT, if it carries one.
pub fn ede(m: &Message) -> Option<(u16, String)> {
    let option = m.edns.as_ref()?.option(15u16.into())?;
    match option {
        EdnsOption::Unknown(15, data) => Some((
            u16::from_be_bytes([*data.first()?, *data.get(1)?]),
            String::from_utf8(data.get(2..)?.to_vec()).ok()?,
        )),
        _ => None,
    }
}
