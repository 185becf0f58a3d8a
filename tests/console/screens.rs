//! The console's GTM Logs and Cluster screens, and what a viewer may do,
//! in the real browser of the parent module.

use serde_json::json;

use super::{Browser, browser_tools, http};
use crate::backends::HttpBackend;
use crate::support::{TestDevice, ZONE};
use fantoccini::Locator;

const PASSWORD: &str = "a long enough password";

/// The JSON an API route answers to `token`.
async fn get_json(web: &reqwest::Client, url: &str, token: &str) -> serde_json::Value {
    web.get(url)
        .bearer_auth(token)
        .send()
        .await
        .expect("an answer")
        .json()
        .await
        .expect("JSON")
}

/// A viewer logs in with a name and password; the record preview shows it
/// no Resume button and the API and the console refuse its resume; the
/// Cluster screen shows the members but no join token; the GTM Logs
/// filter by kind and follow new events without a reload; an admin sees
/// the join token.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn console_viewer_logs_and_cluster_in_a_browser() {
    if !browser_tools() {
        return;
    }
    let d = TestDevice::start(ZONE).await;
    let base = format!("http://{}", d.device.api_addr);
    let admin = d.device.token.clone();
    let web = http();
    let init = web
        .post(format!("{base}/api/v1/cluster/init"))
        .bearer_auth(&admin)
        .send()
        .await
        .expect("an answer");
    assert_eq!(
        init.status(),
        200,
        "{}",
        init.text().await.unwrap_or_default()
    );

    let made = web
        .put(format!("{base}/api/v1/users/ann"))
        .bearer_auth(&admin)
        .json(&json!({"role": "viewer", "password": PASSWORD}))
        .send()
        .await
        .expect("an answer");
    assert_eq!(
        made.status(),
        200,
        "{}",
        made.text().await.unwrap_or_default()
    );
    let b = Browser::start().await;
    b.goto(&format!("{base}/ui/")).await;
    b.until_path("sent to log in", |p| p.starts_with("/ui/login"))
        .await;
    b.fill("name", "ann").await;
    b.fill("secret", PASSWORD).await;
    b.click("#login").await;
    b.until_path("logged in", |p| p == "/ui/").await;
    let who = b
        .until_text("#principal", "the principal", |t| !t.is_empty())
        .await;
    assert_eq!(who, "ann (viewer)");

    // The preview of a DR record: no Resume button for a viewer...
    b.goto(&format!("{base}/ui/records/dr.example.test/A"))
        .await;
    b.until_text("h1", "the preview", |t| t.contains("dr.example.test"))
        .await;
    assert!(
        b.client.find(Locator::Css("#resume")).await.is_err(),
        "a viewer is shown the Resume button"
    );
    b.shot("preview-viewer").await;
    // ...and the API and the console refuse it the resume, token or not.
    let (cookie, csrf) = b.session().await;
    let api = web
        .post(format!("{base}/api/v1/records/dr.example.test/A/resume"))
        .header("cookie", &cookie)
        .header("x-csrf-token", &csrf)
        .send()
        .await
        .expect("an answer");
    assert_eq!(api.status(), 403, "the API lets a viewer resume");
    let body = api.text().await.unwrap_or_default();
    assert!(
        body.contains("ann has the role viewer; this needs operator"),
        "{body}"
    );
    let console = web
        .post(format!("{base}/ui/records/dr.example.test/A/resume"))
        .header("cookie", &cookie)
        .header("content-type", "application/x-www-form-urlencoded")
        .body(format!("csrf={csrf}"))
        .send()
        .await
        .expect("an answer");
    assert_eq!(console.status(), 403, "the console lets a viewer resume");

    // The Cluster screen: this device leads; no join token for a viewer.
    b.goto(&format!("{base}/ui/cluster")).await;
    let row = b
        .until_text("tr[data-device=\"test1\"]", "this device's row", |t| {
            t.contains("leader")
        })
        .await;
    assert!(row.contains("dc1") || row.contains("test1"), "{row}");
    assert!(
        b.client
            .find(Locator::Css("form[action=\"/ui/cluster/token\"]"))
            .await
            .is_err(),
        "a viewer is offered the join token"
    );
    b.shot("cluster").await;
    // No accounts page for a viewer: not in the menu, refused by the route.
    assert!(
        b.client
            .find(Locator::Css("a[href=\"/ui/accounts\"]"))
            .await
            .is_err(),
        "a viewer is offered the accounts"
    );
    let accounts = web
        .get(format!("{base}/ui/accounts"))
        .header("cookie", &cookie)
        .send()
        .await
        .expect("an answer");
    assert_eq!(accounts.status(), 403, "a viewer opens the accounts");

    // GTM Logs, operator events, followed: an account change is there;
    // a drain made meanwhile through the API appears without a reload.
    b.goto(&format!("{base}/ui/logs?kind=operator&follow=on"))
        .await;
    b.until_text("#logs tbody", "the operator events", |t| {
        t.contains("user ann added (role viewer)")
    })
    .await;
    b.client
        .execute("window.gtmNotReloaded = true;", vec![])
        .await
        .expect("a marker");
    let drained = web
        .put(format!("{base}/api/v1/drain/address"))
        .bearer_auth(&admin)
        .json(&json!({"address": "192.0.2.10", "drained": true}))
        .send()
        .await
        .expect("an answer");
    assert_eq!(drained.status(), 200);
    b.until_text("#logs tbody", "the drain, live", |t| {
        t.contains("drained 192.0.2.10 (every record) (admin on test1)")
    })
    .await;
    let kept = b
        .client
        .execute("return window.gtmNotReloaded === true;", vec![])
        .await
        .expect("the marker");
    assert_eq!(kept, json!(true), "the page was reloaded");
    // Filtered by kind: no record or check events among them.
    let kinds = b
        .client
        .find_all(Locator::Css("#logs tbody tr"))
        .await
        .expect("rows");
    for row in kinds {
        assert_eq!(
            row.attr("data-kind").await.expect("a kind").as_deref(),
            Some("operator")
        );
    }
    b.shot("logs").await;
    b.close().await;

    // An admin is offered the join token, and shown it.
    let a = Browser::start().await;
    a.login(&base, &admin).await;
    a.goto(&format!("{base}/ui/cluster")).await;
    a.click("form[action=\"/ui/cluster/token\"] button").await;
    let token = a
        .until_text("#join-token", "the join token", |t| !t.is_empty())
        .await;
    assert!(token.starts_with("gtm1."), "{token}");

    // Accounts: a user added through the form, a token created (shown
    // once) and revoked, the user removed; each as the API would.
    a.goto(&format!("{base}/ui/accounts")).await;
    a.fill("u-name", "bob").await;
    a.client
        .find(Locator::Css("#u-role option[value=\"operator\"]"))
        .await
        .expect("the operator role")
        .click()
        .await
        .expect("chosen");
    a.fill("u-password", "bob's long password").await;
    a.click("#save-user").await;
    a.until_text("#account-done", "the user saved", |t| {
        t == "user bob saved (operator)"
    })
    .await;
    let role = a
        .until_text("tr[data-account=\"bob\"] td.role", "bob's role", |t| {
            !t.is_empty()
        })
        .await;
    assert_eq!(role, "operator");
    a.fill("t-name", "ci").await;
    a.click("#create-token").await;
    let made = a
        .until_text("#new-token", "the new token", |t| !t.is_empty())
        .await;
    assert!(made.starts_with("gtm1.ci."), "{made}");
    a.shot("accounts").await;
    let whoami: serde_json::Value = get_json(&web, &format!("{base}/api/v1/whoami"), &made).await;
    assert_eq!(whoami["name"], "ci");
    assert_eq!(whoami["role"], "viewer", "the first role of the list");
    a.click("button[data-remove=\"ci\"]").await;
    a.until_text("#account-done", "the token revoked", |t| {
        t == "token ci revoked"
    })
    .await;
    let refused = web
        .get(format!("{base}/api/v1/whoami"))
        .bearer_auth(&made)
        .send()
        .await
        .expect("an answer");
    assert_eq!(refused.status(), 401, "a revoked token still works");
    a.click("button[data-remove=\"bob\"]").await;
    a.until_text("#account-done", "the user removed", |t| {
        t == "user bob removed"
    })
    .await;
    // A refused change says why, beside the forms.
    a.fill("u-name", "Not A Name").await;
    a.fill("u-password", "long enough password").await;
    a.click("#save-user").await;
    a.until_text("#account-error", "the refusal", |t| {
        t.contains("is not valid")
    })
    .await;

    // Checks: Test now of a configured check against a real backend (one
    // probe, nothing saved), and of the same check against an address
    // nobody serves.
    let backend = HttpBackend::start().await;
    let check = web
        .put(format!("{base}/api/v1/checks/site"))
        .bearer_auth(&admin)
        .json(&json!({"type": "http", "port": backend.addr.port()}))
        .send()
        .await
        .expect("an answer");
    assert_eq!(
        check.status(),
        200,
        "{}",
        check.text().await.unwrap_or_default()
    );
    a.goto(&format!("{base}/ui/checks")).await;
    a.fill("addr-site", "127.0.0.1").await;
    a.click("button[data-check=\"site\"]").await;
    let tested = a
        .until_text("#tested", "the Test now result", |t| !t.is_empty())
        .await;
    assert!(tested.starts_with("site: OK"), "{tested}");
    // It says where it was probed from: this device.
    let device = d.device.engine.device().to_string();
    assert!(
        tested.ends_with(&format!("; probed 127.0.0.1 from {device} (dc1)")),
        "{tested}"
    );
    a.shot("checks").await;
    a.fill("addr-site", "127.0.0.2").await;
    a.click("button[data-check=\"site\"]").await;
    a.until_text("#tested", "the failed Test now", |t| {
        t.starts_with("site: Error")
    })
    .await;
    // A check not saved: tested from the form's fields, nothing saved.
    a.fill("n-port", &backend.addr.port().to_string()).await;
    a.fill("n-address", "127.0.0.1").await;
    a.click("#test-unsaved").await;
    let tested = a
        .until_text("#tested", "the unsaved Test now", |t| {
            t.starts_with("unsaved check")
        })
        .await;
    assert!(tested.starts_with("unsaved check: OK"), "{tested}");
    let listed: serde_json::Value = get_json(&web, &format!("{base}/api/v1/checks"), &admin).await;
    assert!(
        listed
            .as_array()
            .expect("a list")
            .iter()
            .all(|c| c["name"] != "unsaved"),
        "the tested check was saved: {listed}"
    );
    a.fill("n-port", "99999").await;
    a.click("#test-unsaved").await;
    a.until_text("#tested", "a bad port", |t| {
        t.contains("is not a port number")
    })
    .await;
    // Scenarios: each term of the condition marked by its truth. The
    // web checks of 192.0.2.10/11 are refused by the probe fence (only
    // loopback may be probed here): both false, so dc1-down is active.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    loop {
        a.goto(&format!("{base}/ui/checks")).await;
        let marks = a
            .client
            .find_all(Locator::Css("section[data-scenario=\"dc1-down\"] mark"))
            .await
            .expect("the terms");
        let mut truths = Vec::new();
        for m in &marks {
            truths.push((
                m.text().await.expect("a term"),
                m.attr("data-truth")
                    .await
                    .expect("a truth")
                    .unwrap_or_default(),
            ));
        }
        if truths
            == [
                ("web@192.0.2.10".to_string(), "false".to_string()),
                ("web@192.0.2.11".to_string(), "false".to_string()),
            ]
        {
            break;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the terms of dc1-down: {truths:?}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    }
    let decision = a
        .until_text(
            "section[data-scenario=\"dc1-down\"] .decision",
            "the decision",
            |t| !t.is_empty(),
        )
        .await;
    assert_eq!(decision, "active");
    a.shot("checks-scenarios").await;
    a.close().await;
}

/// The GeoIP card: the database this device answers with, and a look-up
/// placing an address as the DNS path does.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn console_geoip_card_in_a_browser() {
    if !browser_tools() {
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("country.mmdb");
    crate::geo::write_mmdb(&db);
    let d = TestDevice::start_with(ZONE, Some(db)).await;
    let base = format!("http://{}", d.device.api_addr);
    let b = Browser::start().await;
    b.login(&base, &d.device.token).await;
    b.goto(&format!("{base}/ui/geoip")).await;
    let row = b
        .until_text("tr[data-device=\"test1\"]", "this device's database", |t| {
            !t.is_empty()
        })
        .await;
    assert!(row.contains("GeoLite2-Country"), "{row}");
    b.fill("g-ip", "81.2.69.160").await;
    b.click("#lookup").await;
    let country = b
        .until_text("#located .country", "the country", |t| !t.is_empty())
        .await;
    assert_eq!(country, "DE");
    assert_eq!(b.text("#located .continent").await.as_deref(), Some("EU"));
    b.shot("geoip").await;
    b.fill("g-ip", "not-an-address").await;
    b.click("#lookup").await;
    b.until_text(".error", "the refusal", |t| {
        t.contains("is not an IP address")
    })
    .await;
    b.close().await;
}

/// Alerts: each notifier's delivery state, and Send test delivering a
/// real message to a real receiver.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn console_alerts_page_shows_delivery_and_sends_a_test() {
    if !browser_tools() {
        return;
    }
    let hook = crate::alerts::Hook::start("127.0.193.49:0").await;
    let zone = format!(
        "{ZONE}\n[[notifier]]\nname = \"ops\"\ntype = \"webhook\"\nurl = \"http://{}/gtm\"\n",
        hook.addr
    );
    let d = TestDevice::start(&zone).await;
    let base = format!("http://{}", d.device.api_addr);
    let b = Browser::start().await;
    b.login(&base, &d.device.token).await;
    b.goto(&format!("{base}/ui/alerts")).await;
    b.until_text(
        "tr[data-notifier=\"ops\"] td.state",
        "the notifier's state",
        |t| !t.is_empty(),
    )
    .await;
    b.click("tr[data-notifier=\"ops\"] button").await;
    b.until_text("#alert-done", "the test delivered", |t| {
        t == "test message of ops delivered from test1"
    })
    .await;
    assert_eq!(
        b.text("tr[data-notifier=\"ops\"] td.state")
            .await
            .as_deref(),
        Some("ok")
    );
    assert!(hook.messages().iter().any(|(_, m)| m["status"] == "test"));
    b.shot("alerts").await;
    b.close().await;
}

/// The topology map: a steered record's addresses in their datacenter,
/// coloured by health; a backend that starts failing turns its node red
/// without a reload.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn console_topology_map_follows_health_live() {
    if !browser_tools() {
        return;
    }
    let backend = HttpBackend::start().await;
    let config = format!(
        r#"
[[datacenter]]
name = "dc1"

[[datacenter]]
name = "dc2"

[[check]]
name = "site"
type = "http"
port = {port}
interval = "1s"
failures = 1
successes = 1

[[region]]
name = "lab"
networks = ["127.0.0.0/8"]
exclude_networks = ["127.0.0.2/32"]

[[domain]]
name = "map.test"
nameservers = ["ns1.map.test"]

[[domain.record]]
name = "www"
type = "A"
addresses = [
  {{ ip = "127.0.0.1", dc = "dc1", hc = "check:site" }},
  {{ ip = "127.0.0.2", dc = "dc2" }},
]

[[domain.record]]
name = "api"
type = "A"
addresses = [
  {{ ip = "127.0.0.1", dc = "dc1", hc = "check:site" }},
  {{ ip = "127.0.0.4", dc = "dc2" }},
]
topology_rules = [{{ client = "region:lab", datacenter = "dc1" }}]
"#,
        port = backend.addr.port()
    );
    let d = TestDevice::start(&config).await;
    let base = format!("http://{}", d.device.api_addr);
    let b = Browser::start().await;
    b.login(&base, &d.device.token).await;
    b.goto(&format!("{base}/ui/topology")).await;
    let node = "g[data-address=\"127.0.0.1\"]";
    let health = |b: &Browser| {
        let client = b.client.clone();
        async move {
            let n = client.find(Locator::Css(node)).await.ok()?;
            n.attr("data-health").await.ok().flatten()
        }
    };
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while health(&b).await.as_deref() != Some("up") {
        assert!(
            std::time::Instant::now() < deadline,
            "127.0.0.1 never healthy on the map"
        );
        b.goto(&format!("{base}/ui/topology")).await;
        tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    }
    let origin = b
        .until_text(
            "g[data-record=\"www.map.test/A\"]",
            "the origin node",
            |t| !t.is_empty(),
        )
        .await;
    assert!(origin.contains("www.map.test/A"), "{origin}");
    // The regions, and each rule with what it answers now.
    let region = b
        .until_text("#regions tr[data-region=\"lab\"]", "the region", |t| {
            !t.is_empty()
        })
        .await;
    assert!(
        region.contains("networks 127.0.0.0/8") && region.contains("127.0.0.2/32"),
        "{region}"
    );
    let rule = "#rules tr[data-record=\"api.map.test/A\"]";
    let now = b
        .until_text(rule, "the rule answering dc1", |t| t.contains("127.0.0.1"))
        .await;
    assert!(now.contains("1: region:lab → datacenter dc1"), "{now}");
    b.axe("topology-rules").await;
    b.shot("topology").await;
    b.client
        .execute("window.gtmNotReloaded = true;", vec![])
        .await
        .expect("a marker");
    backend.set_status(503);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while health(&b).await.as_deref() != Some("down") {
        assert!(
            std::time::Instant::now() < deadline,
            "127.0.0.1 never turned down on the map"
        );
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
    let kept = b
        .client
        .execute("return window.gtmNotReloaded === true;", vec![])
        .await
        .expect("the marker");
    assert_eq!(kept, json!(true), "the page was reloaded");
    // The rule's datacenter has no healthy address left: skipped, live.
    b.until_text(rule, "the rule skipped", |t| {
        t.contains("skipped (no candidate)")
    })
    .await;
    // Lines go only to what is answered: the address down has none.
    b.until_attr(
        "path[data-to=\"127.0.0.2\"]",
        "data-from",
        "a line to the address answered",
        |f| f == "www.map.test/A",
    )
    .await;
    assert!(
        b.client
            .find(Locator::Css("path[data-to=\"127.0.0.1\"]"))
            .await
            .is_err(),
        "a line to the address down"
    );
    b.shot("topology-down").await;
    b.close().await;
}

/// Chooses `value` in the select `css` names.
pub(super) async fn choose(b: &Browser, select: &str, value: &str) {
    b.client
        .find(Locator::Css(&format!("{select} option[value=\"{value}\"]")))
        .await
        .unwrap_or_else(|_| panic!("{select} has {value}"))
        .click()
        .await
        .expect("chosen");
}

/// Types `text` into the input `css` names.
async fn type_into(b: &Browser, css: &str, text: &str) {
    let field = b.client.find(Locator::Css(css)).await.expect(css);
    field.clear().await.expect("cleared");
    field.send_keys(text).await.expect("typed");
}

/// The sorted A answers of `name`.
async fn answer(d: &TestDevice, name: &str) -> Vec<String> {
    use hickory_server::proto::rr::RecordType;
    let mut a = crate::support::answers(
        &crate::support::udp(d.v4(), &crate::support::query(name, RecordType::A)).await,
    );
    a.sort();
    a
}

pub(super) async fn until_answer(d: &TestDevice, name: &str, want: &[&str]) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    loop {
        let got = answer(d, name).await;
        if got == want {
            return;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "{name}: {got:?}, not {want:?}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
}

/// The record form: a new DR record with a scenario condition; a duplicate
/// address is refused beside its row; the preview shows the field-level
/// diff; Apply makes it a new version and DNS answers from the DR DC
/// while the scenario is active; an edit removing the condition moves the
/// answer to the Main DC.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn console_record_form_previews_applies_and_dns_follows() {
    if !browser_tools() {
        return;
    }
    let d = TestDevice::start(ZONE).await;
    let base = format!("http://{}", d.device.api_addr);
    let b = Browser::start().await;
    b.login(&base, &d.device.token).await;
    b.goto(&format!("{base}/ui/records/edit?domain=example.test"))
        .await;
    b.fill("f-name", "shop").await;
    choose(&b, "#f-mode", "disaster-recovery").await;
    choose(&b, "#f-dr_condition", "scenario:dc1-down").await;
    type_into(&b, "input[name=a0_value]", "127.0.0.10").await;
    choose(&b, "select[name=a0_dc]", "dc1").await;
    // One empty row to start with; "Add an address row" gives another and
    // keeps what was typed.
    assert!(
        b.text("tr[data-row=\"1\"]").await.is_none(),
        "a second row before one was asked for"
    );
    b.click("#add-row").await;
    b.until_attr("input[name=a1_value]", "name", "the added row", |n| {
        n == "a1_value"
    })
    .await;
    b.until_attr("input[name=a0_value]", "value", "the typed address", |v| {
        v == "127.0.0.10"
    })
    .await;
    type_into(&b, "input[name=a1_value]", "127.0.0.10").await;
    choose(&b, "select[name=a1_dc]", "dc2").await;
    b.click("#preview").await;
    let row = b
        .until_text(
            "tr[data-row=\"1\"] .field-error",
            "the duplicate's error",
            |t| !t.is_empty(),
        )
        .await;
    assert!(row.contains("127.0.0.10 is listed twice"), "{row}");
    // The two rows and one empty one: a preview adds no more.
    assert!(b.text("tr[data-row=\"2\"]").await.is_some(), "no spare row");
    assert!(
        b.text("tr[data-row=\"3\"]").await.is_none(),
        "a preview added rows"
    );
    b.until_text("#form-errors", "the summary", |t| {
        t.contains("Nothing was applied")
    })
    .await;
    b.shot("form-errors").await;
    assert!(
        answer(&d, "shop.example.test.").await.is_empty(),
        "applied anyway"
    );

    type_into(&b, "input[name=a1_value]", "127.0.0.20").await;
    b.click("#preview").await;
    let diff = b
        .until_text("#diff", "the diff", |t| t.contains("shop"))
        .await;
    assert!(diff.contains("+ record shop.example.test/A"), "{diff}");
    b.shot("form-preview").await;
    b.click("#apply").await;
    let applied = b
        .until_text("#applied", "the apply", |t| {
            t.starts_with("Applied as version")
        })
        .await;
    assert!(
        applied.contains("+ record shop.example.test/A"),
        "{applied}"
    );
    // dc1-down is active (the web checks of 192.0.2.10/11 are refused by
    // the probe fence): the answer comes from the DR DC.
    until_answer(&d, "shop.example.test.", &["127.0.0.20"]).await;

    // Edit through the preview's link: no DR condition any more.
    b.goto(&format!("{base}/ui/records/shop.example.test/A"))
        .await;
    b.click("#edit").await;
    b.until_path("the form", |p| p.starts_with("/ui/records/edit"))
        .await;
    choose(&b, "#f-dr_condition", "").await;
    b.click("#preview").await;
    let diff = b
        .until_text("#diff", "the diff", |t| t.contains("dr_condition"))
        .await;
    assert!(
        diff.contains("~ record shop.example.test/A in domain example.test: dr_condition \"scenario:dc1-down\" → (unset)"),
        "{diff}"
    );
    b.click("#apply").await;
    b.until_text("#applied", "the apply", |t| {
        t.starts_with("Applied as version")
    })
    .await;
    until_answer(&d, "shop.example.test.", &["127.0.0.10"]).await;

    // A topology rule written in the form: standalone, both addresses are
    // candidates, and the loopback resolvers' rule answers 127.0.0.20.
    b.goto(&format!("{base}/ui/records/shop.example.test/A"))
        .await;
    b.click("#edit").await;
    b.until_path("the form", |p| p.starts_with("/ui/records/edit"))
        .await;
    choose(&b, "#f-mode", "standalone").await;
    type_into(&b, "input[name=r0_client]", "127.0.0.0/8").await;
    choose(&b, "select[name=r0_kind]", "address").await;
    type_into(&b, "input[name=r0_to]", "127.0.0.20").await;
    b.click("#preview").await;
    let diff = b
        .until_text("#diff", "the diff", |t| t.contains("topology_rules"))
        .await;
    assert!(diff.contains("127.0.0.0/8"), "{diff}");
    b.axe("form-rules").await;
    b.click("#apply").await;
    b.until_text("#applied", "the apply", |t| {
        t.starts_with("Applied as version")
    })
    .await;
    until_answer(&d, "shop.example.test.", &["127.0.0.20"]).await;
    // The form shows the rule as applied, with a spare row after it.
    b.goto(&format!(
        "{base}/ui/records/edit?domain=example.test&record=shop/A"
    ))
    .await;
    b.until_attr("input[name=r0_client]", "value", "the applied rule", |v| {
        v == "127.0.0.0/8"
    })
    .await;
    assert!(
        b.text("tr[data-rule=\"1\"]").await.is_some(),
        "no spare rule row"
    );
    b.close().await;
}
