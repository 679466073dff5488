//! The failures `fencesim explore` found under `current` (docs/explore-findings/), replayed:
//! each stored plan passes under `current` now that its defect is fixed. The second round's
//! plans must also still reach the window they were found in, or the replay would pass
//! without testing the fix.

use std::path::PathBuf;

use sim::history::{FaultKind, History, OpKind};
use sim::plan::Plan;
use sim::runner::{execute, Outcome};
use store::{FaultPoint, ProfileName};

fn replay(file: &str) -> Outcome {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../docs/explore-findings").join(file);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let plan: Plan = serde_json::from_str(&text).unwrap_or_else(|e| panic!("{file}: {e}"));
    let scenario = scenarios::catalog()
        .into_iter()
        .find(|s| s.name() == plan.scenario)
        .unwrap_or_else(|| panic!("{file}: scenario {} is not in the catalog", plan.scenario));
    let out = execute(scenario, ProfileName::Current, plan.seed, Some(plan), None).expect("run");
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

/// How many times a host submitted `run`.
fn submissions(h: &History, run: &str) -> usize {
    h.facts
        .iter()
        .filter(|f| matches!(&f.kind, sim::history::FactKind::Submitted { run_id, .. } if run_id == run))
        .count()
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
    let run = "tmp-1_";
    assert!(
        injected(h, FaultPoint::SqliteBlobGetBeforeRead, FaultKind::Stall, Some(run)),
        "the plan no longer stalls {run}'s checkpoint read"
    );
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

#[test]
fn the_heal_waits_for_a_sweep_stalled_across_it() {
    let out = replay("all-runs-settle-after-heal-866119494.json");
    let h = &out.history;
    assert!(
        injected(h, FaultPoint::WorkerSweepAfterAcquire, FaultKind::Stall, None),
        "the plan no longer stalls a sweep"
    );
    // The stalled sweep's late drive of run-10 settles it before the world stops.
    assert!(payload_has(h, "run-10", OpKind::PutMeta, "\"status\":\"ok\""), "run-10 never settled ok");
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

/// `all-runs-settle-after-heal-670897103.json` (stop 32): worker n1 settles `run-1_`
/// suspended, lists it with its suspension open, and its offline resolution's acquire stalls
/// 572 ms. Meanwhile n0 resumes the run and a cancel settles it. The resolution lands after
/// the heal, past the cancelled settle, and the audit repair that follows makes the run
/// `running` (stranded: a terminal meta over live journal work). Before the operator duties
/// counted as in flight, the heal had already seen every run terminal and stopped the world,
/// and the run ended `running`. Now the heal waits, a worker drives the revived run, and it
/// settles.
#[test]
fn a_resolution_stalled_across_the_heal_is_waited_for_and_the_run_it_revives_settles() {
    use sim::history::{Call, FactKind};
    let out = replay("all-runs-settle-after-heal-670897103.json");
    let h = &out.history;
    let healed = h.facts.iter().find(|f| matches!(f.kind, FactKind::Healed)).expect("a heal").at_ns;
    let mut after: Vec<&Call> = h
        .calls
        .iter()
        .filter(|c| c.run_id == "run-1_" && c.applied.is_some() && c.invoked_ns > healed)
        .filter(|c| matches!(c.op, OpKind::Append | OpKind::PutMeta))
        .collect();
    after.sort_by_key(|c| c.applied.as_ref().map(|a| a.order));
    let payload = |c: &Call| {
        serde_json::from_str::<serde_json::Value>(c.args.payload.as_deref().unwrap_or("null")).unwrap()
    };
    let status = |c: &Call| payload(c).get("status").and_then(|s| s.as_str()).unwrap_or("").to_string();
    assert!(after.len() >= 3, "the run is written after the heal: {} writes", after.len());
    // The window: the stalled resolution lands first, then the repair's meta write.
    assert_eq!(after[0].op, OpKind::Append);
    assert_eq!(payload(after[0]).get("kind").and_then(|k| k.as_str()), Some("resolution"));
    assert!(
        payload_has(h, "run-1_", OpKind::PutMeta, "\"status\":\"cancelled\""),
        "the run was cancelled before the resolution landed"
    );
    assert_eq!((after[1].op, status(after[1]).as_str()), (OpKind::PutMeta, "running"));
    // The revived run is driven again and settles: its last meta write is terminal.
    let last = after.iter().rev().find(|c| c.op == OpKind::PutMeta).expect("a meta write");
    assert!(
        matches!(status(last).as_str(), "ok" | "error" | "cancelled" | "exhausted"),
        "the run ends {}",
        status(last)
    );
}

/// `deleted-run-leaves-no-blobs-245190739.json` (stop 32): host n3's unleased `deleteRun` of
/// the cancelled `run-1x` listed its blobs, deleted them, and paused before its journal
/// delete; meanwhile worker n1, from a listing taken before the cancel, resumed the run under
/// its lease and put `run-1x/ckpt/29`; n3's journal delete then left that blob behind. A host
/// that deletes a run someone holds, with no lease, decides so (the RFC leaves unleased
/// deletes to the host; `no_live_run_deleted` does not judge them either), so
/// `deleted_run_leaves_no_blobs` no longer counts a blob a lease holder put after such a
/// cascade's listing. The exemption is that narrow: the same history with the put made under
/// no lease is still judged a leftover.
#[test]
fn a_blob_a_holder_put_after_an_unleased_host_cascade_listed_the_run_is_the_hosts_decision() {
    let mut out = replay("deleted-run-leaves-no-blobs-245190739.json");
    let ttl_ms = out.plan.knobs.ttl_ms;
    let h = &out.history;
    let run = "run-1x";
    let del = h
        .calls
        .iter()
        .find(|c| c.op == OpKind::Delete && c.run_id == run && c.applied.is_some() && c.lease.is_none())
        .expect("the host's unleased journal delete");
    let listed_at = h
        .calls
        .iter()
        .filter(|c| {
            c.op == OpKind::BlobList
                && c.node == del.node
                && c.run_id == run
                && c.invoked_ns <= del.invoked_ns
        })
        .filter_map(|c| c.seen_at)
        .max()
        .expect("the cascade's listing");
    let order = |c: &sim::history::Call| c.applied.as_ref().map_or(usize::MAX, |a| a.order);
    // The last put before the delete (a checkpoint is put again each turn: the last write wins).
    let put = h
        .calls
        .iter()
        .filter(|c| {
            c.op == OpKind::BlobPut
                && c.run_id == run
                && c.lease.is_some()
                && order(c) >= listed_at
                && order(c) < order(del)
        })
        .max_by_key(|c| order(c))
        .expect("a blob put under a lease after the listing, before the delete");
    let deleted_later = h.calls.iter().any(|c| {
        c.op == OpKind::BlobDelete
            && c.applied.is_some()
            && c.args.blob_ref == put.args.blob_ref
            && order(c) > order(put)
            && order(c) < order(del)
    });
    assert!(!deleted_later, "the blob is still stored when the delete applies");
    let id = put.id;
    let i = out.history.calls.iter().position(|c| c.id == id).unwrap();
    out.history.calls[i].lease = None;
    let expect = sim::verdict::Expect { contiguous_seqs: false, ttl_ms: Some(ttl_ms) };
    let violations = sim::oracle::judge(&out.history, &out.fin, expect);
    assert!(
        violations.iter().any(|v| v.property == "deleted_run_leaves_no_blobs"),
        "an unleased put left behind is still a leftover: {violations:?}"
    );
}
