//! What each table of a configuration is deserialized as when it is
//! checked on its own ([`Kind`]): the root, a top-level element
//! (datacenter, region, view, check, scenario, service, domain, geoip), a
//! record, an address, a value; which of its keys hold elements of their
//! own; how `compile` names one.

use std::borrow::Cow;

use serde::de::DeserializeOwned;
use toml::{
    Spanned,
    de::{DeTable, DeValue, ValueDeserializer},
};

use super::config::*;

/// What an element is deserialized as.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(super) enum Kind {
    Root,
    Geoip,
    Datacenter,
    Region,
    View,
    Check,
    Scenario,
    Service,
    Domain,
    Notifier,
    Record,
    Address,
    Value,
}

/// A deserialization error with the path of the key inside the element.
pub(super) type DeError = serde_path_to_error::Error<toml::de::Error>;

impl Kind {
    /// Deserializes `value` as this kind.
    pub(super) fn check(self, value: Spanned<DeValue<'_>>) -> Result<(), DeError> {
        fn de<T: DeserializeOwned>(value: Spanned<DeValue<'_>>) -> Result<(), DeError> {
            serde_path_to_error::deserialize::<_, T>(ValueDeserializer::from(value)).map(drop)
        }
        match self {
            Self::Root => de::<Config>(value),
            Self::Geoip => de::<Geoip>(value),
            Self::Datacenter => de::<Datacenter>(value),
            Self::Region => de::<Region>(value),
            Self::View => de::<View>(value),
            Self::Check => de::<Check>(value),
            Self::Scenario => de::<Scenario>(value),
            Self::Service => de::<Service>(value),
            Self::Domain => de::<Domain>(value),
            Self::Notifier => de::<Notifier>(value),
            Self::Record => de::<Record>(value),
            Self::Address => de::<Address>(value),
            Self::Value => de::<String>(value),
        }
    }

    /// The key of this kind holding elements checked on their own, and
    /// whether it holds a list of them (else one table).
    pub(super) fn child(self, key: &str) -> Option<(Kind, bool)> {
        Some(match (self, key) {
            (Self::Root, "geoip") => (Self::Geoip, false),
            (Self::Root, "datacenter") => (Self::Datacenter, true),
            (Self::Root, "region") => (Self::Region, true),
            (Self::Root, "view") => (Self::View, true),
            (Self::Root, "check") => (Self::Check, true),
            (Self::Root, "scenario") => (Self::Scenario, true),
            (Self::Root, "service") => (Self::Service, true),
            (Self::Root, "domain") => (Self::Domain, true),
            (Self::Root, "notifier") => (Self::Notifier, true),
            (Self::Domain, "record") => (Self::Record, true),
            (Self::Record, "addresses") => (Self::Address, true),
            (Self::Record, "values") => (Self::Value, true),
            _ => return None,
        })
    }

    /// How `compile` names the element: `domain example.test`, `record www
    /// A`, `address 2`; `#n` when it has no name.
    pub(super) fn name(self, value: &DeValue<'_>, n: usize) -> String {
        let text = |key: &str| value.get(key)?.get_ref().as_str();
        let named = |kind: &str| match text("name") {
            Some(name) => format!("{kind} {name}"),
            None => format!("{kind} #{n}"),
        };
        match self {
            Self::Root => String::new(),
            Self::Geoip => "geoip".into(),
            Self::Datacenter => named("datacenter"),
            Self::Region => named("region"),
            Self::View => named("view"),
            Self::Check => named("check"),
            Self::Scenario => named("scenario"),
            Self::Service => named("service"),
            Self::Domain => named("domain"),
            Self::Notifier => named("notifier"),
            Self::Record => match (text("name"), text("type")) {
                (Some(name), Some(kind)) => format!("record {name} {kind}"),
                _ => format!("record #{n}"),
            },
            Self::Address => format!("address {n}"),
            Self::Value => format!("value {n}"),
        }
    }
}

impl Kind {
    /// The error of this kind for a table of the one key `name`, when
    /// `name` is a key it does not take: an unknown field, said the same
    /// whatever the key's value (the field is refused before its value
    /// is read). `None` for a key it takes, or a kind that takes any.
    pub(super) fn unknown_key(self, name: &str) -> Option<DeError> {
        let mut one = DeTable::new();
        one.insert(
            Spanned::new(0..name.len(), Cow::Borrowed(name)),
            Spanned::new(0..0, DeValue::Boolean(true)),
        );
        let e = self.check(Spanned::new(0..0, DeValue::Table(one))).err()?;
        let unknown =
            e.inner().message().starts_with("unknown field") && e.path().to_string() == name;
        unknown.then_some(e)
    }
}
