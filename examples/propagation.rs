#![allow(clippy::print_stdout)] // a benchmark prints its figures
//! How long a deciding probe result takes to reach the DNS answer on the
//! wire (spec §7 target: < 10 ms). Run: `cargo run --release --example propagation`.
//!
//! A device starts in-process on loopback. A template check with Required
//! Failures = Required Successes = 1 guards 127.0.0.2 in `www.bench.test`.
//! Each round feeds the engine the result that flips the check (exactly what
//! the scheduler does when a probe returns), then asks over UDP until the
//! answer shows the change. The time covers the threshold, the scenario and
//! record re-evaluation, the answer swap, and one DNS round trip.

use std::{
    net::UdpSocket,
    time::{Duration, Instant},
};

use gtm::device::Device;
use gtm_model::{condition::CheckRef, node::NodeSettings};

const CONFIG: &str = r#"
[[check]]
name = "web"
type = "tcp"
port = 9
interval = "1h"
timeout = "1s"
failures = 1
successes = 1

[[domain]]
name = "bench.test"
nameservers = ["ns1.bench.test"]

[[domain.record]]
name = "www"
type = "A"
addresses = [
  { ip = "127.0.0.2", hc = "check:web" },
  { ip = "192.0.2.2" },
]
"#;

/// A query for www.bench.test A, id 0x1234.
fn query() -> Vec<u8> {
    let mut q = vec![0x12, 0x34, 0x00, 0x00, 0, 1, 0, 0, 0, 0, 0, 0];
    for label in ["www", "bench", "test"] {
        q.push(label.len() as u8);
        q.extend_from_slice(label.as_bytes());
    }
    q.extend_from_slice(&[0, 0, 1, 0, 1]);
    q
}

/// The answer count of a response.
fn answers(socket: &UdpSocket, q: &[u8]) -> u16 {
    let mut buf = [0u8; 512];
    socket.send(q).expect("send");
    let n = socket.recv(&mut buf).expect("an answer within the timeout");
    assert!(n >= 12);
    u16::from_be_bytes([buf[6], buf[7]])
}

fn main() {
    let rounds: usize = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(1000);
    let runtime = tokio::runtime::Runtime::new().expect("runtime");
    let dir = std::env::temp_dir().join(format!("gtm-propagation-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let settings = NodeSettings {
        dns_listen: vec!["127.0.0.1:0".parse().unwrap()],
        api_listen: "127.0.0.1:0".parse().unwrap(),
        udp_workers: Some(1),
        ..NodeSettings::demo(dir.clone())
    };
    let device = runtime
        .block_on(Device::start(settings, false))
        .expect("device starts");
    let actor = gtm_model::actor::Actor {
        user: "propagation".into(),
        device: "test1".into(),
    };
    let apply = gtm_node::command::Action::ApplyConfig {
        text: CONFIG.to_string(),
    };
    runtime
        .block_on(device.replication.propose(actor, None, apply))
        .expect("valid configuration");
    // The scheduler's one probe of the hour (to 127.0.0.2:9, refused) comes
    // within the first second; let it pass so only our results count.
    std::thread::sleep(Duration::from_millis(1500));

    let socket = UdpSocket::bind("127.0.0.1:0").unwrap();
    socket.connect(device.dns_addrs[0]).unwrap();
    socket
        .set_read_timeout(Some(Duration::from_secs(2)))
        .unwrap();
    let q = query();
    let check = CheckRef {
        name: "web".into(),
        address: Some("127.0.0.2".parse().unwrap()),
    };
    let mut healthy = answers(&socket, &q) == 2;
    let mut samples = Vec::with_capacity(rounds);
    for _ in 0..rounds {
        let want = if healthy { 1 } else { 2 };
        let start = Instant::now();
        device
            .engine
            .probe_result(&check, !healthy, "fed by the benchmark".into());
        while answers(&socket, &q) != want {
            assert!(
                start.elapsed() < Duration::from_secs(2),
                "the answer never changed"
            );
        }
        samples.push(start.elapsed());
        healthy = !healthy;
    }
    samples.sort();
    let pct = |p: f64| samples[((samples.len() as f64 * p) as usize).min(samples.len() - 1)];
    println!(
        "rounds {rounds}: p50 {:.3} ms, p99 {:.3} ms, max {:.3} ms (probe result → changed answer on the wire, incl. one UDP round trip)",
        pct(0.50).as_secs_f64() * 1e3,
        pct(0.99).as_secs_f64() * 1e3,
        samples[samples.len() - 1].as_secs_f64() * 1e3
    );
    runtime.block_on(device.stop());
    let _ = std::fs::remove_dir_all(&dir);
}
