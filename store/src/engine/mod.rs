//! The engine model: the part of rulvar that drives the stores. It owns segments (boot,
//! execute with replay and checkpoints, settle, release), the host operations
//! (`delete_run`, `prune_run`, `resolve_offline`), the queue worker and the reconciler.
//!
//! What it promises (docs/engine-model.md M3, M4): with an engine-owned lease, acquire precedes
//! every durable write; the boot `put_meta(running)` precedes every paid call; a `running`
//! entry precedes its paid calls and a terminal follows the dispatch's last checkpoint save;
//! the settle appends `run_settle` (write-on-change rule) strictly before the terminal meta
//! write and skips that write when the append failed; the lease is released last; under
//! `delete_marks_generation` a deletion cascade records the generation it deletes before its
//! first blob delete, and no resume boots a generation so recorded. Which writes
//! carry the lease, and how settle failures are treated, are the profile's engine switches.
//! A fault hook answering `Err(Crash)`, or a store call answering `StoreError::Crashed`,
//! stops the engine dead: it returns [`EngineError::Crashed`] with no further store call.
//!
//! No wall clock, no randomness: time comes from the injected [`Env`], ids from the
//! [`Effects`].

mod effects;
mod reconcile;
mod segment;
mod worker;
mod workflow;

pub use effects::{Effects, PaidCall, ToolCall};
pub use reconcile::{
    audit_run, audit_runs, classify, reconcile_run_meta, repair_run, RepairAction, RunAudit, Verdict,
};
pub use segment::{decode_checkpoint, encode_checkpoint, CheckpointState};
pub use worker::{Retention, SweepReport, Worker};
pub use workflow::{await_key, Op, Workflow};

use std::cell::RefCell;
use std::collections::BTreeSet;
use std::rc::Rc;

use serde_json::Value;

use crate::env::{Env, FaultSite, LocalFuture};
use crate::error::StoreError;
use crate::fault::FaultPoint;
use crate::profile::{EngineThreading, Profile};
use crate::spi::{JournalStore, LeasableStore, MetaLookup, TranscriptStore};
use crate::types::{deletion_record_ref, JournalEntry, Lease, RunStatus, Seq};

/// rulvar's `ENGINE_DEFAULT_LEASE_TTL_MS`, used when the store exposes no ttl.
pub const DEFAULT_LEASE_TTL_MS: u64 = 60_000;

/// The decision type of the journaled run settle.
pub const RUN_SETTLE_DECISION_TYPE: &str = "run_settle";
/// The `decisionType` of the billing receipt journaled after each paid provider call.
pub const PROVIDER_CALL_DECISION_TYPE: &str = "provider-call";

/// The result of one settled segment.
#[derive(Clone, Debug, PartialEq)]
pub struct Outcome {
    pub status: RunStatus,
    /// The workflow value: for `ok`, and for `exhausted` when the body completed (rulvar's
    /// value survives a budget spent by the last paid call).
    pub value: Option<Value>,
    /// This segment's number: `segments` as written to meta (k + 1).
    pub segment: u64,
    /// The journal's length as this segment left it: the entries it loaded plus the ones it
    /// appended. A worker parks a suspended run only if the journal still has this length
    /// when it looks again (an entry that landed since, a resolution, is new work).
    pub journal_len: usize,
}

/// rulvar's `RunOptions`, as far as the store sees them: the `name` and `tags` a fresh run
/// writes into its meta (docs/engine-model.md 1.3), and one of the recorded fields, the
/// `budgetUsd` (whole dollars here). A resume passes no options, so a resumed segment's
/// meta drops `name` and `tags`; it carries the recorded fields verbatim (1.2 step 9).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RunOptions {
    pub name: Option<String>,
    pub tags: Option<Vec<String>>,
    pub budget_usd: Option<u32>,
}

/// Which settlement write failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SettleStage {
    /// The `run_settle` append (the meta write was skipped).
    RunSettle,
    /// The terminal meta write (the journal settle, if any, is durable).
    Meta,
}

impl std::fmt::Display for SettleStage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            SettleStage::RunSettle => "run-settle",
            SettleStage::Meta => "meta",
        })
    }
}

/// Every way an engine operation can fail.
#[derive(Clone, Debug, PartialEq, thiserror::Error)]
pub enum EngineError {
    /// A store call failed outside the settle: the boot acquire (`LeaseHeld`: zero writes,
    /// zero paid calls), the boot meta write (zero paid calls), a host operation.
    #[error("store: {0}")]
    Store(StoreError),
    /// The settle append was refused with `LeaseHeld`: another holder owns the run. The
    /// meta write was skipped.
    #[error("run {run_id} superseded while settling {status}")]
    Superseded { run_id: String, status: RunStatus },
    /// A settlement write failed with something other than `LeaseHeld`.
    #[error("settlement of run {run_id} ({status}) failed at {stage}: {source}")]
    Settlement { run_id: String, status: RunStatus, stage: SettleStage, source: StoreError },
    /// A refusal before any side effect (a second live segment, a workflow mismatch, no
    /// open suspension to resolve).
    #[error("configuration error: {0}")]
    Config(String),
    /// A resume refused before any write: an engine deletion cascade began on this
    /// generation of the run (its deletion record names the meta's genesis) and did not
    /// finish. Only a deletion finishes it (`delete_marks_generation`).
    #[error("run {run_id} is being deleted: a deletion cascade began on its generation {genesis:?} and did not finish; delete it again to finish")]
    BeingDeleted { run_id: String, genesis: String },
    /// The run's budget was spent before a paid call (rulvar's `BudgetExhaustedError`): the
    /// body stops there and the segment settles `exhausted`. Never returned by a segment.
    #[error("run {run_id} exhausted its budget")]
    BudgetExhausted { run_id: String },
    /// The process died at `point` (a fault hook's crash, or a store's `Crashed`). Nothing
    /// was done after it.
    #[error("crashed at {point}")]
    Crashed { point: &'static str },
}

impl EngineError {
    /// `Crashed` for a crashed store call, `Store` otherwise.
    pub fn store(e: StoreError) -> EngineError {
        match e {
            StoreError::Crashed { point } => EngineError::Crashed { point },
            other => EngineError::Store(other),
        }
    }

    /// Whether the process died (nothing may follow).
    pub fn is_crash(&self) -> bool {
        matches!(self, EngineError::Crashed { .. })
    }
}

/// `?` on a store call: a crashed store call becomes `Crashed`, never `Store(Crashed)`.
impl From<StoreError> for EngineError {
    fn from(e: StoreError) -> EngineError {
        EngineError::store(e)
    }
}

/// Consult the environment's fault hook at an engine point.
pub(crate) async fn fault_at(
    env: &Rc<dyn Env>,
    point: FaultPoint,
    run_id: &str,
    lease: Option<&Lease>,
) -> Result<(), EngineError> {
    let site = FaultSite { point, run_id: Some(run_id), epoch: lease.map(|l| l.epoch.0) };
    if let Some(f) = env.fault(&site) {
        f.await.map_err(|_| EngineError::Crashed { point: point.name() })?;
    }
    Ok(())
}

/// `release`, ignoring every failure except a crash.
pub(crate) async fn release_quietly<J: LeasableStore>(journal: &J, lease: &Lease) -> Result<(), EngineError> {
    match journal.release(lease).await {
        Err(StoreError::Crashed { point }) => Err(EngineError::Crashed { point }),
        _ => Ok(()),
    }
}

/// An RFC 3339 UTC timestamp (millisecond precision) of the env clock.
pub fn iso_time(now_ms: i64) -> String {
    let secs = now_ms.div_euclid(1000);
    let ms = now_ms.rem_euclid(1000);
    let days = secs.div_euclid(86_400);
    let sod = secs.rem_euclid(86_400);
    // Howard Hinnant's civil_from_days.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = doy - (153 * mp + 2) / 5 + 1;
    let m = if mp < 10 { mp + 3 } else { mp - 9 };
    let y = yoe + era * 400 + i64::from(m <= 2);
    format!("{y:04}-{m:02}-{d:02}T{:02}:{:02}:{:02}.{ms:03}Z", sod / 3600, sod % 3600 / 60, sod % 60)
}

/// The last `run_settle` decision in `entries`, with its seq and recorded status.
pub fn last_run_settle(entries: &[JournalEntry]) -> Option<(Seq, RunStatus)> {
    entries.iter().rev().find_map(|e| {
        if e.kind != "decision" {
            return None;
        }
        if e.value.get("decisionType").and_then(Value::as_str) != Some(RUN_SETTLE_DECISION_TYPE) {
            return None;
        }
        let status = e.value.get("runStatus").and_then(Value::as_str).and_then(RunStatus::parse)?;
        (status != RunStatus::Running).then_some((e.seq, status))
    })
}

/// The engine: drives segments of runs over one journal store, one transcript store and
/// one set of effects (the provider and tool ledger), as one owner identity.
pub struct Engine<J, T, W> {
    pub(crate) journal: J,
    pub(crate) transcripts: T,
    pub(crate) effects: W,
    pub(crate) env: Rc<dyn Env>,
    pub(crate) profile: Profile,
    pub(crate) owner: String,
    /// rulvar's `activeSegments`: at most one live segment per run per engine.
    pub(crate) active: RefCell<BTreeSet<String>>,
    /// What one paid provider call costs, in cents (0: calls are free and no run exhausts).
    pub(crate) paid_call_cents: u64,
}

impl<J, T, W> Engine<J, T, W>
where
    J: JournalStore + LeasableStore + MetaLookup,
    T: TranscriptStore,
    W: Effects,
{
    pub fn new(
        journal: J,
        transcripts: T,
        effects: W,
        env: Rc<dyn Env>,
        profile: Profile,
        owner: impl Into<String>,
    ) -> Self {
        Engine {
            journal,
            transcripts,
            effects,
            env,
            profile,
            owner: owner.into(),
            active: RefCell::new(BTreeSet::new()),
            paid_call_cents: 0,
        }
    }

    /// Every paid provider call costs `cents` against the run's recorded `budgetUsd`. The
    /// budget model (docs/engine-model.md 3.1, 2 "Budget seed"): a segment seeds its spend
    /// from the billing receipts its loaded journal holds (a fold over prior entries), adds
    /// the price at every paid call it makes (a call whose receipt is lost still counts in
    /// this segment), refuses a paid call once the spend reached the budget (the body stops:
    /// the run settles `exhausted`, the dispatch stays dangling as for any dispatch that
    /// failed on its own), and settles a completed body `exhausted`, value kept, when the
    /// spend reached the budget. A parked body stays `suspended`. A run with no recorded
    /// budget, or a free call, never exhausts.
    pub fn with_paid_call_cents(mut self, cents: u64) -> Self {
        self.paid_call_cents = cents;
        self
    }

    /// The price of one paid call, in cents.
    pub fn paid_call_cents(&self) -> u64 {
        self.paid_call_cents
    }

    pub fn journal(&self) -> &J {
        &self.journal
    }
    pub fn transcripts(&self) -> &T {
        &self.transcripts
    }
    pub fn effects(&self) -> &W {
        &self.effects
    }
    pub fn env(&self) -> &Rc<dyn Env> {
        &self.env
    }
    pub fn profile(&self) -> Profile {
        self.profile
    }
    pub fn owner(&self) -> &str {
        &self.owner
    }

    /// The lease ttl in ms: the store's, else rulvar's default.
    pub fn ttl_ms(&self) -> u64 {
        self.journal.lease_ttl().map_or(DEFAULT_LEASE_TTL_MS, |d| d.as_millis() as u64)
    }

    /// rulvar's renew cadence: `max(1, floor(ttl / 3))` ms.
    pub fn renew_every_ms(&self) -> u64 {
        (self.ttl_ms() / 3).max(1)
    }

    /// The lease a meta or blob write of a leased segment carries under this profile.
    pub(crate) fn threaded<'a>(&self, lease: Option<&'a Lease>) -> Option<&'a Lease> {
        match self.profile.engine_threading {
            EngineThreading::All => lease,
            EngineThreading::AppendOnly => None,
        }
    }

    /// A fresh run (genesis): engine-owned lease (acquire, renew every ttl/3, release after
    /// settle), boot meta `running` with `segments = 1` and a freshly minted genesis.
    pub async fn run(&self, run_id: &str, wf: &Workflow) -> Result<Outcome, EngineError> {
        self.run_with(run_id, wf, &RunOptions::default()).await
    }

    /// As [`Engine::run`], writing `options`' name and tags into the run's meta.
    pub async fn run_with(
        &self,
        run_id: &str,
        wf: &Workflow,
        options: &RunOptions,
    ) -> Result<Outcome, EngineError> {
        self.segment(run_id, wf, segment::Start::Fresh, options, None, None).await
    }

    /// Resume a run. `lease: Some` means the caller owns the lease lifecycle: the engine does
    /// no acquire, renew or release. `None`: the engine owns it, as for `run`.
    pub async fn resume(
        &self,
        run_id: &str,
        wf: &Workflow,
        lease: Option<Lease>,
    ) -> Result<Outcome, EngineError> {
        self.segment(run_id, wf, segment::Start::Resume, &RunOptions::default(), lease, None).await
    }

    /// As [`Engine::resume`] with a caller-owned lease, cancelling the segment (it settles
    /// `cancelled`) if `cancel` completes while the body is still executing. The worker
    /// passes its renew loop here.
    pub async fn resume_cancellable(
        &self,
        run_id: &str,
        wf: &Workflow,
        lease: Lease,
        cancel: LocalFuture<'_, ()>,
    ) -> Result<Outcome, EngineError> {
        let cancel: LocalFuture<'_, Result<(), EngineError>> = Box::pin(async move {
            cancel.await;
            Ok(())
        });
        self.segment(run_id, wf, segment::Start::Resume, &RunOptions::default(), Some(lease), Some(cancel))
            .await
    }

    /// As [`Engine::resume_cancellable`], where `watch` answering `Err(Crashed)` means the
    /// process died (the segment stops dead) and `Ok(())` cancels the segment.
    pub async fn resume_watched(
        &self,
        run_id: &str,
        wf: &Workflow,
        lease: Lease,
        watch: LocalFuture<'_, Result<(), EngineError>>,
    ) -> Result<Outcome, EngineError> {
        self.segment(run_id, wf, segment::Start::Resume, &RunOptions::default(), Some(lease), Some(watch))
            .await
    }

    /// rulvar's `deleteRun`: list the run's blobs, delete each (carrying `lease`), then the
    /// journal delete (entries, meta, lease row) carrying `lease`; under
    /// `delete_marks_generation` the deletion record comes first (see `delete_cascade`).
    pub async fn delete_run(&self, run_id: &str, lease: Option<&Lease>) -> Result<(), EngineError> {
        self.delete_cascade(
            run_id,
            lease,
            Some(FaultPoint::EngineDeleteBeforeBlobs),
            FaultPoint::EngineDeleteAfterBlobs,
        )
        .await
    }

    /// The cascade: list the blobs; under `delete_marks_generation` write the run's deletion
    /// record (the meta's genesis) before any delete, so a cascade cut from here on leaves a
    /// run no resume boots; delete each blob; the journal delete. A run with no meta gets no
    /// record: nothing resumes it from a checkpoint (its boot writes meta first).
    pub(crate) async fn delete_cascade(
        &self,
        run_id: &str,
        lease: Option<&Lease>,
        before_blobs: Option<FaultPoint>,
        after_blobs: FaultPoint,
    ) -> Result<(), EngineError> {
        let refs = self.transcripts.list(run_id).await.map_err(EngineError::store)?;
        if self.profile.delete_marks_generation {
            if let Some(meta) = self.journal.get_meta(run_id).await.map_err(EngineError::store)? {
                let genesis = meta.genesis.unwrap_or_default();
                self.transcripts
                    .put(&deletion_record_ref(run_id), genesis.as_bytes(), lease)
                    .await
                    .map_err(EngineError::store)?;
            }
        }
        if let Some(point) = before_blobs {
            fault_at(&self.env, point, run_id, lease).await?;
        }
        for r in &refs {
            self.transcripts.delete(r, lease).await.map_err(EngineError::store)?;
        }
        fault_at(&self.env, after_blobs, run_id, lease).await?;
        self.journal.delete(run_id, lease).await.map_err(EngineError::store)
    }

    /// rulvar's `pruneRun`: delete the checkpoints of `ok` agent terminals that nothing else
    /// in the journal mentions. Journal and meta are untouched. Returns the count deleted.
    pub async fn prune_run(&self, run_id: &str, lease: Option<&Lease>) -> Result<usize, EngineError> {
        let entries = self.journal.load(run_id).await.map_err(EngineError::store)?;
        let refs = self.transcripts.list(run_id).await.map_err(EngineError::store)?;
        let mut candidates: Vec<(String, Seq)> = Vec::new();
        for e in &entries {
            if e.kind != "agent" || e.status != "ok" || e.ref_seq.is_none() {
                continue;
            }
            if let Some(Value::String(ck)) = e.extra.get("checkpointRef") {
                if refs.contains(ck) && !candidates.iter().any(|(c, _)| c == ck) {
                    candidates.push((ck.clone(), e.seq));
                }
            }
        }
        fault_at(&self.env, FaultPoint::EnginePruneBeforeDelete, run_id, lease).await?;
        let mut deleted = 0;
        for (ck, owner_seq) in candidates {
            let mentioned = entries.iter().any(|e| {
                let mut v = serde_json::to_value(e).unwrap_or(Value::Null);
                if e.seq == owner_seq {
                    if let Value::Object(m) = &mut v {
                        m.remove("checkpointRef");
                    }
                }
                mentions(&v, &ck)
            });
            if !mentioned {
                self.transcripts.delete(&ck, lease).await.map_err(EngineError::store)?;
                deleted += 1;
            }
        }
        Ok(deleted)
    }

    /// The server's offline resolution: a brief lease of this engine's owner, load, append a
    /// `resolution` ref-entry (ref = the open suspension's seq) for `key`, release. Meta is
    /// not touched. `Config` when `key` has no open suspension, or (under `resolve_rechecks`)
    /// when the meta read under the lease is terminal; `Store(LeaseHeld)` when the run is
    /// held.
    pub async fn resolve_offline(&self, run_id: &str, key: &str, value: Value) -> Result<(), EngineError> {
        let lease = self.journal.acquire(run_id, &self.owner).await.map_err(EngineError::store)?;
        let result = self.resolve_with(run_id, key, value, &lease).await;
        if matches!(result, Err(EngineError::Crashed { .. })) {
            return result;
        }
        release_quietly(&self.journal, &lease).await?;
        result
    }

    async fn resolve_with(
        &self,
        run_id: &str,
        key: &str,
        value: Value,
        lease: &Lease,
    ) -> Result<(), EngineError> {
        fault_at(&self.env, FaultPoint::EngineResolveAfterAcquire, run_id, Some(lease)).await?;
        if self.profile.resolve_rechecks {
            // A run that ended is resumed by no worker: an answer appended after its settle
            // would sit there as live work under a terminal meta (the reconciler's stranded).
            if let Some(m) = self.journal.get_meta(run_id).await.map_err(EngineError::store)? {
                if m.status.is_terminal() {
                    return Err(EngineError::Config(format!(
                        "run {run_id} has ended ({}); an answer to it is refused",
                        m.status
                    )));
                }
            }
        }
        let entries = self.journal.load(run_id).await.map_err(EngineError::store)?;
        let jkey = await_key(key);
        let target = entries
            .iter()
            .rev()
            .find(|e| {
                e.key == jkey
                    && matches!(e.kind.as_str(), "external" | "approval")
                    && e.status == "suspended"
                    && !entries.iter().any(|r| r.ref_seq == Some(e.seq))
            })
            .ok_or_else(|| EngineError::Config(format!("run {run_id} has no open suspension for {key:?}")))?;
        let seq = entries.iter().map(|e| e.seq.0 + 1).max().unwrap_or(0);
        let mut entry = JournalEntry::new(seq, "resolution", "ok", value);
        entry.key = jkey;
        entry.ref_seq = Some(target.seq);
        self.journal.append(run_id, &entry, Some(lease)).await.map_err(EngineError::store)
    }
}

/// Whether `needle` occurs as an exact string (value or object key) anywhere in `v`.
fn mentions(v: &Value, needle: &str) -> bool {
    match v {
        Value::String(s) => s == needle,
        Value::Array(a) => a.iter().any(|x| mentions(x, needle)),
        Value::Object(m) => m.iter().any(|(k, x)| k == needle || mentions(x, needle)),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn iso_time_formats_utc_milliseconds() {
        assert_eq!(iso_time(0), "1970-01-01T00:00:00.000Z");
        assert_eq!(iso_time(1_700_000_000_123), "2023-11-14T22:13:20.123Z");
        assert_eq!(iso_time(951_782_400_000), "2000-02-29T00:00:00.000Z");
        assert_eq!(iso_time(-1), "1969-12-31T23:59:59.999Z");
    }

    #[test]
    fn checkpoint_codec_round_trips_and_never_fails() {
        let state =
            CheckpointState { v: 1, turns: 3, tool_calls_used: 2, messages: vec![serde_json::json!(1)] };
        let bytes = encode_checkpoint(&state);
        assert_eq!(bytes[0], 0x01);
        assert_eq!(decode_checkpoint(&bytes), Some(state));
        assert_eq!(decode_checkpoint(b""), None);
        assert_eq!(decode_checkpoint(b"\x02{}"), None);
        assert_eq!(decode_checkpoint(b"\x01not json"), None);
        assert_eq!(decode_checkpoint(b"\x01{\"v\":2,\"turns\":1,\"toolCallsUsed\":0,\"messages\":[]}"), None);
    }

    #[test]
    fn last_run_settle_skips_other_decisions() {
        let mut settle = JournalEntry::new(
            1,
            "decision",
            "ok",
            serde_json::json!({"decisionType": "run_settle", "runStatus": "error"}),
        );
        settle.key = "run-settle".into();
        let other = JournalEntry::new(2, "decision", "ok", serde_json::json!({"decisionType": "x"}));
        assert_eq!(last_run_settle(&[settle, other]), Some((Seq(1), RunStatus::Error)));
        assert_eq!(last_run_settle(&[]), None);
    }
}
