//! The queue worker (rulvar's `createWorker` sweep, docs/engine-model.md 5.2-5.4): finds
//! resumable runs, drives each under its own lease, and applies retention to terminal ones.
//!
//! Promises: the worker acquires before it loads, and re-reads the run's meta under the lease
//! (a run deleted since the listing is refused, never booted again); a held lease is skipped (never raced); a
//! suspended run whose journal length and genesis are unchanged since this worker parked it
//! is released and skipped, and a run is parked only at the length its segment left the
//! journal (a resolution that landed after the settle, its lease lost, is new work; rulvar's
//! worker records the length it loads after the drive, and skips such a run forever); while a drive runs, the worker renews every `max(1, ttl/3)` ms
//! and cancels the segment on the first renew failure; the lease is released quietly after.
//! Retention acquires a brief lease and deletes the run with its blobs; the lease is passed
//! to the deletes only under `EngineThreading::All` (rulvar <= v1.44.1 acquired but did not
//! pass it). A drive refused because a deletion cascade marked the run's generation
//! (`delete_marks_generation`) finishes that deletion under the drive's lease instead. Drives
//! run one at a time (rulvar's default concurrency of 1).
//!
//! Stopping (rulvar's `stop()`, docs/engine-model.md 5.2 step 6): [`Worker::stop`] cancels
//! the drive in progress, which settles `cancelled` under the worker's still-live lease and
//! releases it; the sweep takes no further run and returns. A stopped worker stays stopped.

use std::cell::{Cell, RefCell};
use std::collections::BTreeMap;
use std::rc::Rc;
use std::task::{Poll, Waker};
use std::time::Duration;

use super::{fault_at, release_quietly, Effects, Engine, EngineError, Outcome, Workflow};
use crate::error::StoreError;
use crate::fault::FaultPoint;
use crate::spi::{JournalStore, LeasableStore, MetaLookup, TranscriptStore};
use crate::types::{Lease, RunFilter, RunMeta, RunStatus};

/// The retention predicate: `true` deletes a terminal run.
pub type Retention = fn(&RunMeta) -> bool;

/// What one sweep did, per run id (in list order).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct SweepReport {
    /// Runs driven, with the settled outcome.
    pub driven: Vec<(String, Outcome)>,
    /// Runs whose acquire found a live lease.
    pub skipped_held: Vec<String>,
    /// Suspended runs with nothing new since this worker parked them.
    pub skipped_parked: Vec<String>,
    /// Runs listed live whose meta, read again under the lease, had settled terminal since
    /// the listing (under `drive_rechecks`: never resumed).
    pub skipped_settled: Vec<String>,
    /// Terminal runs deleted by retention, and runs whose drive found their generation
    /// marked by a cut deletion cascade (`delete_marks_generation`), deleted by this worker.
    pub deleted: Vec<String>,
    /// Runs whose drive or retention failed, with the error (reported, not fatal).
    pub errors: Vec<(String, EngineError)>,
}

/// The worker.
pub struct Worker<J, T, W> {
    engine: Rc<Engine<J, T, W>>,
    owner: String,
    registry: BTreeMap<String, Workflow>,
    retention: Option<Retention>,
    /// rulvar's `suspendedAt`: run -> (journal length, genesis) when this worker parked it.
    parked: RefCell<BTreeMap<String, (usize, Option<String>)>>,
    stop: StopSignal,
}

/// Set once by [`Worker::stop`]; wakes every drive waiting on it.
#[derive(Default)]
struct StopSignal {
    stopped: Cell<bool>,
    wakers: RefCell<Vec<Waker>>,
}

impl StopSignal {
    fn set(&self) {
        self.stopped.set(true);
        for w in self.wakers.take() {
            w.wake();
        }
    }

    /// Resolves once the signal is set.
    async fn wait(&self) {
        futures::future::poll_fn(|cx| {
            if self.stopped.get() {
                return Poll::Ready(());
            }
            let mut wakers = self.wakers.borrow_mut();
            if !wakers.iter().any(|w| w.will_wake(cx.waker())) {
                wakers.push(cx.waker().clone());
            }
            Poll::Pending
        })
        .await
    }
}

impl<J, T, W> Worker<J, T, W>
where
    J: JournalStore + LeasableStore + MetaLookup,
    T: TranscriptStore,
    W: Effects,
{
    /// `registry` maps `meta.workflow_name` to the workflow to resume with.
    pub fn new(
        engine: Rc<Engine<J, T, W>>,
        owner: impl Into<String>,
        registry: BTreeMap<String, Workflow>,
        retention: Option<Retention>,
    ) -> Self {
        Worker {
            engine,
            owner: owner.into(),
            registry,
            retention,
            parked: RefCell::new(BTreeMap::new()),
            stop: StopSignal::default(),
        }
    }

    /// Stop: the drive in progress (if any) is cancelled and settles `cancelled` under the
    /// worker's lease, then the lease is released; the sweep in progress takes no further run
    /// and returns; a later sweep does nothing. Await the sweep to await the settle.
    pub fn stop(&self) {
        self.stop.set();
    }

    /// Whether [`Worker::stop`] was called.
    pub fn stopped(&self) -> bool {
        self.stop.stopped.get()
    }

    pub fn engine(&self) -> &Rc<Engine<J, T, W>> {
        &self.engine
    }
    pub fn owner(&self) -> &str {
        &self.owner
    }

    /// One sweep. Only a crash is an error; everything else lands in the report.
    pub async fn sweep(&self) -> Result<SweepReport, EngineError> {
        if self.stopped() {
            return Ok(SweepReport::default());
        }
        let journal = &self.engine.journal;
        let filter = if self.retention.is_some() { RunFilter::default() } else { RunFilter::resumable() };
        let metas = journal.list_runs(&filter).await.map_err(EngineError::store)?;
        {
            let live: Vec<&str> =
                metas.iter().filter(|m| !m.status.is_terminal()).map(|m| m.run_id.as_str()).collect();
            self.parked.borrow_mut().retain(|run, _| live.contains(&run.as_str()));
        }
        let mut report = SweepReport::default();
        for meta in metas {
            if self.stopped() {
                break;
            }
            let run_id = meta.run_id.clone();
            if meta.status.is_terminal() {
                if self.retention.is_some_and(|keep_not| keep_not(&meta)) {
                    match self.apply_retention(&run_id).await {
                        Ok(true) => report.deleted.push(run_id),
                        Ok(false) => report.skipped_held.push(run_id),
                        Err(e @ EngineError::Crashed { .. }) => return Err(e),
                        Err(e) => report.errors.push((run_id, e)),
                    }
                }
                continue;
            }
            let Some(wf) = meta.workflow_name.as_ref().and_then(|n| self.registry.get(n)) else {
                report.errors.push((
                    run_id,
                    EngineError::Config(format!("no workflow registered as {:?}", meta.workflow_name)),
                ));
                continue;
            };
            let lease = match journal.acquire(&run_id, &self.owner).await {
                Ok(l) => l,
                Err(StoreError::LeaseHeld { .. }) => {
                    report.skipped_held.push(run_id);
                    continue;
                }
                Err(e) => {
                    let e = EngineError::store(e);
                    if matches!(e, EngineError::Crashed { .. }) {
                        return Err(e);
                    }
                    report.errors.push((run_id, e));
                    continue;
                }
            };
            fault_at(&self.engine.env, FaultPoint::WorkerSweepAfterAcquire, &run_id, Some(&lease)).await?;
            // Under the lease: the journal, and the run's meta as it reads now. rulvar's drive
            // resolves the workflow through that meta: a run deleted since the listing
            // (retention elsewhere) has none, and is refused instead of being booted again
            // from its first op.
            let read = async {
                Ok::<_, StoreError>((journal.load(&run_id).await?, journal.get_meta(&run_id).await?))
            };
            let entries = match read.await {
                Ok((_, Some(now))) if now.status.is_terminal() && self.engine.profile.drive_rechecks => {
                    // Settled since the listing (a holder cancelled or finished it): a terminal
                    // meta is never resumed (docs/engine-model.md 5.2 step 3). rulvar decides
                    // from the listing, so a stale listing resumes a cancelled run and undoes
                    // the cancel (fencesim's `current` re-checks; see P).
                    release_quietly(journal, &lease).await?;
                    report.skipped_settled.push(run_id);
                    continue;
                }
                Ok((entries, Some(_))) => entries,
                Ok((_, None)) => {
                    release_quietly(journal, &lease).await?;
                    report.errors.push((
                        run_id.clone(),
                        EngineError::Config(format!("run {run_id} was deleted since the listing")),
                    ));
                    continue;
                }
                Err(e) => {
                    let e = EngineError::store(e);
                    if matches!(e, EngineError::Crashed { .. }) {
                        return Err(e);
                    }
                    release_quietly(journal, &lease).await?;
                    report.errors.push((run_id, e));
                    continue;
                }
            };
            if meta.status == RunStatus::Suspended
                && self.parked.borrow().get(&run_id) == Some(&(entries.len(), meta.genesis.clone()))
            {
                fault_at(&self.engine.env, FaultPoint::WorkerSweepSkipParked, &run_id, Some(&lease)).await?;
                release_quietly(journal, &lease).await?;
                report.skipped_parked.push(run_id);
                continue;
            }
            let result = self.drive(&run_id, wf, &lease).await;
            match result {
                Err(e @ EngineError::Crashed { .. }) => return Err(e),
                Ok(outcome) => {
                    if outcome.status == RunStatus::Suspended {
                        // Parked only if nothing landed since the segment left the journal:
                        // a resolution appended after its settle (its lease lost, the
                        // resolver's acquired) is new work, not something this worker saw.
                        let len = journal.load(&run_id).await.map_err(EngineError::store);
                        match len {
                            Ok(entries) if entries.len() == outcome.journal_len => {
                                self.parked
                                    .borrow_mut()
                                    .insert(run_id.clone(), (entries.len(), meta.genesis.clone()));
                            }
                            Ok(_) => {
                                self.parked.borrow_mut().remove(&run_id);
                            }
                            Err(e @ EngineError::Crashed { .. }) => return Err(e),
                            Err(_) => {}
                        }
                    } else {
                        self.parked.borrow_mut().remove(&run_id);
                    }
                    report.driven.push((run_id, outcome));
                }
                Err(EngineError::BeingDeleted { .. }) => {
                    // A deletion cascade began on this generation and was cut: the run is
                    // resumed by nobody, so the holder finishes the deletion it was marked
                    // for (under this drive's lease), or it would stay unsettled forever.
                    let passed = self.engine.threaded(Some(&lease));
                    let finished = self
                        .engine
                        .delete_cascade(&run_id, passed, None, FaultPoint::WorkerRetentionAfterBlobs)
                        .await;
                    match finished {
                        Err(e @ EngineError::Crashed { .. }) => return Err(e),
                        Ok(()) => {
                            self.parked.borrow_mut().remove(&run_id);
                            report.deleted.push(run_id);
                        }
                        Err(e) => report.errors.push((run_id, e)),
                    }
                }
                Err(e) => report.errors.push((run_id, e)),
            }
            release_quietly(journal, &lease).await?;
        }
        Ok(report)
    }

    /// `engine.resume(lease)` while this worker renews; a renew failure, or a stop, cancels
    /// the segment.
    async fn drive(&self, run_id: &str, wf: &Workflow, lease: &Lease) -> Result<Outcome, EngineError> {
        let engine = &self.engine;
        let every = Duration::from_millis(engine.renew_every_ms());
        let renew = async move {
            loop {
                engine.env.sleep(every).await;
                fault_at(&engine.env, FaultPoint::WorkerDriveBeforeRenew, run_id, Some(lease)).await?;
                match engine.journal.renew(lease).await {
                    Ok(()) => {}
                    Err(StoreError::Crashed { point }) => return Err(EngineError::Crashed { point }),
                    Err(_) => return Ok(()),
                }
                super::segment::YieldNow(false).await;
            }
        };
        let watch = async move {
            match futures::future::select(Box::pin(renew), Box::pin(self.stop.wait())).await {
                futures::future::Either::Left((renewed, _)) => renewed,
                futures::future::Either::Right(((), _)) => Ok(()),
            }
        };
        engine.resume_watched(run_id, wf, lease.clone(), Box::pin(watch)).await
    }

    /// Retention: brief lease (skip if held: `Ok(false)`), under `retention_rechecks` re-read
    /// the meta and skip a run no longer terminal, delete the run with its blobs, release
    /// quietly (the delete removed the lease row, so the release normally fails).
    async fn apply_retention(&self, run_id: &str) -> Result<bool, EngineError> {
        let engine = &self.engine;
        let lease = match engine.journal.acquire(run_id, &self.owner).await {
            Ok(l) => l,
            Err(StoreError::LeaseHeld { .. }) => return Ok(false),
            Err(e) => return Err(EngineError::store(e)),
        };
        fault_at(&engine.env, FaultPoint::WorkerRetentionAfterAcquire, run_id, Some(&lease)).await?;
        if engine.profile.retention_rechecks {
            // The sweep decided from its listing; a host may have resumed the run since (its
            // lease lapsed with the meta still `running`). Delete only a run still terminal.
            match engine.journal.get_meta(run_id).await {
                Ok(Some(m))
                    if m.status.is_terminal() && self.retention.is_some_and(|keep_not| keep_not(&m)) => {}
                Ok(_) => {
                    release_quietly(&engine.journal, &lease).await?;
                    return Ok(false);
                }
                Err(e) => {
                    let e = EngineError::store(e);
                    if !e.is_crash() {
                        release_quietly(&engine.journal, &lease).await?;
                    }
                    return Err(e);
                }
            }
        }
        let passed = engine.threaded(Some(&lease));
        let result = engine.delete_cascade(run_id, passed, None, FaultPoint::WorkerRetentionAfterBlobs).await;
        if matches!(result, Err(EngineError::Crashed { .. })) {
            return result.map(|()| true);
        }
        release_quietly(&engine.journal, &lease).await?;
        result.map(|()| true)
    }
}
