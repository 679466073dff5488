//! Segment behaviour beyond the kill-point table: boot refusals, renew failure, lease loss,
//! F1 and F2 at engine level under the flawed and the current profile, suspension with
//! offline resolution, the delete and prune cascades, and engine fault points.

mod engine_support;

use std::cell::Cell;
use std::rc::Rc;

use engine_support::*;
use futures::executor::block_on;
use serde_json::json;
use store::engine::{audit_run, decode_checkpoint, Engine, EngineError, Op, Verdict, Workflow};
use store::{
    Crash, Env, FaultPoint, InMemoryStore, InMemoryTranscriptStore, JournalStore, LeasableStore, ManualClock,
    ManualEnv, MetaLookup, Profile, ProfileName, RunFilter, RunStatus, SqliteOptions, SqliteStore,
    StoreError, TranscriptStore,
};

async fn sqlite(path: &std::path::Path, env: &Rc<dyn Env>, profile: Profile) -> SqliteStore {
    SqliteStore::open(SqliteOptions::new(path).ttl_ms(TTL).profile(profile), env.clone()).await.unwrap()
}

#[test]
fn boot_on_a_held_lease_fails_with_zero_writes_and_zero_calls() {
    let (_clock, env, store, blobs) = memory();
    block_on(async {
        store.acquire("RUN", "other").await.unwrap();
        let world = TestEffects::new();
        let engine = Engine::new(store.clone(), blobs, world.clone(), env, Profile::current(), "me");
        let err = engine.run("RUN", &Workflow::happy()).await.unwrap_err();
        assert!(matches!(err, EngineError::Store(StoreError::LeaseHeld { .. })), "{err:?}");
        assert_eq!(world.paid(), 0);
        assert!(store.load("RUN").await.unwrap().is_empty());
        assert_eq!(store.get_meta("RUN").await.unwrap(), None);
    });
}

#[test]
fn a_refused_boot_meta_write_fails_the_segment_before_any_paid_call() {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::starting_at(T0);
    let env: Rc<dyn Env> = Rc::new(ManualEnv::new(clock.clone()));
    block_on(async {
        let store = sqlite(&dir.path().join("s.db"), &env, Profile::current()).await;
        let stale = store.acquire("RUN", "worker-a").await.unwrap();
        clock.advance(TTL + 1);
        store.acquire("RUN", "worker-b").await.unwrap();
        let world = TestEffects::new();
        let engine =
            Engine::new(store.clone(), store.transcripts(), world.clone(), env, Profile::current(), "a");
        let err = engine.resume("RUN", &Workflow::happy(), Some(stale)).await.unwrap_err();
        assert!(matches!(err, EngineError::Store(StoreError::LeaseHeld { .. })), "{err:?}");
        assert_eq!(world.paid(), 0);
        assert!(store.load("RUN").await.unwrap().is_empty());
        assert_eq!(store.get_meta("RUN").await.unwrap(), None);
    });
}

#[test]
fn fresh_run_writes_segments_one_and_resume_bumps_it() {
    let (_clock, env, store, blobs) = memory();
    block_on(async {
        let world = TestEffects::new();
        let engine = Engine::new(store.clone(), blobs, world.clone(), env, Profile::current(), "me");
        let out = engine.run("RUN", &Workflow::happy()).await.unwrap();
        assert_eq!(out.status, RunStatus::Ok);
        assert_eq!(out.segment, 1);
        assert_eq!(out.value, Some(json!({"one": "alpha", "two": "beta"})));
        let meta = store.get_meta("RUN").await.unwrap().unwrap();
        assert_eq!((meta.status, meta.segments), (RunStatus::Ok, Some(1)));
        assert_eq!(meta.workflow_name.as_deref(), Some("happy"));
        assert_eq!(meta.updated_at.as_deref(), Some("2023-11-14T22:13:20.000Z"));
        let before = store.load("RUN").await.unwrap();
        // Two dispatch pairs, one billing receipt each, and the settle.
        assert_eq!(before.len(), 7);
        assert_eq!(receipts(&before), ["pc:0:0", "pc:3:0"]);
        // A pure replay: zero calls, no append, meta rewritten with segments 2.
        let out = engine.resume("RUN", &Workflow::happy(), None).await.unwrap();
        assert_eq!((out.status, out.segment), (RunStatus::Ok, 2));
        assert_eq!(world.paid(), 2);
        assert_eq!(store.load("RUN").await.unwrap(), before);
        assert_eq!(store.get_meta("RUN").await.unwrap().unwrap().segments, Some(2));
        // Resuming with another workflow is refused before any write.
        let err = engine.resume("RUN", &Workflow::limit(), None).await.unwrap_err();
        assert!(matches!(err, EngineError::Config(_)), "{err:?}");
    });
}

#[test]
fn a_renew_failure_cancels_the_segment_and_a_live_lease_settles_it_cancelled() {
    let (_clock, env, store, blobs) = memory();
    block_on(async {
        let kill = KillStore::passthrough(store.clone());
        kill.state.fail_renew.set(true);
        let world = TestEffects::new();
        // The first paid call takes a while: the renew loop ticks meanwhile, and fails.
        world.on_paid(Box::new(|_| Some(Box::pin(Yield(3)))));
        let engine = Engine::new(kill, blobs, world.clone(), env, Profile::current(), "me");
        let out = engine.run("RUN", &Workflow::happy()).await.unwrap();
        assert_eq!(out.status, RunStatus::Cancelled);
        assert_eq!(out.value, None);
        assert_eq!(world.paid(), 1);
        let entries = store.load("RUN").await.unwrap();
        let shape: Vec<(&str, &str)> = entries.iter().map(|e| (e.kind.as_str(), e.status.as_str())).collect();
        assert_eq!(shape, [("agent", "running"), ("agent", "cancelled"), ("decision", "ok")]);
        assert_eq!(entries[1].ref_seq, Some(entries[0].seq));
        assert_eq!(settles(&entries), [("cancelled".to_string(), 1)]);
        assert_eq!(store.get_meta("RUN").await.unwrap().unwrap().status, RunStatus::Cancelled);
        assert!(store.list_runs(&RunFilter::resumable()).await.unwrap().is_empty());
    });
}

#[test]
fn losing_the_lease_mid_dispatch_is_superseded_and_leaves_meta_alone() {
    let (clock, env, store, blobs) = memory();
    block_on(async {
        let world = TestEffects::new();
        let thief = store.clone();
        let c = clock.clone();
        world.on_paid(Box::new(move |n| {
            let thief = thief.clone();
            let c = c.clone();
            (n == 1).then(|| -> store::LocalFuture<'static, ()> {
                Box::pin(async move {
                    c.advance(TTL + 1);
                    thief.acquire("RUN", "thief").await.unwrap();
                })
            })
        }));
        let engine = Engine::new(store.clone(), blobs, world.clone(), env, Profile::current(), "me");
        let err = engine.run("RUN", &Workflow::happy()).await.unwrap_err();
        assert_eq!(err, EngineError::Superseded { run_id: "RUN".into(), status: RunStatus::Error });
        assert_eq!(world.paid(), 1);
        // Only the running entry landed; the terminal and the settle bounced.
        assert_eq!(store.load("RUN").await.unwrap().len(), 1);
        let meta = store.get_meta("RUN").await.unwrap().unwrap();
        assert_eq!((meta.status, meta.segments), (RunStatus::Running, Some(1)));
    });
}

/// F1: the stale segment A's terminal meta write lands over its successor B's row when meta
/// is unfenced (v1.44.1), stranding the run; under `current` it is refused.
fn f1(profile: ProfileName) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("f1.db");
    let clock = ManualClock::starting_at(T0);
    let env: Rc<dyn Env> = Rc::new(ManualEnv::new(clock.clone()));
    let profile = Profile::of(profile);
    block_on(async {
        let a_store = sqlite(&path, &env, profile).await;
        let b_store = sqlite(&path, &env, profile).await;
        let b_world = TestEffects::new();
        let b_kill = KillStore::new(b_store.clone(), Matcher::OkTerminal, 1, true);
        let b =
            Rc::new(Engine::new(b_kill, b_store.transcripts(), b_world.clone(), env.clone(), profile, "b"));
        let a_world = TestEffects::new();
        {
            let (b, c) = (b.clone(), clock.clone());
            a_world.on_paid(Box::new(move |n| {
                let (b, c) = (b.clone(), c.clone());
                (n == 2).then(|| -> store::LocalFuture<'static, ()> {
                    Box::pin(async move {
                        // A stalls past its ttl inside the paid call; B takes over and dies
                        // before its own settle could repair anything.
                        c.advance(TTL + 1);
                        let err = b.resume("RUN", &Workflow::happy(), None).await.unwrap_err();
                        assert!(matches!(err, EngineError::Crashed { .. }));
                    })
                })
            }));
        }
        let a =
            Engine::new(a_store.clone(), a_store.transcripts(), a_world.clone(), env.clone(), profile, "a");
        let a_result = a.run("RUN", &Workflow::happy()).await;
        assert_eq!(b_world.paid(), 1, "B redispatched the dangling step two");
        let meta = a_store.get_meta("RUN").await.unwrap().unwrap();
        let resumable = a_store.list_runs(&RunFilter::resumable()).await.unwrap();
        let audit = audit_run(&a_store, "RUN").await.unwrap();
        if profile.name == ProfileName::V1_44_1 {
            // The stale settle is swallowed-and-written: meta error with segments one behind.
            assert_eq!(a_result.unwrap().status, RunStatus::Error);
            assert_eq!((meta.status, meta.segments), (RunStatus::Error, Some(1)));
            assert!(resumable.is_empty(), "the run left the sweep: stranded");
            assert_eq!((audit.verdict, audit.repair_to), (Verdict::Stranded, Some(RunStatus::Running)));
        } else {
            assert_eq!(
                a_result.unwrap_err(),
                EngineError::Superseded { run_id: "RUN".into(), status: RunStatus::Error }
            );
            assert_eq!((meta.status, meta.segments), (RunStatus::Running, Some(2)));
            assert_eq!(resumable.len(), 1);
            assert_eq!(audit.verdict, Verdict::Consistent);
            // And the run completes on the next resume, paying step two once more.
            clock.advance(TTL + 1);
            let c_world = TestEffects::new();
            let c = Engine::new(
                a_store.clone(),
                a_store.transcripts(),
                c_world.clone(),
                env.clone(),
                profile,
                "c",
            );
            let out = c.resume("RUN", &Workflow::happy(), None).await.unwrap();
            assert_eq!(out.value, Some(json!({"one": "alpha", "two": "beta"})));
            assert_eq!((out.segment, c_world.paid()), (3, 1));
        }
    });
}

#[test]
fn f1_stale_terminal_meta_strands_the_run_under_v1_44_1() {
    f1(ProfileName::V1_44_1);
}

#[test]
fn f1_is_closed_under_current() {
    f1(ProfileName::Current);
}

/// F2: the stale segment A's late checkpoint save overwrites its successor B's blob at the
/// shared ref when blobs are unfenced (v1.45.0); the next boot regresses and pays again.
fn f2(profile: ProfileName) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("f2.db");
    let clock = ManualClock::starting_at(T0);
    let profile = Profile::of(profile);
    let wf = Workflow {
        name: "probe".into(),
        ops: vec![Op::Agent { name: "probe".into(), tool_turns: 6, max_turns: 10, max_tool_calls: 10 }],
    };
    // A dies right after its second checkpoint save (the stale one), if that save lands.
    let saves = Rc::new(Cell::new(0));
    let hook_saves = saves.clone();
    let a_env: Rc<dyn Env> = Rc::new(ManualEnv::with_hook(
        clock.clone(),
        Rc::new(
            move |site: &store::FaultSite<'_>| -> Option<store::LocalFuture<'static, Result<(), Crash>>> {
                if site.point != FaultPoint::EngineCheckpointAfterPut {
                    return None;
                }
                hook_saves.set(hook_saves.get() + 1);
                (hook_saves.get() == 2).then(|| -> store::LocalFuture<'static, Result<(), Crash>> {
                    Box::pin(async { Err(Crash) })
                })
            },
        ),
    ));
    let env: Rc<dyn Env> = Rc::new(ManualEnv::new(clock.clone()));
    block_on(async {
        let a_store = sqlite(&path, &a_env, profile).await;
        let b_store = sqlite(&path, &env, profile).await;
        let b_world = TestEffects::new();
        let b_kill = KillStore::new(b_store.clone(), Matcher::OkTerminal, 1, true);
        let b =
            Rc::new(Engine::new(b_kill, b_store.transcripts(), b_world.clone(), env.clone(), profile, "b"));
        let a_world = TestEffects::new();
        {
            let (b, c, wf) = (b.clone(), clock.clone(), wf.clone());
            a_world.on_tool(Box::new(move |n| {
                let (b, c, wf) = (b.clone(), c.clone(), wf.clone());
                (n == 2).then(|| -> store::LocalFuture<'static, ()> {
                    Box::pin(async move {
                        c.advance(TTL + 1);
                        let err = b.resume("RUN", &wf, None).await.unwrap_err();
                        assert!(matches!(err, EngineError::Crashed { .. }));
                    })
                })
            }));
        }
        let a =
            Engine::new(a_store.clone(), a_store.transcripts(), a_world.clone(), a_env.clone(), profile, "a");
        let a_result = a.run("RUN", &wf).await;
        // B booted from turn 1 and paid turns 1..=6 (five tool turns, then the final turn).
        assert_eq!((b_world.paid(), b_world.tools()), (6, 5));
        let blobs = b_store.transcripts();
        let ck = store::types::checkpoint_ref("RUN", store::Seq(0));
        let state = decode_checkpoint(&blobs.get(&ck).await.unwrap().unwrap()).unwrap();
        clock.advance(TTL + 1);
        let c_world = TestEffects::new();
        let c = Engine::new(b_store.clone(), blobs.clone(), c_world.clone(), env.clone(), profile, "c");
        let out = c.resume("RUN", &wf, None).await.unwrap();
        assert_eq!(out.status, RunStatus::Ok);
        assert_eq!(out.value, Some(json!({"probe": "probe:6"})));
        if profile.name == ProfileName::V1_45_0 {
            assert!(matches!(a_result, Err(EngineError::Crashed { .. })), "{a_result:?}");
            assert_eq!(state.turns, 2, "A's stale save regressed B's turn-6 checkpoint");
            assert_eq!((c_world.paid(), c_world.tools()), (5, 4), "turns 2..=6 paid again");
        } else {
            assert_eq!(
                a_result.unwrap_err(),
                EngineError::Superseded { run_id: "RUN".into(), status: RunStatus::Error }
            );
            assert_eq!(saves.get(), 1, "the stale save never landed");
            assert_eq!((state.turns, state.tool_calls_used), (6, 6));
            assert_eq!((c_world.paid(), c_world.tools()), (1, 0), "only the final turn");
        }
    });
}

#[test]
fn f2_stale_checkpoint_regresses_the_next_boot_under_v1_45_0() {
    f2(ProfileName::V1_45_0);
}

#[test]
fn f2_is_closed_under_current() {
    f2(ProfileName::Current);
}

#[test]
fn suspension_parks_the_run_and_an_offline_resolution_lets_it_finish() {
    let (_clock, env, store, blobs) = memory();
    block_on(async {
        let world = TestEffects::new();
        let engine = Engine::new(store.clone(), blobs, world.clone(), env, Profile::current(), "me");
        let wf = Workflow::approval("go");
        let out = engine.run("RUN", &wf).await.unwrap();
        assert_eq!((out.status, out.value), (RunStatus::Suspended, None));
        let parked = store.load("RUN").await.unwrap();
        // running, receipt, terminal, then the suspension.
        assert_eq!(parked[3].kind, "external");
        assert_eq!(parked[3].status, "suspended");
        assert_eq!(settles(&parked), [("suspended".to_string(), 1)]);
        assert_eq!(store.get_meta("RUN").await.unwrap().unwrap().status, RunStatus::Suspended);
        // Parked again by pure replay: nothing appended, nothing paid.
        let out = engine.resume("RUN", &wf, None).await.unwrap();
        assert_eq!(out.status, RunStatus::Suspended);
        assert_eq!(store.load("RUN").await.unwrap(), parked);
        assert_eq!(world.paid(), 1);
        // No open suspension under another key.
        let err = engine.resolve_offline("RUN", "nope", json!(1)).await.unwrap_err();
        assert!(matches!(err, EngineError::Config(_)), "{err:?}");
        // Held by someone else: refused.
        let held = store.acquire("RUN", "other").await.unwrap();
        let err = engine.resolve_offline("RUN", "go", json!("yes")).await.unwrap_err();
        assert!(matches!(err, EngineError::Store(StoreError::LeaseHeld { .. })), "{err:?}");
        store.release(&held).await.unwrap();
        engine.resolve_offline("RUN", "go", json!("yes")).await.unwrap();
        let entries = store.load("RUN").await.unwrap();
        let res = entries.last().unwrap();
        assert_eq!((res.kind.as_str(), res.ref_seq), ("resolution", Some(parked[3].seq)));
        assert_eq!(store.get_meta("RUN").await.unwrap().unwrap().status, RunStatus::Suspended);
        let out = engine.resume("RUN", &wf, None).await.unwrap();
        assert_eq!(out.status, RunStatus::Ok);
        assert_eq!(out.value, Some(json!({"draft": "draft:0", "go": "yes", "publish": "publish:0"})));
        assert_eq!(world.paid(), 2);
        let entries = store.load("RUN").await.unwrap();
        assert!(contiguous(&entries));
        assert_eq!(settles(&entries).last().unwrap().0, "ok");
    });
}

#[test]
fn prune_deletes_unreferenced_ok_checkpoints_and_delete_run_removes_everything() {
    let (_clock, env, store, blobs) = memory();
    block_on(async {
        let world = TestEffects::new();
        let engine = Engine::new(store.clone(), blobs.clone(), world, env, Profile::current(), "me");
        let wf = Workflow {
            name: "tools".into(),
            ops: vec![
                Op::Agent { name: "a".into(), tool_turns: 1, max_turns: 4, max_tool_calls: 2 },
                Op::Agent { name: "b".into(), tool_turns: 9, max_turns: 4, max_tool_calls: 1 },
            ],
        };
        let out = engine.run("RUN", &wf).await.unwrap();
        assert_eq!(out.value, Some(json!({"a": "a:1", "b": "limit"})));
        let entries = store.load("RUN").await.unwrap();
        let first = entries.iter().find(|e| e.kind == "agent" && e.status == "ok").unwrap();
        assert_eq!(first.extra.get("checkpointRef"), Some(&json!("RUN/ckpt/0")));
        assert_eq!(blobs.list("RUN").await.unwrap(), ["RUN/ckpt/0", "RUN/ckpt/4"]);
        // Only the ok terminal's checkpoint is a candidate; the limit one is kept.
        assert_eq!(engine.prune_run("RUN", None).await.unwrap(), 1);
        assert_eq!(blobs.list("RUN").await.unwrap(), ["RUN/ckpt/4"]);
        assert_eq!(store.load("RUN").await.unwrap(), entries);
        engine.delete_run("RUN", None).await.unwrap();
        assert!(blobs.list("RUN").await.unwrap().is_empty());
        assert!(store.load("RUN").await.unwrap().is_empty());
        assert_eq!(store.get_meta("RUN").await.unwrap(), None);
    });
}

#[test]
fn a_crash_between_the_settle_append_and_the_meta_write_leaves_meta_behind() {
    let clock = ManualClock::starting_at(T0);
    let env = crashing_at(&clock, FaultPoint::EngineSettleAfterRunSettle);
    let store = InMemoryStore::new(env.clone(), TTL).unwrap();
    let blobs = InMemoryTranscriptStore::new();
    block_on(async {
        let engine =
            Engine::new(store.clone(), blobs.clone(), TestEffects::new(), env, Profile::current(), "me");
        let err = engine.run("RUN", &Workflow::happy()).await.unwrap_err();
        assert_eq!(err, EngineError::Crashed { point: "engine.settle.after_run_settle" });
        assert_eq!(store.get_meta("RUN").await.unwrap().unwrap().status, RunStatus::Running);
        // Nothing ran after the crash: the lease was not released.
        assert!(matches!(store.acquire("RUN", "x").await, Err(StoreError::LeaseHeld { .. })));
        let audit = audit_run(&store, "RUN").await.unwrap();
        assert_eq!((audit.verdict, audit.repair_to), (Verdict::MetaBehind, Some(RunStatus::Ok)));
        // The resume heals it with zero calls and no second settle.
        clock.advance(TTL + 1);
        let env2: Rc<dyn Env> = Rc::new(ManualEnv::new(clock.clone()));
        let world = TestEffects::new();
        let engine = Engine::new(store.clone(), blobs, world.clone(), env2, Profile::current(), "them");
        let out = engine.resume("RUN", &Workflow::happy(), None).await.unwrap();
        assert_eq!((out.status, world.paid()), (RunStatus::Ok, 0));
        assert_eq!(settles(&store.load("RUN").await.unwrap()).len(), 1);
        assert_eq!(audit_run(&store, "RUN").await.unwrap().verdict, Verdict::Consistent);
    });
}

#[test]
fn a_second_live_segment_of_one_run_in_one_engine_is_refused() {
    let (_clock, env, store, blobs) = memory();
    block_on(async {
        let world = TestEffects::new();
        let engine = Rc::new(Engine::new(store.clone(), blobs, world.clone(), env, Profile::current(), "me"));
        let seen = Rc::new(std::cell::RefCell::new(None));
        {
            let (engine, seen) = (Rc::downgrade(&engine), seen.clone());
            world.on_paid(Box::new(move |n| {
                let (engine, seen) = (engine.clone(), seen.clone());
                (n == 1).then(|| -> store::LocalFuture<'static, ()> {
                    Box::pin(async move {
                        let engine = engine.upgrade().unwrap();
                        *seen.borrow_mut() = Some(engine.resume("RUN", &Workflow::happy(), None).await);
                    })
                })
            }));
        }
        let out = engine.run("RUN", &Workflow::happy()).await.unwrap();
        assert_eq!(out.status, RunStatus::Ok);
        assert!(matches!(seen.borrow().as_ref(), Some(Err(EngineError::Config(_)))), "{:?}", seen.borrow());
    });
}

type Writes = (Vec<(RunStatus, bool)>, Vec<(String, String, bool)>, Vec<(String, bool)>);

fn threading(profile: ProfileName) -> Writes {
    let (_clock, env, store, blobs) = memory();
    block_on(async {
        let kill = KillStore::passthrough(store);
        let state = kill.state.clone();
        let blobs = RecordingBlobs::new(blobs);
        let puts = blobs.puts.clone();
        let engine = Engine::new(kill, blobs, TestEffects::new(), env, Profile::of(profile), "me");
        engine.run("RUN", &Workflow::limit()).await.unwrap();
        let metas = state.metas.borrow().clone();
        let appends = state.appends.borrow().clone();
        let puts = puts.borrow().clone();
        (metas, appends, puts)
    })
}

#[test]
fn append_only_threading_leases_appends_only() {
    let (metas, appends, puts) = threading(ProfileName::V1_44_1);
    assert_eq!(metas, [(RunStatus::Running, false), (RunStatus::Ok, false)]);
    // No journaled settle before v1.47: running, three receipts and the limit terminal, all
    // leased.
    assert_eq!(appends.len(), 5);
    assert!(appends.iter().all(|a| a.2));
    assert_eq!(puts, [("RUN/ckpt/0".to_string(), false), ("RUN/ckpt/0".to_string(), false)]);
}

#[test]
fn full_threading_leases_every_segment_write() {
    let (metas, appends, puts) = threading(ProfileName::Current);
    assert_eq!(metas, [(RunStatus::Running, true), (RunStatus::Ok, true)]);
    let kinds: Vec<(&str, &str)> = appends.iter().map(|a| (a.0.as_str(), a.1.as_str())).collect();
    assert_eq!(
        kinds,
        [
            ("agent", "running"),
            ("decision", "ok"),
            ("decision", "ok"),
            ("decision", "ok"),
            ("agent", "limit"),
            ("decision", "ok")
        ]
    );
    assert!(appends.iter().all(|a| a.2));
    assert_eq!(puts, [("RUN/ckpt/0".to_string(), true), ("RUN/ckpt/0".to_string(), true)]);
}

type SettleResult = (Result<store::engine::Outcome, EngineError>, Vec<(RunStatus, bool)>, bool);

fn settle_failure(
    profile: Profile,
    settle_err: Option<StoreError>,
    meta_err: Option<StoreError>,
) -> SettleResult {
    let (_clock, env, store, blobs) = memory();
    block_on(async {
        let kill = KillStore::passthrough(store.clone());
        *kill.state.fail_settle.borrow_mut() = settle_err;
        *kill.state.fail_terminal_meta.borrow_mut() = meta_err;
        let state = kill.state.clone();
        let engine = Engine::new(kill, blobs, TestEffects::new(), env, profile, "me");
        let result = engine.run("RUN", &Workflow::happy()).await;
        // Released either way: someone else can acquire at once.
        let released = store.acquire("RUN", "next").await.is_ok();
        let metas = state.metas.borrow().clone();
        (result, metas, released)
    })
}

#[test]
fn settle_failure_postures_under_lease_held_only() {
    let busy = StoreError::Busy { code: 5, during: "append" };
    let held = StoreError::LeaseHeld { run_id: "RUN".into(), reason: store::LeaseRefusal::StaleEpoch };
    // A non-LeaseHeld settle append failure: Settlement(run-settle), meta skipped.
    let (r, metas, released) = settle_failure(Profile::current(), Some(busy.clone()), None);
    assert!(
        matches!(
            &r,
            Err(EngineError::Settlement {
                stage: store::engine::SettleStage::RunSettle,
                status: RunStatus::Ok,
                ..
            })
        ),
        "{r:?}"
    );
    assert_eq!(metas.len(), 1, "only the boot meta write");
    assert!(released);
    // LeaseHeld on the settle append: Superseded, meta skipped.
    let (r, metas, _) = settle_failure(Profile::current(), Some(held.clone()), None);
    assert_eq!(r.unwrap_err(), EngineError::Superseded { run_id: "RUN".into(), status: RunStatus::Ok });
    assert_eq!(metas.len(), 1);
    // LeaseHeld on the terminal meta write: swallowed.
    let (r, _, _) = settle_failure(Profile::current(), None, Some(held));
    assert_eq!(r.unwrap().status, RunStatus::Ok);
    // Anything else on the terminal meta write: Settlement(meta).
    let (r, metas, _) = settle_failure(Profile::current(), None, Some(busy));
    assert!(
        matches!(&r, Err(EngineError::Settlement { stage: store::engine::SettleStage::Meta, .. })),
        "{r:?}"
    );
    assert_eq!(metas.len(), 2);
}

#[test]
fn settle_failures_are_swallowed_under_swallow_all() {
    let busy = StoreError::Busy { code: 5, during: "append" };
    let profile = Profile::of(ProfileName::PreTombstone);
    assert!(profile.settle_journaled);
    let (r, metas, _) = settle_failure(profile, Some(busy.clone()), None);
    assert_eq!(r.unwrap().status, RunStatus::Ok);
    assert_eq!(metas.last(), Some(&(RunStatus::Ok, true)), "the meta write still happens");
    let (r, _, _) = settle_failure(profile, None, Some(busy));
    assert_eq!(r.unwrap().status, RunStatus::Ok);
}

#[test]
fn a_rejected_checkpoint_save_fails_the_dispatch_and_leaves_it_dangling() {
    let (clock, env, store, blobs) = memory();
    block_on(async {
        let failing = RecordingBlobs::new(blobs.clone());
        failing.fail_put_at.set(2);
        let world = TestEffects::new();
        let engine =
            Engine::new(store.clone(), failing, world.clone(), env.clone(), Profile::current(), "me");
        let out = engine.run("RUN", &Workflow::limit()).await.unwrap();
        assert_eq!((out.status, out.value), (RunStatus::Error, None));
        assert_eq!((world.paid(), world.tools()), (2, 2));
        let entries = store.load("RUN").await.unwrap();
        let shape: Vec<(&str, &str)> = entries.iter().map(|e| (e.kind.as_str(), e.status.as_str())).collect();
        assert_eq!(
            shape,
            [("agent", "running"), ("decision", "ok"), ("decision", "ok"), ("decision", "ok")],
            "no terminal: the running entry dangles (two receipts, then the settle)"
        );
        assert_eq!(receipts(&entries), ["pc:0:0", "pc:0:1"]);
        assert_eq!(settles(&entries), [("error".to_string(), 1)]);
        assert_eq!(audit_run(&store, "RUN").await.unwrap().verdict, Verdict::Consistent);
        // An explicit resume redispatches from the turn-1 checkpoint.
        clock.advance(1);
        let world = TestEffects::new();
        let engine = Engine::new(store.clone(), blobs, world.clone(), env, Profile::current(), "me");
        let out = engine.resume("RUN", &Workflow::limit(), None).await.unwrap();
        assert_eq!(out.value, Some(json!({"agentStatus": "limit"})));
        assert_eq!((world.paid(), world.tools()), (2, 1));
        let entries = store.load("RUN").await.unwrap();
        let terminal = entries.iter().find(|e| e.kind == "agent" && e.status != "running").unwrap();
        assert_eq!(terminal.ref_seq, Some(entries[0].seq));
        assert_eq!(receipts(&entries), ["pc:0:0", "pc:0:1", "pc:0:1", "pc:0:2"]);
        assert_eq!(settles(&entries), [("error".to_string(), 1), ("ok".to_string(), 2)]);
    });
}

/// rulvar's billing receipt is fire-and-forget: a refused one is logged at the call site and
/// the loop goes on, but the Replayer has consumed its seq and latched the loss. So the
/// journal keeps a seq gap, the segment's later appends land past it, the latch turns the
/// would-be suspension into `error`, and everything after reads seqs as max + 1, not as the
/// journal's length.
#[test]
fn a_refused_receipt_is_swallowed_but_latched_and_leaves_a_seq_gap() {
    let (_clock, env, store, blobs) = memory();
    block_on(async {
        let journal = KillStore::passthrough(store.clone());
        *journal.state.fail_receipt.borrow_mut() = Some(StoreError::Busy { code: 5, during: "append" });
        let world = TestEffects::new();
        let engine = Engine::new(journal, blobs, world.clone(), env, Profile::current(), "me");
        let wf = Workflow::approval("go");
        let out = engine.run("RUN", &wf).await.unwrap();
        assert_eq!(out.status, RunStatus::Error, "the latch turns the suspension into error");
        assert_eq!(world.paid(), 1, "the loop went on past the refused receipt");
        let entries = store.load("RUN").await.unwrap();
        let shape: Vec<(u64, &str, &str)> =
            entries.iter().map(|e| (e.seq.0, e.kind.as_str(), e.status.as_str())).collect();
        assert_eq!(
            shape,
            [
                (0, "agent", "running"),
                (2, "agent", "ok"),
                (3, "external", "suspended"),
                (4, "decision", "ok")
            ],
            "seq 1 was the refused receipt's"
        );
        assert!(!contiguous(&entries));
        assert_eq!(settles(&entries), [("error".to_string(), 1)]);
        // The suspension is open but the run has ended: an answer is refused (`resolve_rechecks`)
        // until a host's retry parks the run again (a settle at seq 5); then a resolution takes
        // max seq + 1, past the gap (6, not the journal's length 5), and lands.
        let err = engine.resolve_offline("RUN", "go", json!("yes")).await.unwrap_err();
        assert!(matches!(&err, EngineError::Config(m) if m.contains("has ended (error)")), "{err:?}");
        let out = engine.resume("RUN", &wf, None).await.unwrap();
        assert_eq!(out.status, RunStatus::Suspended);
        engine.resolve_offline("RUN", "go", json!("yes")).await.unwrap();
        let entries = store.load("RUN").await.unwrap();
        let res = entries.last().unwrap();
        assert_eq!(entries.len(), 6, "five entries before it, seq 1 missing");
        assert_eq!((res.seq.0, res.kind.as_str(), res.ref_seq), (6, "resolution", Some(store::Seq(3))));
        let out = engine.resume("RUN", &wf, None).await.unwrap();
        assert_eq!(out.status, RunStatus::Ok);
        assert_eq!(out.value, Some(json!({"draft": "draft:0", "go": "yes", "publish": "publish:0"})));
        assert_eq!(world.paid(), 2, "the draft replays for free");
    });
}

/// Stop 50's finding at engine level (docs/engine-model.md 6.1): a segment checkpoints one
/// turn of its agent and dies; a host's `deleteRun` deletes the checkpoint and dies before its
/// journal delete. Without `delete_marks_generation` (`pre_tombstone`) a retry boots the
/// dangling dispatch from no checkpoint and pays turn 0 again; under `current` the cascade
/// recorded the generation first, so the retry is refused with nothing paid, a second delete
/// finishes the run, and a recreated run (a new genesis) is not refused by the old record.
#[test]
fn a_run_recreated_twice_by_retries_is_never_refused_by_its_earlier_generations_record() {
    let wf = Workflow::happy();
    for name in [ProfileName::PreTombstone, ProfileName::Current] {
        let profile = Profile::of(name);
        let (_clock, plain, store, blobs) = memory();
        block_on(async {
            let host =
                Engine::new(store.clone(), blobs.clone(), Minting::default(), plain.clone(), profile, "host");
            assert_eq!(host.run("RUN", &wf).await.unwrap().status, RunStatus::Ok);
            host.delete_run("RUN", None).await.unwrap();
            // A user's retry of the deleted run recreates it; then it is deleted again.
            assert_eq!(host.resume("RUN", &wf, None).await.unwrap().status, RunStatus::Ok);
            let recreated = store.get_meta("RUN").await.unwrap().unwrap().genesis;
            host.delete_run("RUN", None).await.unwrap();
            // And recreated again: the second cascade's record names the first recreation.
            assert_eq!(host.resume("RUN", &wf, None).await.unwrap().status, RunStatus::Ok);
            let again = store.get_meta("RUN").await.unwrap().unwrap().genesis;
            let resumed = host.resume("RUN", &wf, None).await;
            if name == ProfileName::Current {
                assert_eq!(resumed.unwrap().status, RunStatus::Ok, "no record names the live generation");
                assert!(
                    recreated.is_some() && again.is_some() && recreated != again,
                    "{recreated:?} {again:?}"
                );
            } else {
                assert_eq!((recreated, again), (None, None), "rulvar recreates a run with no genesis");
                resumed.unwrap();
            }
        });
    }
}

/// Effects whose every genesis is new (as the simulator's are).
#[derive(Clone, Default)]
struct Minting(TestEffects, std::rc::Rc<std::cell::Cell<u32>>);

impl store::engine::Effects for Minting {
    fn provider_call(
        &self,
        call: &store::engine::PaidCall,
    ) -> store::LocalFuture<'static, serde_json::Value> {
        self.0.provider_call(call)
    }
    fn tool_execute(&self, call: &store::engine::ToolCall) -> store::LocalFuture<'static, serde_json::Value> {
        self.0.tool_execute(call)
    }
    fn mint_genesis(&self, run_id: &str) -> String {
        self.1.set(self.1.get() + 1);
        format!("gen-{run_id}-{}", self.1.get())
    }
}

#[test]
fn a_retry_of_a_run_whose_deletion_cascade_was_cut_is_refused_only_under_current() {
    let wf = Workflow {
        name: "tools".into(),
        ops: vec![Op::Agent { name: "a".into(), tool_turns: 2, max_turns: 4, max_tool_calls: 3 }],
    };
    for name in [ProfileName::PreTombstone, ProfileName::Current] {
        let profile = Profile::of(name);
        let (clock, plain, store, blobs) = memory();
        block_on(async {
            let env = crashing_at(&clock, FaultPoint::EngineCheckpointAfterPut);
            let first = TestEffects::new();
            let engine = Engine::new(store.clone(), blobs.clone(), first.clone(), env, profile, "a");
            let err = engine.run("RUN", &wf).await.unwrap_err();
            assert_eq!(err, EngineError::Crashed { point: "engine.checkpoint.after_put" });
            assert_eq!(first.paid(), 1);
            assert_eq!(blobs.list("RUN").await.unwrap(), ["RUN/ckpt/0"]);

            clock.advance(TTL + 1);
            let env = crashing_at(&clock, FaultPoint::EngineDeleteAfterBlobs);
            let host = Engine::new(store.clone(), blobs.clone(), TestEffects::new(), env, profile, "host");
            let err = host.delete_run("RUN", None).await.unwrap_err();
            assert_eq!(err, EngineError::Crashed { point: "engine.delete.after_blobs" });
            assert!(blobs.list("RUN").await.unwrap().is_empty(), "the cascade deleted the checkpoint");
            assert!(store.get_meta("RUN").await.unwrap().is_some(), "the journal delete was never made");
            let record = blobs.get("RUN").await.unwrap();

            let retry = TestEffects::new();
            let engine =
                Engine::new(store.clone(), blobs.clone(), retry.clone(), plain.clone(), profile, "retry");
            let resumed = engine.resume("RUN", &wf, None).await;
            if name == ProfileName::Current {
                assert_eq!(record.as_deref(), Some(&b"gen-RUN"[..]));
                assert_eq!(
                    resumed.unwrap_err(),
                    EngineError::BeingDeleted { run_id: "RUN".into(), genesis: "gen-RUN".into() }
                );
                assert_eq!(retry.paid(), 0);
                assert!(store.acquire("RUN", "probe").await.is_ok(), "the refused retry held no lease");
                clock.advance(TTL + 1);
                engine.delete_run("RUN", None).await.unwrap();
                assert_eq!(store.get_meta("RUN").await.unwrap(), None);
                let again = Engine::new(
                    store.clone(),
                    blobs.clone(),
                    Minting::default(),
                    plain.clone(),
                    profile,
                    "host",
                );
                assert_eq!(again.run("RUN", &wf).await.unwrap().status, RunStatus::Ok);
                let out = again.resume("RUN", &wf, None).await.unwrap();
                assert_eq!(out.status, RunStatus::Ok, "the old record does not refuse the new generation");
            } else {
                assert_eq!(record, None, "no record without the switch");
                resumed.unwrap();
                let turn0 = retry.0.calls.borrow().iter().filter(|c| c.turn == 0).count();
                assert_eq!(turn0, 1, "the retry paid turn 0, which the deleted checkpoint covered");
            }
        });
    }
}

/// Stop 51's finding (docs/explore-findings/, `no-stranded-run-867938276.json`): a run that
/// ended with a suspension still open. Under `current` (`resolve_rechecks`) the offline
/// answer is refused before any write; without it (`pre_tombstone`) it lands after the
/// settle, under a terminal meta, and the reconciler calls the run stranded.
#[test]
fn an_offline_answer_to_a_run_that_ended_is_refused_only_under_current() {
    for name in [ProfileName::PreTombstone, ProfileName::Current] {
        let (_clock, env, store, blobs) = memory();
        block_on(async {
            let profile = Profile::of(name);
            let engine = Engine::new(store.clone(), blobs, TestEffects::new(), env, profile, "me");
            let wf = Workflow::approval("go");
            assert_eq!(engine.run("RUN", &wf).await.unwrap().status, RunStatus::Suspended);
            // The run ends `error` with its suspension open (a segment's settle, here written
            // by a holder directly): its journal's last settle and its meta agree.
            let lease = store.acquire("RUN", "other").await.unwrap();
            let next = store.load("RUN").await.unwrap().len() as u64;
            let settle = store::JournalEntry::new(
                next,
                "decision",
                "ok",
                json!({"decisionType": "run_settle", "runStatus": "error"}),
            );
            store.append("RUN", &settle, Some(&lease)).await.unwrap();
            let mut meta = store.get_meta("RUN").await.unwrap().unwrap();
            meta.status = RunStatus::Error;
            store.put_meta(&meta, Some(&lease)).await.unwrap();
            store.release(&lease).await.unwrap();
            assert_eq!(audit_run(&store, "RUN").await.unwrap().verdict, Verdict::Consistent);
            let before = store.load("RUN").await.unwrap();

            let answered = engine.resolve_offline("RUN", "go", json!("yes")).await;
            let audit = audit_run(&store, "RUN").await.unwrap();
            if name == ProfileName::Current {
                let err = answered.unwrap_err();
                assert!(matches!(&err, EngineError::Config(m) if m.contains("has ended (error)")), "{err:?}");
                assert_eq!(store.load("RUN").await.unwrap(), before, "nothing appended");
                assert_eq!(audit.verdict, Verdict::Consistent);
                assert!(store.acquire("RUN", "probe").await.is_ok(), "the brief lease was released");
            } else {
                answered.unwrap();
                assert_eq!(store.load("RUN").await.unwrap().len(), before.len() + 1);
                assert_eq!(audit.verdict, Verdict::Stranded);
            }
        });
    }
}
