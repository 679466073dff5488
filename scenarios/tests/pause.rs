//! The process pause (`Action::Pause`, `Action::PauseUntilTakeover`): a pause freezes every
//! task of a node, its lease heartbeat included, where a stall holds only the task that
//! reached the point; a pause until a takeover ends once the successor has written.

use sim::history::{FaultKind, FaultRec, History, OpKind};
use sim::plan::{Action, Decision, TAKEOVER_WAIT_TTLS};
use sim::runner::{execute, plan_for, Outcome};
use sim::world::Scenario;
use store::{FaultPoint, ProfileName};

const POINT: FaultPoint = FaultPoint::EngineDispatchAfterProvider;

fn queue() -> &'static dyn Scenario {
    scenarios::catalog().into_iter().find(|s| s.name() == "queue").expect("queue is in the catalog")
}

/// The seed's run with one decision only: `action` at the first time `node` reaches `POINT`.
fn run_with(seed: u64, node: u32, action: Action) -> Outcome {
    let mut plan = plan_for(queue(), ProfileName::Current, seed);
    plan.decisions = vec![Decision { node, point: POINT.name().to_string(), occurrence: 1, action }];
    execute(queue(), ProfileName::Current, seed, Some(plan), None).expect("run")
}

fn fault_of(h: &History, node: u32) -> Option<&FaultRec> {
    h.faults.iter().find(|f| f.node == node && f.point == POINT)
}

fn resumed_at(h: &History, node: u32, after_ns: u64) -> Option<u64> {
    h.events
        .iter()
        .find(|e| e.op == "CONTINUE" && e.node == Some(node) && e.at_ns >= after_ns)
        .map(|e| e.at_ns)
}

/// The node's calls invoked strictly inside (from, to).
fn calls_inside(h: &History, node: u32, from: u64, to: u64) -> Vec<OpKind> {
    h.calls
        .iter()
        .filter(|c| c.node == node && c.invoked_ns > from && c.invoked_ns < to)
        .map(|c| c.op)
        .collect()
}

#[test]
fn a_pause_stops_the_heartbeat_a_stall_of_the_same_length_does_not() {
    let mut compared = 0;
    for seed in 0..40u64 {
        for node in 0..2u32 {
            let ttl = plan_for(queue(), ProfileName::Current, seed).knobs.ttl_ms;
            let ms = 3 * ttl;
            let stalled = run_with(seed, node, Action::Stall { ms });
            let Some(f) = fault_of(&stalled.history, node) else { continue };
            let (from, to) = (f.at_ns, f.at_ns + ms * 1_000_000);
            if !calls_inside(&stalled.history, node, from, to).contains(&OpKind::Renew) {
                continue;
            }
            // The same seed, the same instant, paused instead: nothing of the node runs.
            let paused = run_with(seed, node, Action::Pause { ms });
            let p = fault_of(&paused.history, node).expect("the pause fires where the stall did");
            assert_eq!(p.kind, FaultKind::Pause);
            assert_eq!(p.at_ns, f.at_ns, "seed {seed}: the run is the same up to the fault");
            let resumed =
                resumed_at(&paused.history, node, p.at_ns).expect("the supervisor resumes the node");
            // (The supervisor's wake-up lands within the scheduler's sub-ms poll jitter.)
            let end = p.at_ns + ms * 1_000_000;
            assert!(
                resumed >= end && resumed - end < 1_000_000,
                "seed {seed}: resumed at {resumed}, the pause's length ends at {end}"
            );
            let during = calls_inside(&paused.history, node, p.at_ns, resumed);
            assert!(during.is_empty(), "seed {seed} n{node}: calls while paused: {during:?}");
            assert!(paused.violations.is_empty(), "seed {seed}: {:?}", paused.violations);
            // The HTML timeline draws the pause as one band on the node's lane, end to end.
            let t = sim::html::model::build(&paused.history, &paused.report, None);
            let lane = t.lanes.iter().find(|l| l.node == node).expect("the node's lane");
            let band =
                lane.stalls.iter().find(|s| s.what.starts_with("pause the process")).expect("a pause band");
            assert_eq!(
                (band.start_ns, band.end_ns),
                (p.at_ns, resumed),
                "seed {seed}: the band spans the pause"
            );
            compared += 1;
        }
        if compared >= 3 {
            break;
        }
    }
    assert!(compared >= 3, "only {compared} seeds renewed during a stall at {}", POINT.name());
}

#[test]
fn a_pause_until_takeover_resumes_once_the_successor_has_written() {
    let mut taken_over = 0;
    for seed in 0..60u64 {
        for node in 0..2u32 {
            let plan = plan_for(queue(), ProfileName::Current, seed);
            let ttl_ns = plan.knobs.ttl_ms * 1_000_000;
            let out = run_with(seed, node, Action::PauseUntilTakeover { writes: 2 });
            let h = &out.history;
            let Some(f) = fault_of(h, node) else { continue };
            assert_eq!(f.kind, FaultKind::Pause);
            let run = f.run_id.clone().expect("the point acts for a run");
            let epoch = h
                .events
                .iter()
                .find(|e| e.at_ns == f.at_ns && e.node == Some(node) && e.fault.contains(POINT.name()))
                .and_then(|e| e.epoch)
                .expect("the fault's line carries the segment's epoch");
            let resumed = resumed_at(h, node, f.at_ns).expect("the supervisor resumes the node");
            let mut later: Vec<u64> = h
                .calls
                .iter()
                .filter(|c| c.run_id == run && c.epoch().is_some_and(|e| e.0 > epoch))
                .filter_map(|c| c.applied.as_ref().map(|a| a.at_ns))
                .collect();
            later.sort_unstable();
            assert!(
                calls_inside(h, node, f.at_ns, resumed).is_empty(),
                "seed {seed}: the paused node made calls"
            );
            match later.get(1) {
                Some(&second) if second <= resumed => {
                    // Resumed at the first poll (a tenth of the ttl) after the second write.
                    assert!(
                        resumed - second <= ttl_ns / 10 + 1_000_000,
                        "seed {seed}: resumed {}ns after the second write",
                        resumed - second
                    );
                    taken_over += 1;
                }
                _ => {
                    let step_ms = (plan.knobs.ttl_ms / 10).max(1);
                    let bound_ms = TAKEOVER_WAIT_TTLS * plan.knobs.ttl_ms / step_ms * step_ms;
                    let end = f.at_ns + bound_ms * 1_000_000;
                    assert!(
                        resumed >= end && resumed - end < 1_000_000,
                        "seed {seed}: without two successor writes the pause lasts its bound ({resumed} against {end})"
                    );
                }
            }
            assert!(out.violations.is_empty(), "seed {seed}: {:?}", out.violations);
        }
        if taken_over >= 2 {
            break;
        }
    }
    assert!(taken_over >= 2, "only {taken_over} pauses ended by a takeover");
}

#[test]
fn a_pause_until_takeover_inside_a_write_transaction_ends_once_the_store_is_seen_held() {
    // Paused between its statements and COMMIT, the process holds SQLite's write lock: no
    // successor can acquire, so waiting for one would only starve every writer for the
    // whole bound. The supervisor resumes it once a ttl passed with nothing committed and a
    // caller met Busy.
    const HELD: FaultPoint = FaultPoint::SqliteAppendBeforeCommit;
    let mut seen = 0;
    for seed in 0..60u64 {
        let ttl_ns = plan_for(queue(), ProfileName::Current, seed).knobs.ttl_ms * 1_000_000;
        let mut plan = plan_for(queue(), ProfileName::Current, seed);
        plan.decisions = vec![Decision {
            node: 0,
            point: HELD.name().to_string(),
            occurrence: 1,
            action: Action::PauseUntilTakeover { writes: 8 },
        }];
        let out = execute(queue(), ProfileName::Current, seed, Some(plan), None).expect("run");
        let h = &out.history;
        let Some(f) = h.faults.iter().find(|f| f.node == 0 && f.point == HELD) else { continue };
        let resumed = resumed_at(h, 0, f.at_ns).expect("the supervisor resumes the node");
        let busy_during = h.calls.iter().any(|c| {
            c.node != 0 && c.returned_ns.is_some_and(|r| r > f.at_ns && r < resumed) && c.outcome.is_busy()
        });
        let committed_during = h
            .calls
            .iter()
            .any(|c| c.applied.as_ref().is_some_and(|a| a.at_ns > f.at_ns && a.at_ns < resumed));
        assert!(!committed_during, "seed {seed}: a commit while the write lock was held by a paused process");
        if !busy_during {
            continue;
        }
        let took = resumed - f.at_ns;
        assert!(
            took >= ttl_ns && took < 2 * ttl_ns + 1_000_000,
            "seed {seed}: paused {took}ns holding the lock (ttl {ttl_ns}ns)"
        );
        assert!(out.violations.is_empty(), "seed {seed}: {:?}", out.violations);
        seen += 1;
        if seen >= 3 {
            break;
        }
    }
    assert!(seen >= 3, "only {seen} seeds met Busy behind a paused holder");
}
