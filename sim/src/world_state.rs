//! The state of one run that its nodes, its fault hook and its supervisor share: the plan's
//! decisions by (node, point, occurrence), how often each node reached each point, the
//! recorder, which nodes are alive in which incarnation, the kill, restart, pause and resume
//! of a node, the call budget, and an observer connection that reads committed state. Single-threaded
//! (madsim runs a run on one thread); built by [`crate::world`], read by [`crate::env`].

use std::any::Any;
use std::cell::{Cell, RefCell};
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::rc::Rc;
use std::time::Duration;

use futures::channel::mpsc;
use futures::StreamExt;
use rusqlite::{Connection, OptionalExtension};
use store::{FaultPoint, Profile};

use crate::history::{Event, LeaseRow, OpKind, Recorder};
use crate::plan::{Action, Plan, TAKEOVER_WAIT_TTLS};
use crate::time::now_ns;

/// The most store calls one run may make. A storm makes hundreds and the busiest engine
/// scenario a few thousand; a system under test that livelocks (every call refused at once,
/// so virtual time never advances) would otherwise grow its history until memory runs out.
/// Reaching the budget freezes every node and ends the run, and the oracle reports it.
pub const CALL_BUDGET: usize = 100_000;

/// The most read items one run may record ([`crate::history::History::read_items`]: journal
/// entries, metas, refs and blob KiB its successful reads returned). The recorder keeps
/// every read's result for the oracle, so a system under test that keeps re-reading a
/// journal it keeps growing (a resume that appends a settle and is resumed again) records
/// the square of the journal's length: a planted bug did so to 6.4 GB in one run, within
/// the call budget (at this budget: 0.4 GB). The busiest of 150 `current` seeds of each
/// scenario read 6,493 items (queue), a 77th of this. Reaching it ends the run as the call
/// budget does, and the oracle reports it.
pub const READ_BUDGET: usize = 500_000;

/// The state of one run, shared by the nodes and the supervisor (single-threaded).
pub struct WorldState {
    pub plan: Plan,
    pub profile: Profile,
    pub recorder: Recorder,
    pub shared: Rc<dyn Any>,
    pub db_path: PathBuf,
    pub(crate) table: BTreeMap<(u32, FaultPoint, u32), Action>,
    /// A derived plan's decisions, drawn as the run reaches them (instead of `table`).
    pub(crate) lazy: Option<crate::plan::LazyDecisions>,
    /// How often each node reached each point: `node * FaultPoint::ALL.len() + point.index()`.
    pub(crate) occurrences: RefCell<Vec<u32>>,
    /// Count occurrences even for a plan without decisions (`explore` needs the reached
    /// (node, point, occurrence) triples of every run).
    pub(crate) count_always: bool,
    /// Per slot as `occurrences`: the last occurrence reached while faults were on (the
    /// occurrences a decision could fire at).
    pub(crate) armed: RefCell<Vec<u32>>,
    /// Per slot: the occurrences reached when the last decision fired (the reached triples
    /// after it are those past these counts).
    pub(crate) at_last_fire: RefCell<Vec<u32>>,
    /// Per slot as `occurrences`: how many of the occurrences reached while faults were on
    /// came with the caller acting under a lease (where a process pause can leave a holder
    /// superseded).
    pub(crate) leased: RefCell<Vec<u32>>,
    pub(crate) observer: RefCell<Option<Connection>>,
    /// The contending writer ([`Action::Contend`]): a connection of its own, opened at the
    /// first contention, and the hold it has open, if any.
    pub(crate) contender: RefCell<Option<Connection>>,
    pub(crate) contention: RefCell<Option<Contention>>,
    /// Numbers the contentions of a run.
    pub(crate) contentions: Cell<u64>,
    /// Per node: the next-write contention armed at an engine moment
    /// ([`Action::ContendNextWrite`]), as (incarnation, run): it acts at that process's next
    /// moment before a write of that run begins.
    pub(crate) contend_next: RefCell<BTreeMap<u32, (u32, String)>>,
    pub faults_on: Cell<bool>,
    /// Set once the run has made [`CALL_BUDGET`] store calls: every later call hangs, and
    /// the run ends (see `drive`).
    pub exhausted: Cell<bool>,
    /// The read items this run may record ([`READ_BUDGET`] unless a test asks for less).
    pub read_budget: usize,
    pub(crate) exhausted_tx: RefCell<Option<futures::channel::oneshot::Sender<()>>>,
    pub(crate) exhausted_rx: RefCell<Option<futures::channel::oneshot::Receiver<()>>>,
    pub incarnations: RefCell<Vec<u32>>,
    pub alive: RefCell<Vec<bool>>,
    pub node_ids: RefCell<Vec<madsim::task::NodeId>>,
    pub(crate) wake_tx: RefCell<Option<mpsc::UnboundedSender<Wake>>>,
    pub(crate) wake_rx: RefCell<Option<mpsc::UnboundedReceiver<Wake>>>,
    /// The processes paused until a takeover that have not been resumed yet, in the order
    /// they paused: each is resumed the instant its condition holds (see
    /// [`WorldState::takeover_writes_applied`]), not at the supervisor's next poll.
    pub(crate) takeovers: RefCell<Vec<PendingTakeover>>,
    /// Numbers the pauses of a run, so a supervisor's poll knows its own pause was resumed.
    pub(crate) pause_count: Cell<u64>,
    /// Per node, an interrupt armed by the scenario ([`WorldState::arm_interrupt`]): delivered
    /// at the node's next leased write point, which then stalls so the interrupt lands while
    /// the write is in flight.
    pub(crate) interrupts: RefCell<BTreeMap<u32, ArmedInterrupt>>,
}

/// An interrupt waiting for its node's next leased write point.
pub(crate) struct ArmedInterrupt {
    pub actor: Rc<str>,
    pub incarnation: u32,
    /// Matching points still to pass before the one it is delivered at.
    pub skip: u32,
    pub stall_ms: u64,
    pub tx: futures::channel::oneshot::Sender<()>,
}

/// The contending writer's open `BEGIN IMMEDIATE`: which node's call it contends, and its
/// number (so the timer that ends it does not end a later one).
#[derive(Debug)]
pub(crate) struct Contention {
    pub hold: u64,
    pub node: u32,
    pub call: Option<usize>,
}

/// A process paused until a takeover, waiting for the successor's writes.
#[derive(Clone, Debug)]
pub(crate) struct PendingTakeover {
    pub pause: u64,
    pub node: u32,
    pub incarnation: u32,
    pub run_id: String,
    pub epoch: u64,
    pub writes: u32,
    pub op: Option<OpKind>,
}

/// When the supervisor resumes a paused process.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Resume {
    /// After this long.
    After { ms: u64 },
    /// Once the successor made `writes` writes ([`crate::history::Recorder::successor_writes`]:
    /// the run's first grant past `epoch`, then other processes' mutations of it): at the
    /// instant the last of them commits (the committing task waits, so the paused process's
    /// next step lands right after that write, inside the successor's tenure); or once the
    /// store looks held by the paused process itself (a whole ttl with nothing committed
    /// anywhere and callers meeting Busy: it paused inside a write transaction, so no
    /// successor can acquire), checked every tenth of `ttl_ms`; or after
    /// [`TAKEOVER_WAIT_TTLS`] ttls.
    /// With `op`, only the successor's writes of that operation count (see
    /// [`crate::plan::Action::PauseUntilTakeover`]'s `same_op`).
    AfterTakeover { run_id: String, epoch: u64, writes: u32, op: Option<OpKind>, ttl_ms: u64 },
}

/// What a node asks of the supervisor.
pub enum Wake {
    /// The node crashed: restart it this much later.
    Restart { node: u32, after_ms: u64 },
    /// The node paused itself in this incarnation (its `pause` number): resume it as `when`
    /// says.
    Resume { node: u32, incarnation: u32, pause: u64, when: Resume },
    /// A contending writer took the write lock: roll it back after `ms` if it still holds.
    EndContention { hold: u64, ms: u64 },
}

impl WorldState {
    /// The run's shared state as the scenario built it. A scenario that asks for another
    /// type than its `shared` built is broken: this panics with the scenario's name rather
    /// than let the run pass with nothing judged.
    pub fn shared_as<T: Any>(&self) -> Rc<T> {
        downcast_shared(&self.shared, &self.plan.scenario)
    }

    /// The plan's action for the node's next occurrence of `point`, if any; `under_lease`:
    /// the caller reached it acting under a lease.
    pub fn decide(&self, node: u32, point: FaultPoint, under_lease: bool) -> Option<Action> {
        // A plan without decisions (a faultless run) never fires: skip the counting, unless
        // the caller asked for the reached occurrences.
        if !self.count_always && self.table.is_empty() && self.lazy.as_ref().is_none_or(|l| l.is_empty()) {
            return None;
        }
        let mut occ = self.occurrences.borrow_mut();
        let slot = node as usize * FaultPoint::ALL.len() + point.index();
        if occ.len() <= slot {
            occ.resize(slot + 1, 0);
        }
        occ[slot] += 1;
        let n = occ[slot];
        drop(occ);
        if !self.faults_on.get() {
            return None;
        }
        if let Some(a) = self.armed.borrow_mut().get_mut(slot) {
            *a = n;
        }
        if under_lease {
            if let Some(l) = self.leased.borrow_mut().get_mut(slot) {
                *l += 1;
            }
        }
        let action = match &self.lazy {
            Some(lazy) => lazy.decide(node, point, n),
            None => self.table.get(&(node, point, n)).copied(),
        };
        if action.is_some() && self.count_always {
            self.at_last_fire.borrow_mut().clone_from(&self.occurrences.borrow());
        }
        action
    }

    /// Arms an interrupt for `node`'s current incarnation: the returned receiver completes at
    /// a leased write point that `actor` (one of the node's identities, see
    /// [`crate::history::under_actor`]) reaches (the moment before a leased write begins, or
    /// right after it commits): the first such point past `skip` of them. That write then stalls `stall_ms`, so what the interrupt
    /// triggers (a worker's graceful stop) lands while the write is in flight: a stop
    /// delivered at a named point, as a crash is. Arming again replaces the earlier arm; an
    /// arm whose receiver was dropped is discarded unfired.
    pub fn arm_interrupt(
        &self,
        node: u32,
        actor: &str,
        skip: u32,
        stall_ms: u64,
    ) -> futures::channel::oneshot::Receiver<()> {
        let (tx, rx) = futures::channel::oneshot::channel();
        let incarnation = self.incarnations.borrow().get(node as usize).copied().unwrap_or(0);
        self.interrupts
            .borrow_mut()
            .insert(node, ArmedInterrupt { actor: Rc::from(actor), incarnation, skip, stall_ms, tx });
        rx
    }

    /// Delivers `node`'s armed interrupt if the identity acting now is the one it was armed
    /// for: returns the stall to take at the point, or `None` when nothing is armed for it
    /// (a stale arm, whose receiver is gone or which an earlier incarnation armed, is
    /// discarded).
    pub(crate) fn deliver_interrupt(&self, node: u32) -> Option<u64> {
        let actor = crate::history::current_actor()?;
        let mut arms = self.interrupts.borrow_mut();
        let incarnation = self.incarnations.borrow().get(node as usize).copied().unwrap_or(0);
        let stale = arms.get(&node).is_some_and(|a| a.incarnation != incarnation || a.tx.is_canceled());
        if stale {
            arms.remove(&node);
            return None;
        }
        let arm = arms.get_mut(&node)?;
        if arm.actor != actor {
            return None;
        }
        if arm.skip > 0 {
            arm.skip -= 1;
            return None;
        }
        let arm = arms.remove(&node)?;
        arm.tx.send(()).ok().map(|()| arm.stall_ms)
    }

    /// Whether the run is over its call budget; the first time, record why and wake `drive`.
    pub fn over_budget(&self) -> bool {
        if self.exhausted.get() {
            return true;
        }
        let (calls, reads) = {
            let h = self.recorder.inner.borrow();
            (h.calls.len(), h.read_items)
        };
        if calls < CALL_BUDGET && reads < self.read_budget {
            return false;
        }
        self.exhausted.set(true);
        let at = now_ns() as f64 / 1e9;
        self.recorder.inner.borrow_mut().exhausted = Some(if calls >= CALL_BUDGET {
            format!(
                "the run made {calls} store calls by t={at:.3}s without reaching its end (virtual time stalled or the workload livelocked)"
            )
        } else {
            format!(
                "the run's reads returned {reads} items (journal entries, metas, refs, blob KiB) by t={at:.3}s without reaching its end, over the {} a run may record (a store or workload that re-reads what it keeps growing)",
                self.read_budget
            )
        });
        if let Some(tx) = self.exhausted_tx.borrow_mut().take() {
            let _ = tx.send(());
        }
        true
    }

    /// The run's lease row right now, read through the observer connection.
    pub fn observe_lease(&self, run_id: &str) -> Option<LeaseRow> {
        let obs = self.observer.borrow();
        let conn = obs.as_ref()?;
        conn.prepare_cached("SELECT owner, epoch, expires_at FROM leases WHERE run_id = ?1")
            .and_then(|mut s| {
                s.query_row([run_id], |r| {
                    Ok(LeaseRow {
                        owner: r.get(0)?,
                        epoch: r.get::<_, i64>(1)? as u64,
                        expires_at: r.get(2)?,
                    })
                })
                .optional()
            })
            .ok()
            .flatten()
    }

    /// The store's epoch high-water mark for the run (the last epoch it granted, kept across
    /// releases), read through the observer connection; `None` when it has none.
    pub fn observe_epoch_mark(&self, run_id: &str) -> Option<u64> {
        let obs = self.observer.borrow();
        let conn = obs.as_ref()?;
        conn.prepare_cached("SELECT epoch FROM epochs WHERE run_id = ?1")
            .and_then(|mut s| s.query_row([run_id], |r| r.get::<_, i64>(0)).optional())
            .ok()
            .flatten()
            .map(|e| e as u64)
    }

    /// Every meta row's (run id, status) right now, through the observer connection
    /// (empty when the schema is not up yet).
    pub fn observe_statuses(&self) -> Vec<(String, String)> {
        let obs = self.observer.borrow();
        let Some(conn) = obs.as_ref() else { return Vec::new() };
        let rows =
            conn.prepare_cached("SELECT run_id, payload FROM meta ORDER BY run_id").and_then(|mut s| {
                s.query_map([], |r| Ok((r.get::<_, String>(0)?, r.get::<_, String>(1)?)))?
                    .collect::<rusqlite::Result<Vec<_>>>()
            });
        rows.unwrap_or_default()
            .into_iter()
            .map(|(run, payload)| {
                let status = store::RunMeta::from_json(&payload)
                    .map_or("unreadable".to_string(), |m| m.status.to_string());
                (run, status)
            })
            .collect()
    }

    /// Wait (bounded, 20 s of virtual time) until every live node has reported done in
    /// `done` (indexed by node): the end of a storm lets tenures finish instead of cutting them.
    pub async fn wait_for_nodes(&self, done: &RefCell<Vec<bool>>) {
        for _ in 0..2000 {
            let finished = {
                let alive = self.alive.borrow();
                let done = done.borrow();
                alive.iter().zip(done.iter()).all(|(a, d)| !a || *d)
            };
            if finished {
                break;
            }
            madsim::time::sleep(Duration::from_millis(10)).await;
        }
    }

    /// Restart every dead node now (the heal).
    pub fn restart_all(&self) {
        let n = self.alive.borrow().len() as u32;
        for i in 0..n {
            self.restart(i);
        }
    }

    /// The calling node dies here; the supervisor restarts it later.
    pub fn crash_self(&self, node: u32, restart_after_ms: u64) {
        self.alive.borrow_mut()[node as usize] = false;
        let id = self.node_ids.borrow()[node as usize];
        self.lifecycle(node, "CRASH", format!("restart in {restart_after_ms}ms"));
        if let Some(tx) = self.wake_tx.borrow().as_ref() {
            let _ = tx.unbounded_send(Wake::Restart { node, after_ms: restart_after_ms });
        }
        madsim::runtime::Handle::current().kill(id);
    }

    /// A node lifecycle line of the timeline (`CRASH`, `RESTART`, `PAUSE`, `CONTINUE`).
    fn lifecycle(&self, node: u32, op: &str, outcome: String) {
        self.recorder.event(Event {
            at_ns: now_ns(),
            node: Some(node),
            epoch: None,
            op: op.to_string(),
            outcome,
            fault: String::new(),
            call: None,
        });
    }

    /// Pause every task of `node` (the caller is one of them and parks at its next await);
    /// the supervisor resumes it as `when` says. Once the run is ending (no supervisor to
    /// ask) the pause is skipped.
    pub fn pause_self(&self, node: u32, when: Resume) {
        let Some(tx) = self.wake_tx.borrow().as_ref().cloned() else { return };
        let incarnation = self.incarnations.borrow()[node as usize];
        self.lifecycle(
            node,
            "PAUSE",
            match &when {
                Resume::After { ms } => format!("resume in {ms}ms"),
                Resume::AfterTakeover { run_id, epoch, writes, op, .. } => format!(
                    "resume once {writes} {}write(s) of {run_id} applied past epoch {epoch}",
                    op.map(|o| format!("{} ", o.as_str())).unwrap_or_default()
                ),
            },
        );
        let pause = self.pause_count.get() + 1;
        self.pause_count.set(pause);
        if let Resume::AfterTakeover { run_id, epoch, writes, op, .. } = &when {
            self.takeovers.borrow_mut().push(PendingTakeover {
                pause,
                node,
                incarnation,
                run_id: run_id.clone(),
                epoch: *epoch,
                writes: *writes,
                op: *op,
            });
        }
        if tx.unbounded_send(Wake::Resume { node, incarnation, pause, when }).is_ok() {
            let id = self.node_ids.borrow()[node as usize];
            madsim::runtime::Handle::current().pause(id);
        } else {
            self.takeovers.borrow_mut().retain(|t| t.pause != pause);
        }
    }

    /// A mutation of `run_id` was just applied (called at its after-commit point): resume
    /// every process paused until a takeover of that run whose successor writes are now
    /// all applied. Returns whether one was resumed (the caller then waits, so the resumed
    /// process runs before the committing task goes on).
    pub fn takeover_writes_applied(&self, run_id: &str) -> bool {
        let due: Vec<PendingTakeover> = {
            let pending = self.takeovers.borrow();
            if pending.is_empty() {
                return false;
            }
            pending
                .iter()
                .filter(|t| {
                    t.run_id == run_id
                        && self.recorder.successor_writes(&t.run_id, t.epoch, t.node, t.op)
                            >= t.writes as usize
                })
                .cloned()
                .collect()
        };
        for t in &due {
            self.takeovers.borrow_mut().retain(|p| p.pause != t.pause);
            self.resume(t.node, t.incarnation);
        }
        !due.is_empty()
    }

    /// Whether pause number `pause` still waits for its takeover (it was not resumed by
    /// [`WorldState::takeover_writes_applied`]); `false` once it is taken off the list.
    fn take_pending(&self, pause: u64) -> bool {
        let mut pending = self.takeovers.borrow_mut();
        let before = pending.len();
        pending.retain(|t| t.pause != pause);
        pending.len() != before
    }

    /// Whether pause number `pause` still waits for its takeover.
    fn is_pending(&self, pause: u64) -> bool {
        self.takeovers.borrow().iter().any(|t| t.pause == pause)
    }

    /// Resume a node paused in `incarnation` (a node killed and restarted since is not).
    fn resume(&self, node: u32, incarnation: u32) {
        if !self.alive.borrow()[node as usize] || self.incarnations.borrow()[node as usize] != incarnation {
            return;
        }
        self.lifecycle(node, "CONTINUE", String::new());
        let id = self.node_ids.borrow()[node as usize];
        madsim::runtime::Handle::current().resume(id);
    }

    /// Restart requests from crashed nodes and resume requests from paused ones; the
    /// supervisor drives them with [`WorldState::wake_loop`].
    /// Holds the world only weakly, so a run's state is freed with the run even when the
    /// runtime keeps a pending timer.
    pub async fn wake_loop(self: Rc<WorldState>) {
        let Some(mut rx) = self.wake_rx.borrow_mut().take() else { return };
        let weak = Rc::downgrade(&self);
        drop(self);
        while let Some(wake) = rx.next().await {
            let w = weak.clone();
            match wake {
                Wake::Restart { node, after_ms } => madsim::task::spawn_local(async move {
                    madsim::time::sleep(Duration::from_millis(after_ms)).await;
                    if let Some(w) = w.upgrade() {
                        w.restart(node);
                    }
                }),
                Wake::EndContention { hold, ms } => madsim::task::spawn_local(async move {
                    madsim::time::sleep(Duration::from_millis(ms)).await;
                    if let Some(w) = w.upgrade() {
                        w.end_contention(|c| c.hold == hold);
                    }
                }),
                Wake::Resume { node, incarnation, pause, when } => madsim::task::spawn_local(async move {
                    match when {
                        Resume::After { ms } => madsim::time::sleep(Duration::from_millis(ms)).await,
                        Resume::AfterTakeover { ttl_ms, .. } => {
                            // The successor's writes resume the process as they commit
                            // (`takeover_writes_applied`); this loop keeps the two bounds.
                            let step = (ttl_ms / 10).max(1);
                            let paused_at = now_ns();
                            for _ in 0..TAKEOVER_WAIT_TTLS * ttl_ms / step {
                                madsim::time::sleep(Duration::from_millis(step)).await;
                                let Some(w) = w.upgrade() else { return };
                                if !w.is_pending(pause) {
                                    return;
                                }
                                // Paused holding the write lock, the takeover cannot come:
                                // a whole ttl with nothing committed and callers meeting Busy.
                                let ttl_ago = now_ns().saturating_sub(ttl_ms * 1_000_000);
                                if ttl_ago >= paused_at && w.recorder.store_held_since(ttl_ago) {
                                    break;
                                }
                            }
                            let Some(w) = w.upgrade() else { return };
                            if !w.take_pending(pause) {
                                return;
                            }
                        }
                    }
                    if let Some(w) = w.upgrade() {
                        w.resume(node, incarnation);
                    }
                }),
            };
        }
    }

    /// A contending writer takes the database's write lock for `node`'s `call`
    /// ([`Action::Contend`]): `BEGIN IMMEDIATE` on the contender's own connection, ended by
    /// [`WorldState::end_contention`] at the node's next point outside that call, or after
    /// [`crate::plan::CONTENTION_MS`]. When another process already holds the lock (stalled
    /// inside its own transaction), the call meets that writer's lock instead, and there is
    /// no hold to end.
    pub fn contend(&self, node: u32, call: Option<usize>) {
        self.end_contention(|_| true);
        let mut slot = self.contender.borrow_mut();
        if slot.is_none() {
            *slot = harness_connection(&self.db_path).ok();
        }
        let Some(conn) = slot.as_ref() else { return };
        if conn.execute_batch("BEGIN IMMEDIATE").is_err() {
            return;
        }
        let hold = self.contentions.get() + 1;
        self.contentions.set(hold);
        *self.contention.borrow_mut() = Some(Contention { hold, node, call });
        if let Some(tx) = self.wake_tx.borrow().as_ref() {
            let _ = tx.unbounded_send(Wake::EndContention { hold, ms: crate::plan::CONTENTION_MS });
        }
    }

    /// Rolls the contending writer back if its hold matches `which` (it wrote nothing).
    pub(crate) fn end_contention(&self, which: impl FnOnce(&Contention) -> bool) {
        let mut c = self.contention.borrow_mut();
        if c.as_ref().is_some_and(which) {
            *c = None;
            if let Some(conn) = self.contender.borrow().as_ref() {
                let _ = conn.execute_batch("ROLLBACK");
            }
        }
    }

    /// Restart a node now (its init re-runs with the next incarnation).
    pub fn restart(&self, node: u32) {
        if self.alive.borrow()[node as usize] {
            return;
        }
        self.incarnations.borrow_mut()[node as usize] += 1;
        self.alive.borrow_mut()[node as usize] = true;
        self.lifecycle(node, "RESTART", format!("incarnation {}", self.incarnations.borrow()[node as usize]));
        let id = self.node_ids.borrow()[node as usize];
        madsim::runtime::Handle::current().restart(id);
    }

    /// Kill every node (end of run). Await at least 1ms afterwards: drops are lazy.
    pub fn kill_all(&self) {
        let ids = self.node_ids.borrow().clone();
        for (i, id) in ids.into_iter().enumerate() {
            self.alive.borrow_mut()[i] = false;
            madsim::runtime::Handle::current().kill(id);
        }
    }
}

/// A connection of the harness itself (the observer, the contending writer) to the run's
/// database file: fail-fast on a held lock, like the nodes' own. The file is removed after
/// the run: when such a connection closes last, it skips the checkpoint SQLite would
/// otherwise copy the whole WAL back for.
pub(crate) fn harness_connection(path: &std::path::Path) -> rusqlite::Result<Connection> {
    let flags = rusqlite::OpenFlags::SQLITE_OPEN_READ_WRITE
        | rusqlite::OpenFlags::SQLITE_OPEN_CREATE
        | rusqlite::OpenFlags::SQLITE_OPEN_NO_MUTEX;
    let conn = Connection::open_with_flags(path, flags)?;
    conn.busy_timeout(Duration::ZERO)?;
    conn.set_db_config(rusqlite::config::DbConfig::SQLITE_DBCONFIG_NO_CKPT_ON_CLOSE, true)?;
    Ok(conn)
}

/// `shared` as a `T`, or a panic naming the scenario whose shared state it is not.
fn downcast_shared<T: Any>(shared: &Rc<dyn Any>, scenario: &str) -> Rc<T> {
    match shared.clone().downcast::<T>() {
        Ok(shared) => shared,
        Err(_) => panic!(
            "scenario {scenario}: its shared state is not a {} (the scenario's `shared` built another type)",
            std::any::type_name::<T>()
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shared_state_of_the_right_type_is_returned() {
        let shared: Rc<dyn Any> = Rc::new(7u32);
        assert_eq!(*downcast_shared::<u32>(&shared, "s"), 7);
    }

    #[test]
    #[should_panic(expected = "scenario queue: its shared state is not a")]
    fn shared_state_of_another_type_names_the_scenario() {
        let shared: Rc<dyn Any> = Rc::new(7u32);
        downcast_shared::<String>(&shared, "queue");
    }
}
