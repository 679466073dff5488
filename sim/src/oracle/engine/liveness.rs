//! The liveness family (eventually): after the heal every run settles.
//!
//! Each property is judged from the apply-ordered history and the engine facts, under the
//! holder and generation rules of [`super`].

use super::super::contract::{audit, Verdict};
use super::super::model::Judged;
use super::super::{Expectation, Property, Witness};
use super::*;
use crate::history::FactKind;

pub const ALL_RUNS_SETTLE_AFTER_HEAL: Property = Property {
        name: "all_runs_settle_after_heal",
        expectation: Expectation::Eventually,
        claim: "After the heal (faults off, every node up, suspensions answered), every run with a meta row is terminal and consistent with its journal, and no journal is left without a meta row.",
        not_checked: "Scenarios without a heal phase; runs lost before their first meta write.",
        check: all_runs_settle_after_heal,
};

fn all_runs_settle_after_heal(j: &Judged, out: &mut Vec<Witness>) {
    if !j.history.facts.iter().any(|f| f.kind == FactKind::Healed) {
        return;
    }
    for run in j.fin.meta.keys() {
        let status = final_status(j, run);
        let audit = audit(status, &final_entries(j, run));
        if !status.is_some_and(|s| s.is_terminal()) || audit.verdict != Verdict::Consistent {
            out.push(Witness {
                witness: format!(
                    "run {run} ends {} ({:?} by the reconciler: {})",
                    status.map_or("without meta".to_string(), |s| s.to_string()),
                    audit.verdict,
                    audit.reason
                ),
                op: None,
                call: None,
            });
        }
    }
    for (run, entries) in &j.fin.entries {
        if !entries.is_empty() && !j.fin.meta.contains_key(run) {
            out.push(Witness {
                witness: format!("run {run} ends with {} journal entries and no meta row", entries.len()),
                op: None,
                call: None,
            });
        }
    }
}

#[cfg(test)]
mod tests {

    use store::RunStatus;

    use crate::history::FactKind;
    use crate::oracle::testkit::engine::*;

    #[test]
    fn an_unsettled_run_after_the_heal_is_caught() {
        let mut h = HistoryBuilder::engine_run();
        let a = h.acquire(0, "a", "r", 1);
        h.meta(0, Some(&a), "r", RunStatus::Running, 1);
        assert!(h.judge("all_runs_settle_after_heal").is_empty(), "no heal phase: not judged");
        h.fact(0, "", FactKind::Healed);
        assert_eq!(h.judge("all_runs_settle_after_heal").len(), 1);
        h.meta(0, Some(&a), "r", RunStatus::Ok, 1);
        assert!(h.judge("all_runs_settle_after_heal").is_empty());
    }
}
