//! Every scenario of the catalog declares the coverage goals its sweeps must meet, each a
//! goal the oracle knows, with a share between 0 and 100%: a misspelled goal would never
//! be met and every sweep of the scenario would fall short.

use sim::oracle::goals::{is_goal, GOALS};

#[test]
fn every_scenario_declares_known_goals_with_sane_shares() {
    let catalog = scenarios::catalog();
    assert!(!catalog.is_empty());
    for s in &catalog {
        let declared = s.coverage();
        assert!(!declared.is_empty(), "{} declares no coverage goal", s.name());
        for r in declared {
            assert!(
                is_goal(r.goal),
                "{}: unknown goal {:?}; known: {:?}",
                s.name(),
                r.goal,
                GOALS.iter().map(|g| g.name).collect::<Vec<_>>()
            );
            assert!(
                (1..=1000).contains(&r.permille),
                "{}: {} per mille for {}",
                s.name(),
                r.permille,
                r.goal
            );
        }
        let mut names: Vec<&str> = declared.iter().map(|r| r.goal).collect();
        names.sort_unstable();
        names.dedup();
        assert_eq!(names.len(), declared.len(), "{} declares a goal twice", s.name());
    }
}

/// A sweep's per-state seed counts are each seed's own states counted one by one, and its
/// reachable-state estimate is the one those counts give: at least the states observed,
/// with an interval around it.
#[test]
fn a_sweep_counts_the_seeds_reaching_each_state_and_estimates_the_reachable_ones() {
    use std::collections::BTreeMap;

    use sim::runner::execute;
    use sim::sweep::{self, SeedRange, SweepOptions};
    use store::ProfileName;

    let soak: &'static dyn sim::world::Scenario = &scenarios::soak::SOAK;
    let range = SeedRange { start: 0, end: 24 };
    let report = sweep::run(
        soak,
        &SweepOptions {
            profile: ProfileName::Current,
            range,
            shard: None,
            jobs: 2,
            fail_fast: false,
            determinism_every: 0,
            progress: false,
        },
    );
    let names = sim::oracle::states::universe();
    let mut counted: BTreeMap<String, u64> = BTreeMap::new();
    for seed in range.start..range.end {
        let out = execute(soak, ProfileName::Current, seed, None, None).expect("run");
        for &s in &out.report.states {
            *counted.entry(names[usize::from(s)].clone()).or_default() += 1;
        }
    }
    assert_eq!(report.states_seeds, counted);
    assert_eq!(
        report.states_seeds.keys().collect::<Vec<_>>(),
        report.states_first_seed.keys().collect::<Vec<_>>()
    );
    let est = &report.states_estimate;
    assert_eq!(est.runs, 24);
    assert_eq!(est.observed, report.states_reached);
    assert_eq!(est.singletons, counted.values().filter(|&&n| n == 1).count() as u64);
    assert!(est.singletons > 0, "24 seeds of soak leave no state seen once: {est:?}");
    assert!(est.estimated > est.observed as f64, "{est:?}");
    assert!(est.estimated_low <= est.estimated && est.estimated <= est.estimated_high, "{est:?}");
    assert!(report.states_line().contains("estimated reachable"), "{}", report.states_line());
}
