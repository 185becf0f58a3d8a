//! When a device downloads its database by itself (`[geoip] update =
//! "monthly"`): once a month, and at start when what it has is older than
//! the current month's. Failures are retried with a growing pause (15 min,
//! doubling, at most a day), so an unreachable source costs a few requests
//! a day, not a loop. Pure logic over an injected clock value; the task
//! that acts on it is [`run`].

use gtm_model::severity::Severity;
use std::{path::PathBuf, time::Duration};

use tokio_util::sync::CancellationToken;

use gtm_model::clock::now_ms;

use super::{
    Db, GeoInfo, Kind,
    download::{self, fill, month_of, previous},
    update,
};

/// The pause after a month-before file was taken: the current month's is
/// looked for again this much later.
const FALLBACK_PAUSE_MS: u64 = 6 * 3_600_000;
const FIRST_RETRY_MS: u64 = 15 * 60_000;
const MAX_RETRY_MS: u64 = 24 * 3_600_000;

/// What the device knows about its database's freshness.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Plan {
    /// The month of the database it has (the month filled into the URL it
    /// came from, or the month it was built); `None` without one.
    pub have: Option<(i64, u32)>,
    /// Downloads failed in a row.
    pub failures: u32,
    /// Not before this time (ms since the epoch).
    pub next_try_ms: u64,
}

impl Plan {
    /// The plan at start for the database `info` (if any) and the source
    /// template: a database that came from the source's URL for a month is
    /// that month's, otherwise its build month counts.
    pub fn at_start(info: Option<&GeoInfo>, template: &str, now_ms: u64) -> Self {
        let have = info.map(|i| {
            let current = month_of(now_ms);
            [current, previous(current)]
                .into_iter()
                .find(|m| fill(template, *m) == i.source)
                .unwrap_or_else(|| month_of(i.build_epoch.saturating_mul(1000)))
        });
        Self {
            have,
            failures: 0,
            next_try_ms: 0,
        }
    }

    /// Whether to download now.
    pub fn due(&self, monthly: bool, now_ms: u64) -> bool {
        monthly && now_ms >= self.next_try_ms && self.have.is_none_or(|m| m < month_of(now_ms))
    }

    /// After a database for `month` was installed.
    pub fn succeeded(&mut self, month: (i64, u32), now_ms: u64) {
        self.have = Some(month);
        self.failures = 0;
        self.next_try_ms = if month < month_of(now_ms) {
            now_ms.saturating_add(FALLBACK_PAUSE_MS)
        } else {
            0
        };
    }

    /// After a download or a check failed.
    pub fn failed(&mut self, now_ms: u64) {
        self.failures = self.failures.saturating_add(1);
        let pause = FIRST_RETRY_MS
            .saturating_mul(1u64 << self.failures.saturating_sub(1).min(16))
            .min(MAX_RETRY_MS);
        self.next_try_ms = now_ms.saturating_add(pause);
    }
}

/// The refresh task of a device for its database of `kind`: looks once a
/// minute whether a download is due under the current configuration
/// (`settings` gives the source template, `None` when none is configured
/// for the kind, and whether monthly updates are on), and downloads when
/// it is.
pub async fn run(
    kind: Kind,
    data_dir: PathBuf,
    settings: impl Fn() -> (Option<String>, bool) + Send,
    current: impl Fn() -> Option<GeoInfo> + Send,
    swap: impl Fn(Db) + Send,
    log: impl Fn(Severity, String) + Send,
    stop: CancellationToken,
) {
    let http = match download::client() {
        Ok(h) => h,
        Err(e) => {
            log(
                Severity::Error,
                format!("GeoIP updates are off: no HTTP client ({e})"),
            );
            return;
        }
    };
    let (template, _) = settings();
    let mut plan = Plan::at_start(
        current().as_ref(),
        template.as_deref().unwrap_or_default(),
        now_ms(),
    );
    loop {
        let now = now_ms();
        if let (Some(template), monthly) = settings()
            && plan.due(monthly, now)
        {
            match update::update(&http, kind, &data_dir, &template, now, &swap, &log).await {
                Ok(month) => plan.succeeded(month, now),
                Err(_) => plan.failed(now),
            }
        }
        tokio::select! {
            _ = stop.cancelled() => return,
            _ = tokio::time::sleep(Duration::from_secs(60)) => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const DAY: u64 = 86_400_000;
    /// 2026-12-01T00:30:00Z and 2026-11-15T00:00:00Z.
    const DEC_1: u64 = 1_796_085_000_000;
    const NOV_15: u64 = 1_794_700_800_000;

    fn info(source: &str, built_ms: u64) -> GeoInfo {
        GeoInfo {
            name: "DBIP-Country-Lite".into(),
            ip_version: 6,
            built: String::new(),
            build_epoch: built_ms / 1000,
            networks: 1,
            sha256: String::new(),
            source: source.into(),
        }
    }

    #[test]
    fn a_device_without_a_database_downloads_at_once_when_monthly() {
        let plan = Plan::at_start(None, gtm_model::config::DEFAULT_GEOIP_SOURCE, DEC_1);
        assert!(plan.due(true, DEC_1));
        assert!(!plan.due(false, DEC_1), "update off: never by itself");
    }

    #[test]
    fn last_months_database_is_refreshed_at_start_this_months_is_not() {
        let t = gtm_model::config::DEFAULT_GEOIP_SOURCE;
        let old = info(&fill(t, (2026, 11)), NOV_15);
        assert!(Plan::at_start(Some(&old), t, DEC_1).due(true, DEC_1));
        let fresh = info(&fill(t, (2026, 12)), NOV_15);
        let plan = Plan::at_start(Some(&fresh), t, DEC_1);
        assert_eq!(plan.have, Some((2026, 12)));
        assert!(!plan.due(true, DEC_1 + 20 * DAY));
        // A month later it is due again.
        assert!(plan.due(true, DEC_1 + 31 * DAY));
        // An imported file counts by its build month.
        let imported = info("import", DEC_1 + DAY);
        assert!(!Plan::at_start(Some(&imported), t, DEC_1 + 2 * DAY).due(true, DEC_1 + 2 * DAY));
    }

    #[test]
    fn a_month_before_fallback_is_retried_hours_later_not_at_once() {
        let mut plan = Plan::at_start(None, gtm_model::config::DEFAULT_GEOIP_SOURCE, DEC_1);
        plan.succeeded((2026, 11), DEC_1);
        assert!(!plan.due(true, DEC_1 + 60_000));
        assert!(plan.due(true, DEC_1 + FALLBACK_PAUSE_MS));
        plan.succeeded((2026, 12), DEC_1 + FALLBACK_PAUSE_MS);
        assert!(!plan.due(true, DEC_1 + FALLBACK_PAUSE_MS + 60_000));
    }

    #[test]
    fn failures_back_off_to_at_most_a_day() {
        let mut plan = Plan::default();
        let mut now = DEC_1;
        let mut pauses = Vec::new();
        for _ in 0..12 {
            plan.failed(now);
            assert!(!plan.due(true, now));
            pauses.push(plan.next_try_ms - now);
            now = plan.next_try_ms;
            assert!(plan.due(true, now));
        }
        assert_eq!(pauses[0], FIRST_RETRY_MS);
        assert_eq!(pauses[1], 2 * FIRST_RETRY_MS);
        assert!(pauses.iter().all(|p| *p <= MAX_RETRY_MS));
        assert_eq!(*pauses.last().unwrap(), MAX_RETRY_MS);
        plan.succeeded(month_of(now), now);
        assert_eq!(plan.failures, 0);
    }
}
