//! The liveness family: after the heal every run settles (eventually), and a holder left
//! alone keeps its lease alive (its heartbeat beats the expiry).
//!
//! Each property is judged from the apply-ordered history and the engine facts, under the
//! holder and generation rules of [`super`].

use super::super::contract::{audit, Verdict};
use super::super::model::{t, who, GrantWalk, Judged};
use super::super::{Expectation, Property, Witness};
use super::*;
use crate::history::{Call, FactKind, FaultKind, Outcome, StoreClock};

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

pub const A_HOLDER_LEFT_ALONE_KEEPS_ITS_LEASE: Property = Property {
        name: "a_holder_left_alone_keeps_its_lease",
        expectation: Expectation::Always,
        claim: "An engine holder whose process met no injected fault, and none of whose renews failed, since its grant of a run was last renewed never finds that grant lapsed: no call of it is refused because its own grant, still unsuperseded, expired by the clock reading of the check (a heartbeat must beat the ttl; rulvar renews every ttl/3).",
        not_checked: "Holders whose process met a stall, pause or crash since the last renewal (their lapse has a cause); runs no engine actor started (the store-level actors go silent on purpose); calls whose check the environment did not observe.",
        check: a_holder_left_alone_keeps_its_lease,
};

fn a_holder_left_alone_keeps_its_lease(j: &Judged, out: &mut Vec<Witness>) {
    let runs = engine_runs(j);
    let mut refused: Vec<&Call> = j
        .history
        .calls
        .iter()
        .filter(|c| runs.contains(c.run_id.as_str()))
        .filter(|c| matches!(&c.outcome, Outcome::Err { code, .. } if code == "lease_held"))
        .filter(|c| c.lease.as_ref().is_some_and(|l| l.run_id == c.run_id) && c.seen_at.is_some())
        .collect();
    refused.sort_by_key(|c| (c.seen_at, c.returned_ns, c.id));
    let mut said: std::collections::BTreeSet<(&str, u64)> = Default::default();
    let mut walk = GrantWalk::default();
    let mut applied = j.applied.iter().peekable();
    for c in refused {
        let seen = c.seen_at.unwrap_or(0);
        while let Some(a) = applied.next_if(|a| a.applied.as_ref().is_some_and(|x| x.order < seen)) {
            walk.apply(a);
        }
        let (Some(l), StoreClock::Read(now)) = (&c.lease, c.store_clock) else { continue };
        let Some(g) = walk.of(&c.run_id) else { continue };
        if g.epoch != l.epoch.0 || g.owner != l.owner || g.ended.is_some() || now < g.expires_at {
            continue;
        }
        // When the grant's last renewal (or its acquire) that took effect before the check was
        // invoked: its expiry is reckoned from its check, and a stall inside it counts.
        let renewed_ns = j
            .applied
            .iter()
            .filter(|a| a.applied.as_ref().is_some_and(|x| x.order < seen))
            .filter(|a| a.id == g.call || (a.op == OpKind::Renew && a.lease.as_ref().is_some_and(|x| x == l)))
            .map(|a| a.invoked_ns)
            .max()
            .unwrap_or(g.granted_ns);
        // A fault of the process counts when its delay overlaps the window from that renewal to
        // this refusal, or when it fired in a store call still in flight as the window opened (a
        // stalled call holds the process's store connection: its later calls queue behind it).
        let faulted = j.history.faults.iter().any(|f| {
            let in_flight = |id: usize| {
                j.history
                    .calls
                    .get(id)
                    .is_some_and(|s| s.id == id && s.returned_ns.is_none_or(|r| r >= renewed_ns))
            };
            f.node == c.node
                && f.kind != FaultKind::Yield
                && f.at_ns <= c.returned_ns.unwrap_or(u64::MAX)
                && (f.until_ns.is_none_or(|u| u >= renewed_ns) || f.call.is_some_and(in_flight))
        });
        let renew_failed = j.history.calls.iter().any(|r| {
            r.op == OpKind::Renew
                && r.node == c.node
                && r.lease.as_ref() == Some(l)
                && r.invoked_ns >= renewed_ns
                && r.id < c.id
                && !r.outcome.is_ok()
        });
        if faulted || renew_failed || !said.insert((c.run_id.as_str(), l.epoch.0)) {
            continue;
        }
        out.push(Witness {
            witness: format!(
                "run {}: the {} of {} at t={} was refused because its own epoch {} had expired {}ms before (its last renewal was asked at t={}), and its process met no fault since",
                c.run_id,
                c.op.as_str(),
                who(c),
                t(c.returned_ns.unwrap_or(c.invoked_ns)),
                l.epoch.0,
                now - g.expires_at,
                t(renewed_ns)
            ),
            op: Some(c.op.as_str()),
            call: Some(c.id),
        });
    }
}

pub const RENEWS_LAST_UNTIL_SETTLED: Property = Property {
    name: "renews_last_until_settled",
    expectation: Expectation::Always,
    claim: "An engine run's lease is renewed on its cadence until the segment has written its settle meta: once a renew of the lease returns, the process that holds it renews again within max(1, floor(ttl/3)) ms, or makes no further write to the run under that lease before it does (docs/engine-model.md 1.4: the timer is cleared strictly after the terminal meta write; 5: the worker's timer runs until the drive resolves).",
    not_checked: "A tenure before its first renew returns (a caller's lease may come with no heartbeat); writes after the segment's settle meta, after a refused or unanswered renew, or after the worker was stopped; a gap in which the holder's process was paused or its renew point stalled (the timer fired, late by the fault); meta writes that carry no lease.",
    check: renews_last_until_settled,
};

/// Per (process, run, lease owner, epoch): the process's calls of `ops` on engine runs under
/// that lease, in invocation order (calls are recorded as invoked).
fn tenures<'h>(j: &Judged<'h>, ops: &[OpKind]) -> BTreeMap<(u32, u32, &'h str, &'h str, u64), Vec<&'h Call>> {
    let runs = engine_runs(j);
    let mut out: BTreeMap<_, Vec<&Call>> = BTreeMap::new();
    for c in j.history.calls.iter().filter(|c| ops.contains(&c.op) && runs.contains(c.run_id.as_str())) {
        let Some(l) = c.lease.as_ref().filter(|l| l.run_id == c.run_id) else { continue };
        out.entry((c.node, c.incarnation, c.run_id.as_str(), l.owner.as_str(), l.epoch.0))
            .or_default()
            .push(c);
    }
    out
}

/// How late past its cadence a renew may come: the instant's own ordering, not a second tick.
const CADENCE_SLACK_NS: u64 = 1_000_000;

/// The points the renew timers pass before their renew (a stall there delays the renew, not
/// the timer).
const RENEW_POINTS: [&str; 2] = ["engine.renew.before_renew", "worker.drive.before_renew"];

fn renews_last_until_settled(j: &Judged, out: &mut Vec<Witness>) {
    let Some(ttl) = j.expect.ttl_ms else { return };
    let cadence_ns = (ttl / 3).max(1) * 1_000_000;
    let ops = [OpKind::Renew, OpKind::Append, OpKind::PutMeta, OpKind::BlobPut];
    for ((node, incarnation, run, _, epoch), calls) in tenures(j, &ops) {
        // Whatever excuses a late timer between `from` and `to` on this process.
        let excused = |from: u64, to: u64| {
            j.history.faults.iter().any(|f| {
                f.node == node
                    && (from..=to).contains(&f.at_ns)
                    && (f.kind == FaultKind::Pause
                        || (RENEW_POINTS.contains(&f.point.name()) && f.run_id.as_deref() == Some(run)))
            }) || j.history.facts.iter().any(|f| {
                (f.node, f.incarnation) == (node, incarnation)
                    && f.at_ns <= to
                    && f.kind == FactKind::WorkerStopped
            })
        };
        // The last renew's return, while the heartbeat is judged.
        let mut renewed: Option<u64> = None;
        for c in calls {
            if let Some(from) = renewed {
                if c.invoked_ns > from + cadence_ns + CADENCE_SLACK_NS && !excused(from, c.invoked_ns) {
                    out.push(
                        Witness::new(format!(
                            "n{node} {} run {run} under epoch {epoch} at t={}, but its last renew returned at t={} and none followed by t={} (the cadence is {}ms): the heartbeat stopped before the segment settled",
                            if c.op == OpKind::Renew { "renewed" } else { "wrote" },
                            t(c.invoked_ns),
                            t(from),
                            t(from + cadence_ns),
                            cadence_ns / 1_000_000
                        ))
                        .on(c.op, c.id),
                    );
                    break;
                }
            }
            match c.op {
                OpKind::Renew => match c.returned_ns {
                    Some(back) if c.outcome.is_ok() => renewed = Some(back),
                    // Refused (the timer stops) or unanswered (the process died with it).
                    _ => break,
                },
                OpKind::PutMeta => {
                    let status = c.args.payload.as_deref().and_then(MetaView::parse).map(|m| m.status);
                    if status.is_some_and(|s| s != Status::Running) {
                        break;
                    }
                }
                _ => {}
            }
        }
    }
}

pub const RENEWS_KEEP_THE_CADENCE: Property = Property {
        name: "renews_keep_the_cadence",
        expectation: Expectation::Always,
        claim: "An engine holder renews its grant on rulvar's cadence, max(1, floor(ttl/3)) ms: its first renew of a grant comes no sooner than one cadence after the acquire returned, and each next renew of the same grant by the same process comes one cadence after the previous one returned (within the 1 ms the simulator's clock creeps), later only when a fault of that process (a stall, a pause) fell in between.",
        not_checked: "Whether a holder renews at all before its grant lapses (`a_holder_left_alone_keeps_its_lease` judges the lapse); brief leases that never renew (retention, repair, prune, resolution); store-level actors; runs without an observed ttl.",
        check: renews_keep_the_cadence,
};

fn renews_keep_the_cadence(j: &Judged, out: &mut Vec<Witness>) {
    let Some(ttl) = j.expect.ttl_ms else { return };
    let cadence_ns = (ttl / 3).max(1) * 1_000_000;
    let calls = &j.history.calls;
    // Renews per (process, lease), in invocation order, with the grant they renew.
    let series = tenures(j, &[OpKind::Renew]);
    let faulted = |node: u32, from: u64, to: u64| {
        j.history.faults.iter().any(|f| {
            f.node == node
                && f.kind != FaultKind::Yield
                && f.at_ns <= to
                && f.until_ns.is_none_or(|u| u >= from)
        })
    };
    for ((node, incarnation, run, owner, epoch), renews) in series {
        let grant = calls.iter().find(|g| {
            g.op == OpKind::Acquire
                && (g.node, g.incarnation) == (node, incarnation)
                && g.granted
                    .as_ref()
                    .is_some_and(|l| l.run_id == run && l.owner == owner && l.epoch.0 == epoch)
        });
        let first = renews[0];
        if let Some(returned) = grant.and_then(|g| g.returned_ns) {
            if first.invoked_ns < returned + cadence_ns {
                out.push(
                    Witness::new(format!(
                        "run {run}: {} renewed epoch {epoch} at t={}, {}ms after its acquire returned at t={}, sooner than the cadence of {}ms",
                        who(first),
                        t(first.invoked_ns),
                        (first.invoked_ns - returned) / 1_000_000,
                        t(returned),
                        cadence_ns / 1_000_000
                    ))
                    .on(first.op, first.id),
                );
            }
        }
        for w in renews.windows(2) {
            let (prev, next) = (w[0], w[1]);
            let Some(back) = prev.returned_ns else { continue };
            let gap = next.invoked_ns.saturating_sub(back);
            // The simulator's clock creeps a few microseconds per step: a renew within one
            // ms after the cadence is on time.
            let on_time = (cadence_ns..=cadence_ns + 1_000_000).contains(&gap);
            let late = gap > cadence_ns && faulted(node, back, next.invoked_ns);
            if on_time || late || !prev.outcome.is_ok() {
                continue;
            }
            out.push(
                Witness::new(format!(
                    "run {run}: {} renewed epoch {epoch} at t={}, {}ms after its previous renew returned at t={}, where the cadence is {}ms{}",
                    who(next),
                    t(next.invoked_ns),
                    gap as f64 / 1e6,
                    t(back),
                    cadence_ns / 1_000_000,
                    if gap > cadence_ns { " and its process met no fault in between" } else { "" }
                ))
                .on(next.op, next.id),
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use store::RunStatus;

    use crate::history::FactKind;
    use crate::oracle::testkit::engine::*;

    #[test]
    fn a_heartbeat_that_stops_before_the_settle_meta_is_caught() {
        use crate::history::{Args, FaultKind, FaultRec, OpKind};
        use store::FaultPoint;
        const MS: u64 = 1_000_000;
        // The cadence is TTL / 3 = 100 ms. `renew_at` is when the second renew comes (none
        // when `None`); the settle meta is written 150 ms after the first renew.
        let settle = |renew_at: Option<i64>, first_renew_ok: bool, fault: Option<(FaultPoint, FaultKind)>| {
            let mut h = HistoryBuilder::engine_run();
            h.expect.ttl_ms = Some(TTL as u64);
            let a = h.acquire(0, "w", "r", 1);
            h.meta(0, Some(&a), "r", RunStatus::Running, 1);
            h.push(0, OpKind::Renew, "r", Some(a.clone()), Args::default(), None);
            if !first_renew_ok {
                h.refuse_last("busy");
            }
            let renewed_ms = h.now_ms;
            if let Some((point, kind)) = fault {
                h.h.faults.push(FaultRec {
                    at_ns: (renewed_ms as u64 + 50) * MS,
                    node: 0,
                    point,
                    kind,
                    call: None,
                    run_id: Some("r".into()),
                    until_ns: Some((renewed_ms as u64 + 140) * MS),
                });
            }
            if let Some(at) = renew_at {
                h.now_ms = renewed_ms + at - 1;
                h.push(0, OpKind::Renew, "r", Some(a.clone()), Args::default(), None);
            }
            h.now_ms = renewed_ms + 149;
            h.meta(0, Some(&a), "r", RunStatus::Ok, 1);
            // After the settle meta the timer is cleared: nothing more is judged.
            h.now_ms += 500;
            h.push(0, OpKind::Release, "r", Some(a), Args::default(), None);
            h.judge("renews_last_until_settled")
        };
        let v = settle(None, true, None);
        assert_eq!(v.len(), 1, "{v:?}");
        assert!(v[0].witness.contains("none followed"), "{}", v[0].witness);
        assert_eq!(settle(Some(120), true, None).len(), 1, "a renew 120 ms after the last is late");
        assert!(settle(Some(100), true, None).is_empty(), "on cadence");
        assert!(settle(None, false, None).is_empty(), "a refused renew stops the timer");
        let pause = Some((FaultPoint::WorkerDriveBeforeRenew, FaultKind::Pause));
        assert!(settle(None, true, pause).is_empty(), "the process was paused");
        let stall = Some((FaultPoint::EngineRenewBeforeRenew, FaultKind::Stall));
        assert!(settle(None, true, stall).is_empty(), "the renew stalled at its point");
        let elsewhere = Some((FaultPoint::SqliteAppendBeforeBegin, FaultKind::Stall));
        assert_eq!(settle(None, true, elsewhere).len(), 1, "a stall of another task excuses nothing");
    }

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

    /// Run `r`: node 0 acquires at t=1ms and appends at t=2ms, then (after `gap` ms with no
    /// renew) asks another append, refused as lapsed by the clock reading of its check.
    fn lapsed(gap: i64) -> HistoryBuilder {
        use crate::history::StoreClock;
        let mut h = HistoryBuilder::engine_run();
        let a = h.acquire(0, "w", "r", 1);
        h.append(0, &a, "r", running(0));
        h.now_ms += gap;
        h.append_lost(0, &a, "r", running(1), "lease_held");
        let c = h.h.calls.last_mut().expect("pushed");
        c.store_clock = StoreClock::Read(h.now_ms);
        c.seen_at = Some(h.h.applied_count);
        h
    }

    #[test]
    fn a_holder_that_lets_its_own_grant_lapse_with_no_fault_is_caught() {
        use crate::history::{Args, FaultKind, FaultRec, OpKind, Outcome};
        let v = lapsed(TTL).judge("a_holder_left_alone_keeps_its_lease");
        assert!(v.len() == 1 && v[0].witness.contains("its own epoch 1 had expired"), "{v:?}");
        // Within the ttl the grant is live: nothing lapsed.
        assert!(lapsed(TTL - 10).judge("a_holder_left_alone_keeps_its_lease").is_empty());
        // A stall of the process inside the window is the lapse's cause.
        let mut h = lapsed(TTL);
        let fault = |at_ms: u64, until_ms: u64, node: u32| FaultRec {
            at_ns: at_ms * 1_000_000,
            node,
            point: store::FaultPoint::EngineSettleAfterMeta,
            kind: FaultKind::Stall,
            call: None,
            run_id: Some("r".into()),
            until_ns: Some(until_ms * 1_000_000),
        };
        h.h.faults.push(fault(2, 250, 0));
        assert!(h.judge("a_holder_left_alone_keeps_its_lease").is_empty(), "stalled");
        // A stall of another process, or one that ended before the grant, is not.
        let mut h = lapsed(TTL);
        h.h.faults.push(fault(2, 250, 1));
        h.h.faults.push(fault(0, 0, 0));
        assert_eq!(h.judge("a_holder_left_alone_keeps_its_lease").len(), 1);
        // A renew the store failed stops the heartbeat for a reason the store gave.
        let mut h = lapsed(TTL);
        let a = lease("r", "w", 1);
        let refused = h.h.calls.pop().expect("the refused append");
        h.push(0, OpKind::Renew, "r", Some(a), Args::default(), None);
        h.h.applied_count -= 1;
        let renew = h.h.calls.last_mut().expect("pushed");
        renew.applied = None;
        renew.outcome = Outcome::Err { code: "busy".into(), message: "busy".into() };
        let mut refused = refused;
        refused.id = h.h.calls.len();
        h.h.calls.push(refused);
        assert!(h.judge("a_holder_left_alone_keeps_its_lease").is_empty(), "its renew failed");
        // A holder superseded by another grant is told so: not this property's case.
        let mut h = lapsed(TTL);
        let refused = h.h.calls.pop().expect("the refused append");
        h.acquire(1, "v", "r", 2);
        let mut refused = refused;
        refused.id = h.h.calls.len();
        refused.seen_at = Some(h.h.applied_count);
        h.h.calls.push(refused);
        assert!(h.judge("a_holder_left_alone_keeps_its_lease").is_empty(), "superseded");
    }

    /// Run `r`: node 0 acquires (returning at t=1ms), then renews at each of `at` (ms), each
    /// renew returning 1 ms after it was asked, its process stalled over `stall` (ms) if
    /// given; judged with a ttl of 300 ms (cadence 100 ms).
    fn renews(at: &[u64], stall: Option<(u64, u64)>) -> Vec<crate::oracle::Violation> {
        use crate::history::{FaultKind, FaultRec, OpKind};
        let mut h = HistoryBuilder::engine_run();
        let a = h.acquire(0, "w", "r", 1);
        for &ms in at {
            h.now_ms = ms as i64 - 1;
            h.push(0, OpKind::Renew, "r", Some(a.clone()), Default::default(), None);
            let c = h.h.calls.last_mut().expect("pushed");
            c.returned_ns = Some((ms + 1) * 1_000_000);
        }
        if let Some((from, to)) = stall {
            h.h.faults.push(FaultRec {
                at_ns: from * 1_000_000,
                node: 0,
                point: store::FaultPoint::WorkerDriveBeforeRenew,
                kind: FaultKind::Stall,
                call: None,
                run_id: Some("r".into()),
                until_ns: Some(to * 1_000_000),
            });
        }
        let expect = crate::oracle::Expect { ttl_ms: Some(300), ..Default::default() };
        let j = crate::oracle::model::Judged::build(&h.h, &h.fin, expect);
        let p = crate::oracle::all_properties().find(|p| p.name == "renews_keep_the_cadence").expect("known");
        p.judge(&j)
    }

    #[test]
    fn a_renew_off_the_cadence_is_caught() {
        // On the cadence: 100 ms after the acquire returned, then 100 ms after each return.
        assert!(renews(&[101, 202, 303], None).is_empty());
        // Half the ttl between renews.
        let v = renews(&[101, 252], None);
        assert!(v.len() == 1 && v[0].witness.contains("150ms after its previous renew"), "{v:?}");
        // Too soon after the acquire.
        let v = renews(&[60], None);
        assert!(v.len() == 1 && v[0].witness.contains("sooner than the cadence"), "{v:?}");
        // Late with no fault is caught; late behind a stall of the process is not; a stall
        // of the process before the previous renew returned excuses nothing.
        assert_eq!(renews(&[101, 302], None).len(), 1);
        assert!(renews(&[101, 302], Some((150, 250))).is_empty());
        assert_eq!(renews(&[101, 302], Some((20, 90))).len(), 1);
    }
}
