//! Property tests of plans and sweep reports: a plan written out and read back is the same
//! plan and replays to the same trace hash and verdict; a sweep split into shards and merged
//! equals the unsharded sweep, for any small seed range, shard count and scenario.
//!
//! Kept cheap (each case runs whole simulations): `PLAN_CASES` / `SWEEP_CASES` cases from a
//! fixed proptest seed, tiny seed ranges. `PROPTEST_CASES` and `PROPTEST_RNG_SEED` override
//! them. Failures are persisted in `scenarios/proptest-regressions/plan_properties.txt`.

use proptest::prelude::*;
use proptest::test_runner::{Config, FileFailurePersistence, RngSeed};
use sim::plan::{Action, ClockSpec, Decision, Knobs, Plan, Swarm};
use sim::runner::{execute, plan_for};
use sim::sweep::{self, SeedRange, Shard, SweepOptions, SweepReport};
use sim::world::Scenario;
use store::{FaultPoint, ProfileName};

/// Cases of the (cheap) serialization property.
const SERDE_CASES: u32 = 200;
/// Cases of the replay property (two simulations each).
const PLAN_CASES: u32 = 12;
/// Cases of the shard property (up to 2 x 4 simulations each).
const SWEEP_CASES: u32 = 8;

fn config(default_cases: u32) -> Config {
    let mut c = Config::default(); // reads the PROPTEST_* environment
    if std::env::var_os("PROPTEST_CASES").is_none() {
        c.cases = default_cases;
    }
    if std::env::var_os("PROPTEST_RNG_SEED").is_none() {
        c.rng_seed = RngSeed::Fixed(17);
    }
    c.failure_persistence = Some(Box::new(FileFailurePersistence::Direct(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/proptest-regressions/plan_properties.txt"
    ))));
    c
}

/// A scenario of the catalog, by name (what a failing case prints).
fn scenario() -> impl Strategy<Value = &'static str> {
    prop::sample::select(scenarios::catalog().iter().map(|s| s.name()).collect::<Vec<_>>())
}

fn named(name: &str) -> &'static dyn Scenario {
    scenarios::catalog().into_iter().find(|s| s.name() == name).expect("a scenario of the catalog")
}

fn profile() -> impl Strategy<Value = ProfileName> {
    prop::sample::select(ProfileName::ALL.to_vec())
}

fn action() -> impl Strategy<Value = Action> {
    prop_oneof![
        Just(Action::Yield),
        any::<u64>().prop_map(|ms| Action::Stall { ms }),
        any::<u64>().prop_map(|restart_after_ms| Action::Crash { restart_after_ms }),
        Just(Action::StallToExpiry),
        any::<u64>().prop_map(|ms| Action::StallToBeforeExpiry { ms }),
        any::<u64>().prop_map(|ms| Action::Pause { ms }),
        (any::<u32>(), any::<bool>())
            .prop_map(|(writes, same_op)| Action::PauseUntilTakeover { writes, same_op }),
        any::<u32>().prop_map(|writes| Action::PauseUntilAcquired { writes }),
        Just(Action::Contend),
        Just(Action::ContendNextWrite),
    ]
}

fn point_name() -> impl Strategy<Value = String> {
    prop::sample::select(FaultPoint::ALL.to_vec()).prop_map(|p| p.name().to_string())
}

/// Any plan a user could save or edit: every field, unicode names, extreme numbers.
fn any_plan() -> impl Strategy<Value = Plan> {
    let knobs = (any::<u32>(), any::<u64>(), any::<u32>(), any::<u64>())
        .prop_map(|(nodes, ttl_ms, size, cap_ms)| Knobs { nodes, ttl_ms, size, cap_ms });
    let clocks = prop::collection::vec(
        (any::<i64>(), any::<i64>()).prop_map(|(skew_ms, drift_ppm)| ClockSpec { skew_ms, drift_ppm }),
        0..4,
    );
    let swarm = (
        prop::collection::vec(point_name(), 0..4),
        (any::<u32>(), any::<u32>(), any::<u32>(), any::<u32>(), any::<u32>(), any::<u32>(), any::<u32>()),
        (any::<bool>(), any::<u32>(), any::<bool>(), any::<u32>(), any::<u32>()),
    )
        .prop_map(
            |(active_points, (a, b, c, d, e, f, g), (default_workers, h, user_actors, workload, i))| Swarm {
                active_points,
                fire_per_mille: a,
                stall_per_mille: b,
                stall_past_ttl_per_mille: c,
                crash_per_mille: d,
                expiry_stall_per_mille: e,
                pause_per_mille: f,
                contend_per_mille: h,
                contend_next_per_mille: i,
                interrupt_per_mille: g,
                default_workers,
                user_actors,
                workload,
            },
        );
    let decisions = prop::collection::vec(
        (any::<u32>(), point_name(), any::<u32>(), action())
            .prop_map(|(node, point, occurrence, action)| Decision { node, point, occurrence, action }),
        0..6,
    );
    ("\\PC{0,8}", "\\PC{0,8}", any::<u64>(), knobs, clocks, swarm, decisions).prop_map(
        |(scenario, profile, seed, knobs, clocks, swarm, decisions)| Plan {
            scenario,
            profile,
            seed,
            knobs,
            clocks,
            swarm,
            decisions,
            recipe: None,
        },
    )
}

fn sweep_of(s: &'static dyn Scenario, range: SeedRange, shard: Option<Shard>) -> SweepReport {
    sweep::run(
        s,
        &SweepOptions {
            profile: ProfileName::Current,
            range,
            shard,
            jobs: 1,
            fail_fast: false,
            determinism_every: 0,
            progress: false,
        },
    )
}

proptest! {
    #![proptest_config(config(SERDE_CASES))]

    /// Any plan written out as JSON and read back is the same plan.
    #[test]
    fn any_plan_written_and_read_back_is_the_same_plan(plan in any_plan()) {
        let text = serde_json::to_string_pretty(&plan).expect("a plan serializes");
        let back: Plan = serde_json::from_str(&text).expect("a written plan reads back");
        prop_assert_eq!(back, plan);
    }
}

proptest! {
    #![proptest_config(config(PLAN_CASES))]

    /// A seed's plan, written out and read back, is the same plan and replays to the same
    /// trace hash and the same verdict as the run derived from the seed.
    #[test]
    fn a_saved_plan_replays_to_the_same_trace_hash(name in scenario(), profile in profile(), seed in 0..40u64) {
        let s = named(name);
        let plan = plan_for(s, profile, seed);
        let back: Plan = serde_json::from_str(&serde_json::to_string(&plan).expect("serialize"))
            .expect("read back");
        prop_assert_eq!(&back, &plan);
        let derived = execute(s, profile, seed, None, None).map_err(TestCaseError::fail)?;
        let replayed = execute(s, profile, seed, Some(back), None).map_err(TestCaseError::fail)?;
        prop_assert_eq!(&derived.report.trace_hash, &replayed.report.trace_hash);
        prop_assert_eq!(derived.violations, replayed.violations);
    }
}

proptest! {
    #![proptest_config(config(SWEEP_CASES))]

    /// Any small seed range split into 1-3 shards and merged gives the unsharded report
    /// (timings aside).
    #[test]
    fn sharded_sweeps_merge_to_the_unsharded_report(
        name in scenario(),
        start in 0..200u64,
        len in 1..4u64,
        count in 1..4u64,
    ) {
        let s = named(name);
        let range = SeedRange { start, end: start + len };
        let whole = sweep_of(s, range, None);
        prop_assert_eq!(whole.seeds_run, len);
        let parts: Vec<SweepReport> =
            (1..=count).map(|index| sweep_of(s, range, Some(Shard { index, count }))).collect();
        let merged = SweepReport::merge(parts).map_err(TestCaseError::fail)?;
        prop_assert_eq!(merged.without_timing(), whole.without_timing());
    }
}
