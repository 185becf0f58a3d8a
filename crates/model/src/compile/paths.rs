//! How errors name a compiled record.

use hickory_server::proto::rr::Name;

use super::RecordSpec;

/// `domain example.test / record www CNAME`, the path of a compiled record.
pub(super) fn record_path(domain_path: &str, apex: &Name, r: &RecordSpec) -> String {
    format!(
        "{domain_path} / record {} {}",
        relative(&r.owner_name(), apex),
        r.kind.as_str()
    )
}

/// A name as written in a record: relative to the apex, `@` for the apex.
pub(super) fn relative(owner: &Name, apex: &Name) -> String {
    let labels = owner.iter().count().saturating_sub(apex.iter().count());
    if labels == 0 {
        return "@".to_string();
    }
    let full = owner.to_string();
    let apex = apex.to_string();
    full.strip_suffix(&apex)
        .map(|s| s.trim_end_matches('.').to_string())
        .filter(|s| !s.is_empty())
        .unwrap_or(full)
}
