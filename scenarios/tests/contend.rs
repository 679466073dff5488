//! The contended write (`Action::Contend`): a writer of the harness holds the database's
//! write lock across one store write, which meets a real `SQLITE_BUSY` from SQLite itself;
//! the hold ends as the contended node moves past that call (or after `CONTENTION_MS`), so
//! nothing else in the run meets it afterwards. At a point that begins no write it is a
//! yield.

use sim::history::{FaultKind, History, OpKind};
use sim::plan::{contendable, Action, Decision, CONTENTION_MS};
use sim::runner::{execute, plan_for, Outcome};
use sim::world::Scenario;
use store::{FaultPoint, ProfileName};

fn queue() -> &'static dyn Scenario {
    sim::catalog::find_scenario(&scenarios::catalog(), "queue").expect("queue is in the catalog")
}

/// The seed's queue run under `current` with one decision only: `action` at the first time
/// `node` reaches `point` (no interrupts either: the contention is the run's only fault).
fn run_one(seed: u64, node: u32, point: FaultPoint, action: Action) -> Outcome {
    let mut plan = plan_for(queue(), ProfileName::Current, seed);
    plan.decisions = vec![Decision { node, point: point.name().to_string(), occurrence: 1, action }];
    plan.swarm = sim::plan::Swarm::none();
    execute(queue(), ProfileName::Current, seed, Some(plan), None).expect("run")
}

fn busy_calls(h: &History) -> Vec<usize> {
    h.calls.iter().filter(|c| c.outcome.is_busy()).map(|c| c.id).collect()
}

#[test]
fn a_contended_write_meets_a_real_busy_and_nothing_after_it_does() {
    let points = [
        FaultPoint::SqliteAppendBeforeBegin,
        FaultPoint::SqlitePutMetaBeforeBegin,
        FaultPoint::SqliteAcquireBeforeBegin,
        FaultPoint::SqliteRenewBeforeBegin,
    ];
    let mut contended = 0;
    for seed in 0..12u64 {
        for point in points {
            let out = run_one(seed, 0, point, Action::Contend);
            let h = &out.history;
            let Some(f) = h.faults.iter().find(|f| f.point == point) else { continue };
            assert_eq!(f.kind, FaultKind::Contend, "seed {seed} {}", point.name());
            assert_eq!(f.until_ns, Some(f.at_ns + CONTENTION_MS * 1_000_000));
            let call = f.call.expect("a contended write has its call in flight");
            let c = &h.calls[call];
            assert_eq!(Some(c.op), OpKind::of_point(point));
            // SQLite itself refused the call's BEGIN IMMEDIATE: the writer held the lock.
            assert!(c.outcome.is_busy(), "seed {seed} {}: the contended call {c:?}", point.name());
            assert!(c.applied.is_none());
            // The only fault of the run, and the hold ended with its call: no other call of
            // the run met the lock (a faultless run never meets Busy).
            assert_eq!(busy_calls(h), vec![call], "seed {seed} {}", point.name());
            // A later write of the same node went through.
            assert!(
                h.calls
                    .iter()
                    .any(|d| d.node == 0 && d.id > call && d.op.is_mutation() && d.applied.is_some()),
                "seed {seed} {}: the node wrote nothing after the contention",
                point.name()
            );
            // The HTML timeline marks it on the node's lane, with the point in its title.
            let t = sim::html::model::build(h, &out.report, None);
            let lane = t.lanes.iter().find(|l| l.node == 0).expect("the node's lane");
            assert!(
                lane.stalls.iter().any(|s| s.start_ns == f.at_ns && s.what.contains(point.name())),
                "seed {seed} {}: no contention mark on the lane",
                point.name()
            );
            // Busy is lawful: the oracle accepts the run.
            assert!(out.violations.is_empty(), "seed {seed} {}: {:?}", point.name(), out.violations);
            contended += 1;
        }
    }
    assert!(contended >= 20, "only {contended} runs reached a contended write");
}

#[test]
fn every_busy_call_of_a_run_meets_the_lock_within_the_hold() {
    // A contention is ended at the contended node's next point outside the call, or by the
    // timer: every busy call of a run starts within CONTENTION_MS of a contention.
    let mut seen = 0;
    for seed in 0..12u64 {
        let out = run_one(seed, 1, FaultPoint::SqliteAppendBeforeBegin, Action::Contend);
        let h = &out.history;
        let Some(f) = h.faults.iter().find(|f| f.kind == FaultKind::Contend) else { continue };
        for id in busy_calls(h) {
            let c = &h.calls[id];
            assert!(
                c.invoked_ns >= f.at_ns && c.invoked_ns <= f.at_ns + CONTENTION_MS * 1_000_000,
                "seed {seed}: call {c:?} met Busy outside the contention at {}",
                f.at_ns
            );
        }
        seen += 1;
    }
    assert!(seen >= 6, "only {seen} runs reached the point");
}

#[test]
fn a_contention_where_no_write_begins_is_a_yield() {
    for point in [
        FaultPoint::SqliteLoadBeforeRead,
        FaultPoint::SqliteAppendAfterCheck,
        FaultPoint::EngineBootBeforeMeta,
    ] {
        assert!(!contendable(point), "{}", point.name());
        let out = run_one(3, 0, point, Action::Contend);
        let f = out.history.faults.iter().find(|f| f.point == point).expect("the point is reached");
        assert_eq!(f.kind, FaultKind::Yield, "{}", point.name());
        assert!(busy_calls(&out.history).is_empty(), "{}", point.name());
    }
    for point in FaultPoint::ALL {
        let write_begins =
            point.name().ends_with(".before_begin") && !point.name().starts_with("sqlite.boot");
        assert_eq!(contendable(*point), write_begins, "{}", point.name());
    }
}

#[test]
fn a_saved_plan_names_the_contention_and_a_plan_saved_before_it_reads_none() {
    let d: Decision = serde_json::from_str(
        r#"{"node":1,"point":"sqlite.append.before_begin","occurrence":2,"action":{"kind":"contend"}}"#,
    )
    .expect("a contend decision parses");
    assert_eq!(d.action, Action::Contend);
    let plan = plan_for(queue(), ProfileName::Current, 0);
    let mut json = serde_json::to_value(&plan).expect("a plan serializes");
    json["swarm"].as_object_mut().expect("a swarm").remove("contend_per_mille");
    let old: sim::plan::Plan = serde_json::from_value(json).expect("an older plan reads");
    assert_eq!(old.swarm.contend_per_mille, 0);
}

#[test]
fn a_next_write_contention_after_a_paid_call_makes_its_receipt_meet_busy() {
    // Armed right after a paid call, the contention acts at the process's next write of the
    // run, the call's billing receipt: that append, and nothing else, meets SQLite's Busy.
    let mut contended = 0;
    for seed in 0..12u64 {
        for node in 0..2 {
            let out = run_one(seed, node, FaultPoint::EngineDispatchAfterProvider, Action::ContendNextWrite);
            let h = &out.history;
            let Some(mark) = h
                .marks
                .iter()
                .find(|m| m.point == FaultPoint::EngineDispatchAfterProvider.name() && m.node == node)
            else {
                continue;
            };
            let f =
                h.faults.iter().find(|f| f.kind == FaultKind::Contend).expect("the armed write is contended");
            assert_eq!(f.point, FaultPoint::SqliteAppendBeforeBegin, "seed {seed}");
            let call = f.call.expect("a contended write has its call in flight");
            let c = &h.calls[call];
            // The process's first call after the paid call's moment, on the same run.
            let next =
                h.calls.iter().find(|d| d.node == node && d.id >= mark.invoked_before).expect("a next call");
            assert_eq!(next.id, call, "seed {seed} node {node}");
            assert_eq!(c.run_id, mark.run_id);
            let payload = c.args.payload.as_deref().unwrap_or("");
            assert!(payload.contains("provider-call"), "seed {seed}: not a receipt: {payload}");
            assert!(c.outcome.is_busy() && c.applied.is_none(), "seed {seed}: {c:?}");
            // Any other call that met the lock did so within the hold (another process's
            // write while the writer held it).
            for id in busy_calls(h) {
                let d = &h.calls[id];
                assert!(
                    d.invoked_ns >= f.at_ns && d.invoked_ns <= f.at_ns + CONTENTION_MS * 1_000_000,
                    "seed {seed}: {d:?}"
                );
            }
            // Nothing happened at the engine moment itself: no fault recorded there.
            assert!(h.faults.iter().all(|g| g.point != FaultPoint::EngineDispatchAfterProvider));
            assert!(out.violations.is_empty(), "seed {seed}: {:?}", out.violations);
            contended += 1;
        }
    }
    assert!(contended >= 10, "only {contended} runs reached a paid call");
    // Where no write of a run follows (a store point), it is a yield.
    let out = run_one(3, 0, FaultPoint::SqliteAppendBeforeBegin, Action::ContendNextWrite);
    let f =
        out.history.faults.iter().find(|f| f.point == FaultPoint::SqliteAppendBeforeBegin).expect("reached");
    assert_eq!(f.kind, FaultKind::Yield);
    assert!(busy_calls(&out.history).is_empty());
}
