//! The web console in a real browser: Debian's headless `chromium` driven
//! over WebDriver (`chromedriver`) against real devices — logging in and
//! out, CSRF, the records table of a real pair following a backend that
//! goes down without a reload, the record preview and Resume.
//!
//! Each screen shown is photographed: with `GTM_WRITE_SCREENSHOTS=1` into
//! `docs/console/` (the screenshots the README links), else into a
//! temporary directory. Without chromium or chromedriver the tests skip
//! themselves, except under CI (`CI` set), where that is a failure.

use std::{
    os::unix::process::CommandExt,
    path::{Path, PathBuf},
    process::{Child, Command, Stdio},
    time::{Duration, Instant},
};

use fantoccini::{Client, ClientBuilder, Locator};
use hickory_server::proto::rr::RecordType;
use serde_json::json;

use crate::{
    backends::HttpBackend,
    cluster::Proc,
    support::{TestDevice, ZONE, answers, query, udp},
};

const CHROMIUM: &str = "/usr/bin/chromium";
const CHROMEDRIVER: &str = "/usr/bin/chromedriver";
/// Every wait on the page or a device is bounded by this.
const WAIT: Duration = Duration::from_secs(60);

/// Runs axe-core on the page and answers its serious and critical
/// findings, a line each: the rule, then the elements (at most five).
const AXE_RUN: &str = r#"
var done = arguments[arguments.length - 1];
axe.run(document, { resultTypes: ["violations"] }).then(function (r) {
  done(r.violations
    .filter(function (v) { return v.impact === "serious" || v.impact === "critical"; })
    .map(function (v) {
      return v.id + " (" + v.impact + "): " + v.help + " — " +
        v.nodes.slice(0, 5).map(function (n) { return n.target.join(" "); }).join("; ");
    }));
}).catch(function (e) { done(["axe-core failed: " + e]); });
"#;

/// axe-core's script: `GTM_AXE` names it, else the copy `.ci/run` installs
/// with npm into `target/npm`. Without it the screens are not checked,
/// unless `CI` is set: then that is a failure.
fn axe_source() -> Option<&'static str> {
    static SOURCE: std::sync::OnceLock<Option<String>> = std::sync::OnceLock::new();
    SOURCE
        .get_or_init(|| {
            let path = std::env::var_os("GTM_AXE").map(PathBuf::from).unwrap_or_else(|| {
                Path::new(env!("CARGO_MANIFEST_DIR"))
                    .join("target/npm/node_modules/axe-core/axe.min.js")
            });
            match std::fs::read_to_string(&path) {
                Ok(text) => Some(text),
                Err(e) if std::env::var_os("CI").is_some() => panic!(
                    "axe-core is needed under CI: {} ({e}); npm install --prefix target/npm axe-core",
                    path.display()
                ),
                Err(_) => {
                    eprintln!("axe-core not found at {}: screens not checked", path.display());
                    None
                }
            }
        })
        .as_deref()
}

/// Whether the browser tools are here; under CI their absence fails.
fn browser_tools() -> bool {
    let present = Path::new(CHROMIUM).exists() && Path::new(CHROMEDRIVER).exists();
    if !present {
        assert!(
            std::env::var_os("CI").is_none(),
            "{CHROMIUM} and {CHROMEDRIVER} are needed (apt-get install chromium chromium-driver; .ci/run does it)"
        );
        eprintln!("skipped: {CHROMIUM} or {CHROMEDRIVER} is missing");
    }
    present
}

/// A chromedriver process (and the chromium it starts, in its process
/// group), stopped by its process group id when dropped, a failed test
/// included.
struct Driver {
    child: Child,
    port: u16,
    _profile: tempfile::TempDir,
}

impl Drop for Driver {
    fn drop(&mut self) {
        let group = self.child.id() as i32;
        // SAFETY: kill(2) on the process group this test started.
        unsafe {
            libc::kill(-group, libc::SIGKILL);
        }
        let _ = self.child.wait();
    }
}

/// A browser session and the driver behind it.
struct Browser {
    client: Client,
    _driver: Driver,
    shots: PathBuf,
    _shots_dir: Option<tempfile::TempDir>,
}

impl Browser {
    async fn start() -> Self {
        let port = {
            let l = std::net::TcpListener::bind("127.0.0.1:0").expect("a free port");
            l.local_addr().expect("its address").port()
        };
        let profile = tempfile::tempdir().expect("a profile directory");
        let child = Command::new(CHROMEDRIVER)
            .arg(format!("--port={port}"))
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .process_group(0)
            .spawn()
            .expect("chromedriver starts");
        let driver = Driver {
            child,
            port,
            _profile: profile,
        };
        let deadline = Instant::now() + WAIT;
        while std::net::TcpStream::connect(("127.0.0.1", driver.port)).is_err() {
            assert!(Instant::now() < deadline, "chromedriver did not listen");
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let mut caps = serde_json::Map::new();
        caps.insert(
            "goog:chromeOptions".into(),
            json!({
                "binary": CHROMIUM,
                "args": [
                    "--headless",
                    "--no-sandbox",
                    "--disable-gpu",
                    "--disable-quic",
                    "--no-first-run",
                    "--disable-background-networking",
                    "--disable-component-update",
                    "--disable-sync",
                    "--disable-dev-shm-usage",
                    "--disable-extensions",
                    "--no-zygote",
                    "--single-process",
                    "--window-size=1280,860",
                    format!("--user-data-dir={}", driver._profile.path().display()),
                ],
            }),
        );
        let connector = hyper_util::client::legacy::connect::HttpConnector::new();
        let client = ClientBuilder::new(connector)
            .capabilities(caps)
            .connect(&format!("http://127.0.0.1:{}", driver.port))
            .await
            .expect("a WebDriver session");
        let (shots, shots_dir) = if std::env::var_os("GTM_WRITE_SCREENSHOTS").is_some() {
            let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("docs/console");
            std::fs::create_dir_all(&dir).expect("docs/console");
            (dir, None)
        } else {
            let dir = tempfile::tempdir().expect("a screenshot directory");
            (dir.path().to_path_buf(), Some(dir))
        };
        Browser {
            client,
            _driver: driver,
            shots,
            _shots_dir: shots_dir,
        }
    }

    /// Opens `url`; a navigation the browser fails once (seen once under
    /// a full suite on two cores) is tried again, and a second failure
    /// fails the test.
    async fn goto(&self, url: &str) {
        if let Err(e) = self.client.goto(url).await {
            eprintln!("navigation to {url} failed, trying again: {e}");
            self.client.goto(url).await.expect("the page loads");
        }
    }

    /// The path and query of the page shown.
    async fn path(&self) -> String {
        let url = self.client.current_url().await.expect("a URL");
        match url.query() {
            Some(q) => format!("{}?{q}", url.path()),
            None => url.path().to_string(),
        }
    }

    /// The text of the first element `css` selects, if there is one.
    async fn text(&self, css: &str) -> Option<String> {
        let element = self.client.find(Locator::Css(css)).await.ok()?;
        element.text().await.ok()
    }

    /// Waits (bounded) until the element `css` selects shows text that
    /// `want` accepts, and returns it.
    async fn until_text(&self, css: &str, what: &str, want: impl Fn(&str) -> bool) -> String {
        let deadline = Instant::now() + WAIT;
        loop {
            let got = self.text(css).await;
            if let Some(t) = got.as_deref().filter(|t| want(t)) {
                return t.to_string();
            }
            assert!(Instant::now() < deadline, "{what}: {css} shows {got:?}");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    /// Like [`Browser::until_text`], for an attribute.
    async fn until_attr(&self, css: &str, name: &str, what: &str, want: impl Fn(&str) -> bool) {
        let deadline = Instant::now() + WAIT;
        loop {
            let got = match self.client.find(Locator::Css(css)).await {
                Ok(element) => element.attr(name).await.ok().flatten(),
                Err(_) => None,
            };
            if got.as_deref().is_some_and(&want) {
                return;
            }
            assert!(
                Instant::now() < deadline,
                "{what}: {css} has {name}={got:?}"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    async fn until_path(&self, what: &str, want: impl Fn(&str) -> bool) -> String {
        let deadline = Instant::now() + WAIT;
        loop {
            let path = self.path().await;
            if want(&path) {
                return path;
            }
            assert!(Instant::now() < deadline, "{what}: at {path}");
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }

    async fn fill(&self, id: &str, text: &str) {
        let field = self.client.find(Locator::Id(id)).await.expect(id);
        field.clear().await.expect("cleared");
        field.send_keys(text).await.expect("typed");
    }

    /// Clicks the element `css` selects. A live page may draw it again
    /// between finding and clicking it (a stale element): it is found
    /// again, within the bound.
    async fn click(&self, css: &str) {
        let deadline = Instant::now() + WAIT;
        loop {
            let element = self.client.find(Locator::Css(css)).await.expect(css);
            match element.click().await {
                Ok(_) => return,
                Err(e) if e.is_stale_element_reference() && Instant::now() < deadline => {
                    tokio::time::sleep(Duration::from_millis(100)).await;
                }
                Err(e) => panic!("clicking {css}: {e:?}"),
            }
        }
    }

    /// Logs in through the form with `secret` as the password.
    async fn login(&self, base: &str, secret: &str) {
        self.goto(&format!("{base}/ui/")).await;
        self.until_path("sent to the login page", |p| p.starts_with("/ui/login"))
            .await;
        self.fill("secret", secret).await;
        self.click("#login").await;
        self.until_path("logged in", |p| {
            p.starts_with("/ui/") && !p.starts_with("/ui/login")
        })
        .await;
    }

    /// Writes a screenshot of the screen shown as `<name>.png`, and
    /// checks its accessibility: axe-core finds nothing serious or
    /// critical on it.
    async fn shot(&self, name: &str) {
        let png = self.client.screenshot().await.expect("a screenshot");
        std::fs::write(self.shots.join(format!("{name}.png")), png).expect("screenshot written");
        self.axe(name).await;
    }

    /// axe-core's serious and critical findings on the screen shown: none.
    async fn axe(&self, name: &str) {
        let Some(source) = axe_source() else {
            return;
        };
        self.client
            .execute(&format!("{source}\nreturn typeof axe;"), vec![])
            .await
            .expect("axe-core loads");
        let found = self
            .client
            .execute_async(AXE_RUN, vec![])
            .await
            .expect("axe-core runs");
        let found: Vec<String> = serde_json::from_value(found).expect("axe's findings");
        assert!(
            found.is_empty(),
            "{name}: axe-core finds {} serious or critical problem(s):\n{}",
            found.len(),
            found.join("\n")
        );
    }

    /// The session cookie and the page's CSRF token.
    async fn session(&self) -> (String, String) {
        let cookie = self
            .client
            .get_named_cookie("gtm_session")
            .await
            .expect("a session cookie");
        let csrf = self
            .client
            .find(Locator::Css("input[name=csrf]"))
            .await
            .expect("a CSRF field")
            .attr("value")
            .await
            .expect("its value")
            .expect("a token");
        (format!("gtm_session={}", cookie.value()), csrf)
    }

    async fn close(self) {
        let _ = self.client.clone().close().await;
    }
}

/// An HTTP client that does not follow redirects, to see them.
fn http() -> reqwest::Client {
    // Plain HTTP on loopback; reqwest still wants a TLS provider named.
    let tls = rustls::ClientConfig::builder_with_provider(std::sync::Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .expect("TLS versions")
    .with_root_certificates(rustls::RootCertStore::empty())
    .with_no_client_auth();
    reqwest::Client::builder()
        .tls_backend_preconfigured(tls)
        .redirect(reqwest::redirect::Policy::none())
        .build()
        .expect("an HTTP client")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn console_login_csrf_and_logout_in_a_browser() {
    if !browser_tools() {
        return;
    }
    let d = TestDevice::start(ZONE).await;
    let base = format!("http://{}", d.device.api_addr);
    let b = Browser::start().await;

    // The device's root sends the browser to the console's login page.
    b.goto(&format!("{base}/")).await;
    b.until_path("sent to log in", |p| p.starts_with("/ui/login"))
        .await;
    b.shot("login").await;

    // A wrong password shows the error; nothing is logged in.
    b.fill("secret", "not-the-token").await;
    b.click("#login").await;
    let error = b
        .until_text("#login-error", "the login error", |t| !t.is_empty())
        .await;
    assert!(error.contains("wrong user name or password"), "{error}");
    assert!(b.path().await.starts_with("/ui/login"));
    b.shot("login-error").await;

    // The device's token logs in; the header names the principal.
    b.fill("secret", &d.device.token).await;
    b.click("#login").await;
    b.until_path("logged in", |p| p == "/ui/").await;
    let who = b
        .until_text("#principal", "the principal", |t| !t.is_empty())
        .await;
    assert_eq!(who, "admin (admin)");
    // The dashboard: this device's column counts the records.
    b.until_text("#by-status caption", "the dashboard", |t| {
        t.contains("records")
    })
    .await;
    b.goto(&format!("{base}/ui/records")).await;
    b.until_text(
        "tr[data-record=\"www.example.test/A\"] td[data-device=\"test1\"]",
        "www on this device",
        |t| !t.is_empty(),
    )
    .await;

    // CSRF: the session's cookie alone does not change anything, on a
    // console route or an API route; with the page's token it does.
    let (cookie, csrf) = b.session().await;
    let web = http();
    let refused = web
        .post(format!("{base}/ui/logout"))
        .header("cookie", &cookie)
        .header("content-type", "application/x-www-form-urlencoded")
        .body("")
        .send()
        .await
        .expect("an answer");
    assert_eq!(refused.status(), 403, "console POST without the token");
    let validate = |token: Option<&str>| {
        let mut r = web
            .post(format!("{base}/api/v1/config/validate"))
            .header("cookie", &cookie)
            .body(ZONE);
        if let Some(t) = token {
            r = r.header("x-csrf-token", t);
        }
        r.send()
    };
    let refused = validate(None).await.expect("an answer");
    assert_eq!(refused.status(), 403, "API POST without the token");
    let body = refused.text().await.unwrap_or_default();
    assert!(body.contains("CSRF"), "{body}");
    let wrong = validate(Some("0000")).await.expect("an answer");
    assert_eq!(wrong.status(), 403, "API POST with a wrong token");
    let accepted = validate(Some(&csrf)).await.expect("an answer");
    assert_eq!(accepted.status(), 200, "API POST with the session's token");
    // A console form: Resume without the token is refused, with it done.
    let resume = |body: String| {
        web.post(format!("{base}/ui/records/dr.example.test/A/resume"))
            .header("cookie", &cookie)
            .header("content-type", "application/x-www-form-urlencoded")
            .body(body)
            .send()
    };
    let refused = resume("device=test1".into()).await.expect("an answer");
    assert_eq!(refused.status(), 403, "console form without the token");
    let done = resume(format!("csrf={csrf}&device=test1"))
        .await
        .expect("an answer");
    // Past the CSRF check, the resume itself is refused: nothing is held.
    assert_eq!(done.status(), 409, "console form with the token");
    let text = done.text().await.expect("a body");
    assert!(text.contains("not held by manual failback"), "{text}");
    // So its preview offers no Resume: there is nothing to resume.
    let preview = web
        .get(format!("{base}/ui/records/dr.example.test/A"))
        .header("cookie", &cookie)
        .send()
        .await
        .expect("an answer");
    assert_eq!(preview.status(), 200);
    let html = preview.text().await.expect("a body");
    assert!(html.contains("disaster-recovery"), "{html}");
    assert!(!html.contains("id=\"resume\""), "{html}");

    // The live stream: a page that connects with the state it was made
    // from (`data-since`) is not told to fetch again at once; its first
    // announcement is the change that follows (the stream's second). One
    // made from an older state is told at once (the first).
    let first_change = |since: String| {
        let (web, base, cookie) = (web.clone(), base.clone(), cookie.clone());
        async move {
            let stream = web
                .get(format!("{base}/ui/stream?since={since}"))
                .header("cookie", &cookie)
                .send()
                .await
                .expect("the stream");
            assert_eq!(stream.status(), 200);
            stream
        }
    };
    let read_change = |mut stream: reqwest::Response| async move {
        let mut text = String::new();
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            if let Some(data) = text
                .split("event: change\ndata: ")
                .nth(1)
                .and_then(|rest| rest.split('\n').next())
            {
                return data.to_string();
            }
            assert!(Instant::now() < deadline, "no change announced: {text:?}");
            let chunk = tokio::time::timeout(Duration::from_secs(20), stream.chunk())
                .await
                .expect("the stream went quiet")
                .expect("the stream")
                .expect("the stream ended");
            text.push_str(&String::from_utf8_lossy(&chunk));
        }
    };
    // Another event between the page and the connection (a probe's
    // transition) makes the page old: it is made again, a bounded number
    // of times.
    let mut announced = Vec::new();
    for _ in 0..5 {
        let page = web
            .get(format!("{base}/ui/records"))
            .header("cookie", &cookie)
            .send()
            .await
            .expect("an answer")
            .text()
            .await
            .expect("a body");
        let since = page
            .split("data-since=\"")
            .nth(1)
            .and_then(|rest| rest.split('"').next())
            .unwrap_or_else(|| panic!("no data-since: {page}"))
            .to_string();
        let current = first_change(since).await;
        d.device.engine.record_event(
            gtm_engine::EventKind::Operator,
            gtm_engine::Severity::Info,
            "test".into(),
            "a change after the page was made".into(),
        );
        announced.push(read_change(current).await);
        if announced.last().is_some_and(|n| n == "2") {
            break;
        }
    }
    assert_eq!(
        announced.last().map(String::as_str),
        Some("2"),
        "a page made from the current state: {announced:?}"
    );
    let stale = first_change("0.0".into()).await;
    assert_eq!(
        read_change(stale).await,
        "1",
        "a page made from an older state"
    );
    // Still logged in: the refused logout did not end the session.
    let page = web
        .get(format!("{base}/ui/"))
        .header("cookie", &cookie)
        .send()
        .await
        .expect("an answer");
    assert_eq!(page.status(), 200);
    for (name, want) in [
        ("content-security-policy", "script-src 'self'"),
        ("x-content-type-options", "nosniff"),
        ("referrer-policy", "same-origin"),
        ("cache-control", "no-store"),
    ] {
        let got = page
            .headers()
            .get(name)
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default();
        assert!(got.contains(want), "{name}: {got}");
    }

    // Logout ends the session: the next page load goes to the login page,
    // and the old cookie opens nothing.
    b.click(".who button").await;
    b.until_path("logged out", |p| p.starts_with("/ui/login"))
        .await;
    b.goto(&format!("{base}/ui/records")).await;
    let at = b
        .until_path("sent to log in again", |p| p.starts_with("/ui/login"))
        .await;
    assert_eq!(at, "/ui/login?next=%2Fui%2Frecords");
    let old = web
        .get(format!("{base}/ui/"))
        .header("cookie", &cookie)
        .send()
        .await
        .expect("an answer");
    assert!(old.status().is_redirection(), "{}", old.status());
    let api = web
        .get(format!("{base}/api/v1/status"))
        .header("cookie", &cookie)
        .send()
        .await
        .expect("an answer");
    assert_eq!(api.status(), 401);
    b.close().await;
}

/// Without a browser: every console route but the login page and the
/// assets needs a session (a page is sent to the login page, with the way
/// back), and every console response carries the security headers.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn console_routes_need_a_session_and_carry_the_security_headers() {
    let d = TestDevice::start(ZONE).await;
    let base = format!("http://{}", d.device.api_addr);
    let web = http();
    let guarded = [
        ("GET", "/ui/", "/ui/login?next=%2Fui%2F"),
        (
            "GET",
            "/ui/records?status=ok",
            "/ui/login?next=%2Fui%2Frecords%3Fstatus%3Dok",
        ),
        (
            "GET",
            "/ui/records/table",
            "/ui/login?next=%2Fui%2Frecords%2Ftable",
        ),
        ("GET", "/ui/stream", "/ui/login?next=%2Fui%2Fstream"),
        (
            "GET",
            "/ui/records/www.example.test/A",
            "/ui/login?next=%2Fui%2Frecords%2Fwww.example.test%2FA",
        ),
        ("POST", "/ui/logout", "/ui/login"),
        ("POST", "/ui/records/dr.example.test/A/resume", "/ui/login"),
        ("GET", "/", "/ui/"),
        ("GET", "/ui", "/ui/"),
    ];
    for (method, path, to) in guarded {
        let method: reqwest::Method = method.parse().unwrap();
        let r = web
            .request(method.clone(), format!("{base}{path}"))
            .header("cookie", "gtm_session=not-a-session")
            .send()
            .await
            .expect("an answer");
        assert_eq!(r.status(), 303, "{method} {path}");
        let location = r.headers().get("location").and_then(|v| v.to_str().ok());
        assert_eq!(location, Some(to), "{method} {path}");
        let csp = r
            .headers()
            .get("content-security-policy")
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default();
        assert!(csp.contains("default-src 'self'"), "{method} {path}: {csp}");
    }
    // The API does not redirect: it answers 401 to a session that ended.
    let api = web
        .get(format!("{base}/api/v1/status"))
        .header("cookie", "gtm_session=not-a-session")
        .send()
        .await
        .expect("an answer");
    assert_eq!(api.status(), 401);

    let login = web
        .get(format!("{base}/ui/login"))
        .send()
        .await
        .expect("an answer");
    assert_eq!(login.status(), 200);
    let h = login.headers().clone();
    let header = |name: &str| {
        h.get(name)
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_string()
    };
    assert_eq!(
        header("content-security-policy"),
        "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'; object-src 'none'"
    );
    assert_eq!(header("x-content-type-options"), "nosniff");
    assert_eq!(header("referrer-policy"), "same-origin");
    assert_eq!(header("cache-control"), "no-store");
    let html = login.text().await.expect("the page");
    assert!(
        !html.contains("<script>") && !html.contains("style="),
        "no inline script or style"
    );
    for asset in ["css", "js", "svg"] {
        let href = html
            .split('"')
            .find(|s| s.starts_with("/ui/assets/") && s.ends_with(asset))
            .unwrap_or_else(|| panic!("the page links its {asset}"));
        let r = web
            .get(format!("{base}{href}"))
            .send()
            .await
            .expect("an answer");
        assert_eq!(r.status(), 200, "{href}");
        let kind = r
            .headers()
            .get("content-type")
            .and_then(|v| v.to_str().ok())
            .unwrap_or_default()
            .to_string();
        let want = match asset {
            "css" => "text/css",
            "js" => "text/javascript",
            _ => "image/svg+xml",
        };
        assert!(kind.starts_with(want), "{kind}");
    }

    // A login posted from another site's page is refused before the
    // credentials are looked at.
    let forged = web
        .post(format!("{base}/ui/login"))
        .header("origin", "http://evil.test")
        .header("content-type", "application/x-www-form-urlencoded")
        .body(format!("secret={}", d.device.token))
        .send()
        .await
        .expect("an answer");
    assert_eq!(forged.status(), 403);
    assert!(forged.headers().get("set-cookie").is_none());
    // The same form from the device's own page logs in, and goes back.
    let ok = web
        .post(format!("{base}/ui/login"))
        .header("origin", base.as_str())
        .header("content-type", "application/x-www-form-urlencoded")
        .body(format!("secret={}&next=%2Fui%2Frecords", d.device.token))
        .send()
        .await
        .expect("an answer");
    assert_eq!(ok.status(), 303);
    assert_eq!(
        ok.headers().get("location").and_then(|v| v.to_str().ok()),
        Some("/ui/records")
    );
    let cookie = ok
        .headers()
        .get("set-cookie")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default();
    assert!(
        cookie.contains("HttpOnly") && cookie.contains("SameSite=Strict"),
        "{cookie}"
    );
    assert!(!cookie.contains("Secure"), "no TLS here: {cookie}");
    let session = cookie.split(';').next().unwrap_or_default().to_string();
    let get = |path: &str| {
        web.get(format!("{base}{path}"))
            .header("cookie", session.as_str())
            .send()
    };

    // The table alone, as the page's script fetches it.
    let table = get("/ui/records/table?status=").await.expect("an answer");
    assert_eq!(table.status(), 200);
    let html = table.text().await.expect("the fragment");
    assert!(html.starts_with("<div id=\"records\""), "{html}");
    assert!(html.contains("www.example.test/A"), "{html}");

    // The stream announces a change at once (a page that connects may
    // have missed some), as an SSE event.
    let mut stream = get("/ui/stream").await.expect("an answer");
    assert_eq!(stream.status(), 200);
    let kind = stream
        .headers()
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_string();
    assert!(kind.starts_with("text/event-stream"), "{kind}");
    let first = tokio::time::timeout(WAIT, stream.chunk())
        .await
        .expect("an event within the wait")
        .expect("a chunk")
        .expect("not the end");
    let first = String::from_utf8_lossy(&first);
    assert!(first.contains("event: change"), "{first}");
    drop(stream);

    // A preview of what does not exist is a page that says so.
    let missing = get("/ui/records/nope.example.test/A")
        .await
        .expect("an answer");
    assert_eq!(missing.status(), 404);
    let page = missing.text().await.expect("the page");
    assert!(
        page.contains("no steered record nope.example.test/A"),
        "{page}"
    );
    let ghost = get("/ui/records/www.example.test/A?device=ghost")
        .await
        .expect("an answer");
    assert_eq!(ghost.status(), 404);
    let page = ghost.text().await.expect("the page");
    assert!(page.contains("no device named &quot;ghost&quot;"), "{page}");

    // Wrong passwords re-render the form (401) until the address is
    // refused for a while (429), the right token included.
    let attempt = |secret: String| {
        web.post(format!("{base}/ui/login"))
            .header("content-type", "application/x-www-form-urlencoded")
            .body(format!("name=admin&secret={secret}"))
            .send()
    };
    for _ in 0..gtm_node::access::sessions::MAX_FAILURES {
        let r = attempt("wrong".into()).await.expect("an answer");
        assert_eq!(r.status(), 401);
        let page = r.text().await.expect("the page");
        assert!(page.contains("wrong user name or password"), "{page}");
        assert!(page.contains("value=\"admin\""), "the name is kept");
    }
    let r = attempt(d.device.token.clone()).await.expect("an answer");
    assert_eq!(r.status(), 429);
    assert!(r.headers().get("set-cookie").is_none());
    let page = r.text().await.expect("the page");
    assert!(page.contains("too many failed logins"), "{page}");
}

/// The pair's configuration: `www` on two real HTTP backends, and a DR
/// record with manual failback whose condition is a manual check.
fn pair_config(port: u16) -> String {
    format!(
        r#"
[[datacenter]]
name = "dc1"

[[datacenter]]
name = "dc2"

[[check]]
name = "web"
type = "http"
port = {port}
interval = "1s"
timeout = "800ms"
failures = 1
successes = 1

[[check]]
name = "maint"
type = "manual"

[[scenario]]
name = "dc1-maint"
condition = "maint"

[[domain]]
name = "console.test"
main_dc = "dc1"
dr_dc = "dc2"
nameservers = ["ns1.console.test"]

[[domain.record]]
name = "www"
type = "A"
addresses = [
  {{ ip = "127.0.82.10", dc = "dc1", hc = "check:web" }},
  {{ ip = "127.0.82.11", dc = "dc1", hc = "check:web" }},
]

[[domain.record]]
name = "dr"
type = "A"
mode = "disaster-recovery"
dr_condition = "scenario:dc1-maint"
dr_on_no_healthy = false
failback = "manual"
addresses = [
  {{ ip = "192.0.2.20", dc = "dc1" }},
  {{ ip = "198.51.100.20", dc = "dc2" }},
]
"#
    )
}

/// Waits (bounded) until `p` answers `name` with `want`.
async fn until_answers(p: &Proc, name: &str, want: &[&str]) {
    let deadline = Instant::now() + WAIT;
    loop {
        let mut got = answers(&udp(p.dns(), &query(name, RecordType::A)).await);
        got.sort();
        if got == want {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "{} never answered {name} with {want:?}: {got:?}",
            p.name
        );
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

fn cell(record: &str, device: &str) -> String {
    format!("tr[data-record=\"{record}\"] td[data-device=\"{device}\"]")
}

/// Test now in the console of dc1's device, of a check that runs in dc2:
/// dc2's device probes, and the result names it. Addresses 127.0.84.x.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn console_test_now_of_a_check_that_runs_elsewhere_is_probed_there() {
    if !browser_tools() {
        return;
    }
    let backend = "127.0.84.9";
    let mut web = HttpBackend::start_at(format!("{backend}:0").parse().unwrap()).await;
    let config = format!(
        r#"
[[datacenter]]
name = "dc1"

[[datacenter]]
name = "dc2"

[[check]]
name = "web-dc2"
type = "http"
port = {}
interval = "1h"
timeout = "1s"
run_on = "dc2"

[[domain]]
name = "elsewhere.test"
nameservers = ["ns1.elsewhere.test"]

[[domain.record]]
name = "www"
type = "A"
addresses = [{{ ip = "192.0.2.1" }}]
"#,
        web.addr.port()
    );
    let root = tempfile::tempdir().unwrap();
    let (a, _b) = tokio::task::block_in_place(|| {
        let a = Proc::start(root.path(), "gtm1", "dc1", "127.0.84.1");
        let b = Proc::start(root.path(), "gtm2", "dc2", "127.0.84.2");
        a.ok(&["cluster", "init"]);
        b.join(&a);
        a.apply_ok(&config);
        (a, b)
    });
    let token = std::fs::read_to_string(a.dir.join("api-token")).expect("the token");
    let base = a.api();
    let br = Browser::start().await;
    br.login(&base, token.trim()).await;
    br.goto(&format!("{base}/ui/checks")).await;
    br.fill("addr-web-dc2", backend).await;
    br.click("button[data-check=\"web-dc2\"]").await;
    let tested = br
        .until_text("#tested", "the Test now result", |t| !t.is_empty())
        .await;
    assert!(tested.starts_with("web-dc2"), "{tested}");
    assert!(tested.contains(": OK"), "{tested}");
    assert!(
        tested.contains(&format!("probed {backend} from gtm2 (dc2)")),
        "probed from the wrong device: {tested}"
    );
    // With the backend gone, the same button says Error, from gtm2 still.
    web.stop().await;
    br.fill("addr-web-dc2", backend).await;
    br.click("button[data-check=\"web-dc2\"]").await;
    let failed = br
        .until_text("#tested", "the failed Test now", |t| t.contains(": Error"))
        .await;
    assert!(
        failed.contains(&format!("probed {backend} from gtm2 (dc2)")),
        "{failed}"
    );
    br.axe("checks, Test now forwarded").await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn console_records_of_a_pair_follow_a_backend_live_and_resume_a_failback() {
    if !browser_tools() {
        return;
    }
    let mut web1 = HttpBackend::start_at("127.0.82.10:0".parse().unwrap()).await;
    let port = web1.addr.port();
    let _web2 = HttpBackend::start_at(format!("127.0.82.11:{port}").parse().unwrap()).await;
    let root = tempfile::tempdir().unwrap();
    let extra = "probe_networks = [\"127.0.0.0/8\"]";
    let (a, b) = tokio::task::block_in_place(|| {
        let a = Proc::start_with(root.path(), "gtm1", "dc1", "127.0.81.1", extra);
        let b = Proc::start_with(root.path(), "gtm2", "dc1", "127.0.81.2", extra);
        a.ok(&["cluster", "init"]);
        b.join(&a);
        a.apply_ok(&pair_config(port));
        (a, b)
    });
    let both = ["127.0.82.10", "127.0.82.11"];
    until_answers(&a, "www.console.test.", &both).await;
    until_answers(&b, "www.console.test.", &both).await;

    let token = std::fs::read_to_string(a.dir.join("api-token")).expect("the token");
    let base = a.api();
    let br = Browser::start().await;
    br.login(&base, token.trim()).await;
    br.goto(&format!("{base}/ui/records")).await;
    let www = "www.console.test/A";

    // A column per device, both OK (gtm2's from its report).
    for device in ["gtm1", "gtm2"] {
        br.until_text(&cell(www, device), "www OK", |t| t == "OK")
            .await;
    }
    // The table may be swapped in between two reads: wait, never read once.
    br.until_text("table.records thead", "a column per device", |t| {
        t.contains("gtm1") && t.contains("this device") && t.contains("gtm2")
    })
    .await;
    br.until_text("#live", "the stream connects", |t| t.ends_with("on"))
        .await;
    br.shot("records").await;

    // A backend goes down: both columns turn Partially OK (amber) on the
    // page as it is, without a reload.
    br.client
        .execute("window.gtmNotReloaded = true;", vec![])
        .await
        .expect("a marker set");
    web1.stop().await;
    for device in ["gtm1", "gtm2"] {
        br.until_text(&cell(www, device), "www Partially OK", |t| {
            t.starts_with("Partially OK")
        })
        .await;
        br.until_attr(&cell(www, device), "class", "the cell amber", |c| {
            c.contains("st-partial")
        })
        .await;
    }
    // The Summary names the address down on each device, with the reason.
    let summary = br
        .until_text(
            &format!("tr[data-record=\"{www}\"] td.summary"),
            "the reasons",
            // A loaded machine may time a probe of the healthy address
            // out for a moment: wait for the settled reasons.
            |t| {
                t.contains("1 address down on gtm1: 127.0.82.10 ")
                    && t.contains("1 address down on gtm2: 127.0.82.10 ")
            },
        )
        .await;
    assert!(
        summary.contains("1 address down on gtm1: 127.0.82.10 "),
        "{summary}"
    );
    assert!(
        summary.contains("1 address down on gtm2: 127.0.82.10 "),
        "{summary}"
    );
    let kept = br
        .client
        .execute("return window.gtmNotReloaded === true;", vec![])
        .await
        .expect("the marker read");
    assert_eq!(kept, json!(true), "the page was reloaded");
    br.shot("records-partial").await;

    // The status filter: no record is in DR yet.
    br.goto(&format!("{base}/ui/records?status=dr")).await;
    br.until_text("#records .count", "no DR record", |t| t == "0 records")
        .await;

    // The preview of www on gtm2, fetched through gtm1.
    br.goto(&format!("{base}/ui/records?domain=console.test&name=www"))
        .await;
    br.until_text("#records .count", "www alone", |t| t == "1 record")
        .await;
    br.until_text(&cell(www, "gtm2"), "www listed", |t| {
        t.starts_with("Partially OK")
    })
    .await;
    br.click(&format!("{} a", cell(www, "gtm2"))).await;
    br.until_path("the preview of gtm2", |p| p.contains("device=gtm2"))
        .await;
    let title = br
        .until_text("h1", "the preview", |t| t.contains(www))
        .await;
    assert!(title.contains("on gtm2"), "{title}");
    let active = br
        .until_text("#active", "the active records", |t| !t.is_empty())
        .await;
    assert_eq!(active.trim(), "127.0.82.11");
    br.until_text("#addresses", "the addresses", |t| {
        t.contains("check:web") && t.contains("Unhealthy")
    })
    .await;
    br.shot("preview").await;

    // DR by a manual check, then its condition clears: held by manual
    // failback, shown in the Summary and the preview, until Resume.
    tokio::task::block_in_place(|| {
        a.ok(&["check", "set", "maint", "ok"]);
    });
    until_answers(&b, "dr.console.test.", &["198.51.100.20"]).await;
    tokio::task::block_in_place(|| {
        a.ok(&["check", "set", "maint", "error"]);
    });
    let dr = "dr.console.test/A";
    br.goto(&format!("{base}/ui/records?status=dr")).await;
    br.until_text(&cell(dr, "gtm1"), "dr held", |t| t == "DR")
        .await;
    br.until_text(&cell(dr, "gtm2"), "dr held on gtm2", |t| t == "DR")
        .await;
    let summary = br
        .until_text(
            &format!("tr[data-record=\"{dr}\"] td.summary"),
            "the summary",
            |t| t.contains("held by manual failback"),
        )
        .await;
    assert!(summary.contains("Disaster recovery is on"), "{summary}");
    br.shot("records-dr").await;
    br.click(&format!("tr[data-record=\"{dr}\"] th a")).await;
    br.until_text("#decision", "held", |t| {
        t.contains("held by manual failback")
    })
    .await;
    br.shot("preview-held").await;
    br.click("#resume").await;
    br.until_text("#resumed", "the resume notice", |t| !t.is_empty())
        .await;
    br.until_text("#decision", "back to main", |t| t.starts_with("Main"))
        .await;
    until_answers(&b, "dr.console.test.", &["192.0.2.20"]).await;
    until_answers(&a, "dr.console.test.", &["192.0.2.20"]).await;

    // gtm2 stops: its column greys with the age of its last report, on
    // the page as it is.
    br.goto(&format!("{base}/ui/records")).await;
    br.until_text("#live", "the stream connects", |t| t.ends_with("on"))
        .await;
    br.client
        .execute("window.gtmNotReloaded = true;", vec![])
        .await
        .expect("a marker set");
    let mut b = b;
    tokio::task::block_in_place(|| b.kill());
    let head = br
        .until_text("th[data-device=\"gtm2\"]", "gtm2 unreachable", |t| {
            t.contains("unreachable: last report")
        })
        .await;
    assert!(head.contains("ago"), "{head}");
    let stale = br
        .until_text(&cell(www, "gtm2"), "gtm2's cell stale", |t| {
            t.contains("(stale)")
        })
        .await;
    assert!(stale.starts_with("Partially OK"), "{stale}");
    let kept = br
        .client
        .execute("return window.gtmNotReloaded === true;", vec![])
        .await
        .expect("the marker read");
    assert_eq!(kept, json!(true), "the page was reloaded");
    br.shot("records-stale").await;

    // On a phone's width the page still reads: the table scrolls sideways.
    br.client
        .set_window_size(390, 844)
        .await
        .expect("a phone-sized window");
    br.goto(&format!("{base}/ui/records")).await;
    br.until_text(&cell(www, "gtm1"), "www listed", |t| !t.is_empty())
        .await;
    br.shot("records-phone").await;
    br.close().await;
    drop((a, b));
}

mod objects;
mod operations;
mod screens;
