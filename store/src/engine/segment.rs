//! One segment: boot, execute (replay, dispatch, checkpoints, suspension), drain, settle,
//! release. This is docs/engine-model.md M3.
//!
//! Promises, in order: (1) a resume reads meta and loads the journal before it acquires, and
//! under `delete_marks_generation` refuses a generation a deletion cascade recorded;
//! (2) an engine-owned lease is acquired before any write (a refusal means zero writes and
//! zero paid calls) and renewed every `max(1, ttl/3)` ms concurrently with the body; any
//! renew failure cancels the body and the segment settles `cancelled`; (3) the boot
//! `put_meta(running, segments = k+1)` precedes every paid call, and its refusal fails the
//! segment with zero paid calls; (4) dispatches are two-phase (`running`, paid work,
//! terminal with `ref`, a billing receipt after each paid call whose refusal is swallowed
//! but latched), completed pairs replay for free, a dangling `running` entry
//! redispatches under its own seq from its checkpoint, a non-replayable terminal reruns
//! under a new seq (`limit` replays once the loaded journal's last settle is `ok`); (5) the
//! settle follows the write-on-change rule and the profile's failure policy; (6) a crash
//! stops everything at once; (7) a cancel lets a journal append in flight finish and be
//! recorded, and nothing after it runs; (8) with a price per paid call, no paid call is made
//! once the run's spend (its journal's receipts, then this segment's calls) reached its
//! recorded budget, and such a run settles `exhausted` (see `Engine::with_paid_call_cents`).

use std::cell::{Cell, RefCell};
use std::collections::BTreeSet;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use futures::future::{select, Either};
use serde::{Deserialize, Serialize};
use serde_json::{json, Map, Value};

use super::{
    fault_at, iso_time, last_run_settle, release_quietly, Effects, Engine, EngineError, Op, Outcome,
    PaidCall, SettleStage, ToolCall, Workflow, PROVIDER_CALL_DECISION_TYPE, RUN_SETTLE_DECISION_TYPE,
};
use crate::env::LocalFuture;
use crate::error::StoreError;
use crate::fault::FaultPoint;
use crate::profile::SettleFailurePolicy;
use crate::spi::{JournalStore, LeasableStore, MetaLookup, TranscriptStore};
use crate::types::{checkpoint_ref, deletion_record_ref, JournalEntry, Lease, RunMeta, RunStatus, Seq};

/// How the segment starts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Start {
    /// Genesis: no prior journal, a fresh genesis, `segments = 1`.
    Fresh,
    /// Resume: read meta, load the journal, `segments = k + 1`.
    Resume,
}

/// The turn state saved at every tool-turn boundary: `[0x01] + JSON`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct CheckpointState {
    pub v: u32,
    /// Model turns already paid.
    pub turns: u32,
    pub tool_calls_used: u32,
    /// The accumulated history: one `{turn, reply, tool}` record per tool turn.
    pub messages: Vec<Value>,
}

impl Default for CheckpointState {
    fn default() -> Self {
        CheckpointState { v: 1, turns: 0, tool_calls_used: 0, messages: Vec::new() }
    }
}

/// The checkpoint blob of `state`.
pub fn encode_checkpoint(state: &CheckpointState) -> Vec<u8> {
    let mut bytes = vec![0x01];
    bytes.extend(serde_json::to_vec(state).unwrap_or_default());
    bytes
}

/// rulvar's `decodeCheckpoint`: never fails; `None` (boot from turn 0) for a wrong format
/// byte, bad JSON or a wrong version.
pub fn decode_checkpoint(bytes: &[u8]) -> Option<CheckpointState> {
    let (&first, rest) = bytes.split_first()?;
    if first != 0x01 {
        return None;
    }
    let state: CheckpointState = serde_json::from_slice(rest).ok()?;
    (state.v == 1).then_some(state)
}

/// What the forward match of one op against the prior journal says.
enum Disposition {
    /// An ok (or, in a run settled ok, limit) terminal: its value, zero calls.
    Replay(Value),
    /// A running entry with no terminal: redispatch under that seq.
    Dangling(Seq),
    /// A non-replayable terminal (error, limit, cancelled): a fresh dispatch.
    Rerun,
    /// No entry: a fresh dispatch.
    Live,
}

/// The mutable state of one live segment.
struct Seg<'a> {
    run_id: &'a str,
    lease: Lease,
    prior: Vec<JournalEntry>,
    appended: RefCell<Vec<JournalEntry>>,
    next_seq: Cell<u64>,
    /// The dispatch in flight: (running seq, kind, key).
    inflight: RefCell<Option<(Seq, String, String)>>,
    /// A failed append in this segment (rulvar's integrity latch).
    latch: Cell<bool>,
    /// Journal appends in flight (0 or 1): a cancel waits for one to return.
    appending: Cell<u32>,
    /// A cancel arrived: an append in flight is recorded, then the body goes no further.
    cancelling: Cell<bool>,
    /// The loaded journal's last settle is `ok` (limit terminals then replay).
    settled_ok: bool,
    segment_no: u64,
    genesis: Option<String>,
    carried: RunMeta,
    /// The run's budget in cents (its recorded `budgetUsd`), when calls have a price.
    budget_cents: Option<u64>,
    /// The spend so far: the loaded journal's receipts, then this segment's paid calls.
    spent_cents: Cell<u64>,
}

impl Seg<'_> {
    /// Whether the spend reached the budget (rulvar's `budget.exhausted`).
    fn exhausted(&self) -> bool {
        self.budget_cents.is_some_and(|b| self.spent_cents.get() >= b)
    }
}

/// Removes the run from the engine's live set when the segment ends (or is dropped).
struct ActiveGuard<'a> {
    set: &'a RefCell<BTreeSet<String>>,
    run_id: String,
}

impl Drop for ActiveGuard<'_> {
    fn drop(&mut self) {
        self.set.borrow_mut().remove(&self.run_id);
    }
}

/// What a segment boots from: the prior journal, the segments counter before it, the
/// genesis it carries, the meta fields it carries over, and whether a meta row existed.
struct Prepared {
    prior: Vec<JournalEntry>,
    segments_before: u64,
    genesis: Option<String>,
    carried: RunMeta,
    meta_present: bool,
}

/// Whether `e` is a billing receipt (a `provider-call` decision).
fn is_receipt(e: &JournalEntry) -> bool {
    e.kind == "decision"
        && e.value.get("decisionType").and_then(Value::as_str) == Some(PROVIDER_CALL_DECISION_TYPE)
}

/// Pending once, then ready: lets the other arm of a `select` run.
pub(crate) struct YieldNow(pub(crate) bool);

impl Future for YieldNow {
    type Output = ();
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        if self.0 {
            Poll::Ready(())
        } else {
            self.0 = true;
            cx.waker().wake_by_ref();
            Poll::Pending
        }
    }
}

impl<J, T, W> Engine<J, T, W>
where
    J: JournalStore + LeasableStore + MetaLookup,
    T: TranscriptStore,
    W: Effects,
{
    /// A resume's reads: the meta (its workflow must match `wf`) and the journal.
    async fn prepare_resume(&self, run_id: &str, wf: &Workflow) -> Result<Prepared, EngineError> {
        let meta = self.journal.get_meta(run_id).await.map_err(EngineError::store)?;
        if let Some(name) = meta.as_ref().and_then(|m| m.workflow_name.as_ref()) {
            if *name != wf.name {
                return Err(EngineError::Config(format!(
                    "run {run_id} was started by workflow {name:?}, not {:?}",
                    wf.name
                )));
            }
        }
        if self.profile.delete_marks_generation {
            if let Some(m) = &meta {
                // A deletion cascade began on this generation and was cut (a crash, a busy
                // write): its blobs may be partly gone, so a boot would redispatch from no
                // checkpoint and pay covered turns again. Only a deletion finishes it.
                let genesis = m.genesis.clone().unwrap_or_default();
                let record =
                    self.transcripts.get(&deletion_record_ref(run_id)).await.map_err(EngineError::store)?;
                if record.as_deref() == Some(genesis.as_bytes()) {
                    return Err(EngineError::BeingDeleted { run_id: run_id.to_string(), genesis });
                }
            }
        }
        let prior = self.journal.load(run_id).await.map_err(EngineError::store)?;
        let segments_before = meta.as_ref().and_then(|m| m.segments).filter(|s| *s > 0).unwrap_or(1);
        let genesis = meta.as_ref().and_then(|m| m.genesis.clone());
        let mut carried = RunMeta::new(run_id, RunStatus::Running);
        carried.workflow_name = Some(wf.name.clone());
        let meta_present = meta.is_some();
        if let Some(m) = meta {
            carried.extra = m.extra;
        }
        Ok(Prepared { prior, segments_before, genesis, carried, meta_present })
    }

    pub(crate) async fn segment(
        &self,
        run_id: &str,
        wf: &Workflow,
        start: Start,
        options: &super::RunOptions,
        lease_in: Option<Lease>,
        cancel: Option<LocalFuture<'_, Result<(), EngineError>>>,
    ) -> Result<Outcome, EngineError> {
        if let Some(l) = &lease_in {
            if l.run_id != run_id {
                return Err(EngineError::Config(format!(
                    "lease names run {} but the segment is for run {run_id}",
                    l.run_id
                )));
            }
        }
        if !self.active.borrow_mut().insert(run_id.to_string()) {
            return Err(EngineError::Config(format!(
                "run {run_id} already has a live segment in this engine"
            )));
        }
        let _guard = ActiveGuard { set: &self.active, run_id: run_id.to_string() };

        // Prepared: reads only (a resume loads before it acquires, as rulvar does).
        let mut prepared = match start {
            Start::Fresh => {
                let mut carried = RunMeta::new(run_id, RunStatus::Running);
                carried.workflow_name = Some(wf.name.clone());
                carried.name = options.name.clone();
                carried.tags = options.tags.clone();
                if let Some(budget) = options.budget_usd {
                    carried.extra.insert("budgetUsd".into(), json!(budget));
                }
                Prepared {
                    prior: Vec::new(),
                    segments_before: 0,
                    genesis: Some(self.effects.mint_genesis(run_id)),
                    carried,
                    meta_present: false,
                }
            }
            Start::Resume => self.prepare_resume(run_id, wf).await?,
        };

        // Acquiring.
        let owned = lease_in.is_none();
        if owned && start == Start::Resume {
            fault_at(&self.env, FaultPoint::EngineResumeBeforeAcquire, run_id, None).await?;
        }
        let lease = match lease_in {
            Some(l) => l,
            None => self.journal.acquire(run_id, &self.owner).await.map_err(EngineError::store)?,
        };

        // A resume that acquires its own lease prepared from reads made before it held the
        // run: another segment may have booted in between (bumping `segments`), or a deletion
        // may have removed the run. rulvar keeps that window (docs/engine-model.md 1.2; this model's re-read: P); this model
        // closes it as its queue worker does: it reads again under the lease, boots from the
        // run as it is now, and refuses a run that vanished (or was deleted and recreated: a
        // new genesis) since the prepare, so a resume racing a deletion never brings the run
        // back as a ghost without a journal, and no two segments share a `segments` base.
        if owned && start == Start::Resume {
            let again = match self.prepare_resume(run_id, wf).await {
                Ok(p) => p,
                Err(e) => {
                    if !e.is_crash() {
                        release_quietly(&self.journal, &lease).await?;
                    }
                    return Err(e);
                }
            };
            let vanished = prepared.meta_present && !again.meta_present;
            let recreated = prepared.meta_present && again.meta_present && again.genesis != prepared.genesis;
            if vanished || recreated {
                release_quietly(&self.journal, &lease).await?;
                let how = if vanished { "deleted" } else { "deleted and recreated" };
                return Err(EngineError::Config(format!("run {run_id} was {how} while its resume prepared")));
            }
            prepared = again;
        }
        let Prepared { prior, segments_before, mut genesis, carried, meta_present } = prepared;
        // A resume that finds no meta recreates the run: rulvar boots it with no genesis
        // (5.3). Under the deletion record a generation must have a name of its own, or a
        // record left by an earlier genesis-less generation's cascade (the empty string) names
        // every later one, and a run a user's retry recreated is refused and deleted as
        // "being deleted" (fencesim's `delete_cuts` found it: a worker deleted the running
        // run). So the recreation mints its genesis as a fresh start does (6.1, P).
        if self.profile.delete_marks_generation
            && start == Start::Resume
            && !meta_present
            && genesis.is_none()
        {
            genesis = Some(self.effects.mint_genesis(run_id));
        }

        let price = self.paid_call_cents;
        let budget_cents = (price > 0)
            .then(|| carried.extra.get("budgetUsd").and_then(Value::as_u64))
            .flatten()
            .map(|usd| usd.saturating_mul(100));
        let receipts = prior.iter().filter(|e| is_receipt(e)).count() as u64;
        let seg = Seg {
            run_id,
            budget_cents,
            spent_cents: Cell::new(receipts.saturating_mul(price)),
            next_seq: Cell::new(prior.iter().map(|e| e.seq.0 + 1).max().unwrap_or(0)),
            settled_ok: last_run_settle(&prior).is_some_and(|(_, s)| s == RunStatus::Ok),
            prior,
            appended: RefCell::new(Vec::new()),
            inflight: RefCell::new(None),
            latch: Cell::new(false),
            appending: Cell::new(0),
            cancelling: Cell::new(false),
            segment_no: segments_before + 1,
            genesis,
            carried,
            lease,
        };

        // Owned -> Booted.
        fault_at(&self.env, FaultPoint::EngineBootBeforeMeta, run_id, Some(&seg.lease)).await?;
        let boot_meta = self.meta_record(&seg, RunStatus::Running);
        if let Err(e) = self.journal.put_meta(&boot_meta, self.threaded(Some(&seg.lease))).await {
            if let StoreError::Crashed { point } = e {
                return Err(EngineError::Crashed { point });
            }
            if owned {
                release_quietly(&self.journal, &seg.lease).await?;
            }
            return Err(EngineError::Store(e));
        }

        // Executing, raced against the renew loop (engine-owned) or the caller's cancel.
        let watch: LocalFuture<'_, Result<(), EngineError>> = if owned {
            Box::pin(self.renew_loop(&seg.lease))
        } else if let Some(c) = cancel {
            c
        } else {
            Box::pin(futures::future::pending())
        };
        let body: LocalFuture<'_, Result<Option<Value>, EngineError>> = Box::pin(self.body(&seg, wf));
        let (body_result, watch_rest) = match select(body, watch).await {
            Either::Left((res, watch)) => (Some(res), Some(watch)),
            Either::Right((watched, mut body)) => {
                if let Err(e) = watched {
                    drop(body);
                    return Err(e);
                }
                // Cancel: the body stops at its next await outside a journal write. rulvar
                // aborts live agent calls, but a journal append in flight completes and is
                // recorded; dropping it mid-call would lose an entry that committed (and the
                // settle would then skip its `run_settle` over that entry). The append parks
                // the body once it returns, so nothing after it (a tool, a paid call) runs.
                seg.cancelling.set(true);
                let finished = futures::future::poll_fn(|cx| {
                    if seg.appending.get() == 0 {
                        return Poll::Ready(None);
                    }
                    match body.as_mut().poll(cx) {
                        Poll::Ready(r) => Poll::Ready(Some(r)),
                        Poll::Pending if seg.appending.get() == 0 => Poll::Ready(None),
                        Poll::Pending => Poll::Pending,
                    }
                })
                .await;
                drop(body);
                seg.cancelling.set(false);
                if let Some(Err(e @ EngineError::Crashed { .. })) = finished {
                    return Err(e);
                }
                (None, None)
            }
        };
        let (mut status, value) = match body_result {
            None => (RunStatus::Cancelled, None),
            Some(Ok(Some(v))) if seg.exhausted() => (RunStatus::Exhausted, Some(v)),
            Some(Ok(Some(v))) => (RunStatus::Ok, Some(v)),
            Some(Ok(None)) => (RunStatus::Suspended, None),
            Some(Err(e @ EngineError::Crashed { .. })) => return Err(e),
            Some(Err(EngineError::BudgetExhausted { .. })) => (RunStatus::Exhausted, None),
            Some(Err(_)) => (RunStatus::Error, None),
        };

        if status == RunStatus::Cancelled {
            fault_at(&self.env, FaultPoint::EngineCancelBeforeDrain, run_id, Some(&seg.lease)).await?;
        }
        // Draining: a dispatch cut off by the cancel journals a `cancelled` terminal. (A
        // dispatch that failed on its own is not live: its running entry stays dangling.)
        let cut = seg.inflight.borrow_mut().take().filter(|_| status == RunStatus::Cancelled);
        if let Some((rseq, kind, key)) = cut {
            let mut t = JournalEntry::new(0, &kind, "cancelled", Value::Null);
            t.key = key;
            t.ref_seq = Some(rseq);
            if let Err(e @ EngineError::Crashed { .. }) = self.append(&seg, t).await {
                return Err(e);
            }
        }
        // Flush barrier: a lost append turns ok/suspended into error.
        if seg.latch.get() && matches!(status, RunStatus::Ok | RunStatus::Suspended) {
            status = RunStatus::Error;
        }
        let value = if matches!(status, RunStatus::Ok | RunStatus::Exhausted) { value } else { None };

        // Settle, while the renew loop keeps the lease alive (its failures no longer cancel).
        let settle: LocalFuture<'_, Result<Outcome, EngineError>> =
            Box::pin(self.settle(&seg, status, value));
        let settled = match watch_rest {
            Some(w) => match select(settle, w).await {
                Either::Left((res, _)) => res,
                Either::Right((watched, settle)) => {
                    watched?;
                    settle.await
                }
            },
            None => settle.await,
        };
        if matches!(settled, Err(EngineError::Crashed { .. })) {
            return settled;
        }
        if owned {
            release_quietly(&self.journal, &seg.lease).await?;
        }
        settled
    }

    /// The engine-owned renew loop: returns `Ok(())` when a renew failed (the segment is
    /// cancelled), `Err(Crashed)` when the process died.
    async fn renew_loop(&self, lease: &Lease) -> Result<(), EngineError> {
        let every = Duration::from_millis(self.renew_every_ms());
        loop {
            self.env.sleep(every).await;
            fault_at(&self.env, FaultPoint::EngineRenewBeforeRenew, &lease.run_id, Some(lease)).await?;
            match self.journal.renew(lease).await {
                Ok(()) => {}
                Err(StoreError::Crashed { point }) => return Err(EngineError::Crashed { point }),
                Err(_) => return Ok(()),
            }
            YieldNow(false).await;
        }
    }

    fn meta_record(&self, seg: &Seg<'_>, status: RunStatus) -> RunMeta {
        let mut meta = seg.carried.clone();
        meta.status = status;
        meta.updated_at = Some(iso_time(self.env.now_ms()));
        meta.segments = Some(seg.segment_no);
        meta.genesis = seg.genesis.clone();
        meta
    }

    /// The single append site: mint the seq (a failed append consumes it), append with the
    /// lease, record success, latch failure.
    async fn append(&self, seg: &Seg<'_>, mut entry: JournalEntry) -> Result<Seq, EngineError> {
        let seq = Seq(seg.next_seq.get());
        seg.next_seq.set(seq.0 + 1);
        entry.seq = seq;
        let dispatch = matches!(entry.kind.as_str(), "agent" | "step" | "child");
        let started =
            (dispatch && entry.status == "running").then(|| (entry.kind.clone(), entry.key.clone()));
        seg.appending.set(seg.appending.get() + 1);
        let appended = self.journal.append(seg.run_id, &entry, Some(&seg.lease)).await;
        seg.appending.set(seg.appending.get() - 1);
        let result = match appended {
            Ok(()) => {
                seg.appended.borrow_mut().push(entry);
                Ok(seq)
            }
            Err(e) => {
                seg.latch.set(true);
                Err(EngineError::store(e))
            }
        };
        if seg.cancelling.get() && !matches!(result, Err(EngineError::Crashed { .. })) {
            // Cancelled while this append was in flight: its entry is recorded (or its failure
            // latched) and the body stops here. Without this, a caller that swallows the
            // failure, or one whose next step completes at once, would run on past the cancel.
            // A dispatch whose running entry committed is live from that commit (rulvar's agent
            // call was under way when the abort came), so the drain ends it with `cancelled`.
            if let (Ok(s), Some((kind, key))) = (&result, started) {
                *seg.inflight.borrow_mut() = Some((*s, kind, key));
            }
            futures::future::pending::<()>().await;
        }
        result
    }

    /// rulvar's incremental billing row after each wire call (RV2008): a `provider-call`
    /// decision keyed `pc:<running seq>:<turn>`. A refusal is swallowed here, as rulvar's call
    /// site does, but [`Self::append`] has already consumed its seq and latched it, so the
    /// segment goes on appending over a seq gap and its settle turns `ok` into `error`. This
    /// is the awaited receipt posture; rulvar's default fires and forgets through the same
    /// serialized queue, so the entries and seqs are the same and only the timing differs.
    /// A crash is not swallowed: the process is dead.
    async fn receipt(&self, seg: &Seg<'_>, rseq: Seq, turn: u32) -> Result<(), EngineError> {
        let value = json!({ "decisionType": PROVIDER_CALL_DECISION_TYPE, "agentRef": rseq.0 });
        let mut entry = JournalEntry::new(0, "decision", "ok", value);
        entry.key = format!("pc:{}:{turn}", rseq.0);
        match self.append(seg, entry).await {
            Err(e @ EngineError::Crashed { .. }) => Err(e),
            Ok(_) | Err(_) => Ok(()),
        }
    }

    /// The workflow body: `Some(value)` when it completed, `None` when it parked.
    async fn body(&self, seg: &Seg<'_>, wf: &Workflow) -> Result<Option<Value>, EngineError> {
        let mut out = Map::new();
        for (index, op) in wf.ops.iter().enumerate() {
            let key = op.journal_key(index);
            let value = match op {
                Op::Step { name } => self.dispatch(seg, name, "step", key, None).await?,
                Op::Agent { name, tool_turns, max_turns, max_tool_calls } => {
                    self.dispatch(seg, name, "agent", key, Some((*tool_turns, *max_turns, *max_tool_calls)))
                        .await?
                }
                Op::Await { key: k } => match self.await_op(seg, k, key).await? {
                    Some(v) => v,
                    None => return Ok(None),
                },
            };
            out.insert(op.field().to_string(), value);
        }
        Ok(Some(Value::Object(out)))
    }

    fn disposition(&self, seg: &Seg<'_>, kind: &str, key: &str) -> Disposition {
        let Some(running) =
            seg.prior.iter().rev().find(|e| e.key == key && e.kind == kind && e.status == "running")
        else {
            return Disposition::Live;
        };
        match seg.prior.iter().find(|e| e.ref_seq == Some(running.seq)) {
            None => Disposition::Dangling(running.seq),
            Some(t) if t.status == "ok" || t.status == "escalated" => Disposition::Replay(t.value.clone()),
            Some(t) if t.status == "limit" && seg.settled_ok => Disposition::Replay(t.value.clone()),
            Some(_) => Disposition::Rerun,
        }
    }

    /// One two-phase dispatch of a step or an agent.
    async fn dispatch(
        &self,
        seg: &Seg<'_>,
        name: &str,
        kind: &str,
        key: String,
        limits: Option<(u32, u32, u32)>,
    ) -> Result<Value, EngineError> {
        let env = &self.env;
        let (rseq, restored) = match self.disposition(seg, kind, &key) {
            Disposition::Replay(v) => return Ok(v),
            Disposition::Dangling(s) => {
                // Live from here: rulvar's dangling redispatch is a live agent call from the
                // match on, its checkpoint read included, so a cancel during the read drains
                // it with a `cancelled` terminal (docs/engine-model.md 3.2 step 1).
                *seg.inflight.borrow_mut() = Some((s, kind.to_string(), key.clone()));
                let restored = if limits.is_some() {
                    let ck = checkpoint_ref(seg.run_id, s);
                    self.transcripts
                        .get(&ck)
                        .await
                        .map_err(EngineError::store)?
                        .and_then(|b| decode_checkpoint(&b))
                } else {
                    None
                };
                (s, restored)
            }
            Disposition::Rerun | Disposition::Live => {
                let mut running = JournalEntry::new(0, kind, "running", json!({ "op": name }));
                running.key = key.clone();
                let s = self.append(seg, running).await?;
                *seg.inflight.borrow_mut() = Some((s, kind.to_string(), key.clone()));
                fault_at(env, FaultPoint::EngineDispatchAfterRunning, seg.run_id, Some(&seg.lease)).await?;
                (s, None)
            }
        };
        let (status, value, saved) = match limits {
            None => {
                let call = ToolCall {
                    run_id: seg.run_id.to_string(),
                    op: name.to_string(),
                    dispatch: rseq,
                    turn: 0,
                };
                let v = self.effects.tool_execute(&call).await;
                fault_at(env, FaultPoint::EngineDispatchAfterTool, seg.run_id, Some(&seg.lease)).await?;
                ("ok", v, false)
            }
            Some(l) => self.agent_loop(seg, name, rseq, l, restored.unwrap_or_default()).await?,
        };
        fault_at(env, FaultPoint::EngineDispatchBeforeTerminal, seg.run_id, Some(&seg.lease)).await?;
        let mut terminal = JournalEntry::new(0, kind, status, value.clone());
        terminal.key = key;
        terminal.ref_seq = Some(rseq);
        if saved {
            terminal.extra.insert("checkpointRef".into(), Value::String(checkpoint_ref(seg.run_id, rseq)));
        }
        *seg.inflight.borrow_mut() = None;
        self.append(seg, terminal).await?;
        Ok(value)
    }

    /// The agent loop from `state`: returns (terminal status, value, whether a checkpoint was
    /// saved in this segment).
    async fn agent_loop(
        &self,
        seg: &Seg<'_>,
        name: &str,
        rseq: Seq,
        (tool_turns, max_turns, max_tool_calls): (u32, u32, u32),
        mut state: CheckpointState,
    ) -> Result<(&'static str, Value, bool), EngineError> {
        let env = &self.env;
        let mut saved = false;
        let limit = || ("limit", Value::String("limit".into()));
        loop {
            if state.turns >= max_turns {
                let (s, v) = limit();
                return Ok((s, v, saved));
            }
            if seg.exhausted() {
                return Err(EngineError::BudgetExhausted { run_id: seg.run_id.to_string() });
            }
            let turn = state.turns;
            let call = PaidCall {
                run_id: seg.run_id.to_string(),
                op: name.to_string(),
                dispatch: rseq,
                turn,
                messages: state.messages.clone(),
            };
            let reply = self.effects.provider_call(&call).await;
            seg.spent_cents.set(seg.spent_cents.get().saturating_add(self.paid_call_cents));
            fault_at(env, FaultPoint::EngineDispatchAfterProvider, seg.run_id, Some(&seg.lease)).await?;
            self.receipt(seg, rseq, turn).await?;
            state.turns += 1;
            if turn >= tool_turns {
                return Ok(("ok", reply, saved));
            }
            if state.tool_calls_used >= max_tool_calls {
                let (s, v) = limit();
                return Ok((s, v, saved));
            }
            let call =
                ToolCall { run_id: seg.run_id.to_string(), op: name.to_string(), dispatch: rseq, turn };
            let result = self.effects.tool_execute(&call).await;
            fault_at(env, FaultPoint::EngineDispatchAfterTool, seg.run_id, Some(&seg.lease)).await?;
            state.tool_calls_used += 1;
            state.messages.push(json!({ "turn": turn, "reply": reply, "tool": result }));
            fault_at(env, FaultPoint::EngineCheckpointBeforePut, seg.run_id, Some(&seg.lease)).await?;
            let ck = checkpoint_ref(seg.run_id, rseq);
            self.transcripts
                .put(&ck, &encode_checkpoint(&state), self.threaded(Some(&seg.lease)))
                .await
                .map_err(EngineError::store)?;
            fault_at(env, FaultPoint::EngineCheckpointAfterPut, seg.run_id, Some(&seg.lease)).await?;
            saved = true;
        }
    }

    /// An await: the resolution's value, or `None` (parked; the suspension is journaled once).
    async fn await_op(&self, seg: &Seg<'_>, key: &str, jkey: String) -> Result<Option<Value>, EngineError> {
        let open = seg.prior.iter().rev().find(|e| {
            e.key == jkey && matches!(e.kind.as_str(), "external" | "approval") && e.status == "suspended"
        });
        if let Some(s) = open {
            let resolution = seg.prior.iter().find(|e| e.kind == "resolution" && e.ref_seq == Some(s.seq));
            return Ok(resolution.map(|r| r.value.clone()));
        }
        let mut entry = JournalEntry::new(0, "external", "suspended", json!({ "key": key }));
        entry.key = jkey;
        self.append(seg, entry).await?;
        Ok(None)
    }

    /// SettleAppend (write-on-change) -> meta -> outcome. Release is the caller's.
    async fn settle(
        &self,
        seg: &Seg<'_>,
        status: RunStatus,
        value: Option<Value>,
    ) -> Result<Outcome, EngineError> {
        let env = &self.env;
        let policy = self.profile.settle_failure_policy;
        if self.profile.settle_journaled {
            let needed = {
                let appended = seg.appended.borrow();
                let mut snapshot: Vec<JournalEntry> = seg.prior.clone();
                snapshot.extend(appended.iter().cloned());
                let last_settle = last_run_settle(&snapshot);
                let recorded = last_settle.map(|(_, s)| s);
                // This model's `current` widens arm (c): a journal whose last entry is not its
                // last settle holds work no settle covers (an earlier segment's settle append
                // failed, or it died), so it is settled even when the status repeats the old
                // settle's (docs/engine-model.md P).
                let unsettled_tail = self.profile.settle_heals_unsettled_tail
                    && snapshot.last().is_some_and(|e| last_settle.map(|(seq, _)| seq) != Some(e.seq));
                !appended.is_empty()
                    || recorded.is_some_and(|s| s != status)
                    || (recorded.is_none() && !snapshot.is_empty())
                    || unsettled_tail
            };
            if needed {
                fault_at(env, FaultPoint::EngineSettleBeforeRunSettle, seg.run_id, Some(&seg.lease)).await?;
                let mut entry = JournalEntry::new(
                    0,
                    "decision",
                    "ok",
                    json!({
                        "decisionType": RUN_SETTLE_DECISION_TYPE,
                        "runStatus": status.as_str(),
                        "segment": seg.segment_no,
                    }),
                );
                entry.key = "run-settle".into();
                match self.append(seg, entry).await {
                    Ok(_) => {
                        fault_at(env, FaultPoint::EngineSettleAfterRunSettle, seg.run_id, Some(&seg.lease))
                            .await?
                    }
                    Err(e @ EngineError::Crashed { .. }) => return Err(e),
                    Err(EngineError::Store(e)) if policy == SettleFailurePolicy::LeaseHeldOnly => {
                        return Err(match e {
                            StoreError::LeaseHeld { .. } => {
                                EngineError::Superseded { run_id: seg.run_id.to_string(), status }
                            }
                            other => EngineError::Settlement {
                                run_id: seg.run_id.to_string(),
                                status,
                                stage: SettleStage::RunSettle,
                                source: other,
                            },
                        });
                    }
                    Err(_) => {} // SwallowAll: the meta write still happens (F1's shape).
                }
            }
        }
        let meta = self.meta_record(seg, status);
        match self.journal.put_meta(&meta, self.threaded(Some(&seg.lease))).await {
            Ok(()) => {}
            Err(StoreError::Crashed { point }) => return Err(EngineError::Crashed { point }),
            Err(StoreError::LeaseHeld { .. }) => {}
            Err(e) if policy == SettleFailurePolicy::LeaseHeldOnly => {
                return Err(EngineError::Settlement {
                    run_id: seg.run_id.to_string(),
                    status,
                    stage: SettleStage::Meta,
                    source: e,
                })
            }
            Err(_) => {}
        }
        fault_at(env, FaultPoint::EngineSettleAfterMeta, seg.run_id, Some(&seg.lease)).await?;
        let journal_len = seg.prior.len() + seg.appended.borrow().len();
        Ok(Outcome { status, value, segment: seg.segment_no, journal_len })
    }
}
