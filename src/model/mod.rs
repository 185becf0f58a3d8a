//! The replicated configuration: its types, parsing and validation.
//!
//! [`config`] is the file as written; [`compile`] checks it whole and turns
//! it into [`Compiled`], the only form the rest of gtm reads.

pub mod abuse;
pub mod compile;
pub mod condition;
pub mod config;
mod diagnose;
pub mod duration;
pub mod node;
mod parse;
pub mod place;
pub mod text;
pub mod value;

pub use compile::{Compiled, ConfigError, ConfigErrors, compile};
pub use config::Config;
pub use parse::parse;
