//! What the proptest suites share: their configuration. Included (by path) only by the
//! suites that run proptest, so the source-reading tests that include `support` do not
//! carry it.

use proptest::test_runner::{Config, FileFailurePersistence, RngSeed};

/// `default_cases` cases from a fixed proptest seed (the same cases on every run) unless
/// `PROPTEST_CASES` or `PROPTEST_RNG_SEED` says otherwise; failures persisted in
/// `regressions` (a path under the crate) and replayed first on every run.
pub fn config(default_cases: u32, regressions: &'static str) -> Config {
    let mut c = Config::default(); // reads the PROPTEST_* environment
    if std::env::var_os("PROPTEST_CASES").is_none() {
        c.cases = default_cases;
    }
    if std::env::var_os("PROPTEST_RNG_SEED").is_none() {
        c.rng_seed = RngSeed::Fixed(17);
    }
    c.failure_persistence = Some(Box::new(FileFailurePersistence::Direct(regressions)));
    c
}
