//! The worker family: what an engine process does with the runs and leases it takes.
//!
//! - A worker told to stop takes no further run (rulvar's `stop()`, docs/engine-model.md 5.2
//!   step 6: the drive in progress is cancelled and settles, the sweep takes nothing more and
//!   returns). Judged from the engine facts the scenario records around a stop
//!   (`WorkerStopped` when it is told, `StoppedSweepReturned` when the sweep it interrupted
//!   returns) and the grants to the stopped worker's owner identity applied between the two.
//!   This is the model worker's promise, stricter than rulvar: rulvar checks the stop only
//!   after it acquires and loads a candidate (5.2 step 4), so its worker may take one more
//!   grant and release it undriven; judging rulvar's own worker would mean "drives no run".
//! - A sweep tries every candidate it listed (5.2 step 4): a run listed running or suspended
//!   under a workflow of the catalog gets an acquire from the sweep before it returns, unless
//!   a stop or a crash ended the sweep (a held lease is skipped, not a reason to stop).
//!   Judged from the `SweepBegan` and `SweepEnded` facts the scenario records around each
//!   sweep, the sweep's first call (its listing) and the acquires its identity invoked.
//! - A parked run stays parked (5.2 step 4, the skip cache): a worker process that drove a
//!   run to `suspended` does not boot it again while its journal is the one the drive left.
//!   Judged by the oracle's own model of the cache, folded from the sweep facts, listings,
//!   grants, meta writes and loads of each worker process; the model forgets a park in every
//!   case the rule leaves unclear, so it demands a skip only where the rule does.
//! - A lease taken is given back: every path of rulvar's engine that acquires (a segment's
//!   own lease, a worker's drive, the brief leases of retention, pruning, repair and offline
//!   resolution) releases in a `finally`, so a process that goes on living never leaves a
//!   grant to lapse unreleased. Judged from the grants, the calls that carry them, and the
//!   injected faults. A fault excuses every grant of the node it hit (sound, coarser than
//!   per grant: a leak on a node that also met an unrelated fault is not seen). An operator's
//!   brief lease (an audit repair's, an offline answer's) is given back before its identity
//!   moves on to another run, faults or not: judged from the grant's engine mark, the
//!   identity's calls in its process, and its release.

use super::super::contract::Status;
use super::super::model::{t, who, Judged};
use super::super::{Expectation, Property, Witness};
use super::{engine_runs, meta_of, own_calls_before, segment_start};
use crate::history::{Call, Fact, FactKind, FaultKind, OpKind};

/// One sweep of a worker process, read from its `SweepBegan` fact.
struct Sweep<'h> {
    began: &'h Fact,
    /// The identity's next sweep fact: the sweep's return, or, after a crash, the next
    /// sweep's begin; `None` when the history ends first.
    next: Option<&'h Fact>,
    /// The calls invoked from the begin up to `next` (or the end of the history).
    within: &'h [Call],
    /// The sweep's listing: its identity's first call in `within`.
    listing: &'h Call,
    filter: &'h store::RunFilter,
    metas: &'h [store::RunMeta],
}

impl<'h> Sweep<'h> {
    /// The sweep of `facts[i]` when that fact begins one whose first call is a listing that
    /// returned.
    fn at(facts: &'h [Fact], calls: &'h [Call], i: usize) -> Option<Sweep<'h>> {
        let began = facts.get(i).filter(|f| f.kind == FactKind::SweepBegan)?;
        let next = facts[i + 1..]
            .iter()
            .filter(|f| same_identity(f, began))
            .find(|f| matches!(f.kind, FactKind::SweepBegan | FactKind::SweepEnded));
        let end = next.map_or(calls.len(), |f| f.invoked_before.min(calls.len()));
        let within = &calls[began.invoked_before.min(end)..end];
        let listing = within.iter().find(|c| by_identity(c, began))?;
        let (OpKind::ListRuns, Some(crate::history::Read::Runs { filter, metas })) =
            (listing.op, &listing.read)
        else {
            return None;
        };
        Some(Sweep { began, next, within, listing, filter, metas })
    }

    /// The calls the sweep's identity invoked after its listing.
    fn after_listing(&self) -> impl Iterator<Item = &'h Call> + '_ {
        self.within.iter().filter(|c| by_identity(c, self.began) && c.id > self.listing.id)
    }
}

fn same_identity(f: &Fact, g: &Fact) -> bool {
    (f.node, f.incarnation, f.owner.as_str()) == (g.node, g.incarnation, g.owner.as_str())
}

/// Whether `c` was made by the identity that `f` records.
fn by_identity(c: &Call, f: &Fact) -> bool {
    (c.node, c.incarnation) == (f.node, f.incarnation) && c.args.actor.as_deref() == Some(f.owner.as_str())
}

pub const A_STOPPED_WORKER_TAKES_NO_RUN: Property = Property {
        name: "a_stopped_worker_takes_no_run",
        expectation: Expectation::Always,
        claim: "Once a worker is told to stop, the sweep it was in is granted no further run (for a drive or a retention delete) before it returns: only the drive already holding its lease finishes.",
        not_checked: "Acquires refused or invoked in the same virtual nanosecond as the stop (their order against it is not recorded); what the cancelled drive writes (the settle properties judge it).",
        check: a_stopped_worker_takes_no_run,
};

/// Each worker stop, with the facts after it up to the return of the sweep it interrupted
/// (by the same identity; to the end when it never returned: a crash ends it too, and a
/// crashed process's identity makes no further call) and that return.
fn stopped_sweeps(facts: &[Fact]) -> impl Iterator<Item = (&Fact, &[Fact], Option<&Fact>)> {
    facts.iter().enumerate().filter(|(_, f)| f.kind == FactKind::WorkerStopped).map(|(i, stop)| {
        let rest = &facts[i + 1..];
        let end =
            rest.iter().position(|f| f.kind == FactKind::StoppedSweepReturned && same_identity(f, stop));
        (stop, &rest[..end.unwrap_or(rest.len())], end.map(|e| &rest[e]))
    })
}

fn a_stopped_worker_takes_no_run(j: &Judged, out: &mut Vec<Witness>) {
    for (stop, _, returned) in stopped_sweeps(&j.history.facts) {
        // Ordered by the apply order, which facts and calls share (a fact knows how many
        // mutations had been applied when it happened): a grant applied after the stop and
        // before the return, to an acquire invoked after the stop.
        let until = returned.map_or(usize::MAX, |f| f.applied_before);
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

pub const A_STOPPED_DRIVE_STARTS_NO_TURN: Property = Property {
    name: "a_stopped_drive_starts_no_turn",
    expectation: Expectation::Always,
    claim: "Once a worker is told to stop, the drive it has in progress starts no provider turn and runs no tool after the first instant the stop can reach its body: the stop's own instant for a body already running, the end of the pause of a process frozen when the stop came, the return of its boot meta write for a segment that booted after the stop (stop() cancels every active run, docs/engine-model.md 5; a cancelled body starts nothing past its next await).",
    not_checked: "How much the drive does in that instant; a provider call or tool started before it (it completes); work after the stopped sweep returned (a fresh worker's).",
    check: a_stopped_drive_starts_no_turn,
};

fn a_stopped_drive_starts_no_turn(j: &Judged, out: &mut Vec<Witness>) {
    for (stop, window, _) in stopped_sweeps(&j.history.facts) {
        // A process frozen when the stop came runs again only when its pause ends (a
        // pause until a takeover ends when the process next acts).
        let resumed = j
            .history
            .faults
            .iter()
            .filter(|p| p.node == stop.node && p.kind == FaultKind::Pause && p.at_ns <= stop.at_ns)
            .filter_map(|p| {
                p.until_ns.or_else(|| {
                    let own = j.history.calls.iter().filter(|c| c.node == stop.node);
                    own.map(|c| c.invoked_ns).find(|&at| at > p.at_ns)
                })
            })
            .filter(|&end| end >= stop.at_ns)
            .max()
            .unwrap_or(stop.at_ns);
        for f in window.iter().filter(|f| same_identity(f, stop)) {
            let (what, run) = match &f.kind {
                FactKind::Paid { run_id, op, turn, .. } => (format!("paid for turn {turn} of {op}"), run_id),
                FactKind::Tool { run_id, op, turn, .. } => {
                    (format!("ran the tool of turn {turn} of {op}"), run_id)
                }
                _ => continue,
            };
            // The segment's boot: the identity's last `running` meta write of the run
            // invoked before the work.
            let process = j.index().of_process(stop.node, stop.incarnation);
            let before = &process[..process.partition_point(|c| c.id < f.invoked_before)];
            let boot = before.iter().rev().find(|c| {
                c.op == OpKind::PutMeta
                    && c.run_id == *run
                    && by_identity(c, stop)
                    && meta_of(c).is_some_and(|m| m.status == Status::Running)
            });
            let reach = boot.and_then(|b| b.returned_ns).map_or(resumed, |b| b.max(resumed));
            // The simulator's clock creeps a few microseconds per step: within 1 ms of that
            // instant is the same step.
            if f.at_ns > reach + 1_000_000 {
                out.push(Witness::new(format!(
                    "worker {} was told to stop at t={}, and its drive of run {run} then {what} at t={}, after the stop could reach it (t={}) and before its sweep returned",
                    stop.owner,
                    t(stop.at_ns),
                    t(f.at_ns),
                    t(reach)
                )));
                break;
            }
        }
    }
}

pub const A_SWEEP_TRIES_EVERY_CANDIDATE: Property = Property {
        name: "a_sweep_tries_every_candidate",
        expectation: Expectation::Always,
        claim: "A worker's sweep lists with a filter that admits every running and suspended run (by no name or tag), and, when it returns without being told to stop, tries to acquire every run its listing returned as running or suspended under a workflow of the catalog that the worker registers (its process's `Deployed` fact, else the whole catalog), before it returns (docs/engine-model.md 5.2 step 4: a held lease is skipped, not a reason to stop; at-least-once delivery rests on every candidate being tried).",
        not_checked: "Sweeps that a crash or a stop ended; terminal runs (retention's predicate is the worker's own); runs listed under a workflow the worker does not register (a_taken_lease_is_given_back judges a lease it took on one).",
        check: a_sweep_tries_every_candidate,
};

fn a_sweep_tries_every_candidate(j: &Judged, out: &mut Vec<Witness>) {
    let workflows = crate::ledger::catalog_workflows();
    let facts = &j.history.facts;
    let calls = &j.history.calls;
    for i in 0..facts.len() {
        let Some(sweep) = Sweep::at(facts, calls, i) else { continue };
        let Sweep { began, listing, filter, metas, .. } = &sweep;
        // Only a sweep that returned (a crash ends it without a return) and was not stopped.
        let Some(ended) = sweep.next.filter(|f| f.kind == FactKind::SweepEnded) else { continue };
        let stopped = facts[i + 1..]
            .iter()
            .filter(|f| same_identity(f, began))
            .take_while(|f| f.kind != FactKind::SweepEnded)
            .any(|f| f.kind == FactKind::WorkerStopped);
        if stopped {
            continue;
        }
        // What the listing asked for: every running and suspended run, by no name or tag.
        if let Some(left_out) = narrowed(filter) {
            out.push(Witness {
                witness: format!(
                    "worker {}'s sweep (t={} to t={}) listed runs with a filter that leaves out {left_out}: such a run is never its candidate",
                    began.owner,
                    t(began.at_ns),
                    t(ended.at_ns),
                ),
                op: Some(listing.op.as_str()),
                call: Some(listing.id),
            });
        }
        // The workflows this worker registers: its process's latest `Deployed` fact.
        let deployed =
            facts[..i].iter().rev().filter(|f| same_identity(f, began)).find_map(|f| match &f.kind {
                FactKind::Deployed { workflows } => Some(workflows),
                _ => None,
            });
        let registers = |w: &String| workflows.contains_key(w) && deployed.is_none_or(|d| d.contains(w));
        for m in metas.iter() {
            let candidate = matches!(m.status, store::RunStatus::Running | store::RunStatus::Suspended)
                && m.workflow_name.as_ref().is_some_and(registers);
            if !candidate {
                continue;
            }
            let tried = sweep.after_listing().any(|c| c.op == OpKind::Acquire && c.run_id == m.run_id);
            if !tried {
                out.push(Witness {
                    witness: format!(
                        "worker {}'s sweep (t={} to t={}) listed run {} as {} and returned without trying to acquire it",
                        began.owner,
                        t(began.at_ns),
                        t(ended.at_ns),
                        m.run_id,
                        super::super::contract::Status::of(m.status).word(),
                    ),
                    op: Some(listing.op.as_str()),
                    call: Some(listing.id),
                });
            }
        }
    }
}

/// What a sweep's listing filter leaves out of the runs a sweep must consider: every run
/// `running` or `suspended` (docs/engine-model.md 5.2 step 1: `statuses: [running,
/// suspended]`, or no filter at all when the worker applies retention), whatever its name and
/// tags. `None` when it admits them all.
fn narrowed(filter: &store::RunFilter) -> Option<String> {
    use store::RunStatus::{Running, Suspended};
    if let Some(name) = &filter.name {
        return Some(format!("every run not named {name:?}"));
    }
    if let Some(tags) = filter.tags.as_ref() {
        return Some(format!("every run not tagged {}", tags.join(", ")));
    }
    let by_status = filter.status.is_some() || filter.statuses.is_some();
    let admits = |s: store::RunStatus| {
        !by_status || filter.status == Some(s) || filter.statuses.iter().flatten().any(|&x| x == s)
    };
    let left: Vec<&str> = [Running, Suspended]
        .into_iter()
        .filter(|&s| !admits(s))
        .map(|s| super::super::contract::Status::of(s).word())
        .collect();
    (!left.is_empty()).then(|| format!("every {} run", left.join(" or ")))
}

pub const A_TAKEN_LEASE_IS_GIVEN_BACK: Property = Property {
        name: "a_taken_lease_is_given_back",
        expectation: Expectation::Always,
        claim: "An engine process granted a run's lease releases it (or loses it to a later grant or a delete of the run) before the grant lapses, whenever its process lives past that lapse and met no injected fault while it held the grant: no engine path walks away from a lease and leaves the run blocked for a ttl.",
        not_checked: "Processes that met a stall, pause or crash while they held the grant, or that made no call after its lapse (a crash or the end of the run); a grant whose holder still used it at or after its lapse (the heartbeat property judges that); runs no engine actor started.",
        check: a_taken_lease_is_given_back,
};

/// When the lease a mutation (an acquire or a renew) set expires, in virtual ns: the row's
/// expiry is in the store's ms, reckoned from the store clock of the commit.
fn expiry_ns(c: &Call) -> Option<u64> {
    let a = c.applied.as_ref()?;
    let row = a.lease_row.as_ref()?;
    let ms = u64::try_from(row.expires_at.checked_sub(a.store_now_ms)?).ok()?;
    Some(a.at_ns.saturating_add(ms.saturating_mul(1_000_000)))
}

fn a_taken_lease_is_given_back(j: &Judged, out: &mut Vec<Witness>) {
    let runs = engine_runs(j);
    let ix = j.index();
    for &g in j.applied.iter().filter(|c| c.op == OpKind::Acquire && runs.contains(c.run_id.as_str())) {
        let (Some(lease), true) = (&g.granted, g.outcome.is_ok()) else { continue };
        let granted_at = super::order(g);
        let uses: Vec<&Call> = ix
            .under_lease(&lease.run_id, lease.epoch.0)
            .iter()
            .copied()
            .filter(|c| c.node == g.node && c.incarnation == g.incarnation && c.lease.as_ref() == Some(lease))
            .collect();
        if uses.iter().any(|c| c.op == OpKind::Release) {
            continue;
        }
        let Some(lapse) = std::iter::once(g)
            .chain(uses.iter().copied().filter(|c| c.op == OpKind::Renew))
            .filter_map(expiry_ns)
            .max()
        else {
            continue;
        };
        // Lost before the lapse: a later grant of the run, or a delete of it (which removes
        // the lease row). A grant after the lapse is the takeover the lapse made necessary.
        // (Recorded mutations apply in time order, so the scan stops at the lapse.)
        let ends = |c: &&&Call| matches!(c.op, OpKind::Acquire | OpKind::Delete);
        let lost = ix
            .recorded_between(&g.run_id, granted_at, usize::MAX)
            .iter()
            .take_while(|c| Judged::applied_ns(c) < lapse)
            .any(|c| ends(&c))
            || (granted_at < usize::MAX
                && ix.unrecorded(&g.run_id).iter().filter(ends).any(|c| Judged::applied_ns(c) < lapse));
        if lost {
            continue;
        }
        // Still in use at the lapse (or after it): the heartbeat property's ground.
        if uses.iter().any(|c| c.invoked_ns >= lapse || c.returned_ns.is_none_or(|r| r >= lapse)) {
            continue;
        }
        let faulted = j.history.faults.iter().any(|f| {
            f.node == g.node
                && f.kind != FaultKind::Yield
                && f.at_ns <= lapse
                && f.until_ns.is_none_or(|u| u >= g.invoked_ns)
        });
        if faulted {
            continue;
        }
        let Some(later) = ix.of_process(g.node, g.incarnation).iter().copied().find(|c| c.invoked_ns > lapse)
        else {
            continue;
        };
        let last = uses.iter().map(|c| c.invoked_ns).max().unwrap_or(g.invoked_ns);
        out.push(Witness {
            witness: format!(
                "run {}: {} was granted epoch {} at t={}, last used it at t={} and let it lapse unreleased at t={}, while its process went on (its {} of run {} at t={})",
                g.run_id,
                who(g),
                lease.epoch.0,
                t(g.invoked_ns),
                t(last),
                t(lapse),
                later.op.as_str(),
                later.run_id,
                t(later.invoked_ns)
            ),
            op: Some(g.op.as_str()),
            call: Some(g.id),
        });
    }
}

pub const A_BRIEF_LEASE_IS_GIVEN_BACK_FIRST: Property = Property {
    name: "a_brief_lease_is_given_back_first",
    expectation: Expectation::Always,
    claim: "An operator's brief lease (the grant an audit repair or an offline answer takes, named by its `engine.repair.after_acquire` or `engine.resolve.after_acquire` mark) is given back before its identity moves on: the identity's release of that grant is invoked before its process makes any call of that identity on another run, whether the repair wrote, found nothing to write, or failed (rulvar releases in a `finally`; docs/engine-model.md 5.5, 7.2).",
    not_checked: "Brief leases of the worker's retention and of the scenario's own operators (prune, host deletes): their release is not the engine's; an identity that made no further call on another run in that process (a crash, or the end of the run), which a_taken_lease_is_given_back judges at the lapse.",
    check: a_brief_lease_is_given_back_first,
};

/// The engine points that mark an operator's brief lease just granted.
const BRIEF_LEASE_MARKS: [&str; 2] = ["engine.repair.after_acquire", "engine.resolve.after_acquire"];

fn a_brief_lease_is_given_back_first(j: &Judged, out: &mut Vec<Witness>) {
    let ix = j.index();
    for &g in j.applied.iter().filter(|c| c.op == OpKind::Acquire && c.outcome.is_ok()) {
        let (Some(lease), Some(actor)) = (&g.granted, g.args.actor.as_deref()) else { continue };
        let Some(point) = BRIEF_LEASE_MARKS
            .into_iter()
            .find(|p| ix.marked(p, g.node, g.incarnation, &g.run_id, Some(lease.epoch.0)))
        else {
            continue;
        };
        let process = ix.of_process(g.node, g.incarnation);
        let mine = |c: &&&Call| c.id > g.id && c.args.actor.as_deref() == Some(actor);
        let Some(next) = process.iter().filter(mine).find(|c| c.run_id != g.run_id) else { continue };
        let released = process
            .iter()
            .filter(mine)
            .any(|c| c.id < next.id && c.op == OpKind::Release && c.lease.as_ref() == Some(lease));
        if released {
            continue;
        }
        out.push(Witness {
            witness: format!(
                "run {}: {} was granted epoch {} at t={} (its {point} mark) and made its {} of run {} at t={} without having released it",
                g.run_id,
                who(g),
                lease.epoch.0,
                t(g.invoked_ns),
                next.op.as_str(),
                if next.run_id.is_empty() { "(none)" } else { next.run_id.as_str() },
                t(next.invoked_ns),
            ),
            op: Some(g.op.as_str()),
            call: Some(g.id),
        });
    }
}

pub const A_RETURNED_SEGMENT_GAVE_ITS_LEASE_BACK: Property = Property {
    name: "a_returned_segment_gave_its_lease_back",
    expectation: Expectation::Always,
    claim: "A segment that returned to its caller (a host's run or retry, a worker's drive: its outcome or a failure other than a crash) had given back the lease it ran under: when the identity's latest acquire of the run before the return was granted, a release of that grant by the identity was invoked before the return, whatever the segment met (a refused boot, a run deleted or recreated while its resume prepared, a settle failure; rulvar releases in a `finally`: docs/engine-model.md M3 step 8, 5.2).",
    not_checked: "Segments whose process died (no return); acquires before the segment's start (its identity's latest submission or retry of the run, or sweep, before the return); brief leases of the operators (a_brief_lease_is_given_back_first); whether the release was applied (a released lease may already have lapsed or been taken).",
    check: a_returned_segment_gave_its_lease_back,
};

fn a_returned_segment_gave_its_lease_back(j: &Judged, out: &mut Vec<Witness>) {
    let runs = engine_runs(j);
    let ix = j.index();
    let facts = &j.history.facts;
    for (i, f) in facts.iter().enumerate() {
        let (run_id, how) = match &f.kind {
            FactKind::Settled { run_id, status, .. } => (run_id, format!("settled {status}")),
            FactKind::Failed { run_id, what, .. } if matches!(what.as_str(), "run" | "retry" | "drive") => {
                (run_id, format!("returned its {what}'s failure"))
            }
            _ => continue,
        };
        if !runs.contains(run_id.as_str()) {
            continue;
        }
        // The segment began at its identity's latest start before the return that had not
        // returned yet: the host's submission or retry of the run, or the worker's sweep.
        let began = segment_start(facts, i, run_id, usize::MAX);
        let from = began.map_or(0, |g| g.invoked_before);
        let mine = own_calls_before(ix, f, run_id);
        let mine = &mine[mine.partition_point(|c| c.id < from)..];
        let Some(acquire) = mine.iter().rfind(|c| c.op == OpKind::Acquire) else { continue };
        let Some(lease) = acquire.granted.as_ref().filter(|_| acquire.outcome.is_ok()) else { continue };
        let released = mine
            .iter()
            .any(|c| c.id > acquire.id && c.op == OpKind::Release && c.lease.as_ref() == Some(lease));
        if released {
            continue;
        }
        out.push(Witness {
            witness: format!(
                "run {run_id}: {} was granted epoch {} at t={} and its segment {how} at t={} without having released it",
                who(acquire),
                lease.epoch.0,
                t(acquire.invoked_ns),
                t(f.at_ns),
            ),
            op: Some(acquire.op.as_str()),
            call: Some(acquire.id),
        });
    }
}

pub const A_PARKED_RUN_STAYS_PARKED: Property = Property {
        name: "a_parked_run_stays_parked",
        expectation: Expectation::Always,
        claim: "A worker process that parked a run (its sweep's drive of it ended with a `suspended` meta write under the sweep's lease, and the load after the drive returned the journal that segment left) does not boot the run again while nothing arrived: a later sweep of the same process that lists the run `suspended` with the same genesis, after every sweep between listed it live, and loads under its new lease a journal of the same generation and length, releases it with no meta write (docs/engine-model.md 5.2 step 4, the skip cache).",
        not_checked: "Parks before a restart or a stop (the cache lives in the worker, and a stopped worker is replaced by a fresh one); drives whose tenure another grant, delete or writer interrupted, or whose load after the drive failed or saw other entries (the worker then forgets the park, and so does this check); whether a skipped run was really blocked (`sweeps_skip_only_blocked_runs`).",
        check: a_parked_run_stays_parked,
};

/// A run a worker parked: the journal's (generation, length) after its drive, and the
/// genesis its sweep listed.
struct Park {
    journal: (usize, usize),
    genesis: Option<String>,
}

fn a_parked_run_stays_parked(j: &Judged, out: &mut Vec<Witness>) {
    let facts = &j.history.facts;
    let calls = &j.history.calls;
    let ix = j.index();
    let journal_at = |run: &str, upto: usize| ix.journal_at(run, upto);
    // The oracle's own skip cache, per (node, incarnation, owner, run).
    let mut parked: std::collections::BTreeMap<(u32, u32, &str, &str), Park> = Default::default();
    for (i, fact) in facts.iter().enumerate() {
        if fact.kind == FactKind::WorkerStopped {
            // A stopped worker stays stopped; the process carries on with a fresh one, whose
            // cache is empty.
            let stopped = (fact.node, fact.incarnation, fact.owner.as_str());
            parked.retain(|&(n, inc, o, _), _| (n, inc, o) != stopped);
            continue;
        }
        let Some(sweep) = Sweep::at(facts, calls, i) else { continue };
        let (began, metas) = (sweep.began, sweep.metas);
        let identity = (began.node, began.incarnation, began.owner.as_str());
        // A run the listing does not show live leaves the cache (5.2 step 2).
        parked.retain(|&(n, inc, o, run), _| {
            (n, inc, o) != identity
                || metas.iter().any(|m| {
                    m.run_id == run
                        && matches!(m.status, store::RunStatus::Running | store::RunStatus::Suspended)
                })
        });
        for acq in sweep.after_listing().filter(|c| c.op == OpKind::Acquire) {
            let (Some(granted), true) = (&acq.granted, acq.outcome.is_ok()) else { continue };
            let run = acq.run_id.as_str();
            let Some(listed) = metas.iter().find(|m| m.run_id == run) else { continue };
            let key = (identity.0, identity.1, identity.2, run);
            let loads = || sweep.after_listing().filter(move |c| c.op == OpKind::Load && c.run_id == run);
            let writes: Vec<&Call> = ix
                .on_run_under_epoch(run, granted.epoch.0)
                .iter()
                .copied()
                .filter(|c| c.op == OpKind::PutMeta && (c.node, c.incarnation) == (acq.node, acq.incarnation))
                .collect();
            // The demand: nothing arrived since the park, so no boot.
            let first_load = loads().find(|c| c.id > acq.id && c.outcome.is_ok());
            if let (Some(park), Some(load), Some(boot)) = (parked.get(&key), first_load, writes.first()) {
                let now = journal_at(run, load.seen_at.unwrap_or(usize::MAX));
                if listed.status == store::RunStatus::Suspended
                    && listed.genesis == park.genesis
                    && now == park.journal
                {
                    out.push(Witness {
                        witness: format!(
                            "worker {}'s sweep booted run {run} under epoch {} at t={} (its {}), though the same process had parked it (journal of {} entries, generation {}) and its sweep listed it suspended with the same genesis and loaded that same journal under the new lease at t={}",
                            began.owner,
                            granted.epoch.0,
                            t(boot.invoked_ns),
                            meta_of(boot).map_or("meta write".to_string(), |m| format!("{} meta write", m.status)),
                            now.1,
                            now.0,
                            t(load.returned_ns.unwrap_or(load.invoked_ns)),
                        ),
                        op: Some(boot.op.as_str()),
                        call: Some(boot.id),
                    });
                }
            }
            // The cache after this grant: a drive that ended parked records the journal, any
            // other drive forgets the run; a grant with no meta write (a skip, a refusal)
            // leaves the cache as it was.
            let Some(last) = writes.iter().rev().find(|c| c.applied.is_some()) else { continue };
            let suspended = meta_of(last).is_some_and(|m| m.status == Status::Suspended);
            let (from, to) = (super::order(acq), super::order(last));
            let exclusive = ix.recorded_between(run, from, to).iter().all(|c| match c.op {
                OpKind::Acquire | OpKind::Delete => false,
                OpKind::Append => {
                    (c.node, c.incarnation) == (acq.node, acq.incarnation)
                        && c.lease.as_ref().is_some_and(|l| l.epoch == granted.epoch)
                }
                _ => true,
            });
            let after = loads().find(|c| c.id > last.id);
            let left = journal_at(run, to.saturating_add(1));
            match after {
                Some(l)
                    if suspended
                        && exclusive
                        && l.outcome.is_ok()
                        && journal_at(run, l.seen_at.unwrap_or(usize::MAX)) == left =>
                {
                    parked.insert(key, Park { journal: left, genesis: listed.genesis.clone() });
                }
                _ => {
                    parked.remove(&key);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use crate::history::{Args, FactKind, FaultKind, FaultRec, OpKind};
    use crate::oracle::testkit::engine::*;

    #[test]
    fn a_brief_lease_kept_past_its_holders_next_run_is_caught() {
        use store::RunStatus;
        let by = |h: &mut HistoryBuilder, actor: &str| {
            h.h.calls.last_mut().expect("a call").args.actor = Some(actor.into());
        };
        // The operator repairs r (writing or not), gives the lease back or not, and moves
        // on to s; `point` marks the grant.
        let repair = |point: &'static str, writes: bool, releases: bool, moves_on: bool| {
            let mut h = HistoryBuilder::engine_run();
            let l = h.acquire(0, "op", "r", 2);
            by(&mut h, "op");
            h.mark(0, point, "r", Some(2));
            h.read_meta(0, "op", "r");
            if writes {
                h.meta(0, Some(&l), "r", RunStatus::Ok, 1);
                by(&mut h, "op");
            }
            // Another identity of the process works on another run meanwhile.
            h.read_meta(0, "host", "s");
            if releases {
                h.push(0, OpKind::Release, "r", Some(l.clone()), Args::default(), None);
                by(&mut h, "op");
            }
            if moves_on {
                h.read_meta(0, "op", "s");
            }
            h.judge("a_brief_lease_is_given_back_first")
        };
        let v = repair("engine.repair.after_acquire", false, false, true);
        assert_eq!(v.len(), 1, "a repair that found nothing kept its lease: {v:?}");
        assert!(v[0].witness.contains("without having released it"), "{}", v[0].witness);
        assert_eq!(repair("engine.resolve.after_acquire", true, false, true).len(), 1);
        assert!(repair("engine.repair.after_acquire", false, true, true).is_empty());
        assert!(repair("engine.repair.after_acquire", true, true, true).is_empty());
        assert!(repair("engine.repair.after_acquire", false, false, false).is_empty(), "never moved on");
        assert!(repair("engine.dispatch.after_running", false, false, true).is_empty(), "no brief lease");
    }

    #[test]
    fn a_stopped_drive_that_starts_a_turn_is_caught() {
        use store::RunStatus;
        let tool = |run: &str| FactKind::Tool { run_id: run.into(), op: "a".into(), dispatch: 1, turn: 2 };
        let actor = |h: &mut HistoryBuilder| {
            h.h.calls.last_mut().expect("a call").args.actor = Some("w".into());
        };
        // Worker w drives r (its segment boots `booted` the stop: before or after it); the
        // work comes `after` ms after the stop (or the boot, if later), by `who` on `node`.
        let worked = |booted_before: bool, who: &str, node: u32, after: i64, returned_first: bool| {
            let mut h = HistoryBuilder::engine_run();
            let a = h.acquire(0, "w", "r", 1);
            if booted_before {
                h.meta(0, Some(&a), "r", RunStatus::Running, 1);
                actor(&mut h);
            }
            h.fact(0, "w", FactKind::WorkerStopped);
            if returned_first {
                h.fact(0, "w", FactKind::StoppedSweepReturned);
            }
            h.now_ms += 3;
            if !booted_before {
                h.meta(0, Some(&a), "r", RunStatus::Running, 1);
                actor(&mut h);
            }
            h.pay(node, who, "r", 1, 2);
            h.now_ms += after;
            h.fact(node, who, tool("r"));
            h.push(0, OpKind::Release, "r", Some(a), Args::default(), None);
            h.judge("a_stopped_drive_starts_no_turn")
        };
        // A running body: its first step after the stop is caught.
        let v = worked(true, "w", 0, 0, false);
        assert_eq!(v.len(), 1, "{v:?}");
        assert!(v[0].witness.contains("paid for turn 2"), "{}", v[0].witness);
        // A segment that booted after the stop: its boot's instant is its first step.
        assert!(worked(false, "w", 0, 0, false).is_empty(), "the boot's own instant");
        let v = worked(false, "w", 0, 5, false);
        assert_eq!(v.len(), 1, "{v:?}");
        assert!(v[0].witness.contains("ran the tool of turn 2"), "{}", v[0].witness);
        assert!(worked(true, "w", 0, 5, true).is_empty(), "a fresh worker after the stopped sweep returned");
        // A process frozen when the stop came: its first instant is the pause's end.
        let paused = |until_ms: u64| {
            let mut h = HistoryBuilder::engine_run();
            let a = h.acquire(0, "w", "r", 1);
            h.meta(0, Some(&a), "r", RunStatus::Running, 1);
            actor(&mut h);
            let at = h.now_ms as u64 * 1_000_000;
            h.h.faults.push(FaultRec {
                at_ns: at,
                node: 0,
                point: store::FaultPoint::SqliteAppendBeforeBegin,
                kind: FaultKind::Pause,
                call: None,
                run_id: Some("r".into()),
                until_ns: Some(at + until_ms * 1_000_000),
            });
            h.fact(0, "w", FactKind::WorkerStopped);
            h.now_ms += 50;
            h.pay(0, "w", "r", 1, 2);
            h.judge("a_stopped_drive_starts_no_turn")
        };
        assert!(paused(50).is_empty(), "the first instant after the pause");
        assert_eq!(paused(20).len(), 1, "30 ms after the pause ended");
        assert!(worked(true, "host", 0, 5, false).is_empty(), "another identity of the process");
        assert!(worked(true, "w", 1, 5, false).is_empty(), "another process");
    }

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

    /// Run r granted to n0 at 1 ms (expiring at 1 + TTL), then, `after` ms later, a call of
    /// the same process on another run; `released`: n0 gives r back first.
    fn walked_away(after: i64, released: bool) -> HistoryBuilder {
        let mut h = HistoryBuilder::engine_run();
        let a = h.acquire(0, "w", "r", 1);
        if released {
            h.push(0, OpKind::Release, "r", Some(a), Args::default(), None);
        }
        h.now_ms += after;
        h.acquire(0, "w", "s", 1);
        h
    }

    #[test]
    fn a_lease_left_to_lapse_by_a_living_process_is_caught() {
        let v = walked_away(TTL + 5, false).judge("a_taken_lease_is_given_back");
        assert_eq!(v.len(), 1, "{v:?}");
        assert!(v[0].witness.contains("let it lapse unreleased"), "{}", v[0].witness);
        assert!(v[0].witness.contains("acquire of run s"), "{}", v[0].witness);
        // Released, or the process's next call came before the lapse (it may still release).
        assert!(walked_away(TTL + 5, true).judge("a_taken_lease_is_given_back").is_empty());
        assert!(walked_away(TTL - 10, false).judge("a_taken_lease_is_given_back").is_empty());
        // A stall of the process while it held the grant excuses the lapse; another node's does not.
        for (node, excused) in [(0, true), (1, false)] {
            let mut h = walked_away(TTL + 5, false);
            h.h.faults.push(FaultRec {
                at_ns: 2_000_000,
                node,
                point: store::FaultPoint::WorkerSweepAfterAcquire,
                kind: FaultKind::Stall,
                call: None,
                run_id: Some("r".into()),
                until_ns: Some(50_000_000),
            });
            assert_eq!(h.judge("a_taken_lease_is_given_back").is_empty(), excused, "node {node}");
        }
        // A later grant of the run to someone else before the lapse ends the holder's duty; a
        // takeover after the lapse does not excuse it.
        for (wait, excused) in [(TTL - 10, true), (TTL + 5, false)] {
            let mut h = HistoryBuilder::engine_run();
            h.acquire(0, "w", "r", 1);
            h.now_ms += wait;
            h.acquire(1, "v", "r", 2);
            h.now_ms += TTL;
            h.acquire(0, "w", "s", 1);
            assert_eq!(h.judge("a_taken_lease_is_given_back").is_empty(), excused, "wait {wait}");
        }
    }

    /// A sweep by worker "w": its listing of `listed` (run, status, workflow), then acquires
    /// of `tried`, then (`ended`) its return.
    fn sweep(
        listed: &[(&str, store::RunStatus, &str)],
        tried: &[&str],
        stop: bool,
        ended: bool,
    ) -> HistoryBuilder {
        let mut h = HistoryBuilder::engine_run();
        h.fact(0, "w", FactKind::SweepBegan);
        let metas = listed
            .iter()
            .map(|(run, status, wf)| {
                let mut m = crate::oracle::testkit::meta_record(run, *status);
                m.workflow_name = Some(wf.to_string());
                m
            })
            .collect();
        h.push(0, OpKind::ListRuns, "", None, Args { actor: Some("w".into()), ..Args::default() }, None);
        h.h.calls.last_mut().expect("pushed").read = Some(crate::history::Read::Runs {
            filter: store::RunFilter { status: None, statuses: None, name: None, tags: None },
            metas,
        });
        if stop {
            h.fact(0, "w", FactKind::WorkerStopped);
        }
        for run in tried {
            h.acquire(0, "w", run, 1);
            h.h.calls.last_mut().expect("pushed").args.actor = Some("w".into());
        }
        if ended {
            h.fact(0, "w", FactKind::SweepEnded);
        }
        h
    }

    /// Worker "w" (node 0) sweeps run r: its listing shows r `status` with genesis g1; it
    /// acquires r at `epoch`, loads, and (`drive`) boots and settles the run as `settled`,
    /// then loads again; it releases and the sweep returns.
    fn sweep_of_r(
        h: &mut HistoryBuilder,
        status: store::RunStatus,
        epoch: u64,
        drive: Option<store::RunStatus>,
    ) {
        let actor = Args { actor: Some("w".into()), ..Args::default() };
        fn read<'h>(h: &'h mut HistoryBuilder, op: OpKind, run: &str) -> &'h mut crate::history::Call {
            h.push(0, op, run, None, Args { actor: Some("w".into()), ..Args::default() }, None);
            h.h.applied_count -= 1;
            let seen = h.h.applied_count;
            let c = h.h.calls.last_mut().expect("pushed");
            (c.applied, c.seen_at) = (None, Some(seen));
            c
        }
        h.fact(0, "w", FactKind::SweepBegan);
        let mut m = crate::oracle::testkit::meta_record("r", status);
        m.workflow_name = Some("happy".into());
        m.genesis = Some("g1".into());
        read(h, OpKind::ListRuns, "").read = Some(crate::history::Read::Runs {
            filter: store::RunFilter { status: None, statuses: None, name: None, tags: None },
            metas: vec![m],
        });
        let l = h.acquire(0, "w", "r", epoch);
        h.h.calls.last_mut().expect("pushed").args.actor = Some("w".into());
        read(h, OpKind::Load, "r");
        if let Some(settled) = drive {
            h.meta(0, Some(&l), "r", store::RunStatus::Running, epoch);
            h.meta(0, Some(&l), "r", settled, epoch);
            read(h, OpKind::Load, "r");
        }
        h.push(0, OpKind::Release, "r", Some(l), actor.clone(), None);
        h.fact(0, "w", FactKind::SweepEnded);
    }

    #[test]
    fn a_worker_that_boots_a_run_it_parked_with_nothing_new_is_caught() {
        use store::RunStatus::{Running, Suspended};
        let p = "a_parked_run_stays_parked";
        let parked = || {
            let mut h = HistoryBuilder::engine_run();
            let l = h.acquire(1, "host", "r", 1);
            h.append(1, &l, "r", op_entry(0, "external", "await:k", "suspended", None));
            h.push(1, OpKind::Release, "r", Some(l), Args::default(), None);
            sweep_of_r(&mut h, Suspended, 2, Some(Suspended));
            h
        };
        // The next sweep skips it: lawful.
        let mut h = parked();
        sweep_of_r(&mut h, Suspended, 3, None);
        assert!(h.judge(p).is_empty(), "{:?}", h.judge(p));
        // It boots it again with nothing new.
        let mut h = parked();
        sweep_of_r(&mut h, Suspended, 3, Some(Suspended));
        let v = h.judge(p);
        assert_eq!(v.len(), 1, "{v:?}");
        assert!(v[0].witness.contains("booted run r under epoch 3"), "{}", v[0].witness);
        assert!(v[0].witness.contains("journal of 1 entries"), "{}", v[0].witness);
        // A resolution arrived in between: new work, the boot is due.
        let mut h = parked();
        let l = h.acquire(1, "host", "r", 3);
        h.append(1, &l, "r", op_entry(1, "resolution", "await:k", "ok", Some(0)));
        h.push(1, OpKind::Release, "r", Some(l), Args::default(), None);
        sweep_of_r(&mut h, Suspended, 4, Some(Running));
        assert!(h.judge(p).is_empty(), "{:?}", h.judge(p));
        // Listed running (the cache asks for suspended), or by another process: no demand.
        let mut h = parked();
        sweep_of_r(&mut h, Running, 3, Some(Suspended));
        assert!(h.judge(p).is_empty());
        let mut h = parked();
        for c in h.h.calls.iter_mut().filter(|c| c.node == 0) {
            c.incarnation = 1;
        }
        for f in h.h.facts.iter_mut().filter(|f| f.owner == "w") {
            f.incarnation = 1;
        }
        sweep_of_r(&mut h, Suspended, 3, Some(Suspended));
        assert!(h.judge(p).is_empty(), "a restarted process has an empty cache");
        // A stopped worker is replaced by a fresh one, with an empty cache.
        let mut h = parked();
        h.fact(0, "w", FactKind::WorkerStopped);
        sweep_of_r(&mut h, Suspended, 3, Some(Suspended));
        assert!(h.judge(p).is_empty(), "a fresh worker after a stop");
        // A drive that did not end parked leaves nothing to skip.
        let mut h = HistoryBuilder::engine_run();
        sweep_of_r(&mut h, Suspended, 1, Some(Running));
        sweep_of_r(&mut h, Suspended, 2, Some(Suspended));
        assert!(h.judge(p).is_empty());
    }

    #[test]
    fn a_sweep_that_returns_without_trying_a_candidate_is_caught() {
        use store::RunStatus::{Ok, Running, Suspended};
        let listed =
            [("a", Running, "happy"), ("b", Suspended, "happy"), ("c", Ok, "happy"), ("d", Running, "nope")];
        // Terminal runs and unknown workflows are not candidates.
        assert!(sweep(&listed, &["a", "b"], false, true).judge("a_sweep_tries_every_candidate").is_empty());
        let v = sweep(&listed, &["a"], false, true).judge("a_sweep_tries_every_candidate");
        assert_eq!(v.len(), 1, "{v:?}");
        assert!(v[0].witness.contains("listed run b as suspended"), "{}", v[0].witness);
        // A stopped sweep, and one a crash ended (no return), owe nothing.
        assert!(sweep(&listed, &["a"], true, true).judge("a_sweep_tries_every_candidate").is_empty());
        assert!(sweep(&listed, &["a"], false, false).judge("a_sweep_tries_every_candidate").is_empty());
        // Another identity's acquire is not the sweep's.
        let mut h = sweep(&listed, &["a"], false, false);
        h.acquire(0, "v", "b", 2);
        h.fact(0, "w", FactKind::SweepEnded);
        assert_eq!(h.judge("a_sweep_tries_every_candidate").len(), 1);
    }

    #[test]
    fn a_worker_one_release_behind_owes_only_the_workflows_it_registers() {
        use store::RunStatus::Running;
        let listed = [("a", Running, "happy"), ("b", Running, "survey")];
        // `w`'s process registers `workflows`: its `Deployed` fact just before the sweep.
        let deployed = |workflows: &[&str], owner: &str| {
            let mut h = sweep(&listed, &["a"], false, true);
            let at = h.h.facts.iter().position(|f| f.kind == FactKind::SweepBegan).expect("a sweep");
            let mut f = h.h.facts[at].clone();
            f.owner = owner.into();
            f.kind = FactKind::Deployed { workflows: workflows.iter().map(|w| w.to_string()).collect() };
            h.h.facts.insert(at, f);
            h.judge("a_sweep_tries_every_candidate")
        };
        assert!(deployed(&["happy"], "w").is_empty(), "survey is not its to try");
        let v = deployed(&["happy", "survey"], "w");
        assert!(v.len() == 1 && v[0].witness.contains("listed run b"), "{v:?}");
        let v = deployed(&["happy"], "another");
        assert_eq!(v.len(), 1, "another identity's registry is not the sweeping worker's: {v:?}");
        let v = sweep(&listed, &["a"], false, true).judge("a_sweep_tries_every_candidate");
        assert_eq!(v.len(), 1, "no Deployed fact: the whole catalog: {v:?}");
    }

    #[test]
    fn a_sweep_listing_with_a_filter_that_leaves_out_a_resumable_run_is_caught() {
        use store::RunStatus::{Cancelled, Running, Suspended};
        let judged = |filter: store::RunFilter| {
            let mut h = sweep(&[("a", Running, "happy")], &["a"], false, true);
            if let Some(crate::history::Read::Runs { filter: f, .. }) =
                h.h.calls.iter_mut().find(|c| c.op == OpKind::ListRuns).and_then(|c| c.read.as_mut())
            {
                *f = filter;
            }
            h.judge("a_sweep_tries_every_candidate")
        };
        let none = store::RunFilter { status: None, statuses: None, name: None, tags: None };
        // Every run (a worker with retention), or exactly the resumable ones: lawful.
        assert!(judged(none.clone()).is_empty());
        let resumable = store::RunFilter { statuses: Some(vec![Running, Suspended]), ..none.clone() };
        assert!(judged(resumable).is_empty());
        let widened = store::RunFilter {
            status: Some(Suspended),
            statuses: Some(vec![Running, Cancelled]),
            ..none.clone()
        };
        assert!(judged(widened).is_empty());
        // Suspended runs left out: a parked run is never driven again.
        let v = judged(store::RunFilter { statuses: Some(vec![Running]), ..none.clone() });
        assert_eq!(v.len(), 1, "{v:?}");
        assert!(v[0].witness.contains("leaves out every suspended run"), "{}", v[0].witness);
        let v = judged(store::RunFilter { status: Some(Cancelled), ..none.clone() });
        assert!(v.len() == 1 && v[0].witness.contains("every running or suspended run"), "{v:?}");
        // A name or a tag narrows the candidates too.
        assert_eq!(judged(store::RunFilter { tags: Some(vec!["x".into()]), ..none.clone() }).len(), 1);
        assert_eq!(judged(store::RunFilter { name: Some("x".into()), ..none }).len(), 1);
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
    #[test]
    fn a_segment_that_returned_holding_its_lease_is_caught() {
        let p = "a_returned_segment_gave_its_lease_back";
        let resumed = FactKind::Resumed { run_id: "r".into(), workflow: "happy".into() };
        let failed = FactKind::Failed {
            run_id: "r".into(),
            what: "retry".into(),
            error: "deleted while it prepared".into(),
        };
        let actor = |h: &mut HistoryBuilder| {
            for c in &mut h.h.calls {
                c.args.actor = Some(
                    c.args.owner.clone().or(c.lease.as_ref().map(|l| l.owner.clone())).unwrap_or_default(),
                );
            }
        };
        // A retry acquires, finds the run gone, and returns without a release.
        let mut h = HistoryBuilder::engine_run();
        h.fact(0, "h", resumed.clone());
        h.acquire(0, "h", "r", 1);
        actor(&mut h);
        h.fact(0, "h", failed.clone());
        let v = h.judge(p);
        assert!(v.len() == 1 && v[0].witness.contains("granted epoch 1"), "{v:?}");
        // With its release first: judged given back.
        let mut h = HistoryBuilder::engine_run();
        h.fact(0, "h", resumed.clone());
        let a2 = h.acquire(0, "h", "r", 1);
        h.push(0, crate::history::OpKind::Release, "r", Some(a2), Default::default(), None);
        actor(&mut h);
        h.fact(0, "h", failed.clone());
        assert!(h.judge(p).is_empty());
        // A second start refused at once while the first holds the run: its acquire came
        // before this start, so it is not this segment's.
        let mut h = HistoryBuilder::engine_run();
        h.fact(0, "h", resumed.clone());
        h.acquire(0, "h", "r", 1);
        actor(&mut h);
        h.fact(0, "h", resumed);
        h.fact(0, "h", failed);
        assert!(h.judge(p).is_empty(), "{:?}", h.judge(p));
    }
}
