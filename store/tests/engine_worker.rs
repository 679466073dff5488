//! The queue worker: the sweep picks running and suspended runs, skips held leases and
//! unchanged parked runs, cancels a drive whose renew fails, and retention deletes terminal
//! runs with their blobs.

mod engine_support;

use std::collections::BTreeMap;
use std::rc::Rc;

use engine_support::*;
use futures::executor::block_on;
use serde_json::json;
use store::engine::{Engine, EngineError, Worker, Workflow};
use store::{
    Env, InMemoryStore, InMemoryTranscriptStore, JournalStore, LeasableStore, ManualClock, ManualEnv,
    MetaLookup, Profile, ProfileName, RunMeta, RunStatus, SqliteOptions, SqliteStore, TranscriptStore,
};

fn registry() -> BTreeMap<String, Workflow> {
    [Workflow::happy(), Workflow::limit(), Workflow::approval("go")]
        .into_iter()
        .map(|w| (w.name.clone(), w))
        .collect()
}

fn ok_only(meta: &RunMeta) -> bool {
    meta.status == RunStatus::Ok
}

/// A child process runs `happy` as `run` and dies after step two's running entry: the run is
/// left `running` with a dangling dispatch and the child's lease unreleased.
async fn crash_after_step_two_running(
    store: &InMemoryStore,
    blobs: &InMemoryTranscriptStore,
    env: &Rc<dyn Env>,
    run: &str,
) {
    let kill = KillStore::new(store.clone(), Matcher::Running, 2, false);
    let child =
        Engine::new(kill, blobs.clone(), TestEffects::new(), env.clone(), Profile::current(), "child");
    assert!(matches!(child.run(run, &Workflow::happy()).await, Err(EngineError::Crashed { .. })));
}

/// A `current` engine of owner `w` over the stores, with its counting world.
fn counting_engine(
    store: &InMemoryStore,
    blobs: &InMemoryTranscriptStore,
    env: &Rc<dyn Env>,
) -> (TestEffects, Rc<Engine<InMemoryStore, InMemoryTranscriptStore, TestEffects>>) {
    let world = TestEffects::new();
    let engine =
        Engine::new(store.clone(), blobs.clone(), world.clone(), env.clone(), Profile::current(), "w");
    (world, Rc::new(engine))
}

#[test]
fn sweep_drives_running_and_suspended_runs_and_skips_held_and_parked_ones() {
    let (clock, env, store, blobs) = memory();
    block_on(async {
        // CRASHED: a child died after step two's running entry (meta running).
        crash_after_step_two_running(&store, &blobs, &env, "CRASHED").await;
        // HELD: another child died the same way; its lease will be re-taken by someone else.
        crash_after_step_two_running(&store, &blobs, &env, "HELD").await;
        // PARKED: suspended on "go". DONE: settled ok.
        let host = Engine::new(
            store.clone(),
            blobs.clone(),
            TestEffects::new(),
            env.clone(),
            Profile::current(),
            "host",
        );
        assert_eq!(host.run("PARKED", &Workflow::approval("go")).await.unwrap().status, RunStatus::Suspended);
        assert_eq!(host.run("DONE", &Workflow::happy()).await.unwrap().status, RunStatus::Ok);
        clock.advance(TTL + 1);
        let other = store.acquire("HELD", "other").await.unwrap();

        let (world, engine) = counting_engine(&store, &blobs, &env);
        let worker = Worker::new(engine.clone(), "worker", registry(), None);
        let report = worker.sweep().await.unwrap();
        let driven: Vec<(&str, RunStatus)> =
            report.driven.iter().map(|(r, o)| (r.as_str(), o.status)).collect();
        assert_eq!(driven, [("CRASHED", RunStatus::Ok), ("PARKED", RunStatus::Suspended)]);
        assert_eq!(report.skipped_held, ["HELD"]);
        assert!(report.errors.is_empty(), "{:?}", report.errors);
        assert_eq!(world.paid(), 1, "CRASHED's dangling step two; PARKED replays");
        let meta = store.get_meta("CRASHED").await.unwrap().unwrap();
        assert_eq!((meta.status, meta.segments), (RunStatus::Ok, Some(2)));
        // The worker released what it drove.
        store.acquire("CRASHED", "probe").await.unwrap();

        // Nothing new for PARKED: skipped by the cache. HELD is still held.
        let report = worker.sweep().await.unwrap();
        assert!(report.driven.is_empty());
        assert_eq!(report.skipped_parked, ["PARKED"]);
        assert_eq!(report.skipped_held, ["HELD"]);

        // A resolution arrives and the lease on HELD lapses: both are driven to ok.
        engine.resolve_offline("PARKED", "go", json!("yes")).await.unwrap();
        store.release(&other).await.unwrap();
        let report = worker.sweep().await.unwrap();
        let driven: Vec<(&str, RunStatus)> =
            report.driven.iter().map(|(r, o)| (r.as_str(), o.status)).collect();
        assert_eq!(driven, [("HELD", RunStatus::Ok), ("PARKED", RunStatus::Ok)]);
        assert_eq!(
            report.driven[1].1.value,
            Some(json!({"draft": "draft:0", "go": "yes", "publish": "publish:0"}))
        );
        assert!(store.list_runs(&store::RunFilter::resumable()).await.unwrap().is_empty());
    });
}

#[test]
fn a_worker_renew_failure_cancels_the_drive() {
    let clock = ManualClock::starting_at(T0);
    let env: Rc<dyn Env> = Rc::new(ManualEnv::new(clock.clone()));
    let store = InMemoryStore::new(env.clone(), TTL).unwrap();
    let blobs = InMemoryTranscriptStore::new();
    block_on(async {
        let kill = KillStore::new(store.clone(), Matcher::Running, 1, false);
        let child =
            Engine::new(kill, blobs.clone(), TestEffects::new(), env.clone(), Profile::current(), "child");
        assert!(matches!(child.run("RUN", &Workflow::happy()).await, Err(EngineError::Crashed { .. })));
        clock.advance(TTL + 1);
        let flaky = KillStore::passthrough(store.clone());
        flaky.state.fail_renew.set(true);
        let world = TestEffects::new();
        world.on_paid(Box::new(|_| Some(Box::pin(Yield(3)))));
        let engine = Rc::new(Engine::new(flaky, blobs, world.clone(), env, Profile::current(), "w"));
        let report = Worker::new(engine, "worker", registry(), None).sweep().await.unwrap();
        assert_eq!(report.driven.len(), 1);
        assert_eq!(report.driven[0].1.status, RunStatus::Cancelled);
        let entries = store.load("RUN").await.unwrap();
        assert_eq!(entries[1].status, "cancelled");
        assert_eq!(settles(&entries), [("cancelled".to_string(), 2)]);
    });
}

#[test]
fn a_stopped_worker_cancels_its_drive_under_its_live_lease_and_sweeps_no_more() {
    let clock = ManualClock::starting_at(T0);
    let env: Rc<dyn Env> = Rc::new(ManualEnv::new(clock.clone()));
    let store = InMemoryStore::new(env.clone(), TTL).unwrap();
    let blobs = InMemoryTranscriptStore::new();
    block_on(async {
        for run in ["RUN", "NEXT"] {
            let kill = KillStore::new(store.clone(), Matcher::Running, 1, false);
            let child = Engine::new(
                kill,
                blobs.clone(),
                TestEffects::new(),
                env.clone(),
                Profile::current(),
                "child",
            );
            assert!(matches!(child.run(run, &Workflow::happy()).await, Err(EngineError::Crashed { .. })));
        }
        clock.advance(TTL + 1);
        let effects = TestEffects::new();
        // Every paid call takes a few polls: the stop lands while the drive is mid-body.
        effects.on_paid(Box::new(|_| Some(Box::pin(Yield(3)))));
        let engine =
            Rc::new(Engine::new(store.clone(), blobs, effects.clone(), env, Profile::current(), "w"));
        let worker = Worker::new(engine, "worker", registry(), None);
        let stopper = async {
            while effects.paid() == 0 {
                Yield(1).await;
            }
            worker.stop();
        };
        let (report, ()) = futures::join!(worker.sweep(), stopper);
        let report = report.unwrap();
        assert!(worker.stopped());
        assert_eq!(report.driven.len(), 1, "the sweep took no run after the stop: {report:?}");
        let (run, outcome) = &report.driven[0];
        assert_eq!(outcome.status, RunStatus::Cancelled);
        // The settle landed under the worker's live lease: the run_settle entry, then the meta.
        let entries = store.load(run).await.unwrap();
        assert_eq!(settles(&entries).last().map(|(s, _)| s.as_str()), Some("cancelled"));
        assert_eq!(store.get_meta(run).await.unwrap().unwrap().status, RunStatus::Cancelled);
        // The lease was released: anyone may take the run now, without waiting for the ttl.
        assert!(store.acquire(run, "someone").await.is_ok());
        let other = if run == "RUN" { "NEXT" } else { "RUN" };
        assert_eq!(store.get_meta(other).await.unwrap().unwrap().status, RunStatus::Running);
        assert_eq!(worker.sweep().await.unwrap(), store::engine::SweepReport::default());
    });
}

#[test]
fn retention_deletes_terminal_runs_with_their_blobs_on_memory() {
    let clock = ManualClock::starting_at(T0);
    let env: Rc<dyn Env> = Rc::new(ManualEnv::new(clock.clone()));
    let store = InMemoryStore::new(env.clone(), TTL).unwrap();
    let blobs = InMemoryTranscriptStore::new();
    block_on(async {
        let engine = Rc::new(Engine::new(
            store.clone(),
            blobs.clone(),
            TestEffects::new(),
            env,
            Profile::current(),
            "e",
        ));
        engine.run("OLD", &Workflow::limit()).await.unwrap();
        engine.run("PARKED", &Workflow::approval("go")).await.unwrap();
        assert_eq!(blobs.list("OLD").await.unwrap(), ["OLD/ckpt/0"]);
        let worker = Worker::new(engine, "worker", registry(), Some(ok_only));
        let report = worker.sweep().await.unwrap();
        assert_eq!(report.deleted, ["OLD"]);
        assert_eq!(report.skipped_parked, Vec::<String>::new());
        assert!(blobs.list("OLD").await.unwrap().is_empty());
        assert!(store.load("OLD").await.unwrap().is_empty());
        assert_eq!(store.get_meta("OLD").await.unwrap(), None);
        assert_eq!(store.get_meta("PARKED").await.unwrap().unwrap().status, RunStatus::Suspended);
    });
}

fn retention_on_sqlite(profile: ProfileName) {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::starting_at(T0);
    let env: Rc<dyn Env> = Rc::new(ManualEnv::new(clock.clone()));
    let profile = Profile::of(profile);
    block_on(async {
        let store = SqliteStore::open(
            SqliteOptions::new(dir.path().join("w.db")).ttl_ms(TTL).profile(profile),
            env.clone(),
        )
        .await
        .unwrap();
        let engine =
            Rc::new(Engine::new(store.clone(), store.transcripts(), TestEffects::new(), env, profile, "e"));
        engine.run("OLD", &Workflow::limit()).await.unwrap();
        let held = store.acquire("OLD", "other").await.unwrap();
        let worker = Worker::new(engine, "worker", registry(), Some(ok_only));
        let report = worker.sweep().await.unwrap();
        assert_eq!(report.skipped_held, ["OLD"], "a held run is not deleted");
        store.release(&held).await.unwrap();
        let report = worker.sweep().await.unwrap();
        assert_eq!(report.deleted, ["OLD"]);
        assert!(store.transcripts().list("OLD").await.unwrap().is_empty());
        assert!(store.load("OLD").await.unwrap().is_empty());
        assert_eq!(store.get_meta("OLD").await.unwrap(), None);
    });
}

#[test]
fn retention_deletes_under_the_fenced_current_profile() {
    retention_on_sqlite(ProfileName::Current);
}

#[test]
fn retention_deletes_under_v1_44_1_without_passing_the_lease() {
    retention_on_sqlite(ProfileName::V1_44_1);
}

/// F4's worker path: the retention lease is superseded between acquire and the cascade.
/// v1.44.1 passes no lease (and the store would ignore it): the live run is erased. v1.45.0
/// fences the journal delete but not blobs: the blobs go, the journal survives. `current`
/// refuses the first blob delete: nothing is lost.
fn stale_retention(profile: ProfileName) -> (Vec<String>, usize, bool, Vec<(String, EngineError)>) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("f4.db");
    let clock = ManualClock::starting_at(T0);
    let plain: Rc<dyn Env> = Rc::new(ManualEnv::new(clock.clone()));
    let profile = Profile::of(profile);
    block_on(async {
        let successor =
            SqliteStore::open(SqliteOptions::new(&path).ttl_ms(TTL).profile(profile), plain.clone())
                .await
                .unwrap();
        let (c, s) = (clock.clone(), successor.clone());
        let hook_env: Rc<dyn Env> = Rc::new(ManualEnv::with_hook(
            clock.clone(),
            Rc::new(move |site: &store::FaultSite<'_>| -> Option<store::LocalFuture<'static, Result<(), store::Crash>>> {
                if site.point != store::FaultPoint::WorkerRetentionAfterAcquire {
                    return None;
                }
                let (c, s) = (c.clone(), s.clone());
                Some(Box::pin(async move {
                    // The retention worker stalls past its ttl; someone else takes the run.
                    c.advance(TTL + 1);
                    s.acquire("OLD", "successor").await.unwrap();
                    Ok(())
                }))
            }),
        ));
        let store =
            SqliteStore::open(SqliteOptions::new(&path).ttl_ms(TTL).profile(profile), hook_env.clone())
                .await
                .unwrap();
        let host =
            Engine::new(store.clone(), store.transcripts(), TestEffects::new(), plain, profile, "host");
        host.run("OLD", &Workflow::limit()).await.unwrap();
        let engine = Rc::new(Engine::new(
            store.clone(),
            store.transcripts(),
            TestEffects::new(),
            hook_env,
            profile,
            "e",
        ));
        let report = Worker::new(engine, "worker", registry(), Some(ok_only)).sweep().await.unwrap();
        let blobs = successor.transcripts().list("OLD").await.unwrap();
        let entries = successor.load("OLD").await.unwrap().len();
        let meta = successor.get_meta("OLD").await.unwrap().is_some();
        (blobs, entries, meta, report.errors)
    })
}

#[test]
fn f4_stale_retention_erases_a_live_run_under_v1_44_1() {
    let (blobs, entries, meta, errors) = stale_retention(ProfileName::V1_44_1);
    assert!(blobs.is_empty());
    assert_eq!((entries, meta), (0, false), "journal and meta erased under the successor's live lease");
    assert!(errors.is_empty());
}

#[test]
fn f4_blob_half_remains_under_v1_45_0() {
    let (blobs, entries, meta, errors) = stale_retention(ProfileName::V1_45_0);
    assert!(blobs.is_empty(), "the unfenced blob deletes landed");
    // running, three receipts, the limit terminal: the fenced journal delete was refused.
    assert_eq!((entries, meta), (5, true), "the fenced journal delete was refused (no journaled settle yet)");
    assert!(
        matches!(errors.as_slice(), [(_, EngineError::Store(store::StoreError::LeaseHeld { .. }))]),
        "{errors:?}"
    );
}

#[test]
fn f4_is_closed_under_current() {
    let (blobs, entries, meta, errors) = stale_retention(ProfileName::Current);
    assert_eq!(blobs, ["OLD/ckpt/0"]);
    assert_eq!((entries, meta), (6, true));
    assert!(
        matches!(errors.as_slice(), [(_, EngineError::Store(store::StoreError::LeaseHeld { .. }))]),
        "{errors:?}"
    );
}

/// A run left `running` whose deletion cascade was cut after its blobs (under `current`, the
/// generation recorded): no resume boots it, so the worker that acquires it finishes the
/// deletion instead of leaving it unsettled forever.
#[test]
fn a_sweep_finishes_the_deletion_a_running_run_was_marked_for() {
    let (clock, env, store, blobs) = memory();
    block_on(async {
        crash_after_step_two_running(&store, &blobs, &env, "RUN").await;
        // A host's unleased deleteRun, cut before its journal delete: the record is written.
        let crash = crashing_at(&clock, store::FaultPoint::EngineDeleteAfterBlobs);
        let cut =
            Engine::new(store.clone(), blobs.clone(), TestEffects::new(), crash, Profile::current(), "host");
        assert!(matches!(cut.delete_run("RUN", None).await, Err(EngineError::Crashed { .. })));
        assert_eq!(blobs.get("RUN").await.unwrap().as_deref(), Some(&b"gen-RUN"[..]));
        assert_eq!(store.get_meta("RUN").await.unwrap().unwrap().status, RunStatus::Running);
        clock.advance(TTL + 1);

        let (world, engine) = counting_engine(&store, &blobs, &env);
        let report = Worker::new(engine, "worker", registry(), None).sweep().await.unwrap();
        assert_eq!(report.deleted, ["RUN"]);
        assert!(report.driven.is_empty() && report.errors.is_empty(), "{:?}", report.errors);
        assert_eq!(world.paid(), 0);
        assert_eq!(store.get_meta("RUN").await.unwrap(), None);
        assert!(store.load("RUN").await.unwrap().is_empty());
    });
}
