//! A resume that acquires its own lease prepares from reads made before it held the run.
//! Another process may act in that window: delete the run (retention), or boot a segment
//! of its own. The resume must then refuse a vanished run (no ghost meta without a journal)
//! and boot from the run as it is under the lease (no two segments share a `segments`
//! base). Found by the queue scenario under `current` (seeds 1202, 2014, 4581 and others
//! at 10,000 seeds): `deleted_run_stays_deleted` and `every_boot_bumps_segments`.

mod engine_support;

use std::rc::Rc;

use engine_support::*;
use futures::executor::block_on;
use store::engine::{Engine, EngineError, Workflow};
use store::{
    Env, InMemoryStore, InMemoryTranscriptStore, JournalStore, LeasableStore, ManualClock, ManualEnv,
    MetaLookup, Profile, RunStatus,
};

fn memory() -> (Rc<dyn Env>, InMemoryStore) {
    let clock = ManualClock::starting_at(T0);
    let env: Rc<dyn Env> = Rc::new(ManualEnv::new(clock));
    let store = InMemoryStore::new(env.clone(), TTL).unwrap();
    (env, store)
}

/// An engine of identity `owner` over `store`, with a fresh world and blob store.
fn engine<S>(store: S, env: &Rc<dyn Env>, owner: &str) -> Engine<S, InMemoryTranscriptStore, TestEffects>
where
    S: JournalStore + LeasableStore + MetaLookup,
{
    Engine::new(
        store,
        InMemoryTranscriptStore::new(),
        TestEffects::new(),
        env.clone(),
        Profile::current(),
        owner,
    )
}

#[test]
fn a_resume_racing_a_deletion_refuses_and_leaves_the_run_deleted() {
    let (env, store) = memory();
    block_on(async {
        let first = engine(store.clone(), &env, "host");
        assert_eq!(first.run("RUN", &Workflow::happy()).await.unwrap().status, RunStatus::Ok);

        // The retention worker deletes the run while the host's resume is between its
        // reads and its acquire.
        let deleter = store.clone();
        let racing = BeforeAcquire::new(
            store.clone(),
            Box::new(move || {
                Box::pin(async move {
                    let lease = deleter.acquire("RUN", "retention").await.unwrap();
                    deleter.delete("RUN", Some(&lease)).await.unwrap();
                })
            }),
        );
        let world = TestEffects::new();
        let host = Engine::new(
            racing.clone(),
            InMemoryTranscriptStore::new(),
            world.clone(),
            env,
            Profile::current(),
            "host",
        );
        let err = host.resume("RUN", &Workflow::happy(), None).await.unwrap_err();
        assert!(racing.ran(), "the deletion did not interleave");
        assert!(matches!(&err, EngineError::Config(m) if m.contains("deleted")), "{err:?}");
        assert_eq!(store.get_meta("RUN").await.unwrap(), None, "the run came back as a ghost");
        assert!(store.load("RUN").await.unwrap().is_empty());
        assert_eq!(world.paid(), 0);
        // The resume released the lease it took: the run id is free at once.
        store.acquire("RUN", "next").await.unwrap();
    });
}

#[test]
fn a_resume_racing_another_segment_boots_above_it() {
    let (env, store) = memory();
    block_on(async {
        let first = engine(store.clone(), &env, "host");
        first.run("RUN", &Workflow::happy()).await.unwrap();
        assert_eq!(store.get_meta("RUN").await.unwrap().unwrap().segments, Some(1));

        // A worker resumes the run (segment 2) while the host's resume prepares.
        let (worker_store, worker_env) = (store.clone(), env.clone());
        let racing = BeforeAcquire::new(
            store.clone(),
            Box::new(move || {
                Box::pin(async move {
                    let worker = engine(worker_store, &worker_env, "worker");
                    let out = worker.resume("RUN", &Workflow::happy(), None).await.unwrap();
                    assert_eq!(out.segment, 2);
                })
            }),
        );
        let host = engine(racing.clone(), &env, "host");
        let out = host.resume("RUN", &Workflow::happy(), None).await.unwrap();
        assert!(racing.ran(), "the worker's segment did not interleave");
        assert_eq!(out.segment, 3, "the host's segment reused the worker's segments base");
        assert_eq!(store.get_meta("RUN").await.unwrap().unwrap().segments, Some(3));
    });
}
