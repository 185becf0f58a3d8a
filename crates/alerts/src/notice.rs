//! What alerts are made of: an event of the GTM Logs as a device logged
//! it, and which notifiers take it ([`Filter`]).

use gtm_model::{compile::Filter, severity::Severity};

/// An event, as the device that logged it tells the alert workers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Notice {
    /// The device's event number.
    pub seq: u64,
    pub time_ms: u64,
    pub device: String,
    /// The datacenter of the device.
    pub datacenter: String,
    /// `record`, `check`, `scenario`, `datacenter`, `device`, `operator`,
    /// `config`, `geoip`.
    pub kind: String,
    pub severity: Severity,
    /// The record (`www.example.test/A`), check instance, scenario,
    /// datacenter ... the event is about.
    pub object: String,
    pub text: String,
}

impl Notice {
    /// Whether every device logs this event (from the replicated state),
    /// so that one device, the leader, sends it.
    pub fn cluster_wide(&self) -> bool {
        matches!(self.kind.as_str(), "operator" | "config")
    }
}

/// Whether `notice` is about what `filter` watches (its kind, record,
/// domain, datacenter and device), whatever its severity.
pub fn about(filter: &Filter, notice: &Notice) -> bool {
    let kind = filter.kinds.is_empty() || filter.kinds.contains(&notice.kind);
    // Lower-cased only for a filter that names records or domains: most
    // name neither, and each notifier judges every event.
    let named = !filter.records.is_empty() || !filter.domains.is_empty();
    let record = if named && notice.kind == "record" {
        notice.object.to_ascii_lowercase()
    } else {
        String::new()
    };
    let name = record.split('/').next().unwrap_or_default();
    let records =
        filter.records.is_empty() || (notice.kind == "record" && filter.records.contains(&record));
    let domains = filter.domains.is_empty()
        || (notice.kind == "record"
            && filter.domains.iter().any(|d| {
                name.strip_suffix(d.as_str())
                    .is_some_and(|head| head.is_empty() || head.ends_with('.'))
            }));
    let datacenters = filter.datacenters.is_empty()
        || filter.datacenters.contains(&notice.datacenter)
        || (notice.kind == "datacenter" && filter.datacenters.contains(&notice.object));
    let devices = filter.devices.is_empty() || filter.devices.contains(&notice.device);
    kind && records && domains && datacenters && devices
}

/// Whether `filter` sends `notice` (a warning or an error opens an alert;
/// an info event, with `severity = "info"`, is sent as it is).
pub fn takes(filter: &Filter, notice: &Notice) -> bool {
    notice.severity >= filter.severity && about(filter, notice)
}

#[cfg(test)]
mod tests {
    use super::*;

    pub(crate) fn notice(kind: &str, severity: Severity, object: &str) -> Notice {
        Notice {
            seq: 1,
            time_ms: 1_000,
            device: "gtm1".into(),
            datacenter: "dc1".into(),
            kind: kind.into(),
            severity,
            object: object.into(),
            text: format!("{object}: something"),
        }
    }

    fn filter() -> Filter {
        Filter {
            kinds: Vec::new(),
            severity: Severity::Warning,
            records: Vec::new(),
            domains: Vec::new(),
            datacenters: Vec::new(),
            devices: Vec::new(),
        }
    }

    #[test]
    fn filters_name_kinds_records_domains_datacenters_and_devices() {
        let www = notice("record", Severity::Warning, "www.example.test/A");
        assert!(takes(&filter(), &www));
        assert!(!takes(
            &filter(),
            &notice("record", Severity::Info, "www.example.test/A")
        ));
        let f = Filter {
            domains: vec!["example.test".into()],
            ..filter()
        };
        assert!(takes(&f, &www));
        assert!(!takes(
            &f,
            &notice("record", Severity::Warning, "www.other.test/A")
        ));
        assert!(!takes(
            &f,
            &notice("check", Severity::Warning, "web@192.0.2.1")
        ));
        let f = Filter {
            kinds: vec!["check".into()],
            devices: vec!["gtm2".into()],
            ..filter()
        };
        assert!(!takes(
            &f,
            &notice("check", Severity::Warning, "web@192.0.2.1")
        ));
        let f = Filter {
            datacenters: vec!["dc2".into()],
            ..filter()
        };
        assert!(takes(&f, &notice("datacenter", Severity::Warning, "dc2")));
        assert!(!takes(&f, &www));
        let f = Filter {
            severity: Severity::Error,
            ..filter()
        };
        assert!(!takes(&f, &www));
        assert!(takes(
            &f,
            &notice("record", Severity::Error, "www.example.test/A")
        ));
    }
}
