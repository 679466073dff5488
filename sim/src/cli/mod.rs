//! The `fencesim` command-line program's logic (the binary in `scenarios` passes the
//! catalog in): `list`, `run`, `sweep`, `bench`, `merge`, `findings`, `shrink`, `audit`, `explore`;
//! real-process mode's `soak`, `bench-real` and its hidden child entry points live in
//! `crate::real::cli`.
//!
//! Exit codes CI can use: 0 = every run passed, 1 = a property failed (or a seed was not
//! deterministic), 2 = bad input (an unknown scenario or profile, a malformed seed range or
//! shard, an unreadable plan), 3 = coverage shortfall (every run passed, but a goal the
//! scenario declares was met in fewer seeds than it requires: the sweep did not reach what
//! it exists to test), 130 / 143 = interrupted by SIGINT / SIGTERM (every child killed and
//! reaped, every run's database removed first: `crate::interrupt`).

pub mod compare;

use std::io::IsTerminal;
use std::path::PathBuf;

use clap::{Parser, Subcommand};
use store::ProfileName;

use crate::catalog::{find_scenario, parse_profile, usage};
use crate::plan::Plan;
use crate::report::{failure_text, timeline_folded, trace_jsonl};
use crate::runner::execute;
use crate::sweep::{self, SeedRange, Shard, SweepOptions, SweepReport};
use crate::world::Scenario;

#[derive(Parser, Debug)]
#[command(name = "fencesim", about = "Deterministic simulation of a lease-fenced store", version)]
struct Cli {
    #[command(subcommand)]
    command: Command,
    /// Drive a foreign store: the command that starts one store process (speaking the
    /// protocol of docs/foreign-stores.md), e.g. "python3 foreign/python/sqlite_store.py".
    /// For run, sweep, shrink, findings, explore (store scenarios only) and conformance.
    #[arg(long, global = true)]
    store: Option<String>,
    /// The wall-clock guard on each reply of a foreign store process, in ms.
    #[arg(long, global = true, default_value_t = 5000)]
    store_guard_ms: u64,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// List the scenarios and profiles.
    List,
    /// Run one seed and print its verdict, witnesses and timeline.
    Run {
        #[arg(long)]
        scenario: String,
        #[arg(long, default_value = "current")]
        profile: String,
        #[arg(long)]
        seed: u64,
        /// Replay this plan instead of the seed's own.
        #[arg(long)]
        plan: Option<PathBuf>,
        /// Save the plan that ran.
        #[arg(long)]
        plan_out: Option<PathBuf>,
        /// Write the events as JSON Lines.
        #[arg(long)]
        trace: Option<PathBuf>,
        /// Print the report as JSON instead of text.
        #[arg(long)]
        json: bool,
        /// Do not print the timeline.
        #[arg(long)]
        quiet: bool,
        /// Keep a copy of the final database here (for `fencesim audit`).
        #[arg(long)]
        keep_db: Option<PathBuf>,
        /// Write the run's timeline as one self-contained HTML page.
        #[arg(long)]
        html: Option<PathBuf>,
    },
    /// Run a range of seeds in parallel and summarise.
    Sweep {
        /// A scenario name, or `all`.
        #[arg(long)]
        scenario: String,
        #[arg(long, default_value = "current")]
        profile: String,
        /// `A..B` (B exclusive).
        #[arg(long)]
        seeds: String,
        /// Worker threads (default: available cores).
        #[arg(long)]
        jobs: Option<usize>,
        /// `K/N`: run only the K-th of N disjoint shards (1-based).
        #[arg(long)]
        shard: Option<String>,
        #[arg(long)]
        fail_fast: bool,
        /// Run each seed twice and compare trace hashes.
        #[arg(long)]
        check_determinism: bool,
        #[arg(long)]
        json: Option<PathBuf>,
        #[command(flatten)]
        ci: CiArgs,
        /// Write one HTML page per failing seed and an index.html into this directory.
        #[arg(long)]
        html_dir: Option<PathBuf>,
        /// At most this many pages with --html-dir (the index lists how many were left out).
        #[arg(long, default_value_t = 100)]
        html_max: usize,
    },
    /// Audit a real database file with rulvar's reconciler; `--repair` fixes meta-behind
    /// and stranded runs under a brief lease each (live owners are skipped).
    Audit {
        #[arg(long)]
        db: PathBuf,
        #[arg(long)]
        repair: bool,
        #[arg(long)]
        json: bool,
    },
    /// Benchmark: soak seeds per second on one core, and the sweep's peak RSS; then an
    /// explore of as many runs (runs per second, CPU per run, states).
    Bench {
        #[arg(long, default_value_t = 2000)]
        seeds: u64,
        #[arg(long, default_value = "soak")]
        scenario: String,
    },
    /// Merge shard reports (JSON) into one.
    Merge {
        files: Vec<PathBuf>,
        #[arg(long)]
        json: Option<PathBuf>,
        #[command(flatten)]
        ci: CiArgs,
    },
    /// The findings table: each historical flaw caught by its targeted scenario under its
    /// flawed profile (first failing seed, seeds needed, the generic property that caught
    /// it, and how many seeds the generic scenario needs), then every scenario swept clean
    /// under `current` with its key fault points fired.
    Findings {
        /// Seeds per search and per `current` sweep (`0..N`).
        #[arg(long, default_value_t = 500)]
        seeds: u64,
        /// Only these rows (comma-separated ids, e.g. `F3a,T`).
        #[arg(long, value_delimiter = ',')]
        rows: Vec<String>,
        /// Worker threads (default: available cores).
        #[arg(long)]
        jobs: Option<usize>,
        #[arg(long)]
        json: Option<PathBuf>,
        #[command(flatten)]
        ci: CiArgs,
        /// With --store: the flawed foreign store the rows are searched over (the clean
        /// sweeps run --store), e.g. "python3 foreign/python/sqlite_store.py --flaw v1_44_0".
        #[arg(long)]
        flawed_store: Option<String>,
        /// Also explore each row's generic scenario with search seeds 0..N and print the run
        /// of first detection beside the sweep's seeds (0: off).
        #[arg(long, default_value_t = 0)]
        explore_seeds: u64,
        /// The run budget of each of those searches.
        #[arg(long, default_value_t = 2000)]
        explore_runs: u64,
        /// Runs of the guided search of `current` (`fencesim explore`) from
        /// each generic scenario swept (soak, queue); a failure fails the verdict (0: off).
        #[arg(long, default_value_t = 2000)]
        explore_current: u64,
        /// That search's seed (a nightly job may rotate it; the same seed and budget give
        /// the same search).
        #[arg(long, default_value_t = 0)]
        explore_seed: u64,
        /// Where that search saves a failing plan (shrunk).
        #[arg(long, default_value = ".")]
        explore_out_dir: PathBuf,
    },
    /// Shrink a failing seed's plan (fewer nodes, smaller workload, ddmin over the fault
    /// decisions) to a smaller plan that fails the same property.
    Shrink {
        /// The scenario (default: the finding's, with --finding).
        #[arg(long)]
        scenario: Option<String>,
        /// The profile (default: the finding's with --finding, else `current`).
        #[arg(long)]
        profile: Option<String>,
        #[arg(long)]
        seed: u64,
        /// Start from this plan instead of the seed's own.
        #[arg(long)]
        plan: Option<PathBuf>,
        /// Keep failing this property (default: the run's first violation's).
        #[arg(long)]
        property: Option<String>,
        /// ... with the offending call's operation (e.g. `release`).
        #[arg(long)]
        op: Option<String>,
        /// Keep matching this finding row instead (its scenario, profile and matcher).
        #[arg(long)]
        finding: Option<String>,
        /// Where to write the minimal plan (default: fencesim-shrunk-S-P-N.json).
        #[arg(long)]
        out: Option<PathBuf>,
        /// Candidate-run budget.
        #[arg(long, default_value_t = 5000)]
        max_runs: u64,
        /// Write the shrunk witness's timeline as one self-contained HTML page.
        #[arg(long)]
        html: Option<PathBuf>,
    },
    /// rulvar's conformance checks (the same ids) over the Rust store, or over a foreign
    /// store with --store.
    Conformance {
        /// Only these check ids (default: all).
        #[arg(long = "check")]
        checks: Vec<String>,
    },
    /// Coverage-guided search over fault plans (or, with --exhaustive, every plan of at most
    /// --max-faults faults on the scenario's small configuration).
    Explore(crate::explore::ExploreArgs),
    /// One soak storm: N real OS processes over one SQLite file with --real, else its
    /// simulated twin; judged by the same oracle.
    Soak(crate::real::cli::SoakArgs),
    /// Side-by-side benchmark: simulated vs real soak, kill points, detection, CPU.
    BenchReal(crate::real::cli::BenchArgs),
    /// (internal) One real soak writer process.
    #[command(hide = true)]
    SoakWriter(crate::real::cli::WriterArgs),
    /// (internal) One kill-point child process.
    #[command(hide = true)]
    KillChild(crate::real::cli::KillChildArgs),
}

/// Reports for CI systems (`sweep`, `merge`, `findings`).
#[derive(clap::Args, Debug)]
struct CiArgs {
    /// Write a JUnit XML report: one test case per scenario and profile, one failure
    /// element per failing seed.
    #[arg(long)]
    junit: Option<PathBuf>,
    /// Write a Markdown summary (for $GITHUB_STEP_SUMMARY).
    #[arg(long)]
    summary_md: Option<PathBuf>,
}

impl CiArgs {
    /// Write the requested reports; an unwritable file is a usage error (exit 2).
    fn write(&self, suite: &str, cases: &[crate::ci_report::Case]) -> Result<(), String> {
        if let Some(path) = &self.junit {
            std::fs::write(path, crate::ci_report::junit(suite, cases))
                .map_err(|e| format!("cannot write {}: {e}", path.display()))?;
        }
        if let Some(path) = &self.summary_md {
            std::fs::write(path, crate::ci_report::summary_md(&format!("fencesim {suite}"), cases))
                .map_err(|e| format!("cannot write {}: {e}", path.display()))?;
        }
        Ok(())
    }
}

/// Entry point; returns the process exit code. After a SIGINT or SIGTERM the process exits
/// from the signal handler instead (130 or 143), once every child is dead and every run's
/// database file removed (`crate::interrupt`).
pub fn main(catalog: &[&'static dyn Scenario]) -> i32 {
    crate::interrupt::exit_code(command(catalog))
}

fn command(catalog: &[&'static dyn Scenario]) -> i32 {
    // A closed pipe (`fencesim run ... | head`) ends the program quietly.
    std::panic::set_hook(Box::new(|info| {
        let msg = info.to_string();
        if msg.contains("Broken pipe") {
            std::process::exit(0);
        }
        eprintln!("{msg}");
    }));
    let cli = match Cli::try_parse() {
        Ok(c) => c,
        Err(e) => {
            let _ = e.print();
            return if e.use_stderr() { 2 } else { 0 };
        }
    };
    let foreign = match crate::foreign::cli_spec(cli.store.as_deref(), cli.store_guard_ms) {
        Ok(f) => f,
        Err(e) => return usage(e),
    };
    if foreign.is_some()
        && !matches!(
            cli.command,
            Command::Run { .. }
                | Command::Sweep { .. }
                | Command::Shrink { .. }
                | Command::Findings { .. }
                | Command::Conformance { .. }
                | Command::Explore(_)
        )
    {
        return usage("--store works with run, sweep, shrink, findings, explore and conformance".into());
    }
    crate::foreign::set_global(foreign.clone());
    // Ctrl-C / SIGTERM kill every child and remove every run's database before exiting.
    // Not in the hidden child entry points: their parent kills them.
    if !matches!(cli.command, Command::SoakWriter(_) | Command::KillChild(_)) {
        if let Err(e) = crate::interrupt::install() {
            return usage(e);
        }
    }
    match cli.command {
        Command::Conformance { checks } => {
            crate::foreign::conformance::main(foreign.map(std::sync::Arc::new), &checks)
        }
        Command::List => {
            println!("scenarios:");
            for s in catalog {
                println!("  {:<22} {}", s.name(), s.describe());
            }
            println!("profiles:");
            for p in ProfileName::ALL {
                println!("  {p}");
            }
            0
        }
        Command::Run { scenario, profile, seed, plan, plan_out, trace, json, quiet, keep_db, html } => {
            let scenario = match find_scenario(catalog, &scenario) {
                Ok(s) => s,
                Err(e) => return usage(e),
            };
            let profile = match parse_profile(&profile) {
                Ok(p) => p,
                Err(e) => return usage(e),
            };
            let plan_file = plan.as_ref().map(|p| p.display().to_string());
            let loaded = match plan.as_deref().map(Plan::read).transpose() {
                Ok(p) => p,
                Err(e) => return usage(e),
            };
            let same_plan = crate::foreign::active().and(loaded.clone());
            let out = match crate::runner::execute_keeping_db(
                scenario,
                profile,
                seed,
                loaded,
                plan_file.as_deref(),
                keep_db,
            ) {
                _ if crate::interrupt::requested() => return 130, // the handler exits
                Ok(o) => o,
                Err(e) => return usage(e),
            };
            if let Some(path) = plan_out {
                let text = serde_json::to_string_pretty(&out.plan).unwrap_or_default();
                if let Err(e) = std::fs::write(&path, text) {
                    return usage(format!("cannot write plan {}: {e}", path.display()));
                }
            }
            if let Some(path) = trace {
                if let Err(e) = std::fs::write(&path, trace_jsonl(&out.history)) {
                    return usage(format!("cannot write trace {}: {e}", path.display()));
                }
            }
            if let Some(path) = html {
                if let Err(e) = std::fs::write(&path, crate::html::page(&out.history, &out.report, None)) {
                    return usage(format!("cannot write page {}: {e}", path.display()));
                }
            }
            if json {
                println!("{}", serde_json::to_string_pretty(&out.report).unwrap_or_default());
            } else {
                if !quiet {
                    print!("{}", timeline_folded(&out.history.events));
                    println!();
                }
                // The report names the store (a foreign one only) once, under the verdict.
                print!("{}", failure_text(&out.report));
                if crate::foreign::active().is_some() {
                    match crate::foreign::with_store(None, || {
                        execute(scenario, profile, seed, same_plan, None)
                    }) {
                        Ok(rust) => println!("  {}", compare::compare_line(&rust, &out)),
                        Err(e) => println!("  same seed over the Rust store: harness error: {e}"),
                    }
                }
                if !out.report.windows.is_empty() {
                    println!("  at-least-once windows (superseded holders' work before they were told; not violations):");
                    for w in &out.report.windows {
                        println!("    {}", w.describe());
                    }
                }
            }
            i32::from(!out.report.passed)
        }
        Command::Sweep {
            scenario,
            profile,
            seeds,
            jobs,
            shard,
            fail_fast,
            check_determinism,
            json,
            ci,
            html_dir,
            html_max,
        } => {
            let scenarios: Vec<&'static dyn Scenario> = if scenario == "all" {
                catalog.to_vec()
            } else {
                match find_scenario(catalog, &scenario) {
                    Ok(s) => vec![s],
                    Err(e) => return usage(e),
                }
            };
            let profile = match parse_profile(&profile) {
                Ok(p) => p,
                Err(e) => return usage(e),
            };
            let range = match SeedRange::parse(&seeds) {
                Ok(r) => r,
                Err(e) => return usage(e),
            };
            let shard = match shard.as_deref().map(Shard::parse).transpose() {
                Ok(s) => s,
                Err(e) => return usage(e),
            };
            let jobs =
                jobs.unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get())).max(1);
            let progress = std::io::stderr().is_terminal();
            let mut reports = Vec::new();
            let swept = scenarios.clone();
            for s in scenarios {
                let opts = SweepOptions {
                    profile,
                    range,
                    shard,
                    jobs,
                    fail_fast,
                    determinism_every: u64::from(check_determinism),
                    progress,
                };
                let report = sweep::run(s, &opts);
                if crate::interrupt::requested() {
                    // The signal handler exits the process; an interrupted sweep has no summary.
                    return 130;
                }
                print!("{}", report.summary_table());
                reports.push(report);
            }
            if let Some(path) = json {
                let body = if reports.len() == 1 {
                    serde_json::to_string_pretty(&reports[0])
                } else {
                    serde_json::to_string_pretty(&reports)
                };
                if let Err(e) = std::fs::write(&path, body.unwrap_or_default()) {
                    return usage(format!("cannot write {}: {e}", path.display()));
                }
            }
            if let Err(e) = ci.write("sweep", &crate::ci_report::from_sweeps(&reports)) {
                return usage(e);
            }
            if let Some(dir) = html_dir {
                let pairs: Vec<_> = swept.iter().copied().zip(reports.iter()).collect();
                match crate::html::dir::write(&dir, &pairs, html_max) {
                    Ok(w) => eprintln!("wrote {} page(s) and index.html to {}", w.pages, dir.display()),
                    Err(e) => return usage(e),
                }
            }
            // A foreign store's child fault is a harness error: exit 2, whatever else failed.
            if crate::foreign::active().is_some()
                && reports
                    .iter()
                    .any(|r| r.failures.iter().any(|f| f.properties.iter().any(|p| p == "harness_error")))
            {
                return 2;
            }
            sweep::exit_code(&reports)
        }
        Command::Audit { db, repair, json } => match crate::audit::audit(&db, repair) {
            Err(e) => usage(format!("audit: {e}")),
            Ok(report) => {
                if json {
                    println!("{}", serde_json::to_string_pretty(&report).unwrap_or_default());
                } else {
                    print!("{}", crate::audit::text(&report));
                }
                i32::from(!report.consistent)
            }
        },
        Command::Bench { seeds, scenario } => {
            let scenario = match find_scenario(catalog, &scenario) {
                Ok(s) => s,
                Err(e) => return usage(e),
            };
            let opts = SweepOptions {
                profile: ProfileName::Current,
                range: SeedRange { start: 0, end: seeds.max(1) },
                shard: None,
                jobs: 1,
                fail_fast: false,
                determinism_every: 0,
                progress: std::io::stderr().is_terminal(),
            };
            let cpu_before = crate::machine::cpu_times();
            let report = sweep::run(scenario, &opts);
            let cpu_s = crate::machine::cpu_times().since(&cpu_before).own_s;
            print!("{}", report.summary_table());
            let peak = std::fs::read_to_string("/proc/self/status")
                .ok()
                .and_then(|s| {
                    s.lines()
                        .find(|l| l.starts_with("VmHWM:"))
                        .map(|l| l.trim_start_matches("VmHWM:").trim().to_string())
                })
                .unwrap_or_else(|| "unknown".into());
            println!("peak RSS of the {}-seed sweep: {peak}", report.seeds_run);
            // The CPU the sweep used (both threads; the main one only collects results): on a
            // machine other work shares, this shows the cost apart from the wait for a core.
            if cpu_s > 0.0 && report.seeds_run > 0 {
                println!(
                    "CPU time of the sweep: {cpu_s:.2} s, {:.2} ms per seed ({:.1} seeds per CPU second)",
                    cpu_s * 1000.0 / report.seeds_run as f64,
                    report.seeds_run as f64 / cpu_s
                );
            }
            println!("{} seeds per second on one core: {:.1}", scenario.name(), report.seeds_per_sec);
            let explored = crate::explore::bench(scenario, report.seeds_run);
            println!("{explored}");
            println!("{}", crate::explore::bench_bookkeeping(scenario, report.seeds_run));
            i32::from(!report.failures.is_empty())
        }
        Command::Merge { files, json, ci } => {
            let mut parts = Vec::new();
            for f in &files {
                match std::fs::read_to_string(f)
                    .map_err(|e| format!("cannot read {}: {e}", f.display()))
                    .and_then(|t| {
                        serde_json::from_str::<SweepReport>(&t)
                            .map_err(|e| format!("malformed report {}: {e}", f.display()))
                    }) {
                    Ok(r) => parts.push(r),
                    Err(e) => return usage(e),
                }
            }
            let merged = match SweepReport::merge(parts) {
                Ok(m) => m,
                Err(e) => return usage(e),
            };
            print!("{}", merged.summary_table());
            if let Err(e) = ci.write("sweep", &crate::ci_report::from_sweeps(std::slice::from_ref(&merged))) {
                return usage(e);
            }
            if let Some(path) = json {
                if let Err(e) =
                    std::fs::write(&path, serde_json::to_string_pretty(&merged).unwrap_or_default())
                {
                    return usage(format!("cannot write {}: {e}", path.display()));
                }
            }
            sweep::exit_code(std::slice::from_ref(&merged))
        }
        Command::Findings {
            seeds,
            rows,
            jobs,
            json,
            ci,
            flawed_store,
            explore_seeds,
            explore_runs,
            explore_current,
            explore_seed,
            explore_out_dir,
        } => {
            if flawed_store.is_some() && crate::foreign::active().is_none() {
                return usage("--flawed-store needs --store (the correct store for the clean sweeps)".into());
            }
            match crate::foreign::cli_spec(flawed_store.as_deref(), cli.store_guard_ms) {
                Ok(f) => crate::foreign::set_flawed_global(f),
                Err(e) => return usage(e),
            }
            let jobs =
                jobs.unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get())).max(1);
            let opts = crate::findings::FindingsOptions {
                seeds,
                jobs,
                rows,
                progress: true,
                bar: std::io::stderr().is_terminal(),
            };
            let mut report = match crate::findings::run(catalog, &opts) {
                _ if crate::interrupt::requested() => return 130, // the handler exits
                Ok(r) => r,
                Err(e) => return usage(e),
            };
            if let Err(e) = crate::explore::current_pass(
                &mut report,
                catalog,
                explore_current,
                explore_seed,
                jobs,
                &explore_out_dir,
                true,
            ) {
                return usage(e);
            }
            if explore_seeds > 0 {
                if explore_runs == 0 {
                    return usage("--explore-runs must be at least 1".into());
                }
                if crate::foreign::active().is_some() {
                    return usage("--explore-seeds works with the built-in store only".into());
                }
                if let Err(e) =
                    crate::explore::versus_findings(&mut report, catalog, explore_seeds, explore_runs, jobs)
                {
                    return usage(e);
                }
            }
            print!("{}", report.table());
            let witness = |name: &str, seed: u64| -> Option<String> {
                let s = find_scenario(catalog, name).ok()?;
                let out = execute(s, ProfileName::Current, seed, None, None).ok()?;
                out.violations.first().map(|v| format!("{}: {}", v.property, v.witness))
            };
            if let Err(e) = ci.write("findings", &crate::ci_report::from_findings(&report, &witness)) {
                return usage(e);
            }
            if let Some(path) = json {
                if let Err(e) =
                    std::fs::write(&path, serde_json::to_string_pretty(&report).unwrap_or_default())
                {
                    return usage(format!("cannot write {}: {e}", path.display()));
                }
            }
            i32::from(!report.ok())
        }
        Command::Shrink { scenario, profile, seed, plan, property, op, finding, out, max_runs, html } => {
            shrink_command(
                catalog,
                ShrinkArgs { scenario, profile, seed, plan, property, op, finding, out, max_runs, html },
            )
        }
        Command::Explore(args) => crate::explore::command(args, catalog),
        Command::Soak(args) => crate::real::cli::soak(args, catalog),
        Command::BenchReal(args) => crate::real::cli::bench_real(args, catalog),
        Command::SoakWriter(args) => crate::real::cli::soak_writer(args),
        Command::KillChild(args) => crate::real::cli::kill_child(args),
    }
}

struct ShrinkArgs {
    scenario: Option<String>,
    profile: Option<String>,
    seed: u64,
    plan: Option<PathBuf>,
    property: Option<String>,
    op: Option<String>,
    finding: Option<String>,
    out: Option<PathBuf>,
    max_runs: u64,
    html: Option<PathBuf>,
}

fn shrink_command(catalog: &[&'static dyn Scenario], a: ShrinkArgs) -> i32 {
    use crate::shrink::{decision_line, shrink, witness_text, SameProperty, Target};
    let row = match a.finding.as_deref().map(|id| {
        crate::findings::finding(id).ok_or_else(|| {
            format!(
                "unknown finding {id:?}; known findings: {}",
                crate::findings::FINDINGS.iter().map(|f| f.id).collect::<Vec<_>>().join(", ")
            )
        })
    }) {
        None => None,
        Some(Ok(r)) => Some(r),
        Some(Err(e)) => return usage(e),
    };
    let scenario_name = match (a.scenario, row) {
        (Some(s), _) => s,
        (None, Some(r)) => r.scenario.to_string(),
        (None, None) => return usage("shrink needs --scenario (or --finding)".into()),
    };
    let scenario = match find_scenario(catalog, &scenario_name) {
        Ok(s) => s,
        Err(e) => return usage(e),
    };
    let profile = match (a.profile, row) {
        (Some(p), _) => match parse_profile(&p) {
            Ok(p) => p,
            Err(e) => return usage(e),
        },
        (None, Some(r)) => r.profile,
        (None, None) => ProfileName::Current,
    };
    let start = match &a.plan {
        Some(path) => match Plan::read(path) {
            Ok(p) => Some(p),
            Err(e) => return usage(e),
        },
        None => None,
    };
    let first = match execute(scenario, profile, a.seed, start, None) {
        Ok(o) => o,
        Err(e) => return usage(e),
    };
    let same;
    let target: &dyn Target = match row {
        Some(r) => r,
        None => {
            let property =
                match a.property.or_else(|| first.violations.first().map(|v| v.property.to_string())) {
                    Some(p) => p,
                    None => {
                        return usage(format!(
                            "{} under {profile} seed {} passes; there is nothing to shrink",
                            scenario.name(),
                            a.seed
                        ))
                    }
                };
            same = SameProperty { property, op: a.op };
            &same
        }
    };
    eprintln!("shrinking {} under {profile} seed {} keeping {}", scenario.name(), a.seed, target.describe());
    let shrunk = match shrink(scenario, profile, first.plan.clone(), target, a.max_runs) {
        Ok(s) => s,
        Err(e) => return usage(e),
    };
    let out_path = a.out.unwrap_or_else(|| {
        PathBuf::from(format!("fencesim-shrunk-{}-{}-{}.json", scenario.name(), profile, a.seed))
    });
    let text = serde_json::to_string_pretty(&shrunk.minimal).unwrap_or_default();
    if let Err(e) = std::fs::write(&out_path, text + "\n") {
        return usage(format!("cannot write {}: {e}", out_path.display()));
    }
    let o = &shrunk.original;
    let m = &shrunk.minimal;
    println!(
        "shrunk {} profile={profile} seed={} keeping {} in {} runs{}",
        scenario.name(),
        a.seed,
        target.describe(),
        shrunk.runs,
        if shrunk.budget_exhausted { " (budget exhausted: not 1-minimal)" } else { "" }
    );
    if let Some(store) = crate::foreign::active_name() {
        println!("store: {}", store.describe());
    }
    println!("before: {} decisions, {} nodes, size {}", o.decisions.len(), o.knobs.nodes, o.knobs.size);
    for d in &o.decisions {
        println!("  {}", decision_line(d));
    }
    println!("after: {} decisions, {} nodes, size {}", m.decisions.len(), m.knobs.nodes, m.knobs.size);
    for d in &m.decisions {
        println!("  {}", decision_line(d));
    }
    let plan_file = out_path.display().to_string();
    match execute(scenario, profile, a.seed, Some(shrunk.minimal.clone()), Some(&plan_file)) {
        Ok(min) => {
            println!();
            print!("{}", witness_text(&min, Some(target)));
            println!();
            println!("reproduce: {}", min.report.reproduce);
            if let Some(path) = &a.html {
                // Lead with the violation the shrink kept.
                let lead = min
                    .violations
                    .iter()
                    .find(|v| v.call.is_some() && target.holds(std::slice::from_ref(v)))
                    .and_then(|v| v.call);
                let page = crate::html::page_leading(&min.history, &min.report, Some("shrunk witness"), lead);
                if let Err(e) = std::fs::write(path, page) {
                    return usage(format!("cannot write page {}: {e}", path.display()));
                }
            }
            0
        }
        Err(e) => usage(e),
    }
}
