//! The object forms in the real browser of the parent module, on a real
//! pair, with no CLI after the cluster is made: a datacenter, a check
//! (tested before it is saved), a scenario whose condition is checked as
//! it is typed, the domain's datacenters, a new DR record on them; the
//! backend fails and both devices answer from the DR DC; a delete shows
//! its dry run, a refused one says why.

use super::{Browser, browser_tools, until_answers};
use crate::backends::HttpBackend;
use crate::cluster::Proc;
use fantoccini::Locator;

const CONFIG: &str = r#"
[[datacenter]]
name = "dc1"

[[domain]]
name = "objects.test"
nameservers = ["ns1.objects.test"]

[[domain.record]]
name = "ns1"
type = "A"
mode = "standalone"
addresses = [{ ip = "192.0.2.53" }]
"#;

async fn choose(b: &Browser, select: &str, value: &str) {
    b.client
        .find(Locator::Css(&format!("{select} option[value=\"{value}\"]")))
        .await
        .unwrap_or_else(|_| panic!("{select} has {value}"))
        .click()
        .await
        .expect("chosen");
}

/// Whether the field `id` is hidden by the form (it does not apply).
async fn hidden(b: &Browser, id: &str) -> bool {
    let script =
        format!("var e = document.getElementById('{id}'); return !!(e && e.closest('[hidden]'));");
    b.client
        .execute(&script, vec![])
        .await
        .expect("the script runs")
        .as_bool()
        .expect("a boolean")
}

/// Previews the form shown, checks the diff, applies it.
async fn preview_and_apply(b: &Browser, want: &str) {
    b.click("#preview").await;
    // The dry run that applies: a refusal shown before it (a field fixed
    // since) is not taken for its answer.
    let shown = b
        .until_text("main", "the dry run", |t| {
            t.contains("The changes this would make") && t.contains(want)
        })
        .await;
    assert!(shown.contains(want), "{want}: {shown}");
    b.click("#apply").await;
    let applied = b
        .until_text("#applied", "the apply", |t| {
            t.starts_with("Applied as version")
        })
        .await;
    assert!(applied.contains(want), "{applied}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn console_objects_are_made_from_scratch_and_a_dr_record_follows_its_backend() {
    if !browser_tools() {
        return;
    }
    let mut web = HttpBackend::start_at("127.0.112.10:0".parse().unwrap()).await;
    let port = web.addr.port();
    let root = tempfile::tempdir().unwrap();
    let extra = "probe_networks = [\"127.0.0.0/8\"]";
    let (a, b) = tokio::task::block_in_place(|| {
        let a = Proc::start_with(root.path(), "gtm1", "dc1", "127.0.111.1", extra);
        let b = Proc::start_with(root.path(), "gtm2", "dc1", "127.0.111.2", extra);
        a.ok(&["cluster", "init"]);
        b.join(&a);
        a.apply_ok(CONFIG);
        (a, b)
    });
    until_answers(&b, "ns1.objects.test.", &["192.0.2.53"]).await;
    let token = std::fs::read_to_string(a.dir.join("api-token")).expect("the token");
    let base = a.api();
    let br = Browser::start().await;
    br.login(&base, token.trim()).await;

    // A datacenter.
    br.goto(&format!("{base}/ui/objects/datacenters")).await;
    br.click("#new-object").await;
    br.until_path("the form", |p| {
        p.starts_with("/ui/objects/datacenters/edit")
    })
    .await;
    br.fill("f-name", "dc2").await;
    br.fill("f-country", "DE").await;
    preview_and_apply(&br, "+ datacenter dc2: country \"DE\"").await;

    // A region, its lists typed one per line or comma-separated.
    br.goto(&format!("{base}/ui/objects/regions")).await;
    br.click("#new-object").await;
    br.until_path("the region form", |p| {
        p.starts_with("/ui/objects/regions/edit")
    })
    .await;
    br.fill("f-name", "office").await;
    br.fill("f-networks", "10.20.0.0/16, 10.30.0.0/16").await;
    br.fill("f-exclude_networks", "10.20.99.0/24").await;
    br.shot("region-form").await;
    preview_and_apply(
        &br,
        "+ region office: exclude_networks [\"10.20.99.0/24\"], networks [\"10.20.0.0/16\", \"10.30.0.0/16\"]",
    )
    .await;
    // A network with host bits set is refused beside the form, naming it.
    br.goto(&format!("{base}/ui/objects/regions/edit?name=office"))
        .await;
    br.fill("f-networks", "10.20.0.1/16").await;
    br.click("#preview").await;
    br.until_text("main", "the refusal", |t| {
        t.contains("has host bits set: write 10.20.0.0/16")
    })
    .await;

    // A check: the fields of its type only; Test now before it is saved.
    br.goto(&format!("{base}/ui/objects/checks/edit")).await;
    br.fill("f-name", "web").await;
    assert!(!hidden(&br, "f-path").await, "path hidden for http");
    choose(&br, "#f-type", "tcp").await;
    assert!(hidden(&br, "f-path").await, "path shown for tcp");
    assert!(!hidden(&br, "f-send").await, "send hidden for tcp");
    choose(&br, "#f-type", "http").await;
    br.fill("f-port", &port.to_string()).await;
    br.fill("f-path", "/").await;
    br.fill("f-interval", "1s").await;
    br.fill("f-timeout", "800ms").await;
    br.fill("f-failures", "1").await;
    br.fill("f-successes", "1").await;
    br.fill("f-test_address", "127.0.112.10").await;
    br.click("#test-now").await;
    let tested = br
        .until_text("#tested", "Test now", |t| !t.is_empty())
        .await;
    assert!(tested.starts_with("OK"), "{tested}");
    assert!(
        tested.contains("probed 127.0.112.10 from gtm1 (dc1)"),
        "{tested}"
    );
    br.shot("check-form").await;
    // A field the configuration refuses is named beside it.
    br.fill("f-expect_status", "abc").await;
    br.click("#preview").await;
    let error = br
        .until_text("#err-expect_status", "the field's error", |t| !t.is_empty())
        .await;
    assert!(error.contains("expect_status"), "{error}");
    br.fill("f-expect_status", "200").await;
    preview_and_apply(&br, "+ check web:").await;

    // A scenario: its condition is checked as it is typed, each term with
    // its truth on both devices.
    br.goto(&format!("{base}/ui/objects/scenarios/edit")).await;
    br.fill("f-name", "main-down").await;
    br.fill("f-condition", "NOT web@127.0.112.10 AND").await;
    br.until_text(
        "#terms-condition .condition-error",
        "the parse error",
        |t| !t.is_empty(),
    )
    .await;
    br.fill("f-condition", "NOT web@127.0.112.10").await;
    let terms = br
        .until_text("#terms-condition table", "the terms", |t| {
            t.contains("web@127.0.112.10")
        })
        .await;
    assert!(terms.contains("gtm1") && terms.contains("gtm2"), "{terms}");
    br.shot("scenario-form").await;
    preview_and_apply(
        &br,
        "+ scenario main-down: condition \"NOT web@127.0.112.10\"",
    )
    .await;

    // The domain's datacenters, in the domain's form.
    br.goto(&format!("{base}/ui/objects/domains")).await;
    br.click("tr[data-object=\"objects.test\"] a").await;
    br.until_path("the domain form", |p| p.contains("name=objects.test"))
        .await;
    choose(&br, "#f-mode", "disaster-recovery").await;
    choose(&br, "#f-main_dc", "dc1").await;
    choose(&br, "#f-dr_dc", "dc2").await;
    preview_and_apply(&br, "main_dc (unset) → \"dc1\"").await;
    br.shot("domain-form").await;

    // A DR record on them, its whole self in the dry run.
    br.goto(&format!("{base}/ui/records/edit?domain=objects.test"))
        .await;
    br.fill("f-name", "shop").await;
    choose(&br, "#f-dr_condition", "scenario:main-down").await;
    assert!(!hidden(&br, "f-dr_condition").await, "DR hidden in DR mode");
    let field = br
        .client
        .find(Locator::Css("input[name=a0_value]"))
        .await
        .expect("a row");
    field.send_keys("127.0.112.10").await.expect("typed");
    choose(&br, "select[name=a0_dc]", "dc1").await;
    choose(&br, "select[name=a0_hc]", "check:web").await;
    br.click("#add-row").await;
    br.until_attr("input[name=a1_value]", "name", "the added row", |n| {
        n == "a1_value"
    })
    .await;
    let field = br
        .client
        .find(Locator::Css("input[name=a1_value]"))
        .await
        .expect("a row");
    field.send_keys("127.0.112.20").await.expect("typed");
    choose(&br, "select[name=a1_dc]", "dc2").await;
    br.click("#preview").await;
    let diff = br
        .until_text("#diff", "the record's dry run", |t| t.contains("shop"))
        .await;
    assert!(
        diff.contains(
            "+ address 127.0.112.10 of record shop.objects.test/A: dc \"dc1\", hc \"check:web\""
        ),
        "{diff}"
    );
    assert!(
        diff.contains("dr_condition \"scenario:main-down\""),
        "{diff}"
    );
    br.shot("form-preview").await;
    br.click("#apply").await;
    br.until_text("#applied", "the apply", |t| {
        t.starts_with("Applied as version")
    })
    .await;
    until_answers(&a, "shop.objects.test.", &["127.0.112.10"]).await;
    until_answers(&b, "shop.objects.test.", &["127.0.112.10"]).await;

    // The backend fails: both devices answer from the DR DC, and the
    // Records list says so for each.
    web.stop().await;
    until_answers(&a, "shop.objects.test.", &["127.0.112.20"]).await;
    until_answers(&b, "shop.objects.test.", &["127.0.112.20"]).await;
    br.goto(&format!("{base}/ui/records?status=dr")).await;
    let summary = br
        .until_text(
            "tr[data-record=\"shop.objects.test/A\"] td.summary",
            "the summary",
            |t| t.contains("down on gtm1:") && t.contains("down on gtm2:"),
        )
        .await;
    assert!(summary.contains("Disaster recovery is on"), "{summary}");
    for device in ["gtm1", "gtm2"] {
        assert!(
            summary.contains(&format!("1 address down on {device}: 127.0.112.10 ")),
            "{summary}"
        );
    }

    // Explain walks the record on gtm2 to the answer DNS gives.
    br.goto(&format!(
        "{base}/ui/records/shop.objects.test/A/explain?device=gtm2&client=127.0.0.1"
    ))
    .await;
    let answer = br
        .until_text("#answer", "the explained answer", |t| !t.is_empty())
        .await;
    assert!(answer.contains("127.0.112.20"), "{answer}");
    br.shot("explain").await;

    // The dashboard counts the DR record on both devices, and lists the
    // warning of each.
    br.goto(&format!("{base}/ui/")).await;
    for device in ["gtm1", "gtm2"] {
        br.until_text(
            &format!("#by-status tr[data-status=\"DR\"] td[data-device=\"{device}\"]"),
            "one record in DR",
            |t| t == "1",
        )
        .await;
    }
    let recent = br
        .until_text("#recent", "the warnings", |t| {
            t.contains("gtm1") && t.contains("gtm2") && t.contains("shop.objects.test/A")
        })
        .await;
    assert!(recent.contains("warning"), "{recent}");
    br.shot("dashboard").await;

    // The topology of gtm2: the record in DR, one dashed line, to the DR
    // DC's address.
    br.goto(&format!("{base}/ui/topology?device=gtm2")).await;
    br.until_attr(
        "g[data-record=\"shop.objects.test/A\"]",
        "data-status",
        "shop in DR on gtm2",
        |s| s == "DR",
    )
    .await;
    br.until_attr(
        "path[data-from=\"shop.objects.test/A\"]",
        "data-to",
        "the line to the DR address",
        |t| t == "127.0.112.20",
    )
    .await;
    br.until_attr(
        "path[data-from=\"shop.objects.test/A\"]",
        "class",
        "drawn as DR",
        |c| c.contains("dr"),
    )
    .await;
    let h1 = br
        .until_text("h1", "the title", |t| t.contains("gtm2"))
        .await;
    assert!(h1.contains("what gtm2 answers"), "{h1}");
    br.shot("topology-pair").await;

    // A delete the configuration refuses says why; one it takes shows its
    // dry run first.
    br.goto(&format!("{base}/ui/objects/checks/web/delete"))
        .await;
    let refused = br
        .until_text("#form-errors", "the refusal", |t| !t.is_empty())
        .await;
    assert!(refused.contains("web"), "{refused}");
    br.goto(&format!("{base}/ui/objects/services/edit")).await;
    br.fill("f-name", "shop").await;
    br.fill("f-domains", "objects.test").await;
    preview_and_apply(&br, "+ service shop: domains [\"objects.test\"]").await;
    br.goto(&format!("{base}/ui/objects/services")).await;
    br.until_text("tr[data-object=\"shop\"]", "the service listed", |t| {
        t.contains("objects.test")
    })
    .await;
    br.shot("objects-list").await;
    br.click("tr[data-object=\"shop\"] a[href$=\"/delete\"]")
        .await;
    br.until_text("#diff", "the delete's dry run", |t| {
        t.contains("- service shop")
    })
    .await;
    br.shot("delete-preview").await;
    br.click("#confirm-delete").await;
    br.until_text("#applied", "deleted", |t| {
        t.starts_with("Deleted as version")
    })
    .await;
    br.goto(&format!("{base}/ui/objects/services")).await;
    br.until_text("main", "no service left", |t| {
        t.contains("No service is configured")
    })
    .await;

    // A remote device joins from its own console with the token gtm1's
    // console shows; gtm1 then lists it.
    let c = tokio::task::block_in_place(|| {
        Proc::start_with(root.path(), "gtm3", "dc2", "127.0.111.3", extra)
    });
    br.goto(&format!("{base}/ui/cluster")).await;
    br.click("form[action=\"/ui/cluster/token\"] button").await;
    let join_token = br
        .until_text("#join-token", "the join token", |t| !t.is_empty())
        .await;
    br.click(".who button").await;
    br.until_path("logged out", |p| p.starts_with("/ui/login"))
        .await;
    let token3 = std::fs::read_to_string(c.dir.join("api-token")).expect("gtm3's token");
    let base3 = c.api();
    br.login(&base3, token3.trim()).await;
    br.goto(&format!("{base3}/ui/cluster")).await;
    br.fill("address", &base).await;
    br.fill("token", &join_token).await;
    br.click("#join").await;
    let joined = br
        .until_text("#membership", "the join", |t| !t.is_empty())
        .await;
    assert_eq!(joined, "this device joined the cluster");
    until_answers(&c, "ns1.objects.test.", &["192.0.2.53"]).await;
    br.shot("cluster-joined").await;
    br.click(".who button").await;
    br.until_path("logged out", |p| p.starts_with("/ui/login"))
        .await;
    br.login(&base, token.trim()).await;
    br.goto(&format!("{base}/ui/cluster")).await;
    br.until_text("tr[data-device=\"gtm3\"]", "gtm3 a member", |t| {
        t.contains("dc2")
    })
    .await;
    br.close().await;
    drop((a, b, c));
}
