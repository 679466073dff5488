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
