//! Seed sweeps: many runs of one scenario, each seed isolated (its own runtime and database
//! file), spread over worker threads; a progress bar on a terminal and plain lines
//! otherwise; a summary with failures per property, seeds per second and fault-point
//! coverage; disjoint shards (`K/N`) whose merged report equals the unsharded one.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::mpsc;

use serde::{Deserialize, Serialize};
use store::ProfileName;

use crate::runner::execute_for_sweep;
use crate::world::Scenario;

/// `A..B`, B exclusive.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SeedRange {
    pub start: u64,
    pub end: u64,
}

impl SeedRange {
    pub fn parse(text: &str) -> Result<SeedRange, String> {
        let (a, b) =
            text.split_once("..").ok_or_else(|| format!("seed range {text:?} is not of the form A..B"))?;
        let start: u64 = a.trim().parse().map_err(|_| format!("seed range {text:?}: {a:?} is not a seed"))?;
        let end: u64 = b.trim().parse().map_err(|_| format!("seed range {text:?}: {b:?} is not a seed"))?;
        if end <= start {
            return Err(format!("seed range {text:?} is empty or reversed (B must be greater than A)"));
        }
        Ok(SeedRange { start, end })
    }
}

/// `K/N`, 1-based.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Shard {
    pub index: u64,
    pub count: u64,
}

impl Shard {
    pub fn parse(text: &str) -> Result<Shard, String> {
        let (k, n) = text.split_once('/').ok_or_else(|| format!("shard {text:?} is not of the form K/N"))?;
        let index: u64 = k.trim().parse().map_err(|_| format!("shard {text:?}: {k:?} is not a number"))?;
        let count: u64 = n.trim().parse().map_err(|_| format!("shard {text:?}: {n:?} is not a number"))?;
        if count == 0 || index == 0 || index > count {
            return Err(format!("shard {text:?} must satisfy 1 <= K <= N"));
        }
        Ok(Shard { index, count })
    }

    pub fn owns(&self, range: SeedRange, seed: u64) -> bool {
        (seed - range.start) % self.count == self.index - 1
    }
}

/// How to sweep.
#[derive(Clone, Copy, Debug)]
pub struct SweepOptions {
    pub profile: ProfileName,
    pub range: SeedRange,
    pub shard: Option<Shard>,
    pub jobs: usize,
    pub fail_fast: bool,
    /// Run every k-th seed of the range twice and compare trace hashes (0: never, 1: every
    /// seed).
    pub determinism_every: u64,
    pub progress: bool,
}

/// One failing seed.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Failure {
    pub seed: u64,
    pub properties: Vec<String>,
    pub witness: String,
    pub reproduce: String,
}

/// Per fault point over the sweep.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PointCoverage {
    pub reached: u64,
    pub fired: u64,
    pub crashed: u64,
    /// Runs in which the point fired and the run still passed (the run survived it).
    pub fired_and_passed_runs: u64,
    pub fired_runs: u64,
    /// Runs in which a crash was injected at the point, and those that still passed.
    #[serde(default)]
    pub crashed_runs: u64,
    #[serde(default)]
    pub crashed_and_passed_runs: u64,
}

/// The machine-readable sweep report.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SweepReport {
    pub scenario: String,
    pub profile: String,
    /// The foreign store swept (`--store`), named by its handshake; absent for the built-in
    /// Rust store, so that report's JSON is unchanged. Merge refuses reports of different
    /// stores.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub store: Option<crate::foreign::StoreName>,
    pub range: SeedRange,
    pub shards: Vec<Shard>,
    pub seeds_run: u64,
    pub failures: Vec<Failure>,
    pub failures_per_property: BTreeMap<String, u64>,
    pub nondeterministic: Vec<u64>,
    pub seeds_per_sec: f64,
    pub wall_ms: u64,
    pub fault_points_hit: BTreeMap<String, PointCoverage>,
    /// Per coverage goal: in how many seeds it was met (goals never met are listed too).
    #[serde(default)]
    pub goals_met: BTreeMap<String, u64>,
    /// The scenario's declared goals: the share and seeds required, the seeds that met it.
    #[serde(default)]
    pub goals: BTreeMap<String, GoalCoverage>,
    /// Declared goals met in fewer seeds than required: a coverage shortfall.
    #[serde(default)]
    pub goals_unmet: Vec<String>,
    /// Abstract state coverage (`oracle::states`): per state reached, the first seed that
    /// reached it (independent of thread scheduling and sharding).
    #[serde(default)]
    pub states_first_seed: BTreeMap<String, u64>,
    /// How many states were reached, of how many the universe names.
    #[serde(default)]
    pub states_reached: u64,
    #[serde(default)]
    pub states_universe: u64,
    /// The saturation curve: states first reached in each thousand seeds of the range.
    #[serde(default)]
    pub states_new_per_1000: Vec<u64>,
    /// The states of the universe no seed reached, by name.
    #[serde(default)]
    pub states_never_reached: Vec<String>,
    /// Per state reached: how many seeds reached it (the incidence counts the estimate is
    /// computed from; shards add up).
    #[serde(default)]
    pub states_seeds: BTreeMap<String, u64>,
    /// How many states are reachable, estimated from those counts, and the chance that one
    /// more seed reaches a new one (`richness`).
    #[serde(default)]
    pub states_estimate: crate::richness::Richness,
    /// The run that came nearest each of the run budgets (`world::CALL_BUDGET`,
    /// `world::READ_BUDGET`): the headroom a green sweep left before a run would be cut off.
    #[serde(default)]
    pub busiest: Busiest,
}

/// The most store calls and the most recorded read items of any one run of a sweep, each
/// with the lowest seed that reached it (so the figure does not depend on sharding).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Busiest {
    pub calls: u64,
    pub calls_seed: u64,
    pub read_items: u64,
    pub read_items_seed: u64,
}

impl Busiest {
    /// Keep the larger figure of each pair; on a tie, the lower seed.
    fn absorb(&mut self, calls: (u64, u64), read_items: (u64, u64)) {
        let better = |mine: (u64, u64), theirs: (u64, u64)| {
            theirs.0 > mine.0 || (theirs.0 == mine.0 && theirs.0 > 0 && theirs.1 < mine.1)
        };
        if better((self.calls, self.calls_seed), calls) {
            (self.calls, self.calls_seed) = calls;
        }
        if better((self.read_items, self.read_items_seed), read_items) {
            (self.read_items, self.read_items_seed) = read_items;
        }
    }

    /// The figure in words, as a share of each budget.
    pub fn line(&self) -> String {
        let share = |n: u64, budget: usize| 100.0 * n as f64 / budget as f64;
        format!(
            "  busiest run: seed {} made {} store calls ({:.1}% of the call budget); seed {} read {} items ({:.1}% of the read budget)\n",
            self.calls_seed,
            self.calls,
            share(self.calls, crate::world::CALL_BUDGET),
            self.read_items_seed,
            self.read_items,
            share(self.read_items, crate::world::READ_BUDGET),
        )
    }
}

/// One declared coverage goal over a sweep.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct GoalCoverage {
    /// The share of seeds (per mille) the scenario requires.
    pub required_permille: u32,
    /// The seeds that share is of this sweep.
    pub required: u64,
    pub met_seeds: u64,
}

/// The exit code of a set of sweep reports: 1 when a property failed or a seed was not
/// deterministic, else 3 when a declared coverage goal fell short, else 0.
pub fn exit_code(reports: &[SweepReport]) -> i32 {
    if reports.iter().any(|r| !r.failures.is_empty() || !r.nondeterministic.is_empty()) {
        1
    } else if reports.iter().any(|r| !r.goals_unmet.is_empty()) {
        3
    } else {
        0
    }
}

impl SweepReport {
    /// A report of no seeds yet for `scenario` swept with `opts`: every goal counted at
    /// zero, the scenario's declared goals with their shares.
    pub fn empty(scenario: &dyn Scenario, opts: &SweepOptions) -> SweepReport {
        SweepReport {
            scenario: scenario.name().to_string(),
            profile: opts.profile.as_str().to_string(),
            store: None,
            range: opts.range,
            shards: opts.shard.into_iter().collect(),
            seeds_run: 0,
            failures: Vec::new(),
            failures_per_property: BTreeMap::new(),
            nondeterministic: Vec::new(),
            seeds_per_sec: 0.0,
            wall_ms: 0,
            fault_points_hit: BTreeMap::new(),
            goals_met: crate::oracle::goals::GOALS.iter().map(|g| (g.name.to_string(), 0)).collect(),
            goals: scenario
                .coverage()
                .iter()
                .map(|r| {
                    (
                        r.goal.to_string(),
                        GoalCoverage { required_permille: r.permille, ..GoalCoverage::default() },
                    )
                })
                .collect(),
            goals_unmet: Vec::new(),
            states_first_seed: BTreeMap::new(),
            states_reached: 0,
            states_universe: 0,
            states_new_per_1000: Vec::new(),
            states_never_reached: Vec::new(),
            states_seeds: BTreeMap::new(),
            states_estimate: crate::richness::Richness::default(),
            busiest: Busiest::default(),
        }
    }

    /// The content that must not depend on sharding (no timings).
    pub fn without_timing(&self) -> SweepReport {
        SweepReport { seeds_per_sec: 0.0, wall_ms: 0, shards: Vec::new(), ..self.clone() }
    }

    /// Combine shard reports of one (scenario, profile, range).
    pub fn merge(parts: Vec<SweepReport>) -> Result<SweepReport, String> {
        let mut it = parts.into_iter();
        let mut m = it.next().ok_or("nothing to merge")?;
        for p in it {
            if p.scenario != m.scenario || p.profile != m.profile || p.range != m.range {
                return Err(format!(
                    "cannot merge {}/{}/{:?} with {}/{}/{:?}",
                    p.scenario, p.profile, p.range, m.scenario, m.profile, m.range
                ));
            }
            if p.store != m.store {
                let name = |s: &Option<crate::foreign::StoreName>| {
                    s.as_ref().map_or("the built-in Rust store".to_string(), |s| s.describe())
                };
                return Err(format!(
                    "cannot merge reports of different stores: one swept {}, another {}",
                    name(&m.store),
                    name(&p.store)
                ));
            }
            m.shards.extend(p.shards);
            m.seeds_run += p.seeds_run;
            m.failures.extend(p.failures);
            m.nondeterministic.extend(p.nondeterministic);
            for (k, v) in p.failures_per_property {
                *m.failures_per_property.entry(k).or_default() += v;
            }
            for (k, v) in p.goals_met {
                *m.goals_met.entry(k).or_default() += v;
            }
            for (k, v) in p.states_first_seed {
                let e = m.states_first_seed.entry(k).or_insert(v);
                *e = (*e).min(v);
            }
            for (k, v) in p.states_seeds {
                *m.states_seeds.entry(k).or_default() += v;
            }
            for (k, v) in p.fault_points_hit {
                let e = m.fault_points_hit.entry(k).or_default();
                e.reached += v.reached;
                e.fired += v.fired;
                e.crashed += v.crashed;
                e.fired_and_passed_runs += v.fired_and_passed_runs;
                e.fired_runs += v.fired_runs;
                e.crashed_runs += v.crashed_runs;
                e.crashed_and_passed_runs += v.crashed_and_passed_runs;
            }
            m.busiest.absorb(
                (p.busiest.calls, p.busiest.calls_seed),
                (p.busiest.read_items, p.busiest.read_items_seed),
            );
            m.wall_ms = m.wall_ms.max(p.wall_ms);
            m.seeds_per_sec += p.seeds_per_sec;
        }
        m.failures.sort_by_key(|f| f.seed);
        m.nondeterministic.sort();
        m.shards.sort_by_key(|s| s.index);
        m.settle_goals();
        Ok(m)
    }

    /// Recompute each declared goal's required seeds and met seeds from the totals, and the
    /// list of goals that fell short.
    fn settle_goals(&mut self) {
        self.states_reached = self.states_first_seed.len() as u64;
        self.states_universe = crate::oracle::states::universe().len() as u64;
        self.states_new_per_1000 = self.saturation(1000);
        self.states_never_reached = self.states_never_reached().into_iter().map(str::to_string).collect();
        self.states_estimate =
            crate::richness::Richness::from_counts(self.states_seeds.values().copied(), self.seeds_run);
        self.goals_unmet.clear();
        for (name, g) in self.goals.iter_mut() {
            g.required = crate::oracle::goals::Required::seeds_needed(g.required_permille, self.seeds_run);
            g.met_seeds = self.goals_met.get(name).copied().unwrap_or(0);
            if g.met_seeds < g.required {
                self.goals_unmet.push(name.clone());
            }
        }
    }

    pub fn summary_table(&self) -> String {
        use std::fmt::Write as _;
        let mut s = String::new();
        let _ = writeln!(
            s,
            "sweep {} profile={} seeds {}..{}: {} run, {} failed, {:.1} seeds/s",
            self.scenario,
            self.profile,
            self.range.start,
            self.range.end,
            self.seeds_run,
            self.failures.len(),
            self.seeds_per_sec
        );
        if let Some(store) = &self.store {
            let _ = writeln!(s, "  store: {}", store.describe());
        }
        for (p, n) in &self.failures_per_property {
            let _ = writeln!(s, "  {p:<38} {n:>6} seeds");
        }
        for f in self.failures.iter().take(10) {
            let _ = writeln!(s, "  FAIL seed={} [{}] {}", f.seed, f.properties.join(", "), f.witness);
            let _ = writeln!(s, "       reproduce: {}", f.reproduce);
        }
        if self.failures.len() > 10 {
            let _ = writeln!(s, "  ... {} more failing seeds (see --json)", self.failures.len() - 10);
        }
        for seed in &self.nondeterministic {
            let _ = writeln!(s, "  NONDETERMINISTIC seed={seed}");
        }
        let fired = self.fault_points_hit.values().filter(|p| p.fired > 0).count();
        let _ = writeln!(s, "  fault points: {} reached, {} fired", self.fault_points_hit.len(), fired);
        s.push_str(&self.coverage_table());
        s.push_str(&self.goals_line());
        s.push_str(&self.states_line());
        s.push_str(&self.busiest.line());
        s
    }

    /// Abstract state coverage: states reached of the universe, new states per thousand
    /// seeds (the saturation curve), and how many were never reached.
    pub fn states_line(&self) -> String {
        let universe = crate::oracle::states::universe().len();
        let curve = self.saturation(1000);
        let shown: Vec<String> = curve.iter().take(12).map(|n| n.to_string()).collect();
        format!(
            "  abstract states: {} of {universe} reached; new per 1000 seeds: {}{}; never reached: {} (see --json)\n  {}\n",
            self.states_first_seed.len(),
            shown.join(" "),
            if curve.len() > 12 { " ..." } else { "" },
            universe - self.states_first_seed.len(),
            self.states_estimate.line()
        )
    }

    /// New states per `per` seeds of the range, in seed order.
    pub fn saturation(&self, per: u64) -> Vec<u64> {
        let len = (self.range.end - self.range.start).div_ceil(per.max(1)) as usize;
        let mut curve = vec![0u64; len];
        for &seed in self.states_first_seed.values() {
            if let Some(n) = curve.get_mut(((seed - self.range.start) / per.max(1)) as usize) {
                *n += 1;
            }
        }
        curve
    }

    /// The states of the universe no seed reached, in universe order.
    pub fn states_never_reached(&self) -> Vec<&'static str> {
        crate::oracle::states::universe()
            .iter()
            .filter(|n| !self.states_first_seed.contains_key(n.as_str()))
            .map(|n| n.as_str())
            .collect()
    }

    /// The scenario's declared coverage goals (met seeds / required seeds), each shortfall in
    /// words, then the undeclared goals the sweep happened to meet.
    pub fn goals_line(&self) -> String {
        use std::fmt::Write as _;
        let mut s = String::new();
        if self.goals.is_empty() {
            s.push_str("  coverage goals: none declared by this scenario\n");
        } else {
            let list: Vec<String> =
                self.goals.iter().map(|(g, c)| format!("{g} {}/{}", c.met_seeds, c.required)).collect();
            let _ = writeln!(s, "  coverage goals (seeds met/required): {}", list.join(", "));
        }
        for name in &self.goals_unmet {
            if let Some(c) = self.goals.get(name) {
                let _ = writeln!(
                    s,
                    "  COVERAGE SHORTFALL: {name} met in {} of {} seeds; the scenario requires {} ({}.{}% of the seeds), {} short",
                    c.met_seeds,
                    self.seeds_run,
                    c.required,
                    c.required_permille / 10,
                    c.required_permille % 10,
                    c.required - c.met_seeds
                );
            }
        }
        let extra: Vec<String> = self
            .goals_met
            .iter()
            .filter(|(g, n)| **n > 0 && !self.goals.contains_key(*g))
            .map(|(g, n)| format!("{g} {n}"))
            .collect();
        if !extra.is_empty() {
            let _ = writeln!(s, "  also met (not required): {}", extra.join(", "));
        }
        s
    }

    /// Per fault point that fired: how often, in how many runs, how many of those runs
    /// survived it (passed), and the same for injected crashes; then the points reached
    /// but never fired.
    pub fn coverage_table(&self) -> String {
        use std::fmt::Write as _;
        let mut s = String::new();
        let fired: Vec<(&String, &PointCoverage)> =
            self.fault_points_hit.iter().filter(|(_, c)| c.fired > 0).collect();
        if !fired.is_empty() {
            let _ = writeln!(
                s,
                "    {:<34} {:>9} {:>7} {:>6} {:>8} {:>7} {:>6} {:>8}",
                "fault point", "reached", "fired", "runs", "survived", "crashed", "runs", "survived"
            );
        }
        for (name, c) in fired {
            let _ = writeln!(
                s,
                "    {:<34} {:>9} {:>7} {:>6} {:>8} {:>7} {:>6} {:>8}",
                name,
                c.reached,
                c.fired,
                c.fired_runs,
                c.fired_and_passed_runs,
                c.crashed,
                c.crashed_runs,
                c.crashed_and_passed_runs
            );
        }
        let quiet: Vec<&str> =
            self.fault_points_hit.iter().filter(|(_, c)| c.fired == 0).map(|(n, _)| n.as_str()).collect();
        if !quiet.is_empty() {
            let _ = writeln!(s, "    reached, never fired: {}", quiet.join(", "));
        }
        s
    }
}

struct SeedResult {
    seed: u64,
    failure: Option<Failure>,
    nondeterministic: bool,
    points: BTreeMap<String, (u64, u64, u64)>,
    passed: bool,
    goals: Vec<String>,
    states: Vec<u16>,
    /// The run's store calls and recorded read items (zero when the harness failed).
    calls: u64,
    read_items: u64,
}

fn run_seed(scenario: &'static dyn Scenario, opts: &SweepOptions, seed: u64) -> SeedResult {
    match execute_for_sweep(scenario, opts.profile, seed) {
        Ok(out) => {
            let mut nondeterministic = false;
            if opts.determinism_every > 0 && (seed - opts.range.start) % opts.determinism_every == 0 {
                if let Ok(again) = execute_for_sweep(scenario, opts.profile, seed) {
                    nondeterministic = again.report.trace_hash != out.report.trace_hash;
                    if nondeterministic {
                        let a = crate::report::timeline(&out.history);
                        let b = crate::report::timeline(&again.history);
                        if let Some((x, y)) = a.lines().zip(b.lines()).find(|(x, y)| x != y) {
                            eprintln!("seed {seed}: first divergent event:\n  run 1: {x}\n  run 2: {y}");
                        }
                    }
                }
            }
            let failure = (!out.report.passed).then(|| {
                let mut props: Vec<String> = out.violations.iter().map(|v| v.property.to_string()).collect();
                props.sort();
                props.dedup();
                Failure {
                    seed,
                    properties: props,
                    witness: out.violations.first().map(|v| v.witness.clone()).unwrap_or_default(),
                    reproduce: out.report.reproduce.clone(),
                }
            });
            SeedResult {
                seed,
                failure,
                nondeterministic,
                points: out.report.fault_points.clone(),
                passed: out.report.passed,
                goals: out.report.goals.clone(),
                states: out.report.states.clone(),
                calls: out.history.calls.len() as u64,
                read_items: out.history.read_items as u64,
            }
        }
        Err(e) => SeedResult {
            seed,
            failure: Some(Failure {
                seed,
                properties: vec!["harness_error".into()],
                witness: e,
                reproduce: format!(
                    "fencesim run --scenario {} --profile {} --seed {seed}{}",
                    scenario.name(),
                    opts.profile,
                    crate::foreign::active().map_or(String::new(), |s| format!(" --store {:?}", s.command))
                ),
            }),
            nondeterministic: false,
            points: BTreeMap::new(),
            passed: false,
            goals: Vec::new(),
            states: Vec::new(),
            calls: 0,
            read_items: 0,
        },
    }
}

/// Sweep the seeds of one scenario.
#[allow(clippy::disallowed_methods)] // seeds per second is a wall-clock figure by definition
pub fn run(scenario: &'static dyn Scenario, opts: &SweepOptions) -> SweepReport {
    let seeds: Vec<u64> = (opts.range.start..opts.range.end)
        .filter(|s| opts.shard.is_none_or(|sh| sh.owns(opts.range, *s)))
        .collect();
    let started = std::time::Instant::now();
    let next = AtomicUsize::new(0);
    let stop = AtomicBool::new(false);
    let (tx, rx) = mpsc::channel::<SeedResult>();
    let total = seeds.len();
    let bar = if opts.progress {
        let b = indicatif::ProgressBar::new(total as u64);
        b.set_style(
            indicatif::ProgressStyle::with_template(
                "{prefix} [{bar:30}] {pos}/{len} seeds, {per_sec}, {msg}",
            )
            .unwrap_or_else(|_| indicatif::ProgressStyle::default_bar()),
        );
        b.set_prefix(format!("{} {}", scenario.name(), opts.profile));
        Some(b)
    } else {
        None
    };
    // Each seed's result is folded into the report as it arrives (only failures are kept),
    // so a sweep's memory does not grow with its seed count.
    let mut report = SweepReport::empty(scenario, opts);
    // The workers run over the caller's store choice (a thread override included).
    let store = crate::foreign::active();
    // Per state: the first seed that reached it and how many seeds did.
    let mut per_state: Vec<(u64, u64)> = vec![(u64::MAX, 0); crate::oracle::states::universe().len()];
    std::thread::scope(|scope| {
        for _ in 0..opts.jobs.min(total.max(1)) {
            let tx = tx.clone();
            let seeds = &seeds;
            let next = &next;
            let stop = &stop;
            let store = store.clone();
            scope.spawn(move || {
                crate::foreign::with_store_arc(store, || loop {
                    if stop.load(Ordering::Relaxed) || crate::interrupt::requested() {
                        break;
                    }
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    let Some(&seed) = seeds.get(i) else { break };
                    let r = run_seed(scenario, opts, seed);
                    if r.failure.is_some() && opts.fail_fast {
                        stop.store(true, Ordering::Relaxed);
                    }
                    if tx.send(r).is_err() {
                        break;
                    }
                })
            });
        }
        drop(tx);
        for r in rx {
            let done = report.seeds_run + 1;
            let failed = report.failures.len() + usize::from(r.failure.is_some());
            match &bar {
                Some(b) => {
                    b.inc(1);
                    b.set_message(format!("{failed} failed"));
                }
                None => {
                    if done % 100 == 0 || done == total as u64 {
                        eprintln!(
                            "{} {}: {done}/{total} seeds, {failed} failed",
                            scenario.name(),
                            opts.profile
                        );
                    }
                }
            }
            if let Some(f) = &r.failure {
                // After Ctrl-C the seeds in flight fail for want of their killed children:
                // the signal handler reports that, not each seed.
                if bar.is_none() && !crate::interrupt::requested() {
                    eprintln!("FAIL seed={} [{}]: {}", f.seed, f.properties.join(", "), f.reproduce);
                }
            }
            for &st in &r.states {
                if let Some((first, seeds)) = per_state.get_mut(usize::from(st)) {
                    *first = (*first).min(r.seed);
                    *seeds += 1;
                }
            }
            report.fold(r);
        }
    });
    let names = crate::oracle::states::universe();
    for (i, &(first, seeds)) in per_state.iter().enumerate().filter(|(_, s)| s.1 > 0) {
        report.states_first_seed.insert(names[i].clone(), first);
        report.states_seeds.insert(names[i].clone(), seeds);
    }
    if let Some(b) = bar {
        b.finish_and_clear();
    }
    let wall = started.elapsed();
    report.failures.sort_by_key(|f| f.seed);
    report.nondeterministic.sort_unstable();
    // Named after the runs: the children's handshake says what the store is.
    report.store = store.map(|s| crate::foreign::store_name(&s));
    report.seeds_per_sec = report.seeds_run as f64 / wall.as_secs_f64().max(1e-9);
    report.wall_ms = wall.as_millis() as u64;
    report.settle_goals();
    report
}

impl SweepReport {
    /// Add one seed's result to the totals.
    fn fold(&mut self, r: SeedResult) {
        self.seeds_run += 1;
        self.busiest.absorb((r.calls, r.seed), (r.read_items, r.seed));
        for g in &r.goals {
            *self.goals_met.entry(g.clone()).or_default() += 1;
        }
        for (k, (reached, fired, crashed)) in &r.points {
            let e = match self.fault_points_hit.get_mut(k.as_str()) {
                Some(e) => e,
                None => self.fault_points_hit.entry(k.clone()).or_default(),
            };
            e.reached += reached;
            e.fired += fired;
            e.crashed += crashed;
            if *fired > 0 {
                e.fired_runs += 1;
                e.fired_and_passed_runs += u64::from(r.passed);
            }
            if *crashed > 0 {
                e.crashed_runs += 1;
                e.crashed_and_passed_runs += u64::from(r.passed);
            }
        }
        if r.nondeterministic {
            self.nondeterministic.push(r.seed);
        }
        if let Some(f) = r.failure {
            for p in &f.properties {
                *self.failures_per_property.entry(p.clone()).or_default() += 1;
            }
            self.failures.push(f);
        }
    }
}

#[cfg(test)]
mod tests {
    //! Coverage gating: a declared goal met in fewer seeds than its share is a shortfall
    //! (exit 3), a property failure or a nondeterministic seed outranks it (exit 1), and a
    //! merge of shards recomputes the requirement over the merged seed count.

    use super::*;

    fn report(seeds: u64, met: u64, permille: u32) -> SweepReport {
        let text = serde_json::json!({
            "scenario": "s", "profile": "current", "range": {"start": 0, "end": seeds}, "shards": [],
            "seeds_run": seeds, "failures": [], "failures_per_property": {}, "nondeterministic": [],
            "seeds_per_sec": 0.0, "wall_ms": 0, "fault_points_hit": {},
            "goals_met": {"busy_met": met},
            "goals": {"busy_met": {"required_permille": permille, "required": 0, "met_seeds": 0}},
        });
        let mut r: SweepReport = serde_json::from_value(text).expect("a report");
        r.settle_goals();
        r
    }

    #[test]
    fn a_goal_below_its_share_is_a_shortfall_with_exit_code_3() {
        let short = report(200, 9, 50); // 50 per mille of 200 seeds = 10 required
        assert_eq!(short.goals["busy_met"].required, 10);
        assert_eq!(short.goals_unmet, vec!["busy_met".to_string()]);
        assert_eq!(exit_code(std::slice::from_ref(&short)), 3);
        assert!(
            short.goals_line().contains("COVERAGE SHORTFALL: busy_met met in 9 of 200 seeds"),
            "{}",
            short.goals_line()
        );

        let met = report(200, 10, 50);
        assert!(met.goals_unmet.is_empty());
        assert_eq!(exit_code(std::slice::from_ref(&met)), 0);
        assert_eq!(exit_code(&[met, short.clone()]), 3);

        let mut failing = short.clone();
        failing.nondeterministic.push(4);
        assert_eq!(exit_code(&[failing]), 1, "a nondeterministic seed outranks a shortfall");
        let mut failing = short;
        failing.failures.push(Failure {
            seed: 1,
            properties: vec!["p".into()],
            witness: String::new(),
            reproduce: String::new(),
        });
        assert_eq!(exit_code(&[failing]), 1);
    }

    #[test]
    fn the_busiest_run_is_the_largest_figure_at_its_lowest_seed_whatever_the_sharding() {
        let mut a = report(100, 5, 40);
        a.busiest.absorb((40, 7), (900, 3));
        a.busiest.absorb((55, 9), (900, 1));
        a.busiest.absorb((55, 12), (10, 2));
        assert_eq!(a.busiest, Busiest { calls: 55, calls_seed: 9, read_items: 900, read_items_seed: 1 });
        let mut b = report(100, 5, 40);
        b.busiest.absorb((55, 4), (12, 0));
        let merged = SweepReport::merge(vec![a.clone(), b.clone()]).unwrap();
        let swapped = SweepReport::merge(vec![b, a]).unwrap();
        assert_eq!(merged.busiest, Busiest { calls: 55, calls_seed: 4, read_items: 900, read_items_seed: 1 });
        assert_eq!(swapped.busiest, merged.busiest);
        let line = merged.summary_table();
        assert!(line.contains("busiest run: seed 4 made 55 store calls (0.1% of the call budget)"), "{line}");
        assert!(line.contains("seed 1 read 900 items (0.2% of the read budget)"), "{line}");
        let field = r#","busiest":{"calls":0,"calls_seed":0,"read_items":0,"read_items_seed":0}"#;
        let text = serde_json::to_string(&report(10, 1, 40)).unwrap();
        assert!(text.contains(field), "{text}");
        let old: SweepReport = serde_json::from_str(&text.replace(field, ""))
            .expect("a report written before the figure existed still reads");
        assert_eq!(old.busiest, Busiest::default());
    }

    #[test]
    fn a_report_names_its_foreign_store_and_a_merge_refuses_another_store() {
        let rust = report(100, 5, 40);
        let text = serde_json::to_string(&rust).unwrap();
        assert!(!text.contains("\"store\""), "the Rust store's report has no store field: {text}");
        assert!(!rust.summary_table().contains("store:"));

        let mut py = rust.clone();
        py.store = Some(crate::foreign::StoreName {
            command: "python3 s.py".into(),
            name: Some("python-sqlite-reference".into()),
            version: Some("0.1.0".into()),
        });
        let text = serde_json::to_string(&py).unwrap();
        assert!(
            text.contains(
                r#""store":{"command":"python3 s.py","name":"python-sqlite-reference","version":"0.1.0"}"#
            ),
            "{text}"
        );
        let back: SweepReport = serde_json::from_str(&text).unwrap();
        assert_eq!(back.store, py.store);
        let table = py.summary_table();
        assert_eq!(
            table.matches("store: python-sqlite-reference 0.1.0 (`python3 s.py`)").count(),
            1,
            "{table}"
        );

        let err = SweepReport::merge(vec![rust.clone(), py.clone()]).unwrap_err();
        assert!(err.contains("different stores") && err.contains("the built-in Rust store"), "{err}");
        let mut other = py.clone();
        other.store.as_mut().unwrap().version = Some("0.2.0".into());
        assert!(SweepReport::merge(vec![py.clone(), other]).unwrap_err().contains("0.2.0"));
        let merged = SweepReport::merge(vec![py.clone(), py.clone()]).unwrap();
        assert_eq!(merged.store, py.store, "a merge keeps the store");
    }

    #[test]
    fn a_merge_judges_the_requirement_over_all_shards() {
        // Each shard alone falls short (3 of 100 seeds, 4 required); together they meet
        // 8 of 8 required.
        let mut a = report(100, 3, 40);
        let mut b = report(100, 5, 40);
        a.range = SeedRange { start: 0, end: 200 };
        b.range = a.range;
        assert_eq!(exit_code(&[a.clone()]), 3);
        let m = SweepReport::merge(vec![a, b]).expect("merge");
        assert_eq!((m.goals["busy_met"].required, m.goals["busy_met"].met_seeds), (8, 8));
        assert!(m.goals_unmet.is_empty());
        let mut c = report(100, 1, 40);
        c.range = m.range;
        c.nondeterministic.push(7);
        let m = SweepReport::merge(vec![m, c]).expect("merge");
        assert_eq!(m.goals_unmet, vec!["busy_met".to_string()]);
        assert_eq!(exit_code(&[m]), 1, "the merged report keeps the nondeterministic seed");
    }
}
