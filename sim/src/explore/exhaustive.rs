//! Bounded-exhaustive mode (`fencesim explore --exhaustive --max-faults K`): every plan of
//! at most K faults on the scenario's small configuration (`Scenario::small_knobs`), over
//! the (node, point, occurrence) triples the runs actually reach.
//!
//! The enumeration is breadth-first over sets of decisions: the faultless plan first; then
//! for each plan of fewer than K faults that passed, one more fault at every triple its run
//! reached with faults on (at the scenario's fault points), with every action of a small
//! fixed set (a 10 ms stall, a stall of 1.5 ttl, a stall to the lease expiry instant at a
//! `before*` or `after_check` point, a crash with a restart one ttl later where the scenario
//! allows crashes), at the triples reached AFTER the plan's last fault fired. Plans are
//! deduplicated as sets of decisions. Sound: in a plan S + {b} whose faults all fire, b
//! firing last, the run is the run of S up to the instant b's triple is reached, which is
//! after S's last fault fired, so S's run lists it; a fault whose triple is never reached
//! leaves the run of the smaller plan, enumerated already. So when the queue empties within
//! the budget (`complete`), no plan of at most K faults of these actions fails in this
//! configuration (for this seed's schedule and workload); otherwise the first failure is
//! shrunk and saved as the counterexample. With `--keep-going` failing plans are extended
//! too, the enumeration runs to its end, and the first counterexample of each property set
//! is reported (with the `findings` rows it matches): under a flawed profile whose faultless
//! run already fails, the deeper windows (F3 under `v1_44_0`) still get their own.

use std::collections::{BTreeSet, VecDeque};

use super::mutate::actions_at;
use super::search::{run_batch, Progress, Tally};
use super::{ExploreOptions, ExploreReport, BATCH};
use crate::plan::{Decision, Plan};
use crate::world::Scenario;

/// The most plans the enumeration holds queued (about 1 GB).
pub const MAX_QUEUED: usize = 4_000_000;

/// Enumerate; `Err` on bad input (no small configuration).
pub fn exhaustive(
    scenario: &'static dyn Scenario,
    opts: &ExploreOptions,
    max_faults: u32,
) -> Result<ExploreReport, String> {
    let knobs = scenario.small_knobs().ok_or_else(|| {
        format!("scenario {} has no small configuration, so --exhaustive cannot run it", scenario.name())
    })?;
    let faults = scenario.faults(&knobs);
    let mut base = Plan::generate_lazy(scenario.name(), opts.profile.as_str(), opts.seed, knobs, &faults);
    base.recipe = None;
    base.decisions.clear();
    let ttl = base.knobs.ttl_ms;

    let mut visited: BTreeSet<Vec<Decision>> = BTreeSet::new();
    let mut queue: VecDeque<Vec<Decision>> = VecDeque::new();
    visited.insert(Vec::new());
    queue.push_back(Vec::new());
    let mut tally = Tally::new();
    let mut progress = Progress::new(opts);
    let label = format!("exhaustive {} {} (at most {max_faults} faults)", scenario.name(), opts.profile);
    let mut stopped_by = "complete";
    while !queue.is_empty() {
        if tally.runs >= opts.runs {
            stopped_by = "runs";
            break;
        }
        // Each queued plan is held whole: past this many the enumeration is too large for
        // memory (a profile whose every run fails, extended with --keep-going, queues tens of
        // millions), and it stops as not complete rather than exhaust the machine.
        if queue.len() > MAX_QUEUED {
            stopped_by = "queue";
            break;
        }
        if progress.over(opts.minutes) {
            stopped_by = "minutes";
            break;
        }
        let size = queue.len().min(BATCH).min((opts.runs - tally.runs) as usize);
        let sets: Vec<Vec<Decision>> = queue.drain(..size).collect();
        let plans = sets.iter().map(|ds| Plan { decisions: ds.clone(), ..base.clone() }).collect();
        let results = run_batch(scenario, opts.profile, plans, opts.jobs);
        for (set, res) in sets.iter().zip(results) {
            tally.fold_states(&res.states);
            if !res.properties.is_empty() {
                tally.fold_failure(scenario, opts, &res)?;
                // Without --keep-going the search stops after this batch; with it, a failing
                // plan is extended like any other, so every plan of at most K faults runs
                // and each property set's first counterexample is reported.
                if !opts.keep_going {
                    continue;
                }
            }
            if set.len() as u32 >= max_faults {
                continue;
            }
            // Only the triples reached after the plan's last fault fired: a set whose faults
            // all fire is enumerated once, from the subset without its last-firing fault.
            for (&(node, point, count), &before) in res.reached.iter().zip(&res.before_last_fire) {
                if !faults.points.contains(&point) {
                    continue;
                }
                for occurrence in before + 1..=count {
                    if set
                        .iter()
                        .any(|d| d.node == node && d.occurrence == occurrence && d.point == point.name())
                    {
                        continue;
                    }
                    for action in actions_at(point, &faults, ttl) {
                        let mut child = set.clone();
                        child.push(Decision { node, point: point.name().to_string(), occurrence, action });
                        child.sort();
                        if visited.insert(child.clone()) {
                            queue.push_back(child);
                        }
                    }
                }
            }
        }
        progress.tick(&label, &tally, &format!(", {} plans queued", queue.len()));
        if !opts.keep_going && !tally.failures.is_empty() {
            stopped_by = "failure";
            break;
        }
    }
    // `complete`: every plan of at most K faults ran. A certificate when none failed.
    let complete = queue.is_empty() && stopped_by == "complete";
    let mut report = tally.report(scenario.name(), opts, "exhaustive", 0);
    report.complete = Some(complete);
    report.plans = Some(tally.runs);
    report.max_faults = Some(max_faults);
    report.stopped_by = stopped_by.to_string();
    progress.finish(&mut report);
    Ok(report)
}
