//! The worker family: what a queue worker does with the runs it takes. A worker told to
//! stop takes no further run (rulvar's `stop()`, docs/engine-model.md 5.2 step 6: the drive
//! in progress is cancelled and settles, the sweep takes nothing more and returns).
//!
//! Judged from the engine facts the scenario records around a stop (`WorkerStopped` when
//! it is told, `StoppedSweepReturned` when the sweep it interrupted returns) and the
//! grants to the stopped worker's owner identity applied between the two.

use super::super::model::{t, who, Judged};
use super::super::{Expectation, Property, Witness};
use crate::history::{FactKind, OpKind};

pub const A_STOPPED_WORKER_TAKES_NO_RUN: Property = Property {
        name: "a_stopped_worker_takes_no_run",
        expectation: Expectation::Always,
        claim: "Once a worker is told to stop, the sweep it was in is granted no further run (for a drive or a retention delete) before it returns: only the drive already holding its lease finishes.",
        not_checked: "Acquires refused or invoked in the same virtual nanosecond as the stop (their order against it is not recorded); what the cancelled drive writes (the settle properties judge it).",
        check: a_stopped_worker_takes_no_run,
};

fn a_stopped_worker_takes_no_run(j: &Judged, out: &mut Vec<Witness>) {
    let facts = &j.history.facts;
    for (i, stop) in facts.iter().enumerate() {
        if stop.kind != FactKind::WorkerStopped {
            continue;
        }
        // The sweep's return by the same identity, if it returned (a crash ends it too, and
        // a crashed process's identity makes no further call).
        // Ordered by the apply order, which facts and calls share (a fact knows how many
        // mutations had been applied when it happened): a grant applied after the stop and
        // before the return, to an acquire invoked after the stop.
        let until = facts[i + 1..]
            .iter()
            .find(|f| f.kind == FactKind::StoppedSweepReturned && f.owner == stop.owner)
            .map_or(usize::MAX, |f| f.applied_before);
        for c in j.applied.iter().filter(|c| {
            c.op == OpKind::Acquire
                && c.node == stop.node
                && c.incarnation == stop.incarnation
                && c.args.owner.as_deref() == Some(stop.owner.as_str())
                && c.invoked_ns > stop.at_ns
                && (stop.applied_before..until).contains(&super::order(c))
        }) {
            out.push(Witness {
                witness: format!(
                    "worker {} was told to stop at t={}, and its sweep then had {} acquire run {} at t={} before it returned",
                    stop.owner,
                    t(stop.at_ns),
                    who(c),
                    c.run_id,
                    t(c.invoked_ns)
                ),
                op: Some(c.op.as_str()),
                call: Some(c.id),
            });
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::history::FactKind;
    use crate::oracle::testkit::engine::*;

    #[test]
    fn an_acquire_after_the_stop_is_caught_and_one_after_the_return_is_not() {
        let mut h = HistoryBuilder::engine_run();
        h.acquire(0, "w", "r", 1);
        h.fact(0, "w", FactKind::WorkerStopped);
        assert!(h.judge("a_stopped_worker_takes_no_run").is_empty(), "the drive in progress");
        h.acquire(1, "w", "s", 1);
        assert!(h.judge("a_stopped_worker_takes_no_run").is_empty(), "another node");
        h.acquire(0, "other", "s", 2);
        assert!(h.judge("a_stopped_worker_takes_no_run").is_empty(), "another identity");
        h.fact(0, "w", FactKind::StoppedSweepReturned);
        h.acquire(0, "w", "t", 1);
        assert!(h.judge("a_stopped_worker_takes_no_run").is_empty(), "a fresh worker after the return");
    }

    #[test]
    fn a_stopped_sweep_that_takes_another_run_is_caught() {
        let mut h = HistoryBuilder::engine_run();
        h.acquire(0, "w", "r", 1);
        h.fact(0, "w", FactKind::WorkerStopped);
        h.acquire(0, "w", "s", 1);
        h.fact(0, "w", FactKind::StoppedSweepReturned);
        let v = h.judge("a_stopped_worker_takes_no_run");
        assert_eq!(v.len(), 1, "{v:?}");
        assert!(v[0].witness.contains("acquire run s"), "{}", v[0].witness);
    }
}
