//! rulvar's kill-point table (docs/engine-model.md 9: setup 9.1, rows 9.2), twice:
//!
//! - **real**: a child process (`fencesim kill-child`, hidden) drives the engine model over
//!   its own `SqliteStore` with the real clock (store::SystemEnv) and announces every paid
//!   call and tool run on stdout; when it reaches the row's write (before or after it) it
//!   says so and waits, and the parent SIGKILLs it there (`Child::kill`). The parent then
//!   plays the referee process: it retries `Engine::resume` with its own store until the
//!   dead child's lease lapses (a real ttl wait, polled every ttl/3, up to 15 s past the
//!   ttl) and checks the row.
//! - **in-process**: the same rows over the same engine and SqliteStore in one process on a
//!   manual clock: the kill is a `StoreError::Crashed` answer at the write and the ttl wait
//!   is a clock jump. This is the engine harness's view of the table, not a madsim
//!   scenario (the simulator's own `kill-points` scenario lives elsewhere).
//!
//! Each row checks what rulvar's suite pins: the child's paid calls and tool runs before
//! death, the resume's re-paid calls and tool runs, one `ok` run settle, contiguous seqs,
//! the `limit` terminals, meta `ok` with two segments and the run's genesis, the workflow
//! value, and that the referee released its lease.

use std::cell::Cell;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::rc::Rc;
use std::time::Duration;

use serde::Serialize;

use crate::child::{ChildProc, Stderr};
use serde_json::{json, Value};
use store::engine::{Effects, Engine, EngineError, PaidCall, ToolCall};
use store::{
    Env, JournalEntry, JournalStore, LeasableStore, Lease, LocalFuture, ManualClock, ManualEnv, MetaLookup,
    Profile, RunFilter, RunMeta, RunStatus, SqliteOptions, SqliteStore, StoreError, Synchronous, SystemEnv,
};

use crate::machine::{cpu_times, mono_ns};

const RUN: &str = "RUN";
/// The in-process table's ttl (a manual clock: any value is instant).
const SIM_TTL_MS: i64 = 1_000;
const SIM_T0_MS: i64 = 1_700_000_000_000;

pub use store::conformance::killpoints::{is_run_settle as is_settle, KillRow as Row, Matcher, ROWS};

/// How the kill happens.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kill {
    /// Answer `StoreError::Crashed` (the in-process table).
    Crash,
    /// Say `KILL` on stdout and wait for the parent's SIGKILL (a real child process).
    Signal,
}

/// A journal store that dies at the row's write.
#[derive(Clone)]
struct Killable<S> {
    inner: S,
    row: Row,
    kill: Kill,
    seen: Rc<Cell<u32>>,
}

impl<S> Killable<S> {
    /// `Some(before)` when this matching write is the fatal one.
    fn hit(&self, matches: bool) -> Option<bool> {
        store::conformance::killpoints::fatal_write(&self.seen, matches, self.row.occurrence, self.row.before)
    }

    /// Run `write`, dying before it when `hit` is `Some(true)` and after it (when it
    /// succeeded) when `hit` is `Some(false)`.
    async fn guarded<T>(
        &self,
        hit: Option<bool>,
        write: impl std::future::Future<Output = store::Result<T>>,
    ) -> store::Result<T> {
        if hit == Some(true) {
            return Err(self.die());
        }
        let r = write.await?;
        if hit == Some(false) {
            return Err(self.die());
        }
        Ok(r)
    }

    fn die(&self) -> StoreError {
        match self.kill {
            Kill::Crash => StoreError::Crashed { point: "killpoint" },
            Kill::Signal => {
                say("KILL");
                // The parent SIGKILLs this process now; if it never does (it died), give up.
                std::thread::sleep(Duration::from_secs(120));
                std::process::exit(3)
            }
        }
    }
}

impl<S: JournalStore> JournalStore for Killable<S> {
    async fn append(&self, run_id: &str, entry: &JournalEntry, lease: Option<&Lease>) -> store::Result<()> {
        let hit = self.hit(self.row.matcher.entry(entry));
        self.guarded(hit, self.inner.append(run_id, entry, lease)).await
    }
    async fn load(&self, run_id: &str) -> store::Result<Vec<JournalEntry>> {
        self.inner.load(run_id).await
    }
    async fn put_meta(&self, meta: &RunMeta, lease: Option<&Lease>) -> store::Result<()> {
        let hit = self.hit(self.row.matcher.meta(meta));
        self.guarded(hit, self.inner.put_meta(meta, lease)).await
    }
    async fn list_runs(&self, filter: &RunFilter) -> store::Result<Vec<RunMeta>> {
        self.inner.list_runs(filter).await
    }
    async fn delete(&self, run_id: &str, lease: Option<&Lease>) -> store::Result<()> {
        self.inner.delete(run_id, lease).await
    }
    fn fenced_writes(&self) -> bool {
        self.inner.fenced_writes()
    }
}

impl<S: MetaLookup> MetaLookup for Killable<S> {
    async fn get_meta(&self, run_id: &str) -> store::Result<Option<RunMeta>> {
        self.inner.get_meta(run_id).await
    }
}

impl<S: LeasableStore> LeasableStore for Killable<S> {
    async fn acquire(&self, run_id: &str, owner: &str) -> store::Result<Lease> {
        self.inner.acquire(run_id, owner).await
    }
    async fn renew(&self, lease: &Lease) -> store::Result<()> {
        self.inner.renew(lease).await
    }
    async fn release(&self, lease: &Lease) -> store::Result<()> {
        self.inner.release(lease).await
    }
    fn lease_ttl(&self) -> Option<Duration> {
        self.inner.lease_ttl()
    }
}

fn say(line: &str) {
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{line}");
    let _ = out.flush();
}

/// Replies "alpha" to op `one`, "beta" to `two`; counts paid calls and tool runs, and (in
/// a child process) announces each on stdout, so the parent knows them after the kill.
#[derive(Default)]
struct CountingEffects {
    paid: Cell<u32>,
    tools: Cell<u32>,
    announce: bool,
}

impl Effects for CountingEffects {
    fn provider_call(&self, call: &PaidCall) -> LocalFuture<'static, Value> {
        self.paid.set(self.paid.get() + 1);
        if self.announce {
            say("PAID");
        }
        let reply = match call.op.as_str() {
            "one" => json!("alpha"),
            "two" => json!("beta"),
            op => json!(format!("{op}:{}", call.turn)),
        };
        Box::pin(std::future::ready(reply))
    }
    fn tool_execute(&self, call: &ToolCall) -> LocalFuture<'static, Value> {
        self.tools.set(self.tools.get() + 1);
        if self.announce {
            say("TOOL");
        }
        Box::pin(std::future::ready(json!(format!("tool:{}:{}", call.op, call.turn))))
    }
    fn mint_genesis(&self, run_id: &str) -> String {
        format!("gen-{run_id}")
    }
}

/// One row's verdict.
#[derive(Clone, Debug, Serialize)]
pub struct RowResult {
    pub name: &'static str,
    pub passed: bool,
    pub failures: Vec<String>,
    pub wall_us: u64,
    pub child: (u32, u32),
    pub resume: (u32, u32),
}

/// The referee's checks after a successful resume.
async fn check_resumed(
    row: &Row,
    referee: &Engine<SqliteStore, store::SqliteTranscripts, Rc<CountingEffects>>,
    out: &store::engine::Outcome,
    world: &CountingEffects,
) -> Vec<String> {
    let mut f = Vec::new();
    let mut expect = |ok: bool, what: String| {
        if !ok {
            f.push(what);
        }
    };
    expect(out.status == RunStatus::Ok, format!("resume settled {} (want ok)", out.status));
    expect(out.value.as_ref() == Some(&row.value()), format!("value {:?}", out.value));
    expect(out.segment == 2, format!("segment {} (want 2)", out.segment));
    let resume = (world.paid.get(), world.tools.get());
    expect(resume == row.resume, format!("resume paid/tools {resume:?} (want {:?})", row.resume));
    match referee.journal().load(RUN).await {
        Ok(entries) => {
            let contiguous = entries.iter().enumerate().all(|(i, e)| e.seq.0 == i as u64);
            expect(contiguous, "seqs are not contiguous from 0".into());
            let settles: Vec<&str> = entries
                .iter()
                .filter(|e| is_settle(e))
                .map(|e| e.value["runStatus"].as_str().unwrap_or_default())
                .collect();
            expect(settles == ["ok"], format!("run settles {settles:?} (want exactly one ok)"));
            let limits = entries.iter().filter(|e| e.kind == "agent" && e.status == "limit").count();
            expect(limits == row.limits, format!("{limits} limit terminals (want {})", row.limits));
        }
        Err(e) => expect(false, format!("load: {e}")),
    }
    match referee.journal().get_meta(RUN).await {
        Ok(Some(m)) => {
            expect(m.status == RunStatus::Ok, format!("meta status {}", m.status));
            expect(m.segments == Some(2), format!("meta segments {:?}", m.segments));
            expect(m.genesis.as_deref() == Some("gen-RUN"), format!("meta genesis {:?}", m.genesis));
        }
        other => expect(false, format!("meta {other:?}")),
    }
    let released = referee.journal().acquire(RUN, "probe").await;
    expect(released.is_ok(), format!("the referee's lease was not released: {released:?}"));
    f
}

/// The in-process row: a manual clock, a crash answer, a clock jump. Like the simulator's
/// world, the database lives on /dev/shm when present with `synchronous=OFF` (process
/// crashes are modelled, power loss is not).
pub fn run_in_process(row: &Row, dir: &Path) -> RowResult {
    let t0 = mono_ns();
    let shm = Path::new("/dev/shm");
    let dir = if shm.is_dir() { shm } else { dir };
    let path = dir.join(format!("fencesim-inproc-{}-{}.db", std::process::id(), row.name));
    remove_db(&path);
    let clock = ManualClock::starting_at(SIM_T0_MS);
    let env: Rc<dyn Env> = Rc::new(ManualEnv::new(clock.clone()));
    let mut failures = Vec::new();
    let (child, resume) = futures::executor::block_on(async {
        let options = SqliteOptions::new(&path).ttl_ms(SIM_TTL_MS).synchronous(Synchronous::Off);
        let open = || SqliteStore::open(options.clone(), env.clone());
        let (c, r) = match (open().await, open().await) {
            (Ok(c), Ok(r)) => (c, r),
            (Err(e), _) | (_, Err(e)) => {
                failures.push(format!("open: {e}"));
                return ((0, 0), (0, 0));
            }
        };
        let child_world = Rc::new(CountingEffects::default());
        let killable = Killable { inner: c.clone(), row: *row, kill: Kill::Crash, seen: Rc::default() };
        let engine = Engine::new(
            killable,
            c.transcripts(),
            child_world.clone(),
            env.clone(),
            Profile::current(),
            "child",
        );
        match engine.run(RUN, &row.workflow()).await {
            Err(EngineError::Crashed { .. }) => {}
            other => failures.push(format!("the child did not die at the kill point: {other:?}")),
        }
        let child = (child_world.paid.get(), child_world.tools.get());
        clock.advance(SIM_TTL_MS + 1);
        let world = Rc::new(CountingEffects::default());
        let referee = Engine::new(
            r.clone(),
            r.transcripts(),
            world.clone(),
            env.clone(),
            Profile::current(),
            "referee",
        );
        match referee.resume(RUN, &row.workflow(), None).await {
            Ok(out) => failures.extend(check_resumed(row, &referee, &out, &world).await),
            Err(e) => failures.push(format!("resume: {e}")),
        }
        (child, (world.paid.get(), world.tools.get()))
    });
    if child != row.child {
        failures.push(format!("child paid/tools {child:?} (want {:?})", row.child));
    }
    remove_db(&path);
    RowResult {
        name: row.name,
        passed: failures.is_empty(),
        failures,
        wall_us: (mono_ns() - t0) / 1_000,
        child,
        resume,
    }
}

fn remove_db(path: &Path) {
    for suffix in ["", "-wal", "-shm", "-journal"] {
        let mut p = path.as_os_str().to_owned();
        p.push(suffix);
        let _ = std::fs::remove_file(PathBuf::from(p));
    }
}

/// The child process body (`fencesim kill-child`): run the row's workflow until the kill.
/// Exit code 3 if the run ended without reaching the kill point.
pub fn child_main(db: &Path, row_name: &str, ttl_ms: u64) -> i32 {
    let Some(row) = Row::find(row_name) else {
        eprintln!("error: unknown kill-point row {row_name:?}");
        return 2;
    };
    let env: Rc<dyn Env> = Rc::new(SystemEnv::new());
    futures::executor::block_on(async {
        let store = match SqliteStore::open(SqliteOptions::new(db).ttl_ms(ttl_ms as i64), env.clone()).await {
            Ok(s) => s,
            Err(e) => {
                eprintln!("error: open: {e}");
                return 2;
            }
        };
        let world = Rc::new(CountingEffects { announce: true, ..CountingEffects::default() });
        let killable = Killable { inner: store.clone(), row, kill: Kill::Signal, seen: Rc::default() };
        let engine = Engine::new(killable, store.transcripts(), world, env, Profile::current(), "child");
        let out = engine.run(RUN, &row.workflow()).await;
        say(&format!("DONE {out:?}"));
        3
    })
}

/// The real row: a child process SIGKILLed at the write, a real ttl wait, the referee.
pub fn run_real(row: &Row, exe: &Path, dir: &Path, ttl_ms: u64) -> RowResult {
    let t0 = mono_ns();
    let path = dir.join(format!("real-{}.db", row.name));
    remove_db(&path);
    let mut failures = Vec::new();
    let mut child_counts = (0, 0);
    let mut cmd = Command::new(exe);
    cmd.arg("kill-child").arg("--db").arg(&path).args(["--row", row.name, "--ttl-ms", &ttl_ms.to_string()]);
    match ChildProc::spawn(cmd, false, Stderr::Null) {
        Err(e) => failures.push(format!("cannot spawn the child: {e}")),
        Ok(mut child) => {
            let mut killed = false;
            loop {
                match child.read_line(None).as_deref() {
                    Ok("PAID") => child_counts.0 += 1,
                    Ok("TOOL") => child_counts.1 += 1,
                    Ok("KILL") => {
                        // SIGKILL, and reaped before the referee runs.
                        killed = child.kill().is_some();
                        break;
                    }
                    Ok(other) => failures.push(format!("child: {other}")),
                    Err(_) => break,
                }
            }
            let _ = child.wait();
            if !killed {
                failures.push("the child never reached its kill point".into());
            }
        }
    }
    if child_counts != row.child {
        failures.push(format!("child paid/tools {child_counts:?} (want {:?})", row.child));
    }
    let env: Rc<dyn Env> = Rc::new(SystemEnv::new());
    let resume = futures::executor::block_on(async {
        let r = match SqliteStore::open(SqliteOptions::new(&path).ttl_ms(ttl_ms as i64), env.clone()).await {
            Ok(r) => r,
            Err(e) => {
                failures.push(format!("referee open: {e}"));
                return (0, 0);
            }
        };
        let world = Rc::new(CountingEffects::default());
        let referee = Engine::new(
            r.clone(),
            r.transcripts(),
            world.clone(),
            env.clone(),
            Profile::current(),
            "referee",
        );
        // Wait out the dead owner's lease: retry every ttl/3 (rulvar's cadence), up to 15 s
        // past the ttl.
        let deadline = mono_ns() + (ttl_ms + 15_000) * 1_000_000;
        loop {
            match referee.resume(RUN, &row.workflow(), None).await {
                Ok(out) => {
                    failures.extend(check_resumed(row, &referee, &out, &world).await);
                    break;
                }
                Err(EngineError::Store(StoreError::LeaseHeld { .. })) if mono_ns() < deadline => {
                    std::thread::sleep(Duration::from_millis((ttl_ms / 3).max(1)));
                }
                Err(e) => {
                    failures.push(format!("resume: {e}"));
                    break;
                }
            }
        }
        (world.paid.get(), world.tools.get())
    });
    remove_db(&path);
    RowResult {
        name: row.name,
        passed: failures.is_empty(),
        failures,
        wall_us: (mono_ns() - t0) / 1_000,
        child: child_counts,
        resume,
    }
}

/// A whole table's figures.
#[derive(Clone, Debug, Serialize)]
pub struct Table {
    pub rows: Vec<RowResult>,
    pub wall_us: u64,
    pub cpu_s: f64,
}

/// Run every row, in process (`exe: None`) or as real child processes.
pub fn table(exe: Option<&Path>, dir: &Path, ttl_ms: u64) -> Table {
    let cpu0 = cpu_times();
    let t0 = mono_ns();
    let rows = ROWS
        .iter()
        .map(|row| match exe {
            Some(exe) => run_real(row, exe, dir, ttl_ms),
            None => run_in_process(row, dir),
        })
        .collect();
    Table { rows, wall_us: (mono_ns() - t0) / 1_000, cpu_s: cpu_times().since(&cpu0).total() }
}
