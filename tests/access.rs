//! Accounts and roles (docs/access.md): what each role may do on every
//! route, named tokens, and accounts as replicated state on a real pair.

use std::{
    io::Write,
    process::{Command, Stdio},
    time::{Duration, Instant},
};

use gtm_api::routes::{Access, operations};
use gtm_node::access::Role;
use reqwest::Method;

use crate::{cluster::Proc, support::*};

const ZONE: &str = r#"
[[datacenter]]
name = "dc1"

[[check]]
name = "maint"
type = "manual"

[[domain]]
name = "example.test"
nameservers = ["ns1.example.test"]

[[domain.record]]
name = "www"
type = "A"
addresses = [{ ip = "192.0.2.10", dc = "dc1" }]
"#;

/// Makes a named token through the API with the device's own token.
async fn token(http: &reqwest::Client, base: &str, admin: &str, name: &str, role: &str) -> String {
    let made: serde_json::Value = http
        .post(format!("{base}/api/v1/tokens"))
        .bearer_auth(admin)
        .json(&serde_json::json!({"name": name, "role": role}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    made["token"].as_str().expect("a token").to_string()
}

/// Every route that changes something refuses a viewer (403 `forbidden`,
/// nothing changed); every route that only reads answers it; admin routes
/// refuse an operator; operator routes let an operator through the guard.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_route_admits_exactly_the_roles_it_names() {
    let d = TestDevice::start(ZONE).await;
    let http = gtm_node::tls::http_client(None, None).unwrap();
    let base = format!("http://{}", d.device.api_addr);
    let admin = d.device.token.clone();
    let viewer = token(&http, &base, &admin, "view", "viewer").await;
    let operator = token(&http, &base, &admin, "ops", "operator").await;
    let reporter = token(&http, &base, &admin, "rep", "reporter").await;
    let version_before = run_gtm(&d, &["config", "export"]).stdout;
    let mut checked = 0;
    for op in operations() {
        if op.access != Access::Token {
            continue;
        }
        let path = op
            .path
            .split('/')
            .map(|seg| if seg.starts_with('{') { "x" } else { seg })
            .collect::<Vec<_>>()
            .join("/");
        let url = format!("{base}{path}");
        for (who, role) in [
            (&reporter, Role::Reporter),
            (&viewer, Role::Viewer),
            (&operator, Role::Operator),
        ] {
            let status = http
                .request(op.method.clone(), &url)
                .bearer_auth(who)
                .send()
                .await
                .unwrap()
                .status();
            if role >= op.role {
                assert!(
                    status != 401 && status != 403,
                    "{} {path}: a {role} is refused ({status})",
                    op.method
                );
            } else {
                assert_eq!(status, 403, "{} {path}: a {role} is let through", op.method);
                checked += 1;
            }
        }
        if op.method == Method::GET
            && op.path != "/api/v1/cluster/token"
            && op.path != "/api/v1/accounts"
            && op.path != "/api/v1/tsig"
            && op.path != "/api/v1/whoami"
        {
            assert_eq!(op.role, Role::Viewer, "{path} reads: a viewer may");
        }
    }
    assert!(checked > 40, "most routes change something: {checked}");
    assert_eq!(
        run_gtm(&d, &["config", "export"]).stdout,
        version_before,
        "nothing refused changed the configuration"
    );
    // The refusal says who and what is needed.
    let refused: serde_json::Value = http
        .put(format!("{base}/api/v1/config"))
        .bearer_auth(&operator)
        .body(ZONE)
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    assert_eq!(refused["error"], "forbidden");
    assert_eq!(
        refused["message"],
        "ops has the role operator; this needs admin"
    );
    // An operator's action is recorded under its name.
    let set = http
        .put(format!("{base}/api/v1/checks/maint/state"))
        .bearer_auth(&operator)
        .json(&serde_json::json!({"state": "ok"}))
        .send()
        .await
        .unwrap();
    assert_eq!(set.status(), 200);
    let logs = run_gtm(&d, &["logs", "--kind", "operator"]);
    assert!(logs.stdout.contains("(ops on test1)"), "{}", logs.stdout);
    assert!(
        logs.stdout
            .contains("token ops created (role operator) (admin on test1)"),
        "{}",
        logs.stdout
    );
    // Accounts list names and roles, never a secret.
    let listed = run_gtm(&d, &["token", "list", "--json"]).stdout;
    assert!(
        listed.contains("\"ops\"") && listed.contains("\"view\""),
        "{listed}"
    );
    assert!(
        !listed.contains("digest") && !listed.contains(&operator[5..]),
        "{listed}"
    );
}

/// `gtm` with `--api-token` (a named token) against `p`.
fn gtm_as(p: &Proc, token: &str, args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_gtm"))
        .arg("--data-dir")
        .arg(&p.dir)
        .arg("--api-token")
        .arg(token)
        .args(args)
        .output()
        .unwrap()
}

fn eventually_as(p: &Proc, token: &str, args: &[&str]) -> String {
    let deadline = Instant::now() + Duration::from_secs(40);
    loop {
        let out = gtm_as(p, token, args);
        if out.status.success() {
            return String::from_utf8_lossy(&out.stdout).into();
        }
        assert!(
            Instant::now() < deadline,
            "gtm {args:?} on {}: {}",
            p.name,
            String::from_utf8_lossy(&out.stderr)
        );
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// Accounts made through one device of a pair work on the other, after a
/// restart too; a token revoked through one is refused by both; a user is
/// added with its password on standard input.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn accounts_are_replicated_and_survive_a_restart() {
    tokio::task::block_in_place(|| {
        let root = tempfile::tempdir().unwrap();
        let a = Proc::start(root.path(), "gtm1", "dc1", "127.0.83.1");
        let mut b = Proc::start(root.path(), "gtm2", "dc1", "127.0.83.2");
        a.ok(&["cluster", "init"]);
        b.join(&a);

        let ci = a.ok(&["token", "create", "ci", "--role", "operator"]);
        let ci = ci.trim();
        assert!(ci.starts_with("gtm1.ci."), "{ci}");
        let me = eventually_as(&b, ci, &["whoami"]);
        assert_eq!(me.trim(), "ci (operator) on gtm2");

        // The operator may not change the configuration: exit 2, and why.
        let out = gtm_as(&b, ci, &["config", "apply", "/dev/null"]);
        assert_eq!(out.status.code(), Some(2));
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.contains("ci has the role operator; this needs admin"),
            "{err}"
        );

        // A user, its password read from standard input.
        let mut add = Command::new(env!("CARGO_BIN_EXE_gtm"))
            .arg("--data-dir")
            .arg(&b.dir)
            .args(["user", "add", "ann", "--role", "viewer"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        add.stdin
            .take()
            .unwrap()
            .write_all(b"a long enough password\n")
            .unwrap();
        let out = add.wait_with_output().unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let users = a.ok(&["user", "list"]);
        assert!(users.contains("ann") && users.contains("viewer"), "{users}");
        assert!(users.contains("admin on gtm2"), "{users}");

        // B restarted: the token still works there.
        b.kill();
        b.restart();
        let me = eventually_as(&b, ci, &["whoami"]);
        assert_eq!(me.trim(), "ci (operator) on gtm2");

        // Revoked through B: A refuses it too.
        b.ok(&["token", "revoke", "ci"]);
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let out = gtm_as(&a, ci, &["whoami"]);
            if out.status.code() == Some(2) {
                let err = String::from_utf8_lossy(&out.stderr);
                assert!(err.contains("the bearer token is wrong"), "{err}");
                break;
            }
            assert!(Instant::now() < deadline, "A still accepts a revoked token");
            std::thread::sleep(Duration::from_millis(100));
        }
    });
}
