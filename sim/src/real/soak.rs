//! `fencesim soak --real`: rulvar's multi-process soak on real OS processes, judged by the
//! simulator's own oracle; and the same storm in the simulator, for side-by-side figures.
//!
//! The real storm: the parent spawns N processes of this very binary (`soak-writer`),
//! each building its own `SqliteStore` over `DIR/soak.db` at once (a real concurrent
//! boot), all running the simulator's writer protocol with the real wall clock, real
//! sleeps and real SQLite locking. Like rulvar's referee (and the simulator's supervisor)
//! the parent polls the writers' reports every 100 ms and creates the stop file at the
//! activity quorum, at the first reported violation, or at the cap; writers get 30 s to
//! exit before they are SIGKILLed. Then it merges the writers' reports and call histories
//! and judges them exactly as a simulated run is judged: every store property of
//! `crate::oracle` over (history, final database), plus the soak referee
//! (`crate::actors::soak::referee`), plus `soak_writer_exit` (a writer that exited
//! non-zero or hung; the simulator has no exit codes).
//!
//! Limits of the real history, compared with a simulated one:
//! - Apply order across processes comes from timestamps of the machine-wide monotonic
//!   clock. For transactional mutations (every fenced write under `Atomic`, acquire,
//!   deletes) the instant is taken inside the write lock, so it is the commit order; for
//!   autocommit statements (the `Split` profile, unfenced single statements) it is taken
//!   just after the commit and is an approximation (see `real::env`).
//! - A writer SIGKILLed for hanging loses the record of the call it was in.
//! - Nothing is injected: no stalls at fault points, no crashes, no clock skew. What the
//!   storm explores is what the OS scheduler happens to do.
//! - Runs are not reproducible: the seed fixes each writer's dice, not the interleaving.

use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use rusqlite::{Connection, OpenFlags};
use serde::Serialize;
use store::ProfileName;

use crate::actors::soak::{activity_of, ended_by_violation, referee, Activity, SoakEvent, Surfaces};
use crate::child::{ChildProc, Stderr};
use crate::history::FinalState;
use crate::history::{return_event, History};
use crate::machine::{cpu_times, mono_ns};
use crate::oracle::{judge, Expect, Violation};
use crate::plan::{ClockSpec, Plan, Swarm};
use crate::real::files;
use crate::runner::execute;
use crate::world::{read_final, Scenario};

/// How to run one real storm.
#[derive(Clone, Debug)]
pub struct RealSoakOptions {
    /// The `fencesim` binary to spawn writers from (normally this very binary).
    pub exe: PathBuf,
    pub dir: PathBuf,
    pub writers: u32,
    pub ttl_ms: u64,
    pub profile: ProfileName,
    pub seed: u64,
    pub cap: Duration,
    pub surfaces: Surfaces,
    /// Give every writer's store the bounded boot retry of later versions, whatever the
    /// profile says (the rest of the profile unchanged). Real writers start within a few
    /// ms of each other, so under v1_44_x most of them die in the boot race (B) first;
    /// this isolates the fencing flaws (rulvar's F3-isolated runs had the retry too).
    pub boot_retry: bool,
}

/// Why the storm ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Ended {
    Quorum,
    Violation,
    Cap,
    WritersExited,
}

/// What one storm (real or simulated) produced, in one shape.
#[derive(Clone, Debug, Serialize)]
pub struct StormReport {
    pub mode: &'static str,
    pub profile: String,
    pub writers: u32,
    pub ttl_ms: u64,
    pub seed: u64,
    pub surfaces: &'static str,
    pub ended: Ended,
    /// Start until the quorum poll succeeded (wall ms for real, virtual ms for simulated).
    pub quorum_ms: Option<u64>,
    /// Start until every writer exited (wall ms for real, virtual ms for simulated).
    pub storm_ms: u64,
    /// Wall ms this storm cost the machine (spawn to verdict).
    pub wall_ms: u64,
    /// The writers' activity counters (real only: a simulated run keeps them inside its
    /// world).
    pub activity: Option<Activity>,
    pub calls: usize,
    pub report_events: usize,
    /// Real only: each writer's exit code (`None`: killed).
    pub exit_codes: Vec<Option<i32>>,
    /// CPU seconds of this process and its writers over the storm.
    pub cpu_s: f64,
    pub passed: bool,
    pub violations: Vec<Violation>,
}

impl StormReport {
    /// A short human-readable summary.
    pub fn text(&self) -> String {
        use std::fmt::Write as _;
        let mut s = String::new();
        let _ = writeln!(
            s,
            "{} soak profile={} writers={} ttl={}ms seed={} surfaces={}: {}",
            self.mode,
            self.profile,
            self.writers,
            self.ttl_ms,
            self.seed,
            self.surfaces,
            if self.passed { "PASS" } else { "FAIL" }
        );
        let unit = if self.mode == "real" { "wall" } else { "virtual" };
        let quorum = match (self.quorum_ms, self.ended) {
            (Some(q), _) => format!("quorum at {q} ms"),
            (None, Ended::Quorum) => "quorum reached".to_string(),
            (None, _) => "quorum not reached".to_string(),
        };
        let _ = writeln!(
            s,
            "  ended: {:?}; {quorum}; storm {} ms ({unit}); took {} ms wall, {:.2} s CPU",
            self.ended, self.storm_ms, self.wall_ms, self.cpu_s
        );
        if let Some(a) = &self.activity {
            let _ = writeln!(
            s,
            "  activity: epochs {}, stale rejects {}, appends {}, meta {}, blob puts {}, blob deletes {}, victims {}, live cross rejects {}, busy retries {}",
            a.epochs,
            a.stale_rejects,
            a.appends,
            a.meta_writes,
            a.blob_puts,
            a.blob_deletes,
            a.victim_cycles,
            a.live_cross_rejects,
            a.busy_retries
        );
        }
        if !self.exit_codes.is_empty() {
            let codes: Vec<String> =
                self.exit_codes.iter().map(|c| c.map_or("killed".into(), |c| c.to_string())).collect();
            let _ = writeln!(s, "  writer exits: {}", codes.join(", "));
        }
        if self.mode == "real" {
            let _ =
                writeln!(s, "  history: {} store calls, {} report events", self.calls, self.report_events);
        } else {
            let _ = writeln!(s, "  history: {} store calls", self.calls);
        }
        for v in self.violations.iter().take(20) {
            let _ = writeln!(s, "  {}: {}", v.property, v.witness);
        }
        if self.violations.len() > 20 {
            let _ = writeln!(s, "  ... {} more violations", self.violations.len() - 20);
        }
        s
    }
}

/// A real storm's report plus the merged history (for `--timeline`).
pub struct RealSoakOutput {
    pub report: StormReport,
    pub history: History,
}

fn spawn_writer(opts: &RealSoakOptions, w: u32) -> Result<ChildProc, String> {
    let mut cmd = Command::new(&opts.exe);
    cmd.arg("soak-writer")
        .arg("--dir")
        .arg(&opts.dir)
        .args(["--index", &w.to_string()])
        .args(["--ttl-ms", &opts.ttl_ms.to_string()])
        .args(["--profile", opts.profile.as_str()])
        .args(["--seed", &opts.seed.to_string()])
        .args(["--surfaces", opts.surfaces.as_str()])
        .args(opts.boot_retry.then_some("--boot-retry"))
        // An orphaned writer (its parent died) stops by itself after the cap and the grace.
        .args(["--max-secs", &(opts.cap.as_secs() + 60).to_string()]);
    ChildProc::spawn_with(cmd, false, false, Stderr::Piped)
        .map_err(|e| format!("cannot spawn writer {w} from {}: {e}", opts.exe.display()))
}

/// Every writer's report events, merged in timestamp order (ties by writer, then line).
fn read_events(dir: &Path, writers: u32) -> Vec<(u64, SoakEvent)> {
    let mut all = Vec::new();
    for w in 0..writers {
        let text = std::fs::read_to_string(files::report_path(dir, w)).unwrap_or_default();
        all.extend(files::parse_events(&text, w));
    }
    all.sort_by_key(|(at, e)| (*at, e.w));
    all
}

/// Merge the writers' call files into one history: ids by invocation instant, apply order
/// by the recorded apply instants, every instant relative to `t0`.
fn merge_history(dir: &Path, writers: u32, t0: u64) -> Result<History, String> {
    let mut calls = Vec::new();
    for w in 0..writers {
        let text = std::fs::read_to_string(files::calls_path(dir, w)).unwrap_or_default();
        calls.extend(files::parse_calls(&text)?);
    }
    calls.sort_by_key(|c| (c.invoked_ns, c.node, c.id));
    let rel = |ns: u64| ns.saturating_sub(t0);
    for (i, c) in calls.iter_mut().enumerate() {
        c.id = i;
        c.invoked_ns = rel(c.invoked_ns);
        c.returned_ns = c.returned_ns.map(rel);
        if let Some(a) = c.applied.as_mut() {
            a.at_ns = rel(a.at_ns);
        }
    }
    let mut applied: Vec<(u64, u32, usize, usize)> =
        calls.iter().filter_map(|c| c.applied.as_ref().map(|a| (a.at_ns, c.node, a.order, c.id))).collect();
    applied.sort();
    for (rank, (_, _, _, id)) in applied.iter().enumerate() {
        if let Some(a) = calls[*id].applied.as_mut() {
            a.order = rank;
        }
    }
    let mut events: Vec<_> = calls.iter().filter_map(return_event).collect();
    events.sort_by_key(|e| (e.at_ns, e.call));
    Ok(History { applied_count: applied.len(), calls, events, ..History::default() })
}

fn final_state(db: &Path) -> FinalState {
    let flags = OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX;
    match Connection::open_with_flags(db, flags).and_then(|c| read_final(&c)) {
        Ok(f) => f,
        Err(_) => FinalState { missing_schema: true, ..FinalState::default() },
    }
}

/// Run one real storm and judge it. `Err` only for a harness failure (cannot create the
/// directory, spawn a writer, or read the histories).
pub fn run_real(opts: &RealSoakOptions) -> Result<RealSoakOutput, String> {
    std::fs::create_dir_all(&opts.dir).map_err(|e| format!("cannot create {}: {e}", opts.dir.display()))?;
    files::clear(&opts.dir, opts.writers);
    let quorum = opts.surfaces.quorum();
    let cpu0 = cpu_times();
    let t0 = mono_ns();
    let mut children = Vec::new();
    for w in 0..opts.writers {
        match spawn_writer(opts, w) {
            Ok(c) => children.push(c),
            Err(e) => {
                // Dropping a ChildProc kills and reaps it.
                drop(children);
                return Err(e);
            }
        }
    }
    // Drain each writer's stderr on its own thread so a chatty writer never blocks.
    let stderr: Vec<_> = children
        .iter_mut()
        .map(|c| {
            let pipe = c.take_stderr();
            std::thread::spawn(move || {
                let mut text = String::new();
                if let Some(mut p) = pipe {
                    let _ = p.read_to_string(&mut text);
                }
                text
            })
        })
        .collect();

    let mut exited: Vec<Option<i32>> = vec![None; children.len()];
    let mut done = vec![false; children.len()];
    let mut quorum_ms = None;
    let ended = loop {
        std::thread::sleep(Duration::from_millis(100));
        let events: Vec<SoakEvent> =
            read_events(&opts.dir, opts.writers).into_iter().map(|(_, e)| e).collect();
        let now = mono_ns();
        if activity_of(&events).meets(&quorum) {
            quorum_ms = Some((now - t0) / 1_000_000);
            break Ended::Quorum;
        }
        if ended_by_violation(&events) {
            break Ended::Violation;
        }
        for (i, c) in children.iter_mut().enumerate() {
            if let Some(status) = c.try_wait() {
                done[i] = true;
                exited[i] = status.code();
            }
        }
        if done.iter().all(|d| *d) {
            break Ended::WritersExited;
        }
        if now - t0 >= opts.cap.as_nanos() as u64 {
            break Ended::Cap;
        }
    };
    std::fs::write(files::stop_path(&opts.dir), b"stop")
        .map_err(|e| format!("cannot create the stop file in {}: {e}", opts.dir.display()))?;
    // Writers finish their tenure (at most one stall plus a stale sweep) and exit.
    let grace_end = mono_ns() + 30_000_000_000;
    let mut killed = vec![false; children.len()];
    while done.iter().any(|d| !*d) {
        for (i, c) in children.iter_mut().enumerate() {
            if done[i] {
                continue;
            }
            if let Some(status) = c.try_wait() {
                done[i] = true;
                exited[i] = status.code();
            } else if mono_ns() >= grace_end {
                c.kill();
                done[i] = true;
                killed[i] = true;
            }
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    let storm_ms = (mono_ns() - t0) / 1_000_000;
    let stderr: Vec<String> = stderr.into_iter().map(|h| h.join().unwrap_or_default()).collect();

    let events = read_events(&opts.dir, opts.writers);
    let events: Vec<SoakEvent> = events.into_iter().map(|(_, e)| e).collect();
    let history = merge_history(&opts.dir, opts.writers, t0)?;
    let fin = final_state(&files::db_path(&opts.dir));
    let mut violations = judge(&history, &fin, Expect { contiguous_seqs: true, ..Default::default() });
    let within = format!("{} ms of wall time", opts.cap.as_millis());
    violations.extend(referee(&events, &quorum, &within));
    for (w, code) in exited.iter().enumerate() {
        let excerpt: String = stderr[w].chars().take(2000).collect();
        if killed[w] {
            violations.push(Violation::new(
                "soak_writer_exit",
                format!("writer w{w} did not exit within 30 s of the stop file and was SIGKILLed"),
            ));
        } else if *code != Some(0) {
            violations.push(Violation::new(
                "soak_writer_exit",
                format!("writer w{w} exited with {code:?}: {}", excerpt.trim()),
            ));
        }
    }
    let cpu = cpu_times().since(&cpu0);
    let report = StormReport {
        mode: "real",
        profile: format!("{}{}", opts.profile, if opts.boot_retry { "+boot-retry" } else { "" }),
        writers: opts.writers,
        ttl_ms: opts.ttl_ms,
        seed: opts.seed,
        surfaces: opts.surfaces.as_str(),
        ended,
        quorum_ms,
        storm_ms,
        wall_ms: (mono_ns() - t0) / 1_000_000,
        activity: Some(activity_of(&events)),
        calls: history.calls.len(),
        report_events: events.len(),
        exit_codes: exited,
        cpu_s: cpu.total(),
        passed: violations.is_empty(),
        violations,
    };
    Ok(RealSoakOutput { report, history })
}

/// How to run one simulated storm with the real storm's knobs.
#[derive(Clone, Copy, Debug)]
pub struct SimStorm {
    pub writers: u32,
    pub ttl_ms: u64,
    pub cap_ms: u64,
    pub profile: ProfileName,
    pub seed: u64,
    /// Inject the scenario's swarm faults (stalls, crashes, skew); without them the storm
    /// is the real one's twin: same protocol, knobs and store, simulated processes.
    pub faults: bool,
}

/// The plan of a simulated storm: the scenario's plan for the seed, with the storm's
/// knobs; faults regenerated for them, or none at all (perfect clocks, no decisions).
pub fn sim_plan(scenario: &dyn Scenario, s: &SimStorm) -> Plan {
    let mut knobs = scenario.knobs(s.seed);
    knobs.nodes = s.writers;
    knobs.ttl_ms = s.ttl_ms;
    knobs.cap_ms = s.cap_ms;
    if s.faults {
        return Plan::generate(
            scenario.name(),
            s.profile.as_str(),
            s.seed,
            knobs.clone(),
            &scenario.faults(&knobs),
        );
    }
    Plan {
        scenario: scenario.name().to_string(),
        profile: s.profile.as_str().to_string(),
        seed: s.seed,
        knobs,
        clocks: vec![ClockSpec::default(); s.writers as usize],
        swarm: Swarm::none(),
        decisions: Vec::new(),
        recipe: None,
    }
}

/// Run one simulated storm and judge it (the scenario's own judgement).
pub fn run_sim(scenario: &'static dyn Scenario, s: &SimStorm) -> Result<(StormReport, History), String> {
    let cpu0 = cpu_times();
    let t0 = mono_ns();
    let out = execute(scenario, s.profile, s.seed, Some(sim_plan(scenario, s)), None)?;
    let ended = if out.violations.iter().any(|v| v.property == "soak_quorum_reached") {
        Ended::Cap
    } else if out.report.passed {
        Ended::Quorum
    } else {
        Ended::Violation
    };
    let report = StormReport {
        mode: "simulated",
        profile: s.profile.as_str().to_string(),
        writers: s.writers,
        ttl_ms: s.ttl_ms,
        seed: s.seed,
        surfaces: if scenario.name() == "f3-check-then-mutate" { "lease-core" } else { "all" },
        ended,
        // The simulated supervisor's poll instant is not exported; the storm's end is.
        quorum_ms: None,
        storm_ms: out.report.virtual_ms,
        wall_ms: (mono_ns() - t0) / 1_000_000,
        activity: None,
        calls: out.report.calls,
        report_events: 0,
        exit_codes: Vec::new(),
        cpu_s: cpu_times().since(&cpu0).own_s,
        passed: out.report.passed,
        violations: out.violations,
    };
    Ok((report, out.history))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::history::{Applied, Args, Call, OpKind, Outcome};

    fn call(node: u32, id: usize, invoked_ns: u64, applied_ns: Option<(u64, usize)>) -> Call {
        Call {
            id,
            node,
            incarnation: 0,
            op: if applied_ns.is_some() { OpKind::Renew } else { OpKind::Load },
            run_id: "soak-run".into(),
            lease: None,
            args: Args::default(),
            invoked_ns,
            returned_ns: Some(invoked_ns + 50),
            outcome: Outcome::Ok { detail: String::new() },
            granted: None,
            checked_now_ms: None,
            applied: applied_ns.map(|(at_ns, order)| Applied {
                order,
                at_ns,
                store_now_ms: 0,
                lease_row: None,
                site_epoch: None,
            }),
            store_clock: crate::history::StoreClock::NotObserved,
            lease_grant: None,
            seen_at: None,
            read: None,
        }
    }

    fn write(dir: &Path, w: u32, calls: &[Call]) {
        let text: String = calls.iter().map(|c| serde_json::to_string(c).unwrap() + "\n").collect();
        // A torn last line (a writer mid-write) is ignored.
        std::fs::write(files::calls_path(dir, w), text + "{\"id\":").unwrap();
    }

    #[test]
    fn histories_merge_by_invocation_and_apply_order_follows_the_apply_instants() {
        let dir = tempfile::tempdir().unwrap();
        let t0 = 1_000_000;
        write(
            dir.path(),
            0,
            &[call(0, 0, t0 + 100, Some((t0 + 120, 0))), call(0, 1, t0 + 300, Some((t0 + 330, 1)))],
        );
        write(dir.path(), 1, &[call(1, 0, t0 + 200, None), call(1, 1, t0 + 250, Some((t0 + 320, 0)))]);
        let h = merge_history(dir.path(), 2, t0).unwrap();
        let order: Vec<(u32, u64)> = h.calls.iter().map(|c| (c.node, c.invoked_ns)).collect();
        assert_eq!(order, [(0, 100), (1, 200), (1, 250), (0, 300)]);
        assert!(h.calls.iter().enumerate().all(|(i, c)| c.id == i));
        let applied: Vec<(u64, usize)> =
            h.calls.iter().filter_map(|c| c.applied.as_ref().map(|a| (a.at_ns, a.order))).collect();
        assert_eq!(applied, [(120, 0), (320, 1), (330, 2)]);
        assert_eq!(h.applied_count, 3);
        // The timeline has one line per returned non-read call.
        assert_eq!(h.events.len(), 3);
    }
}
