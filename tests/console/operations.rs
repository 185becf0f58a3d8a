//! Operator actions in the console, each with its dry run first, in the
//! real browser of the parent module against an in-process device: drains,
//! manual checks, schedules, history with rollback, and the GeoIP database.
//! Addresses 127.0.83.x.

use fantoccini::Locator;

use super::{
    Browser, browser_tools, http,
    screens::{choose, until_answer},
};
use crate::geoip_download::{FileServer, NOV_1, de_db, gzip, month_paths};
use crate::support::TestDevice;

fn config(www: &str, source: &str) -> String {
    format!(
        r#"
[[datacenter]]
name = "dc1"

[[datacenter]]
name = "dc2"

[[check]]
name = "gate"
type = "manual"

[[domain]]
name = "ops.test"
nameservers = ["ns1.ops.test"]

[[domain.record]]
name = "www"
type = "A"
addresses = [
  {{ ip = "{www}", dc = "dc1" }},
  {{ ip = "127.0.83.2", dc = "dc2" }},
]

[[domain.record]]
name = "solo"
type = "A"
addresses = [{{ ip = "127.0.83.3", dc = "dc1" }}]

[[domain.record]]
name = "gated"
type = "A"
addresses = [
  {{ ip = "127.0.83.4", dc = "dc1", hc = "check:gate" }},
  {{ ip = "127.0.83.5", dc = "dc2" }},
]

[geoip]
source = "{source}"
update = "off"
"#
    )
}

/// The status cell of `record` on this device, on the records page.
const GATED: &str = "tr[data-record=\"gated.ops.test/A\"] td[data-device=\"test1\"]";

/// Drains a datacenter (refused because a record would be left with no
/// answer, then forced), undrains it; sets a manual check Error then OK;
/// previews a scheduled drain, schedules it and cancels it; rolls a change
/// back after its dry run and DNS answers as before; downloads and imports a GeoIP database and
/// switches its refresh on, dry run first.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn console_operator_actions_each_with_a_dry_run() {
    if !browser_tools() {
        return;
    }
    let files = FileServer::start("127.0.83.9").await;
    let (current, before) = month_paths();
    files.put(&current, gzip(&de_db(NOV_1)));
    files.put(&before, gzip(&de_db(NOV_1)));
    let d = TestDevice::start(&config("127.0.83.1", &files.source())).await;
    let base = format!("http://{}", d.device.api_addr);
    let admin = d.device.token.clone();
    let b = Browser::start().await;
    b.login(&base, &admin).await;
    until_answer(&d, "www.ops.test.", &["127.0.83.1", "127.0.83.2"]).await;

    // Drains: the preview names the record dc1 would leave with no answer;
    // the drain is refused with the API's message; forced, it is made.
    b.goto(&format!("{base}/ui/drains")).await;
    b.until_text("#no-drains", "no drain yet", |t| !t.is_empty())
        .await;
    choose(&b, "#d-datacenter", "dc1").await;
    b.click("#drain-preview-button").await;
    let preview = b
        .until_text("#drain-preview", "the drain's dry run", |t| {
            t.contains("drain datacenter dc1")
        })
        .await;
    assert!(preview.contains("www.ops.test/A"), "{preview}");
    let emptied = b
        .until_text("#drain-emptied", "the emptied records", |t| !t.is_empty())
        .await;
    assert!(emptied.contains("solo.ops.test/A"), "{emptied}");
    assert!(b.text("#drains").await.is_none(), "drained by a preview");
    b.shot("drains-preview").await;
    b.click("#drain-apply").await;
    let refused = b
        .until_text("#drain-error", "the refusal", |t| !t.is_empty())
        .await;
    assert!(
        refused.contains("would leave 1 record(s) with no answer: solo.ops.test/A"),
        "{refused}"
    );
    b.shot("drains-refused").await;
    b.click("#drain-force").await;
    b.until_text("#drain-done", "the forced drain", |t| {
        t.contains("datacenter dc1")
    })
    .await;
    let listed = b
        .until_text("#drains", "the drain listed", |t| {
            t.contains("datacenter dc1")
        })
        .await;
    assert!(listed.contains("admin on test1"), "{listed}");
    until_answer(&d, "www.ops.test.", &["127.0.83.2"]).await;
    b.shot("drains").await;
    b.click("button[data-undrain=\"datacenter dc1\"]").await;
    b.until_text("#drain-preview", "the undrain's dry run", |t| {
        t.contains("undrain datacenter dc1")
    })
    .await;
    b.click("#drain-apply").await;
    b.until_text("#no-drains", "the drain ended", |t| !t.is_empty())
        .await;
    until_answer(&d, "www.ops.test.", &["127.0.83.1", "127.0.83.2"]).await;

    // A manual check set Error, then OK: the record follows.
    b.goto(&format!("{base}/ui/checks")).await;
    b.click("button[data-set=\"gate-error\"]").await;
    b.until_text("#check-set", "the check set", |t| {
        t.contains("set to error")
    })
    .await;
    b.shot("checks-manual").await;
    b.goto(&format!("{base}/ui/records")).await;
    b.until_text(GATED, "gated Partially OK", |t| {
        t.starts_with("Partially OK")
    })
    .await;
    until_answer(&d, "gated.ops.test.", &["127.0.83.5"]).await;
    b.goto(&format!("{base}/ui/checks")).await;
    b.click("button[data-set=\"gate-ok\"]").await;
    b.until_text("#check-set", "the check set", |t| t.contains("set to ok"))
        .await;
    b.goto(&format!("{base}/ui/records")).await;
    b.until_text(GATED, "gated OK", |t| t.starts_with("OK"))
        .await;

    // A maintenance window previewed (what it would change now), then
    // scheduled, listed pending, cancelled.
    b.goto(&format!("{base}/ui/schedules")).await;
    choose(&b, "#s-kind", "drain").await;
    b.fill("s-at", "+1h").await;
    b.fill("s-until", "+2h").await;
    b.fill("s-datacenter", "dc2").await;
    b.click("#schedule-preview").await;
    let preview = b
        .until_text("#schedule-preview-box", "the schedule's dry run", |t| {
            !t.is_empty()
        })
        .await;
    assert!(
        preview.contains("drain datacenter dc2") && preview.contains("undrain datacenter dc2"),
        "{preview}"
    );
    let changes = b
        .until_text("#schedule-changes", "what it would change now", |t| {
            !t.is_empty()
        })
        .await;
    assert!(changes.contains("ops.test/A"), "{changes}");
    b.shot("schedules-preview").await;
    b.click("#schedule-add").await;
    let made = b
        .until_text("#schedule-done", "the schedule made", |t| !t.is_empty())
        .await;
    assert!(made.contains("drain datacenter dc2"), "{made}");
    b.until_text("tr[data-state=\"pending\"]", "the pending schedule", |t| {
        t.contains("drain datacenter dc2")
    })
    .await;
    b.shot("schedules").await;
    b.click("button[data-cancel]").await;
    b.until_text("#schedule-done", "the cancel", |t| t.contains("cancelled"))
        .await;
    b.until_text("tr[data-state=\"cancelled\"]", "the cancelled one", |t| {
        t.contains("drain datacenter dc2")
    })
    .await;
    // A bad time is refused with the API's words, beside its field.
    b.fill("s-at", "tomorrow-ish").await;
    b.fill("s-datacenter", "dc2").await;
    b.click("#schedule-preview").await;
    b.until_text("#schedule-error", "a bad time", |t| t.starts_with("at:"))
        .await;
    b.until_text("#err-at", "the refusal beside at", |t| {
        t.contains("tomorrow-ish")
    })
    .await;

    // History: a change made through the API, its diff, and a rollback
    // shown as a dry run first; DNS answers as before.
    let web = http();
    let changed = web
        .put(format!("{base}/api/v1/config"))
        .bearer_auth(&admin)
        .body(config("127.0.83.7", &files.source()))
        .send()
        .await
        .expect("an answer");
    assert_eq!(
        changed.status(),
        200,
        "{}",
        changed.text().await.unwrap_or_default()
    );
    until_answer(&d, "www.ops.test.", &["127.0.83.2", "127.0.83.7"]).await;
    let history: serde_json::Value = web
        .get(format!("{base}/api/v1/config/history"))
        .bearer_auth(&admin)
        .send()
        .await
        .expect("an answer")
        .json()
        .await
        .expect("JSON");
    let previous = history[1]["version"].as_u64().expect("a previous version");
    b.goto(&format!("{base}/ui/history")).await;
    b.click("#diff-button").await;
    let diff = b
        .until_text("#history-diff", "the diff", |t| t.contains("127.0.83.7"))
        .await;
    assert!(diff.contains("127.0.83.1"), "{diff}");
    b.click(&format!("button[data-rollback=\"{previous}\"]"))
        .await;
    let dry = b
        .until_text("#rollback-preview", "the rollback's dry run", |t| {
            t.contains("127.0.83.7")
        })
        .await;
    assert!(dry.contains("Dry run"), "{dry}");
    until_answer(&d, "www.ops.test.", &["127.0.83.2", "127.0.83.7"]).await;
    b.shot("history").await;
    b.click("#rollback-apply").await;
    b.until_text("#rollback-done", "the rollback", |t| {
        t.starts_with(&format!("Rolled back to version {previous}"))
    })
    .await;
    until_answer(&d, "www.ops.test.", &["127.0.83.1", "127.0.83.2"]).await;

    // GeoIP: downloaded from the loopback source; a file imported; the
    // refresh switched on through the configuration, dry run first.
    b.goto(&format!("{base}/ui/geoip")).await;
    b.click("#geoip-download").await;
    let done = b
        .until_text("#geoip-done", "the download", |t| !t.is_empty())
        .await;
    assert!(done.contains("DBIP-Country-Lite"), "{done}");
    let dir = tempfile::tempdir().expect("a directory");
    let file = dir.path().join("country.mmdb");
    crate::geo::write_mmdb(&file);
    b.client
        .find(Locator::Id("g-file"))
        .await
        .expect("the file field")
        .send_keys(&file.display().to_string())
        .await
        .expect("a file chosen");
    b.click("#geoip-import").await;
    let imported = b
        .until_text("#geoip-done", "the import", |t| t.starts_with("imported"))
        .await;
    assert!(imported.contains("GeoLite2-Country"), "{imported}");
    // The ASN database, chosen as such: a country file is refused naming
    // its type, an ASN one installed beside the country one.
    let send = |path: std::path::PathBuf| {
        let client = b.client.clone();
        async move {
            client
                .find(Locator::Id("g-file"))
                .await
                .expect("the file field")
                .send_keys(&path.display().to_string())
                .await
                .expect("a file chosen");
        }
    };
    choose(&b, "#g-kind", "asn").await;
    send(file.clone()).await;
    b.click("#geoip-import").await;
    let refused = b
        .until_text("#geoip-error", "the refusal", |t| !t.is_empty())
        .await;
    assert!(refused.contains("is not an ASN database"), "{refused}");
    let asn_file = dir.path().join("asn.mmdb");
    std::fs::write(
        &asn_file,
        crate::geoip_download::asn_db(crate::geoip_download::NOV_1),
    )
    .expect("an ASN file");
    choose(&b, "#g-kind", "asn").await;
    send(asn_file).await;
    b.click("#geoip-import").await;
    b.until_text("#geoip-asn", "the ASN database", |t| {
        t.contains("DBIP-ASN-Lite")
    })
    .await;
    let country = b.text("#geoip-name").await.unwrap_or_default();
    assert!(
        country.contains("GeoLite2-Country"),
        "the country one stays: {country}"
    );
    choose(&b, "#g-update", "monthly").await;
    b.click("#update-preview-button").await;
    let dry = b
        .until_text("#update-preview", "the refresh's dry run", |t| {
            t.contains("Dry run")
        })
        .await;
    assert!(
        dry.contains("~ geoip: update \"off\" → \"monthly\""),
        "{dry}"
    );
    b.until_text("#geoip-update", "not switched yet", |t| t == "off")
        .await;
    // A change made meanwhile: the apply is refused, not overwriting it.
    let meanwhile = web
        .put(format!("{base}/api/v1/checks/extra"))
        .bearer_auth(&admin)
        .json(&serde_json::json!({"type": "manual"}))
        .send()
        .await
        .expect("an answer");
    assert_eq!(meanwhile.status(), 200);
    b.click("#update-apply").await;
    let conflict = b
        .until_text("#geoip-error", "the stale apply refused", |t| !t.is_empty())
        .await;
    assert!(conflict.contains("read it again and retry"), "{conflict}");
    choose(&b, "#g-update", "monthly").await;
    b.click("#update-preview-button").await;
    b.until_text("#update-preview", "the refresh's dry run again", |t| {
        t.contains("~ geoip: update")
    })
    .await;
    b.click("#update-apply").await;
    b.until_text("#geoip-done", "the refresh switched", |t| {
        t.contains("now monthly")
    })
    .await;
    b.until_text("#geoip-update", "switched", |t| t.starts_with("monthly"))
        .await;
    b.close().await;

    // Each action needs the API route's role: a viewer is shown no form
    // and refused the drain; an operator is refused the rollback, the
    // import and the refresh switch (admin).
    for (role, refused) in [
        (
            "viewer",
            &[
                "/ui/drains",
                "/ui/schedules",
                "/ui/checks/gate/state",
                "/ui/geoip/download",
            ][..],
        ),
        (
            "operator",
            &[
                "/ui/history/rollback",
                "/ui/geoip/import",
                "/ui/geoip/update",
            ][..],
        ),
    ] {
        let made: serde_json::Value = web
            .post(format!("{base}/api/v1/tokens"))
            .bearer_auth(&admin)
            .json(&serde_json::json!({"name": role, "role": role}))
            .send()
            .await
            .expect("an answer")
            .json()
            .await
            .expect("JSON");
        let token = made["token"].as_str().expect("a token");
        let (cookie, csrf) = session(&web, &base, token).await;
        let page = web
            .get(format!("{base}/ui/drains"))
            .header("cookie", &cookie)
            .send()
            .await
            .expect("an answer");
        assert_eq!(page.status(), 200);
        let page = page.text().await.unwrap_or_default();
        assert_eq!(
            page.contains("drain-preview-button"),
            role == "operator",
            "the drain form shown to a {role}"
        );
        // The session and its token are good: what the role allows works.
        let preview = web
            .post(format!("{base}/ui/drains"))
            .header("cookie", &cookie)
            .header("content-type", "application/x-www-form-urlencoded")
            .body(format!(
                "csrf={csrf}&datacenter=dc2&drained=true&action=preview"
            ))
            .send()
            .await
            .expect("an answer");
        assert_eq!(
            preview.status(),
            if role == "operator" { 200 } else { 403 },
            "a {role}'s drain preview"
        );
        for path in refused {
            let answer = web
                .post(format!("{base}{path}"))
                .header("cookie", &cookie)
                .header("content-type", "application/x-www-form-urlencoded")
                .body(format!("csrf={csrf}&version={previous}&update=off"))
                .send()
                .await
                .expect("an answer");
            assert_eq!(answer.status(), 403, "{path} lets a {role} in");
        }
    }
}

/// A console session of `secret` (an API token): its cookie and CSRF token.
async fn session(web: &reqwest::Client, base: &str, secret: &str) -> (String, String) {
    let login = web
        .post(format!("{base}/ui/login"))
        .header("content-type", "application/x-www-form-urlencoded")
        .body(format!("secret={secret}"))
        .send()
        .await
        .expect("an answer");
    let cookie = login
        .headers()
        .get_all("set-cookie")
        .iter()
        .filter_map(|v| v.to_str().ok())
        .find(|v| v.starts_with("gtm_session="))
        .and_then(|v| v.split(';').next())
        .expect("a session cookie")
        .to_string();
    let page = web
        .get(format!("{base}/ui/history"))
        .header("cookie", &cookie)
        .send()
        .await
        .expect("an answer")
        .text()
        .await
        .expect("a page");
    let csrf = page
        .split("name=\"csrf\" value=\"")
        .nth(1)
        .and_then(|rest| rest.split('"').next())
        .expect("a CSRF field")
        .to_string();
    (cookie, csrf)
}
