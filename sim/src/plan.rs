//! The fault plan: every knob and every fault decision of one run, as explicit,
//! serializable data derived from the seed.
//!
//! Swarm testing: the probabilities themselves are drawn per seed (which fault points are
//! active at all, how often an active point fires, how a firing splits between yield,
//! stall and crash), so different seeds explore different fault mixes. The plan lists only
//! the decisions that fire: `(node, point, occurrence) -> action`, where `occurrence` counts
//! the times that node reached that point (across restarts). A plan is printed in failure
//! reports, saved with `--plan-out`, replayed with `--plan FILE`, and shrunk by removing
//! decisions and reducing knobs.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use store::FaultPoint;

use crate::seed::{rng, Draw};

/// What happens at a fault point.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Action {
    /// Let every other ready task run first.
    Yield,
    /// Sleep this long (virtual time) at the point, holding whatever the process holds.
    Stall { ms: u64 },
    /// The process dies here; the supervisor restarts it `restart_after_ms` later.
    Crash { restart_after_ms: u64 },
    /// Sleep until this node's clock reads the run's lease expiry exactly (as the lease row
    /// stands when the point is reached): the store's next clock reading lands on the
    /// boundary instant, where `expires_at <= now` and `expires_at < now` disagree.
    StallToExpiry,
}

impl Action {
    pub fn describe(&self) -> String {
        match self {
            Action::Yield => "yield".into(),
            Action::Stall { ms } => format!("stall {ms}ms"),
            Action::Crash { restart_after_ms } => format!("crash (restart +{restart_after_ms}ms)"),
            Action::StallToExpiry => "stall to the lease expiry".into(),
        }
    }
}

/// One decision.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Decision {
    pub node: u32,
    /// The stable fault point name.
    pub point: String,
    /// 1-based: the n-th time this node reached this point.
    pub occurrence: u32,
    pub action: Action,
}

/// The workload and world knobs (their meaning per scenario is documented there).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Knobs {
    /// Simulated processes.
    pub nodes: u32,
    /// Lease ttl in ms.
    pub ttl_ms: u64,
    /// Workload size (scenario-specific: runs, operations, cycles).
    pub size: u32,
    /// Virtual-time cap of the safety phase, in ms.
    pub cap_ms: u64,
}

/// Per-node clock: a fixed offset and a drift in parts per million.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClockSpec {
    pub skew_ms: i64,
    pub drift_ppm: i64,
}

/// The swarm draw: the probabilities this seed runs with (per mille, integers only).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Swarm {
    /// Points that may fire at all in this run.
    pub active_points: Vec<String>,
    /// Chance an active point fires at one occurrence.
    pub fire_per_mille: u32,
    /// Of a firing: chance of a stall (else yield), then chance a stall exceeds the ttl.
    pub stall_per_mille: u32,
    pub stall_past_ttl_per_mille: u32,
    /// Of a firing: chance of a crash (checked first).
    pub crash_per_mille: u32,
    /// Of the stalls at a `before*` or `after_check` point: the share turned into stalls to
    /// the lease expiry instant (drawn from its own stream, so the other decisions stay put).
    #[serde(default)]
    pub expiry_stall_per_mille: u32,
}

/// A whole plan.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Plan {
    pub scenario: String,
    pub profile: String,
    pub seed: u64,
    pub knobs: Knobs,
    pub clocks: Vec<ClockSpec>,
    pub swarm: Swarm,
    pub decisions: Vec<Decision>,
}

/// What a scenario tells the generator about its fault emphasis.
#[derive(Clone, Debug)]
pub struct FaultProfile {
    /// Candidate points (each becomes active with `active_per_mille`).
    pub points: Vec<FaultPoint>,
    pub active_per_mille: (u32, u32),
    pub fire_per_mille: (u32, u32),
    pub stall_per_mille: (u32, u32),
    pub stall_past_ttl_per_mille: (u32, u32),
    /// The longest stall past the ttl, in percent of the ttl (at least 106).
    pub stall_past_ttl_max_pct: u64,
    pub crash_per_mille: (u32, u32),
    /// How many occurrences per (node, point) the plan covers.
    pub occurrences: u32,
    /// Clock skew bound in ms and drift bound in ppm (0 = perfect clocks).
    pub skew_ms_max: i64,
    pub drift_ppm_max: i64,
    /// Points where a crash is allowed (crashing elsewhere is turned into a stall).
    pub crash_points: Vec<FaultPoint>,
}

impl FaultProfile {
    /// No faults at all.
    pub fn none() -> FaultProfile {
        FaultProfile {
            points: Vec::new(),
            active_per_mille: (0, 0),
            fire_per_mille: (0, 0),
            stall_per_mille: (0, 0),
            stall_past_ttl_per_mille: (0, 0),
            stall_past_ttl_max_pct: 160,
            crash_per_mille: (0, 0),
            occurrences: 0,
            skew_ms_max: 0,
            drift_ppm_max: 0,
            crash_points: Vec::new(),
        }
    }
}

impl Plan {
    /// Derive the plan of `(scenario, profile, seed)` from the seed's fault stream.
    pub fn generate(scenario: &str, profile: &str, seed: u64, knobs: Knobs, faults: &FaultProfile) -> Plan {
        let mut swarm_rng = rng(seed, "swarm", 0);
        let mut pick = |(lo, hi): (u32, u32)| swarm_rng.between(u64::from(lo), u64::from(hi)) as u32;
        let active_per_mille = pick(faults.active_per_mille);
        let fire_per_mille = pick(faults.fire_per_mille);
        let stall_per_mille = pick(faults.stall_per_mille);
        let stall_past_ttl_per_mille = pick(faults.stall_past_ttl_per_mille);
        let crash_per_mille = pick(faults.crash_per_mille);
        let expiry_stall_per_mille = pick((0, 300));

        let mut active_rng = rng(seed, "active-points", 0);
        let active: Vec<FaultPoint> =
            faults.points.iter().copied().filter(|_| active_rng.chance(active_per_mille)).collect();

        let mut clock_rng = rng(seed, "clocks", 0);
        let clocks = (0..knobs.nodes)
            .map(|_| ClockSpec {
                skew_ms: signed(&mut clock_rng, faults.skew_ms_max),
                drift_ppm: signed(&mut clock_rng, faults.drift_ppm_max),
            })
            .collect();

        // Streams are independent per (node, point), so visiting the points in name order
        // yields the decisions already in the plan's sorted order.
        let mut by_name = active.clone();
        by_name.sort_unstable_by_key(|p| p.name());
        let mut decisions = Vec::new();
        for node in 0..knobs.nodes {
            for point in &by_name {
                // One stream per (node, point): adding a point never reshuffles the others.
                let mut r = rng(seed, point.name(), u64::from(node));
                for occurrence in 1..=faults.occurrences {
                    if !r.chance(fire_per_mille) {
                        continue;
                    }
                    let action = if faults.crash_points.contains(point) && r.chance(crash_per_mille) {
                        Action::Crash { restart_after_ms: r.between(20, 2 * knobs.ttl_ms) }
                    } else if r.chance(stall_per_mille) {
                        if r.chance(stall_past_ttl_per_mille) {
                            Action::Stall {
                                ms: r.between(
                                    knobs.ttl_ms * 105 / 100,
                                    knobs.ttl_ms * faults.stall_past_ttl_max_pct.max(106) / 100,
                                ),
                            }
                        } else {
                            Action::Stall { ms: r.between(1, 20) }
                        }
                    } else {
                        Action::Yield
                    };
                    let action = match action {
                        Action::Stall { .. }
                            if matches!(
                                point.moment(),
                                store::Moment::Before | store::Moment::AfterCheck
                            ) && rng(seed, "expiry-stall", stream_index(node, point, occurrence))
                                .chance(expiry_stall_per_mille) =>
                        {
                            Action::StallToExpiry
                        }
                        other => other,
                    };
                    decisions.push(Decision { node, point: point.name().to_string(), occurrence, action });
                }
            }
        }
        decisions.sort(); // one pass over an already sorted list
        Plan {
            scenario: scenario.to_string(),
            profile: profile.to_string(),
            seed,
            knobs,
            clocks,
            swarm: Swarm {
                active_points: active.iter().map(|p| p.name().to_string()).collect(),
                fire_per_mille,
                stall_per_mille,
                stall_past_ttl_per_mille,
                crash_per_mille,
                expiry_stall_per_mille,
            },
            decisions,
        }
    }

    /// The decisions as a lookup table.
    pub fn table(&self) -> Result<BTreeMap<(u32, FaultPoint, u32), Action>, String> {
        if self.clocks.len() < self.knobs.nodes as usize {
            return Err(format!(
                "the plan has {} clocks for {} nodes (one clock per node)",
                self.clocks.len(),
                self.knobs.nodes
            ));
        }
        let mut t = Vec::with_capacity(self.decisions.len());
        for d in &self.decisions {
            let p = FaultPoint::from_name(&d.point)
                .ok_or_else(|| format!("the plan names an unknown fault point {:?}", d.point))?;
            if d.node >= self.knobs.nodes {
                return Err(format!("the plan names node {} but the world has {}", d.node, self.knobs.nodes));
            }
            t.push(((d.node, p, d.occurrence), d.action));
        }
        // A bulk build from a sorted list; a repeated key keeps its last decision, as
        // inserting one by one would.
        Ok(t.into_iter().collect())
    }

    /// One-line summary for reports.
    pub fn summary(&self) -> String {
        let crashes = self.decisions.iter().filter(|d| matches!(d.action, Action::Crash { .. })).count();
        let stalls = self
            .decisions
            .iter()
            .filter(|d| matches!(d.action, Action::Stall { .. } | Action::StallToExpiry))
            .count();
        format!(
            "{} nodes, ttl {}ms, size {}, {} fault decisions ({} stalls, {} crashes; {} active points, fire {}‰)",
            self.knobs.nodes,
            self.knobs.ttl_ms,
            self.knobs.size,
            self.decisions.len(),
            stalls,
            crashes,
            self.swarm.active_points.len(),
            self.swarm.fire_per_mille
        )
    }
}

/// The stream index of one (node, point, occurrence).
fn stream_index(node: u32, point: &FaultPoint, occurrence: u32) -> u64 {
    crate::seed::fnv1a(point.name().as_bytes()) ^ (u64::from(node) << 40) ^ u64::from(occurrence)
}

fn signed(r: &mut impl Draw, bound: i64) -> i64 {
    if bound <= 0 {
        return 0;
    }
    r.between(0, 2 * bound as u64) as i64 - bound
}
