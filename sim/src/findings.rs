//! The findings table: every historical flaw of rulvar's store (F1-F4 of the fenced run
//! state RFC, with F3's three sub-cases, the boot race B and the pre-tombstone epoch T) as
//! DATA: the targeted scenario, the flawed profile, and which generic violations count as
//! catching it (property, and the operation of the offending call when it matters).
//!
//! `fencesim findings` searches seeds from 0 for the first run of each row whose
//! violations match, runs the generic scenario (`soak`, or `queue` for engine rows) the
//! same way for comparison, sweeps every catalog scenario under `current` (which must be
//! clean), and checks that each targeted scenario's key fault points fired; the report
//! also holds the guided search of `current` from the generic scenarios
//! (`explore::current_pass` fills it: `explore` sits above this module), which must find
//! nothing either (it draws the process pauses and aimed faults a seed sweep never does).
//! Nothing here knows how a flaw manifests beyond the row's matcher; the properties that
//! catch it are the oracle's generic ones.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::Mutex;

use serde::Serialize;
use store::ProfileName;

use crate::oracle::Violation;
use crate::runner::execute;
use crate::sweep::{self, SeedRange, SweepOptions, SweepReport};
use crate::world::Scenario;

/// One violation pattern: a property, and optionally the offending call's operation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Match {
    pub property: &'static str,
    pub op: Option<&'static str>,
}

impl Match {
    pub fn matches(&self, v: &Violation) -> bool {
        v.property == self.property && (self.op.is_none() || self.op == v.op)
    }

    fn label(&self) -> String {
        match self.op {
            Some(op) => format!("{}@{op}", self.property),
            None => self.property.to_string(),
        }
    }
}

const fn m(property: &'static str, op: &'static str) -> Match {
    Match { property, op: Some(op) }
}

const fn any_op(property: &'static str) -> Match {
    Match { property, op: None }
}

/// One row of the table.
#[derive(Clone, Copy, Debug)]
pub struct Finding {
    pub id: &'static str,
    /// One line: what the flaw does.
    pub title: &'static str,
    /// The targeted scenario that must catch it.
    pub scenario: &'static str,
    pub profile: ProfileName,
    /// Every group must be matched by at least one violation of the same run.
    pub requires: &'static [&'static [Match]],
    /// The generic scenario run for comparison (`soak` for store rows, `queue` for engine
    /// rows).
    pub generic: &'static str,
}

impl Finding {
    /// `property@op` of the first violation matching each group, when every group matches.
    pub fn caught_by(&self, violations: &[Violation]) -> Option<Vec<String>> {
        self.requires
            .iter()
            .map(|group| {
                violations.iter().find(|v| group.iter().any(|p| p.matches(v))).map(|v| match v.op {
                    Some(op) => format!("{}@{op}", v.property),
                    None => v.property.to_string(),
                })
            })
            .collect()
    }

    /// What counts as catching it, in words.
    pub fn matcher(&self) -> String {
        self.requires
            .iter()
            .map(|g| g.iter().map(|p| p.label()).collect::<Vec<_>>().join(" | "))
            .collect::<Vec<_>>()
            .join(" AND ")
    }
}

/// The table. Engine rows (F1, F2, F4) are caught by the engine-level properties: under the
/// flawed profiles those writes carry no lease (F1, F4) or the store ignores it (F2).
pub const FINDINGS: &[Finding] = &[
    Finding {
        id: "F1",
        title: "stale terminal put_meta regresses the successor's meta (segments, or a stranded run)",
        scenario: "f1-stale-settle",
        profile: ProfileName::V1_44_1,
        requires: &[&[m("segments_never_regress", "put_meta"), any_op("no_stranded_run")]],
        generic: "queue",
    },
    Finding {
        id: "F2",
        title: "stale checkpoint put overwrites the successor's later turn; a boot repays turns",
        scenario: "f2-stale-checkpoint",
        profile: ProfileName::V1_45_0,
        requires: &[&[any_op("checkpoint_never_regresses")]],
        generic: "queue",
    },
    Finding {
        id: "F3a",
        title: "stale append visible after a takeover",
        scenario: "f3-check-then-mutate",
        profile: ProfileName::V1_44_0,
        requires: &[&[m("no_stale_accept", "append"), m("journal_equals_serial_history", "append")]],
        generic: "soak",
    },
    Finding {
        id: "F3b",
        title: "stale release deletes the successor's row; a third owner acquires",
        scenario: "f3-check-then-mutate",
        profile: ProfileName::V1_44_0,
        requires: &[
            &[m("no_stale_accept", "release"), m("expiry_set_only_by_holder", "release")],
            &[m("lease_exclusive", "acquire")],
        ],
        generic: "soak",
    },
    Finding {
        id: "F3c",
        title: "stale renew rewrites the successor's expiry",
        scenario: "f3-check-then-mutate",
        profile: ProfileName::V1_44_0,
        requires: &[&[m("expiry_set_only_by_holder", "renew"), m("no_stale_accept", "renew")]],
        generic: "soak",
    },
    Finding {
        id: "F4",
        title: "stale retention delete erases the live run",
        scenario: "f4-stale-retention",
        profile: ProfileName::V1_44_1,
        requires: &[&[m("no_live_run_deleted", "delete")]],
        generic: "queue",
    },
    Finding {
        id: "B",
        title: "concurrent boots over one fresh file die with Busy",
        scenario: "boot-race",
        profile: ProfileName::BootRace,
        requires: &[&[m("every_boot_succeeds", "boot")]],
        generic: "soak",
    },
    Finding {
        id: "T",
        title: "recreated run repeats an epoch; a zombie lease writes into it",
        scenario: "tombstone",
        profile: ProfileName::PreTombstone,
        requires: &[&[m("epochs_granted_once_and_increasing", "acquire")], &[any_op("no_stale_accept")]],
        generic: "soak",
    },
];

/// A row by id (case-insensitive).
pub fn finding(id: &str) -> Option<&'static Finding> {
    FINDINGS.iter().find(|f| f.id.eq_ignore_ascii_case(id))
}

/// The result of searching seeds for the first match.
#[derive(Clone, Debug, Default)]
pub struct Search {
    pub first: Option<u64>,
    /// The matched patterns of the first matching seed.
    pub caught_by: Vec<String>,
    pub wall_ms: u64,
    /// Harness errors met on the way (seed, message).
    pub errors: Vec<(u64, String)>,
}

/// The smallest seed in `range` whose run satisfies `row`'s matcher, searched on `jobs`
/// threads. The answer does not depend on `jobs`: seeds are handed out in increasing order
/// and every seed below a match is run.
#[allow(clippy::disallowed_methods)] // wall ms is a report figure, never part of a verdict
pub fn search(
    scenario: &'static dyn Scenario,
    profile: ProfileName,
    row: &Finding,
    range: SeedRange,
    jobs: usize,
) -> Search {
    let started = std::time::Instant::now();
    let next = AtomicUsize::new(0);
    let best = AtomicU64::new(u64::MAX);
    let found: Mutex<BTreeMap<u64, Vec<String>>> = Mutex::new(BTreeMap::new());
    let errors: Mutex<Vec<(u64, String)>> = Mutex::new(Vec::new());
    let total = (range.end - range.start) as usize;
    std::thread::scope(|scope| {
        for _ in 0..jobs.clamp(1, total.max(1)) {
            scope.spawn(|| loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                if i >= total || crate::interrupt::requested() {
                    break;
                }
                let seed = range.start + i as u64;
                if seed > best.load(Ordering::Relaxed) {
                    break;
                }
                match execute(scenario, profile, seed, None, None) {
                    Ok(out) => {
                        if let Some(by) = row.caught_by(&out.violations) {
                            best.fetch_min(seed, Ordering::Relaxed);
                            if let Ok(mut f) = found.lock() {
                                f.insert(seed, by);
                            }
                        }
                    }
                    Err(e) => {
                        if let Ok(mut v) = errors.lock() {
                            v.push((seed, e));
                        }
                    }
                }
            });
        }
    });
    let found = found.into_inner().unwrap_or_default();
    let mut errors = errors.into_inner().unwrap_or_default();
    errors.sort();
    let first = found.iter().next().map(|(s, by)| (*s, by.clone()));
    Search {
        first: first.as_ref().map(|(s, _)| *s),
        caught_by: first.map(|(_, by)| by).unwrap_or_default(),
        wall_ms: started.elapsed().as_millis() as u64,
        errors,
    }
}

/// One row of the report.
#[derive(Clone, Debug, Serialize)]
pub struct FindingRow {
    pub id: String,
    pub scenario: String,
    pub profile: String,
    pub caught: bool,
    pub first_failing_seed: Option<u64>,
    pub seeds_needed: Option<u64>,
    /// The matched pattern(s): `property@op`, joined with ` + ` when the row needs more
    /// than one.
    pub property: Option<String>,
    pub wall_ms: u64,
    /// Seeds the generic scenario needed under the same profile, or `not within N` (or why
    /// it could not run).
    pub generic_seeds_needed: String,
    /// Why the row is not caught, when it is not.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// Key fault points of the targeted scenario that never fired in its `current` sweep.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub key_points_never_fired: Vec<String>,
    /// `fencesim explore` from the generic scenario, when asked for (`--explore-seeds`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub explore: Option<ExploreVersus>,
}

/// How fast `fencesim explore` finds a row from its generic scenario, beside the seed sweep:
/// the run of first detection for each search seed (`None`: not within the budget).
#[derive(Clone, Debug, Serialize)]
pub struct ExploreVersus {
    pub scenario: String,
    /// The run budget of each search.
    pub runs: u64,
    /// Per search seed `0..`, the run at which the row's matcher first matched.
    pub first_run: Vec<Option<u64>>,
    /// The seed sweep's counterpart, one sample per search: sweep `k` runs the seeds
    /// `k * SWEEP_STRIDE ..` (the same budget), and this is the run (1-based) at which the
    /// row's matcher first matched. One sweep from seed 0 is a single draw of a geometric
    /// variable; the median over as many disjoint ranges as there are searches is the fair
    /// comparison.
    #[serde(default)]
    pub sweep_first_run: Vec<Option<u64>>,
}

/// How far apart the disjoint seed ranges of [`ExploreVersus::sweep_first_run`] start.
pub const SWEEP_STRIDE: u64 = 100_000;

/// The median run of first detection, counting a miss as later than any budget (`None`
/// when half or more missed; the lower middle of an even count).
pub fn median_first(first_run: &[Option<u64>]) -> Option<u64> {
    let mut runs: Vec<u64> = first_run.iter().map(|r| r.unwrap_or(u64::MAX)).collect();
    runs.sort_unstable();
    runs.get(runs.len().saturating_sub(1) / 2).copied().filter(|&r| r != u64::MAX)
}

impl ExploreVersus {
    /// The explorer's median (see [`median_first`]).
    pub fn median(&self) -> Option<u64> {
        median_first(&self.first_run)
    }

    /// The seed sweeps' median over their disjoint ranges.
    pub fn sweep_median(&self) -> Option<u64> {
        median_first(&self.sweep_first_run)
    }
}

/// The `current` sweep over the catalog.
#[derive(Clone, Debug, Serialize)]
pub struct CurrentClean {
    pub seeds: u64,
    /// Failing seeds over every scenario.
    pub failures: u64,
    pub scenarios: Vec<ScenarioClean>,
    /// The guided search of `current` from the generic scenarios (`--explore-current`).
    #[serde(default)]
    pub explore: Vec<ExploreClean>,
    /// Why the guided search did not run, when it was asked for and could not.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub explore_skipped: Option<String>,
}

/// A failure of that search, as `fencesim explore` reports it (the fields a reader acts on).
#[derive(Clone, Debug, Serialize)]
pub struct CurrentExploreFailure {
    /// The run (1-based) that found it.
    pub run: u64,
    pub seed: u64,
    pub properties: Vec<String>,
    pub witness: String,
    /// `fencesim run --scenario S --profile current --seed N --plan FILE` (the shrunk plan).
    pub reproduce: String,
    pub plan_file: String,
}

/// `fencesim explore` of a generic scenario under `current` (one search seed, a fixed run
/// budget), beside its seed sweep: it draws what a sweep never does (process pauses timed
/// by a takeover, faults aimed at the states no run has reached yet), so a window the
/// sweep's plans miss can still fail the verdict. Deterministic like the sweep: the search
/// depends on (scenario, search seed, budget) only, never on `--jobs`.
#[derive(Clone, Debug, Serialize)]
pub struct ExploreClean {
    pub scenario: String,
    /// The search seed.
    pub seed: u64,
    pub runs: u64,
    /// Distinct abstract states the search reached, and those the same scenario's seed
    /// sweep above reached.
    pub states_reached: u64,
    pub sweep_states_reached: u64,
    /// Shrunk, saved and reproducible as `fencesim explore` reports them (at most one: the
    /// search stops after the batch of its first failure).
    pub failures: Vec<CurrentExploreFailure>,
    pub wall_ms: u64,
}

#[derive(Clone, Debug, Serialize)]
pub struct ScenarioClean {
    pub scenario: String,
    pub seeds: u64,
    pub failures: u64,
    pub failing_seeds: Vec<u64>,
    pub key_points: Vec<KeyPoint>,
    pub wall_ms: u64,
    /// Seeds replayed to check determinism (every 25th), and those whose replay differed.
    pub determinism_checked: u64,
    pub nondeterministic: Vec<u64>,
    /// The scenario's declared coverage goals (seeds met / required) and those that fell short.
    pub goals: BTreeMap<String, crate::sweep::GoalCoverage>,
    pub goals_unmet: Vec<String>,
    /// Distinct abstract states the sweep reached.
    pub states_reached: u64,
}

/// Every `DETERMINISM_EVERY`-th seed of a `current` sweep runs twice.
pub const DETERMINISM_EVERY: u64 = 25;

#[derive(Clone, Debug, Serialize)]
pub struct KeyPoint {
    pub point: String,
    pub fired: u64,
    pub fired_runs: u64,
}

/// The whole report.
#[derive(Clone, Debug, Serialize)]
pub struct FindingsReport {
    /// The foreign store the `current` sweeps ran over (`--store`); absent for the Rust store.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub store: Option<crate::foreign::StoreName>,
    /// The foreign store the rows were searched over (`--flawed-store`), when one was given.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub flawed_store: Option<crate::foreign::StoreName>,
    pub findings: Vec<FindingRow>,
    pub current_clean: CurrentClean,
}

impl FindingsReport {
    /// Every finding caught, `current` clean and deterministic, every key point fired, every
    /// declared coverage goal met.
    pub fn ok(&self) -> bool {
        self.findings.iter().all(|r| r.caught && r.key_points_never_fired.is_empty())
            && self.current_clean.failures == 0
            && self.current_clean.scenarios.iter().all(|s| {
                s.key_points.iter().all(|k| k.fired > 0)
                    && s.goals_unmet.is_empty()
                    && s.nondeterministic.is_empty()
            })
            && self.current_clean.explore.iter().all(|e| e.failures.is_empty())
    }

    /// The human table (fixed columns), then the `current` sweep.
    pub fn table(&self) -> String {
        let mut s = String::new();
        if let Some(store) = &self.store {
            let _ = writeln!(s, "store (current sweeps): {}", store.describe());
        }
        if let Some(store) = &self.flawed_store {
            let _ = writeln!(s, "store (rows): {}", store.describe());
        }
        let _ = writeln!(
            s,
            "{:<4} {:<22} {:<14} {:<6} {:>6} {:>6} {:>8}  {:<16} property",
            "id", "scenario", "profile", "caught", "seed", "needed", "wall_ms", "generic_needed"
        );
        for r in &self.findings {
            let opt = |x: Option<u64>| x.map_or("-".to_string(), |v| v.to_string());
            let last = match (&r.property, &r.reason) {
                (Some(p), _) => p.clone(),
                (None, Some(why)) => why.clone(),
                (None, None) => "-".into(),
            };
            let _ = writeln!(
                s,
                "{:<4} {:<22} {:<14} {:<6} {:>6} {:>6} {:>8}  {:<16} {}",
                r.id,
                r.scenario,
                r.profile,
                if r.caught { "yes" } else { "NO" },
                opt(r.first_failing_seed),
                opt(r.seeds_needed),
                r.wall_ms,
                r.generic_seeds_needed,
                last
            );
            if !r.key_points_never_fired.is_empty() {
                let _ =
                    writeln!(s, "     key fault points never fired: {}", r.key_points_never_fired.join(", "));
            }
        }
        if self.findings.iter().any(|r| r.explore.is_some()) {
            let _ = writeln!(
                s,
                "explore from the generic scenario: run of first detection per search seed, beside seed sweeps of disjoint ranges (seeds k*{SWEEP_STRIDE}..)"
            );
            let list = |v: &[Option<u64>]| -> String {
                v.iter().map(|f| f.map_or("-".to_string(), |v| v.to_string())).collect::<Vec<_>>().join(" ")
            };
            for r in &self.findings {
                let Some(x) = &r.explore else { continue };
                let med = |m: Option<u64>| m.map_or(format!("> {}", x.runs), |m| m.to_string());
                let _ = writeln!(
                    s,
                    "  {:<4} {:<10} {:<14} explore {:<28} median {:<7} sweeps {:<28} median {}",
                    r.id,
                    x.scenario,
                    r.profile,
                    list(&x.first_run),
                    med(x.median()),
                    list(&x.sweep_first_run),
                    med(x.sweep_median())
                );
            }
        }
        let c = &self.current_clean;
        let _ = writeln!(
            s,
            "current: {} scenarios x {} seeds, {} failing seeds{}",
            c.scenarios.len(),
            c.seeds,
            c.failures,
            if c.failures == 0 { " (clean)" } else { "" }
        );
        for sc in &c.scenarios {
            let keys = if sc.key_points.is_empty() {
                String::new()
            } else {
                format!(
                    "; key points fired in {}",
                    sc.key_points
                        .iter()
                        .map(|k| format!("{} {}/{} runs", k.point, k.fired_runs, sc.seeds))
                        .collect::<Vec<_>>()
                        .join(", ")
                )
            };
            let fails = if sc.failing_seeds.is_empty() {
                String::new()
            } else {
                format!(
                    " (seeds {})",
                    sc.failing_seeds.iter().take(10).map(|x| x.to_string()).collect::<Vec<_>>().join(", ")
                )
            };
            let _ = writeln!(
                s,
                "  {:<22} {} failing{} in {}ms{}",
                sc.scenario, sc.failures, fails, sc.wall_ms, keys
            );
            let goals: Vec<String> =
                sc.goals.iter().map(|(g, c)| format!("{g} {}/{}", c.met_seeds, c.required)).collect();
            if !goals.is_empty() {
                let _ = writeln!(s, "  {:<22} goals met/required: {}", "", goals.join(", "));
            }
            if !sc.goals_unmet.is_empty() {
                let _ = writeln!(s, "  {:<22} COVERAGE SHORTFALL: {}", "", sc.goals_unmet.join(", "));
            }
            if !sc.nondeterministic.is_empty() {
                let _ = writeln!(
                    s,
                    "  {:<22} NONDETERMINISTIC seeds (of {} replayed): {:?}",
                    "", sc.determinism_checked, sc.nondeterministic
                );
            }
        }
        if let Some(why) = &c.explore_skipped {
            let _ = writeln!(s, "explore (current): skipped: {why}");
        }
        if let Some(first) = c.explore.first() {
            let _ = writeln!(
                s,
                "explore (current, search seed {}): {} generic scenario(s) x {} runs, {} failing{}",
                first.seed,
                c.explore.len(),
                first.runs,
                c.explore.iter().map(|e| e.failures.len()).sum::<usize>(),
                if c.explore.iter().all(|e| e.failures.is_empty()) { " (clean)" } else { "" }
            );
        }
        for e in &c.explore {
            let _ = writeln!(
                s,
                "  {:<22} {} failing in {}ms; {} abstract states (its sweep: {})",
                e.scenario,
                e.failures.len(),
                e.wall_ms,
                e.states_reached,
                e.sweep_states_reached
            );
            for f in &e.failures {
                let _ = writeln!(
                    s,
                    "  {:<22} FAIL run={} [{}]: {}",
                    "",
                    f.run,
                    f.properties.join(", "),
                    f.reproduce
                );
            }
        }
        let _ = writeln!(s, "verdict: {}", if self.ok() { "PASS" } else { "FAIL" });
        s
    }
}

/// How to run the table.
#[derive(Clone, Debug)]
pub struct FindingsOptions {
    /// Seeds per search and per `current` sweep (`0..seeds`).
    pub seeds: u64,
    pub jobs: usize,
    /// Only these rows (ids); empty = all.
    pub rows: Vec<String>,
    /// Progress lines on stderr.
    pub progress: bool,
    /// A progress bar in the `current` sweeps.
    pub bar: bool,
}

/// The row scenarios' generic counterparts (`soak`, `queue`): the ones the guided search of
/// `current` starts from.
pub fn generic_scenarios() -> Vec<&'static str> {
    let mut v: Vec<&'static str> = Vec::new();
    for f in FINDINGS {
        if !v.contains(&f.generic) {
            v.push(f.generic);
        }
    }
    v
}

/// Run the whole table.
pub fn run(catalog: &[&'static dyn Scenario], opts: &FindingsOptions) -> Result<FindingsReport, String> {
    for id in &opts.rows {
        if finding(id).is_none() {
            return Err(format!(
                "unknown finding {id:?}; known findings: {}",
                FINDINGS.iter().map(|f| f.id).collect::<Vec<_>>().join(", ")
            ));
        }
    }
    if opts.seeds == 0 {
        return Err("--seeds must be at least 1".into());
    }
    let range = SeedRange { start: 0, end: opts.seeds };
    let find = |name: &str| catalog.iter().copied().find(|s| s.name() == name);
    let rows: Vec<&Finding> = FINDINGS
        .iter()
        .filter(|f| opts.rows.is_empty() || opts.rows.iter().any(|r| r.eq_ignore_ascii_case(f.id)))
        .collect();

    // `current` first: its coverage feeds the key-point check of each row. Every catalog
    // scenario, or with a row filter the filtered rows' scenarios.
    let swept: Vec<&'static dyn Scenario> = catalog
        .iter()
        .copied()
        .filter(|s| opts.rows.is_empty() || rows.iter().any(|r| r.scenario == s.name()))
        .collect();
    let mut clean = Vec::new();
    let mut sweeps: BTreeMap<&str, SweepReport> = BTreeMap::new();
    for s in &swept {
        if opts.progress {
            eprintln!("current: sweeping {} over seeds 0..{}", s.name(), opts.seeds);
        }
        let sw = sweep::run(
            *s,
            &SweepOptions {
                profile: ProfileName::Current,
                range,
                shard: None,
                jobs: opts.jobs,
                fail_fast: false,
                determinism_every: DETERMINISM_EVERY,
                progress: opts.bar,
            },
        );
        let key_points = s
            .key_points()
            .iter()
            .map(|p| {
                let c = sw.fault_points_hit.get(p.name()).cloned().unwrap_or_default();
                KeyPoint { point: p.name().to_string(), fired: c.fired, fired_runs: c.fired_runs }
            })
            .collect();
        clean.push(ScenarioClean {
            scenario: s.name().to_string(),
            seeds: sw.seeds_run,
            failures: sw.failures.len() as u64,
            failing_seeds: sw.failures.iter().map(|f| f.seed).collect(),
            key_points,
            wall_ms: sw.wall_ms,
            determinism_checked: sw.seeds_run.div_ceil(DETERMINISM_EVERY),
            nondeterministic: sw.nondeterministic.clone(),
            goals: sw.goals.clone(),
            goals_unmet: sw.goals_unmet.clone(),
            states_reached: sw.states_reached,
        });
        sweeps.insert(s.name(), sw);
    }

    // A foreign store's flaw is in its command, not in the profile: the rows search the
    // flawed store (`--flawed-store`), the clean sweeps above ran the correct one.
    let store = crate::foreign::active_name();
    crate::foreign::switch_to_flawed();
    let mut out = Vec::new();
    for row in rows {
        let mut r = FindingRow {
            id: row.id.to_string(),
            scenario: row.scenario.to_string(),
            profile: row.profile.as_str().to_string(),
            caught: false,
            first_failing_seed: None,
            seeds_needed: None,
            property: None,
            wall_ms: 0,
            generic_seeds_needed: String::new(),
            reason: None,
            key_points_never_fired: Vec::new(),
            explore: None,
        };
        match find(row.scenario) {
            None => {
                r.reason = Some(format!("scenario {:?} is not in the catalog", row.scenario));
            }
            Some(s) => {
                if opts.progress {
                    eprintln!(
                        "{}: searching {} under {} for {}",
                        row.id,
                        s.name(),
                        row.profile,
                        row.matcher()
                    );
                }
                let found = search(s, row.profile, row, range, opts.jobs);
                for (seed, e) in &found.errors {
                    eprintln!("{}: harness error at seed {seed}: {e}", row.id);
                }
                r.wall_ms = found.wall_ms;
                r.first_failing_seed = found.first;
                r.seeds_needed = found.first.map(|x| x - range.start + 1);
                r.caught = found.first.is_some();
                if r.caught {
                    r.property = Some(found.caught_by.join(" + "));
                } else {
                    r.reason = Some(format!("no seed in 0..{} matched {}", opts.seeds, row.matcher()));
                }
                if let Some(sw) = sweeps.get(s.name()) {
                    r.key_points_never_fired = s
                        .key_points()
                        .iter()
                        .filter(|p| sw.fault_points_hit.get(p.name()).is_none_or(|c| c.fired == 0))
                        .map(|p| p.name().to_string())
                        .collect();
                }
            }
        }
        r.generic_seeds_needed = match find(row.generic) {
            None => format!("no {} scenario", row.generic),
            Some(g) => {
                if opts.progress {
                    eprintln!("{}: generic {} under {}", row.id, g.name(), row.profile);
                }
                let found = search(g, row.profile, row, range, opts.jobs);
                match found.first {
                    Some(x) => format!("{} ({})", x - range.start + 1, g.name()),
                    None => format!("not within {}", opts.seeds),
                }
            }
        };
        out.push(r);
    }
    let failures = clean.iter().map(|c| c.failures).sum();
    let rows_store = crate::foreign::active_name();
    Ok(FindingsReport {
        flawed_store: rows_store.filter(|r| Some(r) != store.as_ref()),
        store,
        findings: out,
        current_clean: CurrentClean {
            seeds: opts.seeds,
            failures,
            scenarios: clean,
            explore: Vec::new(),
            explore_skipped: None,
        },
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::history::OpKind;

    /// A misspelled matcher would show up only as "not caught": every row's patterns must
    /// name a property of the generic oracle (never a scenario's own check) and a store
    /// operation that exists.
    #[test]
    fn every_matcher_names_a_generic_property_and_a_real_operation() {
        let properties: Vec<&str> = crate::oracle::all_properties().map(|p| p.name).collect();
        let ops: Vec<&str> = OpKind::ALL.iter().map(|o| o.as_str()).collect();
        let mut checked = 0;
        for row in FINDINGS {
            assert!(!row.requires.is_empty(), "finding {} has no matcher", row.id);
            for group in row.requires {
                assert!(!group.is_empty(), "finding {} has an empty matcher group", row.id);
                for m in *group {
                    assert!(
                        properties.contains(&m.property),
                        "finding {} matches {:?}, which is not a property of the oracle",
                        row.id,
                        m.property
                    );
                    if let Some(op) = m.op {
                        assert!(
                            ops.contains(&op),
                            "finding {} matches operation {op:?}, which does not exist",
                            row.id
                        );
                    }
                    checked += 1;
                }
            }
        }
        assert!(checked >= FINDINGS.len());
    }

    #[test]
    fn the_explore_median_counts_a_miss_as_later_than_any_run() {
        let x = |first_run: Vec<Option<u64>>| ExploreVersus {
            scenario: "soak".into(),
            runs: 100,
            first_run,
            sweep_first_run: vec![None, Some(40), Some(2)],
        };
        assert_eq!(x(Vec::new()).sweep_median(), Some(40));
        assert_eq!(x(vec![Some(7), Some(37), Some(1)]).median(), Some(7));
        assert_eq!(x(vec![Some(89), Some(798), None, Some(750), Some(1310)]).median(), Some(798));
        assert_eq!(x(vec![Some(3), None, None]).median(), None, "two of three missed");
        assert_eq!(x(vec![Some(3), None]).median(), Some(3), "the lower middle of an even count");
        assert_eq!(x(Vec::new()).median(), None);
    }

    #[test]
    fn property_names_are_unique() {
        let mut names: Vec<&str> = crate::oracle::all_properties().map(|p| p.name).collect();
        let n = names.len();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), n, "two properties share a name");
    }
}
