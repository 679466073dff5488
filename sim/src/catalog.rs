//! Looking up what the command line names: a scenario of the catalog the binary passes
//! in, a profile, and the one way a usage error is reported (exit code 2). Below both
//! `cli` and `real::cli`, which share it.

use store::ProfileName;

use crate::world::Scenario;

/// The scenario called `name`, or an error listing the known ones.
pub fn find_scenario(catalog: &[&'static dyn Scenario], name: &str) -> Result<&'static dyn Scenario, String> {
    catalog.iter().copied().find(|s| s.name() == name).ok_or_else(|| {
        format!(
            "unknown scenario {name:?}; known scenarios: {}",
            catalog.iter().map(|s| s.name()).collect::<Vec<_>>().join(", ")
        )
    })
}

/// The profile called `name`, or an error listing the known ones.
pub fn parse_profile(name: &str) -> Result<ProfileName, String> {
    name.parse::<ProfileName>().map_err(|e| e.to_string())
}

/// A usage error: printed on stderr; returns exit code 2.
pub fn usage(msg: String) -> i32 {
    eprintln!("error: {msg}");
    2
}
