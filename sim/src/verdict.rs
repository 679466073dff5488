//! The verdict's vocabulary, below everything that judges or is judged: a violated
//! property with its witness ([`Violation`]), what a scenario tells the oracle to expect
//! ([`Expect`]), and a scenario's coverage requirement ([`Required`]). Scenarios and the
//! world name these types; the oracle and the scenarios' own checks produce violations.

use serde::Serialize;

use crate::history::OpKind;

/// One violated property with its witness.
///
/// `op` names the store operation of the offending call (`append`, `release`, `acquire`,
/// ...) when the property can point at one call; finding rows match on property and op,
/// so that, say, a stale release and a stale renew are told apart without any property
/// knowing which flaw a profile has.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Violation {
    pub property: &'static str,
    pub witness: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub op: Option<&'static str>,
    /// The offending call's id in the history, when there is one: where a witness
    /// timeline can stop.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub call: Option<usize>,
}

impl Violation {
    /// Whether `property` is a scenario's quorum guard (`<scenario>_quorum_reached`): the run
    /// did too little for the other properties to judge. For a seed's derived plan that is not
    /// a pass (the scenario is calibrated to reach its quorum, so a miss means a broken
    /// harness or a store that stops everything); a guided search's adversarial plans may
    /// starve the workload lawfully, so there it makes the run vacuous, not failing.
    pub fn is_vacuity_guard(property: &str) -> bool {
        property.ends_with("_quorum_reached")
    }

    /// A violation that points at no single call.
    pub fn new(property: &'static str, witness: String) -> Violation {
        Violation { property, witness, op: None, call: None }
    }

    /// The same violation, naming the offending call (its operation and history id).
    pub fn on(mut self, op: OpKind, call: usize) -> Violation {
        self.op = Some(op.as_str());
        self.call = Some(call);
        self
    }
}

/// Options from the scenario.
#[derive(Clone, Copy, Debug, Default)]
pub struct Expect {
    pub contiguous_seqs: bool,
    /// The lease ttl the stores were built with (judged by `grant_lasts_the_ttl`).
    pub ttl_ms: Option<u64>,
    /// The rule the scenario's queue workers apply retention by (judged by
    /// `retention_deletes_what_its_rule_selects`); `None`: no worker applies retention.
    pub retention: Option<RetentionRule>,
    /// The page size the stores were asked to create the database file with (judged by
    /// `database_file_keeps_its_options`); `None`: SQLite's default, not judged.
    pub page_size: Option<u32>,
}

/// A retention rule, declared by the scenario as data: the workers apply it through a
/// predicate of the scenario's, the oracle reads it on its own. A terminal run is deleted
/// when its id starts with `id_prefix`, unless `keep_completed_retried` is set and the run
/// completed in more than one segment (a run that needed a retry or a takeover is kept for
/// inspection; a meta without a segments counter counts as one segment).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RetentionRule {
    pub id_prefix: &'static str,
    pub keep_completed_retried: bool,
}

/// A scenario's coverage requirement: a goal, and the share of a sweep's seeds (per mille)
/// that must meet it. A sweep of `n` seeds needs `ceil(permille * n / 1000)` of them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Required {
    pub goal: &'static str,
    pub permille: u32,
}

impl Required {
    /// The seeds a sweep of `seeds` seeds must meet the goal in.
    pub fn seeds_needed(permille: u32, seeds: u64) -> u64 {
        (u64::from(permille) * seeds).div_ceil(1000)
    }
}

/// `goal` must be met in at least `permille` per mille of a sweep's seeds.
pub const fn required(goal: &'static str, permille: u32) -> Required {
    Required { goal, permille }
}
