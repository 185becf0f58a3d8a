//! The frame every console page shares: the document head (our stylesheet
//! and script only), the header with the device, the navigation, who is
//! logged in with which role, and the logout button.

use maud::{DOCTYPE, Markup, html};

use super::assets::{CSS_PATH, ICON_PATH, JS_PATH};
use crate::auth::CSRF_FIELD;
use gtm_node::access::Principal;

/// A whole page. `who` is `None` on the login page.
pub fn page(title: &str, device: &str, who: Option<&Principal>, body: Markup) -> Markup {
    html! {
        (DOCTYPE)
        html lang="en" {
            head {
                meta charset="utf-8";
                meta name="viewport" content="width=device-width, initial-scale=1";
                title { (title) " · gtm " (device) }
                link rel="icon" type="image/svg+xml" href=(ICON_PATH);
                link rel="stylesheet" href=(CSS_PATH);
                script src=(JS_PATH) defer {}
            }
            body {
                a.skip href="#main" { "Skip to content" }
                header.top {
                    p.brand { "gtm " span.device { (device) } }
                    @if let Some(who) = who {
                        nav aria-label="Console" {
                            a href="/ui/" { "Dashboard" }
                            a href="/ui/records" { "Records" }
                            a href="/ui/topology" { "Topology" }
                            a href="/ui/objects/domains" { "Domains" }
                            a href="/ui/checks" { "Checks" }
                            a href="/ui/objects/scenarios" { "Scenarios" }
                            a href="/ui/objects/datacenters" { "Datacenters" }
                            a href="/ui/objects/regions" { "Regions" }
                            a href="/ui/objects/views" { "Views" }
                            a href="/ui/objects/services" { "Services" }
                            a href="/ui/objects/notifiers" { "Notifiers" }
                            a href="/ui/alerts" { "Alerts" }
                            a href="/ui/drains" { "Drains" }
                            a href="/ui/schedules" { "Schedules" }
                            a href="/ui/history" { "History" }
                            a href="/ui/logs" { "GTM Logs" }
                            a href="/ui/cluster" { "Cluster" }
                            a href="/ui/geoip" { "GeoIP" }
                            @if who.allows(gtm_node::access::Role::Admin) {
                                a href="/ui/records/edit" { "New record" }
                                a href="/ui/accounts" { "Accounts" }
                            }
                        }
                        div.who {
                            span #principal {
                                span.name { (who.name) }
                                " (" span.role { (who.role) } ")"
                            }
                            form method="post" action="/ui/logout" {
                                (csrf_field(who))
                                button type="submit" { "Log out" }
                            }
                        }
                    }
                }
                main #main { (body) }
            }
        }
    }
}

/// The hidden field that carries the session's CSRF token in a form.
pub fn csrf_field(who: &Principal) -> Markup {
    let token = who.session.as_ref().map(|s| s.csrf.as_str()).unwrap_or("");
    html! { input type="hidden" name=(CSRF_FIELD) value=(token); }
}

/// A path segment with every byte outside the unreserved set escaped.
pub fn segment(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for b in text.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~' | b'*') {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// A query value, form-encoded.
pub fn query_value(text: &str) -> String {
    form_urlencoded::byte_serialize(text.as_bytes()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn path_segments_escape_what_a_path_cannot_carry() {
        assert_eq!(segment("*.wild.example.test"), "*.wild.example.test");
        assert_eq!(segment("a/b c"), "a%2Fb%20c");
        assert_eq!(query_value("a b&c"), "a+b%26c");
    }
}
