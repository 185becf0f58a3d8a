//! A device on a full data filesystem: a real `gtm serve` process on a
//! small tmpfs that a filler file fills up. It starts from its stored
//! state, answers DNS over UDP throughout, reports the condition in
//! `gtm status`, `/health` and `/metrics`, refuses writes, and recovers by
//! itself when the space returns. A device on a read-only one serves from
//! a copy. And a device whose disk fails while it runs (an ext4 filesystem
//! that an error turns read-only): its Raft stops, it says so everywhere,
//! refuses writes, and catches up once repaired and restarted.

use std::{
    io::Write,
    path::{Path, PathBuf},
    process::Command,
    time::{Duration, Instant},
};

use crate::cluster::{Proc, until_answer, zone};

/// A tmpfs mounted for one test, unmounted when dropped (also when the
/// test fails).
struct Tmpfs(PathBuf);

impl Tmpfs {
    /// Mounts one, or says why it cannot (not root, no mount command).
    fn mount(dir: &Path, size: &str) -> Result<Self, String> {
        std::fs::create_dir_all(dir).map_err(|e| e.to_string())?;
        let out = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
            .arg(dir)
            .output()
            .map_err(|e| format!("mount: {e}"))?;
        if !out.status.success() {
            return Err(String::from_utf8_lossy(&out.stderr).into_owned());
        }
        Ok(Self(dir.to_path_buf()))
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        // Lazy: the filesystem goes even if something still holds a file.
        let _ = Command::new("umount").arg("-l").arg(&self.0).status();
    }
}

/// A 32 MiB tmpfs under `root`; `None` (skipped) only outside CI when
/// mounting is not allowed.
fn small_tmpfs(root: &tempfile::TempDir) -> Option<Tmpfs> {
    match Tmpfs::mount(&root.path().join("data"), "32m") {
        Ok(t) => Some(t),
        Err(e) if std::env::var_os("CI").is_none() => {
            eprintln!("skipped: cannot mount a tmpfs here ({e})");
            None
        }
        Err(e) => panic!("cannot mount a tmpfs (CI runs as root): {e}"),
    }
}

/// Writes zeros into `path` until the filesystem is full.
fn fill(path: &Path) {
    let mut file = std::fs::File::create(path).unwrap();
    for chunk in [1 << 20, 4 << 10, 512] {
        let zeros = vec![0u8; chunk];
        while file.write_all(&zeros).is_ok() {}
    }
    let _ = file.sync_all();
}

async fn get(url: &str) -> String {
    let http = gtm_node::tls::http_client(None, Duration::from_secs(5)).unwrap();
    http.get(url).send().await.unwrap().text().await.unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_device_on_a_full_disk_serves_degraded_and_recovers() {
    let root = tempfile::tempdir().unwrap();
    let Some(tmpfs) = small_tmpfs(&root) else {
        return;
    };
    let mut d = Proc::start(&tmpfs.0, "gtm1", "dc1", "127.0.93.1");
    d.apply_ok(&zone("192.0.2.50"));
    until_answer(&d, "192.0.2.50").await;
    let reserve = d.dir.join("storage-reserve");
    let deadline = Instant::now() + Duration::from_secs(20);
    while !reserve.exists() {
        assert!(Instant::now() < deadline, "the reserve was never made");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }

    // Fill the filesystem while the device is down, then start it again:
    // it must serve its stored configuration.
    d.kill();
    let filler = tmpfs.0.join("filler");
    fill(&filler);
    d.restart();
    until_answer(&d, "192.0.2.50").await;

    let status = d.ok(&["status"]);
    assert!(status.contains("DEGRADED storage"), "{status}");
    assert!(status.contains("No space left on device"), "{status}");
    assert!(status.contains(&d.dir.display().to_string()), "{status}");
    let json: serde_json::Value = serde_json::from_str(&d.ok(&["status", "--json"])).unwrap();
    assert!(
        json["storage_degraded"]["error"]
            .as_str()
            .is_some_and(|e| e.contains("No space left")),
        "{json}"
    );
    let health = get(&format!("{}/health", d.api())).await;
    assert!(health.starts_with("degraded\nstorage: "), "{health}");
    let metrics = get(&format!("{}/metrics", d.api())).await;
    assert!(
        metrics.contains("gtm_storage_degraded{device=\"gtm1\"} 1"),
        "{metrics}"
    );

    // Writes are refused with the reason; nothing changes, DNS goes on.
    let refused = d.apply(&zone("192.0.2.51"));
    assert_eq!(refused.status.code(), Some(1), "{refused:?}");
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(
        stderr.contains("No space left on device") && stderr.contains("nothing was changed"),
        "{stderr}"
    );
    until_answer(&d, "192.0.2.50").await;

    // Space returns: the condition clears by itself and writes work again.
    std::fs::remove_file(&filler).unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        until_answer(&d, "192.0.2.50").await;
        if !d.ok(&["status"]).contains("DEGRADED") {
            break;
        }
        assert!(Instant::now() < deadline, "the condition never cleared");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let metrics = get(&format!("{}/metrics", d.api())).await;
    assert!(
        metrics.contains("gtm_storage_degraded{device=\"gtm1\"} 0"),
        "{metrics}"
    );
    assert_eq!(get(&format!("{}/health", d.api())).await, "ok\n");
    d.apply_ok(&zone("192.0.2.51"));
    until_answer(&d, "192.0.2.51").await;

    // The filesystem fills while the device runs: it notices by itself.
    fill(&filler);
    let deadline = Instant::now() + Duration::from_secs(30);
    while !d.ok(&["status"]).contains("DEGRADED storage") {
        until_answer(&d, "192.0.2.51").await;
        assert!(Instant::now() < deadline, "a full disk was never noticed");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert!(!d.apply(&zone("192.0.2.52")).status.success());
    std::fs::remove_file(&filler).unwrap();
    let deadline = Instant::now() + Duration::from_secs(30);
    while d.ok(&["status"]).contains("DEGRADED") {
        assert!(Instant::now() < deadline, "the condition never cleared");
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    until_answer(&d, "192.0.2.51").await;
    d.kill();
}

/// Remounts the test's tmpfs read-only or read-write.
fn remount(tmpfs: &Tmpfs, mode: &str) {
    let out = Command::new("mount")
        .args(["-o", &format!("remount,{mode}")])
        .arg(&tmpfs.0)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "remount {mode}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_device_started_on_a_read_only_disk_serves_from_a_copy_and_recovers() {
    let root = tempfile::tempdir().unwrap();
    let Some(tmpfs) = small_tmpfs(&root) else {
        return;
    };
    let mut d = Proc::start(&tmpfs.0, "gtm1", "dc1", "127.0.93.2");
    // A one-device cluster: its Raft must not run on the copy.
    d.ok(&["cluster", "init"]);
    let backend = std::net::TcpListener::bind("127.0.93.9:0").unwrap();
    let port = backend.local_addr().unwrap().port();
    let config = format!(
        "[[check]]\nname = \"backend\"\ntype = \"tcp\"\ntarget = \"127.0.93.9\"\nport = {port}\ninterval = \"500ms\"\ntimeout = \"300ms\"\nfailures = 1\nsuccesses = 1\n\n{}",
        zone("192.0.2.60")
    );
    d.apply_ok(&config);
    until_answer(&d, "192.0.2.60").await;
    let check_state = |d: &Proc| -> String {
        let checks: serde_json::Value =
            serde_json::from_str(&d.ok(&["check", "list", "--json"])).unwrap();
        checks[0]["state"].as_str().unwrap_or_default().to_string()
    };
    let deadline = Instant::now() + Duration::from_secs(20);
    while check_state(&d) != "OK" {
        assert!(Instant::now() < deadline, "the check never went OK");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }

    // The filesystem turns read-only while the device is down, and the
    // backend goes: the device starts, answers from its stored state, and
    // the check's change is logged though nothing can be written.
    d.kill();
    remount(&tmpfs, "ro");
    drop(backend);
    d.restart();
    until_answer(&d, "192.0.2.60").await;
    let status = d.ok(&["status"]);
    assert!(status.contains("DEGRADED storage"), "{status}");
    assert!(status.contains("Read-only file system"), "{status}");
    assert!(status.contains("copy of its store"), "{status}");
    let health = get(&format!("{}/health", d.api())).await;
    assert!(health.starts_with("degraded\nstorage: "), "{health}");
    // (The file is written outside the read-only filesystem.)
    let file = root.path().join("apply.toml");
    std::fs::write(&file, zone("192.0.2.61")).unwrap();
    let refused = d.gtm(&["config", "apply", file.to_str().unwrap()]);
    assert_eq!(refused.status.code(), Some(1), "{refused:?}");
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(
        stderr.contains("Read-only file system") && stderr.contains("nothing was changed"),
        "{stderr}"
    );
    let deadline = Instant::now() + Duration::from_secs(20);
    while check_state(&d) == "OK" {
        assert!(Instant::now() < deadline, "the check never left OK");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    until_answer(&d, "192.0.2.60").await;

    // Writable again: the device restarts on its own store by itself, with
    // the event it logged meanwhile, and Raft takes writes again.
    remount(&tmpfs, "rw");
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let out = d.gtm(&["status"]);
        let text = String::from_utf8_lossy(&out.stdout);
        if out.status.success() && !text.contains("DEGRADED") {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the device never recovered: {text}"
        );
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    let logs = d.ok(&["logs", "--kind", "check"]);
    // The backend was up until the filesystem turned read-only: its Error
    // was logged while nothing could be written.
    assert!(
        logs.lines()
            .any(|l| l.contains("check backend: ") && l.contains("→ Error")),
        "{logs}"
    );
    d.apply_ok(&zone("192.0.2.61"));
    until_answer(&d, "192.0.2.61").await;
    d.kill();
}

/// An ext4 filesystem in a file under the test's directory, on a loop
/// device, mounted with `errors=remount-ro`: an error turns it read-only
/// as a failing disk does. Unmounted and released when dropped (also when
/// the test fails).
struct Ext4 {
    dir: PathBuf,
    image: PathBuf,
    loop_dev: Option<String>,
}

impl Ext4 {
    /// Makes and mounts one, or says why it cannot (not root, no loop
    /// device, no mkfs.ext4).
    fn mount(root: &Path) -> Result<Self, String> {
        let image = root.join("ext4.img");
        let dir = root.join("ext4");
        std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
        std::fs::File::create(&image)
            .and_then(|f| f.set_len(64 << 20))
            .map_err(|e| e.to_string())?;
        run(
            "mkfs.ext4",
            &["-q", "-F", image.to_str().unwrap_or_default()],
        )?;
        let mut fs = Self {
            dir,
            image,
            loop_dev: None,
        };
        let dev = run(
            "losetup",
            &["-f", "--show", fs.image.to_str().unwrap_or_default()],
        )?;
        fs.loop_dev = Some(dev.trim().to_string());
        fs.mount_again()?;
        Ok(fs)
    }

    fn mount_again(&self) -> Result<(), String> {
        let dev = self.loop_dev.as_deref().unwrap_or_default();
        run(
            "mount",
            &[
                "-t",
                "ext4",
                "-o",
                "errors=remount-ro",
                dev,
                self.dir.to_str().unwrap_or_default(),
            ],
        )
        .map(drop)
    }

    /// Makes the kernel record an error on the filesystem, as a failing
    /// disk would: with `errors=remount-ro` it turns read-only at once.
    /// `written`, a file the test wrote there, is flushed first (a device
    /// flushes its own store, not the files written for it).
    fn fail(&self, written: &Path) {
        let synced = std::fs::File::open(written).and_then(|f| f.sync_all());
        assert!(synced.is_ok(), "{synced:?}");
        let dev = self.loop_dev.as_deref().unwrap_or_default();
        let name = Path::new(dev).file_name().unwrap().to_str().unwrap();
        std::fs::write(
            format!("/sys/fs/ext4/{name}/trigger_fs_error"),
            "gtm test: a failing disk",
        )
        .unwrap();
        // (Newer kernels show it as the `emergency_ro` mount option.)
        let written = std::fs::write(self.dir.join("probe"), "x");
        assert_eq!(
            written.map_err(|e| e.raw_os_error()),
            Err(Some(libc::EROFS)),
            "the filesystem did not turn read-only"
        );
    }

    /// What an operator does after such an error: unmount, check (and
    /// repair) the filesystem, mount it again.
    fn repair(&self) {
        run("umount", &[self.dir.to_str().unwrap()]).unwrap();
        let dev = self.loop_dev.as_deref().unwrap_or_default();
        // Exit codes 0-2: clean, or errors corrected.
        let status = Command::new("e2fsck")
            .args(["-f", "-y", dev])
            .status()
            .unwrap();
        assert!(status.code().is_some_and(|c| c <= 2), "e2fsck: {status}");
        self.mount_again().unwrap();
    }
}

/// Runs `program args`; its stdout, or why it failed.
fn run(program: &str, args: &[&str]) -> Result<String, String> {
    let out = Command::new(program)
        .args(args)
        .output()
        .map_err(|e| format!("{program}: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "{program} {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

impl Drop for Ext4 {
    fn drop(&mut self) {
        // Lazy: the filesystem goes even if something still holds a file.
        let _ = Command::new("umount").arg("-l").arg(&self.dir).status();
        if let Some(dev) = &self.loop_dev {
            let _ = Command::new("losetup").args(["-d", dev]).status();
        }
    }
}

/// Waits (bounded) until `p`'s `gtm status` satisfies `pred`.
fn until_status(p: &Proc, what: &str, pred: impl Fn(&str) -> bool) -> String {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let out = p.gtm(&["status"]);
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        if out.status.success() && pred(&text) {
            return text;
        }
        assert!(
            Instant::now() < deadline,
            "{}: never {what}: {text}",
            p.name
        );
        std::thread::sleep(Duration::from_millis(100));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_device_whose_raft_storage_fails_says_so_and_takes_no_write() {
    let root = tempfile::tempdir().unwrap();
    let ext4 = match Ext4::mount(root.path()) {
        Ok(fs) => fs,
        Err(e) if std::env::var_os("CI").is_none() => {
            eprintln!("skipped: cannot mount an ext4 loop filesystem here ({e})");
            return;
        }
        Err(e) => panic!("cannot mount an ext4 loop filesystem (CI runs as root): {e}"),
    };
    // gtm1 leads on an ordinary directory; gtm2, a learner (the leader
    // commits without it), keeps its store on the ext4 filesystem.
    let leader = Proc::start(root.path(), "gtm1", "dc1", "127.0.97.1");
    let mut d = Proc::start(&ext4.dir, "gtm2", "dc1", "127.0.97.2");
    leader.ok(&["cluster", "init"]);
    let token = leader.ok(&["cluster", "token"]);
    d.ok(&[
        "cluster",
        "join",
        &leader.api(),
        "--token",
        token.trim(),
        "--learner",
    ]);
    leader.apply_ok(&zone("192.0.2.70"));
    until_answer(&d, "192.0.2.70").await;

    // Every worker is listed, none failed.
    let json: serde_json::Value = serde_json::from_str(&d.ok(&["status", "--json"])).unwrap();
    let workers = json["workers"].as_array().unwrap();
    for name in [
        "dns-udp 127.0.97.2:1053 #0",
        "dns-tcp 127.0.97.2:1053",
        "store-writer",
        "health-scheduler",
        "raft",
        "raft-install",
        "schedule",
        "dnssec",
        "cookie-secret",
        "notify",
        "peers",
        "geoip-refresh",
        "api",
    ] {
        let w = workers
            .iter()
            .find(|w| w["name"] == name)
            .unwrap_or_else(|| panic!("no worker {name}: {json}"));
        assert_eq!(w["state"], "running", "{w}");
    }
    assert!(json.get("cluster_degraded").is_none(), "{json}");
    let metrics = get(&format!("{}/metrics", d.api())).await;
    assert!(
        metrics.contains("gtm_worker_up{device=\"gtm2\",worker=\"raft\"} 1"),
        "{metrics}"
    );
    assert!(
        metrics.contains("gtm_raft_failed{device=\"gtm2\"} 0"),
        "{metrics}"
    );

    // The disk fails under the running device; the leader's next write
    // reaches its Raft, whose log cannot be written.
    ext4.fail(&d.dir.join("node.toml"));
    leader.apply_ok(&zone("192.0.2.71"));
    until_answer(&leader, "192.0.2.71").await;
    let status = until_status(&d, "degraded", |s| s.contains("DEGRADED cluster"));
    assert!(status.contains("Raft storage failed"), "{status}");
    assert!(status.contains("refuses writes"), "{status}");
    assert!(
        status
            .lines()
            .any(|l| l.starts_with("raft ") && l.contains("failed")),
        "{status}"
    );
    let health = get(&format!("{}/health", d.api())).await;
    assert!(health.starts_with("degraded\n"), "{health}");
    assert!(
        health.contains("\ncluster: Raft storage failed"),
        "{health}"
    );
    let metrics = get(&format!("{}/metrics", d.api())).await;
    assert!(
        metrics.contains("gtm_raft_failed{device=\"gtm2\"} 1"),
        "{metrics}"
    );
    assert!(
        metrics.contains("gtm_worker_up{device=\"gtm2\",worker=\"raft\"} 0"),
        "{metrics}"
    );
    let json: serde_json::Value = serde_json::from_str(&d.ok(&["status", "--json"])).unwrap();
    let raft = json["workers"]
        .as_array()
        .unwrap()
        .iter()
        .find(|w| w["name"] == "raft")
        .unwrap()
        .clone();
    assert_eq!(raft["state"], "failed", "{json}");
    assert!(
        raft["last_error"]
            .as_str()
            .is_some_and(|e| e.starts_with("Raft storage failed")),
        "{raft}"
    );

    // A write sent to it is refused with the reason, at once: it is not
    // forwarded, and never answered "applied".
    let http = gtm_node::tls::http_client(None, Duration::from_secs(30)).unwrap();
    let token = std::fs::read_to_string(d.dir.join("api-token")).unwrap();
    let answer = http
        .put(format!("{}/api/v1/config", d.api()))
        .bearer_auth(token.trim())
        .body(zone("192.0.2.72"))
        .send()
        .await
        .unwrap();
    assert_eq!(answer.status().as_u16(), 503);
    let body: serde_json::Value = answer.json().await.unwrap();
    assert_eq!(body["error"], "storage", "{body}");
    let message = body["message"].as_str().unwrap();
    assert!(
        message.contains("Raft storage failed") && message.contains("nothing was applied"),
        "{message}"
    );
    // (The file is written outside the read-only filesystem.)
    let file = root.path().join("apply.toml");
    std::fs::write(&file, zone("192.0.2.72")).unwrap();
    let refused = d.gtm(&["config", "apply", file.to_str().unwrap()]);
    assert!(!refused.status.success(), "{refused:?}");
    let stderr = String::from_utf8_lossy(&refused.stderr);
    assert!(stderr.contains("Raft storage failed"), "{stderr}");
    // Nothing of it anywhere; the failed device serves what it installed.
    until_answer(&leader, "192.0.2.71").await;
    until_answer(&d, "192.0.2.70").await;

    // Repaired (stopped, checked, mounted again) and started: it catches
    // up with what the cluster committed meanwhile, and is healthy.
    d.kill();
    ext4.repair();
    d.restart();
    until_answer(&d, "192.0.2.71").await;
    until_status(&d, "healthy again", |s| !s.contains("DEGRADED"));
    assert_eq!(get(&format!("{}/health", d.api())).await, "ok\n");
    let answer = http
        .put(format!("{}/api/v1/config", d.api()))
        .bearer_auth(token.trim())
        .body(zone("192.0.2.73"))
        .send()
        .await
        .unwrap();
    assert_eq!(answer.status().as_u16(), 200);
    let body: serde_json::Value = answer.json().await.unwrap();
    assert_eq!(body["applied"], true, "{body}");
    assert_eq!(body["installed"], true, "{body}");
    until_answer(&leader, "192.0.2.73").await;
    until_answer(&d, "192.0.2.73").await;
    d.kill();
    drop(leader);
}
