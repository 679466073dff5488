//! Shared by the sweep tests: search seeds from 0 for a violation of named properties, and
//! assert a scenario clean under `current`. Neither knows a failing seed.

use sim::runner::execute;
use sim::world::Scenario;
use store::ProfileName;

/// The first seed in `0..limit` whose run violates one of `properties`, with its witness.
pub fn first_failure(
    scenario: &'static dyn Scenario,
    profile: ProfileName,
    limit: u64,
    properties: &[&str],
) -> Option<(u64, String)> {
    (0..limit).find_map(|seed| {
        let out = execute(scenario, profile, seed, None, None).expect("run");
        out.violations
            .iter()
            .find(|v| properties.contains(&v.property))
            .map(|v| (seed, format!("{}: {}", v.property, v.witness)))
    })
}

/// Every seed of `seeds` passes under `current`.
pub fn assert_clean(scenario: &'static dyn Scenario, seeds: std::ops::Range<u64>) {
    for seed in seeds {
        let out = execute(scenario, ProfileName::Current, seed, None, None).expect("run");
        assert!(out.violations.is_empty(), "{} current seed {seed}: {:?}", scenario.name(), out.violations);
    }
}
