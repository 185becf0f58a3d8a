//! What the object forms show: for each kind of configuration object, its
//! fields as the configuration names them (the keys API errors and the
//! configuration reference use), how each is typed in, and for checks
//! the check types a field applies to (the form shows a field only for
//! those; the configuration refuses it elsewhere).

/// How a field is typed in, and how its text becomes the object's value.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Input {
    /// A string; empty leaves the key out.
    Text,
    /// A whole number; empty leaves the key out.
    Number,
    /// Yes, no, or the default.
    Flag,
    /// A list of strings, comma- or line-separated.
    List,
    /// A list of strings, one per line (an exec check's command).
    Lines,
    /// Names and values, `name = value` one per line (an alertmanager
    /// check's labels).
    Labels,
    /// One of these words, or the default.
    Choice(&'static [&'static str]),
    /// One of the configured datacenters, or none.
    Datacenter,
    /// A scenario condition: its terms are shown with their truth on every
    /// device as it is typed.
    Condition,
}

#[derive(Debug)]
pub struct Field {
    pub key: &'static str,
    pub label: &'static str,
    pub input: Input,
    /// What an empty field means, shown as the placeholder.
    pub hint: &'static str,
    /// The check types this field applies to; empty: every type.
    pub types: &'static [&'static str],
}

/// A kind of configuration object with a form of its own.
#[derive(Debug)]
pub struct Kind {
    /// The path segment: `/ui/objects/checks`.
    pub path: &'static str,
    /// Singular, as errors name it.
    pub noun: &'static str,
    pub title: &'static str,
    /// One line on what these objects are.
    pub about: &'static str,
    pub fields: &'static [Field],
    /// A list with a form of its own (a domain's records): kept as it is.
    pub children: Option<&'static str>,
}

const fn field(key: &'static str, label: &'static str, input: Input, hint: &'static str) -> Field {
    Field {
        key,
        label,
        input,
        hint,
        types: &[],
    }
}

const fn only(
    key: &'static str,
    label: &'static str,
    input: Input,
    hint: &'static str,
    types: &'static [&'static str],
) -> Field {
    Field {
        key,
        label,
        input,
        hint,
        types,
    }
}

const HTTP: &[&str] = &["http", "https", "http2"];
const PROBED: &[&str] = &[
    "http",
    "https",
    "http2",
    "tcp",
    "tls",
    "dns",
    "icmp",
    "grpc",
    "exec",
    "prometheus",
];
/// Probed or reported to: every type but manual.
const TIMED: &[&str] = &[
    "http",
    "https",
    "http2",
    "tcp",
    "tls",
    "dns",
    "icmp",
    "grpc",
    "exec",
    "prometheus",
    "push",
    "alertmanager",
];
const CHECK_TYPES: &[&str] = &[
    "http",
    "https",
    "http2",
    "tcp",
    "tls",
    "dns",
    "icmp",
    "grpc",
    "exec",
    "manual",
    "prometheus",
    "push",
    "alertmanager",
];

pub const DATACENTERS: Kind = Kind {
    path: "datacenters",
    noun: "datacenter",
    title: "Datacenters",
    about: "Where addresses and devices are: the Main DC, DR DC and selection order of domains name them, and a datacenter with no device reporting is marked down.",
    fields: &[
        field("name", "Name", Input::Text, "dc1"),
        field("country", "Country (ISO code)", Input::Text, "DE"),
        field("continent", "Continent (code)", Input::Text, "EU"),
    ],
    children: None,
};

pub const REGIONS: Kind = Kind {
    path: "regions",
    noun: "region",
    title: "Regions",
    about: "Named sets of client networks, countries and continents that topology rules send to a datacenter or an address; a client is in a region when a member holds it and no exclusion does.",
    fields: &[
        field("name", "Name", Input::Text, "branch-east"),
        field(
            "networks",
            "Networks (one per line or comma-separated)",
            Input::List,
            "10.20.0.0/16",
        ),
        field(
            "subdivisions",
            "Subdivisions (ISO 3166-2, City database)",
            Input::List,
            "US-CA, US-OR",
        ),
        field("countries", "Countries (ISO codes)", Input::List, "US, CA"),
        field("continents", "Continents (codes)", Input::List, "EU"),
        field("regions", "Regions it includes", Input::List, "branch-west"),
        field(
            "exclude_networks",
            "Networks excluded",
            Input::List,
            "10.20.99.0/24",
        ),
        field(
            "exclude_subdivisions",
            "Subdivisions excluded",
            Input::List,
            "US-AK",
        ),
        field("exclude_countries", "Countries excluded", Input::List, "FR"),
        field(
            "exclude_continents",
            "Continents excluded",
            Input::List,
            "AN",
        ),
    ],
    children: None,
};

pub const VIEWS: Kind = Kind {
    path: "views",
    noun: "view",
    title: "Views",
    about: "Classes of clients (by network, region, AS, subdivision, country or continent) answered from zones of their own (split horizon): a client gets the records and domains of the first view, in the order written, whose clients hold it.",
    fields: &[
        field("name", "Name", Input::Text, "internal"),
        field(
            "clients",
            "Clients (one per line or comma-separated)",
            Input::List,
            "10.0.0.0/8, region:branch-east, asn:64500, country:US",
        ),
    ],
    children: None,
};

const WEBHOOK: &[&str] = &["webhook"];
const EMAIL: &[&str] = &["email"];
const SYSLOG: &[&str] = &["syslog"];

pub const NOTIFIERS: Kind = Kind {
    path: "notifiers",
    noun: "notifier",
    title: "Notifiers",
    about: "Where each device sends alerts on its events (webhook, e-mail, syslog): which events, after what delay, how often again while open, and whether resolutions too. Delivery state: gtm alert list.",
    fields: &[
        field("name", "Name", Input::Text, "ops"),
        field(
            "type",
            "Type",
            Input::Choice(&["webhook", "email", "syslog"]),
            "",
        ),
        only(
            "url",
            "URL",
            Input::Text,
            "https://hooks.example.net/gtm",
            WEBHOOK,
        ),
        only(
            "secret_file",
            "HMAC key file (on each device)",
            Input::Text,
            "unsigned",
            WEBHOOK,
        ),
        only(
            "smtp",
            "SMTP server (host:port)",
            Input::Text,
            "mail.example.net:587",
            EMAIL,
        ),
        only(
            "smtp_tls",
            "SMTP TLS",
            Input::Choice(&["starttls", "tls", "none"]),
            "",
            EMAIL,
        ),
        only("from", "From", Input::Text, "gtm@example.net", EMAIL),
        only(
            "to",
            "To (comma-separated)",
            Input::List,
            "ops@example.net",
            EMAIL,
        ),
        only("username", "SMTP user", Input::Text, "none", EMAIL),
        only(
            "password_file",
            "SMTP password file (on each device)",
            Input::Text,
            "none",
            EMAIL,
        ),
        only(
            "address",
            "Syslog receiver (host:port)",
            Input::Text,
            "syslog.example.net:514",
            SYSLOG,
        ),
        only(
            "transport",
            "Transport",
            Input::Choice(&["udp", "tcp", "tls"]),
            "",
            SYSLOG,
        ),
        only("facility", "Facility", Input::Text, "daemon", SYSLOG),
        field(
            "ca_file",
            "CA file (PEM, on each device)",
            Input::Text,
            "public roots",
        ),
        field(
            "kinds",
            "Event kinds (comma-separated)",
            Input::List,
            "every kind: record, check, scenario, datacenter, device, operator, config, geoip",
        ),
        field(
            "severity",
            "Least severity",
            Input::Choice(&["info", "warning", "error"]),
            "",
        ),
        field("records", "Records", Input::List, "every record"),
        field("domains", "Domains", Input::List, "every domain"),
        field(
            "datacenters",
            "Datacenters",
            Input::List,
            "every datacenter",
        ),
        field("devices", "Devices", Input::List, "every device"),
        field("delay", "Send if still open after", Input::Text, "at once"),
        field("repeat", "Send again every", Input::Text, "never"),
        field("resolved", "Send resolutions", Input::Flag, ""),
    ],
    children: None,
};

pub const SERVICES: Kind = Kind {
    path: "services",
    noun: "service",
    title: "Services",
    about: "A named group of domains.",
    fields: &[
        field("name", "Name", Input::Text, "shop"),
        field(
            "domains",
            "Domains (comma-separated)",
            Input::List,
            "example.test",
        ),
    ],
    children: None,
};

pub const SCENARIOS: Kind = Kind {
    path: "scenarios",
    noun: "scenario",
    title: "Scenarios",
    about: "A condition over checks (check names joined by AND, OR, NOT, UNLESS, AT LEAST n OF), used as an address's HC field or a record's Disaster Recovery Condition.",
    fields: &[
        field("name", "Name", Input::Text, "main-down"),
        field(
            "condition",
            "Condition",
            Input::Condition,
            "web AND NOT maint",
        ),
        field(
            "verify",
            "With Trigger (a change applies only once this holds)",
            Input::Condition,
            "none",
        ),
    ],
    children: None,
};

pub const CHECKS: Kind = Kind {
    path: "checks",
    noun: "check",
    title: "Checks",
    about: "A health check: probed from the devices (every device, or those of one datacenter), asked of a Prometheus server, reported to (push, alertmanager), or set by an operator (manual).",
    fields: &[
        field("name", "Name", Input::Text, "web"),
        field("type", "Type", Input::Choice(CHECK_TYPES), ""),
        only(
            "target",
            "Target (fixed address or name)",
            Input::Text,
            "none: each address it is the HC field of",
            TIMED,
        ),
        only(
            "port",
            "Port",
            Input::Number,
            "the type's",
            &["http", "https", "http2", "tcp", "tls", "dns", "grpc"],
        ),
        only("path", "Path", Input::Text, "/", HTTP),
        only(
            "host",
            "Host (header and TLS server name)",
            Input::Text,
            "the target",
            &["http", "https", "http2", "tls", "grpc"],
        ),
        only("expect_status", "Expected status", Input::Text, "2xx", HTTP),
        only(
            "expect_body",
            "Expected text in the body",
            Input::Text,
            "any",
            HTTP,
        ),
        only("send", "Send", Input::Text, "nothing", &["tcp", "tls"]),
        only(
            "expect",
            "Expected response (prometheus: a comparison, < 0.05)",
            Input::Text,
            "any",
            &["tcp", "tls", "prometheus"],
        ),
        only(
            "url",
            "Prometheus URL",
            Input::Text,
            "http://127.0.0.1:9090",
            &["prometheus"],
        ),
        only(
            "query",
            "PromQL query ($address: the address checked)",
            Input::Text,
            "up{instance=\"$address:9100\"}",
            &["prometheus"],
        ),
        only(
            "labels",
            "Alert labels (name = value, one per line)",
            Input::Labels,
            "alertname = BackendDown",
            &["alertmanager"],
        ),
        only(
            "stale_after",
            "A report stands for",
            Input::Text,
            "three intervals",
            &["push"],
        ),
        only(
            "max_latency",
            "Slower than this is down",
            Input::Text,
            "no limit",
            PROBED,
        ),
        only(
            "tls_verify",
            "Verify the certificate",
            Input::Flag,
            "",
            &["https", "http2", "tls", "grpc"],
        ),
        only(
            "proxy_protocol",
            "Send a PROXY protocol header",
            Input::Flag,
            "",
            &["http", "https", "http2", "tcp", "tls"],
        ),
        only(
            "reuse_connection",
            "Keep the connection between probes",
            Input::Flag,
            "",
            HTTP,
        ),
        only(
            "query_name",
            "Query name",
            Input::Text,
            "example.test",
            &["dns"],
        ),
        only("query_type", "Query type", Input::Text, "A", &["dns"]),
        only(
            "expect_rcode",
            "Expected rcode",
            Input::Text,
            "NOERROR",
            &["dns"],
        ),
        only(
            "expect_answer",
            "Expected answer",
            Input::Text,
            "any",
            &["dns"],
        ),
        only(
            "service",
            "gRPC health service",
            Input::Text,
            "the server's",
            &["grpc"],
        ),
        only("tls", "gRPC over TLS", Input::Flag, "", &["grpc"]),
        only(
            "command",
            "Command (program, then one argument per line)",
            Input::Lines,
            "/usr/local/bin/probe",
            &["exec"],
        ),
        only("interval", "Interval", Input::Text, "10s", TIMED),
        only("timeout", "Timeout", Input::Text, "the interval", PROBED),
        only(
            "failures",
            "Failures before Error",
            Input::Number,
            "1",
            TIMED,
        ),
        only(
            "successes",
            "Successes before OK",
            Input::Number,
            "1",
            TIMED,
        ),
        only("run_on", "Run on", Input::Datacenter, "every device", TIMED),
        only(
            "policy",
            "Devices that must agree",
            Input::Choice(&["any", "all", "majority"]),
            "",
            TIMED,
        ),
    ],
    children: None,
};

pub const DOMAINS: Kind = Kind {
    path: "domains",
    noun: "domain",
    title: "Domains",
    about: "A zone this cluster answers for: its mode and datacenters apply to every record of it that does not set its own.",
    fields: &[
        field("name", "Name", Input::Text, "example.test"),
        field("ttl", "TTL (seconds)", Input::Number, "30"),
        field(
            "mode",
            "Default Mode",
            Input::Choice(&["standalone", "disaster-recovery", "datacenter"]),
            "",
        ),
        field("main_dc", "Main DC", Input::Datacenter, "none"),
        field("dr_dc", "DR DC", Input::Datacenter, "none"),
        field(
            "dc_order",
            "DC Selection order (comma-separated)",
            Input::List,
            "dc1, dc2",
        ),
        field(
            "dcs_to_select",
            "Total DCs to select from",
            Input::Number,
            "all",
        ),
        field(
            "nameservers",
            "Name servers (comma-separated)",
            Input::List,
            "ns1.example.test",
        ),
        field("dnssec", "Sign with DNSSEC", Input::Flag, ""),
    ],
    children: Some("record"),
};

/// Every kind with a form, in the order the console lists them.
pub const KINDS: [&Kind; 8] = [
    &DOMAINS,
    &CHECKS,
    &SCENARIOS,
    &DATACENTERS,
    &REGIONS,
    &VIEWS,
    &SERVICES,
    &NOTIFIERS,
];

pub fn by_path(path: &str) -> Option<&'static Kind> {
    KINDS.into_iter().find(|k| k.path == path)
}

#[cfg(test)]
mod tests {
    use super::*;
    use gtm_model::config::{Check, Datacenter, Domain, Notifier, Region, Scenario, Service, View};
    use schemars::schema_for;

    /// Every field of a form is a key the configuration has.
    #[test]
    fn every_field_is_a_key_of_its_object() {
        let schemas = [
            (&DATACENTERS, schema_for!(Datacenter)),
            (&SERVICES, schema_for!(Service)),
            (&REGIONS, schema_for!(Region)),
            (&VIEWS, schema_for!(View)),
            (&SCENARIOS, schema_for!(Scenario)),
            (&CHECKS, schema_for!(Check)),
            (&DOMAINS, schema_for!(Domain)),
            (&NOTIFIERS, schema_for!(Notifier)),
        ];
        for (kind, schema) in schemas {
            let json = serde_json::to_value(&schema).unwrap();
            let props = json["properties"].as_object().unwrap();
            for f in kind.fields {
                assert!(
                    props.contains_key(f.key),
                    "{} has no key {}",
                    kind.noun,
                    f.key
                );
            }
        }
    }

    /// A check form offers every key of a check.
    #[test]
    fn the_check_form_has_every_key() {
        let json = serde_json::to_value(schema_for!(Check)).unwrap();
        for key in json["properties"].as_object().unwrap().keys() {
            assert!(
                CHECKS.fields.iter().any(|f| f.key == key),
                "the check form lacks {key}"
            );
        }
    }
}
