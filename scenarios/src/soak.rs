//! `soak`: rulvar's multi-process soak, re-created on simulated processes: N writers storm
//! one run through every fenced surface until DEFAULT_SOAK_QUORUM is met (or the 60 s
//! virtual cap), with swarm faults at every store fault point, including crashes and
//! restarts that rulvar's real soak cannot do.
//!
//! Knobs: 3 to 5 writers, ttl 250 ms (rulvar's default), cap 60 s of virtual time.
//!
//! The variants differ in surfaces and fault emphasis: `f3-check-then-mutate` storms the
//! always-fenced surfaces with faults only between the fence check and the mutation (its
//! key points), `boot-race` boots 6-8 processes with faults only inside the bootstrap (key
//! point: the DDL transaction). The shrinker may drop writers down to two.

use std::any::Any;
use std::rc::Rc;
use std::time::Duration;

use sim::actors::soak::{referee, Activity, SoakShared, Writer, WriterSpec};
use sim::history::FinalState;
use sim::history::History;
use sim::oracle::Violation;
use sim::plan::{FaultProfile, Knobs, Plan};
use sim::seed::{rng, Draw};
use sim::verdict::{required, Required};
use sim::world::{NodeCtx, Scenario, WorldState};
use store::{FaultPoint, LocalFuture, Moment};

use sim::actors::soak::Surfaces;

/// A soak variant: its name, writer count range, surfaces and fault emphasis.
pub struct Soak {
    pub name: &'static str,
    pub describe: &'static str,
    pub writers: (u64, u64),
    pub surfaces: Surfaces,
    pub emphasis: Emphasis,
    /// The coverage goals a sweep must meet, each in a share of its seeds.
    pub coverage: &'static [Required],
}

/// Where the swarm puts its faults.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Emphasis {
    /// Every store fault point.
    Everywhere,
    /// The fence check windows of append, renew and release (stalls past the ttl).
    CheckWindows,
    /// Only the constructor's bootstrap (yields and short stalls), no crashes.
    Boot,
}

/// rulvar's soak, every surface, swarm faults everywhere.
pub static SOAK: Soak = Soak {
    name: "soak",
    describe: "rulvar's multi-process soak writer protocol until the activity quorum, with swarm faults",
    writers: (3, 5),
    surfaces: Surfaces::All,
    emphasis: Emphasis::Everywhere,
    coverage: &[
        required("takeover_of_a_silent_holder", 900),
        required("superseded_write_refused", 900),
        required("busy_met", 150),
        required("crash_after_commit", 10),
        required("restarted_process_wrote", 25),
    ],
};

/// F3: the soak over the always-fenced surfaces, stalls aimed at the check-to-mutation gap.
pub static F3_CHECK_THEN_MUTATE: Soak = Soak {
    name: "f3-check-then-mutate",
    describe:
        "writers storm append/renew/release with stalls past the ttl between fence check and mutation (F3)",
    writers: (3, 4),
    surfaces: Surfaces::LeaseCore,
    emphasis: Emphasis::CheckWindows,
    coverage: &[
        required("takeover_of_a_silent_holder", 900),
        required("superseded_write_refused", 900),
        required("busy_met", 400),
    ],
};

/// B: six to eight processes construct the store over one fresh file at the same instant.
pub static BOOT_RACE: Soak = Soak {
    name: "boot-race",
    describe: "6-8 processes construct the store over one fresh file at the same instant, then soak (B)",
    writers: (6, 8),
    surfaces: Surfaces::All,
    emphasis: Emphasis::Boot,
    coverage: &[
        required("takeover_of_a_silent_holder", 900),
        required("superseded_write_refused", 900),
        required("busy_met", 250),
    ],
};

/// The F3 windows: between the fence check and the mutation of append, renew and release.
const CHECK_WINDOWS: &[FaultPoint] = &[
    FaultPoint::SqliteAppendAfterCheck,
    FaultPoint::SqliteRenewAfterCheck,
    FaultPoint::SqliteReleaseAfterCheck,
];

/// The constructor's bootstrap.
const BOOT_POINTS: &[FaultPoint] = &[
    FaultPoint::SqliteBootOpen,
    FaultPoint::SqliteBootAfterWal,
    FaultPoint::SqliteBootSchema,
    FaultPoint::SqliteBootBeforeCommit,
];

/// Inside the DDL transaction: where concurrent boots collide.
const BOOT_KEY: &[FaultPoint] = &[FaultPoint::SqliteBootSchema];

impl Soak {
    /// rulvar's quorum; the lease-core variant counts only the surfaces it storms. A `size`
    /// N above 0 asks for at most N of each activity (the small configuration has size 1,
    /// see `small_knobs`).
    fn quorum(&self, knobs: &Knobs) -> Activity {
        let full = self.surfaces.quorum();
        if knobs.size == 0 {
            return full;
        }
        let small = |n: u64| n.min(u64::from(knobs.size));
        Activity {
            epochs: small(full.epochs),
            stale_rejects: small(full.stale_rejects),
            appends: small(full.appends),
            meta_writes: small(full.meta_writes),
            blob_puts: small(full.blob_puts),
            blob_deletes: small(full.blob_deletes),
            victim_cycles: small(full.victim_cycles),
            live_cross_rejects: small(full.live_cross_rejects),
            busy_retries: 0,
        }
    }
}

fn shared(world: &WorldState) -> Rc<SoakShared> {
    world.shared_as::<SoakShared>()
}

impl Scenario for Soak {
    fn name(&self) -> &'static str {
        self.name
    }

    fn describe(&self) -> &'static str {
        self.describe
    }

    fn knobs(&self, seed: u64) -> Knobs {
        let mut r = rng(seed, "knobs", 0);
        Knobs {
            nodes: r.between(self.writers.0, self.writers.1) as u32,
            ttl_ms: 250,
            size: 0,
            cap_ms: 60_000,
        }
    }

    fn faults(&self, _knobs: &Knobs) -> FaultProfile {
        match self.emphasis {
            Emphasis::Everywhere => {
                let points: Vec<FaultPoint> =
                    FaultPoint::ALL.iter().copied().filter(|p| p.moment() != Moment::Engine).collect();
                let crash_points = points
                    .iter()
                    .copied()
                    .filter(|p| !matches!(p.moment(), Moment::Before | Moment::Boot))
                    .collect();
                FaultProfile::at(points)
                    .active(150, 500)
                    .fire(5, 60)
                    .stalls((200, 600), (100, 500), 160)
                    .crashes(0, 80, crash_points)
                    .contends(0, 300)
                    .occurrences(300)
                    .clocks(20, 200)
            }
            // Stalls (often past the ttl) and yields between the fence check and the
            // mutation of the three surfaces the writers storm; no crashes, no boot faults.
            Emphasis::CheckWindows => FaultProfile::at(CHECK_WINDOWS.to_vec())
                .active(600, 1000)
                .fire(20, 120)
                .stalls((400, 900), (300, 800), 160)
                .occurrences(300)
                .clocks(20, 200),
            // Yields and short stalls inside the constructor's bootstrap only.
            Emphasis::Boot => FaultProfile::at(BOOT_POINTS.to_vec())
                .active(500, 1000)
                .fire(300, 900)
                .stalls((0, 500), (0, 0), 160)
                .occurrences(2)
                .clocks(20, 200),
        }
    }

    fn coverage(&self) -> &'static [Required] {
        self.coverage
    }

    fn key_points(&self) -> &'static [FaultPoint] {
        match self.emphasis {
            Emphasis::Everywhere => &[],
            Emphasis::CheckWindows => CHECK_WINDOWS,
            Emphasis::Boot => BOOT_KEY,
        }
    }

    fn smaller_knobs(&self, knobs: &Knobs) -> Vec<Knobs> {
        (2..knobs.nodes).map(|nodes| Knobs { nodes, ..knobs.clone() }).collect()
    }

    /// Two writers, one run, a small quorum (`size` 1: at most one of each activity) and a
    /// 30 s cap. The cap is loose on purpose: a run stops at its quorum, usually within a
    /// second, and the small workload's one or two operations per tenure can go 10 s without
    /// rolling a victim cycle (the exhaustive K=2 enumeration met one such plan at a 10 s
    /// cap). The boot race has no small configuration (its point is many processes).
    fn small_knobs(&self) -> Option<Knobs> {
        (self.emphasis != Emphasis::Boot).then_some(Knobs { nodes: 2, ttl_ms: 250, size: 1, cap_ms: 30_000 })
    }

    fn shared(&self, plan: &Plan) -> Rc<dyn Any> {
        Rc::new(SoakShared::new(plan.seed, plan.knobs.ttl_ms, plan.knobs.nodes, plan.knobs.size > 0))
    }

    fn node_main(&self, node: NodeCtx) -> LocalFuture<'static, ()> {
        let surfaces = self.surfaces;
        Box::pin(async move {
            let shared = shared(&node.world);
            let spec = WriterSpec {
                w: node.index,
                incarnation: node.incarnation,
                seed: shared.seed,
                ttl_ms: shared.ttl_ms,
                surfaces,
                small: shared.small,
            };
            let writer = Writer::new(spec, node.store, node.env.clone(), shared.clone());
            match writer.run().await {
                Ok(()) => {}
                Err(fatal) => {
                    shared.events.borrow_mut().push(sim::actors::soak::SoakEvent {
                        w: node.index,
                        kind: "fatal",
                        surface: None,
                        epoch: None,
                        nonce: None,
                        message: Some(fatal.0),
                    });
                }
            }
            shared.done.borrow_mut()[node.index as usize] = true;
        })
    }

    fn supervise(&self, world: Rc<WorldState>) -> LocalFuture<'static, ()> {
        let quorum = self.quorum(&world.plan.knobs);
        Box::pin(async move {
            let shared = shared(&world);
            let cap = Duration::from_millis(world.plan.knobs.cap_ms);
            let start = sim::time::now_ns();
            loop {
                madsim::time::sleep(Duration::from_millis(100)).await;
                if shared.activity().meets(&quorum) {
                    break;
                }
                // A writer died of a fatal error: the quorum may be out of reach, so end the
                // storm instead of running it to the cap. (A reported stale accept does not end
                // it: the storm runs on to the quorum, as rulvar's does, so one flaw does not
                // hide the others.)
                if shared.events.borrow().iter().any(|e| e.kind == "fatal") {
                    break;
                }
                if sim::time::now_ns() - start >= cap.as_nanos() as u64 {
                    break;
                }
            }
            shared.stop.set(true);
            // Let the writers finish their tenures (bounded).
            world.wait_for_nodes(&shared.done).await;
        })
    }

    fn scenario_checks(&self, world: &WorldState, _history: &History, _fin: &FinalState) -> Vec<Violation> {
        let shared = shared(world);
        let within = format!("{}ms of virtual time", world.plan.knobs.cap_ms);
        let events = shared.events.borrow();
        referee(&events, &self.quorum(&world.plan.knobs), &within)
    }

    fn contiguous_seqs(&self) -> bool {
        true
    }
}
