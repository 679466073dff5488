//! `scenarios`: the scenario catalog (each a workload, its fault emphasis, and the checks
//! it adds to the generic oracle), plus the negative tests, regression tests and snapshot
//! tests under `tests/`.

pub mod edges;
pub mod engine;
pub mod killpoints;
pub mod soak;
pub mod tombstone;

use sim::world::Scenario;

/// Every scenario, by name.
pub fn catalog() -> Vec<&'static dyn Scenario> {
    vec![
        &soak::SOAK,
        &soak::F3_CHECK_THEN_MUTATE,
        &soak::BOOT_RACE,
        &tombstone::TOMBSTONE,
        &killpoints::KILL_POINTS,
        &edges::EDGES,
        &engine::QUEUE,
        &engine::QUEUE_SOLO,
        &engine::F1_STALE_SETTLE,
        &engine::F2_STALE_CHECKPOINT,
        &engine::F4_STALE_RETENTION,
        &engine::DELETE_CUTS,
    ]
}
