//! `gtm serve` as a service, with real processes: SIGHUP reloads without
//! stopping (a new TLS certificate for new connections, a bad one kept
//! out), the sd_notify messages a service manager reads, and the log
//! output (plain text off a terminal, JSON lines when asked).

use std::{
    os::unix::net::UnixDatagram,
    path::{Path, PathBuf},
    process::{Child, Command, Stdio},
    time::{Duration, Instant},
};

use hickory_server::proto::rr::RecordType;

use crate::support::{query, udp};

/// A `gtm serve` process with its standard error in a file, killed by its
/// PID when dropped.
struct Serve {
    child: Child,
    log: PathBuf,
    node: PathBuf,
}

impl Serve {
    fn start(dir: &Path, ip: &str, extra: &str, env: &[(&str, &str)]) -> Self {
        let node = node_file(dir, ip, extra);
        let log = dir.join("serve.log");
        let child = Command::new(env!("CARGO_BIN_EXE_gtm"))
            .args(["serve", "--config"])
            .arg(&node)
            .env_remove("GTM_LOG")
            .env_remove("RUST_LOG")
            .env_remove("NOTIFY_SOCKET")
            .env_remove("WATCHDOG_USEC")
            .envs(env.iter().copied())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).unwrap())
            .spawn()
            .unwrap();
        let s = Serve { child, log, node };
        s.until_logged("device started");
        s
    }

    fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// Waits (bounded) for `text` in the log; fails if the process ends.
    fn until_logged(&self, text: &str) {
        let deadline = Instant::now() + Duration::from_secs(60);
        while !self.log().contains(text) {
            assert!(
                Instant::now() < deadline,
                "never logged {text:?}:\n{}",
                self.log()
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    fn signal(&self, signal: libc::c_int) {
        let pid = libc::pid_t::try_from(self.child.id()).unwrap();
        // SAFETY: a signal to the child this test started, by its PID.
        assert_eq!(unsafe { libc::kill(pid, signal) }, 0);
    }

    fn running(&mut self) -> bool {
        self.child.try_wait().unwrap().is_none()
    }

    /// Waits (bounded) for the process to exit; its status.
    fn wait(&mut self) -> std::process::ExitStatus {
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                return status;
            }
            assert!(Instant::now() < deadline, "gtm serve did not exit");
            std::thread::sleep(Duration::from_millis(50));
        }
    }
}

/// Writes the node file of a device on `ip` with its data in `dir`, and
/// `extra` lines; its path.
fn node_file(dir: &Path, ip: &str, extra: &str) -> PathBuf {
    let node = dir.join("node.toml");
    std::fs::write(
        &node,
        format!(
            "name = \"svc\"\ndatacenter = \"dc1\"\ndata_dir = \"{}\"\ndns_listen = [\"{ip}:1053\"]\napi_listen = \"{ip}:8053\"\nudp_workers = 1\n{extra}\n",
            dir.join("data").display()
        ),
    )
    .unwrap();
    node
}

impl Drop for Serve {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn write_cert(dir: &Path, ip: &str) -> (PathBuf, PathBuf, Vec<u8>) {
    let ck = rcgen::generate_simple_self_signed(vec![ip.to_string()]).unwrap();
    let (cert, key) = (dir.join("cert.pem"), dir.join("key.pem"));
    // Written aside and renamed, as a certificate renewal does.
    std::fs::write(dir.join("cert.new"), ck.cert.pem()).unwrap();
    std::fs::write(dir.join("key.new"), ck.signing_key.serialize_pem()).unwrap();
    std::fs::rename(dir.join("key.new"), &key).unwrap();
    std::fs::rename(dir.join("cert.new"), &cert).unwrap();
    (cert, key, ck.cert.pem().into_bytes())
}

/// Whether a new TLS connection to the API, trusting only `pem`, gets an
/// HTTP answer (any status: the handshake is what is tested).
async fn trusted(api: &str, pem: &[u8]) -> bool {
    let client = gtm_node::tls::http_client(Some(pem), Duration::from_secs(10)).unwrap();
    client
        .get(format!("{api}/api/v1/status"))
        .send()
        .await
        .is_ok()
}

/// An answer at all (REFUSED, for a zone it lacks): the device serves DNS.
async fn dns_answers(ip: &str) {
    udp(
        format!("{ip}:1053").parse().unwrap(),
        &query("www.example.test.", RecordType::A),
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sighup_serves_a_new_certificate_and_keeps_the_old_one_when_the_new_is_bad() {
    let ip = "127.0.101.1";
    let api = format!("https://{ip}:8053");
    let dir = tempfile::tempdir().unwrap();
    let (cert, key, first) = write_cert(dir.path(), ip);
    let mut serve = Serve::start(
        dir.path(),
        ip,
        &format!(
            "tls_cert = \"{}\"\ntls_key = \"{}\"",
            cert.display(),
            key.display()
        ),
        &[],
    );
    assert!(trusted(&api, &first).await);
    // The start banner names the scheme the API really speaks.
    serve.until_logged(&format!("the API on {api}"));

    let (_, _, second) = write_cert(dir.path(), ip);
    assert!(!trusted(&api, &second).await, "renewed before the reload");
    serve.signal(libc::SIGHUP);
    let deadline = Instant::now() + Duration::from_secs(60);
    while !trusted(&api, &second).await {
        assert!(
            Instant::now() < deadline,
            "the new certificate is never served:\n{}",
            serve.log()
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    assert!(
        !trusted(&api, &first).await,
        "the old certificate after the reload"
    );
    assert!(serve.running(), "SIGHUP stopped the device");
    serve.until_logged("node settings reloaded");
    dns_answers(ip).await;

    // A broken certificate file: the reload fails, naming it; the device
    // goes on with the certificate it had.
    std::fs::write(&cert, "not a certificate\n").unwrap();
    serve.signal(libc::SIGHUP);
    serve.until_logged("reload failed");
    let log = serve.log();
    let failed = log.lines().find(|l| l.contains("reload failed")).unwrap();
    assert!(
        failed.contains(&cert.display().to_string()),
        "the error names the file: {failed}"
    );
    assert!(serve.running(), "a failed reload stopped the device");
    assert!(
        trusted(&api, &second).await,
        "the previous certificate is kept"
    );
    dns_answers(ip).await;
}

/// Reads notifications until one equal to `want`, skipping watchdog pings
/// (and `MONOTONIC_USEC` lines of `RELOADING=1`).
fn until_notified(socket: &UnixDatagram, want: &str, seen: &mut Vec<String>) {
    let mut buf = [0u8; 512];
    loop {
        let n = socket
            .recv(&mut buf)
            .unwrap_or_else(|e| panic!("no {want} (seen {seen:?}): {e}"));
        let message = String::from_utf8_lossy(&buf[..n]).to_string();
        let first = message.lines().next().unwrap_or_default().to_string();
        seen.push(first.clone());
        if first == want {
            return;
        }
        assert_eq!(first, "WATCHDOG=1", "unexpected before {want}: {seen:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sd_notify_ready_watchdog_reloading_and_stopping() {
    let ip = "127.0.101.2";
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("notify.sock");
    let socket = UnixDatagram::bind(&path).unwrap();
    socket
        .set_read_timeout(Some(Duration::from_secs(60)))
        .unwrap();
    let mut serve = Serve::start(
        dir.path(),
        ip,
        "",
        &[
            ("NOTIFY_SOCKET", path.to_str().unwrap()),
            // A ping every second.
            ("WATCHDOG_USEC", "2000000"),
        ],
    );
    let mut seen = Vec::new();
    let mut buf = [0u8; 512];
    let n = socket.recv(&mut buf).unwrap();
    assert_eq!(&buf[..n], b"READY=1", "the first notification");
    until_notified(&socket, "WATCHDOG=1", &mut seen);
    until_notified(&socket, "WATCHDOG=1", &mut seen);

    serve.signal(libc::SIGHUP);
    until_notified(&socket, "RELOADING=1", &mut seen);
    until_notified(&socket, "READY=1", &mut seen);
    assert!(serve.running());

    serve.signal(libc::SIGTERM);
    until_notified(&socket, "STOPPING=1", &mut seen);
    assert!(serve.wait().success(), "{}", serve.log());
    assert!(serve.log().contains("stopped"), "{}", serve.log());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn logs_to_a_file_are_plain_text_or_json_lines() {
    let ip = "127.0.101.3";
    let dir = tempfile::tempdir().unwrap();
    let mut serve = Serve::start(dir.path(), ip, "", &[]);
    serve.signal(libc::SIGTERM);
    assert!(serve.wait().success());
    let log = serve.log();
    assert!(log.contains("device started"), "{log}");
    assert!(
        !log.contains('\u{1b}'),
        "ANSI escape codes in a file: {log:?}"
    );

    let dir = tempfile::tempdir().unwrap();
    let mut serve = Serve::start(dir.path(), ip, "log_format = \"json\"", &[]);
    assert!(serve.node.exists());
    serve.signal(libc::SIGTERM);
    assert!(serve.wait().success());
    let log = serve.log();
    let mut lines = 0;
    for line in log.lines().filter(|l| !l.trim().is_empty()) {
        let v: serde_json::Value =
            serde_json::from_str(line).unwrap_or_else(|e| panic!("not a JSON line ({e}): {line}"));
        assert!(v["level"].is_string(), "{line}");
        lines += 1;
    }
    assert!(lines >= 2, "{log}");
    assert!(log.contains("device started"), "{log}");
}

/// The CPUs a thread of `pid` may run on, by thread name
/// (`/proc/PID/task/*/{comm,status}`).
fn thread_cpus(pid: u32) -> Vec<(String, Vec<usize>)> {
    let mut threads = Vec::new();
    for task in std::fs::read_dir(format!("/proc/{pid}/task")).unwrap() {
        let dir = task.unwrap().path();
        let (Ok(comm), Ok(status)) = (
            std::fs::read_to_string(dir.join("comm")),
            std::fs::read_to_string(dir.join("status")),
        ) else {
            continue; // the thread ended meanwhile
        };
        let list = status
            .lines()
            .find_map(|l| l.strip_prefix("Cpus_allowed_list:"))
            .unwrap()
            .trim();
        let mut cpus = Vec::new();
        for part in list.split(',') {
            let (a, b) = part.split_once('-').unwrap_or((part, part));
            cpus.extend(a.parse::<usize>().unwrap()..=b.parse::<usize>().unwrap());
        }
        threads.push((comm.trim().to_string(), cpus));
    }
    threads
}

/// Starts `gtm serve` with `extra` in its node file and expects it to exit
/// with an error (bounded); its standard error.
fn refused(dir: &Path, ip: &str, extra: &str) -> String {
    let node = node_file(dir, ip, extra);
    let log = dir.join("refused.log");
    let mut child = Command::new(env!("CARGO_BIN_EXE_gtm"))
        .args(["serve", "--config"])
        .arg(&node)
        .env_remove("GTM_LOG")
        .env_remove("RUST_LOG")
        .env_remove("NOTIFY_SOCKET")
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("gtm serve started with {extra:?}");
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let text = std::fs::read_to_string(&log).unwrap();
    assert!(!status.success(), "{text}");
    text
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn dns_cpus_keep_the_dns_workers_apart_from_every_other_thread() {
    let ip = "127.0.101.4";
    let allowed = gtm_dns::cpus::allowed().unwrap();

    // Every CPU for DNS leaves none for the rest: refused at start, naming
    // the setting.
    let dir = tempfile::tempdir().unwrap();
    let all = allowed
        .iter()
        .map(|c| c.to_string())
        .collect::<Vec<_>>()
        .join(", ");
    let text = refused(dir.path(), ip, &format!("dns_cpus = [{all}]"));
    assert!(
        text.contains("node setting dns_cpus:") && text.contains("takes every CPU"),
        "{text}"
    );
    // A CPU the device may not run on: refused, naming its place.
    let dir = tempfile::tempdir().unwrap();
    let text = refused(dir.path(), ip, "dns_cpus = [4000]");
    assert!(
        text.contains("node setting dns_cpus[0]: CPU 4000 is not one this device may run on"),
        "{text}"
    );

    if allowed.len() < 2 {
        // One CPU cannot be split; what that does is tested above.
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let dns_cpu = allowed[0];
    let serve = Serve::start(dir.path(), ip, &format!("dns_cpus = [{dns_cpu}]"), &[]);
    dns_answers(ip).await;
    let rest: Vec<usize> = allowed[1..].to_vec();
    let threads = thread_cpus(serve.child.id());
    let dns: Vec<_> = threads
        .iter()
        .filter(|(name, _)| name.starts_with("dns-udp"))
        .collect();
    assert_eq!(dns.len(), 1, "{threads:?}");
    assert_eq!(dns[0].1, vec![dns_cpu], "{threads:?}");
    assert!(
        threads.iter().any(|(name, _)| name.starts_with("probe")),
        "{threads:?}"
    );
    for (name, cpus) in threads
        .iter()
        .filter(|(name, _)| !name.starts_with("dns-udp"))
    {
        assert_eq!(cpus, &rest, "thread {name}: {threads:?}");
    }
}
