//! Counters the hot paths update with one relaxed atomic add, and the
//! Prometheus text format they are read out in (`GET /metrics`).
//!
//! The families and their labels are listed in docs/api.md. The DNS
//! path's own counters live beside it (`dns::metrics`) and use the
//! histogram and text writer from here; nothing here knows DNS.

use std::{
    collections::HashMap,
    fmt::Write,
    sync::{
        Mutex,
        atomic::{AtomicU64, Ordering::Relaxed},
    },
    time::Duration,
};

/// Upper bounds of the histogram buckets, in seconds: from 10 µs (a DNS
/// answer) to 10 s (a slow probe).
const BOUNDS: [f64; 19] = [
    0.00001, 0.000025, 0.00005, 0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05,
    0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0,
];

/// A latency histogram.
#[derive(Debug, Default)]
pub struct Histogram {
    /// Per bucket (not cumulative); the last one is above every bound.
    buckets: [AtomicU64; BOUNDS.len() + 1],
    sum_ns: AtomicU64,
}

impl Histogram {
    /// Records `n` observations of `d`.
    pub fn observe(&self, d: Duration, n: u64) {
        let secs = d.as_secs_f64();
        let i = BOUNDS
            .iter()
            .position(|b| secs <= *b)
            .unwrap_or(BOUNDS.len());
        self.buckets[i].fetch_add(n, Relaxed);
        self.sum_ns
            .fetch_add((d.as_nanos() as u64).saturating_mul(n), Relaxed);
    }

    pub fn write(&self, out: &mut Text, name: &str, labels: &[(&str, &str)]) {
        let mut cumulative = 0;
        for (i, bound) in BOUNDS
            .iter()
            .map(|b| b.to_string())
            .chain(["+Inf".to_string()])
            .enumerate()
        {
            cumulative += self.buckets[i].load(Relaxed);
            let mut l = labels.to_vec();
            l.push(("le", &bound));
            out.sample(&format!("{name}_bucket"), &l, cumulative as f64);
        }
        out.sample(
            &format!("{name}_sum"),
            labels,
            self.sum_ns.load(Relaxed) as f64 / 1e9,
        );
        out.sample(&format!("{name}_count"), labels, cumulative as f64);
    }
}

/// How long each check's probes take.
#[derive(Debug, Default)]
pub struct ProbeMetrics {
    by_check: Mutex<HashMap<String, Histogram>>,
}

impl ProbeMetrics {
    pub fn observe(&self, check: &str, d: Duration) {
        let mut map = self.by_check.lock().unwrap_or_else(|e| e.into_inner());
        map.entry(check.to_string()).or_default().observe(d, 1);
    }

    /// Forgets the checks not in `keep` (after a configuration change).
    pub fn retain(&self, keep: impl Fn(&str) -> bool) {
        let mut map = self.by_check.lock().unwrap_or_else(|e| e.into_inner());
        map.retain(|k, _| keep(k));
    }

    pub fn write(&self, out: &mut Text) {
        out.family(
            "gtm_probe_duration_seconds",
            "histogram",
            "Probe durations on this device, by check instance",
        );
        let map = self.by_check.lock().unwrap_or_else(|e| e.into_inner());
        let mut names: Vec<&String> = map.keys().collect();
        names.sort();
        for name in names {
            map[name].write(out, "gtm_probe_duration_seconds", &[("check", name)]);
        }
    }
}

/// A Prometheus text-format document being written.
#[derive(Debug, Default)]
pub struct Text(String);

impl Text {
    pub fn family(&mut self, name: &str, kind: &str, help: &str) {
        let _ = writeln!(self.0, "# HELP {name} {help}");
        let _ = writeln!(self.0, "# TYPE {name} {kind}");
    }

    pub fn sample(&mut self, name: &str, labels: &[(&str, &str)], value: f64) {
        self.0.push_str(name);
        if !labels.is_empty() {
            self.0.push('{');
            for (i, (k, v)) in labels.iter().enumerate() {
                if i > 0 {
                    self.0.push(',');
                }
                let _ = write!(self.0, "{k}=\"");
                for c in v.chars() {
                    match c {
                        '\\' => self.0.push_str("\\\\"),
                        '"' => self.0.push_str("\\\""),
                        '\n' => self.0.push_str("\\n"),
                        c => self.0.push(c),
                    }
                }
                self.0.push('"');
            }
            self.0.push('}');
        }
        let _ = writeln!(self.0, " {value}");
    }

    pub fn finish(self) -> String {
        self.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn histogram_buckets_are_cumulative_and_labels_escaped() {
        let h = Histogram::default();
        h.observe(Duration::from_micros(20), 3);
        h.observe(Duration::from_secs(60), 1);
        let mut t = Text::default();
        h.write(&mut t, "x", &[("check", "a\"b\\c")]);
        let text = t.finish();
        assert!(
            text.contains("x_bucket{check=\"a\\\"b\\\\c\",le=\"0.00001\"} 0\n"),
            "{text}"
        );
        assert!(
            text.contains("x_bucket{check=\"a\\\"b\\\\c\",le=\"0.000025\"} 3\n"),
            "{text}"
        );
        assert!(
            text.contains("x_bucket{check=\"a\\\"b\\\\c\",le=\"10\"} 3\n"),
            "{text}"
        );
        assert!(
            text.contains("x_bucket{check=\"a\\\"b\\\\c\",le=\"+Inf\"} 4\n"),
            "{text}"
        );
        assert!(
            text.contains("x_count{check=\"a\\\"b\\\\c\"} 4\n"),
            "{text}"
        );
        assert!(
            text.contains("x_sum{check=\"a\\\"b\\\\c\"} 60.00006\n"),
            "{text}"
        );
    }
}
