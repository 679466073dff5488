//! The heal is not over while an operation that may still write is in flight: here, an
//! offline resolution stalled across it.

use sim::history::{Call, FactKind, OpKind};
use sim::runner::execute;
use store::ProfileName;

fn queue() -> &'static dyn sim::world::Scenario {
    scenarios::catalog().into_iter().find(|s| s.name() == "queue").expect("queue")
}

/// Queue seed 670897103 (a fresh seed of an explore search under `current`): worker n1
/// settles run-1_ suspended, lists it with its suspension open, and its offline
/// resolution's acquire stalls 572 ms. Meanwhile n0 resumes the run and a cancel settles
/// it. The resolution lands after the heal, past the cancelled settle, and the audit
/// repair that follows makes the run `running` (stranded: a terminal meta over live journal
/// work). Before the operator duties counted as in flight, the heal had already seen every
/// run terminal and stopped the world, and the run ended `running`
/// (`all_runs_settle_after_heal`). Now the heal waits, a worker resumes the revived run,
/// and it settles.
#[test]
fn a_resolution_stalled_across_the_heal_is_waited_for_and_the_run_it_revives_settles() {
    let out = execute(queue(), ProfileName::Current, 670_897_103, None, None).expect("run");
    assert!(out.violations.is_empty(), "{:?}", out.violations);
    let h = &out.history;
    let healed = h.facts.iter().find(|f| matches!(f.kind, FactKind::Healed)).expect("a heal").at_ns;
    let mut after: Vec<&Call> = h
        .calls
        .iter()
        .filter(|c| c.run_id == "run-1_" && c.applied.is_some() && c.invoked_ns > healed)
        .filter(|c| matches!(c.op, OpKind::Append | OpKind::PutMeta))
        .collect();
    after.sort_by_key(|c| c.applied.as_ref().map(|a| a.order));
    let payload = |c: &Call| {
        serde_json::from_str::<serde_json::Value>(c.args.payload.as_deref().unwrap_or("null")).unwrap()
    };
    let status = |c: &Call| payload(c).get("status").and_then(|s| s.as_str()).unwrap_or("").to_string();
    assert!(after.len() >= 3, "the run is written after the heal: {} writes", after.len());
    // The stalled resolution lands first, then the repair's meta write.
    assert_eq!(after[0].op, OpKind::Append);
    assert_eq!(payload(after[0]).get("kind").and_then(|k| k.as_str()), Some("resolution"));
    assert_eq!((after[1].op, status(after[1]).as_str()), (OpKind::PutMeta, "running"));
    // The revived run is driven again and settles: its last meta write is terminal.
    let last = after.iter().rev().find(|c| c.op == OpKind::PutMeta).expect("a meta write");
    assert!(
        matches!(status(last).as_str(), "ok" | "error" | "cancelled" | "exhausted"),
        "the run ends {}",
        status(last)
    );
}
