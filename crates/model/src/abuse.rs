//! The `[rate_limit]` and `[cookies]` tables: their defaults and rules, and
//! the response rate limit they set (applied by `dns::rrl`)
//! (docs/configuration.md, "Rate limiting and cookies").

use std::time::Duration;

use super::{
    config::{Cookies, RateLimit},
    config_errors::{ConfigError, Listing},
    node::Network,
};

/// Responses per second to one client network by default.
pub const DEFAULT_PER_SECOND: u32 = 1000;
/// IPv4 clients are grouped by this prefix by default.
pub const DEFAULT_IPV4_PREFIX: u8 = 24;
/// IPv6 clients are grouped by this prefix by default.
pub const DEFAULT_IPV6_PREFIX: u8 = 56;
/// Every this-many-th limited response is sent truncated by default.
pub const DEFAULT_SLIP: u32 = 2;
/// The most responses per second a limit may allow.
pub const MAX_PER_SECOND: u32 = 100_000_000;

/// How often the cookie secret is replaced by default: 30 days.
pub const DEFAULT_COOKIE_ROTATION: Duration = Duration::from_secs(30 * 24 * 3600);
/// The shortest rotation: each one is a command in the cluster's log.
pub const MIN_COOKIE_ROTATION: Duration = Duration::from_secs(10);
/// The most limited responses in a row that may go before one is sent
/// truncated.
pub const MAX_SLIP: u32 = 10;

fn err(errors: &mut Listing, field: &str, message: String) {
    errors.push(ConfigError {
        path: format!("rate_limit / {field}"),
        message,
    });
}

/// The limit `[rate_limit]` sets, its defaults filled in; errors named by
/// field.
pub fn rate_limit(errors: &mut Listing, table: Option<&RateLimit>) -> Limits {
    let mut limits = Limits::default();
    let Some(t) = table else {
        return limits;
    };
    limits.enabled = t.enabled.unwrap_or(true);
    if let Some(rate) = t.responses_per_second {
        if (1..=MAX_PER_SECOND).contains(&rate) {
            limits.per_second = rate;
        } else {
            err(
                errors,
                "responses_per_second",
                format!(
                    "{rate} is not a rate from 1 to {MAX_PER_SECOND} (to answer without a limit, write enabled = false)"
                ),
            );
        }
    }
    if let Some(p) = t.ipv4_prefix {
        if (8..=32).contains(&p) {
            limits.ipv4_prefix = p;
        } else {
            err(
                errors,
                "ipv4_prefix",
                format!("{p} is not a prefix length from 8 to 32"),
            );
        }
    }
    if let Some(p) = t.ipv6_prefix {
        if (16..=128).contains(&p) {
            limits.ipv6_prefix = p;
        } else {
            err(
                errors,
                "ipv6_prefix",
                format!("{p} is not a prefix length from 16 to 128"),
            );
        }
    }
    if let Some(slip) = t.slip {
        if slip <= MAX_SLIP {
            limits.slip = slip;
        } else {
            err(
                errors,
                "slip",
                format!(
                    "{slip} is more than {MAX_SLIP} (0 drops every limited response, 1 truncates every one, N truncates every Nth)"
                ),
            );
        }
    }
    if let Some(exempt) = &t.exempt {
        limits.exempt = Vec::with_capacity(exempt.len());
        for (i, text) in exempt.iter().enumerate() {
            match Network::try_from(text.clone()) {
                Ok(n) => limits.exempt.push(n),
                Err(e) => err(errors, &format!("exempt {}", i + 1), e.to_string()),
            }
        }
    }
    limits
}

/// The rotation `[cookies]` sets, or its default.
pub fn cookie_rotation(errors: &mut Listing, table: Option<&Cookies>) -> Duration {
    let Some(rotate) = table.and_then(|t| t.rotate) else {
        return DEFAULT_COOKIE_ROTATION;
    };
    if rotate.0 < MIN_COOKIE_ROTATION {
        errors.push(ConfigError {
            path: "cookies / rotate".into(),
            message: format!(
                "{rotate} is shorter than {}s: every rotation is a command in the cluster's log",
                MIN_COOKIE_ROTATION.as_secs()
            ),
        });
        return DEFAULT_COOKIE_ROTATION;
    }
    rotate.0
}

#[cfg(test)]
mod tests {
    use crate::{compile, parse};

    fn compiled(text: &str) -> Result<crate::Compiled, Vec<String>> {
        let config = parse(text).map_err(|e| e.lines().into_iter().collect::<Vec<_>>())?;
        compile(&config).map_err(|e| e.lines().into_iter().collect())
    }

    #[test]
    fn defaults_and_a_table_as_written() {
        let c = compiled("").unwrap();
        assert!(c.rate_limit.enabled);
        assert_eq!(c.rate_limit.per_second, 1000);
        assert_eq!(
            (
                c.rate_limit.ipv4_prefix,
                c.rate_limit.ipv6_prefix,
                c.rate_limit.slip
            ),
            (24, 56, 2)
        );
        assert_eq!(c.rate_limit.exempt.len(), 2, "loopback");
        assert_eq!(c.cookie_rotation.as_secs(), 30 * 24 * 3600);
        let c = compiled(
            "[rate_limit]\nresponses_per_second = 50\nipv4_prefix = 32\nipv6_prefix = 64\nslip = 0\nexempt = [\"192.0.2.0/24\"]\n\n[cookies]\nrotate = \"1h\"\n",
        )
        .unwrap();
        assert_eq!(c.rate_limit.per_second, 50);
        assert_eq!(
            (
                c.rate_limit.ipv4_prefix,
                c.rate_limit.ipv6_prefix,
                c.rate_limit.slip
            ),
            (32, 64, 0)
        );
        assert_eq!(c.rate_limit.exempt[0].to_string(), "192.0.2.0/24");
        assert_eq!(c.cookie_rotation.as_secs(), 3600);
        assert!(
            !compiled("[rate_limit]\nenabled = false\n")
                .unwrap()
                .rate_limit
                .enabled
        );
    }

    #[test]
    fn the_tables_survive_an_edit_written_back_as_toml() {
        let text = "[[domain]]\nname = \"a.test\"\nnameservers = [\"ns1.a.test\"]\n\n[rate_limit]\nslip = 1\nexempt = []\n\n[cookies]\nrotate = \"1h\"\n";
        let config = parse(text).unwrap();
        let written = toml::to_string_pretty(&config).unwrap();
        assert_eq!(parse(&written).unwrap(), config, "{written}");
        assert_eq!(config.rate_limit.unwrap().exempt, Some(Vec::new()));
    }

    #[test]
    fn bad_values_are_named_with_their_field() {
        let errs = compiled(
            "[rate_limit]\nresponses_per_second = 0\nipv4_prefix = 33\nipv6_prefix = 8\nslip = 11\nexempt = [\"10.0.0.0/8\", \"10.0.0.0/40\", \"nope\"]\n\n[cookies]\nrotate = \"2s\"\n",
        )
        .unwrap_err();
        assert_eq!(
            errs,
            [
                "rate_limit / responses_per_second: 0 is not a rate from 1 to 100000000 (to answer without a limit, write enabled = false)",
                "rate_limit / ipv4_prefix: 33 is not a prefix length from 8 to 32",
                "rate_limit / ipv6_prefix: 8 is not a prefix length from 16 to 128",
                "rate_limit / slip: 11 is more than 10 (0 drops every limited response, 1 truncates every one, N truncates every Nth)",
                "rate_limit / exempt 2: \"10.0.0.0/40\": the prefix must be 0 to 32",
                "rate_limit / exempt 3: \"nope\" is not a network: write ADDRESS/PREFIX, e.g. 10.0.0.0/8",
                "cookies / rotate: 2s is shorter than 10s: every rotation is a command in the cluster's log",
            ]
        );
        let unknown = compiled("[rate_limit]\nrate = 5\n").unwrap_err();
        assert!(unknown[0].contains("rate"), "{unknown:?}");
    }
}

/// The networks exempt by default: loopback, whose sources cannot come
/// from outside the machine (the kernel drops them as martians).
pub fn default_exempt() -> Vec<Network> {
    ["127.0.0.0/8", "::1/128"]
        .into_iter()
        .filter_map(|n| Network::try_from(n.to_string()).ok())
        .collect()
}

/// The limit in effect, from the `[rate_limit]` table with its defaults.
#[derive(Debug, Clone, PartialEq)]
pub struct Limits {
    pub enabled: bool,
    pub per_second: u32,
    pub ipv4_prefix: u8,
    pub ipv6_prefix: u8,
    pub slip: u32,
    pub exempt: Vec<Network>,
}

impl Default for Limits {
    fn default() -> Self {
        Self {
            enabled: true,
            per_second: DEFAULT_PER_SECOND,
            ipv4_prefix: DEFAULT_IPV4_PREFIX,
            ipv6_prefix: DEFAULT_IPV6_PREFIX,
            slip: DEFAULT_SLIP,
            exempt: default_exempt(),
        }
    }
}
