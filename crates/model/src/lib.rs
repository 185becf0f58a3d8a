//! The replicated configuration: its types, parsing and validation.
//!
//! [`config`] is the file as written; [`compile`] checks it whole and turns
//! it into [`Compiled`], the only form the rest of gtm reads.
//!
//! The bottom of the domain also holds what every layer above shares: who
//! asked ([`actor`]), what a drain targets ([`drain`]), the operator state
//! ([`operator`]), the error kinds and the API's error body ([`error`]),
//! the one clock ([`clock`]), DNS names as keys ([`names`]), and small
//! helpers with no layer of their own ([`addr`], [`ends`], [`when`],
//! [`random`], [`metrics`]).

pub mod addr;
pub mod ends;
pub mod metrics;
pub mod random;
pub mod when;

pub mod abuse;
pub mod actor;
mod alike;
mod cancel;
pub mod clock;
pub mod compare;
pub mod compile;
pub mod condition;
pub mod config;
mod config_errors;
mod diagnose;
pub mod drain;
pub mod duration;
pub mod error;
pub mod inputs;
mod keys;
mod kind;
pub mod layout;
mod lines;
pub mod names;
pub mod node;
pub mod operator;
mod parse;
pub mod place;
pub mod rtype;
pub mod severity;
pub mod text;
pub mod topology;
pub mod value;
pub mod zonefile;

pub use cancel::{Cancel, Cancelled, CheckError};
pub use compile::{Compiled, compile, compile_until};
pub use config::Config;
pub use config_errors::{ConfigError, ConfigErrors, ERRORS_LISTED};
pub use parse::{parse, parse_finely_and_whole, parse_like, parse_until};

/// The text of domain `a.test` with `nameservers` (written inside the
/// list's quotes) and `records`, each `NAME TYPE VALUE`: an A's value is
/// its IP, a CNAME's its target, any other's its one value. For the tests
/// of every layer that builds from a configuration.
#[doc(hidden)]
pub fn domain_text(nameservers: &str, records: &[&str]) -> String {
    let records: String = records
        .iter()
        .map(|r| {
            let (owner, rest) = r.split_once(' ').unwrap_or((r, ""));
            let (kind, value) = rest.split_once(' ').unwrap_or((rest, ""));
            let data = match kind {
                "A" => format!("addresses = [{{ ip = \"{value}\" }}]"),
                "CNAME" => format!("addresses = [{{ target = \"{value}\" }}]"),
                _ => format!("values = [\"{value}\"]"),
            };
            format!("[[domain.record]]\nname = \"{owner}\"\ntype = \"{kind}\"\n{data}\n\n")
        })
        .collect();
    format!("[[domain]]\nname = \"a.test\"\nnameservers = [\"{nameservers}\"]\n\n{records}")
}
