//! `fencesim bench-real`: the simulator and the real multi-process soak side by side, from
//! one invocation. It prints:
//!
//! 1. storms to quorum per wall-clock second, simulated vs real (3 writers, ttl 250 ms,
//!    stalls 1.4 x ttl as rulvar; profile `current`; the simulated storms are the real
//!    storm's twin: same protocol, knobs and store, no injected faults), with the ratio,
//!    and CPU seconds per storm for both (this process plus its waited-for children);
//! 2. the kill-point table: in process (manual clock, crash answers) vs real (child
//!    processes SIGKILLed at the write, real ttl waits);
//! 3. time to first detection under v1_44_0, v1_44_1 and v1_45_0 (and F3 isolated:
//!    v1_44_0 on the lease-core surfaces, counting only F3-class properties, the real
//!    writers with the bounded boot retry so the boot race is not what is found):
//!    simulated = the scenario's own seed sweep from seed 0 (swarm faults on), stopped at
//!    the first failing seed; real = real storms repeated until one fails or the cap,
//!    "not found within the cap" reported as such.
//!
//! Figures are printed, never asserted: this is a command, not a test.

use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use store::ProfileName;

use crate::actors::soak::Surfaces;
use crate::catalog::find_scenario;
use crate::machine::{cpu_times, mono_ns};
use crate::oracle::{judge, Expect, Violation};
use crate::real::killpoints;
use crate::real::soak::{run_real, sim_plan, RealSoakOptions, SimStorm};
use crate::runner::execute;
use crate::world::Scenario;

/// What to measure.
#[derive(Clone, Debug)]
pub struct BenchOptions {
    pub exe: PathBuf,
    /// Where real soaks and kill-point databases live.
    pub dir: PathBuf,
    /// Real storms for the rate figure.
    pub real_storms: u32,
    /// Simulated storms for the rate figure.
    pub sim_storms: u64,
    /// Threads for the simulated storms.
    pub jobs: usize,
    pub writers: u32,
    pub ttl_ms: u64,
    /// Real detection budget per profile.
    pub detect_cap: Duration,
    /// The real kill-point child's lease ttl (rulvar's worker default: 2000 ms).
    pub kill_ttl_ms: u64,
    pub killpoints: bool,
    pub detection: bool,
}

fn secs(ns: u64) -> f64 {
    ns as f64 / 1e9
}

fn median(mut v: Vec<u64>) -> u64 {
    v.sort_unstable();
    v.get(v.len() / 2).copied().unwrap_or(0)
}

fn machine() -> String {
    let cores = std::thread::available_parallelism().map_or(0, |n| n.get());
    let mem = std::fs::read_to_string("/proc/meminfo")
        .ok()
        .and_then(|m| m.lines().next().map(|l| l.split_whitespace().skip(1).collect::<Vec<_>>().join(" ")))
        .unwrap_or_else(|| "unknown".into());
    format!("{cores} cores, MemTotal {mem}, load average {}", loadavg())
}

/// `/proc/loadavg`'s 1-, 5- and 15-minute figures: the machine is shared, and the simulator
/// (CPU-bound) slows down under other load while the real soak (sleep-bound) barely does.
fn loadavg() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .ok()
        .map(|l| l.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_else(|| "unknown".into())
}

/// The violated properties, then the first witness (shortened).
fn first(v: &[Violation]) -> String {
    let mut props: Vec<&str> = v.iter().map(|v| v.property).collect();
    props.sort_unstable();
    props.dedup();
    v.first().map_or(String::new(), |f| {
        let w: String = f.witness.chars().take(150).collect();
        format!("[{}] {w}", props.join(", "))
    })
}

/// Simulated twin storms over `jobs` threads: (clean storms, failures, wall ns, CPU s,
/// median virtual storm ms).
fn sim_rate(scenario: &'static dyn Scenario, o: &BenchOptions) -> Result<(u64, u64, u64, f64, u64), String> {
    let next = AtomicU64::new(0);
    let cpu0 = cpu_times();
    let t0 = mono_ns();
    let results: Vec<Result<Vec<(bool, u64)>, String>> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..o.jobs.max(1))
            .map(|_| {
                scope.spawn(|| {
                    let mut out = Vec::new();
                    loop {
                        let seed = next.fetch_add(1, Ordering::Relaxed);
                        if seed >= o.sim_storms {
                            return Ok(out);
                        }
                        let storm = SimStorm {
                            writers: o.writers,
                            ttl_ms: o.ttl_ms,
                            cap_ms: 60_000,
                            profile: ProfileName::Current,
                            seed,
                            faults: false,
                        };
                        // Judged exactly as `fencesim run` judges (every store property and
                        // the scenario's checks); only the report's trace fingerprint is skipped.
                        let plan = sim_plan(scenario, &storm);
                        let run = crate::world::run(
                            scenario,
                            store::Profile::of(storm.profile),
                            plan,
                            &Default::default(),
                        )?;
                        let expect = Expect {
                            contiguous_seqs: scenario.contiguous_seqs(),
                            ttl_ms: None,
                            retention: scenario.retention_rule(),
                            page_size: Some(crate::world::SIM_PAGE_SIZE),
                        };
                        let passed = run.scenario_violations.is_empty()
                            && judge(&run.history, &run.fin, expect).is_empty();
                        out.push((passed, run.end_ns / 1_000_000));
                    }
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().unwrap_or_else(|_| Err("a sim thread panicked".into())))
            .collect()
    });
    let wall = mono_ns() - t0;
    let cpu = cpu_times().since(&cpu0).own_s;
    let mut all = Vec::new();
    for r in results {
        all.extend(r?);
    }
    let clean = all.iter().filter(|(p, _)| *p).count() as u64;
    let failed = all.len() as u64 - clean;
    Ok((clean, failed, wall, cpu, median(all.iter().map(|(_, ms)| *ms).collect())))
}

/// Real storms under `current`: (clean, failed, wall ns, CPU s, median quorum ms, median storm ms).
fn real_rate(o: &BenchOptions) -> Result<(u64, u64, u64, f64, u64, u64), String> {
    let cpu0 = cpu_times();
    let t0 = mono_ns();
    let (mut clean, mut failed) = (0, 0);
    let (mut quorum, mut storm) = (Vec::new(), Vec::new());
    for seed in 1..=u64::from(o.real_storms) {
        let out =
            run_real(&real_opts(o, ProfileName::Current, seed, Surfaces::All, Duration::from_secs(60)))?;
        if out.report.passed {
            clean += 1;
        } else {
            failed += 1;
            println!("   real storm seed {seed} FAILED under current: {}", first(&out.report.violations));
        }
        quorum.extend(out.report.quorum_ms);
        storm.push(out.report.storm_ms);
    }
    let wall = mono_ns() - t0;
    Ok((clean, failed, wall, cpu_times().since(&cpu0).total(), median(quorum), median(storm)))
}

fn real_opts(
    o: &BenchOptions,
    profile: ProfileName,
    seed: u64,
    surfaces: Surfaces,
    cap: Duration,
) -> RealSoakOptions {
    // F3 isolated: the bounded boot retry, so the profile's boot race (B) cannot be what
    // the storm finds (rulvar's F3-isolated store had it too).
    RealSoakOptions {
        exe: o.exe.clone(),
        dir: o.dir.join("soak"),
        writers: o.writers,
        ttl_ms: o.ttl_ms,
        profile,
        seed,
        cap,
        surfaces,
        boot_retry: surfaces == Surfaces::LeaseCore,
    }
}

/// The F3 class: what a stale check-then-mutate leaves behind (the properties the
/// `f3-check-then-mutate` test names), plus the writers' own reports (rulvar's soak saw F3
/// only as a masked `JournalOrderViolation` error event).
const F3_PROPERTIES: &[&str] = &[
    "no_stale_accept",
    "expiry_set_only_by_holder",
    "lease_exclusive",
    "journal_equals_serial_history",
    "soak_referee",
];

/// Whether a run's violations count as a detection: any violation, or one of `only`.
fn detected(v: &[Violation], only: Option<&[&str]>) -> Option<String> {
    let hits: Vec<Violation> =
        v.iter().filter(|x| only.is_none_or(|o| o.contains(&x.property))).cloned().collect();
    (!hits.is_empty()).then(|| first(&hits))
}

/// The simulator's sweep from seed 0 until the first detecting seed: (seed, wall ns, witness).
fn sim_detect(
    scenario: &'static dyn Scenario,
    profile: ProfileName,
    cap: Duration,
    only: Option<&[&str]>,
) -> Result<Option<(u64, u64, String)>, String> {
    let t0 = mono_ns();
    let mut seed = 0;
    while mono_ns() - t0 < cap.as_nanos() as u64 {
        let out = execute(scenario, profile, seed, None, None)?;
        if let Some(w) = detected(&out.violations, only) {
            return Ok(Some((seed, mono_ns() - t0, w)));
        }
        seed += 1;
    }
    Ok(None)
}

/// Real storms until one detects or the budget is spent: (storms, wall ns, found witness).
fn real_detect(
    o: &BenchOptions,
    profile: ProfileName,
    surfaces: Surfaces,
    only: Option<&[&str]>,
) -> Result<(u64, u64, Option<String>), String> {
    let t0 = mono_ns();
    let mut storms = 0;
    while mono_ns() - t0 < o.detect_cap.as_nanos() as u64 {
        storms += 1;
        let out = run_real(&real_opts(o, profile, storms, surfaces, Duration::from_secs(60)))?;
        if let Some(w) = detected(&out.report.violations, only) {
            return Ok((storms, mono_ns() - t0, Some(w)));
        }
    }
    Ok((storms, mono_ns() - t0, None))
}

/// Run the benchmark, printing as it goes. Exit code: 0, or 1 when a `current` storm or a
/// kill-point row failed (a finding), 2 on a harness error.
pub fn run(catalog: &[&'static dyn Scenario], o: &BenchOptions) -> i32 {
    match run_inner(catalog, o) {
        Ok(findings) => i32::from(findings),
        Err(e) => {
            eprintln!("error: {e}");
            2
        }
    }
}

fn run_inner(catalog: &[&'static dyn Scenario], o: &BenchOptions) -> Result<bool, String> {
    let soak = find_scenario(catalog, "soak")?;
    let f3 = find_scenario(catalog, "f3-check-then-mutate")?;
    std::fs::create_dir_all(&o.dir).map_err(|e| format!("cannot create {}: {e}", o.dir.display()))?;
    let mut findings = false;
    println!("fencesim bench-real: the simulator and the real multi-process soak, side by side");
    println!("machine: {}; real files under {}; simulator threads: {}", machine(), o.dir.display(), o.jobs);
    println!();
    println!(
        "1. Storms to quorum per wall-clock second ({} writers, ttl {} ms, stalls {} ms = 1.4 x ttl, profile current)",
        o.writers,
        o.ttl_ms,
        (o.ttl_ms * 14).div_ceil(10)
    );
    let (s_clean, s_failed, s_wall, s_cpu, s_storm) = sim_rate(soak, o)?;
    let (r_clean, r_failed, r_wall, r_cpu, r_quorum, r_storm) = real_rate(o)?;
    findings |= s_failed + r_failed > 0;
    let s_rate = s_clean as f64 / secs(s_wall).max(1e-9);
    let r_rate = r_clean as f64 / secs(r_wall).max(1e-9);
    let s_cpu_per = s_cpu / (s_clean + s_failed).max(1) as f64;
    let r_cpu_per = r_cpu / (r_clean + r_failed).max(1) as f64;
    println!("   {:<40} {:>14} {:>14} {:>10}", "", "simulated", "real", "sim/real");
    println!("   {:<40} {:>14} {:>14}", "storms run", s_clean + s_failed, r_clean + r_failed);
    println!("   {:<40} {:>14} {:>14}", "reached quorum with no violation", s_clean, r_clean);
    println!("   {:<40} {:>14.2} {:>14.2}", "wall seconds", secs(s_wall), secs(r_wall));
    let ratio = if r_rate > 0.0 { format!("{:.0}x", s_rate / r_rate) } else { "n/a".into() };
    println!(
        "   {:<40} {:>14.1} {:>14.3} {:>10}",
        "storms to quorum per wall-clock second", s_rate, r_rate, ratio
    );
    let cpu_ratio = if s_cpu_per > 0.0 { format!("1/{:.0}", r_cpu_per / s_cpu_per) } else { "n/a".into() };
    println!(
        "   {:<40} {:>14.5} {:>14.4} {:>10}",
        "CPU seconds per storm (self+children)", s_cpu_per, r_cpu_per, cpu_ratio
    );
    println!("   {:<40} {:>14} {:>14}", "median storm ms (virtual | wall)", s_storm, r_storm);
    println!("   {:<40} {:>14} {:>14}", "median quorum ms (real: 100 ms polls)", "-", r_quorum);
    println!("   load average after the rate runs: {}", loadavg());
    // The simulator is CPU-bound and the machine is shared; this derived line says what the
    // measured CPU cost per storm gives when every core is free (an estimate, not a run).
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get()) as f64;
    if s_cpu_per > 0.0 && r_rate > 0.0 {
        let idle = cores / s_cpu_per;
        println!(
            "   derived: {cores:.0} free cores at {s_cpu_per:.5} CPU s per simulated storm = {idle:.0} storms/s, {:.0}x the real rate",
            idle / r_rate
        );
    }
    println!();

    if o.killpoints {
        println!("2. Kill-point table (rulvar's 10 rows over the engine model and SqliteStore)");
        println!(
            "   simulated side: the in-process engine harness (manual clock, crash answers), not a madsim scenario"
        );
        let dir = o.dir.join("killpoints");
        std::fs::create_dir_all(&dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
        let sim = killpoints::table(None, &dir, o.kill_ttl_ms);
        let real = killpoints::table(Some(&o.exe), &dir, o.kill_ttl_ms);
        println!(
            "   {:<30} {:<32} {:<32}",
            "row",
            "in-process (virtual ttl)",
            format!("real (SIGKILL, ttl {} ms)", o.kill_ttl_ms)
        );
        let cell = |x: &killpoints::RowResult| {
            format!(
                "{} {:>9.2} ms, re-paid {}",
                if x.passed { "ok  " } else { "FAIL" },
                x.wall_us as f64 / 1e3,
                x.resume.0
            )
        };
        for (s, r) in sim.rows.iter().zip(real.rows.iter()) {
            println!("   {:<30} {:<32} {:<32}", s.name, cell(s), cell(r));
            for f in s.failures.iter().chain(r.failures.iter()) {
                println!("      {f}");
            }
        }
        let passed = |t: &killpoints::Table| t.rows.iter().filter(|r| r.passed).count();
        findings |= passed(&sim) < sim.rows.len() || passed(&real) < real.rows.len();
        let total = |t: &killpoints::Table| {
            format!("{}/10 {:>9.2} ms, {:.3} s CPU", passed(t), t.wall_us as f64 / 1e3, t.cpu_s)
        };
        println!("   {:<30} {:<32} {:<32}", "whole table", total(&sim), total(&real));
        println!(
            "   {:<30} {:.0}x",
            "wall ratio real / in-process",
            real.wall_us as f64 / sim.wall_us.max(1) as f64
        );
        if let Ok(s) = find_scenario(catalog, "kill-points") {
            // The same ten rows on madsim: eleven simulated processes, real SQLite, each child
            // killed at its write, a referee resuming past the 2 s ttl in virtual time.
            let t0 = mono_ns();
            let run = crate::runner::execute(s, store::ProfileName::Current, 0, None, None);
            let wall_ms = (mono_ns() - t0) as f64 / 1e6;
            match run {
                Ok(out) => {
                    let ok = out
                        .report
                        .table
                        .as_deref()
                        .map_or(0, |t| t.lines().filter(|l| l.ends_with("  ok")).count());
                    findings |= !out.report.passed;
                    println!(
                        "   {:<30} {ok}/10 {wall_ms:>9.2} ms (fencesim run --scenario kill-points --seed 0)",
                        "simulated on madsim"
                    );
                    println!(
                        "   {:<30} {:.0}x",
                        "wall ratio real / madsim",
                        real.wall_us as f64 / 1e3 / wall_ms.max(1e-3)
                    );
                }
                Err(e) => println!("   simulated on madsim: harness error {e}"),
            }
        }
        println!();
    }

    if o.detection {
        println!(
            "3. Time to first detection (simulated: the scenario's seed sweep from seed 0, swarm faults; real: {} writers, storms repeated, cap {} s)",
            o.writers,
            o.detect_cap.as_secs()
        );
        type DetectRow =
            (ProfileName, &'static str, &'static dyn Scenario, Surfaces, Option<&'static [&'static str]>);
        let rows: [DetectRow; 4] = [
            (ProfileName::V1_44_0, "all surfaces, any violation (F3 class + F1/F2/F4, B)", soak, Surfaces::All, None),
            (ProfileName::V1_44_1, "all surfaces, any violation (F1, F4, B)", soak, Surfaces::All, None),
            (ProfileName::V1_45_0, "all surfaces, any violation (F2, F4 blob half, B)", soak, Surfaces::All, None),
            (
                ProfileName::V1_44_0,
                "F3 isolated: lease-core surfaces, F3-class properties only (real writers get the boot retry)",
                f3,
                Surfaces::LeaseCore,
                Some(F3_PROPERTIES),
            ),
        ];
        for (profile, what, scenario, surfaces, only) in rows {
            println!("   {profile} {what}:");
            match sim_detect(scenario, profile, Duration::from_secs(60), only)? {
                Some((seed, ns, w)) => println!(
                    "      simulated: {} ({} scenario) found at seed {seed} after {:.4} s wall: {w}",
                    profile,
                    scenario.name(),
                    secs(ns)
                ),
                None => println!("      simulated: not found within 60 s"),
            }
            let (storms, ns, found) = real_detect(o, profile, surfaces, only)?;
            match found {
                Some(w) => {
                    println!("      real:      found in storm {storms} after {:.2} s wall: {w}", secs(ns))
                }
                None => println!(
                    "      real:      not found within the {} s cap ({storms} storms, {:.1} s)",
                    o.detect_cap.as_secs(),
                    secs(ns)
                ),
            }
        }
        println!();
    }
    println!("4. CPU seconds per storm: simulated {s_cpu_per:.5}, real {r_cpu_per:.4} (see 1).");
    Ok(findings)
}

/// A scratch directory for the benchmark when none was given: a fresh one under the
/// system temp dir (a real disk, like rulvar's soak), kept until the process ends.
pub fn default_dir() -> Result<tempfile::TempDir, String> {
    tempfile::Builder::new()
        .prefix("fencesim-bench-real-")
        .tempdir()
        .map_err(|e| format!("cannot create a temp dir: {e}"))
}
