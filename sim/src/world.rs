//! The world: N simulated processes (madsim nodes) over one shared SQLite WAL file, each
//! constructing its OWN store (concurrently, at the same virtual instant: concurrent boot
//! is part of the exercise), a supervisor that restarts crashed nodes and decides when the
//! run ends, and the final state read back for the oracle.
//!
//! Durability model of the simulation: the database file lives on /dev/shm when present,
//! else in the temp dir, unique per run and removed afterwards (or, after Ctrl-C or SIGTERM,
//! by `crate::interrupt`, where each run registers it before creating it). Connections run with
//! `synchronous=OFF`: the simulator models PROCESS crashes (a killed node's futures are
//! dropped, its open transaction rolls back, everything it committed stays), never power
//! loss, torn pages or lost fsyncs. A crash therefore lands only at an `.await` (a fault
//! point), never inside one SQLite call.
//!
//! Contention is real: the nodes' connections meet each other's write locks, and a plan's
//! contended write (`Action::Contend`) is one more connection of the world to the same file,
//! opened at its first use, that holds `BEGIN IMMEDIATE` across one call and writes nothing.
//!
//! The file is created with 1 KiB pages (`SIM_PAGE_SIZE`) instead of SQLite's 4 KiB: the
//! store's rows are small, every commit appends one WAL frame per dirty page, and copying
//! those frames into /dev/shm was the simulator's largest kernel cost. Page size changes
//! no lock, no transaction boundary and no SQL result; the real soak keeps the default.
//!
//! Everything in a run derives from (scenario, profile, seed, plan): madsim's scheduler is
//! seeded from the seed's "scheduler" stream, the fault decisions come from the plan, the
//! workload of each node and incarnation from its own stream.

use std::any::Any;
use std::cell::{Cell, RefCell};
use std::path::{Path, PathBuf};
use std::rc::Rc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use futures::channel::mpsc;
use rusqlite::Connection;
use store::{FaultPoint, LocalFuture, Profile, SqliteOptions, StoreError, Synchronous};

use crate::env::SimEnv;
use crate::history::{FinalState, History, LeaseRow, Recorder};
use crate::plan::{FaultProfile, Knobs, Plan};
use crate::recorded::{Caller, RecordedStore};
use crate::seed::stream_key;
use crate::time::now_ns;
pub use crate::world_state::{WorldState, CALL_BUDGET, READ_BUDGET};

/// The page size of the world's database file (see the module header).
pub const SIM_PAGE_SIZE: u32 = 1024;

/// A scenario: a workload, its fault emphasis, and what its run must keep.
pub trait Scenario: Sync {
    /// Stable name (`soak`, `kill-points`, ...).
    fn name(&self) -> &'static str;
    /// One line for `fencesim list`.
    fn describe(&self) -> &'static str;
    /// The knobs for a seed (swarm: drawn from the seed).
    fn knobs(&self, seed: u64) -> Knobs;
    /// The fault emphasis for these knobs.
    fn faults(&self, knobs: &Knobs) -> FaultProfile;
    /// State shared by the nodes and the supervisor of one run.
    fn shared(&self, plan: &Plan) -> Rc<dyn Any>;
    /// What one node does once its store is built (re-run after a restart).
    fn node_main(&self, node: NodeCtx) -> LocalFuture<'static, ()>;
    /// Runs in the main task; returns when the run is over (quorum met, cap hit, healed).
    fn supervise(&self, world: Rc<WorldState>) -> LocalFuture<'static, ()>;
    /// Scenario-level checks that need the scenario's own shared state (quorum, referee).
    fn scenario_checks(
        &self,
        world: &WorldState,
        history: &History,
        fin: &FinalState,
    ) -> Vec<crate::verdict::Violation>;
    /// A scenario's own table for the run report (the kill-point rows), if it has one.
    fn table(&self, _world: &WorldState, _history: &History, _fin: &FinalState) -> Option<String> {
        None
    }
    /// Whether every run's journal must have seqs contiguous from 1 (the soak protocol).
    fn contiguous_seqs(&self) -> bool {
        false
    }
    /// The rule this scenario's queue workers apply retention by, if any apply it.
    fn retention_rule(&self) -> Option<crate::verdict::RetentionRule> {
        None
    }
    /// The fault points a targeted scenario exists to exercise: a sweep in which one of
    /// them never fired says the scenario is weak (`fencesim findings` fails on it).
    /// Default: none (a generic scenario).
    fn key_points(&self) -> &'static [FaultPoint] {
        &[]
    }
    /// The coverage goals a sweep of this scenario must meet, each in a share of its seeds
    /// (`fencesim sweep` exits 3 on a shortfall). Default: none.
    fn coverage(&self) -> &'static [crate::verdict::Required] {
        &[]
    }
    /// Smaller knobs the shrinker may try for a failing plan of these knobs, most
    /// aggressive first (fewer nodes, a smaller `size`). Default: none (knobs are fixed).
    fn smaller_knobs(&self, knobs: &Knobs) -> Vec<Knobs> {
        let _ = knobs;
        Vec::new()
    }
    /// The small configuration `fencesim explore --exhaustive` enumerates (two nodes, one
    /// run, a small workload). Default: none (the scenario has no small configuration, and
    /// an exhaustive explore of it is refused as bad input).
    fn small_knobs(&self) -> Option<Knobs> {
        None
    }
}

/// What a node's body gets.
pub struct NodeCtx {
    pub index: u32,
    pub incarnation: u32,
    pub store: RecordedStore,
    pub env: Rc<SimEnv>,
    pub world: Rc<WorldState>,
}

thread_local! {
    static CURRENT_WORLD: RefCell<Option<Rc<WorldState>>> = const { RefCell::new(None) };
}

fn current_world() -> Option<Rc<WorldState>> {
    CURRENT_WORLD.with(|w| w.borrow().clone())
}

/// Read the whole database state (every table, in key order) through `conn`.
pub fn read_final(conn: &Connection) -> rusqlite::Result<FinalState> {
    let mut f = FinalState::default();
    let mut s = conn.prepare("SELECT run_id, payload FROM entries ORDER BY id")?;
    for row in s.query_map([], |r| Ok((r.get::<_, String>(0)?, r.get::<_, String>(1)?)))? {
        let (run, payload) = row?;
        f.entries.entry(run).or_default().push(payload);
    }
    let mut s = conn.prepare("SELECT run_id, payload FROM meta ORDER BY run_id")?;
    for row in s.query_map([], |r| Ok((r.get::<_, String>(0)?, r.get::<_, String>(1)?)))? {
        let (run, payload) = row?;
        f.meta.insert(run, payload);
    }
    let mut s = conn.prepare("SELECT run_id, owner, epoch, expires_at FROM leases ORDER BY run_id")?;
    for row in s.query_map([], |r| {
        Ok((
            r.get::<_, String>(0)?,
            LeaseRow { owner: r.get(1)?, epoch: r.get::<_, i64>(2)? as u64, expires_at: r.get(3)? },
        ))
    })? {
        let (run, l) = row?;
        f.leases.insert(run, l);
    }
    let mut s = conn.prepare("SELECT run_id, epoch FROM epochs ORDER BY run_id")?;
    for row in s.query_map([], |r| Ok((r.get::<_, String>(0)?, r.get::<_, i64>(1)? as u64)))? {
        let (run, e) = row?;
        f.epochs.insert(run, e);
    }
    let mut s = conn.prepare("SELECT ref, data FROM blobs ORDER BY ref")?;
    for row in s.query_map([], |r| Ok((r.get::<_, String>(0)?, r.get::<_, Vec<u8>>(1)?)))? {
        let (r, d) = row?;
        f.blobs.insert(r, d);
    }
    f.page_size = conn.query_row("PRAGMA page_size", [], |r| r.get::<_, u32>(0)).ok();
    f.journal_mode = conn.query_row("PRAGMA journal_mode", [], |r| r.get::<_, String>(0)).ok();
    Ok(f)
}

static RUN_COUNTER: AtomicU64 = AtomicU64::new(0);

/// A unique database path for one run, on /dev/shm when present.
fn fresh_db_path(seed: u64) -> PathBuf {
    let dir = if Path::new("/dev/shm").is_dir() { PathBuf::from("/dev/shm") } else { std::env::temp_dir() };
    let n = RUN_COUNTER.fetch_add(1, Ordering::Relaxed);
    dir.join(format!("fencesim-{}-{n}-{seed}.db", std::process::id()))
}

/// What one run produced.
pub struct RunOutput {
    pub history: History,
    pub fin: FinalState,
    pub scenario_violations: Vec<crate::verdict::Violation>,
    /// The scenario's own table, if it has one.
    pub table: Option<String>,
    pub end_ns: u64,
    /// Per `node * FaultPoint::ALL.len() + point.index()`: the last occurrence reached while
    /// faults were on (all zero when occurrences were not counted; see [`RunOptions::count_always`]).
    pub reached: Vec<u32>,
    /// Per slot as `reached`: the occurrences reached when the last decision fired (all zero
    /// when none fired or occurrences were not counted).
    pub at_last_fire: Vec<u32>,
    /// Per slot as `reached`: how many of those occurrences the caller reached acting under
    /// a lease.
    pub leased: Vec<u32>,
}

/// How to run one (scenario, profile, plan), beyond the plan itself.
#[derive(Clone, Debug, Default)]
pub struct RunOptions {
    /// Count the occurrences (returned in `RunOutput::reached`) even when the plan has no
    /// decision (`explore` needs the reached (node, point, occurrence) triples of every run).
    pub count_always: bool,
    /// Keep a consistent copy of the final database here (for `fencesim audit`). The copy
    /// is made with `VACUUM INTO` after every node is dead.
    pub keep_db: Option<PathBuf>,
    /// The run's read budget in items (default [`READ_BUDGET`]).
    pub read_budget: Option<usize>,
}

/// Run one (scenario, profile, plan). The database file is created fresh and removed.
pub fn run(
    scenario: &'static dyn Scenario,
    profile: Profile,
    plan: Plan,
    options: &RunOptions,
) -> Result<RunOutput, String> {
    if crate::foreign::active().is_some() {
        crate::foreign::check_scenario(scenario.name())?;
        crate::foreign::take_fault();
    }
    let table = plan.table()?;
    let lazy = plan.recipe.clone().map(|r| crate::plan::LazyDecisions::new(&plan, r));
    let db_path = fresh_db_path(plan.seed);
    // Removed when the run ends, or by the Ctrl-C / SIGTERM handler if it does not.
    let db_guard = crate::interrupt::track_db(&db_path)?;
    crate::interrupt::remove_db_files(&db_path);
    let (tx, rx) = mpsc::unbounded();
    let (exhausted_tx, exhausted_rx) = futures::channel::oneshot::channel();
    let nodes = plan.knobs.nodes;
    let shared = scenario.shared(&plan);
    let world = Rc::new(WorldState {
        plan,
        profile,
        recorder: Recorder::observing_store_clock(),
        shared,
        db_path: db_path.clone(),
        table,
        lazy,
        occurrences: RefCell::new(vec![0; nodes as usize * FaultPoint::ALL.len()]),
        count_always: options.count_always,
        armed: RefCell::new(vec![0; nodes as usize * FaultPoint::ALL.len()]),
        at_last_fire: RefCell::new(vec![0; nodes as usize * FaultPoint::ALL.len()]),
        leased: RefCell::new(vec![0; nodes as usize * FaultPoint::ALL.len()]),
        observer: RefCell::new(None),
        contender: RefCell::new(None),
        contention: RefCell::new(None),
        contentions: Cell::new(0),
        contend_next: RefCell::new(std::collections::BTreeMap::new()),
        faults_on: Cell::new(true),
        exhausted: Cell::new(false),
        read_budget: options.read_budget.unwrap_or(READ_BUDGET),
        exhausted_tx: RefCell::new(Some(exhausted_tx)),
        exhausted_rx: RefCell::new(Some(exhausted_rx)),
        incarnations: RefCell::new(vec![0; nodes as usize]),
        alive: RefCell::new(vec![true; nodes as usize]),
        node_ids: RefCell::new(Vec::new()),
        wake_tx: RefCell::new(Some(tx)),
        wake_rx: RefCell::new(Some(rx)),
        takeovers: RefCell::new(Vec::new()),
        pause_count: Cell::new(0),
        interrupts: RefCell::new(std::collections::BTreeMap::new()),
    });
    let sched_seed = stream_key(world.plan.seed, "scheduler", 0);
    let rt = madsim::runtime::Runtime::with_seed_and_config(sched_seed, madsim::Config::default());
    CURRENT_WORLD.with(|w| *w.borrow_mut() = Some(world.clone()));
    let result = rt.block_on(drive(scenario, world.clone(), options.keep_db.as_deref()));
    CURRENT_WORLD.with(|w| *w.borrow_mut() = None);
    drop(rt);
    world.contender.borrow_mut().take();
    world.observer.borrow_mut().take();
    drop(db_guard);
    // A foreign store's child fault is a harness error, whatever the run produced.
    if let Some(fault) = crate::foreign::take_fault() {
        return Err(format!("harness error: {fault}"));
    }
    let (fin, end_ns) = result?;
    world.recorder.inner.borrow_mut().fold_points();
    let (scenario_violations, table) = {
        let h = world.recorder.inner.borrow();
        (scenario.scenario_checks(&world, &h, &fin), scenario.table(&world, &h, &fin))
    };
    let history = std::mem::take(&mut *world.recorder.inner.borrow_mut());
    let reached = std::mem::take(&mut *world.armed.borrow_mut());
    let at_last_fire = std::mem::take(&mut *world.at_last_fire.borrow_mut());
    let leased = std::mem::take(&mut *world.leased.borrow_mut());
    Ok(RunOutput { history, fin, scenario_violations, table, end_ns, reached, at_last_fire, leased })
}

async fn drive(
    scenario: &'static dyn Scenario,
    world: Rc<WorldState>,
    keep_db: Option<&Path>,
) -> Result<(FinalState, u64), String> {
    // The observer: a plain connection that only reads committed state.
    let obs = crate::world_state::harness_connection(&world.db_path).map_err(|e| format!("observer: {e}"))?;
    *world.observer.borrow_mut() = Some(obs);

    let handle = madsim::runtime::Handle::current();
    for i in 0..world.plan.knobs.nodes {
        let node = handle.create_node().name(format!("n{i}")).init(move || node_init(scenario, i)).build();
        world.node_ids.borrow_mut().push(node.id());
    }
    madsim::task::spawn_local(world.clone().wake_loop());
    // The supervisor decides when the run ends, unless the call budget runs out first. The
    // budget's wake-up is a channel, not a timer, so a normal run's schedule is untouched.
    let exhausted = world.exhausted_rx.borrow_mut().take();
    match exhausted {
        Some(rx) => {
            futures::future::select(Box::pin(scenario.supervise(world.clone())), rx).await;
        }
        None => scenario.supervise(world.clone()).await,
    }
    world.faults_on.set(false);
    world.end_contention(|_| true);
    world.wake_tx.borrow_mut().take();
    world.kill_all();
    madsim::time::sleep(Duration::from_millis(1)).await;
    let end_ns = now_ns();
    let fin = {
        let obs = world.observer.borrow();
        let conn = obs.as_ref().ok_or("observer closed")?;
        if let Some(path) = keep_db {
            let _ = std::fs::remove_file(path);
            conn.execute("VACUUM INTO ?1", [path.display().to_string()])
                .map_err(|e| format!("cannot keep the database at {}: {e}", path.display()))?;
        }
        match read_final(conn) {
            Ok(f) => f,
            Err(_) => FinalState { missing_schema: true, ..FinalState::default() },
        }
    };
    Ok((fin, end_ns))
}

/// The options every node's store is built with, over the database at `path`.
fn store_options(world: &WorldState, path: &std::path::Path, ttl_ms: i64) -> SqliteOptions {
    SqliteOptions::new(path)
        .ttl_ms(ttl_ms)
        .profile(world.profile)
        .synchronous(Synchronous::Off)
        .page_size(SIM_PAGE_SIZE)
}

impl NodeCtx {
    /// Construct one more store for this node, over the same database and with the same
    /// options as its own but a lease ttl of `ttl_ms`, recorded as a `boot` call like its
    /// own; then close it unused. The store's answer to the ttl (L6: outside 1 to
    /// 2147483647 ms it refuses before the database opens) is the oracle's to judge. The
    /// node's own store, and what it leases, are untouched. A foreign store starts one more
    /// process for it.
    pub async fn boot_another(&self, ttl_ms: i64) -> Result<(), StoreError> {
        self.boot_at(&self.world.db_path, ttl_ms).await
    }

    /// As [`Self::boot_another`], over a path of its own where no database exists (beside
    /// the run's, named for this process incarnation); then whether the construction left a
    /// database file there (the main file, or its `-wal`, `-shm` or `-journal` companion),
    /// and the files are removed. A store that refuses a ttl before the database opens
    /// leaves nothing; one that opens it first leaves a file, even when it then refuses.
    /// (What the construction answered is in the history, as its `boot` call.)
    pub async fn boot_on_a_fresh_path(&self, ttl_ms: i64) -> bool {
        let mut path = self.world.db_path.as_os_str().to_owned();
        path.push(format!(".fresh-n{}-i{}", self.index, self.incarnation));
        let path = std::path::PathBuf::from(path);
        crate::interrupt::remove_db_files(&path);
        let _ = self.boot_at(&path, ttl_ms).await;
        crate::interrupt::remove_db_files(&path) > 0
    }

    async fn boot_at(&self, path: &std::path::Path, ttl_ms: i64) -> Result<(), StoreError> {
        let options = store_options(&self.world, path, ttl_ms);
        let caller = &self.store.caller;
        let env: Rc<dyn store::Env> = self.env.clone();
        match crate::foreign::active() {
            Some(spec) => caller.boot_foreign(spec, path, &options, env).await.map(drop),
            None => caller.boot(options, env).await.map(drop),
        }
    }
}

/// A node's life: build its own store (concurrently with every other node), then run the
/// scenario's body. Re-run by madsim on restart.
async fn node_init(scenario: &'static dyn Scenario, index: u32) {
    let Some(world) = current_world() else { return };
    let incarnation = world.incarnations.borrow()[index as usize];
    let env = Rc::new(SimEnv {
        node: index,
        clock: world.plan.clocks[index as usize],
        world: world.clone(),
        own_store: RefCell::new(None),
    });
    let caller = Caller { rec: world.recorder.clone(), node: index, incarnation };
    let options = store_options(&world, &world.db_path, world.plan.knobs.ttl_ms as i64);
    let env_dyn: Rc<dyn store::Env> = env.clone();
    let store = match crate::foreign::active() {
        Some(spec) => {
            let Ok(store) = caller.boot_foreign(spec, &world.db_path, &options, env_dyn).await else {
                return;
            };
            store.into()
        }
        None => {
            let Ok(store) = caller.boot(options, env_dyn).await else { return };
            *env.own_store.borrow_mut() = Some(store.downgrade());
            store.into()
        }
    };
    let store = RecordedStore { inner: store, caller };
    scenario.node_main(NodeCtx { index, incarnation, store, env, world }).await;
}
