//! The process pause (`Action::Pause`, `Action::PauseUntilTakeover`): a pause freezes every
//! task of a node, its lease heartbeat included, where a stall holds only the task that
//! reached the point; a pause until a takeover ends the instant the successor's last awaited
//! write commits, and the stale step it was paused before lands right after that write.

use sim::history::{Call, FaultKind, FaultRec, History, OpKind};
use sim::plan::{Action, Decision, TAKEOVER_WAIT_TTLS};
use sim::runner::{execute, plan_for, Outcome};
use sim::world::Scenario;
use store::{FaultPoint, ProfileName};

const POINT: FaultPoint = FaultPoint::EngineDispatchAfterProvider;

fn queue() -> &'static dyn Scenario {
    sim::catalog::find_scenario(&scenarios::catalog(), "queue").expect("queue is in the catalog")
}

/// The seed's queue run under `profile` with one decision only: `action` at the first time
/// `node` reaches `point`.
fn run_one(profile: ProfileName, seed: u64, node: u32, point: FaultPoint, action: Action) -> Outcome {
    let mut plan = plan_for(queue(), profile, seed);
    plan.decisions = vec![Decision { node, point: point.name().to_string(), occurrence: 1, action }];
    execute(queue(), profile, seed, Some(plan), None).expect("run")
}

/// [`run_one`] under `current` at `POINT`.
fn run_with(seed: u64, node: u32, action: Action) -> Outcome {
    run_one(ProfileName::Current, seed, node, POINT, action)
}

/// The calls of `run` that were applied, in apply order, and the index among them of the
/// run's first grant under an epoch later than `epoch` (the takeover).
fn applied_with_takeover<'h>(h: &'h History, run: &str, epoch: u64) -> (Vec<&'h Call>, Option<usize>) {
    let mut applied: Vec<&Call> = h.calls.iter().filter(|c| c.run_id == run && c.applied.is_some()).collect();
    applied.sort_by_key(|c| c.applied.as_ref().map(|a| a.order));
    let takeover = applied
        .iter()
        .position(|c| c.op == OpKind::Acquire && c.granted.as_ref().is_some_and(|g| g.epoch.0 > epoch));
    (applied, takeover)
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
            let out = run_with(seed, node, Action::PauseUntilTakeover { writes: 2, same_op: false });
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
            // The successor's writes, as the action defines them: the first grant of the run
            // under a later epoch, then every mutation of the run another process applied
            // after it (in apply order).
            let (applied, takeover) = applied_with_takeover(h, &run, epoch);
            let second =
                takeover.and_then(|t| applied[t + 1..].iter().find(|c| c.node != node && c.op.is_mutation()));
            assert!(
                calls_inside(h, node, f.at_ns, resumed).is_empty(),
                "seed {seed}: the paused node made calls"
            );
            match second.and_then(|c| c.applied.as_ref()) {
                Some(a) if a.at_ns <= resumed => {
                    // Resumed at the very instant the second write committed.
                    assert_eq!(
                        resumed,
                        a.at_ns,
                        "seed {seed}: resumed {}ns after the second write",
                        resumed - a.at_ns
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
        let out = run_one(
            ProfileName::Current,
            seed,
            0,
            HELD,
            Action::PauseUntilTakeover { writes: 8, same_op: false },
        );
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

#[test]
fn the_stale_write_lands_right_after_the_successors_awaited_write() {
    // Paused at an append's first point until one successor write (the takeover grant):
    // the supervisor resumes the process as that acquire commits, and the committing task
    // yields, so the stale append runs (and is refused) before the acquire has even
    // returned to its caller: the fencing hazard's tightest interleaving, every time.
    const AT: FaultPoint = FaultPoint::SqliteAppendBeforeBegin;
    let mut seen = 0;
    for seed in 0..60u64 {
        for node in 0..2u32 {
            let out = run_one(
                ProfileName::Current,
                seed,
                node,
                AT,
                Action::PauseUntilTakeover { writes: 1, same_op: false },
            );
            let h = &out.history;
            let Some(f) = h.faults.iter().find(|f| f.node == node && f.point == AT) else { continue };
            let stale = f.call.map(|id| &h.calls[id]).expect("the point is inside the append");
            let epoch = stale.lease.as_ref().expect("an append carries its lease").epoch.0;
            let Some(acquire) = h.calls.iter().find(|c| {
                c.run_id == stale.run_id
                    && c.op == OpKind::Acquire
                    && c.granted.as_ref().is_some_and(|g| g.epoch.0 > epoch)
            }) else {
                continue;
            };
            let granted_ns = acquire.applied.as_ref().expect("a grant is applied").at_ns;
            let resumed = resumed_at(h, node, f.at_ns).expect("the supervisor resumes the node");
            assert_eq!(resumed, granted_ns, "seed {seed}: resumed at the successor's grant");
            assert!(stale.applied.is_none(), "seed {seed}: the stale append was applied under current");
            // (Within the scheduler's sub-microsecond poll jitter.)
            let returned = stale.returned_ns.expect("the stale append returned");
            assert!(
                returned >= granted_ns && returned - granted_ns < 100_000,
                "seed {seed}: the stale append returned {}ns after the grant",
                returned.saturating_sub(granted_ns)
            );
            let line = |id: usize| h.events.iter().position(|e| e.call == Some(id) && !e.op.is_empty());
            let (stale_line, acquire_line) = (line(stale.id), line(acquire.id));
            assert!(
                stale_line.is_some() && stale_line < acquire_line,
                "seed {seed}: the stale append's outcome ({stale_line:?}) comes before the acquire returned ({acquire_line:?})"
            );
            assert!(out.violations.is_empty(), "seed {seed}: {:?}", out.violations);
            seen += 1;
        }
        if seen >= 3 {
            break;
        }
    }
    assert!(seen >= 3, "only {seen} stale appends met their successor");
}

#[test]
fn a_same_op_pause_lands_the_stale_checkpoint_put_right_after_the_successors_put() {
    // Paused before a checkpoint put until the successor's first put of its own (`same_op`):
    // the takeover grant and the successor's appends do not end the pause, its blob put
    // does. Under v1_45_0 (checkpoint puts unfenced) the stale put is applied next, over
    // the successor's: the overwrite of the fencing example.
    const AT: FaultPoint = FaultPoint::SqliteBlobPutBeforeBegin;
    let mut seen = 0;
    for seed in 0..80u64 {
        for node in 0..2u32 {
            let out = run_one(
                ProfileName::V1_45_0,
                seed,
                node,
                AT,
                Action::PauseUntilTakeover { writes: 1, same_op: true },
            );
            let h = &out.history;
            let Some(f) = h.faults.iter().find(|f| f.node == node && f.point == AT) else { continue };
            let stale = f.call.map(|id| &h.calls[id]).expect("the point is inside the blob put");
            let epoch = stale.lease.as_ref().expect("a checkpoint put carries its lease").epoch.0;
            let (applied, takeover) = applied_with_takeover(h, &stale.run_id, epoch);
            let Some(t) = takeover else { continue };
            let Some(put) = applied[t + 1..].iter().find(|c| c.node != node && c.op == OpKind::BlobPut)
            else {
                continue;
            };
            let put_ns = put.applied.as_ref().expect("applied").at_ns;
            let resumed = resumed_at(h, node, f.at_ns).expect("the supervisor resumes the node");
            assert_eq!(resumed, put_ns, "seed {seed}: resumed as the successor's blob put committed");
            // Other successor writes came first (the grant at least), and did not end it.
            let grant_ns = applied[t].applied.as_ref().expect("applied").at_ns;
            assert!(grant_ns < put_ns, "seed {seed}: the grant precedes the successor's put");
            // The stale put is applied right after the successor's (unfenced under v1_45_0).
            let stale_at = stale.applied.as_ref().expect("the stale put lands under v1_45_0");
            let next = applied
                .iter()
                .filter_map(|c| c.applied.as_ref().map(|a| (a.order, c.id)))
                .find(|&(o, _)| o > put.applied.as_ref().expect("applied").order);
            assert_eq!(
                next.map(|n| n.1),
                Some(stale.id),
                "seed {seed}: the stale put is the next write of the run"
            );
            assert!(stale_at.at_ns >= put_ns);
            seen += 1;
        }
        if seen >= 2 {
            break;
        }
    }
    assert!(seen >= 2, "only {seen} stale checkpoint puts met the successor's");
}

#[test]
fn a_pause_until_acquired_before_an_acquire_waits_out_another_processs_tenure_even_on_a_free_run() {
    // Paused right before an acquire, the caller holds no lease and often the run has none
    // either (released, or never leased): the pause waits for the run's next grant past the
    // last epoch the store granted, then `writes` writes of other processes, and the acquire
    // goes on after that tenure. A pause until a takeover would wait 1.5 ttl blind here.
    const AT: FaultPoint = FaultPoint::SqliteAcquireBeforeBegin;
    let (mut free, mut held) = (0, 0);
    for seed in 0..60u64 {
        for node in 0..2u32 {
            let out = run_one(ProfileName::Current, seed, node, AT, Action::PauseUntilAcquired { writes: 3 });
            let h = &out.history;
            let Some(f) = h.faults.iter().find(|f| f.node == node && f.point == AT) else { continue };
            assert_eq!(f.kind, FaultKind::Pause);
            let acquire = f.call.map(|id| &h.calls[id]).expect("the point is inside the acquire");
            let resumed = resumed_at(h, node, f.at_ns).expect("the supervisor resumes the node");
            assert!(
                calls_inside(h, node, f.at_ns, resumed).is_empty(),
                "seed {seed}: the paused node made calls"
            );
            // The baseline, read from the history: the highest epoch granted before the pause.
            let grants_before: Vec<u64> = h
                .calls
                .iter()
                .filter(|c| {
                    c.run_id == acquire.run_id && c.applied.as_ref().is_some_and(|a| a.at_ns < f.at_ns)
                })
                .filter_map(|c| c.granted.as_ref().map(|g| g.epoch.0))
                .collect();
            let baseline = grants_before.iter().copied().max().unwrap_or(0);
            let leased_at_pause = h.calls.iter().any(|c| {
                c.run_id == acquire.run_id
                    && c.granted.as_ref().is_some_and(|g| g.epoch.0 == baseline)
                    && !h.calls.iter().any(|r| {
                        r.run_id == acquire.run_id
                            && matches!(r.op, OpKind::Release | OpKind::Delete)
                            && r.applied.as_ref().is_some_and(|a| a.at_ns < f.at_ns)
                            && r.lease.as_ref().is_none_or(|l| l.epoch.0 == baseline)
                    })
            });
            let (applied, takeover) = applied_with_takeover(h, &acquire.run_id, baseline);
            // The grant counts as the first write, then other processes' mutations.
            let third = takeover.and_then(|t| {
                applied[t + 1..].iter().filter(|c| c.node != node && c.op.is_mutation()).nth(1)
            });
            match third.and_then(|c| c.applied.as_ref()) {
                Some(a) if a.at_ns <= resumed => {
                    assert_eq!(
                        resumed, a.at_ns,
                        "seed {seed}: resumed as the third successor write committed"
                    );
                    let t = takeover.expect("a takeover");
                    let grant = applied[t].applied.as_ref().expect("applied").at_ns;
                    assert!(grant > f.at_ns, "seed {seed}: the takeover came after the pause began");
                    if baseline == 0 || !leased_at_pause {
                        free += 1;
                    } else {
                        held += 1;
                    }
                }
                _ => {}
            }
            assert!(out.violations.is_empty(), "seed {seed}: {:?}", out.violations);
        }
        if free >= 3 {
            break;
        }
    }
    assert!(
        free >= 3,
        "only {free} pauses before an acquire of a free run ended by another's tenure ({held} held)"
    );
}
