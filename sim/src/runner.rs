//! Run one (scenario, profile, seed[, plan]) end to end: derive or take the plan, run the
//! world, judge with the oracle, and build the report.

use store::{Profile, ProfileName};

use crate::history::{FinalState, History};
use crate::oracle::{assess, Expect, Violation};
use crate::plan::Plan;
use crate::report::{reproduce, trace_hash, RunReport};
use crate::world::{run, RunOptions, Scenario};

/// Everything one run produced.
pub struct Outcome {
    pub plan: Plan,
    pub history: History,
    pub fin: FinalState,
    pub violations: Vec<Violation>,
    pub report: RunReport,
    /// Per `node * FaultPoint::ALL.len() + point.index()`: the last occurrence the run
    /// reached while faults were on (counted always by [`execute_counting`]; otherwise
    /// only when the plan had decisions).
    pub reached: Vec<u32>,
    /// Per slot as `reached`: the occurrences reached when the last decision fired.
    pub at_last_fire: Vec<u32>,
    /// Per slot as `reached`: how many of them the caller reached acting under a lease.
    pub leased: Vec<u32>,
}

/// The plan a seed derives, every decision written out.
pub fn plan_for(scenario: &dyn Scenario, profile: ProfileName, seed: u64) -> Plan {
    let mut plan = lazy_plan_for(scenario, profile, seed);
    plan.materialize();
    plan
}

/// The plan a seed derives, its decisions left to be drawn as the run reaches them.
pub fn lazy_plan_for(scenario: &dyn Scenario, profile: ProfileName, seed: u64) -> Plan {
    let knobs = scenario.knobs(seed);
    let faults = scenario.faults(&knobs);
    Plan::generate_lazy(scenario.name(), profile.as_str(), seed, knobs, &faults)
}

/// Run and judge.
pub fn execute(
    scenario: &'static dyn Scenario,
    profile: ProfileName,
    seed: u64,
    plan: Option<Plan>,
    plan_file: Option<&str>,
) -> Result<Outcome, String> {
    execute_with(scenario, profile, seed, plan, plan_file, true, &RunOptions::default())
}

/// As [`execute`], keeping a copy of the final database at `keep_db` (`run --keep-db`).
pub fn execute_keeping_db(
    scenario: &'static dyn Scenario,
    profile: ProfileName,
    seed: u64,
    plan: Option<Plan>,
    plan_file: Option<&str>,
    keep_db: Option<std::path::PathBuf>,
) -> Result<Outcome, String> {
    let options = RunOptions { keep_db, ..RunOptions::default() };
    execute_with(scenario, profile, seed, plan, plan_file, true, &options)
}

/// As [`execute`] for a sweep: a derived plan that passed is not written out (the sweep
/// keeps nothing of a passing seed but its verdict, coverage and trace hash), so its report
/// summarises the plan as derived. A failing seed's plan is always written out.
pub fn execute_for_sweep(
    scenario: &'static dyn Scenario,
    profile: ProfileName,
    seed: u64,
) -> Result<Outcome, String> {
    execute_with(scenario, profile, seed, None, None, false, &RunOptions::default())
}

/// As [`execute_for_sweep`] for `explore`: runs `plan` (derived or written out), counts every
/// (node, point, occurrence) it reaches, and writes the plan out only when it failed.
pub fn execute_counting(
    scenario: &'static dyn Scenario,
    profile: ProfileName,
    plan: Plan,
) -> Result<Outcome, String> {
    let seed = plan.seed;
    execute_with(
        scenario,
        profile,
        seed,
        Some(plan),
        None,
        false,
        &RunOptions { count_always: true, ..RunOptions::default() },
    )
}

/// As [`execute`], with `options`; `full_plan`: write out a derived plan's decisions even
/// when the run passed.
pub fn execute_with(
    scenario: &'static dyn Scenario,
    profile: ProfileName,
    seed: u64,
    plan: Option<Plan>,
    plan_file: Option<&str>,
    full_plan: bool,
    options: &RunOptions,
) -> Result<Outcome, String> {
    // A derived plan runs from its recipe (the world draws only the occurrences the run
    // reaches) and is written out afterwards when the report or a failure needs it.
    let mut plan = plan.unwrap_or_else(|| lazy_plan_for(scenario, profile, seed));
    if plan.scenario != scenario.name() {
        return Err(format!("the plan is for scenario {:?}, not {:?}", plan.scenario, scenario.name()));
    }
    let out = run(scenario, Profile::of(profile), plan.clone(), options)?;
    let assessment = assess(
        &out.history,
        &out.fin,
        Expect {
            contiguous_seqs: scenario.contiguous_seqs(),
            ttl_ms: Some(plan.knobs.ttl_ms),
            retention: scenario.retention_rule(),
            page_size: Some(crate::world::SIM_PAGE_SIZE),
        },
    );
    let mut violations = assessment.violations;
    violations.extend(out.scenario_violations.iter().cloned());
    if full_plan || !violations.is_empty() {
        plan.materialize();
    }
    let report = RunReport {
        scenario: scenario.name().to_string(),
        profile: profile.as_str().to_string(),
        store: crate::foreign::active_name(),
        seed,
        passed: violations.is_empty(),
        violations: violations.clone(),
        reproduce: reproduce(&plan, plan_file),
        plan_summary: plan.summary(),
        decisions: plan.decisions.len(),
        calls: out.history.calls.len(),
        events: out.history.events.len(),
        virtual_ms: out.end_ns / 1_000_000,
        trace_hash: format!("{:016x}", trace_hash(&out.history)),
        fault_points: out
            .history
            .points
            .iter()
            .map(|(k, v)| (k.to_string(), (v.reached, v.fired, v.crashed)))
            .collect(),
        table: out.table.clone(),
        goals: assessment.goals.iter().map(|g| g.to_string()).collect(),
        windows: assessment.windows,
        states: assessment.states,
    };
    Ok(Outcome {
        plan,
        history: out.history,
        fin: out.fin,
        violations,
        report,
        reached: out.reached,
        at_last_fire: out.at_last_fire,
        leased: out.leased,
    })
}
