//! The `gtm` binary as an operator runs it.

use std::process::Command;

use crate::support::*;

fn gtm() -> Command {
    Command::new(env!("CARGO_BIN_EXE_gtm"))
}

#[test]
fn config_check_lists_every_error_with_its_path_and_fails() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("bad.toml");
    std::fs::write(
        &file,
        "[[domain]]\nname = \"example.test\"\nnameservers = [\"ns1.example.test\"]\n\n[[domain.record]]\nname = \"www\"\ntype = \"A\"\naddresses = [{ ip = \"192.0.2.1\" }, { ip = \"192.0.2.2\" }, { ip = \"192.0.2.3\", hc = \"scenario:dc2-up\" }]\n",
    )
    .unwrap();
    let out = gtm().args(["config", "check"]).arg(&file).output().unwrap();
    assert_eq!(out.status.code(), Some(2), "bad input exits 2");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains(
            "domain example.test / record www A / address 3: unknown scenario \"dc2-up\""
        ),
        "{stderr}"
    );

    let good = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("config/demo.toml");
    let out = gtm().args(["config", "check"]).arg(&good).output().unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Two syntax errors in two domains and two invalid IPs in two others: one
/// run lists all four, each with its line, value and object path.
#[test]
fn config_check_lists_every_syntax_and_type_error_in_one_run() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("bad.toml");
    let domain = |name: &str, ip: &str| {
        format!(
            "[[domain]]\nname = \"{name}\"\nnameservers = [\"ns1.{name}\"]\n\n\
             [[domain.record]]\nname = \"www\"\ntype = \"A\"\naddresses = [\n  {{ ip = \"192.0.2.1\" }},\n  {{ ip = \"{ip}\" }},\n]\n\n"
        )
    };
    let text = [
        // Line 4: `= =`.
        domain("a.test", "192.0.2.2")
            .replace("\n\n[[domain.record]]", "\nttl = = 5\n[[domain.record]]"),
        // Line 14: an unclosed string.
        domain("b.test", "192.0.2.2").replace("name = \"b.test\"", "name = \"b.test"),
        // Line 34.
        domain("c.test", "192.0.2.300"),
        // Line 46.
        domain("d.test", "2001:db8::zz"),
    ]
    .concat();
    std::fs::write(&file, &text).unwrap();
    let out = gtm().args(["config", "check"]).arg(&file).output().unwrap();
    assert_eq!(out.status.code(), Some(2), "bad input exits 2");
    let stderr = String::from_utf8_lossy(&out.stderr);
    let lines: Vec<&str> = stderr
        .lines()
        .filter(|l| l.contains("bad.toml: line "))
        .collect();
    assert_eq!(lines.len(), 4, "{stderr}");
    assert!(
        lines[0].contains("bad.toml: line 4: domain a.test: "),
        "{stderr}"
    );
    assert!(
        lines[1].contains("bad.toml: line 14: domain b.test: "),
        "{stderr}"
    );
    assert!(
        lines[2].ends_with(
            "bad.toml: line 34: domain c.test / record www A / address 2: ip: \"192.0.2.300\" is not an IP address"
        ),
        "{stderr}"
    );
    assert!(
        lines[3].ends_with(
            "bad.toml: line 46: domain d.test / record www A / address 2: ip: \"2001:db8::zz\" is not an IP address"
        ),
        "{stderr}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn config_apply_shows_the_diff_and_export_prints_it_back() {
    let d = TestDevice::start(ZONE).await;
    let data = d.dir.path().to_path_buf();
    let file = data.join("new.toml");
    let changed = ZONE
        .replace("{ ip = \"192.0.2.70\" }", "{ ip = \"192.0.2.71\" }")
        .replace("ttl = 30\nmain_dc", "ttl = 3600\nmain_dc");
    std::fs::write(&file, &changed).unwrap();

    let run = |args: &[&str]| {
        let out = gtm()
            .arg("--data-dir")
            .arg(&data)
            .args(args)
            .output()
            .unwrap();
        (
            out.status.code(),
            String::from_utf8_lossy(&out.stdout).to_string(),
            String::from_utf8_lossy(&out.stderr).to_string(),
        )
    };
    let file_s = file.to_str().unwrap();
    let (code, stdout, stderr) =
        tokio::task::block_in_place(|| run(&["config", "apply", "--dry-run", file_s]));
    assert_eq!(code, Some(0), "{stderr}");
    // Field by field: the domain's key, an address replaced in a record.
    assert_eq!(
        stdout.lines().collect::<Vec<_>>(),
        [
            "~ domain example.test: ttl 30 → 3600",
            "+ address 192.0.2.71 of record *.wild.example.test/A",
            "- address 192.0.2.70 of record *.wild.example.test/A",
            "dry run: nothing applied",
        ],
        "{stdout}"
    );
    let r = udp(
        d.v4(),
        &query(
            "x.wild.example.test.",
            hickory_server::proto::rr::RecordType::A,
        ),
    )
    .await;
    assert_eq!(answers(&r), ["192.0.2.70"], "a dry run changes nothing");

    let (code, stdout, stderr) = tokio::task::block_in_place(|| run(&["config", "apply", file_s]));
    assert_eq!(code, Some(0), "{stderr}");
    assert!(stdout.contains("applied as version 2"), "{stdout}");
    let r = udp(
        d.v4(),
        &query(
            "x.wild.example.test.",
            hickory_server::proto::rr::RecordType::A,
        ),
    )
    .await;
    assert_eq!(answers(&r), ["192.0.2.71"]);

    let (code, exported, _) = tokio::task::block_in_place(|| run(&["config", "export"]));
    assert_eq!(code, Some(0));
    assert_eq!(
        gtm::model::parse(&exported).unwrap(),
        gtm::model::parse(&changed).unwrap(),
        "export prints the applied configuration back"
    );

    // An invalid file is refused whole.
    std::fs::write(
        &file,
        ZONE.replace(
            "hc = \"check:web\" },\n  { ip = \"198.51",
            "hc = \"check:nope\" },\n  { ip = \"198.51",
        ),
    )
    .unwrap();
    let (code, _, stderr) = tokio::task::block_in_place(|| run(&["config", "apply", file_s]));
    assert_eq!(code, Some(2), "{stderr}");
    assert!(stderr.contains("unknown check \"nope\""), "{stderr}");
    let r = udp(
        d.v4(),
        &query(
            "x.wild.example.test.",
            hickory_server::proto::rr::RecordType::A,
        ),
    )
    .await;
    assert_eq!(answers(&r), ["192.0.2.71"], "nothing half-applied");

    let (code, stdout, _) = tokio::task::block_in_place(|| run(&["status"]));
    assert_eq!(code, Some(0));
    assert!(stdout.contains("dr.example.test/A"), "{stdout}");
}

#[test]
fn geoip_import_refuses_a_corrupt_file_and_keeps_the_old_one() {
    let rt = tokio::runtime::Runtime::new().unwrap();
    let d = rt.block_on(TestDevice::start(ZONE));
    let data = d.dir.path().to_path_buf();
    let bad = data.join("bad.mmdb");
    std::fs::write(&bad, b"garbage").unwrap();
    let good = data.join("good.mmdb");
    crate::geo::write_mmdb(&good);
    let run = |args: &[&str]| {
        gtm()
            .arg("--data-dir")
            .arg(&data)
            .args(args)
            .output()
            .unwrap()
    };

    let out = run(&["geoip", "import", good.to_str().unwrap()]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let out = run(&["geoip", "import", bad.to_str().unwrap()]);
    assert!(!out.status.success());
    assert!(String::from_utf8_lossy(&out.stderr).contains("the current database stays"));
    let out = run(&["geoip", "lookup", "81.2.69.1"]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.contains("DE") && stdout.contains("EU"), "{stdout}");
    rt.block_on(d.device.stop());
}

/// A device whose DNS address another program holds refuses to start, and
/// says which address.
#[test]
fn serve_refuses_to_start_without_its_dns_listener() {
    let taken = std::net::UdpSocket::bind("127.0.0.1:0").unwrap();
    let addr = taken.local_addr().unwrap();
    let dir = tempfile::tempdir().unwrap();
    let node = dir.path().join("node.toml");
    std::fs::write(
        &node,
        format!(
            "name = \"n1\"\ndatacenter = \"dc1\"\ndata_dir = \"{}\"\ndns_listen = [\"{addr}\"]\napi_listen = \"127.0.0.1:0\"\n",
            dir.path().display()
        ),
    )
    .unwrap();
    let out = gtm()
        .args(["serve", "--config"])
        .arg(&node)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains(&format!("cannot listen for DNS over UDP on {addr}")),
        "{stderr}"
    );
}
