//! Alerts (docs/operations.md, "Alerts") to real receivers on loopback: a
//! webhook receiver that checks the HMAC signature and is stopped and
//! started again; a real SMTP server (aiosmtpd) that insists on STARTTLS;
//! a real rsyslog over UDP and TCP; and a real pair, where each device
//! sends its own events and only the leader the cluster's.

use std::{
    net::SocketAddr,
    path::Path,
    process::{Command, Stdio},
    sync::Arc,
};

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::{HeaderMap, Request, Response, body::Incoming};
use hyper_util::rt::TokioIo;

use crate::{
    backends::*,
    cluster::{issue, pair, test_ca},
    support::*,
};

/// A webhook receiver: records each POST's headers and body, answers 200;
/// stopped (its listener closed) and started again on the same address.
pub(crate) struct Hook {
    pub(crate) addr: SocketAddr,
    seen: Arc<Log<(HeaderMap, Bytes)>>,
    task: Option<tokio::task::JoinHandle<()>>,
}

impl Hook {
    pub(crate) async fn start(at: &str) -> Self {
        let listener = tokio::net::TcpListener::bind(at).await.unwrap();
        let addr = listener.local_addr().unwrap();
        let seen = Arc::new(Log::default());
        let mut hook = Hook {
            addr,
            seen,
            task: None,
        };
        hook.serve(listener);
        hook
    }

    fn serve(&mut self, listener: tokio::net::TcpListener) {
        let seen = self.seen.clone();
        self.task = Some(tokio::spawn(async move {
            loop {
                let Ok((stream, _)) = listener.accept().await else {
                    return;
                };
                let seen = seen.clone();
                tokio::spawn(async move {
                    let service = hyper::service::service_fn(move |req: Request<Incoming>| {
                        let seen = seen.clone();
                        async move {
                            let headers = req.headers().clone();
                            let body = req.into_body().collect().await.map(|b| b.to_bytes());
                            seen.push((headers, body.unwrap_or_default()));
                            Ok::<_, std::convert::Infallible>(Response::new(Full::new(
                                Bytes::from_static(b"ok"),
                            )))
                        }
                    });
                    let _ = hyper::server::conn::http1::Builder::new()
                        .serve_connection(TokioIo::new(stream), service)
                        .await;
                });
            }
        }));
    }

    async fn stop(&mut self) {
        if let Some(task) = self.task.take() {
            task.abort();
            let _ = task.await;
        }
    }

    async fn restart(&mut self) {
        let listener = tokio::net::TcpListener::bind(self.addr).await.unwrap();
        self.serve(listener);
    }

    /// The messages received, as JSON, with their headers.
    pub(crate) fn messages(&self) -> Vec<(HeaderMap, serde_json::Value)> {
        self.seen
            .snapshot()
            .into_iter()
            .map(|(h, b)| (h, serde_json::from_slice(&b).expect("a JSON body")))
            .collect()
    }
}

/// A check on `ip` and a record answering it, and `notifier`.
fn zone(ip: &str, port: u16, notifier: &str) -> String {
    format!(
        r#"
[[check]]
name = "web"
type = "http"
port = {port}
interval = "100ms"
timeout = "90ms"
failures = 1
successes = 1

[[domain]]
name = "alert.test"
nameservers = ["ns1.alert.test"]

[[domain.record]]
name = "www"
type = "A"
addresses = [{{ ip = "{ip}", hc = "check:web" }}, {{ ip = "192.0.2.99" }}]

{notifier}
"#
    )
}

fn alert_list(d: &TestDevice) -> serde_json::Value {
    let out = run_gtm(d, &["alert", "list", "--json"]);
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    serde_json::from_str(&out.stdout).unwrap()
}

/// The messages of `hook` with `status` about `object`.
fn with(hook: &Hook, status: &str, object: &str) -> Vec<(HeaderMap, serde_json::Value)> {
    hook.messages()
        .into_iter()
        .filter(|(_, m)| m["status"] == status && m["object"] == object)
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_webhook_gets_signed_alerts_and_resolutions_and_its_queue_outlives_its_restart() {
    let mut web = HttpBackend::start_at("127.0.193.2:0".parse().unwrap()).await;
    let mut hook = Hook::start("127.0.193.9:0").await;
    let dir = tempfile::tempdir().unwrap();
    let secret = dir.path().join("hook.secret");
    std::fs::write(&secret, "s3cret-key\n").unwrap();
    let notifier = format!(
        "[[notifier]]\nname = \"hook\"\ntype = \"webhook\"\nurl = \"http://{}/gtm\"\nsecret_file = \"{}\"\nkinds = [\"check\"]\n",
        hook.addr,
        secret.display()
    );
    let d = TestDevice::start(&zone("127.0.193.2", web.addr.port(), &notifier)).await;
    until("the check is OK", || async {
        d.device
            .engine
            .checks()
            .iter()
            .any(|c| c.check == "web@127.0.193.2" && c.state.to_string() == "OK")
    })
    .await;

    // Down: one firing message, signed.
    web.stop().await;
    until("the firing message", || async {
        !with(&hook, "firing", "web@127.0.193.2").is_empty()
    })
    .await;
    let (headers, firing) = with(&hook, "firing", "web@127.0.193.2").remove(0);
    assert_eq!(firing["kind"], "check");
    assert_eq!(firing["severity"], "warning");
    assert_eq!(firing["device"], "test1");
    assert_eq!(firing["notifier"], "hook");
    assert!(
        firing["text"]
            .as_str()
            .unwrap()
            .starts_with("check web@127.0.193.2: OK → Error"),
        "{firing}"
    );
    assert_eq!(headers["x-gtm-delivery"], firing["id"].as_str().unwrap());
    // The signature, recomputed here with ring from the timestamp and the
    // body as received.
    let body = hook
        .seen
        .snapshot()
        .into_iter()
        .map(|(_, b)| b)
        .find(|b| serde_json::from_slice::<serde_json::Value>(b).unwrap()["id"] == firing["id"])
        .unwrap();
    let timestamp = headers["x-gtm-timestamp"].to_str().unwrap();
    let key = ring::hmac::Key::new(ring::hmac::HMAC_SHA256, b"s3cret-key");
    let mut signed = timestamp.as_bytes().to_vec();
    signed.push(b'.');
    signed.extend_from_slice(&body);
    let tag = ring::hmac::sign(&key, &signed);
    let hex: String = tag.as_ref().iter().map(|b| format!("{b:02x}")).collect();
    assert_eq!(
        headers["x-gtm-signature"].to_str().unwrap(),
        format!("sha256={hex}")
    );

    // Up: resolved, with the time it opened.
    web.restart().await;
    until("the resolution", || async {
        !with(&hook, "resolved", "web@127.0.193.2").is_empty()
    })
    .await;
    let (_, resolved) = with(&hook, "resolved", "web@127.0.193.2").remove(0);
    assert_eq!(resolved["since"], firing["since"]);
    assert!(
        resolved["text"].as_str().unwrap().contains("Error → OK"),
        "{resolved}"
    );

    // The receiver goes away: the next alert waits, retried, and the
    // device says so; it arrives once the receiver is back.
    hook.stop().await;
    web.stop().await;
    until("the notifier is failing", || async {
        let list = alert_list(&d);
        list[0]["state"] == "failing" && list[0]["queued"].as_u64() >= Some(1)
    })
    .await;
    let list = alert_list(&d);
    assert!(
        list[0]["last_error"]
            .as_str()
            .unwrap()
            .contains("127.0.193.9"),
        "{list}"
    );
    let metrics = metrics(&d).await;
    assert!(
        metrics.contains("gtm_alert_failing{device=\"test1\",notifier=\"hook\"} 1"),
        "{metrics}"
    );
    // Everywhere the device reports its health.
    let health = gtm_node::tls::http_client(None, None)
        .unwrap()
        .get(format!("http://{}/health", d.device.api_addr))
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(
        health.starts_with("degraded\n") && health.contains("alerts: notifier hook cannot deliver"),
        "{health}"
    );
    let status = run_gtm(&d, &["status"]).stdout;
    assert!(
        status
            .lines()
            .any(|l| l.starts_with("hook") && l.contains("failing")),
        "{status}"
    );
    assert!(
        status.contains("DEGRADED alerts: notifier hook cannot deliver"),
        "{status}"
    );
    hook.restart().await;
    until("the queued alert arrives", || async {
        with(&hook, "firing", "web@127.0.193.2").len() == 2
    })
    .await;
    until("the notifier is ok again", || async {
        let list = alert_list(&d);
        list[0]["state"] == "ok" && list[0]["queued"] == 0
    })
    .await;
    assert!(alert_list(&d)[0]["failures"].as_u64() >= Some(1));

    // A test message, sent now.
    let test = run_gtm(&d, &["alert", "test", "hook"]);
    assert_eq!(test.code, Some(0), "{}", test.stderr);
    assert!(
        test.stdout.contains("delivered from test1"),
        "{}",
        test.stdout
    );
    assert!(hook.messages().iter().any(|(_, m)| m["status"] == "test"));
    let unknown = run_gtm(&d, &["alert", "test", "nope"]);
    assert_ne!(unknown.code, Some(0));
    assert!(
        unknown.stderr.contains("no notifier named \"nope\""),
        "{}",
        unknown.stderr
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_delayed_alert_is_sent_only_if_it_stays_open() {
    let mut web = HttpBackend::start_at("127.0.193.12:0".parse().unwrap()).await;
    let hook = Hook::start("127.0.193.19:0").await;
    let notifier = format!(
        "[[notifier]]\nname = \"later\"\ntype = \"webhook\"\nurl = \"http://{}/gtm\"\nkinds = [\"check\"]\ndelay = \"1h\"\n\n[[notifier]]\nname = \"soon\"\ntype = \"webhook\"\nurl = \"http://{}/gtm\"\nkinds = [\"check\"]\ndelay = \"1s\"\nresolved = false\n",
        hook.addr, hook.addr
    );
    let d = TestDevice::start(&zone("127.0.193.12", web.addr.port(), &notifier)).await;
    let state = |name: &'static str| {
        let list = alert_list(&d);
        list.as_array()
            .unwrap()
            .iter()
            .find(|n| n["name"] == name)
            .cloned()
            .unwrap()
    };
    until("the check is OK", || async {
        d.device
            .engine
            .checks()
            .iter()
            .any(|c| c.check == "web@127.0.193.12" && c.state.to_string() == "OK")
    })
    .await;
    web.stop().await;
    until("both open the alert", || async {
        state("later")["open"] == 1 && state("soon")["open"] == 1
    })
    .await;
    // "soon" sends once its second has passed; "later" holds it.
    until("soon sent it", || async {
        hook.messages().iter().any(|(_, m)| m["notifier"] == "soon")
    })
    .await;
    assert_eq!(state("later")["delivered"], 0);
    // Resolved within the hour: "later" never sends anything, and "soon"
    // (resolved = false) sends no resolution.
    web.restart().await;
    until("both closed the alert", || async {
        state("later")["open"] == 0 && state("soon")["open"] == 0
    })
    .await;
    assert_eq!(state("later")["delivered"], 0);
    assert_eq!(state("later")["queued"], 0);
    assert!(
        hook.messages()
            .iter()
            .all(|(_, m)| m["notifier"] == "soon" && m["status"] == "firing"),
        "{:?}",
        hook.messages()
    );
}

/// The mails of a Maildir.
fn mails(maildir: &Path) -> Vec<String> {
    std::fs::read_dir(maildir.join("new"))
        .map(|entries| {
            entries
                .filter_map(|e| std::fs::read_to_string(e.ok()?.path()).ok())
                .collect()
        })
        .unwrap_or_default()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn email_alerts_reach_a_real_smtp_server_over_starttls() {
    let Some(python) = venv_python("aiosmtpd") else {
        return;
    };
    let mut web = HttpBackend::start_at("127.0.193.22:0".parse().unwrap()).await;
    let dir = tempfile::tempdir().unwrap();
    // A CA of the test's, and the SMTP server's certificate from it.
    let (ca, issuer) = test_ca("alerts test CA");
    std::fs::write(dir.path().join("ca.pem"), &ca).unwrap();
    issue(dir.path(), "127.0.193.25", &issuer);
    let maildir = dir.path().join("mail");
    let port = free_port_on("127.0.193.25");
    let log = std::fs::File::create(dir.path().join("smtp.log")).unwrap();
    // aiosmtpd refuses MAIL before STARTTLS when given a certificate.
    let _smtp = Daemon(
        Command::new(&python)
            .args(["-m", "aiosmtpd", "-n", "-l"])
            .arg(format!("127.0.193.25:{port}"))
            .arg("--tlscert")
            .arg(dir.path().join("tls.pem"))
            .arg("--tlskey")
            .arg(dir.path().join("tls.key"))
            .args(["-c", "aiosmtpd.handlers.Mailbox"])
            .arg(&maildir)
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .unwrap(),
    );
    until("the SMTP server listens", || async {
        tokio::net::TcpStream::connect(("127.0.193.25", port))
            .await
            .is_ok()
    })
    .await;
    let notifier = format!(
        "[[notifier]]\nname = \"mail\"\ntype = \"email\"\nsmtp = \"127.0.193.25:{port}\"\nfrom = \"gtm@alert.test\"\nto = [\"ops@alert.test\", \"oncall@alert.test\"]\nca_file = \"{}\"\nkinds = [\"check\"]\n",
        dir.path().join("ca.pem").display()
    );
    let d = TestDevice::start(&zone("127.0.193.22", web.addr.port(), &notifier)).await;
    let test = run_gtm(&d, &["alert", "test", "mail"]);
    assert_eq!(test.code, Some(0), "{} {}", test.stdout, test.stderr);
    until("the test mail", || async { mails(&maildir).len() == 1 }).await;
    assert!(
        mails(&maildir)[0].contains("Subject: [gtm TEST info] test of notifier mail from test1")
    );
    until("the check is OK", || async {
        d.device
            .engine
            .checks()
            .iter()
            .any(|c| c.check == "web@127.0.193.22" && c.state.to_string() == "OK")
    })
    .await;
    web.stop().await;
    until("the alert mail", || async {
        mails(&maildir)
            .iter()
            .any(|m| m.contains("Subject: [gtm FIRING warning] check web@127.0.193.22: OK"))
    })
    .await;
    let mail = mails(&maildir)
        .into_iter()
        .find(|m| m.contains("FIRING"))
        .unwrap();
    assert!(
        mail.contains("To: ops@alert.test, oncall@alert.test"),
        "{mail}"
    );
    assert!(mail.contains("object:     web@127.0.193.22"), "{mail}");

    // Without the CA the server's certificate is refused: not delivered,
    // and the reason says why.
    let untrusted = notifier.replace(
        &format!("ca_file = \"{}\"\n", dir.path().join("ca.pem").display()),
        "",
    );
    let file = dir.path().join("untrusted.toml");
    std::fs::write(&file, zone("127.0.193.22", web.addr.port(), &untrusted)).unwrap();
    let applied = run_gtm(&d, &["config", "apply", file.to_str().unwrap()]);
    assert_eq!(applied.code, Some(0), "{}", applied.stderr);
    let refused = run_gtm(&d, &["alert", "test", "mail"]);
    assert_eq!(refused.code, Some(1));
    assert!(
        refused.stdout.contains("not delivered from test1"),
        "{}",
        refused.stdout
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn syslog_alerts_reach_rsyslog_over_udp_and_tcp() {
    let Some(rsyslogd) = tool("rsyslogd", "rsyslog") else {
        return;
    };
    let mut web = HttpBackend::start_at("127.0.193.32:0".parse().unwrap()).await;
    let dir = tempfile::tempdir().unwrap();
    let (udp, tcp) = (free_port_on("127.0.193.35"), free_port_on("127.0.193.35"));
    let out = dir.path().join("received.log");
    let conf = dir.path().join("rsyslog.conf");
    std::fs::write(
        &conf,
        format!(
            r#"global(workDirectory="{dir}")
module(load="imudp")
module(load="imtcp")
input(type="imudp" address="127.0.193.35" port="{udp}")
input(type="imtcp" address="127.0.193.35" port="{tcp}")
template(name="fields" type="string" string="%hostname%|%app-name%|%msgid%|%pri-text%|%structured-data%|%msg%\n")
*.* action(type="omfile" file="{out}" template="fields")
"#,
            dir = dir.path().display(),
            out = out.display()
        ),
    )
    .unwrap();
    let log = std::fs::File::create(dir.path().join("rsyslogd.log")).unwrap();
    let _rsyslog = Daemon(
        Command::new(&rsyslogd)
            .arg("-n")
            .arg("-f")
            .arg(&conf)
            .arg("-i")
            .arg(dir.path().join("rsyslogd.pid"))
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .unwrap(),
    );
    until("rsyslog listens on TCP", || async {
        tokio::net::TcpStream::connect(("127.0.193.35", tcp))
            .await
            .is_ok()
    })
    .await;
    let notifier = format!(
        "[[notifier]]\nname = \"udp\"\ntype = \"syslog\"\naddress = \"127.0.193.35:{udp}\"\nfacility = \"local3\"\nkinds = [\"check\"]\n\n[[notifier]]\nname = \"tcp\"\ntype = \"syslog\"\naddress = \"127.0.193.35:{tcp}\"\ntransport = \"tcp\"\nkinds = [\"check\"]\n"
    );
    let d = TestDevice::start(&zone("127.0.193.32", web.addr.port(), &notifier)).await;
    until("the check is OK", || async {
        d.device
            .engine
            .checks()
            .iter()
            .any(|c| c.check == "web@127.0.193.32" && c.state.to_string() == "OK")
    })
    .await;
    web.stop().await;
    let lines = || {
        std::fs::read_to_string(&out)
            .unwrap_or_default()
            .lines()
            .filter(|l| l.contains("web@127.0.193.32"))
            .map(str::to_string)
            .collect::<Vec<_>>()
    };
    until("both alerts logged by rsyslog", || async {
        lines().len() >= 2
    })
    .await;
    let lines = lines();
    // rsyslog parsed each as RFC 5424: host, app, msgid, facility and
    // level, structured data, message.
    assert!(
        lines.iter().any(|l| l.starts_with("test1|gtm|ALERT|local3.warning|[gtm@32473 status=\"firing\" severity=\"warning\" kind=\"check\" object=\"web@127.0.193.32\"")),
        "{lines:?}"
    );
    assert!(
        lines
            .iter()
            .any(|l| l.starts_with("test1|gtm|ALERT|daemon.warning|[gtm@32473 status=\"firing\"")),
        "{lines:?}"
    );
    assert!(
        lines
            .iter()
            .all(|l| l.contains("|check web@127.0.193.32: OK → Error")),
        "{lines:?}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_device_of_a_pair_sends_its_own_events_and_the_leader_alone_the_clusters() {
    let hook = Hook::start("127.0.194.9:0").await;
    let (_root, a, b) = pair(194);
    let config = format!(
        r#"
[[check]]
name = "gone"
type = "tcp"
target = "127.0.194.50"
port = 9
interval = "200ms"
timeout = "100ms"
failures = 1

[[domain]]
name = "pair.test"
nameservers = ["ns1.pair.test"]

[[domain.record]]
name = "www"
type = "A"
addresses = [{{ ip = "127.0.194.20" }}, {{ ip = "127.0.194.21" }}]

[[notifier]]
name = "hook"
type = "webhook"
url = "http://{}/gtm"
kinds = ["check", "operator"]
severity = "info"
"#,
        hook.addr
    );
    a.apply_ok(&config);
    // The check fails on both devices: each sends its own.
    until("a check alert from each device", || async {
        let devices: std::collections::BTreeSet<String> = with(&hook, "firing", "gone")
            .iter()
            .map(|(_, m)| m["device"].as_str().unwrap().to_string())
            .collect();
        devices.len() == 2
    })
    .await;
    // A drain through the follower is logged on both devices; only the
    // leader (a) sends it.
    b.ok(&["record", "drain", "127.0.194.20"]);
    until("the drain's alert", || async {
        hook.messages().iter().any(|(_, m)| {
            m["kind"] == "operator" && m["text"].as_str().unwrap().contains("drained 127.0.194.20")
        })
    })
    .await;
    // Both devices logged it; give the follower's worker the same chance
    // the leader's had, then count.
    for p in [&a, &b] {
        until("both devices logged the drain", || async {
            p.ok(&["logs", "--kind", "operator"])
                .contains("drained 127.0.194.20")
        })
        .await;
    }
    let status: serde_json::Value =
        serde_json::from_str(&b.ok(&["alert", "list", "--json"])).unwrap();
    assert_eq!(status[0]["queued"], 0, "{status}");
    let drains: Vec<serde_json::Value> = hook
        .messages()
        .into_iter()
        .map(|(_, m)| m)
        .filter(|m| {
            m["kind"] == "operator" && m["text"].as_str().unwrap().contains("drained 127.0.194.20")
        })
        .collect();
    assert_eq!(drains.len(), 1, "{drains:?}");
    assert_eq!(drains[0]["device"], "gtm1");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn syslog_over_tls_is_octet_counted_and_verified_against_the_ca_file() {
    use rustls::pki_types::{CertificateDer, PrivateKeyDer, pem::PemObject};
    use tokio::io::AsyncReadExt;
    let dir = tempfile::tempdir().unwrap();
    let (ca, issuer) = test_ca("syslog test CA");
    std::fs::write(dir.path().join("ca.pem"), &ca).unwrap();
    let (cert, key) = issue(dir.path(), "127.0.193.45", &issuer);
    let config = rustls::ServerConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .unwrap()
    .with_no_client_auth()
    .with_single_cert(
        vec![CertificateDer::from_pem_slice(cert.as_bytes()).unwrap()],
        PrivateKeyDer::from_pem_slice(key.as_bytes()).unwrap(),
    )
    .unwrap();
    let acceptor = tokio_rustls::TlsAcceptor::from(Arc::new(config));
    let listener = tokio::net::TcpListener::bind("127.0.193.45:0")
        .await
        .unwrap();
    let port = listener.local_addr().unwrap().port();
    let received: Arc<Log<String>> = Arc::new(Log::default());
    let seen = received.clone();
    let server = tokio::spawn(async move {
        loop {
            let Ok((stream, _)) = listener.accept().await else {
                return;
            };
            let Ok(mut tls) = acceptor.accept(stream).await else {
                continue;
            };
            let mut all = Vec::new();
            let _ = tls.read_to_end(&mut all).await;
            seen.push(String::from_utf8_lossy(&all).into_owned());
        }
    });
    let notifier = format!(
        "[[notifier]]\nname = \"tls\"\ntype = \"syslog\"\naddress = \"127.0.193.45:{port}\"\ntransport = \"tls\"\nca_file = \"{}\"\nkinds = [\"geoip\"]\n",
        dir.path().join("ca.pem").display()
    );
    let d = TestDevice::start(&format!("{}\n{notifier}", zone("127.0.193.46", 9, ""))).await;
    let sent = run_gtm(&d, &["alert", "test", "tls"]);
    assert_eq!(sent.code, Some(0), "{} {}", sent.stdout, sent.stderr);
    let frame = received.wait_len(1).await.remove(0);
    // RFC 5425: the length in octets, a space, the message.
    let (length, message) = frame.split_once(' ').unwrap();
    assert_eq!(length.parse::<usize>().unwrap(), message.len(), "{frame}");
    assert!(message.starts_with("<29>1 "), "{message}");
    assert!(
        message.contains(" test1 gtm - ALERT [gtm@32473 status=\"test\""),
        "{message}"
    );
    assert!(
        message.ends_with("] test of notifier tls from test1"),
        "{message}"
    );
    server.abort();
}
