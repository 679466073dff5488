//! Every crash position, not just the table's: for several workflows, crash the first
//! segment at the k-th hit of every engine fault point and before/after the k-th write of
//! every kill-point matcher, then resume once with another owner. Recovery must always end
//! in meta `ok`, the exact value, exactly one `ok` run_settle, contiguous seqs, and no paid
//! call for an op whose ok terminal was already durable (docs/engine-model.md M7.1).

mod engine_support;

use std::cell::Cell;
use std::collections::BTreeSet;
use std::rc::Rc;

use engine_support::*;
use futures::executor::block_on;
use serde_json::{json, Value};
use store::engine::{Engine, EngineError, Op, Workflow};
use store::{
    Crash, Env, FaultPoint, InMemoryStore, InMemoryTranscriptStore, JournalStore, LocalFuture, ManualClock,
    ManualEnv, MetaLookup, Moment, Profile, RunStatus,
};

fn mixed() -> Workflow {
    Workflow {
        name: "mixed".into(),
        ops: vec![
            Op::Step { name: "s".into() },
            Op::Agent { name: "a".into(), tool_turns: 2, max_turns: 5, max_tool_calls: 3 },
            Op::Agent { name: "b".into(), tool_turns: 0, max_turns: 2, max_tool_calls: 0 },
        ],
    }
}

fn workflows() -> Vec<(Workflow, Value)> {
    vec![
        (Workflow::happy(), json!({"one": "alpha", "two": "beta"})),
        (Workflow::limit(), json!({"agentStatus": "limit"})),
        (mixed(), json!({"s": "tool:s:0", "a": "a:2", "b": "b:0"})),
    ]
}

enum Kill {
    Point(FaultPoint, u32),
    Write(Matcher, u32, bool),
}

/// Runs one crash scenario; `None` when the child completed without crashing.
fn scenario(wf: &Workflow, value: &Value, kill: &Kill) -> Option<()> {
    let clock = ManualClock::starting_at(T0);
    let plain: Rc<dyn Env> = Rc::new(ManualEnv::new(clock.clone()));
    let child_env: Rc<dyn Env> = match kill {
        Kill::Point(point, k) => {
            let (point, k, hits) = (*point, *k, Rc::new(Cell::new(0)));
            Rc::new(ManualEnv::with_hook(
                clock.clone(),
                Rc::new(
                    move |site: &store::FaultSite<'_>| -> Option<LocalFuture<'static, Result<(), Crash>>> {
                        if site.point != point {
                            return None;
                        }
                        hits.set(hits.get() + 1);
                        (hits.get() == k).then(|| -> LocalFuture<'static, Result<(), Crash>> {
                            Box::pin(async { Err(Crash) })
                        })
                    },
                ),
            ))
        }
        Kill::Write(..) => plain.clone(),
    };
    let store = InMemoryStore::new(plain.clone(), TTL).unwrap();
    let blobs = InMemoryTranscriptStore::new();
    block_on(async {
        let (matcher, k, before) = match kill {
            Kill::Write(m, k, b) => (Some(*m), *k, *b),
            Kill::Point(..) => (None, 0, false),
        };
        let kill_store = KillStore::new(store.clone(), matcher, k, before);
        let child = Engine::new(
            kill_store,
            blobs.clone(),
            TestEffects::new(),
            child_env,
            Profile::current(),
            "child",
        );
        match child.run("RUN", wf).await {
            Err(EngineError::Crashed { .. }) => {}
            Ok(out) => {
                assert_eq!(out.status, RunStatus::Ok);
                return None;
            }
            Err(e) => panic!("unexpected child error {e:?}"),
        }
        let at_death = store.load("RUN").await.unwrap();
        let done: BTreeSet<String> = at_death
            .iter()
            .filter(|e| e.ref_seq.is_some() && e.status == "ok")
            .filter_map(|e| e.key.split(':').nth(2).map(str::to_string))
            .collect();
        clock.advance(TTL + 1);
        let world = TestEffects::new();
        let referee = Engine::new(store.clone(), blobs, world.clone(), plain, Profile::current(), "referee");
        let out = referee.resume("RUN", wf, None).await.unwrap();
        assert_eq!(out.status, RunStatus::Ok);
        assert_eq!(out.value.as_ref(), Some(value));
        let entries = store.load("RUN").await.unwrap();
        assert!(contiguous(&entries), "{entries:?}");
        let s = settles(&entries);
        assert_eq!(s.len(), 1, "{s:?}");
        assert_eq!(s[0].0, "ok");
        assert_eq!(store.get_meta("RUN").await.unwrap().unwrap().status, RunStatus::Ok);
        for call in world.0.calls.borrow().iter() {
            assert!(!done.contains(&call.op), "op {} was completed before the crash but paid again", call.op);
        }
        for call in world.0.tool_calls.borrow().iter() {
            assert!(
                !done.contains(&call.op),
                "op {} was completed before the crash but its tool ran again",
                call.op
            );
        }
        Some(())
    })
}

#[test]
fn every_engine_fault_point_crash_recovers() {
    let mut crashed = 0;
    for (wf, value) in workflows() {
        for &point in FaultPoint::ALL.iter().filter(|p| p.moment() == Moment::Engine) {
            for k in 1..=20 {
                match scenario(&wf, &value, &Kill::Point(point, k)) {
                    Some(()) => crashed += 1,
                    None => break,
                }
            }
        }
    }
    assert!(crashed >= 40, "only {crashed} crash scenarios exercised");
}

#[test]
fn every_write_kill_recovers() {
    let mut crashed = 0;
    for (wf, value) in workflows() {
        for matcher in
            [Matcher::Running, Matcher::OkTerminal, Matcher::LimitTerminal, Matcher::Settle, Matcher::Meta]
        {
            for before in [true, false] {
                for k in 1..=10 {
                    match scenario(&wf, &value, &Kill::Write(matcher, k, before)) {
                        Some(()) => crashed += 1,
                        None => break,
                    }
                }
            }
        }
    }
    assert!(crashed >= 30, "only {crashed} crash scenarios exercised");
}
