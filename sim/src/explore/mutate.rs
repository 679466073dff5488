//! Candidate plans from the corpus. 30% of candidates are a fresh seed's own derived plan
//! (the workload a seed draws matters as much as its faults; see BENCHMARKS.md, "Guided
//! exploration"). Of the rest, 10% are takeover probe sets (`Mutator::probe_set`, also a
//! third of the first batch, which has no corpus yet): a fresh seed's plan plus eight
//! pauses of the whole process right before writes of any operation, each resumed right
//! after the successor's own write of that operation, so one run tests eight "what if the
//! holder were superseded here" hypotheses without knowing which fence is weak. Of the
//! rest again, 35% are takeover probes (`Mutator::probe`): a corpus entry's
//! plan plus one pause of the whole process until its run is taken over and the successor
//! has written, three in four right before a write (the fencing hazard itself, aimed: a
//! holder frozen, heartbeat and all, while a successor acquires and writes, then its stale
//! write landing right after the successor's). Of the rest again, 40% are focused plans
//! (`Mutator::focused`): a seed's workload with its faults narrowed to one to three points
//! the corpus reached, firing densely there, which is what a targeted scenario does by hand
//! for one window, with the points drawn instead of chosen (swarm testing's insight: a
//! fault left out can be as decisive as one put in); a third to two thirds of their stalls
//! past the ttl pause the whole process instead, half of those until a takeover; where the
//! scenario draws contention, a third of them focus contended writes instead (one to three
//! points before a write begins, most firings a real `SQLITE_BUSY`). Of the
//! rest again, 30% are model-guided: an abstract state of the universe no run reached yet
//! whose name gives its lever (a call of an operation under a relation with a fault never
//! seen there: that fault at a point of that operation, in an entry that reached the same
//! operation and relation; an engine crash point against a recovery never seen: a crash
//! there) is aimed at directly (`aims`). Once a run showed a stale holder's write taking
//! effect on some operation (`hazard_ops`: the fence is open there), probes take 80% of the
//! non-fresh candidates, three in four of them stand before a write of such an operation,
//! and half of those resume right after the successor's own write of it (`same_op`). The
//! others pick a parent by energy (entries that
//! reached rarer states are picked more often) and mutate it: put a fault (a short stall,
//! a stall past the ttl, a stall to the lease expiry instant or to 1 ms before it (both
//! sides of the fence's boundary), a process pause until a
//! takeover, or a crash where the scenario allows one) at a (node, point, occurrence) the
//! parent's run reached, half the time weighted toward points few corpus entries reached
//! (`point_rarity`); move a fault to a nearby occurrence or another node, or a takeover
//! pause to an earlier or later successor write; drop a decision; splice two entries;
//! change the knobs within the scenario's range (decisions and clocks of nodes that no
//! longer exist are dropped); or run the same decisions under another seed (another
//! schedule and workload). Everything draws from the rng it is given: the same corpus and
//! rng give the same candidates.

use rand_chacha::ChaCha8Rng;
use store::{FaultPoint, Moment};

use super::corpus::Entry;
use crate::history::OpKind;
use crate::plan::{contendable, Action, Decision, FaultProfile, Plan};
use crate::seed::Draw;
use crate::world::Scenario;

/// The actions a fault at `point` may take under these faults, for a ttl (the exhaustive
/// mode's fixed set): a 10 ms stall, a stall of 1.5 ttl, a pause of the whole process until
/// the run is taken over (its stale step lands right after the successor's grant; a point
/// acting for no run pauses 1.5 ttl), a stall to the lease expiry instant and one to 1 ms
/// before it at a `before*` or `after_check` point, a crash with a restart one ttl later where
/// the scenario allows one, and a contended write ([`Action::Contend`]: the write meets
/// another writer's lock, a real `SQLITE_BUSY`) at the moment before a write begins where
/// the scenario draws contention.
pub fn actions_at(point: FaultPoint, faults: &FaultProfile, ttl_ms: u64) -> Vec<Action> {
    let mut out = vec![
        Action::Stall { ms: 10 },
        Action::Stall { ms: ttl_ms * 3 / 2 },
        Action::PauseUntilTakeover { writes: 1, same_op: false },
    ];
    if matches!(point.moment(), Moment::Before | Moment::AfterCheck) {
        out.push(Action::StallToExpiry);
        out.push(Action::StallToBeforeExpiry { ms: 1 });
    }
    if faults.crash_points.contains(&point) {
        out.push(Action::Crash { restart_after_ms: ttl_ms });
    }
    if faults.contend_per_mille.1 > 0 && contendable(point) {
        out.push(Action::Contend);
    }
    out
}

/// Of the candidates that are not fresh seeds: the share that are takeover probes
/// ([`Mutator::probe`]); of the rest, the share that are focused plans
/// ([`Mutator::focused`]); and of the rest again the share aimed at an unreached state
/// ([`aims`]).
/// Measured over search seeds (BENCHMARKS.md, "Guided exploration"): with 40% focused and
/// 30% aimed (stop 14), the median run to F4 from `queue` under v1_44_1 fell from 1,213 to
/// about 400-850; probes before writes, resumed at the successor's write, at 35% (stop 17)
/// took it to 91 over 21 search seeds (F2 under v1_45_0: 67). At 50% probes the two medians
/// were 80 and 55, but the planted bugs that focused plans find came later
/// (`unleased-delete-no-tx`, `checkpoint-before-tool`: BENCHMARKS.md, "Stop 17").
pub const PROBE_PER_MILLE: u32 = 350;
pub const FOCUS_PER_MILLE: u32 = 400;
pub const AIM_PER_MILLE: u32 = 300;

/// Of the focused plans of a scenario that draws contention, the share that focus
/// contended writes instead of stalls ([`Mutator::focused`]).
pub const CONTEND_FOCUS_PER_MILLE: u32 = 333;

/// Which generator made a candidate (AFL's per-stage statistics: the report counts each
/// kind's runs, the runs that reached a new state, and the runs that failed, so a mix can
/// be judged by per-run yield over thousands of runs rather than by a few first detections).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Kind {
    /// A fresh seed's own derived plan, as a sweep runs it.
    Fresh,
    /// [`Mutator::focused`], a stall focus.
    Focused,
    /// [`Mutator::focused`], a contention focus.
    ContendFocused,
    /// [`Mutator::probe`].
    Probe,
    /// [`Mutator::probe`] before a write of a hazard operation ([`hazard_ops`]).
    HazardProbe,
    /// Aimed at an unreached state ([`aims`]).
    Aim,
    /// A corpus entry mutated (inject, shift, drop, splice, knobs, reseed).
    Mutate,
    /// [`Mutator::probe_set`].
    ProbeSet,
    /// [`Mutator::acquire_probe`].
    AcquireProbe,
}

impl Kind {
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Fresh => "fresh",
            Kind::Focused => "focused",
            Kind::ContendFocused => "contend_focused",
            Kind::Probe => "probe",
            Kind::HazardProbe => "hazard_probe",
            Kind::Aim => "aim",
            Kind::Mutate => "mutate",
            Kind::ProbeSet => "probe_set",
            Kind::AcquireProbe => "acquire_probe",
        }
    }
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
    /// Unreached states with a known lever (see [`aims`]).
    pub aims: Vec<Aim>,
    /// Per fault point (by index): a weight that falls with the corpus entries reaching it.
    pub point_rarity: Vec<u64>,
    /// Operations a stale write was seen to take effect on (see [`hazard_ops`]).
    pub hazard_ops: Vec<OpKind>,
}

/// Of the takeover probes that can stand before a write of a hazard operation
/// ([`hazard_ops`]), the share that do.
pub const HAZARD_PER_MILLE: u32 = 750;

/// Of the hazard probes, the share that resume right after the successor's first to third
/// write of the same operation (`same_op`: the stale write lands over the successor's own),
/// instead of after [`successor_writes`] writes of any kind.
pub const SAME_OP_PER_MILLE: u32 = 500;

/// The takeover pauses of a probe set ([`Mutator::probe_set`]).
pub const PROBE_SET_SIZE: usize = 8;

/// Of the candidates after the first batch that are not fresh seeds, the share that are
/// probe sets.
pub const PROBE_SET_PER_MILLE: u32 = 100;

/// Of the candidates after the first batch that are not fresh seeds or probe sets, the
/// share that are acquire probes ([`Mutator::acquire_probe`]).
pub const ACQUIRE_PROBE_PER_MILLE: u32 = 80;

/// Where an acquire probe stands: any acquire's first point, and the point a resume reaches
/// between its prepared reads and its own acquire (the host's retry, which the first shares
/// with every sweep's acquire on the node).
pub const ACQUIRE_PROBE_POINTS: [FaultPoint; 2] =
    [FaultPoint::SqliteAcquireBeforeBegin, FaultPoint::EngineResumeBeforeAcquire];

/// The probe share ([`PROBE_PER_MILLE`]) once a hazard operation is known.
pub const HAZARD_PROBE_PER_MILLE: u32 = 800;

/// The operations whose fence the search has seen fail to hold: some run reached
/// `call:<op>:superseded:applied:*` or `call:<op>:past_expiry:applied:*` (a write by a
/// holder already superseded, or past its expiry, took effect). Under a store that fences
/// every write this is empty. Where it is not, the fence's hazard (a stale write landing
/// inside a successor's tenure, over what the successor wrote) is open on those operations,
/// and a takeover probe is most useful right before one of their writes: the abstract
/// states learned which writes are unguarded, as lineage-driven fault injection learns
/// where a fault can matter, and the probe then tests what the stale write breaks.
pub fn hazard_ops(hits: &[u64]) -> Vec<OpKind> {
    let mut out: Vec<OpKind> = Vec::new();
    for (i, parts) in state_parts().iter().enumerate() {
        if hits.get(i).copied().unwrap_or(0) == 0 {
            continue;
        }
        let ["call", op, "superseded" | "past_expiry", "applied", _] = parts.as_slice() else {
            continue;
        };
        if let Some(o) = OpKind::ALL.into_iter().find(|o| o.as_str() == *op && o.is_mutation()) {
            if !out.contains(&o) {
                out.push(o);
            }
        }
    }
    out
}

/// Per state of the universe, in index order: its name split at `:` (once per process).
fn state_parts() -> &'static [Vec<&'static str>] {
    static PARTS: std::sync::OnceLock<Vec<Vec<&'static str>>> = std::sync::OnceLock::new();
    PARTS.get_or_init(|| crate::oracle::states::universe().iter().map(|n| n.split(':').collect()).collect())
}

/// Per fault point: 2^16 over one plus the corpus entries whose runs reached it.
pub fn point_rarity(corpus: &[Entry]) -> Vec<u64> {
    let mut n = vec![0u64; FaultPoint::ALL.len()];
    for e in corpus {
        let mut seen = vec![false; n.len()];
        for &(_, p, _) in &e.reached {
            seen[p.index()] = true;
        }
        for (c, s) in n.iter_mut().zip(seen) {
            *c += u64::from(s);
        }
    }
    n.into_iter().map(|c| (1u64 << 16) / (1 + c)).collect()
}

/// What kind of fault a lever puts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Lever {
    Stall,
    StallToExpiry,
    StallBeforeExpiry,
    CrashBefore,
    CrashAfterCommit,
    /// Another writer holds the write lock across the call ([`Action::Contend`]).
    Contend,
}

/// An abstract state no run reached yet, with a lever the model names: the fault its name
/// asks for, the points where that fault can stand, and the corpus entries that reached a
/// neighbour (the same call and relation under another fault or outcome; for an engine
/// crash, the point itself).
#[derive(Clone, Debug)]
pub struct Aim {
    pub lever: Lever,
    pub points: Vec<FaultPoint>,
    pub parents: Vec<usize>,
}

/// The aims of a corpus: model-guided search (coverage of the abstract model's states
/// steers it, not only the states reached). `call:<op>:<rel>:<outcome>:<fault>` never
/// reached with a fault: put that fault at a point of `<op>` in an entry that reached the
/// same op and relation; `crash:<point>:<recovery>` never reached: a crash at that point in
/// an entry that reached it; `cut:<step>:<next>` never reached: a crash right after the
/// step's write commits, or a contended write after it, in an entry that deleted a run. Race,
/// meta and delete-overlap states have no single lever.
pub fn aims(corpus: &[Entry], hits: &[u64], faults: &FaultProfile) -> Vec<Aim> {
    use std::collections::BTreeMap;
    let parts_of = state_parts();
    let mut by_call: BTreeMap<(&str, &str), Vec<usize>> = BTreeMap::new();
    for (i, e) in corpus.iter().enumerate() {
        for &st in &e.states {
            let parts = &parts_of[usize::from(st)];
            let ["call", op, rel, _, _] = parts.as_slice() else { continue };
            let v = by_call.entry((*op, *rel)).or_default();
            if v.last() != Some(&i) {
                v.push(i);
            }
        }
    }
    let mut out = Vec::new();
    let mut cut_steps_aimed: Vec<&str> = Vec::new();
    for (i, parts) in parts_of.iter().enumerate() {
        if hits.get(i).copied().unwrap_or(0) > 0 {
            continue;
        }
        match parts.as_slice() {
            ["call", op, rel, _, fault] if *fault != "none" => {
                let lever = match *fault {
                    "stall" => Lever::Stall,
                    "stall_to_expiry" => Lever::StallToExpiry,
                    "stall_before_expiry" => Lever::StallBeforeExpiry,
                    "crash_before" => Lever::CrashBefore,
                    "contended" => Lever::Contend,
                    _ => Lever::CrashAfterCommit,
                };
                let points: Vec<FaultPoint> = FaultPoint::ALL
                    .iter()
                    .copied()
                    .filter(|&p| {
                        OpKind::of_point(p).is_some_and(|o| o.as_str() == *op) && faults.points.contains(&p)
                    })
                    .filter(|p| match lever {
                        Lever::Stall => true,
                        Lever::StallToExpiry | Lever::StallBeforeExpiry => {
                            matches!(p.moment(), Moment::Before | Moment::AfterCheck)
                        }
                        Lever::CrashBefore => {
                            p.moment() != Moment::AfterCommit && faults.crash_points.contains(p)
                        }
                        Lever::CrashAfterCommit => {
                            p.moment() == Moment::AfterCommit && faults.crash_points.contains(p)
                        }
                        Lever::Contend => contendable(*p),
                    })
                    .collect();
                let Some(parents) = by_call.get(&(*op, *rel)) else { continue };
                if !points.is_empty() {
                    out.push(Aim { lever, points, parents: parents.clone() });
                }
            }
            // A cascade never cut at this step (or never followed by this next event): a
            // crash right after the step's write commits, or the write after it contended, in
            // an entry whose run deleted something.
            ["cut", step, _] if !cut_steps_aimed.contains(step) => {
                cut_steps_aimed.push(step);
                let deleters: Vec<usize> = (0..corpus.len())
                    .filter(|&e| {
                        corpus[e]
                            .states
                            .iter()
                            .any(|&st| parts_of[usize::from(st)].first() == Some(&"delete_overlap"))
                    })
                    .collect();
                if deleters.is_empty() {
                    continue;
                }
                let (crash, contend) = if *step == "record" {
                    (FaultPoint::SqliteBlobPutAfterCommit, FaultPoint::SqliteBlobDeleteBeforeBegin)
                } else {
                    (FaultPoint::SqliteBlobDeleteAfterCommit, FaultPoint::SqliteDeleteBeforeBegin)
                };
                if faults.points.contains(&crash) && faults.crash_points.contains(&crash) {
                    out.push(Aim {
                        lever: Lever::CrashAfterCommit,
                        points: vec![crash],
                        parents: deleters.clone(),
                    });
                }
                if faults.points.contains(&contend) && faults.contend_per_mille.1 > 0 && contendable(contend)
                {
                    out.push(Aim { lever: Lever::Contend, points: vec![contend], parents: deleters });
                }
            }
            ["crash", point, _] => {
                let Some(p) = FaultPoint::from_name(point) else { continue };
                if !faults.crash_points.contains(&p) {
                    continue;
                }
                let parents: Vec<usize> = (0..corpus.len())
                    .filter(|&e| corpus[e].reached.iter().any(|&(_, q, _)| q == p))
                    .collect();
                if !parents.is_empty() {
                    out.push(Aim { lever: Lever::CrashBefore, points: vec![p], parents });
                }
            }
            _ => {}
        }
    }
    out
}

impl Mutator<'_> {
    /// A fresh seed's derived plan (decisions drawn as the run reaches them).
    pub fn fresh(&self, r: &mut ChaCha8Rng) -> Plan {
        let seed = fresh_seed(r);
        let knobs = self.scenario.knobs(seed);
        let faults = self.scenario.faults(&knobs);
        Plan::generate_lazy(self.scenario.name(), self.profile, seed, knobs, &faults)
    }

    /// A focused plan: a seed's workload (a fresh seed's, or a corpus entry's seed and
    /// knobs) with its faults narrowed to one to three points that corpus runs reached,
    /// every one active and firing densely. This is what a targeted scenario does by hand
    /// for one window (`f4-stale-retention` focuses the retention cascade); here the points
    /// are drawn, half of them weighted toward points few corpus entries reached.
    ///
    /// Two shapes. A stall focus ([`Kind::Focused`]): mostly stalls past the ttl, crashes
    /// where the scenario allows them. Where the scenario draws contention, a third are a
    /// contention focus instead ([`Kind::ContendFocused`], [`CONTEND_FOCUS_PER_MILLE`]):
    /// one to three points before a write begins (`*.before_begin`), where most firings are
    /// contended writes ([`Action::Contend`]: a real `SQLITE_BUSY`) and the rest short
    /// stalls (some to the lease's expiry instant, as every derived plan draws) or yields.
    /// A busy write is a failure the engine must absorb, and the windows it opens (a settle
    /// append lost, then a later segment failing early: a run stranded under rulvar's
    /// write-on-change rule, docs/explore-findings/, "Stop 49") take a few contended writes
    /// of one operation spread over a run's segments, which a stall focus never draws and a
    /// seed's own plan (at most 30% of its rare yields) seldom lines up.
    pub fn focused(&self, r: &mut ChaCha8Rng) -> (Plan, Kind) {
        let (seed, knobs) = if self.corpus.is_empty() || r.chance(500) {
            let seed = fresh_seed(r);
            (seed, self.scenario.knobs(seed))
        } else {
            let e = &self.corpus[pick(r, &self.energy)];
            (e.plan.seed, e.plan.knobs.clone())
        };
        let faults = self.scenario.faults(&knobs);
        let contend = faults.contend_per_mille.1 > 0 && r.chance(CONTEND_FOCUS_PER_MILLE);
        let mut reached = vec![false; FaultPoint::ALL.len()];
        for e in self.corpus {
            for &(_, p, _) in &e.reached {
                reached[p.index()] = true;
            }
        }
        let candidates: Vec<FaultPoint> = faults
            .points
            .iter()
            .copied()
            .filter(|p| self.corpus.is_empty() || reached[p.index()])
            .filter(|&p| !contend || contendable(p))
            .collect();
        let kind = if contend { Kind::ContendFocused } else { Kind::Focused };
        if candidates.is_empty() {
            return (Plan::generate_lazy(self.scenario.name(), self.profile, seed, knobs, &faults), kind);
        }
        let mut focus: Vec<FaultPoint> = Vec::new();
        for _ in 0..r.between(1, 3) {
            let i = self.rare_or_uniform(r, &candidates);
            if !focus.contains(&candidates[i]) {
                focus.push(candidates[i]);
            }
        }
        // Every point of the focus active, with the scenario's occurrences and clocks.
        let dense = FaultProfile::at(focus)
            .active(1000, 1000)
            .occurrences(faults.occurrences)
            .clocks(faults.skew_ms_max, faults.drift_ppm_max);
        let narrowed = if contend {
            // 10-80% of the occurrences fire; of the firings 0-20% short stalls, of the
            // yields 60-100% contended. Denser than a stall focus: the windows want several
            // writes of a run lost and the ones between them applied. Measured once, by hand:
            // plans contending every append at a fixed rate, under rulvar's settle rule (the
            // planted `r23-settle-tail-after-a-settle-unsettled`), on the stored finding's
            // seed and knobs stranded a run in 0 of 40 plans at 10%, 7 of 40 at 35%; on eight
            // other seeds with those knobs, 8 of 80 at 50%, 19 of 80 at 70%. A point before a
            // write is not a crash point, and a stall past the ttl is another window's.
            dense.fire(100, 800).stalls((0, 200), (0, 0), faults.stall_past_ttl_max_pct).contends(600, 1000)
        } else {
            let crash_points: Vec<FaultPoint> =
                faults.crash_points.iter().copied().filter(|p| dense.points.contains(p)).collect();
            dense
                .fire(50, 300)
                .stalls((500, 900), (400, 900), faults.stall_past_ttl_max_pct)
                .crashes(0, 200, crash_points)
                .pauses(300, 700)
        };
        (Plan::generate_lazy(self.scenario.name(), self.profile, seed, knobs, &narrowed), kind)
    }

    /// A takeover probe (Kleppmann's fencing example, aimed): a corpus entry's plan with one
    /// more fault, a pause of the whole process until the run is taken over
    /// ([`Action::PauseUntilTakeover`]), at a point its run reached. A fence guards writes,
    /// so three probes in four stand right before a write (`before_write`: a mutation's
    /// first fault point, whether or not the call carried its lease: the unfenced writes of
    /// a flawed profile are the ones to catch); the rest at any point the run reached acting
    /// under a lease. The (node, point) is drawn uniformly among the distinct ones (each is
    /// one hypothesis, "what if the holder were superseded here"; a loop's point repeated
    /// is the same one), the occurrence uniformly; half the time the entry's other faults
    /// are dropped, so the probe is the run's only fault. The successor writes the process
    /// waits for are drawn log-uniformly from 1 to 15 (a quarter each of 1, 2-3, 4-7 and
    /// 8-15): the stale step lands right after that write, anywhere from the successor's
    /// acquire to deep in its tenure.
    pub fn probe(&self, r: &mut ChaCha8Rng) -> (Plan, Kind) {
        let parent = &self.corpus[pick(r, &self.energy)];
        let mut plan = parent.plan.clone();
        let faults = self.scenario.faults(&plan.knobs);
        let reached = || {
            parent
                .reached
                .iter()
                .zip(&parent.leased)
                .filter(|((n, p, c), _)| *n < plan.knobs.nodes && *c > 0 && faults.points.contains(p))
        };
        let writes: Vec<(u32, FaultPoint, u32)> =
            reached().filter(|((_, p, _), _)| before_write(*p)).map(|(&t, _)| t).collect();
        let hazards: Vec<(u32, FaultPoint, u32)> = writes
            .iter()
            .filter(|(_, p, _)| OpKind::of_point(*p).is_some_and(|o| self.hazard_ops.contains(&o)))
            .copied()
            .collect();
        let (slots, kind): (Vec<(u32, FaultPoint, u32)>, Kind) =
            if !hazards.is_empty() && r.chance(HAZARD_PER_MILLE) {
                (hazards, Kind::HazardProbe)
            } else if !writes.is_empty() && r.chance(750) {
                (writes, Kind::Probe)
            } else {
                (reached().filter(|(_, &l)| l > 0).map(|(&t, _)| t).collect(), Kind::Probe)
            };
        if slots.is_empty() {
            return (plan, kind);
        }
        let (node, point, count) = slots[r.between(0, slots.len() as u64 - 1) as usize];
        let occurrence = r.between(1, u64::from(count)) as u32;
        if r.chance(500) {
            plan.decisions.clear();
        }
        let action = if kind == Kind::HazardProbe && r.chance(SAME_OP_PER_MILLE) {
            Action::PauseUntilTakeover { writes: r.between(1, 3) as u32, same_op: true }
        } else {
            Action::PauseUntilTakeover { writes: successor_writes(r), same_op: false }
        };
        set_decision(&mut plan, node, point, occurrence, action);
        normalize(&mut plan);
        (plan, kind)
    }

    /// A takeover probe set: a fresh seed's own plan, written out, plus [`PROBE_SET_SIZE`]
    /// takeover pauses, each right before a write (`before_write`) at a point of the
    /// scenario's fault profile, on a node drawn uniformly, at its first to third occurrence, and each resumed right after the successor's first to third
    /// write of the paused call's own operation (`same_op`: the stale write lands over the
    /// successor's, Kleppmann's fencing example). It needs no corpus: each pause is one
    /// hypothesis ("what if the holder were superseded right before this write"), and one
    /// run tests several, on whichever operations the workload reaches. Pauses at points a
    /// run never reaches do not fire; a node paused once resumes and may meet its next. The
    /// seed's own faults stay (they open the other windows a fresh run opens: a probe set
    /// catches F3 as often as a fresh seed does), and a pause replaces a decision of the
    /// same (node, point, occurrence).
    /// Measured (BENCHMARKS.md, "Stop 32"): under `v1_45_0` 12% of probe sets from `queue`
    /// catch F2, against 1.1% of fresh seeds; without the seed's faults 16%, but no F3.
    pub fn probe_set(&self, r: &mut ChaCha8Rng) -> Plan {
        let seed = fresh_seed(r);
        let knobs = self.scenario.knobs(seed);
        let faults = self.scenario.faults(&knobs);
        let mut plan = Plan::generate_lazy(self.scenario.name(), self.profile, seed, knobs, &faults);
        plan.materialize();
        let writes: Vec<FaultPoint> = faults.points.iter().copied().filter(|p| before_write(*p)).collect();
        if writes.is_empty() || plan.knobs.nodes == 0 {
            return plan;
        }
        for _ in 0..PROBE_SET_SIZE {
            let node = r.between(0, u64::from(plan.knobs.nodes) - 1) as u32;
            let point = writes[r.between(0, writes.len() as u64 - 1) as usize];
            let occurrence = r.between(1, 3) as u32;
            let action = Action::PauseUntilTakeover { writes: r.between(1, 3) as u32, same_op: true };
            set_decision(&mut plan, node, point, occurrence, action);
        }
        normalize(&mut plan);
        plan
    }

    /// An acquire probe (time of check to time of use, before the lease): a corpus entry's
    /// plan with one more fault, a pause of the whole process right before one of its
    /// acquires ([`ACQUIRE_PROBE_POINTS`]) until another process has acquired the run and
    /// written ([`Action::PauseUntilAcquired`]). Every acquire follows reads made
    /// without the lease (a resume's prepared journal and meta, a sweep's listing, a
    /// retention pass's candidates, a resolution's pending suspension), and the hypothesis
    /// is "what if a whole tenure of another process ran between those reads and the
    /// grant": a caller that acts on its pre-acquire reads instead of reading again under
    /// the lease boots from a stale journal or acts on a run that changed. The takeover
    /// probe cannot ask this: it stands where a lease is held, and an acquire holds none.
    /// The (node, point) is drawn uniformly among the distinct ones the parent reached (a
    /// resume's own point is one of them when its run resumed), the occurrence uniformly; half the
    /// time the entry's other faults are dropped; the writes awaited are
    /// [`successor_writes`] (a whole short tenure at the upper bands).
    pub fn acquire_probe(&self, r: &mut ChaCha8Rng) -> Plan {
        let parent = &self.corpus[pick(r, &self.energy)];
        let mut plan = parent.plan.clone();
        let faults = self.scenario.faults(&plan.knobs);
        let slots: Vec<(u32, FaultPoint, u32)> = parent
            .reached
            .iter()
            .filter(|&&(n, p, c)| {
                ACQUIRE_PROBE_POINTS.contains(&p)
                    && n < plan.knobs.nodes
                    && c > 0
                    && faults.points.contains(&p)
            })
            .copied()
            .collect();
        if slots.is_empty() {
            return plan;
        }
        let (node, at, count) = slots[r.between(0, slots.len() as u64 - 1) as usize];
        let occurrence = r.between(1, u64::from(count)) as u32;
        if r.chance(500) {
            plan.decisions.clear();
        }
        set_decision(
            &mut plan,
            node,
            at,
            occurrence,
            Action::PauseUntilAcquired { writes: successor_writes(r) },
        );
        normalize(&mut plan);
        plan
    }

    /// An index into `points`: half the time weighted toward points few corpus entries
    /// reached (`point_rarity`), else uniform. `points` is not empty.
    fn rare_or_uniform(&self, r: &mut ChaCha8Rng, points: &[FaultPoint]) -> usize {
        if !self.point_rarity.is_empty() && r.chance(500) {
            let w: Vec<u64> = points.iter().map(|p| self.point_rarity[p.index()]).collect();
            pick(r, &w)
        } else {
            r.between(0, points.len() as u64 - 1) as usize
        }
    }

    /// One candidate.
    pub fn candidate(&self, r: &mut ChaCha8Rng) -> (Plan, Kind) {
        if self.corpus.is_empty() || r.chance(300) {
            return (self.fresh(r), Kind::Fresh);
        }
        if r.chance(PROBE_SET_PER_MILLE) {
            return (self.probe_set(r), Kind::ProbeSet);
        }
        if r.chance(ACQUIRE_PROBE_PER_MILLE) {
            return (self.acquire_probe(r), Kind::AcquireProbe);
        }
        if r.chance(if self.hazard_ops.is_empty() { PROBE_PER_MILLE } else { HAZARD_PROBE_PER_MILLE }) {
            return self.probe(r);
        }
        if r.chance(FOCUS_PER_MILLE) {
            return self.focused(r);
        }
        if !self.aims.is_empty() && r.chance(AIM_PER_MILLE) {
            let aim = &self.aims[r.between(0, self.aims.len() as u64 - 1) as usize];
            let parent = &self.corpus[aim.parents[r.between(0, aim.parents.len() as u64 - 1) as usize]];
            let mut plan = parent.plan.clone();
            self.aim_at(r, &mut plan, &parent.reached, aim);
            normalize(&mut plan);
            return (plan, Kind::Aim);
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
        (plan, Kind::Mutate)
    }

    /// A fault at a reached triple of an allowed point.
    fn inject(&self, r: &mut ChaCha8Rng, plan: &mut Plan, reached: &[(u32, FaultPoint, u32)]) {
        let faults = self.scenario.faults(&plan.knobs);
        let slots: Vec<&(u32, FaultPoint, u32)> =
            reached.iter().filter(|(n, p, _)| *n < plan.knobs.nodes && faults.points.contains(p)).collect();
        if slots.is_empty() {
            return;
        }
        let i = self.rare_or_uniform(r, &slots.iter().map(|&&(_, p, _)| p).collect::<Vec<_>>());
        let &(node, point, count) = slots[i];
        let occurrence = r.between(1, u64::from(count)) as u32;
        let ttl = plan.knobs.ttl_ms;
        let action = match r.between(0, 4) {
            0 => Action::Stall { ms: r.between(1, 20) },
            4 => Action::PauseUntilTakeover { writes: successor_writes(r), same_op: false },
            1 => Action::Stall {
                ms: r.between(ttl * 105 / 100, ttl * faults.stall_past_ttl_max_pct.max(106) / 100),
            },
            2 if matches!(point.moment(), Moment::Before | Moment::AfterCheck) => {
                if r.chance(500) {
                    Action::StallToExpiry
                } else {
                    Action::StallToBeforeExpiry { ms: 1 }
                }
            }
            3 if faults.crash_points.contains(&point) => {
                Action::Crash { restart_after_ms: r.between(20, 2 * ttl) }
            }
            // Where no crash may stand, the moment before a write may meet another writer.
            3 if contendable(point) => Action::Contend,
            _ => Action::Stall { ms: r.between(ttl * 105 / 100, ttl * 3 / 2) },
        };
        set_decision(plan, node, point, occurrence, action);
    }

    /// The aim's fault at a reached occurrence of one of its points.
    fn aim_at(&self, r: &mut ChaCha8Rng, plan: &mut Plan, reached: &[(u32, FaultPoint, u32)], aim: &Aim) {
        let faults = self.scenario.faults(&plan.knobs);
        let slots: Vec<&(u32, FaultPoint, u32)> = reached
            .iter()
            .filter(|(n, p, _)| *n < plan.knobs.nodes && aim.points.contains(p) && faults.points.contains(p))
            .collect();
        if slots.is_empty() {
            return;
        }
        let &(node, point, count) = slots[r.between(0, slots.len() as u64 - 1) as usize];
        let occurrence = r.between(1, u64::from(count)) as u32;
        let ttl = plan.knobs.ttl_ms;
        let action = match aim.lever {
            Lever::Stall if r.chance(500) => Action::Stall { ms: r.between(1, 20) },
            Lever::Stall => Action::Stall {
                ms: r.between(ttl * 105 / 100, ttl * faults.stall_past_ttl_max_pct.max(106) / 100),
            },
            Lever::StallToExpiry => Action::StallToExpiry,
            Lever::StallBeforeExpiry => Action::StallToBeforeExpiry { ms: 1 },
            Lever::Contend if contendable(point) => Action::Contend,
            Lever::CrashBefore | Lever::CrashAfterCommit if faults.crash_points.contains(&point) => {
                Action::Crash { restart_after_ms: r.between(20, 2 * ttl) }
            }
            _ => Action::Stall { ms: r.between(ttl * 105 / 100, ttl * 3 / 2) },
        };
        set_decision(plan, node, point, occurrence, action);
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

/// Whether `point` stands right before a write a lease fences: the first fault point of a
/// store mutation other than an acquire (`sqlite.<op>.before_begin`), reached before the
/// call touches the database.
pub fn before_write(point: FaultPoint) -> bool {
    point.moment() == Moment::Before
        && OpKind::of_point(point).is_some_and(|o| o.is_mutation() && o != OpKind::Acquire)
}

/// How many successor writes a takeover pause waits for: log-uniform over 1 to 15 (a
/// quarter each of 1, 2-3, 4-7 and 8-15).
pub fn successor_writes(r: &mut ChaCha8Rng) -> u32 {
    let band = r.between(0, 3) as u32;
    r.between(1 << band, (2 << band) - 1) as u32
}

/// Move a non-yield fault to a nearby occurrence or to another node (a takeover pause, half
/// the time, to an earlier or later successor write instead).
fn shift(r: &mut ChaCha8Rng, plan: &mut Plan) {
    let faults: Vec<usize> =
        (0..plan.decisions.len()).filter(|&i| plan.decisions[i].action != Action::Yield).collect();
    if faults.is_empty() {
        return;
    }
    let i = faults[r.between(0, faults.len() as u64 - 1) as usize];
    let nodes = plan.knobs.nodes;
    let d = &mut plan.decisions[i];
    // A takeover pause moves in the successor's tenure as well: it resumes up to twice as
    // many successor writes later, or up to half as many earlier.
    if let Action::PauseUntilTakeover { writes, same_op } = d.action {
        if r.chance(500) {
            let writes = if r.chance(500) {
                writes + r.between(1, u64::from(writes)) as u32
            } else {
                writes.saturating_sub(r.between(1, u64::from(writes.div_ceil(2))) as u32).max(1)
            };
            d.action = Action::PauseUntilTakeover { writes, same_op };
            return;
        }
    }
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

/// `action` at (node, point, occurrence), replacing the plan's decision there if it had one.
fn set_decision(plan: &mut Plan, node: u32, point: FaultPoint, occurrence: u32, action: Action) {
    plan.decisions.retain(|d| !(d.node == node && d.occurrence == occurrence && d.point == point.name()));
    plan.decisions.push(Decision { node, point: point.name().to_string(), occurrence, action });
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::oracle::states::universe;
    use crate::plan::{Knobs, Swarm};

    fn entry(states: &[&str], reached: &[(u32, FaultPoint, u32)]) -> Entry {
        let index: std::collections::BTreeMap<&str, u16> =
            universe().iter().enumerate().map(|(i, n)| (n.as_str(), i as u16)).collect();
        Entry {
            run: 1,
            new_states: 1,
            plan: Plan {
                scenario: "soak".into(),
                profile: "current".into(),
                seed: 0,
                knobs: Knobs { nodes: 2, ttl_ms: 300, size: 4, cap_ms: 10_000 },
                clocks: Vec::new(),
                swarm: Swarm::none(),
                decisions: Vec::new(),
                recipe: None,
            },
            states: states.iter().map(|s| index[s]).collect(),
            reached: reached.to_vec(),
            leased: reached.iter().map(|t| t.2).collect(),
        }
    }

    fn faults() -> FaultProfile {
        FaultProfile {
            points: FaultPoint::ALL.to_vec(),
            crash_points: vec![FaultPoint::SqliteAppendAfterCommit, FaultPoint::EngineSettleAfterRunSettle],
            ..FaultProfile::none()
        }
    }

    #[test]
    fn a_hazard_operation_is_one_a_stale_holders_write_took_effect_on() {
        let index: std::collections::BTreeMap<&str, usize> =
            universe().iter().enumerate().map(|(i, n)| (n.as_str(), i)).collect();
        let hits_of = |names: &[&str]| {
            let mut h = vec![0u64; universe().len()];
            for n in names {
                h[index[n]] += 1;
            }
            h
        };
        // Refused stale writes, unleased writes and live holders' writes: the fence holds.
        let fenced = hits_of(&[
            "call:blob_put:superseded:refused:none",
            "call:blob_delete:no_lease:applied:none",
            "call:put_meta:live_holder:applied:none",
            "call:renew:past_expiry:refused:stall",
        ]);
        assert_eq!(hazard_ops(&fenced), Vec::<OpKind>::new());
        // A superseded holder's put and a past-expiry delete took effect.
        let open = hits_of(&[
            "call:blob_put:superseded:applied:stall",
            "call:delete:past_expiry:applied:none",
            "call:blob_put:past_expiry:applied:none",
        ]);
        assert_eq!(hazard_ops(&open), vec![OpKind::Delete, OpKind::BlobPut]);
    }

    #[test]
    fn an_unreached_state_is_aimed_at_from_its_neighbours_with_the_fault_it_names() {
        let corpus = vec![
            entry(&["call:append:superseded:refused:none"], &[(0, FaultPoint::SqliteAppendAfterCheck, 2)]),
            entry(
                &["call:renew:live_holder:applied:none"],
                &[(1, FaultPoint::EngineSettleAfterRunSettle, 1)],
            ),
        ];
        let mut hits = vec![0u64; universe().len()];
        for e in &corpus {
            for &s in &e.states {
                hits[usize::from(s)] += 1;
            }
        }
        let all = aims(&corpus, &hits, &faults());
        // A stall to the expiry inside a superseded append: from entry 0, at append's
        // before/after-check points only.
        let to_expiry: Vec<&Aim> = all
            .iter()
            .filter(|a| {
                a.lever == Lever::StallToExpiry && a.points.contains(&FaultPoint::SqliteAppendAfterCheck)
            })
            .collect();
        assert!(!to_expiry.is_empty());
        for a in &to_expiry {
            assert_eq!(a.parents, vec![0]);
            assert!(a.points.iter().all(|p| p.name().starts_with("sqlite.append.")
                && matches!(p.moment(), Moment::Before | Moment::AfterCheck)));
        }
        // A crash after an append's commit: only where the scenario allows the crash.
        assert!(all.iter().any(|a| a.lever == Lever::CrashAfterCommit
            && a.points == vec![FaultPoint::SqliteAppendAfterCommit]
            && a.parents == vec![0]));
        // An engine crash point with recoveries never seen: from the entry that reached it.
        assert!(all
            .iter()
            .any(|a| a.points == vec![FaultPoint::EngineSettleAfterRunSettle] && a.parents == vec![1]));
        // No aim for an operation and relation no entry reached (nothing to start from).
        assert!(!all.iter().any(|a| a.points.iter().any(|p| p.name().starts_with("sqlite.blob_put."))));
        // Once reached, a state is no longer aimed at.
        let i =
            universe().iter().position(|n| n == "call:append:superseded:refused:stall_to_expiry").unwrap();
        hits[i] = 1;
        let fewer = aims(&corpus, &hits, &faults());
        assert!(fewer.len() < all.len());
    }

    #[test]
    fn an_uncut_cascade_step_is_aimed_at_from_an_entry_that_deleted_a_run() {
        use FaultPoint::*;
        let corpus =
            vec![entry(&["call:append:live_holder:applied:none"], &[]), entry(&["delete_overlap:none"], &[])];
        let faults = FaultProfile {
            points: FaultPoint::ALL.to_vec(),
            crash_points: vec![SqliteBlobPutAfterCommit, SqliteBlobDeleteAfterCommit],
            contend_per_mille: (0, 300),
            ..FaultProfile::none()
        };
        let mut hits = vec![0u64; universe().len()];
        let cut_aims = |hits: &[u64]| -> Vec<(Lever, Vec<FaultPoint>, Vec<usize>)> {
            aims(&corpus, hits, &faults)
                .into_iter()
                .filter(|a| {
                    a.points.iter().any(|p| {
                        matches!(
                            p,
                            SqliteBlobPutAfterCommit
                                | SqliteBlobDeleteBeforeBegin
                                | SqliteBlobDeleteAfterCommit
                                | SqliteDeleteBeforeBegin
                        )
                    }) && a.parents == vec![1]
                })
                .map(|a| (a.lever, a.points, a.parents))
                .collect()
        };
        let all = cut_aims(&hits);
        for want in [
            (Lever::CrashAfterCommit, vec![SqliteBlobPutAfterCommit]),
            (Lever::Contend, vec![SqliteBlobDeleteBeforeBegin]),
            (Lever::CrashAfterCommit, vec![SqliteBlobDeleteAfterCommit]),
            (Lever::Contend, vec![SqliteDeleteBeforeBegin]),
        ] {
            assert_eq!(
                all.iter().filter(|a| (a.0, &a.1) == (want.0, &want.1)).count(),
                1,
                "{want:?} in {all:?}"
            );
        }
        // Every cut at the record reached: only the blob-delete step is aimed at.
        for (i, n) in universe().iter().enumerate() {
            if n.starts_with("cut:record:") {
                hits[i] = 1;
            }
        }
        let fewer = cut_aims(&hits);
        assert_eq!(fewer.len(), 2, "{fewer:?}");
        assert!(fewer
            .iter()
            .all(|a| a.1 == vec![SqliteBlobDeleteAfterCommit] || a.1 == vec![SqliteDeleteBeforeBegin]));
    }

    #[test]
    fn point_rarity_falls_with_the_entries_that_reached_a_point() {
        let a = FaultPoint::SqliteAppendAfterCheck;
        let b = FaultPoint::EngineSettleAfterRunSettle;
        let corpus = vec![entry(&[], &[(0, a, 3), (1, a, 1)]), entry(&[], &[(0, a, 1), (0, b, 1)])];
        let w = point_rarity(&corpus);
        assert_eq!(w[a.index()], (1 << 16) / 3, "two entries (one counted once for two nodes)");
        assert_eq!(w[b.index()], (1 << 16) / 2);
        assert_eq!(w[FaultPoint::SqliteRenewAfterCheck.index()], 1 << 16);
    }

    #[test]
    fn a_shift_moves_a_takeover_pause_within_half_to_twice_its_successor_writes() {
        let mut base = entry(&[], &[]).plan;
        base.knobs.nodes = 1; // no other node to move to: a shift retimes or moves the occurrence
        base.decisions = vec![Decision {
            node: 0,
            point: FaultPoint::SqliteAppendBeforeBegin.name().into(),
            occurrence: 5,
            action: Action::PauseUntilTakeover { writes: 6, same_op: true },
        }];
        let (mut earlier, mut later, mut moved) = (0, 0, 0);
        for i in 0..200 {
            let mut plan = base.clone();
            shift(&mut crate::seed::rng(4, "shift-test", i), &mut plan);
            let d = &plan.decisions[0];
            match d.action {
                Action::PauseUntilTakeover { writes: 6, same_op: true } => {
                    assert_ne!(d.occurrence, 5, "a shift changes something");
                    moved += 1;
                }
                Action::PauseUntilTakeover { writes, same_op: true } if writes < 6 => {
                    assert!(writes >= 3, "at most half as many earlier: {writes}");
                    assert_eq!(d.occurrence, 5);
                    earlier += 1;
                }
                Action::PauseUntilTakeover { writes, same_op: true } => {
                    assert!(writes <= 12, "at most twice as many later: {writes}");
                    assert_eq!(d.occurrence, 5);
                    later += 1;
                }
                other => panic!("a shift turned the pause into {other:?}"),
            }
        }
        assert!(earlier > 20 && later > 20 && moved > 40, "{earlier} earlier, {later} later, {moved} moved");
    }

    #[test]
    fn successor_writes_fall_log_uniformly_in_one_to_fifteen() {
        let mut bands = [0u32; 4];
        let mut r = crate::seed::rng(5, "writes-test", 0);
        for _ in 0..4000 {
            let w = successor_writes(&mut r);
            assert!((1..=15).contains(&w), "{w}");
            bands[(31 - w.leading_zeros()) as usize] += 1;
        }
        assert!(
            bands.iter().all(|&b| (850..=1150).contains(&b)),
            "a quarter each of 1, 2-3, 4-7, 8-15: {bands:?}"
        );
    }
}
