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
//!
//! A plan derived from a seed can run before its decisions are written out: each
//! (node, point) has its own stream, so the world draws a stream exactly as far as the run
//! reaches that point (`LazyDecisions`), and `Plan::materialize` later writes out the same
//! decisions in full. A sweep writes out only the plans of failing seeds.

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
    /// Sleep until this node's clock reads `ms` before the run's lease expiry (as the lease
    /// row stands when the point is reached): the holder's last live instants, where the
    /// contract still admits the holder and a fence that refuses a moment early does not.
    /// The other side of [`Action::StallToExpiry`]'s boundary.
    StallToBeforeExpiry { ms: u64 },
    /// The whole process freezes here for `ms` (virtual time): every task of the node stops,
    /// its lease heartbeat included, holding whatever it holds (SIGSTOP, a long GC pause, a
    /// suspended VM; Jepsen's pause nemesis). A stall holds one task only.
    Pause { ms: u64 },
    /// The whole process freezes here until the run the point acts for has been taken over
    /// and the successor has written: `writes` counts the run's first grant under a later
    /// epoch than the caller's, then every mutation of the run another process applied after
    /// it (with or without a lease). The pause of Kleppmann's fencing example, timed by what
    /// the successor did instead of by a length drawn blind: the process resumes the instant
    /// the last awaited write commits, and the committing task waits a microsecond, so the
    /// paused process's next step lands right after that write, inside the successor's
    /// tenure. Bounds: [`TAKEOVER_WAIT_TTLS`] ttls at most, or one ttl when the process
    /// paused holding the store's write lock (nothing commits, callers meet Busy: no
    /// takeover can come), checked every tenth of the ttl; a point that names no run, or
    /// whose run has neither a lease row nor the caller's epoch, pauses 1.5 ttl.
    ///
    /// With `same_op`, `writes` counts only the successor's writes of the operation the
    /// paused call makes (a pause at `sqlite.blob_put.*` waits for the successor's blob
    /// puts; the grant does not count): the stale write lands right after the successor's
    /// `writes`-th write of the same kind, the overwrite of Kleppmann's example. A point of
    /// no store operation counts every write, as without it.
    PauseUntilTakeover {
        writes: u32,
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        same_op: bool,
    },
    /// The whole process freezes here until ANOTHER process acquires the run the point acts
    /// for and has written, whether or not the run is leased now: as
    /// [`Action::PauseUntilTakeover`], with the run's last granted epoch (its lease row's,
    /// else the store's epoch high-water mark, else 0) as the baseline, so the next grant of a
    /// released or never-leased run counts as the takeover. Its place is right before an
    /// acquire: whatever the caller read before it (a resume's prepared journal, a sweep's
    /// listing, a retention pass's candidates) goes stale while a whole tenure of another
    /// process runs, and the caller then acquires a run that changed under it. Same bounds
    /// as [`Action::PauseUntilTakeover`]; a point that names no run pauses 1.5 ttl.
    PauseUntilAcquired { writes: u32 },
    /// Another writer holds the database's write lock across this call: at a point before a
    /// store write begins, a connection of the harness (a process sharing the file that the
    /// scenario does not otherwise run, as a CLI or another worker pool would) opens
    /// `BEGIN IMMEDIATE`, so the call's own transaction meets a real `SQLITE_BUSY` (the
    /// store's `busy_timeout` is 0). The writer rolls back, having written nothing, when this
    /// node next reaches a fault point outside the contended call, or 1 ms (virtual) later,
    /// whichever comes first ([`CONTENTION_MS`]). Every other process's writes meet the same
    /// lock meanwhile. A run has one contending writer: a new contention ends the one before.
    /// Elsewhere (a read, an engine point) it is a yield.
    Contend,
    /// At an engine moment: the process's next write of the point's run meets another
    /// writer's lock, as [`Action::Contend`] at that write's moment before it begins (the
    /// engine point names the write that follows it: after a paid call, its billing receipt;
    /// after a tool, the checkpoint put; before a settle, the run_settle append). Nothing
    /// happens at the engine point itself, not even a yield, so no other task of the process
    /// comes between; the arm lapses when the process dies. Elsewhere it is a yield.
    ContendNextWrite,
}

/// How long a [`Action::Contend`] writer holds the write lock at most, in virtual ms.
pub const CONTENTION_MS: u64 = 1;

/// Whether [`Action::Contend`] can act at `point`: the moment before a store write begins.
/// (Every store write has a `before_begin` point; reads have `before_read`.)
pub fn contendable(point: FaultPoint) -> bool {
    point.moment() == store::Moment::Before && point.name().ends_with(".before_begin")
}

/// The longest a [`Action::PauseUntilTakeover`] waits, in ttls.
pub const TAKEOVER_WAIT_TTLS: u64 = 8;

impl Action {
    pub fn describe(&self) -> String {
        match self {
            Action::Yield => "yield".into(),
            Action::Stall { ms } => format!("stall {ms}ms"),
            Action::Crash { restart_after_ms } => format!("crash (restart +{restart_after_ms}ms)"),
            Action::StallToExpiry => "stall to the lease expiry".into(),
            Action::StallToBeforeExpiry { ms } => format!("stall to {ms}ms before the lease expiry"),
            Action::Pause { ms } => format!("pause the process {ms}ms"),
            Action::PauseUntilTakeover { writes, same_op } => {
                format!(
                    "pause the process until taken over ({writes} successor write{}{})",
                    if *writes == 1 { "" } else { "s" },
                    if *same_op { " of the same operation" } else { "" }
                )
            }
            Action::PauseUntilAcquired { writes } => format!(
                "pause the process until another acquires the run ({writes} write{} of its)",
                if *writes == 1 { "" } else { "s" }
            ),
            Action::Contend => "contend: another writer holds the write lock".into(),
            Action::ContendNextWrite => {
                "contend at the next write: another writer will hold the write lock".into()
            }
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

/// The knobs a world runs with: a plan file or corpus entry outside these is refused
/// ([`Knobs::check`]) before anything is drawn from it.
pub const NODES_MAX: u32 = 64;
pub const TTL_MS_MIN: u64 = 20;
pub const TTL_MS_MAX: u64 = 3_600_000;
pub const CAP_MS_MAX: u64 = 86_400_000;

impl Knobs {
    /// Refuse knobs no world can run: a node count outside `1..=NODES_MAX`, a ttl outside
    /// `TTL_MS_MIN..=TTL_MS_MAX` (every stall and restart a plan draws is a share of the ttl,
    /// and a crash restarts 20 ms to two ttls later, so a shorter ttl leaves a draw with no
    /// range and a longer one stalls for days of virtual time), a cap outside
    /// `1..=CAP_MS_MAX`.
    pub fn check(&self) -> Result<(), String> {
        if !(1..=NODES_MAX).contains(&self.nodes) {
            return Err(format!("the plan's knobs name {} nodes; a world runs 1 to {NODES_MAX}", self.nodes));
        }
        if !(TTL_MS_MIN..=TTL_MS_MAX).contains(&self.ttl_ms) {
            return Err(format!(
                "the plan's knobs name a {} ms ttl; a world runs {TTL_MS_MIN} to {TTL_MS_MAX} ms",
                self.ttl_ms
            ));
        }
        if !(1..=CAP_MS_MAX).contains(&self.cap_ms) {
            return Err(format!(
                "the plan's knobs name a {} ms cap; a world runs 1 to {CAP_MS_MAX} ms",
                self.cap_ms
            ));
        }
        Ok(())
    }

    /// The shrinker's usual smaller knobs: each node count from `min_nodes` below this one,
    /// then each `size` from 1 below this one, the rest unchanged.
    pub fn fewer_nodes_then_smaller_size(&self, min_nodes: u32) -> Vec<Knobs> {
        let fewer_nodes = (min_nodes..self.nodes).map(|nodes| Knobs { nodes, ..self.clone() });
        let smaller = (1..self.size).map(|size| Knobs { size, ..self.clone() });
        fewer_nodes.chain(smaller).collect()
    }
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
    /// the lease expiry instant, a third of them to 1 ms before it (each drawn from its own
    /// stream, so the other decisions stay put).
    #[serde(default)]
    pub expiry_stall_per_mille: u32,
    /// Of the stalls past the ttl: the share that pause the whole process instead, half of
    /// them for the stall's length ([`Action::Pause`]), half until the run was taken over
    /// ([`Action::PauseUntilTakeover`]); drawn from its own stream too. Seed sweeps draw none.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub pause_per_mille: u32,
    /// Of the yields at the moment before a store write begins ([`contendable`]): the share
    /// turned into a contended write ([`Action::Contend`]), drawn from its own stream. A plan
    /// saved before contention existed reads 0 and replays as it did.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub contend_per_mille: u32,
    /// Per occurrence of an engine moment the scenario names (`FaultProfile::contend_next`)
    /// that is active and does not fire otherwise: the chance it arms a contention of the
    /// process's next write ([`Action::ContendNextWrite`]), drawn from its own stream. A plan
    /// saved before it existed reads 0 and replays as it did.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub contend_next_per_mille: u32,
    /// Of the worker stops a scenario draws, the share delivered as an interrupt at one of
    /// the worker's own leased writes instead of at a time (the write then stalls with the
    /// stop in flight; see [`crate::world_state::WorldState::arm_interrupt`]). Every derived
    /// plan carries [`INTERRUPT_PER_MILLE`]; a plan saved before interrupts existed reads 0
    /// and replays as it did.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub interrupt_per_mille: u32,
    /// Whether a scenario that mixes its workers (`queue`) runs rulvar's default worker (no
    /// retention, listing `statuses: [running, suspended]`) on its odd nodes. Every derived
    /// plan carries `true`; a plan saved before default workers existed reads `false` and
    /// replays as it did (every worker applying retention).
    #[serde(default, skip_serializing_if = "is_false")]
    pub default_workers: bool,
    /// Whether a scenario's user actors run where it has them (`queue-solo`: every process's
    /// status page, and the hosts' double-clicked retries; see `EngineScenario::status_page`
    /// and `EngineScenario::double_clicks`). Every derived plan carries `true`; a plan saved
    /// before they existed reads `false` and replays as it did (their calls take the
    /// process's call lock, so they move its schedule).
    #[serde(default, skip_serializing_if = "is_false")]
    pub user_actors: bool,
    /// The revision of the scenarios' workloads the plan was derived under. Every derived
    /// plan carries [`WORKLOAD`]; a plan saved before revisions existed reads 0 and runs the
    /// workload of its time, so a stored finding replays as it did. Revision 1: `queue`'s
    /// and `queue-solo`'s hosts also start `survey` runs. Revision 2: their hosts' retries
    /// now and then pick from the runs listed as failed (`EngineScenario::retry_failed`).
    /// Revision 3: their paid calls have a price and their runs a budget drawn for it
    /// (`EngineScenario::priced`), so some runs settle `exhausted`, and `queue`'s operators
    /// now and then pause between an audit and its repair (`QueueShared::review_repairs`), and
    /// each `edges` round ends with an unleased writer on a run nobody leases. Revision 4:
    /// `delete-cuts`' hosts also start `approval` runs and now and then abandon one they see
    /// suspended with an unleased delete (`EngineScenario::abandons`). Revision 5: a tight
    /// budget in a priced scenario may be 0 dollars (`draw_budget`), and `edges`' meta probe
    /// also writes empty values (an empty tag list, an empty name, empty extra fields), and
    /// `delete-cuts`' hosts now and then delete a run of their own they read stuck `running`,
    /// under a brief lease. Revision 6: they do so at every such read (the lease is granted
    /// only once the holder's lapsed), and `queue` is a rolling deploy: its odd nodes'
    /// workers lack one workflow of the scenario (`EngineScenario::rolling_deploy`).
    /// Revision 7: `queue-solo` contends some billing receipts
    /// (`EngineScenario::receipt_contention`, [`Action::ContendNextWrite`]), and half the
    /// seeds of a priced scenario draw a price per paid call other than 25 cents, most of
    /// them dividing no dollar budget (`draw_price`), and `edges`' unleased writer may
    /// repeat its journal at seq 0, below its first entry.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub workload: u32,
}

/// The workload revision derived plans carry (see [`Swarm::workload`]).
pub const WORKLOAD: u32 = 7;

/// The share of drawn worker stops that derived plans deliver as interrupts, per mille.
pub const INTERRUPT_PER_MILLE: u32 = 400;

fn is_zero(v: &u32) -> bool {
    *v == 0
}

fn is_false(v: &bool) -> bool {
    !*v
}

impl Swarm {
    /// No point active, nothing fires (a plan whose decisions are all written out).
    pub fn none() -> Swarm {
        Swarm {
            active_points: Vec::new(),
            fire_per_mille: 0,
            stall_per_mille: 0,
            stall_past_ttl_per_mille: 0,
            crash_per_mille: 0,
            expiry_stall_per_mille: 0,
            pause_per_mille: 0,
            contend_per_mille: 0,
            contend_next_per_mille: 0,
            interrupt_per_mille: 0,
            default_workers: false,
            user_actors: false,
            workload: WORKLOAD,
        }
    }
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
    /// A plan derived from its seed but not yet written out: the recipe its decisions are
    /// drawn from, one (node, point) stream at a time (see [`Plan::generate_lazy`]). `None`
    /// for a plan whose `decisions` are complete (every saved or loaded plan).
    #[serde(skip)]
    pub recipe: Option<Recipe>,
}

/// Everything the per-(node, point) decision streams of a derived plan depend on.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Recipe {
    /// The active points, in name order.
    pub active: Vec<FaultPoint>,
    pub crash_points: Vec<FaultPoint>,
    /// The engine moments that may arm a next-write contention.
    pub contend_next_points: Vec<FaultPoint>,
    pub occurrences: u32,
    pub stall_past_ttl_max_pct: u64,
}

impl Recipe {
    /// The decision for `occurrence` of `point` on `node`, drawing from `r`, the (node, point)
    /// stream, which must have drawn every earlier occurrence already.
    fn draw(
        &self,
        plan: &Plan,
        r: &mut rand_chacha::ChaCha8Rng,
        node: u32,
        point: FaultPoint,
        occurrence: u32,
    ) -> Option<Action> {
        let sw = &plan.swarm;
        let ttl_ms = plan.knobs.ttl_ms;
        // Drawn from its own stream, only where the point does not fire otherwise: every
        // other decision stays put.
        let contend_next = || {
            sw.contend_next_per_mille > 0
                && self.contend_next_points.contains(&point)
                && rng(plan.seed, "contend-next", stream_index(node, &point, occurrence))
                    .chance(sw.contend_next_per_mille)
        };
        if !r.chance(sw.fire_per_mille) {
            return contend_next().then_some(Action::ContendNextWrite);
        }
        let action = if self.crash_points.contains(&point) && r.chance(sw.crash_per_mille) {
            Action::Crash { restart_after_ms: r.between(20, 2 * ttl_ms) }
        } else if r.chance(sw.stall_per_mille) {
            if r.chance(sw.stall_past_ttl_per_mille) {
                Action::Stall {
                    ms: r.between(ttl_ms * 105 / 100, ttl_ms * self.stall_past_ttl_max_pct.max(106) / 100),
                }
            } else {
                Action::Stall { ms: r.between(1, 20) }
            }
        } else {
            Action::Yield
        };
        Some(match action {
            Action::Stall { .. }
                if matches!(point.moment(), store::Moment::Before | store::Moment::AfterCheck)
                    && rng(plan.seed, "expiry-stall", stream_index(node, &point, occurrence))
                        .chance(sw.expiry_stall_per_mille) =>
            {
                // A third of them stop 1 ms short of the instant instead (their own stream):
                // both sides of the boundary.
                if rng(plan.seed, "expiry-edge", stream_index(node, &point, occurrence)).chance(333) {
                    Action::StallToBeforeExpiry { ms: 1 }
                } else {
                    Action::StallToExpiry
                }
            }
            Action::Stall { ms } if ms > ttl_ms && sw.pause_per_mille > 0 => {
                let mut t = rng(plan.seed, "pause", stream_index(node, &point, occurrence));
                if !t.chance(sw.pause_per_mille) {
                    Action::Stall { ms }
                } else if t.chance(500) {
                    Action::Pause { ms }
                } else {
                    Action::PauseUntilTakeover { writes: t.between(1, 8) as u32, same_op: false }
                }
            }
            Action::Yield
                if sw.contend_per_mille > 0
                    && contendable(point)
                    && rng(plan.seed, "contend", stream_index(node, &point, occurrence))
                        .chance(sw.contend_per_mille) =>
            {
                Action::Contend
            }
            other => other,
        })
    }
}

/// A derived plan's decisions, drawn as the run reaches each (node, point, occurrence):
/// exactly the decisions [`Plan::materialize`] would write out, without drawing the
/// occurrences the run never reaches.
pub struct LazyDecisions {
    plan: Plan,
    recipe: Recipe,
    /// Per `node * FaultPoint::ALL.len() + point.index()`: the stream and the next
    /// occurrence it will draw (`None`: the point is not active, or not reached yet).
    streams: std::cell::RefCell<Vec<Option<(rand_chacha::ChaCha8Rng, u32)>>>,
    active: Vec<bool>,
}

impl LazyDecisions {
    pub fn new(plan: &Plan, recipe: Recipe) -> LazyDecisions {
        let mut active = vec![false; FaultPoint::ALL.len()];
        for p in &recipe.active {
            active[p.index()] = true;
        }
        let slots = plan.knobs.nodes as usize * FaultPoint::ALL.len();
        LazyDecisions {
            plan: Plan { decisions: Vec::new(), recipe: None, ..plan.clone() },
            recipe,
            streams: std::cell::RefCell::new((0..slots).map(|_| None).collect()),
            active,
        }
    }

    /// Whether no decision can ever fire (no active point, or nothing fires).
    pub fn is_empty(&self) -> bool {
        self.recipe.active.is_empty() || self.recipe.occurrences == 0 || self.plan.swarm.fire_per_mille == 0
    }

    /// The action for `occurrence` (counted from 1) of `point` on `node`. Occurrences must be
    /// asked in increasing order per (node, point); skipped ones are drawn and discarded.
    pub fn decide(&self, node: u32, point: FaultPoint, occurrence: u32) -> Option<Action> {
        if !self.active[point.index()]
            || occurrence > self.recipe.occurrences
            || node >= self.plan.knobs.nodes
        {
            return None;
        }
        let mut streams = self.streams.borrow_mut();
        let slot = &mut streams[node as usize * FaultPoint::ALL.len() + point.index()];
        let (r, next) = slot.get_or_insert_with(|| (rng(self.plan.seed, point.name(), u64::from(node)), 1));
        // The world counts each (node, point) and asks once per occurrence: asking an earlier
        // one again would silently read a decision already discarded.
        assert!(
            occurrence >= *next,
            "occurrence {occurrence} of {} on n{node} asked after occurrence {} was drawn",
            point.name(),
            *next - 1
        );
        let mut out = None;
        while *next <= occurrence {
            let drawn = self.recipe.draw(&self.plan, r, node, point, *next);
            if *next == occurrence {
                out = drawn;
            }
            *next += 1;
        }
        out
    }
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
    /// Of the stalls past the ttl, the per-mille range that pause the whole process instead
    /// ([`Swarm::pause_per_mille`]). (0, 0) in every scenario's own profile.
    pub pause_per_mille: (u32, u32),
    /// Of the yields before a store write begins, the per-mille range turned into contended
    /// writes ([`Swarm::contend_per_mille`]).
    pub contend_per_mille: (u32, u32),
    /// The engine moments whose next write may be contended, and the per-mille range of
    /// [`Swarm::contend_next_per_mille`].
    pub contend_next: (Vec<FaultPoint>, (u32, u32)),
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
            pause_per_mille: (0, 0),
            contend_per_mille: (0, 0),
            contend_next: (Vec::new(), (0, 0)),
        }
    }

    /// Faults at these points, each setting still off: the scenario turns on what it uses
    /// with the setters below (a setter left out keeps [`FaultProfile::none`]'s value).
    pub fn at(points: Vec<FaultPoint>) -> FaultProfile {
        FaultProfile { points, ..FaultProfile::none() }
    }

    /// The per-mille range a point becomes active with, per seed.
    pub fn active(self, lo: u32, hi: u32) -> FaultProfile {
        FaultProfile { active_per_mille: (lo, hi), ..self }
    }

    /// The per-mille range an active point fires with, per occurrence.
    pub fn fire(self, lo: u32, hi: u32) -> FaultProfile {
        FaultProfile { fire_per_mille: (lo, hi), ..self }
    }

    /// The share of firings that stall (the rest yield), and of stalls that run past the
    /// ttl, up to `max_pct` percent of it.
    pub fn stalls(self, per_mille: (u32, u32), past_ttl_per_mille: (u32, u32), max_pct: u64) -> FaultProfile {
        FaultProfile {
            stall_per_mille: per_mille,
            stall_past_ttl_per_mille: past_ttl_per_mille,
            stall_past_ttl_max_pct: max_pct,
            ..self
        }
    }

    /// The share of firings that crash, and the points where a crash is allowed.
    pub fn crashes(self, lo: u32, hi: u32, at: Vec<FaultPoint>) -> FaultProfile {
        FaultProfile { crash_per_mille: (lo, hi), crash_points: at, ..self }
    }

    /// Of the stalls past the ttl, the per-mille range that pause the whole process.
    pub fn pauses(self, lo: u32, hi: u32) -> FaultProfile {
        FaultProfile { pause_per_mille: (lo, hi), ..self }
    }

    /// Of the yields before a store write begins, the per-mille range that contend.
    pub fn contends(self, lo: u32, hi: u32) -> FaultProfile {
        FaultProfile { contend_per_mille: (lo, hi), ..self }
    }

    /// At these engine moments, the per-mille range (per occurrence that does not fire
    /// otherwise) that contends the process's next write ([`Action::ContendNextWrite`]).
    pub fn contends_next(self, at: Vec<FaultPoint>, lo: u32, hi: u32) -> FaultProfile {
        FaultProfile { contend_next: (at, (lo, hi)), ..self }
    }

    /// How many occurrences per (node, point) the plan covers.
    pub fn occurrences(self, occurrences: u32) -> FaultProfile {
        FaultProfile { occurrences, ..self }
    }

    /// The clock skew bound (ms) and drift bound (ppm) each node draws within.
    pub fn clocks(self, skew_ms_max: i64, drift_ppm_max: i64) -> FaultProfile {
        FaultProfile { skew_ms_max, drift_ppm_max, ..self }
    }
}

impl Plan {
    /// Read a plan written out as JSON (`--plan-out`, a failure report's plan file).
    pub fn read(path: &std::path::Path) -> Result<Plan, String> {
        let text =
            std::fs::read_to_string(path).map_err(|e| format!("cannot read plan {}: {e}", path.display()))?;
        serde_json::from_str::<Plan>(&text).map_err(|e| format!("malformed plan {}: {e}", path.display()))
    }

    /// Derive the plan of `(scenario, profile, seed)` from the seed's fault stream, with
    /// every decision written out.
    pub fn generate(scenario: &str, profile: &str, seed: u64, knobs: Knobs, faults: &FaultProfile) -> Plan {
        let mut plan = Plan::generate_lazy(scenario, profile, seed, knobs, faults);
        plan.materialize();
        plan
    }

    /// As [`Plan::generate`], but the decisions stay a recipe until [`Plan::materialize`]:
    /// the world draws each (node, point) stream only as far as the run reaches it. The
    /// decisions are the same either way.
    pub fn generate_lazy(
        scenario: &str,
        profile: &str,
        seed: u64,
        knobs: Knobs,
        faults: &FaultProfile,
    ) -> Plan {
        let mut swarm_rng = rng(seed, "swarm", 0);
        let mut pick = |(lo, hi): (u32, u32)| swarm_rng.between(u64::from(lo), u64::from(hi)) as u32;
        let active_per_mille = pick(faults.active_per_mille);
        let fire_per_mille = pick(faults.fire_per_mille);
        let stall_per_mille = pick(faults.stall_per_mille);
        let stall_past_ttl_per_mille = pick(faults.stall_past_ttl_per_mille);
        let crash_per_mille = pick(faults.crash_per_mille);
        let expiry_stall_per_mille = pick((0, 300));
        // Drawn last and only when asked for, so every other plan draws as it always did.
        let pause_per_mille = if faults.pause_per_mille.1 > 0 { pick(faults.pause_per_mille) } else { 0 };
        // Its own stream, so a scenario that turns contention on keeps every other draw.
        let contend_per_mille = match faults.contend_per_mille {
            (_, 0) => 0,
            (lo, hi) => rng(seed, "contend-share", 0).between(u64::from(lo), u64::from(hi)) as u32,
        };
        let contend_next_per_mille = match faults.contend_next.1 {
            (_, 0) => 0,
            (lo, hi) => rng(seed, "contend-next-share", 0).between(u64::from(lo), u64::from(hi)) as u32,
        };

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

        let mut by_name = active.clone();
        by_name.sort_unstable_by_key(|p| p.name());
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
                pause_per_mille,
                contend_per_mille,
                contend_next_per_mille,
                interrupt_per_mille: INTERRUPT_PER_MILLE,
                default_workers: true,
                user_actors: true,
                workload: WORKLOAD,
            },
            decisions: Vec::new(),
            recipe: Some(Recipe {
                active: by_name,
                crash_points: faults.crash_points.clone(),
                contend_next_points: faults.contend_next.0.clone(),
                occurrences: faults.occurrences,
                stall_past_ttl_max_pct: faults.stall_past_ttl_max_pct,
            }),
        }
    }

    /// Write out every decision of a derived plan (a no-op for a complete one).
    pub fn materialize(&mut self) {
        let Some(recipe) = self.recipe.take() else { return };
        // Streams are independent per (node, point), so visiting the points in name order
        // yields the decisions already in the plan's sorted order.
        let mut decisions = Vec::new();
        for node in 0..self.knobs.nodes {
            for &point in &recipe.active {
                // One stream per (node, point): adding a point never reshuffles the others.
                let mut r = rng(self.seed, point.name(), u64::from(node));
                for occurrence in 1..=recipe.occurrences {
                    if let Some(action) = recipe.draw(self, &mut r, node, point, occurrence) {
                        decisions.push(Decision {
                            node,
                            point: point.name().to_string(),
                            occurrence,
                            action,
                        });
                    }
                }
            }
        }
        decisions.sort(); // one pass over an already sorted list
        self.decisions = decisions;
    }

    /// The decisions as a lookup table.
    pub fn table(&self) -> Result<BTreeMap<(u32, FaultPoint, u32), Action>, String> {
        self.knobs.check()?;
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
        if self.recipe.is_some() {
            return format!(
                "{} nodes, ttl {}ms, size {}, fault decisions derived from the seed, not written out ({} active points, fire {}‰)",
                self.knobs.nodes,
                self.knobs.ttl_ms,
                self.knobs.size,
                self.swarm.active_points.len(),
                self.swarm.fire_per_mille
            );
        }
        let crashes = self.decisions.iter().filter(|d| matches!(d.action, Action::Crash { .. })).count();
        let stalls = self
            .decisions
            .iter()
            .filter(|d| {
                matches!(
                    d.action,
                    Action::Stall { .. }
                        | Action::StallToExpiry
                        | Action::StallToBeforeExpiry { .. }
                        | Action::Pause { .. }
                        | Action::PauseUntilTakeover { .. }
                        | Action::PauseUntilAcquired { .. }
                )
            })
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

#[cfg(test)]
mod tests {
    #[test]
    fn knobs_no_world_can_run_are_refused_before_any_draw() {
        let faults = FaultProfile::at(vec![FaultPoint::SqliteAppendBeforeBegin]);
        let ok = Knobs { nodes: 2, ttl_ms: 250, size: 1, cap_ms: 1000 };
        let plan = |knobs: Knobs| Plan::generate("s", "current", 1, knobs, &faults);
        assert!(plan(ok.clone()).table().is_ok());
        for (knobs, says) in [
            (Knobs { ttl_ms: 1, ..ok.clone() }, "1 ms ttl"),
            (Knobs { ttl_ms: 2_147_483_647, ..ok.clone() }, "2147483647 ms ttl"),
            (Knobs { nodes: 0, ..ok.clone() }, "0 nodes"),
            (Knobs { cap_ms: 0, ..ok.clone() }, "0 ms cap"),
        ] {
            let mut p = plan(ok.clone());
            p.knobs = knobs;
            let e = p.table().expect_err("refused");
            assert!(e.contains(says), "{e}");
        }
    }

    use super::*;

    fn faults() -> FaultProfile {
        FaultProfile::at(FaultPoint::ALL.to_vec())
            .active(300, 900)
            .fire(20, 200)
            .stalls((200, 800), (100, 600), 160)
            .crashes(50, 300, FaultPoint::ALL.iter().copied().step_by(3).collect())
            .occurrences(40)
            .clocks(20, 200)
    }

    #[test]
    fn lazy_decisions_are_the_written_out_plan() {
        for seed in 0..20 {
            let knobs = Knobs { nodes: 3, ttl_ms: 250, size: 0, cap_ms: 1000 };
            let lazy_plan = Plan::generate_lazy("s", "current", seed, knobs.clone(), &faults());
            let full = Plan::generate("s", "current", seed, knobs, &faults());
            assert!(
                full.recipe.is_none() && !full.decisions.is_empty(),
                "seed {seed}: a plan with decisions"
            );
            let table = full.table().expect("a valid plan");
            let lazy = LazyDecisions::new(&lazy_plan, lazy_plan.recipe.clone().expect("a recipe"));
            let mut drawn = BTreeMap::new();
            for node in 0..3 {
                for &point in FaultPoint::ALL {
                    // Ask every other occurrence only: skipped ones must still be drawn.
                    for occurrence in (1..=45).filter(|o| node == 0 || o % 2 == 1) {
                        if let Some(a) = lazy.decide(node, point, occurrence) {
                            drawn.insert((node, point, occurrence), a);
                        }
                    }
                }
            }
            let want: BTreeMap<_, _> =
                table.into_iter().filter(|((node, _, occ), _)| *node == 0 || occ % 2 == 1).collect();
            assert_eq!(drawn, want, "seed {seed}");
            let mut materialized = lazy_plan.clone();
            materialized.materialize();
            assert_eq!(materialized, full, "seed {seed}: materialize writes out the same plan");
        }
    }

    #[test]
    #[should_panic(expected = "asked after occurrence")]
    fn asking_an_earlier_occurrence_again_is_a_harness_bug() {
        let knobs = Knobs { nodes: 2, ttl_ms: 250, size: 0, cap_ms: 1000 };
        let plan = Plan::generate_lazy("s", "current", 1, knobs, &faults());
        let lazy = LazyDecisions::new(&plan, plan.recipe.clone().expect("a recipe"));
        let point = *FaultPoint::ALL.iter().find(|p| lazy.active[p.index()]).expect("an active point");
        lazy.decide(0, point, 5);
        lazy.decide(0, point, 3);
    }
}
