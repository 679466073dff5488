//! `fencesim explore`: a coverage-guided search over fault plans, and (`--exhaustive`) a
//! bounded-exhaustive enumeration of a scenario's small configuration.
//!
//! The search is batch-synchronous: batch `b` holds `BATCH` candidate plans (a fixed
//! size, not tied to `--jobs`) generated from the corpus with the rng of (search seed, b);
//! they run in parallel and are folded in batch order. So the search depends only on
//! (scenario, profile, search seed, run budget), never on `--jobs` or timing; a `--minutes`
//! budget is wall-clock by nature (the report says where it stopped; `--runs` is the
//! reproducible budget). The first batch takes in turn fresh seeds' own derived plans,
//! takeover probe sets (`mutate::Mutator::probe_set`) and focused plans over all of the
//! scenario's points (`mutate::Mutator::focused`); a run that
//! reached an abstract state (`oracle::states`) no earlier run reached joins the corpus. A
//! failing run is shrunk (`shrink`) and reported like a sweep's failure, its plan file
//! saved, with a `fencesim run --plan FILE` command that reproduces it.

pub mod corpus;
pub mod exhaustive;
pub mod mutate;
mod search;

use std::collections::BTreeMap;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};
use store::ProfileName;

use crate::world::Scenario;

pub use search::{explore, run_one, RunResult};

/// Candidates per batch.
pub const BATCH: usize = 16;

/// One failure found by the search, as a sweep reports one, plus its run and plan file.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ExploreFailure {
    /// The run (1-based) that found it.
    pub run: u64,
    pub seed: u64,
    pub properties: Vec<String>,
    /// The `fencesim findings` rows of this profile its violations match (e.g. `F3c`).
    #[serde(default)]
    pub findings: Vec<String>,
    pub witness: String,
    /// `fencesim run --scenario S --profile P --seed N --plan FILE` (the shrunk plan).
    pub reproduce: String,
    pub plan_file: String,
    /// Decisions before and after shrinking, and the shrinker's runs.
    pub decisions: usize,
    pub shrunk_decisions: usize,
    pub shrink_runs: u64,
}

/// One candidate kind's yield over a search (see [`mutate::Kind`]).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct KindStats {
    pub runs: u64,
    /// Runs that reached at least one state no earlier run had reached, and those states.
    pub new_state_runs: u64,
    pub new_states: u64,
    /// Runs that failed (any property; vacuous runs are not failures).
    pub failing_runs: u64,
    /// Per `fencesim findings` row of the profile: the runs whose violations matched it.
    #[serde(default)]
    pub findings: BTreeMap<String, u64>,
}

/// The machine-readable explore report.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ExploreReport {
    pub scenario: String,
    pub profile: String,
    /// The foreign store explored (`--store`), named by its handshake; absent for the Rust
    /// store.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub store: Option<crate::foreign::StoreName>,
    /// The search seed.
    pub seed: u64,
    /// `explore` or `exhaustive`.
    pub mode: String,
    pub runs: u64,
    pub corpus: u64,
    pub states_reached: u64,
    pub states_universe: u64,
    /// Per state reached: the first run that reached it.
    pub states_first_run: BTreeMap<String, u64>,
    /// States first reached in each thousand runs.
    pub states_new_per_1000: Vec<u64>,
    pub states_never_reached: Vec<String>,
    /// Per property that failed: the run of its first detection.
    pub first_detection: BTreeMap<String, u64>,
    /// Per `fencesim findings` row of this profile the search matched: its first run.
    #[serde(default)]
    pub findings_first_run: BTreeMap<String, u64>,
    pub failures: Vec<ExploreFailure>,
    /// Runs in which only a quorum guard failed (`*_quorum_reached`: the plan starved the
    /// workload, too little happened to judge): neither passes nor failures.
    #[serde(default)]
    pub vacuous_runs: u64,
    /// The guided search: per candidate kind (`fresh`, `focused`, `contend_focused`,
    /// `probe`, `hazard_probe`, `probe_set`, `acquire_probe`, `aim`, `mutate`), its runs and
    /// what they yielded. Empty in exhaustive mode.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub kinds: BTreeMap<String, KindStats>,
    /// Exhaustive mode: the plans run, whether the enumeration finished, the fault bound.
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub complete: Option<bool>,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub plans: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none", default)]
    pub max_faults: Option<u32>,
    /// Why the search stopped: `runs` (the budget), `minutes` (wall clock), `failure`,
    /// `finding` (`--until-finding`'s row matched), `complete` or `queue` (exhaustive: every
    /// plan ran, or more were queued than memory allows).
    pub stopped_by: String,
    pub runs_per_sec: f64,
    pub wall_ms: u64,
}

impl ExploreReport {
    /// The report without its wall-clock figures (what determinism is judged on).
    pub fn without_timing(&self) -> ExploreReport {
        ExploreReport { runs_per_sec: 0.0, wall_ms: 0, ..self.clone() }
    }

    pub fn exit_code(&self) -> i32 {
        i32::from(!self.failures.is_empty())
    }

    /// The text summary.
    pub fn summary(&self) -> String {
        use std::fmt::Write as _;
        let mut s = String::new();
        let _ = writeln!(
            s,
            "{} {} {} seed {}: {} runs, {} corpus entries, {} of {} abstract states reached, {:.1} runs/s (stopped by {})",
            self.mode,
            self.scenario,
            self.profile,
            self.seed,
            self.runs,
            self.corpus,
            self.states_reached,
            self.states_universe,
            self.runs_per_sec,
            self.stopped_by
        );
        let curve: Vec<String> = self.states_new_per_1000.iter().map(|n| n.to_string()).collect();
        let _ = writeln!(s, "  new states per 1000 runs: {}", curve.join(" "));
        if self.vacuous_runs > 0 {
            let _ = writeln!(
                s,
                "  {} vacuous run(s): only a quorum guard failed (the plan starved the workload; neither a pass nor a failure)",
                self.vacuous_runs
            );
        }
        if let (Some(plans), Some(k)) = (self.plans, self.max_faults) {
            let _ = writeln!(
                s,
                "  {plans} plans of at most {k} faults{}",
                match (self.complete == Some(true), self.failures.is_empty()) {
                    (true, true) => ": complete (no plan of at most that many faults fails)",
                    (true, false) => ": complete, with counterexamples",
                    (false, true) if self.stopped_by == "queue" => {
                        ": NOT complete (more plans queued than memory allows)"
                    }
                    (false, true) => ": NOT complete (the budget ran out)",
                    (false, false) if self.stopped_by == "failure" => ": stopped at a counterexample",
                    (false, false) if self.stopped_by == "queue" => {
                        ": NOT complete (more plans queued than memory allows), with counterexamples"
                    }
                    (false, false) => ": NOT complete (the budget ran out), with counterexamples",
                }
            );
        }
        if !self.kinds.is_empty() {
            let per_kind: Vec<String> = self
                .kinds
                .iter()
                .map(|(k, st)| {
                    let rows: Vec<String> = st.findings.iter().map(|(f, n)| format!(" {f} {n}")).collect();
                    format!(
                        "{k} {} runs, {} new states, {} failing{}",
                        st.runs,
                        st.new_states,
                        st.failing_runs,
                        if rows.is_empty() { String::new() } else { format!(" (rows:{})", rows.join(",")) }
                    )
                })
                .collect();
            let _ = writeln!(s, "  by candidate kind: {}", per_kind.join("; "));
        }
        for (p, run) in &self.first_detection {
            let _ = writeln!(s, "  first detection of {p}: run {run}");
        }
        for (f, run) in &self.findings_first_run {
            let _ = writeln!(s, "  first detection of finding {f}: run {run}");
        }
        for f in &self.failures {
            let _ = writeln!(
                s,
                "FAIL run={} seed={} [{}]{}: {}\n  witness: {}\n  plan: {} ({} decisions, shrunk from {} in {} runs)",
                f.run,
                f.seed,
                f.properties.join(", "),
                if f.findings.is_empty() { String::new() } else { format!(" (findings {})", f.findings.join(", ")) },
                f.reproduce,
                f.witness,
                f.plan_file,
                f.shrunk_decisions,
                f.decisions,
                f.shrink_runs
            );
        }
        s
    }
}

/// How to explore.
#[derive(Clone, Debug)]
pub struct ExploreOptions {
    pub profile: ProfileName,
    pub seed: u64,
    /// The reproducible budget: runs (plans, in exhaustive mode).
    pub runs: u64,
    /// A wall-clock budget, if any.
    pub minutes: Option<f64>,
    pub jobs: usize,
    pub corpus: Option<PathBuf>,
    /// Where failing plans are saved (default: the corpus, else the working directory).
    pub out_dir: PathBuf,
    /// Go on after a failure (default: stop after the batch that found the first).
    pub keep_going: bool,
    /// The shrinker's run budget per failure (0: no shrinking).
    pub shrink_runs: u64,
    /// Stop after the batch in which this `findings` row first matched (the guided search
    /// only; what `findings --explore-seeds` measures).
    pub until_finding: Option<&'static str>,
    pub progress: bool,
    pub bar: bool,
}

/// `fencesim explore`'s arguments.
#[derive(clap::Args, Debug)]
pub struct ExploreArgs {
    #[arg(long)]
    pub scenario: String,
    #[arg(long, default_value = "current")]
    pub profile: String,
    /// The run budget (the reproducible one; default 2000, or 1000000 plans with --exhaustive).
    #[arg(long)]
    pub runs: Option<u64>,
    /// A wall-clock budget in minutes (not reproducible: where it stops depends on the machine).
    #[arg(long)]
    pub minutes: Option<f64>,
    /// A directory holding the corpus and the search's checkpoint: a restarted explore
    /// continues from it.
    #[arg(long)]
    pub corpus: Option<PathBuf>,
    /// Worker threads (default: available cores); the result does not depend on it.
    #[arg(long)]
    pub jobs: Option<usize>,
    /// The search seed.
    #[arg(long, default_value_t = 0)]
    pub seed: u64,
    #[arg(long)]
    pub json: Option<PathBuf>,
    /// Enumerate every plan of at most --max-faults faults on the scenario's small configuration.
    #[arg(long)]
    pub exhaustive: bool,
    /// The fault bound of --exhaustive (default 2).
    #[arg(long)]
    pub max_faults: Option<u32>,
    /// Go on after the first failure.
    #[arg(long)]
    pub keep_going: bool,
    /// The shrinker's run budget per failure (0: save the failing plan unshrunk).
    #[arg(long, default_value_t = 400)]
    pub shrink_runs: u64,
    /// Where failing plans are saved (default: the corpus directory, else the working directory).
    #[arg(long)]
    pub out_dir: Option<PathBuf>,
    /// Stop after the batch in which this `fencesim findings` row (of --profile) first
    /// matched, e.g. F2; implies --keep-going (the flawed profile's other failures do not
    /// stop the search).
    #[arg(long)]
    pub until_finding: Option<String>,
}

/// Run `fencesim explore`; returns the exit code (0 clean, 1 failure, 2 bad input).
pub fn command(args: ExploreArgs, catalog: &[&'static dyn Scenario]) -> i32 {
    match command_inner(args, catalog) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {e}");
            2
        }
    }
}

fn command_inner(args: ExploreArgs, catalog: &[&'static dyn Scenario]) -> Result<i32, String> {
    use std::io::IsTerminal;
    let scenario = crate::catalog::find_scenario(catalog, &args.scenario)?;
    let profile = crate::catalog::parse_profile(&args.profile)?;
    if crate::foreign::active().is_some() {
        crate::foreign::check_scenario(scenario.name())?;
    }
    if args.max_faults.is_some() && !args.exhaustive {
        return Err("--max-faults applies only with --exhaustive".into());
    }
    if args.exhaustive && args.corpus.is_some() {
        return Err("--corpus applies to the guided explore, not to --exhaustive".into());
    }
    if let Some(m) = args.minutes {
        if !(m > 0.0 && m.is_finite()) {
            return Err(format!("--minutes {m} must be a positive number"));
        }
    }
    let default_runs = if args.exhaustive { 1_000_000 } else { 2000 };
    let runs = match (args.runs, args.minutes) {
        (Some(0), _) => return Err("--runs must be at least 1".into()),
        (Some(n), _) => n,
        (None, Some(_)) => u64::MAX,
        (None, None) => default_runs,
    };
    let jobs =
        args.jobs.unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get())).max(1);
    let out_dir = args.out_dir.clone().or_else(|| args.corpus.clone()).unwrap_or_else(|| PathBuf::from("."));
    let until_finding = match &args.until_finding {
        None => None,
        Some(_) if args.exhaustive => {
            return Err("--until-finding applies to the guided explore, not to --exhaustive".into())
        }
        Some(id) => {
            let row = crate::findings::finding(id).ok_or_else(|| {
                let ids: Vec<&str> = crate::findings::FINDINGS.iter().map(|f| f.id).collect();
                format!("--until-finding {id}: no such findings row (rows: {})", ids.join(", "))
            })?;
            if row.profile != profile {
                return Err(format!(
                    "--until-finding {id}: that row is a flaw of profile {}, not {}",
                    row.profile.as_str(),
                    profile.as_str()
                ));
            }
            Some(row.id)
        }
    };
    let opts = ExploreOptions {
        profile,
        seed: args.seed,
        runs,
        minutes: args.minutes,
        jobs,
        corpus: args.corpus.clone(),
        out_dir,
        keep_going: args.keep_going || until_finding.is_some(),
        shrink_runs: args.shrink_runs,
        until_finding,
        progress: true,
        bar: std::io::stderr().is_terminal(),
    };
    let report = if args.exhaustive {
        exhaustive::exhaustive(scenario, &opts, args.max_faults.unwrap_or(2))?
    } else {
        explore(scenario, &opts)?
    };
    if crate::interrupt::requested() {
        return Ok(130); // the signal handler exits the process
    }
    let report = ExploreReport { store: crate::foreign::active_name(), ..report };
    if let Some(name) = &report.store {
        println!("store: {}", name.describe());
    }
    print!("{}", report.summary());
    if let Some(path) = &args.json {
        let text = serde_json::to_string_pretty(&report).map_err(|e| e.to_string())?;
        std::fs::write(path, text + "\n").map_err(|e| format!("cannot write {}: {e}", path.display()))?;
    }
    Ok(report.exit_code())
}

/// `fencesim bench`'s explore line: the same number of runs as the bench's sweep, explored
/// on one thread (search seed 0, no shrinking), with its CPU time per run and its states.
pub fn bench(scenario: &'static dyn Scenario, runs: u64) -> String {
    let opts = ExploreOptions {
        profile: ProfileName::Current,
        seed: 0,
        runs: runs.max(1),
        minutes: None,
        jobs: 1,
        corpus: None,
        out_dir: std::env::temp_dir(),
        keep_going: true,
        shrink_runs: 0,
        until_finding: None,
        progress: false,
        bar: false,
    };
    let cpu_before = crate::machine::cpu_times();
    match explore(scenario, &opts) {
        Ok(r) => {
            let cpu_s = crate::machine::cpu_times().since(&cpu_before).own_s;
            format!(
                "explore of {} runs: {:.1} runs per second on one core, {:.2} ms CPU per run, {} abstract states reached, {} failures",
                r.runs,
                r.runs_per_sec,
                cpu_s * 1000.0 / r.runs.max(1) as f64,
                r.states_reached,
                r.failures.len()
            )
        }
        Err(e) => format!("explore: {e}"),
    }
}

/// `fencesim bench`'s bookkeeping line: the sweep's own plans (seeds `0..runs`) run once
/// through the sweep's path and once through the explorer's (occurrence counting, the
/// reached triples, the states and findings of each run), alternating in blocks of 25 seeds
/// so both halves meet the same machine. The difference is what exploring adds to a run,
/// apart from the plans it chooses.
pub fn bench_bookkeeping(scenario: &'static dyn Scenario, runs: u64) -> String {
    let (mut sweep_s, mut explore_s) = (0.0f64, 0.0f64);
    let mut start = 0;
    while start < runs {
        let end = (start + 25).min(runs);
        let t = crate::machine::cpu_times();
        for seed in start..end {
            let _ = crate::runner::execute_for_sweep(scenario, ProfileName::Current, seed);
        }
        sweep_s += crate::machine::cpu_times().since(&t).own_s;
        let t = crate::machine::cpu_times();
        for seed in start..end {
            let plan = crate::runner::lazy_plan_for(scenario, ProfileName::Current, seed);
            let _ = search::run_one(scenario, ProfileName::Current, plan);
        }
        explore_s += crate::machine::cpu_times().since(&t).own_s;
        start = end;
    }
    let per = |s: f64| s * 1000.0 / runs.max(1) as f64;
    format!(
        "explore bookkeeping on the same {runs} plans: {:.2} ms CPU per run through the explorer's path, {:.2} ms through the sweep's ({:+.1}%)",
        per(explore_s),
        per(sweep_s),
        if sweep_s > 0.0 { (explore_s / sweep_s - 1.0) * 100.0 } else { 0.0 }
    )
}

/// `fencesim findings --explore-seeds N`: for every row of `report`, explore the row's
/// generic scenario under its profile with search seeds `0..seeds` (each `runs` runs, going
/// on after failures, failing plans kept in a scratch directory and removed) and note the run
/// at which the row's matcher first matched.
pub fn versus_findings(
    report: &mut crate::findings::FindingsReport,
    catalog: &[&'static dyn Scenario],
    seeds: u64,
    runs: u64,
    jobs: usize,
) -> Result<(), String> {
    for row in &mut report.findings {
        let finding =
            crate::findings::finding(&row.id).ok_or_else(|| format!("unknown finding {}", row.id))?;
        let scenario = crate::catalog::find_scenario(catalog, finding.generic)?;
        let scratch = tempfile::tempdir().map_err(|e| format!("cannot make a scratch directory: {e}"))?;
        let mut first_run = Vec::new();
        for seed in 0..seeds {
            let opts = ExploreOptions {
                profile: finding.profile,
                seed,
                runs,
                minutes: None,
                jobs,
                corpus: None,
                out_dir: scratch.path().to_path_buf(),
                keep_going: true,
                shrink_runs: 0,
                until_finding: Some(finding.id),
                progress: false,
                bar: false,
            };
            let explored = search::explore(scenario, &opts)?;
            first_run.push(explored.findings_first_run.get(finding.id).copied());
        }
        // The sweep's counterpart: `findings::search` over each disjoint range.
        let sweep_first_run = (0..seeds)
            .map(|k| {
                let start = k * crate::findings::SWEEP_STRIDE;
                let range = crate::sweep::SeedRange { start, end: start + runs };
                crate::findings::search(scenario, finding.profile, finding, range, jobs)
                    .first
                    .map(|s| s - start + 1)
            })
            .collect();
        row.explore = Some(crate::findings::ExploreVersus {
            scenario: finding.generic.to_string(),
            runs,
            first_run,
            sweep_first_run,
        });
    }
    Ok(())
}

/// The main job's guided search of `current` (`fencesim findings --explore-current N`): for
/// each generic scenario the findings report swept (`soak`, `queue`), `explore` with search
/// seed `seed` over `runs` plans, stopping after the batch of the first failure, which is
/// shrunk (400 runs) and saved under `out_dir`. The built-in store only: with a foreign store
/// the report says the search was skipped.
pub fn current_pass(
    report: &mut crate::findings::FindingsReport,
    catalog: &[&'static dyn Scenario],
    runs: u64,
    seed: u64,
    jobs: usize,
    out_dir: &std::path::Path,
    progress: bool,
) -> Result<(), String> {
    if runs == 0 {
        return Ok(());
    }
    let generic = crate::findings::generic_scenarios();
    let swept: Vec<(String, u64)> = report
        .current_clean
        .scenarios
        .iter()
        .filter(|s| generic.contains(&s.scenario.as_str()))
        .map(|s| (s.scenario.clone(), s.states_reached))
        .collect();
    if swept.is_empty() {
        return Ok(());
    }
    if crate::foreign::active().is_some() {
        report.current_clean.explore_skipped = Some(format!(
            "a foreign store (--store); run `fencesim explore --scenario S --runs {runs} --store CMD`"
        ));
        return Ok(());
    }
    for (name, sweep_states_reached) in swept {
        if crate::interrupt::requested() {
            break;
        }
        let scenario = crate::catalog::find_scenario(catalog, &name)?;
        if progress {
            eprintln!("current: exploring {name} for {runs} runs (search seed {seed})");
        }
        let opts = ExploreOptions {
            profile: ProfileName::Current,
            seed,
            runs,
            minutes: None,
            jobs,
            corpus: None,
            out_dir: out_dir.to_path_buf(),
            keep_going: false,
            shrink_runs: 400,
            until_finding: None,
            progress,
            bar: false,
        };
        let r = search::explore(scenario, &opts)?;
        report.current_clean.explore.push(crate::findings::ExploreClean {
            scenario: name,
            seed: r.seed,
            runs: r.runs,
            states_reached: r.states_reached,
            sweep_states_reached,
            failures: r
                .failures
                .into_iter()
                .map(|f| crate::findings::CurrentExploreFailure {
                    run: f.run,
                    seed: f.seed,
                    properties: f.properties,
                    witness: f.witness,
                    reproduce: f.reproduce,
                    plan_file: f.plan_file,
                })
                .collect(),
            wall_ms: r.wall_ms,
        });
    }
    Ok(())
}
