//! The devices under test and the network between them: `gtm serve`
//! processes under their own group ids, and the nftables table whose rules
//! cut them off from each other.

use std::{
    fs::OpenOptions,
    path::{Path, PathBuf},
    process::{Child, Command, Output, Stdio},
};

/// The blocks of loopback addresses no other test uses, one per test of
/// this harness (they run side by side).
pub(super) const NET: &str = "127.0.77";
pub(super) const NET_INSTALLED: &str = "127.0.78";
pub(super) const NET_SILENCE: &str = "127.0.79";
/// One group id per device: the partitions match it (`meta skgid`).
const GIDS: [u32; 3] = [64001, 64002, 64003];

/// A `gtm serve` process under its own group id, killed by its PID when
/// dropped (even if it is stopped).
pub(super) struct Device {
    pub(super) name: String,
    ip: String,
    gid: u32,
    pub(super) dir: PathBuf,
    node: PathBuf,
    child: Option<Child>,
}

impl Device {
    /// Device `index` (from 0) at `<net>.<index + 1>`.
    pub(super) fn new(net: &str, root: &Path, index: usize, dc: &str) -> Self {
        let name = format!("gtm{}", index + 1);
        let ip = format!("{net}.{}", index + 1);
        let dir = root.join(&name);
        std::fs::create_dir_all(&dir).unwrap();
        let node = dir.join("node.toml");
        std::fs::write(
            &node,
            format!(
                "name = \"{name}\"\ndatacenter = \"{dc}\"\ndata_dir = \"{}\"\ndns_listen = [\"{ip}:1053\"]\napi_listen = \"{ip}:8053\"\nudp_workers = 1\n",
                dir.display()
            ),
        )
        .unwrap();
        Device {
            name,
            ip,
            gid: GIDS[index],
            dir,
            node,
            child: None,
        }
    }

    /// Starts `gtm serve` under the device's group id; its stderr goes to
    /// `serve.log` in its data directory (kept across restarts).
    pub(super) fn spawn(&mut self) {
        let log = OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.dir.join("serve.log"))
            .unwrap();
        let child = Command::new("setpriv")
            .arg("--regid")
            .arg(self.gid.to_string())
            .arg("--clear-groups")
            .arg("--")
            .arg(env!("CARGO_BIN_EXE_gtm"))
            .arg("serve")
            .arg("--config")
            .arg(&self.node)
            .env("GTM_LOG", "warn")
            .stdout(Stdio::null())
            .stderr(log)
            .spawn()
            .unwrap();
        self.child = Some(child);
    }

    /// kill -9 of the process this test started, as a crash.
    pub(super) fn kill(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// Still running (or stopped), not exited.
    pub(super) fn alive(&mut self) -> bool {
        self.child
            .as_mut()
            .is_some_and(|c| matches!(c.try_wait(), Ok(None)))
    }

    /// SIGSTOP or SIGCONT to the PID this test started (setpriv execs gtm,
    /// so it is gtm's).
    pub(super) fn signal(&self, signal: libc::c_int) {
        if let Some(c) = &self.child
            && let Ok(pid) = libc::pid_t::try_from(c.id())
        {
            // SAFETY: kill(2) with a PID of a child we have not reaped.
            unsafe {
                libc::kill(pid, signal);
            }
        }
    }

    pub(super) fn api(&self) -> String {
        format!("http://{}:8053", self.ip)
    }

    fn gtm(&self, args: &[&str]) -> Output {
        Command::new(env!("CARGO_BIN_EXE_gtm"))
            .arg("--data-dir")
            .arg(&self.dir)
            .args(args)
            .output()
            .unwrap()
    }

    pub(super) fn ok(&self, args: &[&str]) -> String {
        let out = self.gtm(args);
        assert!(
            out.status.success(),
            "gtm {args:?} on {}: {}",
            self.name,
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into()
    }
}

impl Drop for Device {
    fn drop(&mut self) {
        self.kill();
    }
}

/// Our own nftables table with an output chain; dropped with the guard,
/// so no rule outlives the test (even one that panics).
pub(super) struct Firewall {
    table: String,
    /// Handles of the rules of the current partition.
    rules: Vec<String>,
}

impl Firewall {
    /// The table `gtm_chaos_<pid>_<tag>`: one per test, as they run side
    /// by side in one process.
    pub(super) fn new(tag: &str) -> Self {
        sweep_stale_tables();
        let table = format!("gtm_chaos_{}_{tag}", std::process::id());
        let _ = nft(&["delete", "table", "inet", &table]);
        nft(&["add", "table", "inet", &table]).unwrap();
        let fw = Firewall {
            table,
            rules: Vec::new(),
        };
        nft(&[
            "add",
            "chain",
            "inet",
            &fw.table,
            "out",
            "{ type filter hook output priority 0; policy accept; }",
        ])
        .unwrap();
        fw
    }

    /// Drops everything `from` sends to `to` (device-to-device traffic on
    /// loopback leaves from 127.0.0.1 towards the peer's API address).
    pub(super) fn drop_traffic(&mut self, from: &Device, to: &Device) {
        let out = nft(&[
            "--echo",
            "--handle",
            "add",
            "rule",
            "inet",
            &self.table,
            "out",
            "meta",
            "skgid",
            &from.gid.to_string(),
            "ip",
            "daddr",
            &to.ip,
            "counter",
            "drop",
        ])
        .unwrap();
        // `add rule ... drop # handle 7`, then possibly a line of its own
        // (`# new generation ...`).
        let handle: String = out
            .split_once("# handle ")
            .map(|(_, h)| h.chars().take_while(char::is_ascii_digit).collect())
            .unwrap_or_default();
        assert!(!handle.is_empty(), "nft printed no rule handle: {out}");
        self.rules.push(handle);
    }

    /// Packets the rules of the partition dropped so far (their counters):
    /// proof that the partition cut something.
    pub(super) fn dropped(&self) -> u64 {
        let Ok(listing) = nft(&["list", "table", "inet", &self.table]) else {
            return 0;
        };
        listing
            .split("counter packets ")
            .skip(1)
            .filter_map(|rest| rest.split_whitespace().next()?.parse::<u64>().ok())
            .sum()
    }

    /// Removes every rule of the partition by its handle.
    pub(super) fn heal(&mut self) {
        for handle in std::mem::take(&mut self.rules) {
            if let Err(e) = nft(&[
                "delete",
                "rule",
                "inet",
                &self.table,
                "out",
                "handle",
                &handle,
            ]) {
                eprintln!("chaos: removing rule {handle}: {e}");
            }
        }
    }
}

impl Drop for Firewall {
    fn drop(&mut self) {
        self.heal();
        let _ = nft(&["delete", "table", "inet", &self.table]);
    }
}

/// Deletes the tables of earlier runs whose process is gone (killed
/// before its guard ran: SIGKILL, or a Ctrl-C that ends the test binary
/// and the devices together), so no stale rule outlives them for long.
fn sweep_stale_tables() {
    let Ok(tables) = nft(&["list", "tables"]) else {
        return;
    };
    for line in tables.lines() {
        let Some(suffix) = line.trim().strip_prefix("table inet gtm_chaos_") else {
            continue;
        };
        let pid = suffix.split('_').next().unwrap_or(suffix);
        if !Path::new("/proc").join(pid).exists() {
            let _ = nft(&["delete", "table", "inet", &format!("gtm_chaos_{suffix}")]);
        }
    }
}

/// `nft` from PATH, or where Debian puts it when sbin is not on PATH.
fn nft_path() -> &'static str {
    if Path::new("/usr/sbin/nft").exists() {
        "/usr/sbin/nft"
    } else {
        "nft"
    }
}

fn nft(args: &[&str]) -> Result<String, String> {
    let out = Command::new(nft_path())
        .args(args)
        .output()
        .map_err(|e| format!("nft: {e}"))?;
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).into())
    } else {
        Err(format!(
            "nft {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        ))
    }
}

/// Whether this machine can run the harness: nft, setpriv and root.
/// Without them the test skips, except under CI where it fails.
pub(super) fn tools_missing() -> Option<String> {
    let runs = |cmd: &str, arg: &str| {
        Command::new(cmd)
            .arg(arg)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
    };
    if !runs(nft_path(), "--version") {
        return Some("nft (nftables) is missing".into());
    }
    if !runs("setpriv", "--version") {
        return Some("setpriv (util-linux) is missing".into());
    }
    // SAFETY: geteuid cannot fail.
    if unsafe { libc::geteuid() } != 0 {
        return Some("nftables rules and setpriv --regid need root".into());
    }
    None
}
