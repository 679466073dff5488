//! `tombstone`: delete and recreate of one run id by processes that share a stable owner
//! identity, with zombie probes under leases from earlier incarnations of the run (T).
//!
//! Under a store that erases a run's epoch with the run, the recreated run's first grant
//! repeats an old epoch, so a zombie lease equal (run, owner, epoch) to the new holder's
//! passes the fence: the generic properties see a repeated grant
//! (`epochs_granted_once_and_increasing`) and a zombie write accepted under the new
//! grant (`no_stale_accept`, which knows each call's grant). Under the epoch tombstone
//! both hold.
//!
//! Knobs: 2 to 4 processes, ttl 100 ms, `size` = recreations and cross-incarnation probes
//! the quorum asks for (2 to 4), cap 30 s of virtual time. Faults: swarm stalls (some past
//! the ttl), yields and crashes around the window: the delete's commit, the acquire, and
//! the start of every lease-carrying write; and between the statements of a delete (most
//! of them unleased), so a delete that is not one transaction leaves half a run behind
//! for `journal_equals_serial_history`, `meta_is_last_accepted` and the read property.

use std::any::Any;
use std::rc::Rc;
use std::time::Duration;

pub mod tenant;

use sim::history::FinalState;
use sim::history::History;
use sim::oracle::Violation;
use sim::plan::{FaultProfile, Knobs, Plan};
use sim::seed::{rng, Draw};
use sim::verdict::{required, Required};
use sim::world::{NodeCtx, Scenario, WorldState};
use store::{FaultPoint, LocalFuture};

use tenant::{Tenant, TombShared};

/// The scenario.
pub struct Tombstone;

pub static TOMBSTONE: Tombstone = Tombstone;

/// The window: where a stall lets a recreate land before a zombie's write.
const WINDOW: &[FaultPoint] = &[
    FaultPoint::SqliteDeleteBeforeBegin,
    FaultPoint::SqliteDeleteAfterEntries,
    FaultPoint::SqliteDeleteAfterMeta,
    FaultPoint::SqliteDeleteBeforeCommit,
    FaultPoint::SqliteDeleteAfterCommit,
    FaultPoint::SqliteReleaseAfterCommit,
    FaultPoint::SqliteAcquireBeforeBegin,
    FaultPoint::SqliteAcquireAfterCommit,
    FaultPoint::SqliteAppendBeforeBegin,
    FaultPoint::SqliteAppendAfterCheck,
    FaultPoint::SqliteRenewBeforeBegin,
    FaultPoint::SqlitePutMetaBeforeBegin,
    FaultPoint::SqliteBlobPutBeforeBegin,
    FaultPoint::SqliteLoadBeforeRead,
];

/// The delete's commit (T) and the gaps between its statements (a delete must be atomic).
const KEY: &[FaultPoint] = &[
    FaultPoint::SqliteDeleteAfterCommit,
    FaultPoint::SqliteDeleteAfterEntries,
    FaultPoint::SqliteDeleteAfterMeta,
];

fn shared(world: &WorldState) -> Rc<TombShared> {
    world.shared_as::<TombShared>()
}

/// What a tombstone sweep must reach: takeovers, refused zombies, busy, crashes.
const COVERAGE: &[Required] = &[
    required("takeover_of_a_silent_holder", 700),
    required("superseded_write_refused", 900),
    required("busy_met", 100),
    required("crash_after_commit", 1),
    required("restarted_process_wrote", 8),
];

impl Scenario for Tombstone {
    fn name(&self) -> &'static str {
        "tombstone"
    }

    fn coverage(&self) -> &'static [Required] {
        COVERAGE
    }

    fn describe(&self) -> &'static str {
        "delete and recreate one run id under a stable owner identity; zombies probe with old leases (T)"
    }

    fn knobs(&self, seed: u64) -> Knobs {
        let mut r = rng(seed, "knobs", 0);
        Knobs { nodes: r.between(2, 4) as u32, ttl_ms: 100, size: r.between(2, 4) as u32, cap_ms: 30_000 }
    }

    fn faults(&self, _knobs: &Knobs) -> FaultProfile {
        FaultProfile::at(WINDOW.to_vec())
            .active(300, 800)
            .fire(20, 120)
            .stalls((300, 800), (200, 600), 160)
            .crashes(
                0,
                60,
                vec![
                    FaultPoint::SqliteDeleteAfterEntries,
                    FaultPoint::SqliteDeleteAfterMeta,
                    FaultPoint::SqliteDeleteBeforeCommit,
                    FaultPoint::SqliteDeleteAfterCommit,
                    FaultPoint::SqliteReleaseAfterCommit,
                    FaultPoint::SqliteAcquireAfterCommit,
                ],
            )
            .occurrences(60)
            .clocks(10, 200)
    }

    fn shared(&self, plan: &Plan) -> Rc<dyn Any> {
        Rc::new(TombShared::new(plan.seed, plan.knobs.ttl_ms, plan.knobs.nodes))
    }

    fn node_main(&self, node: NodeCtx) -> LocalFuture<'static, ()> {
        Box::pin(async move {
            let shared = shared(&node.world);
            let tenant = Tenant::new(node.index, node.incarnation, node.store, shared.clone());
            tenant.run().await;
            shared.done.borrow_mut()[node.index as usize] = true;
        })
    }

    fn supervise(&self, world: Rc<WorldState>) -> LocalFuture<'static, ()> {
        Box::pin(async move {
            let shared = shared(&world);
            let want = u64::from(world.plan.knobs.size);
            let cap = world.plan.knobs.cap_ms * 1_000_000;
            let start = sim::time::now_ns();
            loop {
                madsim::time::sleep(Duration::from_millis(50)).await;
                let a = shared.activity.get();
                if a.recreations >= want && a.cross_probes >= want {
                    break;
                }
                if sim::time::now_ns() - start >= cap {
                    break;
                }
            }
            shared.stop.set(true);
            world.wait_for_nodes(&shared.done).await;
        })
    }

    fn key_points(&self) -> &'static [FaultPoint] {
        KEY
    }

    fn smaller_knobs(&self, knobs: &Knobs) -> Vec<Knobs> {
        knobs.fewer_nodes_then_smaller_size(2)
    }

    fn scenario_checks(&self, world: &WorldState, _history: &History, _fin: &FinalState) -> Vec<Violation> {
        let shared = shared(world);
        let a = shared.activity.get();
        let want = u64::from(world.plan.knobs.size);
        let mut out = Vec::new();
        if a.recreations < want || a.cross_probes < want {
            out.push(Violation::new(
                "tombstone_quorum_reached",
                format!(
                    "{} recreations and {} cross-incarnation probes within {}ms of virtual time; the run asks for {want} of each",
                    a.recreations, a.cross_probes, world.plan.knobs.cap_ms
                ),
            ));
        }
        for e in shared.errors.borrow().iter() {
            out.push(Violation::new("tombstone_referee", format!("unexpected store error: {e}")));
        }
        out
    }
}
