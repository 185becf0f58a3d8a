//! The committed health inputs (docs/health.md, "Inputs"), handed to the
//! probers of push and alertmanager checks. Installed after every applied
//! command; read again only when their values in the map changed.

use std::sync::Arc;

use gtm_cluster::Value;
use gtm_health::probe::inputs::Inputs;
use gtm_model::inputs::InputState;

use super::Engine;

/// The inputs' values in the map when last installed, by pointer.
#[derive(Debug, Default)]
pub(crate) struct Seen(std::sync::Mutex<[Option<Value>; 2]>);

fn same(a: &Option<Value>, b: Option<&Value>) -> bool {
    match (a, b) {
        (None, None) => true,
        (Some(a), Some(b)) => a.as_ptr() == b.as_ptr() && a.len() == b.len(),
        _ => false,
    }
}

impl Engine {
    /// The inputs the probers read ([`gtm_health::probe::Prober::reading`]).
    pub fn inputs(&self) -> Arc<Inputs> {
        self.inputs.clone()
    }

    /// Installs the inputs held in the map as `values` (pushes, alerts),
    /// read with `read` unless they are the values last installed.
    pub fn set_inputs(&self, values: [Option<&Value>; 2], read: impl FnOnce() -> InputState) {
        let mut seen = self.inputs_seen.0.lock().unwrap_or_else(|p| p.into_inner());
        if same(&seen[0], values[0]) && same(&seen[1], values[1]) {
            return;
        }
        *seen = values.map(|v| v.cloned());
        self.inputs.store(read());
    }
}
