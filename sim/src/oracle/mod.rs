//! The oracle: named properties over (history, final state). Each property is one function
//! with a one-line claim and a line saying what it does not check; each violation names
//! the property and carries a witness in words.
//!
//! The serial history is ordered by what the store APPLIED (the after-commit instant the
//! recorder noted for every mutation), not only by what writers reported. That is what
//! lets the oracle see a stale mutation that committed after a successor's grant even when
//! the journal shows no inversion, and a stale renew or release, which leave no trace in
//! any writer's report.
//!
//! The oracle is independent of the system under test: it reads payloads, filters,
//! settles, audits, checkpoints and journal keys through its own reading of the contract
//! ([`contract`]), and takes the world's expected values from [`crate::ledger`], never from
//! the store's functions or the actors (`sim/tests/oracle_independent.rs` holds it to that).

pub mod contract;
pub mod eligibility;
pub mod end_state;
pub mod engine;
pub mod goals;
pub mod lost_lease;
pub mod model;
pub mod properties;
pub mod reference;
pub mod repair;
pub mod settle_entry;
pub mod states;
#[cfg(test)]
pub(crate) mod testkit;
pub mod threading;

use serde::Serialize;

use crate::history::{FinalState, History, OpKind};
pub use crate::verdict::{Expect, Violation};

/// Whether a property must hold always, eventually (after the heal), or is a coverage goal.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Expectation {
    Always,
    Eventually,
    Sometimes,
}

/// A named property.
pub struct Property {
    pub name: &'static str,
    pub expectation: Expectation,
    /// The claim, one sentence.
    pub claim: &'static str,
    /// What it does not check.
    pub not_checked: &'static str,
    /// Reports each breach as a witness; [`Property::judge`] stamps this property's name on
    /// it, so a name is written once, here.
    pub check: fn(&model::Judged, &mut Vec<Witness>),
}

impl Property {
    /// Run the check over one judged run: its violations, each named for this property.
    /// A check that panics is a fault of the oracle, not a verdict on the store; it is
    /// reported as a violation of this property (so a sweep names the seed and prints the
    /// command that reproduces it) instead of aborting the sweep.
    pub fn judge(&self, judged: &model::Judged) -> Vec<Violation> {
        let mut witnesses = Vec::new();
        let checked =
            std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| (self.check)(judged, &mut witnesses)));
        if let Err(panic) = checked {
            let said = panic
                .downcast_ref::<&str>()
                .map(|s| s.to_string())
                .or_else(|| panic.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "no message".to_string());
            witnesses.push(Witness::new(format!(
                "the oracle's check panicked ({said}): a fault of the harness, not a verdict on the store"
            )));
        }
        witnesses.into_iter().map(|w| w.named(self.name)).collect()
    }
}

/// A breach as a check reports it: the witness in words and, when it can point at one,
/// the offending call; the property it breaches is named by the table.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Witness {
    pub witness: String,
    pub op: Option<&'static str>,
    pub call: Option<usize>,
}

impl Witness {
    /// A witness that points at no single call.
    pub fn new(witness: String) -> Witness {
        Witness { witness, op: None, call: None }
    }

    /// The same witness, naming the offending call (its operation and history id).
    pub fn on(mut self, op: OpKind, call: usize) -> Witness {
        self.op = Some(op.as_str());
        self.call = Some(call);
        self
    }

    /// The violation of `property` this witness shows.
    pub fn named(self, property: &'static str) -> Violation {
        Violation { property, witness: self.witness, op: self.op, call: self.call }
    }
}

/// Every property: the store-level ones, the end-state ones, then the engine-level ones.
pub fn all_properties() -> impl Iterator<Item = &'static Property> {
    properties::ALL
        .iter()
        .chain(end_state::ALL.iter())
        .chain(engine::ALL.iter())
        .chain(lost_lease::ALL.iter())
        .chain(settle_entry::ALL.iter())
        .chain(threading::ALL.iter())
        .chain(eligibility::ALL.iter())
        .chain(repair::ALL.iter())
}

/// Judge one run with every property (an engine property over a history without engine
/// facts or engine writes finds nothing to judge).
pub fn judge(history: &History, fin: &FinalState, expect: Expect) -> Vec<Violation> {
    assess(history, fin, expect).violations
}

/// What the oracle says of one run.
pub struct Assessment {
    pub violations: Vec<Violation>,
    /// The coverage goals the run met (see [`goals`]).
    pub goals: Vec<&'static str>,
    /// The superseded holders' at-least-once windows (reported, not judged).
    pub windows: Vec<lost_lease::Window>,
    /// The abstract states the run reached (indices into [`states::universe`]).
    pub states: Vec<u16>,
}

/// Judge one run, list the coverage goals it met, and measure its at-least-once windows.
pub fn assess(history: &History, fin: &FinalState, expect: Expect) -> Assessment {
    let judged = model::Judged::build(history, fin, expect);
    let mut out = Vec::new();
    for p in all_properties() {
        out.extend(p.judge(&judged));
    }
    Assessment {
        violations: out,
        goals: goals::met(&judged),
        windows: lost_lease::windows(&judged).to_vec(),
        states: states::reached(&judged),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::history::{FinalState, History};

    fn panics(_: &model::Judged, out: &mut Vec<Witness>) {
        out.push(Witness::new("found before the fault".into()));
        let empty: &[u8] = &[];
        let _ = empty[usize::from(out.len() > 1)..1];
    }

    #[test]
    fn a_check_that_panics_is_reported_as_a_violation_of_its_property() {
        let property = Property {
            name: "panicky",
            expectation: Expectation::Always,
            claim: "",
            not_checked: "",
            check: panics,
        };
        let (h, fin) = (History::default(), FinalState::default());
        let judged = model::Judged::build(&h, &fin, Expect::default());
        let found = property.judge(&judged);
        assert_eq!(found.len(), 2, "{found:?}");
        assert!(found.iter().all(|v| v.property == "panicky"));
        assert_eq!(found[0].witness, "found before the fault");
        assert!(
            found[1].witness.starts_with("the oracle's check panicked (range end index 1"),
            "{}",
            found[1].witness
        );
    }
}
