//! The failures `fencesim explore` found under `current` (docs/explore-findings/), replayed:
//! each stored plan passes under `current` now that its defect is fixed. The second round's
//! plans must also still reach the window they were found in, or the replay would pass
//! without testing the fix.

use std::path::PathBuf;

use sim::history::{FaultKind, History, OpKind};
use sim::plan::Plan;
use sim::runner::{execute, Outcome};
use store::{FaultPoint, ProfileName};

/// The stored plan `file` (a path under docs/explore-findings/), run under `current`.
fn run_stored(file: &str) -> Outcome {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../docs/explore-findings").join(file);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let plan: Plan = serde_json::from_str(&text).unwrap_or_else(|e| panic!("{file}: {e}"));
    let scenario = scenarios::catalog()
        .into_iter()
        .find(|s| s.name() == plan.scenario)
        .unwrap_or_else(|| panic!("{file}: scenario {} is not in the catalog", plan.scenario));
    execute(scenario, ProfileName::Current, plan.seed, Some(plan), None).expect("run")
}

fn replay(file: &str) -> Outcome {
    let out = run_stored(file);
    assert!(out.violations.is_empty(), "{file} fails under current: {:?}", out.violations);
    out
}

fn payload_has(h: &History, run: &str, op: OpKind, needle: &str) -> bool {
    h.calls.iter().any(|c| {
        c.op == op
            && c.run_id == run
            && c.applied.is_some()
            && c.args.payload.as_deref().is_some_and(|p| p.contains(needle))
    })
}

/// Whether the plan injected `kind` at `point` (for `run`, when given).
fn injected(h: &History, point: FaultPoint, kind: FaultKind, run: Option<&str>) -> bool {
    h.faults
        .iter()
        .any(|f| f.point == point && f.kind == kind && (run.is_none() || f.run_id.as_deref() == run))
}

/// The (node, incarnation) of each host submission of `run`, in order.
fn submitters(h: &History, run: &str) -> Vec<(u32, u32)> {
    h.facts
        .iter()
        .filter(|f| matches!(&f.kind, sim::history::FactKind::Submitted { run_id, .. } if run_id == run))
        .map(|f| (f.node, f.incarnation))
        .collect()
}

/// How many times a host submitted `run`.
fn submissions(h: &History, run: &str) -> usize {
    submitters(h, run).len()
}

/// The worker grants of `run` that applied after its first terminal meta write (sweeps whose
/// listing predates the settle) and before the run was next deleted (a host may submit it
/// again, and sweeps of that new run are not late), each with whether anything was written
/// under it.
fn late_sweeps(h: &History, run: &str) -> Vec<(u64, bool)> {
    let terminal = ["ok", "error", "cancelled", "exhausted"].map(|s| format!("\"status\":\"{s}\""));
    let settled = h
        .calls
        .iter()
        .filter(|c| c.op == OpKind::PutMeta && c.run_id == run)
        .filter(|c| {
            c.args.payload.as_deref().is_some_and(|p| terminal.iter().any(|t| p.contains(t.as_str())))
        })
        .filter_map(|c| c.applied.as_ref().map(|a| a.order))
        .min();
    let Some(settled) = settled else { return Vec::new() };
    let deleted = h
        .calls
        .iter()
        .filter(|c| c.op == OpKind::Delete && c.run_id == run)
        .filter_map(|c| c.applied.as_ref().map(|a| a.order))
        .filter(|&o| o > settled)
        .min()
        .unwrap_or(usize::MAX);
    h.calls
        .iter()
        .filter(|c| {
            c.op == OpKind::Acquire
                && c.run_id == run
                && c.applied.as_ref().is_some_and(|a| a.order > settled && a.order < deleted)
                && c.args.actor.as_deref().is_some_and(|a| a.starts_with("worker-"))
        })
        .filter_map(|c| c.granted.as_ref().map(|l| l.epoch.0))
        .map(|epoch| {
            let wrote = h.calls.iter().any(|c| {
                matches!(c.op, OpKind::PutMeta | OpKind::Append | OpKind::BlobPut)
                    && c.run_id == run
                    && c.applied.is_some()
                    && c.lease.as_ref().is_some_and(|l| l.epoch.0 == epoch)
            });
            (epoch, wrote)
        })
        .collect()
}

#[test]
fn every_stored_explore_finding_passes_under_current() {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../docs/explore-findings");
    let mut files: Vec<String> = std::fs::read_dir(&dir)
        .expect("docs/explore-findings")
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter(|n| n.ends_with(".json"))
        .collect();
    files.sort();
    assert!(files.len() >= 5, "expected the stored plans, found {files:?}");
    for f in &files {
        replay(f);
    }
}

#[test]
fn a_cancel_during_a_dangling_redispatch_checkpoint_read_drains_it() {
    let out = replay("journal-never-behind-meta-39436133.json");
    let h = &out.history;
    // The window: a stall inside the checkpoint read of the resumed dangling dispatch. It
    // was `tmp-1x`'s when explore found it; since two-approvals' reviser checkpoints every
    // turn (stop 19) the same stall lands in `tmp-1_`'s resume of its reviser instead.
    // Since stop 51 a resume first reads the run's deletion record (a bare-ref get), so the
    // plan's stall moved from node 1's first blob get to its fourth (re-pinned in stop 51):
    // the checkpoint read of the resumed dangling dispatch.
    let run = "tmp-1_";
    let stalled_checkpoint_read = h.faults.iter().any(|f| {
        f.point == FaultPoint::SqliteBlobGetBeforeRead
            && f.kind == FaultKind::Stall
            && f.run_id.as_deref() == Some(run)
            && f.call
                .and_then(|i| h.calls.get(i))
                .is_some_and(|c| c.args.blob_ref.as_deref().is_some_and(|r| r.contains("/ckpt/")))
    });
    assert!(stalled_checkpoint_read, "the plan no longer stalls {run}'s checkpoint read");
    // The drain journals the cut dispatch's `cancelled` terminal, then the settle.
    assert!(payload_has(h, run, OpKind::Append, "\"status\":\"cancelled\""), "no cancelled terminal");
    assert!(payload_has(h, run, OpKind::PutMeta, "\"status\":\"cancelled\""), "no cancelled settle");
}

#[test]
fn a_delete_run_cut_after_its_blobs_is_not_a_prune() {
    let out = replay("prune-only-spent-checkpoints-501828839.json");
    let h = &out.history;
    assert!(
        injected(h, FaultPoint::EngineDeleteAfterBlobs, FaultKind::Crash, None),
        "the plan no longer crashes a deleteRun after its blob deletes"
    );
    assert!(
        h.calls.iter().any(|c| c.op == OpKind::BlobDelete && c.run_id == "run-10" && c.applied.is_some()),
        "no checkpoint delete of run-10 applied"
    );
    // One step earlier: the crash inside the cascade's blob delete, after its commit.
    let out = replay("prune-only-spent-checkpoints-765791116.json");
    assert!(
        injected(&out.history, FaultPoint::SqliteBlobDeleteAfterCommit, FaultKind::Crash, Some("run-1_")),
        "the plan no longer crashes run-1_'s cascade inside its blob delete"
    );
    // A host's unleased deleteRun, cut after its blob deletes.
    let out = replay("prune-only-spent-checkpoints-994855018.json");
    assert!(
        injected(&out.history, FaultPoint::EngineDeleteAfterBlobs, FaultKind::Crash, Some("run-1")),
        "the plan no longer crashes run-1's unleased cascade"
    );
    assert!(
        out.history
            .calls
            .iter()
            .any(|c| c.op == OpKind::BlobDelete && c.run_id == "run-1" && c.lease.is_none()),
        "run-1's checkpoint is no longer deleted without a lease"
    );
}

/// `all-runs-settle-after-heal-866119494.json` (stop 12): worker n0's sweep stalls across the
/// start of the heal while `run-10` settles `cancelled`, then goes on down its old listing and
/// acquires `run-10`. Before `drive_rechecks` (stop 37) it resumed the run, which was still
/// going when the world stopped; the heal now waits for sweeps in flight, and the sweep re-reads
/// the meta under its lease and leaves the cancelled run alone.
#[test]
fn the_heal_waits_for_a_sweep_stalled_across_it() {
    use sim::history::FactKind;
    let out = replay("all-runs-settle-after-heal-866119494.json");
    let h = &out.history;
    assert!(
        injected(h, FaultPoint::WorkerSweepAfterAcquire, FaultKind::Stall, None),
        "the plan no longer stalls a sweep"
    );
    let healed = h.facts.iter().find(|f| matches!(f.kind, FactKind::Healed)).expect("a heal").at_ns;
    let late = late_sweeps(h, "run-10");
    assert!(!late.is_empty(), "no sweep acquired run-10 after its cancel");
    assert!(late.iter().all(|&(_, wrote)| !wrote), "a late sweep resumed the cancelled run-10: {late:?}");
    assert!(
        h.calls.iter().any(|c| c.op == OpKind::Acquire
            && c.run_id == "run-10"
            && c.node == 0
            && c.applied.as_ref().is_some_and(|a| a.at_ns > healed)),
        "the stalled sweep's acquire of run-10 no longer lands after the heal began"
    );
}

#[test]
fn a_restarted_host_submits_a_run_that_never_got_its_meta() {
    let out = replay("engine-quorum-39436133.json");
    let h = &out.history;
    assert!(
        injected(h, FaultPoint::SqlitePutMetaAfterCheck, FaultKind::Crash, None),
        "the plan no longer crashes the submission before its meta"
    );
    assert_eq!(submissions(h, "tmp-1"), 2, "the restarted host did not submit tmp-1 again");
}

#[test]
fn a_host_submits_again_a_run_its_failed_submission_never_persisted() {
    let out = replay("engine-quorum-364595336.json");
    let h = &out.history;
    for run in ["run-1", "run-10"] {
        assert_eq!(submissions(h, run), 2, "{run}: its failed submission was not made again");
    }
    assert!(
        h.calls.iter().any(|c| c.op == OpKind::Acquire && c.run_id == "run-1" && c.outcome.is_busy()),
        "run-1's first acquire is no longer refused busy"
    );
}

/// `all-runs-settle-after-heal-670897103.json` (stop 32): worker n1 settled `run-1_`
/// suspended and its offline resolution's acquire stalled across the heal, while n0, from a
/// listing taken before a cancel, resumed the run; the late resolution and the audit repair
/// then revived it (a terminal meta over live journal work), and the heal now counts operator
/// duties as in flight. Since `drive_rechecks` (stop 37) no sweep resumes a run that settled
/// after its listing, and the plan's schedule goes another way: `run-1_` settles `ok` and the
/// stale sweeps that acquire it afterwards write nothing. What this plan still pins is that
/// re-check; the heal's wait is argued in docs/explore-findings/README.md.
#[test]
fn stale_sweeps_of_a_settled_run_write_nothing() {
    let out = replay("all-runs-settle-after-heal-670897103.json");
    let h = &out.history;
    let late = late_sweeps(h, "run-1_");
    assert!(late.len() >= 2, "the stale sweeps no longer reach run-1_ after its settle: {late:?}");
    assert!(late.iter().all(|&(_, wrote)| !wrote), "a stale sweep resumed the settled run-1_: {late:?}");
}

/// `deleted-run-leaves-no-blobs-245190739.json` (stop 32): host n3's unleased `deleteRun` of
/// the cancelled `run-1x` listed its blobs and paused before its journal delete; worker n1,
/// from a listing taken before the cancel, resumed the run and put a checkpoint the cascade
/// never saw. `deleted_run_leaves_no_blobs` stopped counting such a put (the unit test
/// `a_blob_a_holder_put_after_an_unleased_host_cascade_listed_the_run_is_not_a_leftover`
/// pins that exemption and its limit). Since `drive_rechecks` (stop 37) the stale sweep
/// leaves the cancelled run alone: it acquires after the cancel and writes nothing, and the
/// host's unleased delete removes a run that is still cancelled. Since stop 51 every cascade
/// puts the run's deletion record first, one more blob put per cascade: node 3's pause at its
/// first blob put is now at its second (re-pinned), so the same host cascade is paused.
#[test]
fn a_stale_sweep_leaves_a_cancelled_run_to_the_hosts_delete() {
    let out = replay("deleted-run-leaves-no-blobs-245190739.json");
    let h = &out.history;
    let run = "run-1x";
    assert!(
        h.calls
            .iter()
            .any(|c| c.op == OpKind::Delete && c.run_id == run && c.applied.is_some() && c.lease.is_none()),
        "no unleased host delete of {run}"
    );
    let late = late_sweeps(h, run);
    assert!(!late.is_empty(), "no sweep acquired {run} after its cancel");
    assert!(late.iter().all(|&(_, wrote)| !wrote), "a stale sweep resumed the cancelled {run}: {late:?}");
}

/// `sweeps-resume-only-live-runs-143614048.json` (stop 37): worker n3 listed `run-1x` live,
/// stalled 820 ms before its acquire's `BEGIN` while the run was cancelled, then acquired it and
/// resumed it (rulvar's sweep decides from its listing); host n3's unleased delete of the run
/// it saw cancelled then deleted it while it ran. The sweep now re-reads the meta under its
/// lease (`drive_rechecks`) and leaves the cancelled run alone.
#[test]
fn a_sweep_whose_run_was_cancelled_since_its_listing_does_not_resume_it() {
    let out = replay("sweeps-resume-only-live-runs-143614048.json");
    let h = &out.history;
    let run = "run-1x";
    assert!(
        injected(h, FaultPoint::SqliteAcquireBeforeBegin, FaultKind::Stall, Some(run)),
        "the plan no longer stalls an acquire of {run}"
    );
    let late = late_sweeps(h, run);
    assert!(!late.is_empty(), "no sweep acquired {run} after its cancel");
    assert!(late.iter().all(|&(_, wrote)| !wrote), "a late sweep resumed the cancelled {run}: {late:?}");
}

/// The applied run_settle appends of `run`, in apply order: (epoch, status word, apply order).
fn applied_settles(h: &History, run: &str) -> Vec<(u64, String, usize)> {
    let mut out: Vec<(u64, String, usize)> = h
        .calls
        .iter()
        .filter(|c| c.op == OpKind::Append && c.run_id == run)
        .filter_map(|c| {
            let v: serde_json::Value = serde_json::from_str(c.args.payload.as_deref()?).ok()?;
            (v["value"]["decisionType"] == "run_settle").then_some(())?;
            let status = v["value"]["runStatus"].as_str()?.to_string();
            Some((c.lease.as_ref()?.epoch.0, status, c.applied.as_ref()?.order))
        })
        .collect();
    out.sort_by_key(|s| s.2);
    out
}

/// `no-stranded-run-397809190.json` (stop 49, queue-solo, three contended appends): `run-1`
/// settles `error`; a host's retry journals new work and completes, but its settle append is
/// busy; a worker's resume then fails its first append (busy) and ends `error`, the old
/// settle's status. rulvar's write-on-change rule asks for no settle there and the terminal
/// meta landed over the unsettled work (stranded); `current`'s wider third arm journals it.
#[test]
fn a_resume_settles_work_journaled_after_an_older_settle() {
    let out = replay("no-stranded-run-397809190.json");
    let h = &out.history;
    let run = "run-1";
    assert!(
        injected(h, FaultPoint::SqliteAppendBeforeBegin, FaultKind::Contend, Some(run)),
        "the plan no longer contends run-1's appends"
    );
    let settles = applied_settles(h, run);
    let (epoch, status, order) = settles.last().cloned().expect("run-1 was settled");
    assert_eq!(status, "error", "{settles:?}");
    // The last settle repeats the status of the one before it ...
    assert!(settles.len() >= 2 && settles[settles.len() - 2].1 == "error", "{settles:?}");
    // ... its grant applied nothing before it (a busy first append) ...
    let own_work = h.calls.iter().any(|c| {
        c.op == OpKind::Append
            && c.run_id == run
            && c.lease.as_ref().is_some_and(|l| l.epoch.0 == epoch)
            && c.applied.as_ref().is_some_and(|a| a.order < order)
    });
    assert!(!own_work, "the settling grant (epoch {epoch}) did work of its own: not the window");
    // ... and another grant's work lies between the two settles.
    let prev = settles[settles.len() - 2].2;
    let between = h.calls.iter().any(|c| {
        c.op == OpKind::Append
            && c.run_id == run
            && c.lease.as_ref().is_some_and(|l| l.epoch.0 != epoch)
            && c.applied.as_ref().is_some_and(|a| a.order > prev && a.order < order)
    });
    assert!(between, "no unsettled work between the two error settles");
}

/// `only-terminal-runs-deleted-473235481.json` (stop 49, queue-solo): host n2 reads `tmp-1_`
/// terminal and deletes it without a lease; its delete stalls before it begins, while a retry
/// by host n0 boots the settled run (meta `running`, its terminal meta then refused as its
/// lease lapsed). The unleased delete lands over the `running` meta: rulvar's unfenced host
/// decision, no longer judged by the run's status (only leased deletes are). Since stop 51 the
/// cascade writes the run's deletion record before its first blob delete, and a retry that
/// read the record would refuse the run; the plan's stall was re-pinned from node 2's journal
/// delete to its record put (`sqlite.blob_put.before_begin`, occurrence 1), so the retry
/// boots before the record lands and the race is the same.
#[test]
fn an_unleased_delete_racing_a_retry_is_not_judged_by_status() {
    let out = replay("only-terminal-runs-deleted-473235481.json");
    let h = &out.history;
    let run = "tmp-1_";
    let delete = h
        .calls
        .iter()
        .find(|c| c.op == OpKind::Delete && c.run_id == run && c.lease.is_none() && c.applied.is_some())
        .expect("an unleased delete of tmp-1_ applied");
    let at = delete.applied.as_ref().map(|a| a.order).unwrap_or_default();
    let meta_before = h
        .calls
        .iter()
        .filter(|c| c.op == OpKind::PutMeta && c.run_id == run)
        .filter(|c| c.applied.as_ref().is_some_and(|a| a.order < at))
        .max_by_key(|c| c.applied.as_ref().map(|a| a.order))
        .and_then(|c| c.args.payload.clone())
        .unwrap_or_default();
    assert!(
        meta_before.contains("\"status\":\"running\""),
        "the unleased delete no longer lands over a running meta: {meta_before}"
    );
}

/// How a deletion cascade of the stop-50 finding was cut.
#[derive(Debug, Clone, Copy)]
enum Cut {
    /// A crash at `worker.retention.after_blobs`.
    RetentionCrash,
    /// The journal delete refused `busy`.
    BusyJournalDelete,
}

/// Stop 50's finding, fixed in stop 51 (`delete_marks_generation`, docs/engine-model.md 6.1):
/// a `deleteRun` cascade deleted a run's checkpoint and was cut before its journal and meta
/// were deleted (a crash, or its journal delete meeting another writer's lock); a host's
/// retry then resumed the half-deleted run, found no checkpoint, and paid the dispatch's
/// completed turn again. The plan must still reach that window: the cascade recorded the
/// generation before its first blob delete, deleted a checkpoint, and was cut; then a host's
/// retry of the run came, and was refused as a run being deleted, with nothing paid.
fn cut_cascade_then_retry_refused(file: &str, run: &str, cut: Cut) {
    let out = replay(file);
    let h = &out.history;
    let cut_at = match cut {
        Cut::RetentionCrash => h
            .faults
            .iter()
            .find(|f| {
                f.point == FaultPoint::WorkerRetentionAfterBlobs
                    && f.kind == FaultKind::Crash
                    && f.run_id.as_deref() == Some(run)
            })
            .map(|f| f.at_ns),
        Cut::BusyJournalDelete => h
            .calls
            .iter()
            .find(|c| c.op == OpKind::Delete && c.run_id == run && c.outcome.refusal() == Some("busy"))
            .map(|c| c.invoked_ns),
    }
    .unwrap_or_else(|| panic!("{file}: the plan no longer cuts {run}'s cascade ({cut:?})"));
    let applied_before_cut = |op: OpKind, blob: fn(&str) -> bool| {
        h.calls.iter().any(|c| {
            c.op == op
                && c.run_id == run
                && c.applied.is_some()
                && c.invoked_ns <= cut_at
                && c.args.blob_ref.as_deref().is_some_and(blob)
        })
    };
    assert!(
        applied_before_cut(OpKind::BlobPut, |r| !r.contains('/')),
        "{file}: the cut cascade wrote no deletion record of {run}"
    );
    assert!(
        applied_before_cut(OpKind::BlobDelete, |r| r.contains("/ckpt/")),
        "{file}: the cut cascade deleted no checkpoint of {run}"
    );
    let refused = h.facts.iter().any(|f| {
        f.at_ns > cut_at
            && matches!(&f.kind, sim::history::FactKind::Failed { run_id, what, error }
                if run_id == run && what == "retry" && error.contains("is being deleted"))
    });
    assert!(refused, "{file}: no retry of {run} after the cut was refused as a run being deleted");
    let paid_after = h.facts.iter().any(|f| {
        f.at_ns > cut_at && matches!(&f.kind, sim::history::FactKind::Paid { run_id, .. } if run_id == run)
    });
    assert!(!paid_after, "{file}: {run} was paid for after its cascade was cut");
}

#[test]
fn a_retry_of_a_run_whose_retention_cascade_crashed_is_refused_as_being_deleted() {
    cut_cascade_then_retry_refused(
        "checkpoint-never-regresses-759784738.json",
        "tmp-1_",
        Cut::RetentionCrash,
    );
}

#[test]
fn a_retry_of_a_run_whose_host_delete_met_a_busy_journal_delete_is_refused_as_being_deleted() {
    cut_cascade_then_retry_refused(
        "checkpoint-never-regresses-984556310.json",
        "run-10",
        Cut::BusyJournalDelete,
    );
}

/// `prune-only-spent-checkpoints-794874722.json` (stop 51, queue, run 13,805): host n0's
/// unleased `deleteRun` of the cancelled `tmp-1_` writes its deletion record and stalls; worker
/// n0's retention takes the run, deletes its checkpoint and its journal; the host's cascade
/// then deletes the same checkpoint (a no-op) and is cut before its journal delete.
/// `prune_only_spent_checkpoints` called that late delete unlawful because the run's meta was
/// missing; a missing meta means no live generation, so it now judges such a delete only over
/// a `running` or `suspended` meta (the unit test beside the property pins both sides).
#[test]
fn a_cut_host_cascade_deleting_after_retention_deleted_the_run_is_not_a_prune() {
    let out = replay("prune-only-spent-checkpoints-794874722.json");
    let h = &out.history;
    let run = "tmp-1_";
    let applied = |c: &sim::history::Call| c.applied.as_ref().map(|a| a.order);
    let journal_delete = h
        .calls
        .iter()
        .find(|c| c.op == OpKind::Delete && c.run_id == run && c.lease.is_some() && c.applied.is_some())
        .expect("retention deleted tmp-1_ under its lease");
    let gone = applied(journal_delete).unwrap_or_default();
    let host_record = h.calls.iter().any(|c| {
        c.op == OpKind::BlobPut
            && c.lease.is_none()
            && c.args.blob_ref.as_deref() == Some(run)
            && applied(c).is_some_and(|o| o < gone)
    });
    assert!(host_record, "the host's unleased cascade wrote no record before retention deleted {run}");
    let late = h.calls.iter().any(|c| {
        c.op == OpKind::BlobDelete
            && c.lease.is_none()
            && c.args.blob_ref.as_deref().is_some_and(|r| r.starts_with("tmp-1_/ckpt/"))
            && applied(c).is_some_and(|o| o > gone)
    });
    assert!(late, "the host's cascade deleted no checkpoint of {run} after retention deleted the run");
}

/// `no-stranded-run-867938276.json` (stop 51, queue-solo, search seed 4, run 889): worker n0's
/// segment of `run-1_` (two approvals, one still open) meets a busy receipt append, settles
/// `error` and writes meta `error`; an operator's offline answer to the open approval then
/// appended a resolution after the settle, live work under a terminal meta that no worker
/// resumes: the reconciler called the run stranded. Under `resolve_rechecks` the answer re-reads
/// the meta under its brief lease and is refused; nothing is appended after the settle.
#[test]
fn an_offline_answer_to_a_run_that_settled_error_is_refused() {
    let out = replay("no-stranded-run-867938276.json");
    let h = &out.history;
    let run = "run-1_";
    let ended = h
        .calls
        .iter()
        .filter(|c| c.op == OpKind::PutMeta && c.run_id == run && c.applied.is_some())
        .find(|c| c.args.payload.as_deref().is_some_and(|p| p.contains("\"status\":\"error\"")))
        .and_then(|c| c.applied.as_ref().map(|a| (a.order, c.returned_ns.unwrap_or_default())))
        .expect("run-1_ settled error");
    let refused = h.facts.iter().any(|f| {
        f.at_ns >= ended.1
            && matches!(&f.kind, sim::history::FactKind::Failed { run_id, what, error }
                if run_id == run && what == "resolve" && error.contains("has ended (error)"))
    });
    assert!(refused, "no offline answer to {run} was refused after it settled error");
    let appended_after = h.calls.iter().any(|c| {
        c.op == OpKind::Append && c.run_id == run && c.applied.as_ref().is_some_and(|a| a.order > ended.0)
    });
    assert!(!appended_after, "something was appended to {run} after its error settle");
}
