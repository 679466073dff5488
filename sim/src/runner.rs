//! Run one (scenario, profile, seed[, plan]) end to end: derive or take the plan, run the
//! world, judge with the oracle, and build the report.

use store::{Profile, ProfileName};

use crate::history::History;
use crate::oracle::{assess, Expect, Violation};
use crate::plan::Plan;
use crate::report::{reproduce, trace_hash, RunReport};
use crate::world::{run, FinalState, Scenario};

/// Everything one run produced.
pub struct Outcome {
    pub plan: Plan,
    pub history: History,
    pub fin: FinalState,
    pub violations: Vec<Violation>,
    pub report: RunReport,
}

/// The plan a seed derives.
pub fn plan_for(scenario: &dyn Scenario, profile: ProfileName, seed: u64) -> Plan {
    let knobs = scenario.knobs(seed);
    let faults = scenario.faults(&knobs);
    Plan::generate(scenario.name(), profile.as_str(), seed, knobs, &faults)
}

/// Run and judge.
pub fn execute(
    scenario: &'static dyn Scenario,
    profile: ProfileName,
    seed: u64,
    plan: Option<Plan>,
    plan_file: Option<&str>,
) -> Result<Outcome, String> {
    let plan = plan.unwrap_or_else(|| plan_for(scenario, profile, seed));
    if plan.scenario != scenario.name() {
        return Err(format!("the plan is for scenario {:?}, not {:?}", plan.scenario, scenario.name()));
    }
    let out = run(scenario, Profile::of(profile), plan.clone())?;
    let (mut violations, goals) = assess(
        &out.history,
        &out.fin,
        Expect { contiguous_seqs: scenario.contiguous_seqs(), ttl_ms: Some(plan.knobs.ttl_ms) },
    );
    violations.extend(out.scenario_violations.iter().cloned());
    let report = RunReport {
        scenario: scenario.name().to_string(),
        profile: profile.as_str().to_string(),
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
        goals: goals.iter().map(|g| g.to_string()).collect(),
    };
    Ok(Outcome { plan, history: out.history, fin: out.fin, violations, report })
}
