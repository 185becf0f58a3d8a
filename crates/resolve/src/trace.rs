//! The decisions of one evaluation, as [`evaluate_traced`](super::evaluate_traced)
//! writes them while it takes them: what `explain` reads to walk a record's
//! resolution step by step. Indices are the record's addresses (as in
//! [`Steering::addresses`](gtm_model::compile::Steering)) and datacenters
//! (as in the compiled datacenters).

use gtm_model::{
    compile::DcId,
    place::{Continent, Country, Place},
};

use super::{Answer, PlaceKey};

/// Every step of one evaluation.
#[derive(Debug, Clone, Default)]
pub struct Trace {
    /// Step 1, per address: its health decision and what made it.
    pub addresses: Vec<AddressStep>,
    /// Step 2: the mode's decision.
    pub mode: ModeStep,
    /// The addresses of the group the mode answers from (Main or DR
    /// datacenter, the chosen datacenters, or every enabled address),
    /// before health.
    pub group: Vec<usize>,
    /// The healthy addresses of that group, in answer order.
    pub candidates: Vec<usize>,
    /// Step 3, per place that was decided (the default first, with no key):
    /// its candidates, how they were narrowed, its answer.
    pub places: Vec<PlaceStep>,
}

/// How one address was judged.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct AddressStep {
    /// Its datacenter is reachable (or it has none).
    pub dc_up: bool,
    /// An operator took it out of answers.
    pub drained: bool,
    /// What its HC field says (or, while unknown, its last decision).
    pub by_hc: bool,
    /// Its check or scenario has no result: `by_hc` is the last decision.
    pub kept_last: bool,
    /// The decision: all of the above allow it.
    pub healthy: bool,
}

/// What the mode decided.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum ModeStep {
    #[default]
    Standalone,
    DisasterRecovery {
        main: DcId,
        dr: DcId,
        /// The Main datacenter has a healthy address.
        main_healthy: bool,
        /// The condition as operators read it.
        condition: String,
        /// The condition holds now.
        holds: bool,
        /// DR stays on only because failback is manual.
        held: bool,
        dr_on: bool,
    },
    Datacenter {
        /// The DC Selection order.
        order: Vec<DcId>,
        /// The datacenters with a healthy address, in that order.
        with_healthy: Vec<DcId>,
        /// How many datacenters hold an enabled address of the record.
        with_addresses: usize,
        /// Total DCs to Select from.
        count: u32,
        chosen: Vec<DcId>,
    },
}

/// How the candidates of one place were narrowed to it (seed 002 step 2).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Narrowed {
    /// The record has no topological selection: every client alike.
    NoTopology,
    /// To the addresses listed for this country.
    Country(Country),
    /// To the addresses listed for this continent.
    Continent(Continent),
    /// To the addresses listed for no place.
    NoPlace,
    /// Not at all: no address is for no place, so all of them.
    All,
}

/// One place's answer and how it was reached.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PlaceStep {
    /// The table entry it is decided for; `None` for the default answer.
    pub key: Option<PlaceKey>,
    pub place: Option<Place>,
    /// Datacenter mode with topological selection: the datacenters chosen
    /// for this place, nearest first.
    pub nearest: Option<Vec<DcId>>,
    /// The mode's candidates for this place.
    pub from: Vec<usize>,
    pub by: Narrowed,
    /// The candidates after narrowing, before the balance.
    pub narrowed: Vec<usize>,
    /// What the balance answers among (weight 0 left out), or the
    /// fail-safe when no candidate is left.
    pub answer: Answer,
}
