//! The ten kill-point rows of docs/engine-model.md 9.2 (referee procedure 9.1), in process, over the in-memory store and
//! over SqliteStore (a second connection plays the referee process). The child's store is
//! wrapped in a kill switch that "SIGKILLs" before or after the k-th matching write; the
//! engine must stop dead there. The referee waits out the ttl, resumes with another owner,
//! and checks paid calls, tool runs, the single `ok` settle, meta, seqs and the value.

mod engine_support;

use std::rc::Rc;

use engine_support::*;
use futures::executor::block_on;
use store::conformance::killpoints::KillRow;
use store::engine::{Engine, EngineError};
use store::{
    Env, InMemoryStore, InMemoryTranscriptStore, JournalStore, LeasableStore, ManualClock, ManualEnv,
    MetaLookup, Profile, RunStatus, SqliteOptions, SqliteStore, TranscriptStore,
};

/// A row of the shared table (`store::conformance::killpoints::ROWS`), by name.
fn row(name: &str) -> KillRow {
    KillRow::find(name).unwrap_or_else(|| panic!("no kill-point row {name}"))
}

async fn play<J, T>(row: &KillRow, clock: &ManualClock, env: Rc<dyn Env>, child: (J, T), referee: (J, T))
where
    J: JournalStore + LeasableStore + MetaLookup,
    T: TranscriptStore,
{
    let child_world = TestEffects::new();
    let kill = KillStore::new(child.0, row.matcher, row.occurrence, row.before);
    let state = kill.state.clone();
    let engine = Engine::new(kill, child.1, child_world.clone(), env.clone(), Profile::current(), "child");
    let err = engine.run("RUN", &row.workflow()).await.unwrap_err();
    assert_eq!(err, EngineError::Crashed { point: KILL_POINT }, "the child must die at the kill point");
    assert!(state.dead.get());
    assert_eq!((child_world.paid(), child_world.tools()), row.child, "child paid calls / tool runs");

    clock.advance(TTL + 1);
    let world = TestEffects::new();
    let referee = Engine::new(referee.0, referee.1, world.clone(), env, Profile::current(), "referee");
    let out = referee.resume("RUN", &row.workflow(), None).await.unwrap();
    assert_eq!(out.status, RunStatus::Ok);
    assert_eq!(out.value.as_ref(), Some(&row.value()));
    assert_eq!(out.segment, 2);
    assert_eq!((world.paid(), world.tools()), row.resume, "resume paid calls / tool runs");

    let entries = referee.journal().load("RUN").await.unwrap();
    assert!(contiguous(&entries), "seqs must be contiguous: {entries:?}");
    let s = settles(&entries);
    assert_eq!(s.len(), 1, "exactly one run_settle: {s:?}");
    assert_eq!(s[0].0, "ok");
    let limits = entries.iter().filter(|e| e.kind == "agent" && e.status == "limit").count();
    assert_eq!(limits, row.limits, "limit terminals");
    let meta = referee.journal().get_meta("RUN").await.unwrap().unwrap();
    assert_eq!(meta.status, RunStatus::Ok);
    assert_eq!(meta.segments, Some(2));
    assert_eq!(meta.genesis.as_deref(), Some("gen-RUN"));
    // The referee's lease was released after its settle.
    referee.journal().acquire("RUN", "probe").await.unwrap();
}

fn on_memory(row: KillRow) {
    let clock = ManualClock::starting_at(T0);
    let env: Rc<dyn Env> = Rc::new(ManualEnv::new(clock.clone()));
    let store = InMemoryStore::new(env.clone(), TTL).unwrap();
    let blobs = InMemoryTranscriptStore::new();
    block_on(play(&row, &clock, env, (store.clone(), blobs.clone()), (store, blobs)));
}

fn on_sqlite(row: KillRow) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("kill.db");
    let clock = ManualClock::starting_at(T0);
    let env: Rc<dyn Env> = Rc::new(ManualEnv::new(clock.clone()));
    block_on(async {
        let open = || SqliteStore::open(SqliteOptions::new(&path).ttl_ms(TTL), env.clone());
        let child = open().await.unwrap();
        let referee = open().await.unwrap();
        let (ct, rt) = (child.transcripts(), referee.transcripts());
        play(&row, &clock, env.clone(), (child, ct), (referee, rt)).await;
    });
}

macro_rules! rows {
    ($($name:ident => $row:expr;)*) => {
        mod memory {
            use super::*;
            $( #[test] fn $name() { on_memory($row) } )*
        }
        mod sqlite {
            use super::*;
            $( #[test] fn $name() { on_sqlite($row) } )*
        }
    };
}

rows! {
    happy_running_before => row("happy-running-before");
    happy_running_after => row("happy-running-after");
    happy_ok_terminal_before => row("happy-ok-terminal-before");
    happy_ok_terminal_after => row("happy-ok-terminal-after");
    happy_settle_before => row("happy-settle-before");
    happy_settle_after => row("happy-settle-after");
    happy_meta_before => row("happy-meta-before");
    happy_meta_after => row("happy-meta-after");
    limit_terminal_before => row("limit-limit-terminal-before");
    limit_terminal_after => row("limit-limit-terminal-after");
}
