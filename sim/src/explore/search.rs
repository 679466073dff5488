//! The guided search's loop, and what it shares with the exhaustive mode: running a batch
//! of plans on worker threads with results in batch order, the tally of states and
//! detections, shrinking and saving a failure, progress lines and the report.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

use store::{FaultPoint, ProfileName};

use super::corpus::{self, reached_of, Checkpoint, Entry};
use super::mutate::{aims, energies, hazard_ops, point_rarity, trim, Kind, Mutator};
use super::{ExploreFailure, ExploreOptions, ExploreReport, KindStats, BATCH};
use crate::oracle::states::universe;
use crate::plan::Plan;
use crate::runner::execute_counting;
use crate::seed::rng;
use crate::shrink::{shrink, SameProperty};
use crate::world::Scenario;

/// What one run of a batch gave back.
pub struct RunResult {
    pub plan: Plan,
    pub states: Vec<u16>,
    pub reached: Vec<(u32, FaultPoint, u32)>,
    /// Per reached (node, point), as `reached`: how many of its occurrences came under a lease.
    pub leased: Vec<u32>,
    /// Per reached (node, point): the occurrences reached when the plan's last decision
    /// fired (the triples after it are the ones past this count).
    pub before_last_fire: Vec<u32>,
    /// Failed properties, sorted, and the first violation's witness (empty: passed).
    pub properties: Vec<String>,
    pub first_property: Option<String>,
    pub witness: String,
    /// The `findings` rows (of the run's profile) its violations match.
    pub findings: Vec<String>,
    /// Only a quorum guard failed ([`crate::verdict::Violation::is_vacuity_guard`]): the
    /// plan starved the workload, and the run counts as neither a pass nor a failure.
    pub vacuous: bool,
}

/// Run one plan and read what the search needs from it.
pub fn run_one(scenario: &'static dyn Scenario, profile: ProfileName, plan: Plan) -> RunResult {
    match execute_counting(scenario, profile, plan.clone()) {
        Ok(out) => {
            let vacuous = !out.violations.is_empty()
                && out.violations.iter().all(|v| crate::verdict::Violation::is_vacuity_guard(v.property));
            let violations = if vacuous { &[][..] } else { &out.violations[..] };
            let reached = reached_of(&out.reached);
            let slot = |n: u32, p: FaultPoint| n as usize * FaultPoint::ALL.len() + p.index();
            let mut properties: Vec<String> = violations.iter().map(|v| v.property.to_string()).collect();
            properties.sort();
            properties.dedup();
            RunResult {
                states: out.report.states.clone(),
                before_last_fire: reached
                    .iter()
                    .map(|&(n, p, _)| out.at_last_fire.get(slot(n, p)).copied().unwrap_or(0))
                    .collect(),
                leased: reached
                    .iter()
                    .map(|&(n, p, _)| out.leased.get(slot(n, p)).copied().unwrap_or(0))
                    .collect(),
                reached,
                first_property: violations.first().map(|v| v.property.to_string()),
                witness: violations.first().map(|v| v.witness.clone()).unwrap_or_default(),
                findings: crate::findings::FINDINGS
                    .iter()
                    .filter(|f| f.profile == profile && f.caught_by(violations).is_some())
                    .map(|f| f.id.to_string())
                    .collect(),
                properties,
                vacuous,
                plan: out.plan,
            }
        }
        Err(e) => RunResult {
            plan,
            states: Vec::new(),
            reached: Vec::new(),
            leased: Vec::new(),
            before_last_fire: Vec::new(),
            properties: vec!["harness_error".into()],
            first_property: None,
            witness: e,
            findings: Vec::new(),
            vacuous: false,
        },
    }
}

/// Run `plans` on up to `jobs` threads; the results in the plans' order.
pub fn run_batch(
    scenario: &'static dyn Scenario,
    profile: ProfileName,
    plans: Vec<Plan>,
    jobs: usize,
) -> Vec<RunResult> {
    let n = plans.len();
    let slots: Vec<Mutex<Option<Plan>>> = plans.into_iter().map(|p| Mutex::new(Some(p))).collect();
    let results: Vec<Mutex<Option<RunResult>>> = (0..n).map(|_| Mutex::new(None)).collect();
    let next = AtomicUsize::new(0);
    std::thread::scope(|scope| {
        for _ in 0..jobs.clamp(1, n.max(1)) {
            scope.spawn(|| loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                if i >= n {
                    break;
                }
                let Some(plan) = slots[i].lock().ok().and_then(|mut s| s.take()) else { continue };
                let r = run_one(scenario, profile, plan);
                if let Ok(mut slot) = results[i].lock() {
                    *slot = Some(r);
                }
            });
        }
    });
    results.into_iter().filter_map(|m| m.into_inner().ok().flatten()).collect()
}

/// States, detections and failures over a search.
pub struct Tally {
    pub runs: u64,
    pub hits: Vec<u64>,
    pub first_run: Vec<u64>,
    pub first_detection: BTreeMap<String, u64>,
    pub first_finding: BTreeMap<String, u64>,
    pub failures: Vec<ExploreFailure>,
    pub last_new_state: Option<String>,
    /// Runs only a quorum guard failed (see [`RunResult::vacuous`]).
    pub vacuous: u64,
    /// Per candidate kind (the guided search only).
    pub kinds: BTreeMap<String, KindStats>,
}

impl Tally {
    pub fn new() -> Tally {
        let n = universe().len();
        Tally {
            runs: 0,
            hits: vec![0; n],
            first_run: vec![0; n],
            first_detection: BTreeMap::new(),
            first_finding: BTreeMap::new(),
            failures: Vec::new(),
            last_new_state: None,
            vacuous: 0,
            kinds: BTreeMap::new(),
        }
    }

    /// Count one guided run against the kind of candidate it was.
    pub fn fold_kind(&mut self, kind: Kind, new_states: u32, r: &RunResult) {
        let st = self.kinds.entry(kind.as_str().to_string()).or_default();
        st.runs += 1;
        st.new_state_runs += u64::from(new_states > 0);
        st.new_states += u64::from(new_states);
        st.failing_runs += u64::from(!r.properties.is_empty());
        for f in &r.findings {
            *st.findings.entry(f.clone()).or_default() += 1;
        }
    }

    /// Count one run (its states, and whether it was vacuous); the states no earlier run
    /// reached.
    pub fn fold_states(&mut self, states: &[u16], vacuous: bool) -> u32 {
        self.runs += 1;
        self.vacuous += u64::from(vacuous);
        let mut new = 0;
        for &s in states {
            let i = usize::from(s);
            if i >= self.hits.len() {
                continue;
            }
            if self.hits[i] == 0 {
                self.first_run[i] = self.runs;
                self.last_new_state = Some(universe()[i].clone());
                new += 1;
            }
            self.hits[i] += 1;
        }
        new
    }

    /// Record a failing run: its properties' first detections, and (for a property set not
    /// reported yet) the shrunk plan, saved, as a failure.
    pub fn fold_failure(
        &mut self,
        scenario: &'static dyn Scenario,
        opts: &ExploreOptions,
        r: &RunResult,
    ) -> Result<(), String> {
        for p in &r.properties {
            self.first_detection.entry(p.clone()).or_insert(self.runs);
        }
        for f in &r.findings {
            self.first_finding.entry(f.clone()).or_insert(self.runs);
        }
        // One report per property set, and one per `findings` row no earlier report matched
        // (under a flawed profile whose every run fails one way, a deeper window still gets
        // its own counterexample); without --keep-going only the first failure (the rest of
        // its batch still counts for detections).
        let new_row = r
            .findings
            .iter()
            .find(|id| !self.failures.iter().any(|f| f.findings.contains(id)))
            .and_then(|id| crate::findings::finding(id));
        if (self.failures.iter().any(|f| f.properties == r.properties) && new_row.is_none())
            || (!opts.keep_going && !self.failures.is_empty())
        {
            return Ok(());
        }
        let mut plan = r.plan.clone();
        plan.materialize();
        let original = plan.decisions.len();
        let same_property = r.first_property.as_ref().map(|p| SameProperty { property: p.clone(), op: None });
        // A new row shrinks against the row (its property alone may hold with no fault).
        let target: Option<&dyn crate::shrink::Target> = match (new_row, &same_property) {
            (Some(row), _) => Some(row),
            (None, Some(p)) => Some(p),
            (None, None) => None,
        };
        let (minimal, shrink_runs) = match target {
            Some(t) if opts.shrink_runs > 0 => {
                match shrink(scenario, opts.profile, plan.clone(), t, opts.shrink_runs) {
                    Ok(s) => (s.minimal, s.runs),
                    Err(_) => (plan, 0),
                }
            }
            _ => (plan, 0),
        };
        std::fs::create_dir_all(&opts.out_dir)
            .map_err(|e| format!("cannot create {}: {e}", opts.out_dir.display()))?;
        let file = opts.out_dir.join(format!(
            "fencesim-explore-{}-{}-seed{}-run{}.json",
            scenario.name(),
            opts.profile,
            opts.seed,
            self.runs
        ));
        let text = serde_json::to_string_pretty(&minimal).map_err(|e| e.to_string())?;
        std::fs::write(&file, text + "\n").map_err(|e| format!("cannot write {}: {e}", file.display()))?;
        let plan_file = file.display().to_string();
        let f = ExploreFailure {
            run: self.runs,
            seed: minimal.seed,
            properties: r.properties.clone(),
            findings: r.findings.clone(),
            witness: r.witness.clone(),
            reproduce: crate::report::reproduce(&minimal, Some(&plan_file)),
            plan_file,
            decisions: original,
            shrunk_decisions: minimal.decisions.len(),
            shrink_runs,
        };
        if opts.progress {
            eprintln!("FAIL run={} seed={} [{}]: {}", f.run, f.seed, f.properties.join(", "), f.reproduce);
            if opts.bar {
                eprintln!();
            }
        }
        self.failures.push(f);
        Ok(())
    }

    /// The report's state and detection fields.
    pub fn report(&self, scenario: &str, opts: &ExploreOptions, mode: &str, corpus: u64) -> ExploreReport {
        let names = universe();
        let mut curve = vec![0u64; self.runs.div_ceil(1000) as usize];
        let mut first = BTreeMap::new();
        let mut never = Vec::new();
        for (i, name) in names.iter().enumerate() {
            if self.hits[i] > 0 {
                first.insert(name.clone(), self.first_run[i]);
                if let Some(c) = curve.get_mut(((self.first_run[i] - 1) / 1000) as usize) {
                    *c += 1;
                }
            } else {
                never.push(name.clone());
            }
        }
        ExploreReport {
            scenario: scenario.to_string(),
            profile: opts.profile.as_str().to_string(),
            store: None,
            seed: opts.seed,
            mode: mode.to_string(),
            runs: self.runs,
            corpus,
            states_reached: first.len() as u64,
            states_universe: names.len() as u64,
            states_first_run: first,
            states_new_per_1000: curve,
            states_never_reached: never,
            first_detection: self.first_detection.clone(),
            findings_first_run: self.first_finding.clone(),
            failures: self.failures.clone(),
            vacuous_runs: self.vacuous,
            kinds: self.kinds.clone(),
            complete: None,
            plans: None,
            max_faults: None,
            stopped_by: String::new(),
            runs_per_sec: 0.0,
            wall_ms: 0,
        }
    }

    fn checkpoint(&self, scenario: &str, opts: &ExploreOptions, batches: u64, entries: u64) -> Checkpoint {
        let names = universe();
        let reached = |v: &Vec<u64>| -> BTreeMap<String, u64> {
            (0..names.len()).filter(|&i| self.hits[i] > 0).map(|i| (names[i].clone(), v[i])).collect()
        };
        Checkpoint {
            scenario: scenario.to_string(),
            profile: opts.profile.as_str().to_string(),
            seed: opts.seed,
            batches,
            runs: self.runs,
            entries,
            hits: reached(&self.hits),
            first_run: reached(&self.first_run),
            first_detection: self.first_detection.clone(),
            first_finding: self.first_finding.clone(),
            failures: self.failures.clone(),
            last_new_state: self.last_new_state.clone(),
            vacuous: self.vacuous,
            kinds: self.kinds.clone(),
        }
    }

    fn restore(cp: &Checkpoint) -> Result<Tally, String> {
        let index = corpus::state_index();
        let mut t = Tally::new();
        for (name, &n) in &cp.hits {
            let i = *index
                .get(name.as_str())
                .ok_or_else(|| format!("corpus checkpoint: unknown state {name:?}"))?;
            t.hits[usize::from(i)] = n;
        }
        for (name, &n) in &cp.first_run {
            let i = *index
                .get(name.as_str())
                .ok_or_else(|| format!("corpus checkpoint: unknown state {name:?}"))?;
            t.first_run[usize::from(i)] = n;
        }
        t.runs = cp.runs;
        t.first_detection = cp.first_detection.clone();
        t.first_finding = cp.first_finding.clone();
        t.failures = cp.failures.clone();
        t.last_new_state = cp.last_new_state.clone();
        t.vacuous = cp.vacuous;
        t.kinds = cp.kinds.clone();
        Ok(t)
    }
}

/// Progress: a line per batch on a terminal (overwritten), plain lines every 200 runs
/// otherwise.
pub struct Progress {
    started: std::time::Instant,
    last_line: u64,
    /// Runs already done when this invocation started (a resumed search).
    start_runs: u64,
    bar: bool,
    on: bool,
}

#[allow(clippy::disallowed_methods)] // runs per second and --minutes are wall-clock by definition
impl Progress {
    pub fn new(opts: &ExploreOptions) -> Progress {
        Progress {
            started: std::time::Instant::now(),
            last_line: 0,
            start_runs: 0,
            bar: opts.bar,
            on: opts.progress,
        }
    }

    /// Rates count only the runs made from here on (`runs` were done before).
    pub fn resumed_at(&mut self, runs: u64) {
        self.start_runs = runs;
        self.last_line = runs;
    }

    pub fn elapsed_s(&self) -> f64 {
        self.started.elapsed().as_secs_f64()
    }

    pub fn over(&self, minutes: Option<f64>) -> bool {
        minutes.is_some_and(|m| self.elapsed_s() >= m * 60.0)
    }

    pub fn tick(&mut self, label: &str, t: &Tally, extra: &str) {
        if !self.on {
            return;
        }
        let states = t.hits.iter().filter(|&&h| h > 0).count();
        let rate = t.runs.saturating_sub(self.start_runs) as f64 / self.elapsed_s().max(1e-9);
        let last = t.last_new_state.as_deref().unwrap_or("-");
        let line =
            format!("{label}: {} runs, {rate:.1} runs/s, {states} states{extra}, last new: {last}", t.runs);
        if self.bar {
            eprint!("\r\x1b[2K{line}");
        } else if t.runs / 200 > self.last_line / 200 {
            eprintln!("{line}");
        }
        self.last_line = t.runs;
    }

    pub fn finish(&self, report: &mut ExploreReport) {
        if self.bar && self.on {
            eprintln!();
        }
        let s = self.elapsed_s();
        report.wall_ms = (s * 1000.0) as u64;
        report.runs_per_sec = report.runs.saturating_sub(self.start_runs) as f64 / s.max(1e-9);
    }
}

/// The guided search.
pub fn explore(scenario: &'static dyn Scenario, opts: &ExploreOptions) -> Result<ExploreReport, String> {
    let profile = opts.profile.as_str();
    let (mut tally, mut entries, mut batch) = match &opts.corpus {
        Some(dir) => {
            std::fs::create_dir_all(dir)
                .map_err(|e| format!("cannot create corpus {}: {e}", dir.display()))?;
            match corpus::load(dir)? {
                Some((cp, entries)) => {
                    if cp.scenario != scenario.name() || cp.profile != profile || cp.seed != opts.seed {
                        return Err(format!(
                            "corpus {} holds a search of {} under {} with seed {}, not {} under {} with seed {}",
                            dir.display(),
                            cp.scenario,
                            cp.profile,
                            cp.seed,
                            scenario.name(),
                            profile,
                            opts.seed
                        ));
                    }
                    (Tally::restore(&cp)?, entries, cp.batches)
                }
                None => (Tally::new(), Vec::new(), 0),
            }
        }
        None => (Tally::new(), Vec::new(), 0),
    };
    let mut progress = Progress::new(opts);
    progress.resumed_at(tally.runs);
    let label = format!("explore {} {}", scenario.name(), profile);
    let mut stopped_by = "runs";
    loop {
        if tally.runs >= opts.runs {
            break;
        }
        if !opts.keep_going && !tally.failures.is_empty() {
            stopped_by = "failure";
            break;
        }
        if progress.over(opts.minutes) {
            stopped_by = "minutes";
            break;
        }
        if opts.until_finding.is_some_and(|id| tally.first_finding.contains_key(id)) {
            stopped_by = "finding";
            break;
        }
        let size = (opts.runs - tally.runs).min(BATCH as u64) as usize;
        let mut r = rng(opts.seed, "explore-batch", batch);
        let (candidates, kinds): (Vec<Plan>, Vec<Kind>) = {
            let faults = scenario.faults(&scenario.knobs(opts.seed));
            let m = Mutator {
                scenario,
                profile,
                corpus: &entries,
                energy: energies(&entries, &tally.hits),
                aims: aims(&entries, &tally.hits, &faults),
                point_rarity: point_rarity(&entries),
                hazard_ops: hazard_ops(&tally.hits),
            };
            // The first batch knows nothing yet: fresh seeds, probe sets and focused plans
            // over all of the scenario's points, in turn.
            (0..size)
                .map(|i| match (batch, i % 3) {
                    (0, 0) => (m.fresh(&mut r), Kind::Fresh),
                    (0, 1) => (m.probe_set(&mut r), Kind::ProbeSet),
                    (0, _) => m.focused(&mut r),
                    _ => m.candidate(&mut r),
                })
                .unzip()
        };
        let results = run_batch(scenario, opts.profile, candidates, opts.jobs);
        for (res, kind) in results.into_iter().zip(kinds) {
            let new = tally.fold_states(&res.states, res.vacuous);
            tally.fold_kind(kind, new, &res);
            if !res.properties.is_empty() {
                tally.fold_failure(scenario, opts, &res)?;
            }
            // A failing run that reached new states joins too: under a flawed profile most
            // runs fail, and the search must still build on them (with --keep-going).
            if new > 0 {
                let mut plan = res.plan;
                plan.materialize();
                trim(&mut plan, &res.reached);
                let e = Entry {
                    run: tally.runs,
                    new_states: new,
                    plan,
                    states: res.states,
                    reached: res.reached,
                    leased: res.leased,
                };
                if let Some(dir) = &opts.corpus {
                    corpus::save_entry(dir, entries.len() as u64 + 1, &e)?;
                }
                entries.push(e);
            }
        }
        batch += 1;
        if let Some(dir) = &opts.corpus {
            let cp = tally.checkpoint(scenario.name(), opts, batch, entries.len() as u64);
            let text = serde_json::to_string_pretty(&cp).map_err(|e| e.to_string())?;
            corpus::write_atomic(&corpus::checkpoint_path(dir), &(text + "\n"))?;
        }
        progress.tick(&label, &tally, &format!(", {} in corpus", entries.len()));
    }
    let mut report = tally.report(scenario.name(), opts, "explore", entries.len() as u64);
    report.stopped_by = stopped_by.to_string();
    progress.finish(&mut report);
    Ok(report)
}
