//! Stopping the check of a configuration nobody waits for any more.
//!
//! Parsing, listing the errors of and compiling a large text takes seconds
//! on a thread of the blocking pool, and a thread there runs to its end
//! whatever became of the request that started it. So the API hands the
//! work a [`Cancel`] that it sets when the request is dropped (its client
//! went away), and the loops of `parse`, `diagnose` and `compile` look at
//! it between pieces, sections, elements and records: the work ends with
//! [`Cancelled`] within one of them.

use std::sync::{
    Arc,
    atomic::{AtomicBool, Ordering},
};

use super::config_errors::{ConfigError, ConfigErrors};

/// A flag a check of a configuration looks at as it goes; clones share it.
/// One made by `default()` that nothing sets never stops anything.
#[derive(Debug, Clone, Default)]
pub struct Cancel(Arc<AtomicBool>);

impl Cancel {
    pub fn new() -> Self {
        Self::default()
    }

    /// Stops the work that holds this flag (or a clone of it).
    pub fn cancel(&self) {
        self.0.store(true, Ordering::Relaxed);
    }

    pub fn is_cancelled(&self) -> bool {
        self.0.load(Ordering::Relaxed)
    }

    /// `Err(Cancelled)` once cancelled.
    pub fn check(&self) -> Result<(), Cancelled> {
        if self.is_cancelled() {
            Err(Cancelled)
        } else {
            Ok(())
        }
    }
}

/// The check was stopped before it had an answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("the check of the configuration was cancelled: nobody waits for its answer")]
pub struct Cancelled;

/// Why a text is not a configuration: it does not validate, or its check
/// was cancelled.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum CheckError {
    #[error(transparent)]
    Invalid(#[from] ConfigErrors),
    #[error(transparent)]
    Cancelled(#[from] Cancelled),
}

impl CheckError {
    /// The errors of a check that nothing can cancel: a cancellation (which
    /// cannot happen there) is said as one error.
    pub(super) fn uncancelled(self) -> ConfigErrors {
        match self {
            Self::Invalid(errors) => errors,
            Self::Cancelled(c) => ConfigErrors::from(ConfigError {
                path: String::new(),
                message: c.to_string(),
            }),
        }
    }
}
