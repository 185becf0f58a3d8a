//! The node file from the command line: `gtm node check`, and the CLI
//! finding an installed device through the node file's `data_dir`.

use std::{
    path::{Path, PathBuf},
    process::Command,
};

use crate::support::*;

/// `gtm` with none of the environment that would choose a device or a node
/// file for it, and a home with nothing in it.
fn gtm(home: &Path) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_gtm"));
    for var in [
        "GTM_DATA_DIR",
        "GTM_API",
        "GTM_TOKEN",
        "GTM_CA",
        "GTM_NODE_FILE",
    ] {
        c.env_remove(var);
    }
    c.env("HOME", home);
    c
}

/// A node file of a device with its data in `data`, on loopback, and
/// `extra` lines; its path.
fn node_file(dir: &Path, name: &str, data: &Path, extra: &str) -> PathBuf {
    let file = dir.join(name);
    std::fs::write(
        &file,
        format!(
            "name = \"n1\"\ndatacenter = \"dc1\"\ndata_dir = \"{}\"\ndns_listen = [\"127.0.0.1:0\"]\napi_listen = \"127.0.0.1:0\"\n{extra}",
            data.display()
        ),
    )
    .unwrap();
    file
}

struct Out {
    code: Option<i32>,
    stdout: String,
    stderr: String,
}

fn run(mut c: Command) -> Out {
    let out = c.output().unwrap();
    Out {
        code: out.status.code(),
        stdout: String::from_utf8_lossy(&out.stdout).into(),
        stderr: String::from_utf8_lossy(&out.stderr).into(),
    }
}

#[test]
fn node_check_passes_a_good_file_and_names_the_key_of_a_bad_one() {
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path();
    let data = dir.path().join("data");
    let check = |file: &Path| {
        let mut c = gtm(home);
        c.args(["node", "check"]).arg(file);
        run(c)
    };

    let good = node_file(dir.path(), "good.toml", &data, "");
    let out = check(&good);
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    assert_eq!(out.stdout, format!("node file {}: ok\n", good.display()));
    assert!(!data.exists(), "a check makes no data directory");
    // Without FILE: GTM_NODE_FILE.
    let mut c = gtm(home);
    c.args(["node", "check"]).env("GTM_NODE_FILE", &good);
    let out = run(c);
    assert_eq!(out.code, Some(0), "{}", out.stderr);

    // An unknown key: the parser's error, with the file, line and key.
    let unknown = node_file(dir.path(), "unknown.toml", &data, "listen_dns = 53\n");
    let out = check(&unknown);
    assert_eq!(out.code, Some(2), "bad input exits 2: {}", out.stderr);
    assert!(
        out.stderr.contains(&format!(
            "{}: line 6: node setting listen_dns: unknown field `listen_dns`",
            unknown.display()
        )),
        "{}",
        out.stderr
    );

    // A listen address without its port.
    let listen = dir.path().join("listen.toml");
    std::fs::write(
        &listen,
        std::fs::read_to_string(&good)
            .unwrap()
            .replace("api_listen = \"127.0.0.1:0\"", "api_listen = \"127.0.0.1\""),
    )
    .unwrap();
    let out = check(&listen);
    assert_eq!(out.code, Some(2), "{}", out.stderr);
    assert!(
        out.stderr.contains(&format!(
            "{}: line 5: node setting api_listen: ",
            listen.display()
        )),
        "{}",
        out.stderr
    );

    // What serve checks before it binds, each problem with its key, all in
    // one run: a data_dir that is a file, TLS files that do not read.
    let file = dir.path().join("a-file");
    std::fs::write(&file, "").unwrap();
    let missing = dir.path().join("missing.pem");
    let settings = node_file(
        dir.path(),
        "settings.toml",
        &file,
        &format!("tls_cert = \"{0}\"\ntls_key = \"{0}\"\n", missing.display()),
    );
    let out = check(&settings);
    assert_eq!(out.code, Some(2), "{}", out.stderr);
    for wanted in [
        format!(
            "{}: node setting data_dir: {} exists and is not a directory",
            settings.display(),
            file.display()
        ),
        format!(
            "{}: node setting tls_cert: cannot read the TLS certificate {}",
            settings.display(),
            missing.display()
        ),
    ] {
        assert!(out.stderr.contains(&wanted), "{wanted}\n{}", out.stderr);
    }

    // TLS files that load pass; a key of another certificate is named.
    let (one, two) = (
        rcgen::generate_simple_self_signed(vec!["127.0.0.1".into()]).unwrap(),
        rcgen::generate_simple_self_signed(vec!["127.0.0.1".into()]).unwrap(),
    );
    let (cert, key, other) = (
        dir.path().join("cert.pem"),
        dir.path().join("key.pem"),
        dir.path().join("other-key.pem"),
    );
    std::fs::write(&cert, one.cert.pem()).unwrap();
    std::fs::write(&key, one.signing_key.serialize_pem()).unwrap();
    std::fs::write(&other, two.signing_key.serialize_pem()).unwrap();
    let tls = |name: &str, key: &Path| {
        node_file(
            dir.path(),
            name,
            &data,
            &format!(
                "tls_cert = \"{}\"\ntls_key = \"{}\"\n",
                cert.display(),
                key.display()
            ),
        )
    };
    let out = check(&tls("tls.toml", &key));
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    let mismatched = tls("mismatched.toml", &other);
    let out = check(&mismatched);
    assert_eq!(out.code, Some(2), "{}", out.stderr);
    assert!(
        out.stderr.contains(&format!(
            "{}: node setting tls_key: the TLS certificate and key do not match",
            mismatched.display()
        )),
        "{}",
        out.stderr
    );

    // A node file that is not there.
    let out = check(&dir.path().join("none.toml"));
    assert_eq!(out.code, Some(2), "{}", out.stderr);
    assert!(out.stderr.contains("none.toml"), "{}", out.stderr);
}

/// With neither --data-dir nor GTM_DATA_DIR, the CLI reads the node file
/// (GTM_NODE_FILE standing in for /etc/gtm/node.toml) for the device's
/// data directory; a node file that does not parse is an error naming it,
/// unless --data-dir is given.
#[tokio::test(flavor = "multi_thread")]
async fn the_cli_finds_the_device_of_the_node_file() {
    let d = TestDevice::start(ZONE).await;
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path();
    let node = node_file(dir.path(), "node.toml", d.dir.path(), "");
    let status = |node: &Path, data_dir: Option<&Path>| {
        let mut c = gtm(home);
        if let Some(data) = data_dir {
            c.arg("--data-dir").arg(data);
        }
        c.arg("status").env("GTM_NODE_FILE", node);
        tokio::task::block_in_place(|| run(c))
    };

    let out = status(&node, None);
    assert_eq!(out.code, Some(0), "{}", out.stderr);
    assert!(out.stdout.contains("dr.example.test/A"), "{}", out.stdout);

    let broken = node_file(dir.path(), "broken.toml", d.dir.path(), "bogus = 1\n");
    let out = status(&broken, None);
    assert_eq!(out.code, Some(2), "{}", out.stderr);
    assert!(
        out.stderr
            .contains(&format!("{}: line 6: node setting bogus", broken.display())),
        "{}",
        out.stderr
    );
    let out = status(&broken, Some(d.dir.path()));
    assert_eq!(
        out.code,
        Some(0),
        "--data-dir needs no node file: {}",
        out.stderr
    );

    // No node file: the default directory, in the (empty) home.
    let out = status(&dir.path().join("none.toml"), None);
    assert_eq!(out.code, Some(3), "{}", out.stderr);
    assert!(out.stderr.contains(".local/share/gtm"), "{}", out.stderr);
    d.device.stop().await;
}
