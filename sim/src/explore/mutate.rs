//! Candidate plans from the corpus: pick a parent by energy (entries that reached rarer
//! states are picked more often) and mutate it: put a fault (a short stall, a stall past
//! the ttl, a stall to the lease expiry instant, or a crash where the scenario allows one)
//! at a (node, point, occurrence) the parent's run reached; move a fault to a nearby
//! occurrence or another node; drop a decision; splice two entries; change the knobs
//! within the scenario's range (decisions and clocks of nodes that no longer exist are
//! dropped); run the same decisions under another seed (another schedule and workload);
//! or, for 30% of candidates, a fresh seed's own derived plan (the workload a seed draws
//! matters as much as its faults; see BENCHMARKS.md, "Guided exploration"). Everything
//! draws from the rng it is given: the same corpus and rng give the same candidates.

use rand_chacha::ChaCha8Rng;
use store::{FaultPoint, Moment};

use super::corpus::Entry;
use crate::plan::{Action, Decision, FaultProfile, Plan};
use crate::seed::Draw;
use crate::world::Scenario;

/// The actions a fault at `point` may take under these faults, for a ttl.
pub fn actions_at(point: FaultPoint, faults: &FaultProfile, ttl_ms: u64) -> Vec<Action> {
    let mut out = vec![Action::Stall { ms: 10 }, Action::Stall { ms: ttl_ms * 3 / 2 }];
    if matches!(point.moment(), Moment::Before | Moment::AfterCheck) {
        out.push(Action::StallToExpiry);
    }
    if faults.crash_points.contains(&point) {
        out.push(Action::Crash { restart_after_ms: ttl_ms });
    }
    out
}

/// A fresh seed drawn from the search's rng (small enough to type).
pub fn fresh_seed(r: &mut ChaCha8Rng) -> u64 {
    r.between(0, (1 << 30) - 1)
}

/// Each entry's energy: 1 plus, per state it reached, 2^20 over the runs that reached it.
pub fn energies(corpus: &[Entry], hits: &[u64]) -> Vec<u64> {
    corpus
        .iter()
        .map(|e| {
            1 + e
                .states
                .iter()
                .map(|&s| (1u64 << 20) / hits.get(usize::from(s)).copied().unwrap_or(1).max(1))
                .sum::<u64>()
        })
        .collect()
}

fn pick(r: &mut ChaCha8Rng, energy: &[u64]) -> usize {
    let total: u64 = energy.iter().sum();
    let mut x = r.between(0, total.max(1) - 1);
    for (i, &e) in energy.iter().enumerate() {
        if x < e {
            return i;
        }
        x -= e;
    }
    energy.len().saturating_sub(1)
}

/// The explorer's mutation context for one batch.
pub struct Mutator<'a> {
    pub scenario: &'static dyn Scenario,
    pub profile: &'a str,
    pub corpus: &'a [Entry],
    pub energy: Vec<u64>,
}

impl Mutator<'_> {
    /// A fresh seed's derived plan (decisions drawn as the run reaches them).
    pub fn fresh(&self, r: &mut ChaCha8Rng) -> Plan {
        let seed = fresh_seed(r);
        let knobs = self.scenario.knobs(seed);
        let faults = self.scenario.faults(&knobs);
        Plan::generate_lazy(self.scenario.name(), self.profile, seed, knobs, &faults)
    }

    /// One candidate.
    pub fn candidate(&self, r: &mut ChaCha8Rng) -> Plan {
        if self.corpus.is_empty() || r.chance(300) {
            return self.fresh(r);
        }
        let parent = &self.corpus[pick(r, &self.energy)];
        let mut plan = parent.plan.clone();
        let mut reached = parent.reached.clone();
        for _ in 0..r.between(1, 3) {
            match r.between(0, 99) {
                0..=44 => self.inject(r, &mut plan, &reached),
                45..=59 => shift(r, &mut plan),
                60..=69 => {
                    if !plan.decisions.is_empty() {
                        let i = r.between(0, plan.decisions.len() as u64 - 1) as usize;
                        plan.decisions.remove(i);
                    }
                }
                70..=79 => {
                    let other = &self.corpus[pick(r, &self.energy)];
                    splice(r, &mut plan, other);
                    reached.extend(other.reached.iter().filter(|t| t.0 < plan.knobs.nodes));
                }
                80..=89 => self.change_knobs(r, &mut plan),
                _ => plan.seed = fresh_seed(r),
            }
        }
        normalize(&mut plan);
        plan
    }

    /// A fault at a reached triple of an allowed point.
    fn inject(&self, r: &mut ChaCha8Rng, plan: &mut Plan, reached: &[(u32, FaultPoint, u32)]) {
        let faults = self.scenario.faults(&plan.knobs);
        let slots: Vec<&(u32, FaultPoint, u32)> =
            reached.iter().filter(|(n, p, _)| *n < plan.knobs.nodes && faults.points.contains(p)).collect();
        if slots.is_empty() {
            return;
        }
        let &(node, point, count) = slots[r.between(0, slots.len() as u64 - 1) as usize];
        let occurrence = r.between(1, u64::from(count)) as u32;
        let ttl = plan.knobs.ttl_ms;
        let action = match r.between(0, 3) {
            0 => Action::Stall { ms: r.between(1, 20) },
            1 => Action::Stall {
                ms: r.between(ttl * 105 / 100, ttl * faults.stall_past_ttl_max_pct.max(106) / 100),
            },
            2 if matches!(point.moment(), Moment::Before | Moment::AfterCheck) => Action::StallToExpiry,
            3 if faults.crash_points.contains(&point) => {
                Action::Crash { restart_after_ms: r.between(20, 2 * ttl) }
            }
            _ => Action::Stall { ms: r.between(ttl * 105 / 100, ttl * 3 / 2) },
        };
        plan.decisions.retain(|d| !(d.node == node && d.occurrence == occurrence && d.point == point.name()));
        plan.decisions.push(Decision { node, point: point.name().to_string(), occurrence, action });
    }

    /// Other nodes or another workload size, drawn from the scenario's own knob range.
    fn change_knobs(&self, r: &mut ChaCha8Rng, plan: &mut Plan) {
        let seed = fresh_seed(r);
        let drawn = self.scenario.knobs(seed);
        if r.chance(500) {
            plan.knobs.size = drawn.size;
            return;
        }
        plan.knobs.nodes = drawn.nodes;
        plan.decisions.retain(|d| d.node < drawn.nodes);
        if plan.clocks.len() < drawn.nodes as usize {
            let faults = self.scenario.faults(&drawn);
            let donor = Plan::generate_lazy(self.scenario.name(), self.profile, seed, drawn.clone(), &faults);
            let have = plan.clocks.len();
            plan.clocks.extend(donor.clocks.into_iter().skip(have));
        }
        plan.clocks.truncate(drawn.nodes as usize);
    }
}

/// Move a non-yield fault to a nearby occurrence or to another node.
fn shift(r: &mut ChaCha8Rng, plan: &mut Plan) {
    let faults: Vec<usize> =
        (0..plan.decisions.len()).filter(|&i| plan.decisions[i].action != Action::Yield).collect();
    if faults.is_empty() {
        return;
    }
    let i = faults[r.between(0, faults.len() as u64 - 1) as usize];
    let nodes = plan.knobs.nodes;
    let d = &mut plan.decisions[i];
    if nodes > 1 && r.chance(300) {
        d.node = (d.node + r.between(1, u64::from(nodes) - 1) as u32) % nodes;
    } else {
        let delta = r.between(1, 3) as u32;
        d.occurrence =
            if r.chance(500) { d.occurrence + delta } else { d.occurrence.saturating_sub(delta).max(1) };
    }
}

/// Half of each plan's decisions (the other's on nodes this plan has).
fn splice(r: &mut ChaCha8Rng, plan: &mut Plan, other: &Entry) {
    let nodes = plan.knobs.nodes;
    let mut ds: Vec<Decision> = plan.decisions.iter().filter(|_| r.chance(500)).cloned().collect();
    ds.extend(other.plan.decisions.iter().filter(|d| d.node < nodes && r.chance(500)).cloned());
    plan.decisions = ds;
}

/// Sorted, one decision per (node, point, occurrence) (the first kept).
pub fn normalize(plan: &mut Plan) {
    plan.decisions.sort_by(|a, b| (a.node, &a.point, a.occurrence).cmp(&(b.node, &b.point, b.occurrence)));
    plan.decisions.dedup_by(|a, b| a.node == b.node && a.point == b.point && a.occurrence == b.occurrence);
}

/// Drop the decisions at occurrences the run never reached with faults on (they never
/// fire, so the plan runs the same).
pub fn trim(plan: &mut Plan, reached: &[(u32, FaultPoint, u32)]) {
    plan.decisions.retain(|d| {
        reached.iter().any(|(n, p, c)| *n == d.node && p.name() == d.point && d.occurrence <= *c)
    });
}
