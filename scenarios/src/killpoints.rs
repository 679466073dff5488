//! `kill-points`: rulvar's kill-point table (docs/engine-model.md 9) on simulated
//! processes. Each row is data: a workflow, a write matcher, which matching write, and
//! whether the process dies just before or just after it. Row i runs on its own node: the
//! node starts the run under its own engine-owned lease and is killed at exactly that write
//! (a store wrapper, like rulvar's Proxy, matches the write); a referee node waits past the
//! ttl and resumes every run, retrying on `LeaseHeld` every `max(50, ttl/3)` ms.
//!
//! Each row asserts the exact child and resume paid calls and tool runs, the death at the
//! write (running to completion is a failure), exactly one ok `run_settle`, contiguous seqs,
//! meta ok, the count of limit terminals and the exact value. The rows are the scenario's
//! own checks (a conformance table); the generic oracle judges the same run as always.
//!
//! Knobs: `size` is how many rows the referee resumes (10; a smaller size in a replayed
//! plan leaves the residues of the later rows, e.g. a meta-behind run, for `fencesim audit`).

use std::any::Any;
use std::cell::{Cell, RefCell};
use std::fmt::Write as _;
use std::rc::Rc;
use std::time::Duration;

use serde_json::Value;
use sim::actors::engine::{FactSink, LedgerEffects};
use sim::history::FinalState;
use sim::history::{FactKind, History};
use sim::oracle::Violation;
use sim::plan::{FaultProfile, Knobs, Plan};
use sim::recorded::{RecordedStore, RecordedTranscripts};
use sim::verdict::{required, Required};
use sim::world::{NodeCtx, Scenario, WorldState};
use store::engine::{Engine, EngineError};
use store::{
    JournalEntry, JournalStore, LeasableStore, Lease, LocalFuture, MetaLookup, RunFilter, RunMeta, RunStatus,
    StoreError,
};

use store::conformance::killpoints::{fatal_write, is_run_settle as is_settle};
pub use store::conformance::killpoints::{KillRow as Row, Matcher, ROWS};

/// The run a row plays.
fn run_id(i: usize) -> String {
    format!("kp-{i}")
}

/// The referee's identity (its facts are the resume's calls).
const REFEREE: &str = "referee";
/// rulvar's kill-point worker ttl.
const TTL_MS: u64 = 2000;

pub struct KillPoints;

pub static KILL_POINTS: KillPoints = KillPoints;

/// A resume's settled (status, value, segment), or its error in words.
type Resumed = Result<(RunStatus, Option<Value>, u64), String>;

/// What the nodes and the supervisor share.
pub struct KillShared {
    seed: u64,
    /// Per row: the child died at its write.
    died: RefCell<Vec<bool>>,
    /// Per row: the child ran to completion (a failure).
    completed: RefCell<Vec<bool>>,
    /// Per row: the resume's result.
    resumed: RefCell<Vec<Option<Resumed>>>,
    referee_done: Cell<bool>,
}

fn shared(world: &WorldState) -> Rc<KillShared> {
    world.shared_as::<KillShared>()
}

/// A journal store that kills its process before or after the k-th matching write.
#[derive(Clone)]
struct KillSwitch {
    inner: RecordedStore,
    world: Rc<WorldState>,
    node: u32,
    row: Row,
    seen: Rc<Cell<u32>>,
}

impl KillSwitch {
    /// `Some(before)` when this write is the one that kills.
    fn hit(&self, matches: bool) -> Option<bool> {
        fatal_write(&self.seen, matches, self.row.occurrence, self.row.before)
    }

    async fn die(&self) -> ! {
        shared(&self.world).died.borrow_mut()[self.node as usize] = true;
        // Killed for good: the run ends long before this restart would happen.
        self.world.crash_self(self.node, 3_600_000);
        std::future::pending::<()>().await;
        unreachable!("a killed node is never polled again")
    }

    async fn guarded<T>(
        &self,
        hit: Option<bool>,
        write: impl std::future::Future<Output = Result<T, StoreError>>,
    ) -> Result<T, StoreError> {
        if hit == Some(true) {
            self.die().await;
        }
        let r = write.await;
        if hit == Some(false) && r.is_ok() {
            self.die().await;
        }
        r
    }
}

impl JournalStore for KillSwitch {
    async fn append(
        &self,
        run_id: &str,
        entry: &JournalEntry,
        lease: Option<&Lease>,
    ) -> Result<(), StoreError> {
        let hit = self.hit(self.row.matcher.entry(entry));
        self.guarded(hit, self.inner.append(run_id, entry, lease)).await
    }
    async fn load(&self, run_id: &str) -> Result<Vec<JournalEntry>, StoreError> {
        self.inner.load(run_id).await
    }
    async fn put_meta(&self, meta: &RunMeta, lease: Option<&Lease>) -> Result<(), StoreError> {
        let hit = self.hit(self.row.matcher.meta(meta));
        self.guarded(hit, self.inner.put_meta(meta, lease)).await
    }
    async fn list_runs(&self, filter: &RunFilter) -> Result<Vec<RunMeta>, StoreError> {
        self.inner.list_runs(filter).await
    }
    async fn delete(&self, run_id: &str, lease: Option<&Lease>) -> Result<(), StoreError> {
        self.inner.delete(run_id, lease).await
    }
    fn fenced_writes(&self) -> bool {
        self.inner.fenced_writes()
    }
}

impl MetaLookup for KillSwitch {
    async fn get_meta(&self, run_id: &str) -> Result<Option<RunMeta>, StoreError> {
        self.inner.get_meta(run_id).await
    }
}

impl LeasableStore for KillSwitch {
    async fn acquire(&self, run_id: &str, owner: &str) -> Result<Lease, StoreError> {
        self.inner.acquire(run_id, owner).await
    }
    async fn renew(&self, lease: &Lease) -> Result<(), StoreError> {
        self.inner.renew(lease).await
    }
    async fn release(&self, lease: &Lease) -> Result<(), StoreError> {
        self.inner.release(lease).await
    }
    fn lease_ttl(&self) -> Option<Duration> {
        self.inner.lease_ttl()
    }
}

fn sink(node: &NodeCtx, owner: &str) -> FactSink {
    FactSink {
        rec: node.world.recorder.clone(),
        node: node.index,
        incarnation: node.incarnation,
        owner: owner.to_string(),
    }
}

async fn child(node: NodeCtx, sh: Rc<KillShared>) {
    let i = node.index as usize;
    let row = ROWS[i];
    let owner = format!("child-{i}");
    let sink = sink(&node, &owner);
    let world = LedgerEffects::new(&sink, sh.seed, (0, 0));
    let journal = KillSwitch {
        inner: node.store.clone(),
        world: node.world.clone(),
        node: node.index,
        row,
        seen: Rc::new(Cell::new(0)),
    };
    let transcripts: RecordedTranscripts = node.store.transcripts();
    let env: Rc<dyn store::Env> = node.env.clone();
    let engine = Engine::new(journal, transcripts, world, env, node.world.profile, owner);
    let run_id = run_id(i);
    let wf = row.workflow();
    sink.submitted(&run_id, &wf);
    let r = engine.run(&run_id, &wf).await;
    sink.settled(&run_id, "run", &r);
    sh.completed.borrow_mut()[i] = true;
}

async fn referee(node: NodeCtx, sh: Rc<KillShared>) {
    let sink = sink(&node, REFEREE);
    let world = LedgerEffects::new(&sink, sh.seed, (0, 0));
    let store = node.store.clone();
    let transcripts = store.transcripts();
    let env: Rc<dyn store::Env> = node.env.clone();
    let engine = Engine::new(store, transcripts, world, env, node.world.profile, REFEREE);
    // Let every child reach its kill point.
    madsim::time::sleep(Duration::from_millis(100)).await;
    let retry = Duration::from_millis((TTL_MS / 3).max(50));
    // `size` rows are resumed (all ten by default; a plan with a smaller size leaves the
    // later rows' residue in place, which is how the audit test builds its database).
    let resumed = node.world.plan.knobs.size as usize;
    for (i, row) in ROWS.iter().enumerate().take(resumed) {
        let run_id = run_id(i);
        let wf = row.workflow();
        let mut waited = Duration::ZERO;
        let result = loop {
            let r = engine.resume(&run_id, &wf, None).await;
            match &r {
                Err(EngineError::Store(StoreError::LeaseHeld { .. }))
                    if waited < Duration::from_millis(15_000) =>
                {
                    madsim::time::sleep(retry).await;
                    waited += retry;
                }
                _ => break r,
            }
        };
        sink.settled(&run_id, "resume", &result);
        sh.resumed.borrow_mut()[i] =
            Some(result.map(|o| (o.status, o.value, o.segment)).map_err(|e| e.to_string()));
    }
    sh.referee_done.set(true);
}

/// Every seed plays every row: each resume is a later segment after a silent holder's
/// lease lapsed, and the `before` rows pay a turn again.
const COVERAGE: &[Required] = &[
    required("run_resumed_by_a_later_segment", 990),
    required("takeover_of_a_silent_holder", 990),
    required("turn_paid_again_in_a_window", 990),
];

impl Scenario for KillPoints {
    fn name(&self) -> &'static str {
        "kill-points"
    }

    fn coverage(&self) -> &'static [Required] {
        COVERAGE
    }

    fn describe(&self) -> &'static str {
        "rulvar's ten kill-point rows: a process killed before/after one write, resumed by another past the ttl"
    }

    fn knobs(&self, _seed: u64) -> Knobs {
        Knobs { nodes: ROWS.len() as u32 + 1, ttl_ms: TTL_MS, size: ROWS.len() as u32, cap_ms: 60_000 }
    }

    fn faults(&self, _knobs: &Knobs) -> FaultProfile {
        FaultProfile::none()
    }

    fn shared(&self, plan: &Plan) -> Rc<dyn Any> {
        Rc::new(KillShared {
            seed: plan.seed,
            died: RefCell::new(vec![false; ROWS.len()]),
            completed: RefCell::new(vec![false; ROWS.len()]),
            resumed: RefCell::new(vec![None; ROWS.len()]),
            referee_done: Cell::new(false),
        })
    }

    fn node_main(&self, node: NodeCtx) -> LocalFuture<'static, ()> {
        Box::pin(async move {
            let sh = shared(&node.world);
            if node.incarnation > 0 {
                return;
            }
            if (node.index as usize) < ROWS.len() {
                child(node, sh).await;
            } else {
                referee(node, sh).await;
            }
        })
    }

    fn supervise(&self, world: Rc<WorldState>) -> LocalFuture<'static, ()> {
        Box::pin(async move {
            let sh = shared(&world);
            for _ in 0..6000 {
                if sh.referee_done.get() {
                    break;
                }
                madsim::time::sleep(Duration::from_millis(100)).await;
            }
        })
    }

    fn scenario_checks(&self, world: &WorldState, history: &History, fin: &FinalState) -> Vec<Violation> {
        table_rows(world, history, fin)
            .into_iter()
            .flat_map(|r| {
                r.problems
                    .into_iter()
                    .map(move |p| Violation::new("kill_point_row", format!("{}: {p}", r.name)))
            })
            .collect()
    }

    fn table(&self, world: &WorldState, history: &History, fin: &FinalState) -> Option<String> {
        let mut out = String::new();
        let _ = writeln!(
            out,
            "{:<28} {:>4} {:>11} {:>12} {:>6} {:>7} {:>5}  result",
            "row", "occ", "child c/t", "resume c/t", "limits", "settles", "meta"
        );
        for r in table_rows(world, history, fin) {
            let _ = writeln!(
                out,
                "{:<28} {:>4} {:>11} {:>12} {:>6} {:>7} {:>5}  {}",
                r.name,
                r.occurrence,
                format!("{}/{}", r.child.0, r.child.1),
                format!("{}/{}", r.resume.0, r.resume.1),
                r.limits,
                r.ok_settles,
                r.meta,
                if r.problems.is_empty() {
                    "ok".to_string()
                } else {
                    format!("FAIL ({})", r.problems.join("; "))
                }
            );
        }
        Some(out)
    }
}

/// One row's observed figures.
struct Observed {
    name: String,
    occurrence: u32,
    child: (u32, u32),
    resume: (u32, u32),
    limits: usize,
    ok_settles: usize,
    meta: String,
    problems: Vec<String>,
}

fn table_rows(world: &WorldState, history: &History, fin: &FinalState) -> Vec<Observed> {
    let sh = shared(world);
    let count = |owner: &str, run: &str| {
        let mut paid = 0;
        let mut tools = 0;
        for f in history.facts.iter().filter(|f| f.owner == owner) {
            match &f.kind {
                FactKind::Paid { run_id, .. } if run_id == run => paid += 1,
                FactKind::Tool { run_id, .. } if run_id == run => tools += 1,
                _ => {}
            }
        }
        (paid, tools)
    };
    ROWS.iter()
        .enumerate()
        .map(|(i, row)| {
            let run_id = run_id(i);
            let child = count(&format!("child-{i}"), &run_id);
            let resume = count(REFEREE, &run_id);
            let entries: Vec<JournalEntry> = fin
                .entries
                .get(&run_id)
                .map(|v| v.iter().filter_map(|p| JournalEntry::from_json(p).ok()).collect())
                .unwrap_or_default();
            let limits = entries.iter().filter(|e| Matcher::LimitTerminal.entry(e)).count();
            let settles: Vec<&JournalEntry> = entries.iter().filter(|e| is_settle(e)).collect();
            let ok_settles = settles
                .iter()
                .filter(|e| e.value.get("runStatus").and_then(Value::as_str) == Some("ok"))
                .count();
            let meta = fin.meta.get(&run_id).and_then(|p| RunMeta::from_json(p).ok());
            let mut problems = Vec::new();
            if !sh.died.borrow()[i] || sh.completed.borrow()[i] {
                problems.push("the child was not killed at its write".to_string());
            }
            if child != row.child {
                problems.push(format!(
                    "child paid/tools {}/{} != {}/{}",
                    child.0, child.1, row.child.0, row.child.1
                ));
            }
            if resume != row.resume {
                problems.push(format!(
                    "resume paid/tools {}/{} != {}/{}",
                    resume.0, resume.1, row.resume.0, row.resume.1
                ));
            }
            if limits != row.limits {
                problems.push(format!("{limits} limit terminals != {}", row.limits));
            }
            if settles.len() != 1 || ok_settles != 1 {
                problems.push(format!(
                    "{} run_settle entries ({ok_settles} ok), want exactly one ok",
                    settles.len()
                ));
            }
            let first = entries.first().map_or(0, |e| e.seq.0);
            if entries.iter().enumerate().any(|(k, e)| e.seq.0 != first + k as u64) {
                problems.push("seqs are not contiguous".to_string());
            }
            if meta.as_ref().map(|m| m.status) != Some(RunStatus::Ok) {
                problems.push(format!(
                    "meta is {}",
                    meta.as_ref().map_or("missing".to_string(), |m| m.status.to_string())
                ));
            }
            match &sh.resumed.borrow()[i] {
                Some(Ok((RunStatus::Ok, Some(v), _))) if *v == row.value() => {}
                Some(Ok((s, v, _))) => problems.push(format!(
                    "resume settled {s} with {}",
                    v.as_ref().map_or("no value".to_string(), |v| v.to_string())
                )),
                Some(Err(e)) => problems.push(format!("resume failed: {e}")),
                None => problems.push("never resumed".to_string()),
            }
            Observed {
                name: row.name.to_string(),
                occurrence: row.occurrence,
                child,
                resume,
                limits,
                ok_settles,
                meta: meta.map_or("-".to_string(), |m| m.status.to_string()),
                problems,
            }
        })
        .collect()
}
