//! Bounded-exhaustive mode (`fencesim explore --exhaustive --max-faults K`): every plan of
//! at most K faults on the scenario's small configuration (`Scenario::small_knobs`), over
//! the (node, point, occurrence) triples the runs actually reach.
//!
//! The enumeration is breadth-first over sets of decisions: the faultless plan first; then
//! for each plan of fewer than K faults that passed, one more fault at every triple its run
//! reached with faults on (at the scenario's fault points), with every action of a small
//! fixed set (a 10 ms stall, a stall of 1.5 ttl, a pause of the whole process until the run
//! is taken over, resumed at the successor's grant, a stall to the lease expiry instant and
//! one to 1 ms before it at a `before*` or `after_check` point, a crash with a restart one
//! ttl later where the scenario allows crashes, a contended write before a write begins
//! where the scenario draws contention: `mutate::actions_at`), at the triples reached AFTER
//! the plan's last fault fired. A certificate speaks of these actions only. Plans are
//! deduplicated as sets of decisions. Sound: in a plan S + {b} whose faults all fire, b
//! firing last, the run is the run of S up to the instant b's triple is reached, which is
//! after S's last fault fired, so S's run lists it; a fault whose triple is never reached
//! leaves the run of the smaller plan, enumerated already. So when every plan's children
//! ran within the budget (`complete`), no plan of at most K faults of these actions fails in
//! this configuration (for this seed's schedule and workload); otherwise the first failure
//! is shrunk and saved as the counterexample.
//!
//! A plan's children are not queued whole: each plan that may have children leaves a
//! frontier (its decisions and the reached ranges), and the children are drawn from the
//! front frontier as batches need them, nearest occurrence first (occurrence 1 past the
//! last fire at every (node, point), then 2, ...), so a fault early in the run is tried
//! before a late one and memory holds one small frontier per parent, not every child.
//! The set of plans enumerated does not depend on this order (it is the closure of the
//! child rule), only which counterexample comes first.
//!
//! With `--keep-going` failing plans are extended too, the enumeration runs to its end (or
//! budget), and the first counterexample of each property set, and of each `findings` row,
//! is reported (shrunk against that row): under a flawed profile whose faultless run
//! already fails, the deeper windows (F3 under `v1_44_0`) still get their own.

use std::collections::{BTreeSet, VecDeque};

use store::FaultPoint;

use super::mutate::actions_at;
use super::search::{run_batch, Progress, Tally};
use super::{ExploreOptions, ExploreReport, BATCH};
use crate::plan::{Action, Decision, Plan};
use crate::world::Scenario;

/// The most frontiers the enumeration holds (each a few KB: about 1 GB).
pub const MAX_QUEUED: usize = 400_000;

/// The children still to draw from one plan: one more fault at each (node, point) at the
/// occurrences past `before` up to `count`, nearest occurrence first, every action.
struct Frontier {
    set: Vec<Decision>,
    /// (node, point, occurrences reached when the last fault fired, occurrences reached).
    slots: Vec<(u32, FaultPoint, u32, u32)>,
    actions: Vec<Vec<Action>>,
    /// Cursor: occurrence offset (1-based), slot, action.
    offset: u32,
    slot: usize,
    action: usize,
    max_offset: u32,
}

impl Frontier {
    /// The next child, `None` when every child was drawn.
    fn next_child(&mut self) -> Option<Vec<Decision>> {
        while self.offset <= self.max_offset {
            while self.slot < self.slots.len() {
                let (node, point, before, count) = self.slots[self.slot];
                let occurrence = before + self.offset;
                let taken = occurrence > count
                    || self
                        .set
                        .iter()
                        .any(|d| d.node == node && d.occurrence == occurrence && d.point == point.name());
                if !taken {
                    if let Some(action) = self.actions[self.slot].get(self.action) {
                        self.action += 1;
                        let mut child = self.set.clone();
                        child.push(Decision {
                            node,
                            point: point.name().to_string(),
                            occurrence,
                            action: *action,
                        });
                        child.sort();
                        return Some(child);
                    }
                }
                self.slot += 1;
                self.action = 0;
            }
            self.offset += 1;
            self.slot = 0;
        }
        None
    }
}

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
    let mut frontiers: VecDeque<Frontier> = VecDeque::new();
    let mut pending: Option<Vec<Decision>> = Some(Vec::new());
    visited.insert(Vec::new());
    let mut tally = Tally::new();
    let mut progress = Progress::new(opts);
    let label = format!("exhaustive {} {} (at most {max_faults} faults)", scenario.name(), opts.profile);
    let mut stopped_by = "complete";
    loop {
        if pending.is_none() && frontiers.is_empty() {
            break;
        }
        if tally.runs >= opts.runs {
            stopped_by = "runs";
            break;
        }
        // Past this many frontiers the enumeration is too large for memory (a profile whose
        // every run fails, extended with --keep-going, at a large K), and it stops as not
        // complete rather than exhaust the machine.
        if frontiers.len() > MAX_QUEUED {
            stopped_by = "queue";
            break;
        }
        if progress.over(opts.minutes) {
            stopped_by = "minutes";
            break;
        }
        let size = BATCH.min((opts.runs - tally.runs) as usize);
        let mut sets: Vec<Vec<Decision>> = pending.take().into_iter().collect();
        while sets.len() < size {
            let Some(f) = frontiers.front_mut() else { break };
            match f.next_child() {
                Some(child) => {
                    if visited.insert(child.clone()) {
                        sets.push(child);
                    }
                }
                None => {
                    frontiers.pop_front();
                }
            }
        }
        if sets.is_empty() {
            break;
        }
        let plans = sets.iter().map(|ds| Plan { decisions: ds.clone(), ..base.clone() }).collect();
        let results = run_batch(scenario, opts.profile, plans, opts.jobs);
        for (set, res) in sets.into_iter().zip(results) {
            tally.fold_states(&res.states, res.vacuous);
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
            let slots: Vec<(u32, FaultPoint, u32, u32)> = res
                .reached
                .iter()
                .zip(&res.before_last_fire)
                .filter(|((_, point, count), &before)| faults.points.contains(point) && *count > before)
                .map(|(&(node, point, count), &before)| (node, point, before, count))
                .collect();
            if slots.is_empty() {
                continue;
            }
            let actions = slots.iter().map(|&(_, point, _, _)| actions_at(point, &faults, ttl)).collect();
            let max_offset = slots.iter().map(|&(_, _, before, count)| count - before).max().unwrap_or(0);
            frontiers.push_back(Frontier { set, slots, actions, offset: 1, slot: 0, action: 0, max_offset });
        }
        progress.tick(&label, &tally, &format!(", {} plans with children left", frontiers.len()));
        if !opts.keep_going && !tally.failures.is_empty() {
            stopped_by = "failure";
            break;
        }
    }
    // `complete`: every plan of at most K faults ran. A certificate when none failed.
    let complete = frontiers.is_empty() && stopped_by == "complete";
    let mut report = tally.report(scenario.name(), opts, "exhaustive", 0);
    report.complete = Some(complete);
    report.plans = Some(tally.runs);
    report.max_faults = Some(max_faults);
    report.stopped_by = stopped_by.to_string();
    progress.finish(&mut report);
    Ok(report)
}
