//! The simulator's implementation of the store's environment: each node's clock (the
//! clock model is in [`crate::time`]), virtual sleeps, and the fault hook that consults
//! the plan.
//!
//! Clock reads: every `now_ms` the store makes is answered from the node's clock and noted
//! on the call being polled (the last one is what a refusing check compared a lease's
//! expiry with); the fault hook's own readings are not noted.
//!
//! Fault hook: at every named point it counts the node's occurrence of that point, records
//! what the store applied (after-commit points) or checked (after-check points) for the
//! call being polled, and performs the plan's action, if any: a yield, a virtual stall (of a
//! length, or to the lease's expiry instant), a pause of the whole process (the node pauses
//! itself; the supervisor resumes it after a length, or once the run was taken over), or a
//! crash (the node kills itself; the supervisor restarts it later), or a contended write (a
//! writer of the harness holds the database's write lock across the call, which meets a real
//! `SQLITE_BUSY`; the hold ends at the node's next point outside that call, or after
//! [`crate::plan::CONTENTION_MS`]).
//!
//! Interrupts: a scenario may arm one per node ([`WorldState::arm_interrupt`]); it is
//! delivered at the node's next leased write point (before the write begins or right after
//! it commits), and that write stalls, so the interrupt (a worker's graceful stop) lands
//! while the write is in flight. The stall is recorded as a fault like any other.

use std::rc::Rc;
use std::time::Duration;

use store::{Crash, Env, FaultSite, LocalFuture, Moment};

use crate::history::{current_call, Event, FaultKind, FaultRec, LeaseRow, OpKind};
use crate::plan::{Action, ClockSpec};
use crate::time::{clock_at, now_ns};
use crate::world_state::Resume;
use crate::world_state::WorldState;

/// One node's environment.
pub struct SimEnv {
    pub node: u32,
    pub clock: ClockSpec,
    pub world: Rc<WorldState>,
    /// The node's own store, once constructed: after a commit the lease row is read through
    /// the committing connection (whose cache holds what it just wrote) rather than through
    /// the world's observer. Weak, because the store holds this environment.
    pub own_store: std::cell::RefCell<Option<store::SqliteStoreRef>>,
}

impl SimEnv {
    /// The node's clock, read by the harness itself (not recorded as the store's reading).
    fn clock_ms(&self) -> i64 {
        clock_at(self.clock, now_ns())
    }

    /// Virtual ns from now until this node's clock first reads `target_ms` (0 if it already
    /// does or has passed it).
    fn ns_until(&self, target_ms: i64) -> u64 {
        let now = now_ns();
        if clock_at(self.clock, now) >= target_ms {
            return 0;
        }
        // The clock is monotone in virtual time: find the first whole ms that reads target.
        let mut lo = now / 1_000_000 + 1;
        let mut hi = lo + (target_ms - clock_at(self.clock, now)).unsigned_abs() * 2 + 2;
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            if clock_at(self.clock, mid * 1_000_000) >= target_ms {
                hi = mid;
            } else {
                lo = mid + 1;
            }
        }
        (lo * 1_000_000).saturating_sub(now)
    }
}

impl SimEnv {
    /// The run's lease row as just committed: through the node's own connection when it can
    /// (no other task runs between a commit and its after-commit point), else through the
    /// world's observer. Both read the same committed database.
    fn lease_row_after_commit(&self, run_id: &str) -> Option<LeaseRow> {
        let own = self.own_store.borrow().as_ref().and_then(store::SqliteStoreRef::upgrade);
        match own.map(|s| s.peek_lease_row(run_id)) {
            Some(Ok(row)) => row.map(|(owner, epoch, expires_at)| LeaseRow { owner, epoch, expires_at }),
            _ => self.world.observe_lease(run_id),
        }
    }
}

impl Env for SimEnv {
    /// The store's clock read: answered from the node's clock and noted on the call being
    /// polled, so the oracle knows what a refusing check compared the expiry with.
    fn now_ms(&self) -> i64 {
        let ms = self.clock_ms();
        if let Some(id) = current_call() {
            self.world.recorder.clock_read(id, ms);
        }
        ms
    }

    fn monotonic(&self) -> Duration {
        Duration::from_nanos(now_ns())
    }

    fn sleep(&self, duration: Duration) -> LocalFuture<'static, ()> {
        Box::pin(madsim::time::sleep(duration))
    }

    fn fault(&self, site: &FaultSite<'_>) -> Option<LocalFuture<'static, Result<(), Crash>>> {
        let w = &self.world;
        let point = site.point;
        // Over the call budget every call hangs until the run ends (the node is frozen, its
        // call's outcome stays unknown): the livelock stops here instead of filling memory.
        if w.over_budget() {
            return Some(Box::pin(std::future::pending()));
        }
        // A contention this node's earlier call met ends as the node moves past that call.
        let call = current_call();
        w.end_contention(|c| c.node == self.node && (c.call != call || call.is_none()));
        // A process paused until a takeover that this commit completes is resumed now, and
        // this task waits (unless the plan acts here anyway) so the resumed process's next
        // step lands right after this write.
        let mut resumed = false;
        if let Some(id) = current_call() {
            match point.moment() {
                Moment::AfterCheck => w.recorder.checked(id, self.clock_ms()),
                Moment::AfterCommit => {
                    let row = site.run_id.and_then(|r| self.lease_row_after_commit(r));
                    w.recorder.applied(id, now_ns(), self.clock_ms(), row, site.epoch);
                    if let Some(run_id) = site.run_id {
                        resumed = w.takeover_writes_applied(run_id);
                    }
                }
                _ => {}
            }
        }
        let incarnation = || w.incarnations.borrow().get(self.node as usize).copied().unwrap_or(0);
        if point.moment() == Moment::Engine {
            w.recorder.mark(point.name(), self.node, incarnation(), site.run_id.unwrap_or(""), site.epoch);
        }
        let action = w.decide(self.node, point, site.epoch.is_some());
        // The timeline line of a fault the plan acts with here.
        let fault_event = |fault: String| {
            w.recorder.event(Event {
                at_ns: now_ns(),
                node: Some(self.node),
                epoch: site.epoch,
                op: String::new(),
                outcome: String::new(),
                fault,
                call: current_call(),
            })
        };
        // A next-write contention armed at an engine moment: nothing happens here (no yield,
        // so no other task of the process comes between), and the write meets the lock.
        if action == Some(Action::ContendNextWrite) && point.moment() == Moment::Engine {
            if let Some(run) = site.run_id {
                w.contend_next.borrow_mut().insert(self.node, (incarnation(), run.to_string()));
                w.recorder.point(point, true, false);
                fault_event(format!("{} at {}", Action::ContendNextWrite.describe(), point.name()));
                return None;
            }
        }
        // The armed write: its moment before it begins, on the armed run, in the same life.
        let armed = crate::plan::contendable(point)
            && site.run_id.is_some_and(|run| {
                w.contend_next
                    .borrow()
                    .get(&self.node)
                    .is_some_and(|(inc, r)| *inc == incarnation() && r == run)
            });
        let action = if armed {
            w.contend_next.borrow_mut().remove(&self.node);
            match action {
                None | Some(Action::Yield) => Some(Action::Contend),
                other => other,
            }
        } else {
            action
        };
        w.recorder.point(point, action.is_some(), matches!(action, Some(Action::Crash { .. })));
        // An interrupt the scenario armed is delivered at the node's next leased write, which
        // then stalls (unless the plan acts here anyway) with the write in flight.
        let interrupted = (w.faults_on.get()
            && site.epoch.is_some()
            && matches!(point.moment(), Moment::Before | Moment::AfterCommit)
            && matches!(OpKind::of_point(point), Some(OpKind::Append | OpKind::PutMeta | OpKind::BlobPut)))
        .then(|| w.deliver_interrupt(self.node))
        .flatten();
        let action = action.or(interrupted.map(|ms| Action::Stall { ms }));
        // Contention acts only before a store write begins; elsewhere it is a yield.
        let action = action.map(|a| match a {
            Action::Contend if !crate::plan::contendable(point) => Action::Yield,
            Action::ContendNextWrite => Action::Yield,
            a => a,
        });
        let Some(action) = action else {
            // A microsecond's sleep, not a yield: madsim picks the next ready task at
            // random, so after a yield the committing task could go on first; asleep, it
            // waits until every ready task (the resumed process's among them) has run.
            return resumed.then(|| -> LocalFuture<'static, Result<(), Crash>> {
                Box::pin(async {
                    madsim::time::sleep(Duration::from_micros(1)).await;
                    Ok(())
                })
            });
        };
        // How long a stall to the expiry waits: until the node's clock reads the run's lease
        // expiry (less `early`), as the lease row stands now.
        let to_expiry = |early: i64| {
            site.run_id
                .and_then(|r| w.observe_lease(r))
                .map_or(0, |row| self.ns_until(row.expires_at.saturating_sub(early)))
        };
        let until_ns = match action {
            Action::Yield | Action::ContendNextWrite | Action::Crash { .. } => Some(now_ns()),
            Action::Contend => Some(now_ns() + crate::plan::CONTENTION_MS * 1_000_000),
            Action::Stall { ms } | Action::Pause { ms } => Some(now_ns() + ms * 1_000_000),
            Action::StallToExpiry => Some(now_ns() + to_expiry(0)),
            Action::StallToBeforeExpiry { ms } => {
                Some(now_ns() + to_expiry(i64::try_from(ms).unwrap_or(i64::MAX)))
            }
            Action::PauseUntilTakeover { .. } | Action::PauseUntilAcquired { .. } => None,
        };
        w.recorder.fault(FaultRec {
            until_ns,
            at_ns: now_ns(),
            node: self.node,
            point,
            kind: match action {
                Action::Yield | Action::ContendNextWrite => FaultKind::Yield,
                Action::Stall { .. } => FaultKind::Stall,
                Action::StallToExpiry => FaultKind::StallToExpiry,
                Action::StallToBeforeExpiry { .. } => FaultKind::StallBeforeExpiry,
                Action::Pause { .. }
                | Action::PauseUntilTakeover { .. }
                | Action::PauseUntilAcquired { .. } => FaultKind::Pause,
                Action::Crash { .. } => FaultKind::Crash,
                Action::Contend => FaultKind::Contend,
            },
            call: current_call(),
            run_id: site.run_id.map(str::to_string),
        });
        fault_event(match interrupted {
            Some(_) => format!("interrupt, then {} at {}", action.describe(), point.name()),
            None => format!("{} at {}", action.describe(), point.name()),
        });
        match action {
            Action::Yield | Action::ContendNextWrite => Some(Box::pin(async {
                madsim::task::yield_now().await;
                Ok(())
            })),
            Action::Stall { ms } => Some(Box::pin(async move {
                madsim::time::sleep(Duration::from_millis(ms)).await;
                Ok(())
            })),
            Action::StallToExpiry | Action::StallToBeforeExpiry { .. } => {
                let early = match action {
                    Action::StallToBeforeExpiry { ms } => i64::try_from(ms).unwrap_or(i64::MAX),
                    _ => 0,
                };
                let wait = to_expiry(early);
                Some(Box::pin(async move {
                    if wait > 0 {
                        madsim::time::sleep(Duration::from_nanos(wait)).await;
                    } else {
                        madsim::task::yield_now().await;
                    }
                    Ok(())
                }))
            }
            Action::Pause { .. } | Action::PauseUntilTakeover { .. } | Action::PauseUntilAcquired { .. } => {
                // A pause until another process's writes: resumed after `writes` of them past
                // `epoch` (the baseline), or after 1.5 ttl when there is no run or baseline.
                let ttl_ms = w.plan.knobs.ttl_ms.max(1);
                let after_takeover = |epoch: Option<u64>, writes, op| match (site.run_id, epoch) {
                    (Some(run), Some(epoch)) => {
                        Resume::AfterTakeover { run_id: run.to_string(), epoch, writes, op, ttl_ms }
                    }
                    _ => Resume::After { ms: ttl_ms * 3 / 2 },
                };
                let lease_epoch = |run: &str| w.observe_lease(run).map(|row| row.epoch);
                let resume = match action {
                    // The caller's epoch, else the run's lease row's.
                    Action::PauseUntilTakeover { writes, same_op } => after_takeover(
                        site.epoch.or_else(|| site.run_id.and_then(lease_epoch)),
                        writes,
                        if same_op { crate::history::OpKind::of_point(point) } else { None },
                    ),
                    // The run's last grant: its lease row's, else the high-water mark, else 0.
                    Action::PauseUntilAcquired { writes } => after_takeover(
                        site.run_id
                            .map(|run| lease_epoch(run).or_else(|| w.observe_epoch_mark(run)).unwrap_or(0)),
                        writes,
                        None,
                    ),
                    Action::Pause { ms } => Resume::After { ms },
                    _ => unreachable!("the arm matched a pause"),
                };
                // The node is paused now; this task parks at its next await.
                w.pause_self(self.node, resume);
                Some(Box::pin(async {
                    madsim::task::yield_now().await;
                    Ok(())
                }))
            }
            Action::Contend => {
                // The store's BEGIN IMMEDIATE comes right after this point, in the same poll.
                w.contend(self.node, call);
                None
            }
            Action::Crash { restart_after_ms } => {
                w.crash_self(self.node, restart_after_ms);
                Some(Box::pin(std::future::pending()))
            }
        }
    }
}
