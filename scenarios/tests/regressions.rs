//! Regression snapshots of every finding: each committed, minimized plan
//! (`tests/plans/<ID>.json`, produced by `fencesim shrink --finding <ID> --seed N`) is
//! replayed under its flawed profile; the finding's generic matcher must catch it, and the
//! witness (decisions, violations, the timeline up to the witness) must equal the insta
//! snapshot in the top-level `snapshots/` folder. The same plan under `current` must pass.
//!
//! Adding a row: shrink a failing seed into
//! `tests/plans/<ID>.json`, add `regression!(fn_name, "<ID>");` below, run once with
//! `INSTA_UPDATE=always` (or `cargo insta test` then `cargo insta review`), review the new
//! `snapshots/<ID>.snap`, and commit both files.

use std::path::PathBuf;

use sim::findings::finding;
use sim::plan::Plan;
use sim::runner::execute;
use sim::shrink::witness_text;
use store::ProfileName;

fn plan_path(id: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests").join("plans").join(format!("{id}.json"))
}

fn replay(id: &str) {
    let row = finding(id).unwrap_or_else(|| panic!("no finding row {id}"));
    let scenario = scenarios::catalog()
        .into_iter()
        .find(|s| s.name() == row.scenario)
        .unwrap_or_else(|| panic!("{id}: scenario {} is not in the catalog", row.scenario));
    let text = std::fs::read_to_string(plan_path(id)).unwrap_or_else(|e| panic!("{id}: plan: {e}"));
    let plan: Plan = serde_json::from_str(&text).unwrap_or_else(|e| panic!("{id}: plan: {e}"));
    assert_eq!(plan.scenario, row.scenario, "{id}: the plan is for another scenario");

    let flawed = execute(scenario, row.profile, plan.seed, Some(plan.clone()), None).expect("run");
    assert!(
        row.caught_by(&flawed.violations).is_some(),
        "{id}: the minimized plan no longer shows the finding under {}: {:?}",
        row.profile,
        flawed.violations
    );
    let snapshot = witness_text(&flawed, Some(row));
    let mut settings = insta::Settings::clone_current();
    settings.set_snapshot_path("../../snapshots");
    settings.set_prepend_module_to_snapshot(false);
    settings.set_omit_expression(true);
    settings.set_description(format!("{id}: {} ({} under {})", row.title, row.scenario, row.profile));
    settings.bind(|| insta::assert_snapshot!(id, snapshot));

    let fixed = execute(scenario, ProfileName::Current, plan.seed, Some(plan), None).expect("run");
    assert!(fixed.violations.is_empty(), "{id}: the same plan fails under current: {:?}", fixed.violations);
}

macro_rules! regression {
    ($name:ident, $id:literal) => {
        #[test]
        fn $name() {
            replay($id);
        }
    };
}

regression!(f3a_stale_append_after_takeover, "F3a");
regression!(f3b_stale_release_then_third_owner, "F3b");
regression!(f3c_stale_renew_rewrites_expiry, "F3c");
regression!(b_concurrent_boots, "B");
regression!(t_zombie_after_recreate, "T");
regression!(f1_stale_terminal_meta, "F1");
regression!(f2_stale_checkpoint_save, "F2");
regression!(f4_stale_retention_delete, "F4");
