//! The reconciler: every row of the docs/engine-model.md 7.1 decision table, and the promise that
//! `reconcile_run_meta` rewrites only `status` and `updatedAt`.

mod engine_support;

use std::rc::Rc;

use engine_support::*;
use futures::executor::block_on;
use serde_json::{json, Value};
use store::engine::{audit_run, audit_runs, reconcile_run_meta, Verdict};
use store::{
    Env, InMemoryStore, JournalEntry, JournalStore, LeasableStore, ManualClock, ManualEnv, MetaLookup,
    RunMeta, RunStatus, Seq, SqliteOptions, SqliteStore, StoreError,
};

fn running(seq: u64) -> JournalEntry {
    let mut e = JournalEntry::new(seq, "agent", "running", json!({}));
    e.key = format!("op:{seq}");
    e
}
fn terminal(seq: u64, of: u64) -> JournalEntry {
    let mut e = JournalEntry::new(seq, "agent", "ok", json!("v"));
    e.key = format!("op:{of}");
    e.ref_seq = Some(Seq(of));
    e
}
fn settle(seq: u64, status: &str) -> JournalEntry {
    let mut e = JournalEntry::new(
        seq,
        "decision",
        "ok",
        json!({"decisionType": "run_settle", "runStatus": status, "segment": 1}),
    );
    e.key = "run-settle".into();
    e
}
fn suspended(seq: u64) -> JournalEntry {
    let mut e = JournalEntry::new(seq, "external", "suspended", json!({}));
    e.key = "await:k".into();
    e
}
fn resolution(seq: u64, of: u64) -> JournalEntry {
    let mut e = JournalEntry::new(seq, "resolution", "ok", json!(1));
    e.key = "await:k".into();
    e.ref_seq = Some(Seq(of));
    e
}

fn audit(meta: Option<RunStatus>, entries: Vec<JournalEntry>) -> store::engine::RunAudit {
    let env: Rc<dyn Env> = Rc::new(ManualEnv::new(ManualClock::starting_at(T0)));
    let store = InMemoryStore::new(env, TTL).unwrap();
    block_on(async {
        for e in &entries {
            store.append("RUN", e, None).await.unwrap();
        }
        if let Some(s) = meta {
            store.put_meta(&RunMeta::new("RUN", s), None).await.unwrap();
        }
        audit_run(&store, "RUN").await.unwrap()
    })
}

fn verdict(meta: Option<RunStatus>, entries: Vec<JournalEntry>) -> (Verdict, Option<RunStatus>) {
    let a = audit(meta, entries);
    (a.verdict, a.repair_to)
}

use RunStatus::*;

#[test]
fn no_meta_no_entries_is_consistent() {
    assert_eq!(verdict(None, vec![]), (Verdict::Consistent, None));
}

#[test]
fn a_journal_without_meta_is_suspect() {
    assert_eq!(verdict(None, vec![running(0)]), (Verdict::Suspect, None));
}

#[test]
fn settle_matching_meta_is_consistent() {
    let a = audit(Some(Ok), vec![running(0), terminal(1, 0), settle(2, "ok")]);
    assert_eq!((a.verdict, a.repair_to), (Verdict::Consistent, None));
    assert_eq!((a.journal_entries, a.journal_settle, a.entries_after_settle), (3, Some(Ok), 0));
    assert_eq!((a.dangling_dispatches, a.open_suspensions), (0, 0));
}

#[test]
fn meta_running_behind_an_ok_settle_is_meta_behind() {
    assert_eq!(
        verdict(Some(Running), vec![running(0), terminal(1, 0), settle(2, "ok")]),
        (Verdict::MetaBehind, Some(Ok))
    );
}

#[test]
fn stale_terminal_meta_contradicted_by_a_later_settle_is_meta_behind() {
    assert_eq!(
        verdict(Some(Ok), vec![running(0), terminal(1, 0), settle(2, "error")]),
        (Verdict::MetaBehind, Some(Error))
    );
}

#[test]
fn suspended_meta_over_live_tail_work_is_meta_behind_toward_running() {
    let a = audit(
        Some(Suspended),
        vec![suspended(0), settle(1, "suspended"), resolution(2, 0), running(3), terminal(4, 3)],
    );
    assert_eq!((a.verdict, a.repair_to), (Verdict::MetaBehind, Some(Running)));
    assert_eq!(a.entries_after_settle, 3);
}

#[test]
fn terminal_meta_over_a_dangling_tail_is_stranded() {
    let a = audit(Some(Ok), vec![running(0), terminal(1, 0), settle(2, "ok"), running(3)]);
    assert_eq!((a.verdict, a.repair_to), (Verdict::Stranded, Some(Running)));
    assert_eq!(a.dangling_dispatches, 1);
}

#[test]
fn terminal_meta_over_a_tail_with_an_open_suspension_is_stranded_toward_suspended() {
    let a = audit(Some(Error), vec![settle(0, "error"), suspended(1)]);
    assert_eq!((a.verdict, a.repair_to), (Verdict::Stranded, Some(Suspended)));
    assert_eq!(a.open_suspensions, 1);
}

#[test]
fn no_settle_terminal_meta_with_dangling_is_stranded() {
    assert_eq!(
        verdict(Some(Error), vec![running(0), terminal(1, 0), running(2)]),
        (Verdict::Stranded, Some(Running))
    );
}

#[test]
fn no_settle_ok_meta_with_open_suspension_is_suspect() {
    assert_eq!(verdict(Some(Ok), vec![suspended(0)]), (Verdict::Suspect, None));
    assert_eq!(verdict(Some(Exhausted), vec![suspended(0)]), (Verdict::Suspect, None));
    // A resolved suspension is not open.
    assert_eq!(verdict(Some(Ok), vec![suspended(0), resolution(1, 0)]), (Verdict::Consistent, None));
}

#[test]
fn no_settle_terminal_meta_over_a_quiet_journal_is_consistent() {
    assert_eq!(verdict(Some(Error), vec![running(0), terminal(1, 0)]), (Verdict::Consistent, None));
    assert_eq!(verdict(Some(Cancelled), vec![suspended(0)]), (Verdict::Consistent, None));
}

#[test]
fn no_settle_resumable_meta_is_consistent() {
    assert_eq!(verdict(Some(Running), vec![running(0)]), (Verdict::Consistent, None));
    assert_eq!(verdict(Some(Suspended), vec![suspended(0)]), (Verdict::Consistent, None));
}

fn object(meta: &RunMeta) -> serde_json::Map<String, Value> {
    match serde_json::to_value(meta).unwrap() {
        Value::Object(m) => m,
        _ => unreachable!(),
    }
}

#[test]
fn reconcile_rewrites_only_status_and_updated_at() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::starting_at(T0);
    let env: Rc<dyn Env> = Rc::new(ManualEnv::new(clock.clone()));
    block_on(async {
        let store =
            SqliteStore::open(SqliteOptions::new(dir.path().join("r.db")).ttl_ms(TTL), env).await.unwrap();
        for e in [running(0), terminal(1, 0), settle(2, "ok")] {
            store.append("RUN", &e, None).await.unwrap();
        }
        let text = r#"{"runId":"RUN","status":"running","updatedAt":"then","segments":7,"genesis":"g","name":"n","tags":["t"],"workflowName":"w","budgetUsd":1.25,"zeta":{"b":[1,2],"a":null},"alpha":"x"}"#;
        store.put_meta(&RunMeta::from_json(text).unwrap(), None).await.unwrap();
        let before = object(&store.get_meta("RUN").await.unwrap().unwrap());

        // A stale lease is refused by the fenced meta write: nothing changes.
        let stale = store.acquire("RUN", "a").await.unwrap();
        clock.advance(TTL + 1);
        let live = store.acquire("RUN", "b").await.unwrap();
        let err = reconcile_run_meta(&store, "RUN", Some(&stale), "now".into()).await.unwrap_err();
        assert!(matches!(err, StoreError::LeaseHeld { .. }));
        assert_eq!(object(&store.get_meta("RUN").await.unwrap().unwrap()), before);

        let (a, repaired) = reconcile_run_meta(&store, "RUN", Some(&live), "now".into()).await.unwrap();
        assert!(repaired);
        assert_eq!((a.verdict, a.repair_to), (Verdict::MetaBehind, Some(Ok)));
        let after = object(&store.get_meta("RUN").await.unwrap().unwrap());
        assert_eq!(after["status"], json!("ok"));
        assert_eq!(after["updatedAt"], json!("now"));
        assert_eq!(after.len(), before.len());
        for (k, v) in &before {
            if k != "status" && k != "updatedAt" {
                assert_eq!(
                    serde_json::to_string(&after[k]).unwrap(),
                    serde_json::to_string(v).unwrap(),
                    "{k}"
                );
            }
        }
        // Consistent now: a second pass writes nothing.
        let (a, repaired) = reconcile_run_meta(&store, "RUN", Some(&live), "later".into()).await.unwrap();
        assert_eq!((a.verdict, repaired), (Verdict::Consistent, false));
        assert_eq!(store.get_meta("RUN").await.unwrap().unwrap().updated_at.as_deref(), Some("now"));
    });
}

#[test]
fn suspect_runs_are_never_repaired_and_audit_runs_lists_only_meta_rows() {
    let env: Rc<dyn Env> = Rc::new(ManualEnv::new(ManualClock::starting_at(T0)));
    let store = InMemoryStore::new(env, TTL).unwrap();
    block_on(async {
        store.append("SUS", &suspended(0), None).await.unwrap();
        store.put_meta(&RunMeta::new("SUS", Ok), None).await.unwrap();
        store.append("ORPHAN", &running(0), None).await.unwrap();
        store.append("BEHIND", &settle(0, "ok"), None).await.unwrap();
        store.put_meta(&RunMeta::new("BEHIND", Running), None).await.unwrap();
        let (a, repaired) = reconcile_run_meta(&store, "SUS", None, "now".into()).await.unwrap();
        assert_eq!((a.verdict, repaired), (Verdict::Suspect, false));
        let (a, repaired) = reconcile_run_meta(&store, "ORPHAN", None, "now".into()).await.unwrap();
        assert_eq!((a.verdict, repaired), (Verdict::Suspect, false));
        assert_eq!(store.get_meta("ORPHAN").await.unwrap(), None, "never fabricated");
        let all = audit_runs(&store).await.unwrap();
        let ids: Vec<(&str, Verdict)> = all.iter().map(|a| (a.run_id.as_str(), a.verdict)).collect();
        assert_eq!(ids, [("BEHIND", Verdict::MetaBehind), ("SUS", Verdict::Suspect)]);
    });
}
