//! Interrupts: a worker stop delivered at the worker's own leased write, which stalls with
//! the stop in flight. The queue seed pinned here reaches the window where a dispatch's
//! running entry commits while the cancel waits for it; under `current` the drain must end
//! that dispatch with a `cancelled` terminal (it was once left dangling), and the run passes.

use serde_json::Value;
use sim::history::{Call, FactKind, History, OpKind};
use sim::runner::execute;
use store::ProfileName;

fn entry(c: &Call) -> Option<Value> {
    serde_json::from_str(c.args.payload.as_deref()?).ok()
}

/// The appends whose interrupt fell right after they committed: the calls of the events
/// that say so.
fn interrupted_appends(h: &History) -> Vec<&Call> {
    h.events
        .iter()
        .filter(|e| e.fault.starts_with("interrupt, then") && e.fault.ends_with("sqlite.append.after_commit"))
        .filter_map(|e| e.call.and_then(|id| h.calls.get(id)))
        .collect()
}

#[test]
fn a_running_entry_committed_under_a_stop_is_drained_cancelled() {
    let queue = scenarios::catalog().into_iter().find(|s| s.name() == "queue").expect("queue");
    let out = execute(queue, ProfileName::Current, 27, None, None).expect("run");
    let h = &out.history;
    assert!(out.violations.is_empty(), "{:?}", out.violations);
    assert!(h.facts.iter().any(|f| f.kind == FactKind::WorkerStopped), "no worker stop");
    // The window: a dispatch's running entry, interrupted right after it committed.
    let running: Vec<&Call> = interrupted_appends(h)
        .into_iter()
        .filter(|c| c.applied.is_some() && entry(c).is_some_and(|e| e["status"] == "running"))
        .collect();
    assert!(!running.is_empty(), "seed 27 no longer interrupts a running append after its commit");
    for r in running {
        let e = entry(r).expect("an entry");
        let lease = r.lease.as_ref().expect("a leased append");
        // The same grant ends that dispatch with `cancelled`, before its run_settle.
        let drained = h.calls.iter().any(|c| {
            c.op == OpKind::Append
                && c.run_id == r.run_id
                && c.id > r.id
                && c.lease.as_ref().is_some_and(|l| l.epoch == lease.epoch && l.owner == lease.owner)
                && entry(c).is_some_and(|t| t["status"] == "cancelled" && t["ref"] == e["seq"])
        });
        assert!(drained, "run {}: the dispatch at seq {} was not drained", r.run_id, e["seq"]);
    }
}
