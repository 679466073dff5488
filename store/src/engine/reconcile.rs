//! The reconciler: rulvar's `auditRun`, `reconcileRunMeta` and `auditRuns`
//! (docs/engine-model.md 7.1-7.3).
//!
//! Promise: `audit_run` is a read-only pure function of the meta row and the journal that
//! implements exactly the 7.1 decision table. `reconcile_run_meta` rewrites only `status`
//! and `updatedAt` of an existing row (every other field, unknown ones included, is written
//! back unchanged), makes no journal append and no model call, and writes only for a
//! verdict with a `repair_to` (`meta-behind`, `stranded`). It does not repair a regressed
//! `segments` counter.

use serde::{Deserialize, Serialize};

use std::rc::Rc;

use super::{iso_time, last_run_settle};
use crate::env::{Env, FaultSite};
use crate::error::StoreError;
use crate::fault::FaultPoint;
use crate::spi::{JournalStore, LeasableStore, MetaLookup};
use crate::types::{JournalEntry, Lease, RunFilter, RunStatus};

/// The audit's classification of one run.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Verdict {
    Consistent,
    /// The meta row trails the journal; repair toward the journal.
    MetaBehind,
    /// A terminal meta row over live journal work; repair makes it sweepable again.
    Stranded,
    /// Ambiguous residue: reported, never repaired.
    Suspect,
}

/// rulvar's `RunStateAudit`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunAudit {
    pub run_id: String,
    pub verdict: Verdict,
    pub repair_to: Option<RunStatus>,
    /// The meta row's status (`None`: no row).
    pub meta_status: Option<RunStatus>,
    pub journal_entries: usize,
    /// The last journaled `run_settle`'s status.
    pub journal_settle: Option<RunStatus>,
    pub entries_after_settle: usize,
    /// `running` entries no entry references via `ref` (whole journal).
    pub dangling_dispatches: usize,
    /// `external`/`approval` suspensions with no `resolution`/`abandon` ref-entry.
    pub open_suspensions: usize,
    pub reason: String,
}

fn is_dangling(e: &JournalEntry, all: &[JournalEntry]) -> bool {
    e.status == "running" && !all.iter().any(|r| r.ref_seq == Some(e.seq))
}

fn is_open_suspension(e: &JournalEntry, all: &[JournalEntry]) -> bool {
    matches!(e.kind.as_str(), "external" | "approval")
        && e.status == "suspended"
        && !all
            .iter()
            .any(|r| matches!(r.kind.as_str(), "resolution" | "abandon") && r.ref_seq == Some(e.seq))
}

/// Classify one run (docs/engine-model.md 7.1).
pub async fn audit_run<J: JournalStore + MetaLookup>(
    store: &J,
    run_id: &str,
) -> Result<RunAudit, StoreError> {
    let meta = store.get_meta(run_id).await?;
    let entries = store.load(run_id).await?;
    Ok(classify(run_id, meta.map(|m| m.status), &entries))
}

/// The decision table as a pure function.
pub fn classify(run_id: &str, meta_status: Option<RunStatus>, entries: &[JournalEntry]) -> RunAudit {
    let settle = last_run_settle(entries);
    let dangling = entries.iter().filter(|e| is_dangling(e, entries)).count();
    let open = entries.iter().filter(|e| is_open_suspension(e, entries)).count();
    let tail: &[JournalEntry] = match settle {
        Some((seq, _)) => {
            let at = entries.iter().position(|e| e.seq == seq).map_or(entries.len(), |i| i + 1);
            &entries[at..]
        }
        None => &[],
    };
    let mut audit = RunAudit {
        run_id: run_id.to_string(),
        verdict: Verdict::Consistent,
        repair_to: None,
        meta_status,
        journal_entries: entries.len(),
        journal_settle: settle.map(|(_, s)| s),
        entries_after_settle: tail.len(),
        dangling_dispatches: dangling,
        open_suspensions: open,
        reason: String::new(),
    };
    let (verdict, repair_to, reason) = match (meta_status, settle) {
        (None, _) if entries.is_empty() => {
            (Verdict::Consistent, None, "no journal and no meta row".to_string())
        }
        (None, _) => (
            Verdict::Suspect,
            None,
            "a journal without a meta row (a crash before the first meta write)".to_string(),
        ),
        (Some(meta), Some((_, recorded))) => {
            let derived = if tail.iter().any(|e| is_dangling(e, entries)) {
                RunStatus::Running
            } else if !tail.is_empty() {
                if open > 0 {
                    RunStatus::Suspended
                } else {
                    RunStatus::Running
                }
            } else {
                recorded
            };
            if meta == derived {
                (Verdict::Consistent, None, format!("meta {meta} matches the journal"))
            } else if meta.is_terminal() && !derived.is_terminal() {
                (
                    Verdict::Stranded,
                    Some(derived),
                    format!("terminal meta {meta} over live journal work ({derived})"),
                )
            } else {
                (Verdict::MetaBehind, Some(derived), format!("meta {meta} behind the journal ({derived})"))
            }
        }
        (Some(meta), None) if meta.is_terminal() && dangling > 0 => (
            Verdict::Stranded,
            Some(RunStatus::Running),
            format!("terminal meta {meta} over {dangling} dangling dispatch(es) and no journaled settle"),
        ),
        (Some(meta @ (RunStatus::Ok | RunStatus::Exhausted)), None) if open > 0 => (
            Verdict::Suspect,
            None,
            format!("meta {meta} with {open} open suspension(s) and no journaled settle"),
        ),
        (Some(meta), None) if meta.is_terminal() => {
            (Verdict::Consistent, None, "terminal meta over a structurally quiet journal".to_string())
        }
        (Some(_), None) => (Verdict::Consistent, None, "meta is resumable".to_string()),
    };
    audit.verdict = verdict;
    audit.repair_to = repair_to;
    audit.reason = reason;
    audit
}

/// Re-audit and, if there is a repair and a meta row, rewrite `status` (and `updatedAt`
/// = `now`) carrying `lease`. Returns the audit and whether it wrote.
pub async fn reconcile_run_meta<J: JournalStore + MetaLookup>(
    store: &J,
    run_id: &str,
    lease: Option<&Lease>,
    now: String,
) -> Result<(RunAudit, bool), StoreError> {
    let audit = audit_run(store, run_id).await?;
    let Some(repair) = audit.repair_to else {
        return Ok((audit, false));
    };
    let Some(mut meta) = store.get_meta(run_id).await? else {
        return Ok((audit, false));
    };
    meta.status = repair;
    meta.updated_at = Some(now);
    store.put_meta(&meta, lease).await?;
    Ok((audit, true))
}

/// What the operator probe did to one run.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum RepairAction {
    /// Nothing to repair (consistent, or an ambiguous `suspect` that is never rewritten).
    None,
    /// The meta status was rewritten.
    Repaired,
    /// A live owner holds the run: left alone, never raced.
    SkippedLiveOwner,
    /// The repair failed (the error, in words).
    Failed(String),
}

/// rulvar's `runs audit --repair` for one run: a brief lease of `owner` (a live owner is
/// skipped), re-audit and repair under it (`reconcile_run_meta`), release. A crash
/// (`StoreError::Crashed`) is returned as the error; every other failure is reported in
/// the action.
pub async fn repair_run<J: JournalStore + LeasableStore + MetaLookup>(
    store: &J,
    env: &Rc<dyn Env>,
    run_id: &str,
    owner: &str,
) -> Result<RepairAction, StoreError> {
    let lease = match store.acquire(run_id, owner).await {
        Ok(l) => l,
        Err(StoreError::LeaseHeld { .. }) => return Ok(RepairAction::SkippedLiveOwner),
        Err(e @ StoreError::Crashed { .. }) => return Err(e),
        Err(e) => return Ok(RepairAction::Failed(e.to_string())),
    };
    let site = FaultSite {
        point: FaultPoint::EngineRepairAfterAcquire,
        run_id: Some(run_id),
        epoch: Some(lease.epoch.0),
    };
    if let Some(f) = env.fault(&site) {
        f.await.map_err(|_| StoreError::Crashed { point: FaultPoint::EngineRepairAfterAcquire.name() })?;
    }
    let result = reconcile_run_meta(store, run_id, Some(&lease), iso_time(env.now_ms())).await;
    if let Err(e @ StoreError::Crashed { .. }) = &result {
        return Err(e.clone());
    }
    if let Err(e @ StoreError::Crashed { .. }) = store.release(&lease).await {
        return Err(e);
    }
    Ok(match result {
        Ok((_, true)) => RepairAction::Repaired,
        Ok((_, false)) => RepairAction::None,
        Err(e) => RepairAction::Failed(e.to_string()),
    })
}

/// Audit every run in the catalog (a journal with no meta row never shows up here).
pub async fn audit_runs<J: JournalStore + MetaLookup>(store: &J) -> Result<Vec<RunAudit>, StoreError> {
    let metas = store.list_runs(&RunFilter::default()).await?;
    let mut out = Vec::with_capacity(metas.len());
    for meta in metas {
        let entries = store.load(&meta.run_id).await?;
        out.push(classify(&meta.run_id, Some(meta.status), &entries));
    }
    Ok(out)
}
