//! The findings table, the tombstone scenario, shrinking and key-point coverage, through
//! the library: every store-level finding row is caught by its generic matcher within a
//! bounded seed search from 0 (no test knows a failing seed), `current` stays clean, a
//! shrunk plan still fails the same way, is much smaller, and shrinking is deterministic.

use scenarios::soak::{F3_CHECK_THEN_MUTATE, SOAK};
use scenarios::tombstone::TOMBSTONE;
use sim::findings::{finding, search, FindingsOptions, FINDINGS};
use sim::runner::{execute, plan_for};
use sim::shrink::shrink;
use sim::sweep::{self, SeedRange, SweepOptions};
use sim::world::Scenario;
use store::ProfileName;

fn scenario(name: &str) -> &'static dyn Scenario {
    scenarios::catalog().into_iter().find(|s| s.name() == name).expect("scenario in the catalog")
}

const STORE_ROWS: [&str; 5] = ["F3a", "F3b", "F3c", "B", "T"];

#[test]
fn every_store_level_finding_is_caught_by_its_generic_matcher() {
    for id in STORE_ROWS {
        let row = finding(id).expect("row");
        let s = search(scenario(row.scenario), row.profile, row, SeedRange { start: 0, end: 100 }, 2);
        assert!(s.first.is_some(), "{id}: not caught in 100 seeds of {} under {}", row.scenario, row.profile);
        assert!(!s.caught_by.is_empty());
        assert!(s.errors.is_empty(), "{id}: {:?}", s.errors);
    }
}

#[test]
fn the_search_answer_does_not_depend_on_the_thread_count() {
    let row = finding("F3a").expect("row");
    let range = SeedRange { start: 0, end: 100 };
    let one = search(scenario(row.scenario), row.profile, row, range, 1);
    let two = search(scenario(row.scenario), row.profile, row, range, 2);
    assert_eq!(one.first, two.first);
    assert_eq!(one.caught_by, two.caught_by);
}

#[test]
fn f3_sub_cases_are_told_apart_by_the_offending_operation() {
    // Each F3 row's first witness names a different operation of the stale call.
    for (id, op) in [("F3a", "append"), ("F3b", "release"), ("F3c", "renew")] {
        let row = finding(id).expect("row");
        let s = search(&F3_CHECK_THEN_MUTATE, row.profile, row, SeedRange { start: 0, end: 100 }, 2);
        let first = s.caught_by.first().cloned().unwrap_or_default();
        assert!(first.ends_with(&format!("@{op}")), "{id}: {first}");
    }
}

#[test]
fn tombstone_is_clean_under_current_over_1000_seeds() {
    let report = sweep::run(
        &TOMBSTONE,
        &SweepOptions {
            profile: ProfileName::Current,
            range: SeedRange { start: 0, end: 1000 },
            shard: None,
            jobs: 2,
            fail_fast: false,
            determinism_every: 0,
            progress: false,
        },
    );
    assert_eq!(report.seeds_run, 1000);
    assert!(report.failures.is_empty(), "{:?}", report.failures);
    // Crashes landed between the statements of a delete, and the run survived them.
    for p in ["sqlite.delete.after_entries", "sqlite.delete.after_meta", "sqlite.delete.before_commit"] {
        let c = report.fault_points_hit.get(p).cloned().unwrap_or_default();
        assert!(c.crashed_runs > 0, "no crash at {p} in 1000 seeds");
        assert_eq!(c.crashed_and_passed_runs, c.crashed_runs, "{p}");
    }
}

#[test]
fn tombstone_zombies_write_into_the_recreated_run_without_the_tombstone() {
    // Not only the repeated grant: some seed shows a zombie write accepted under the new
    // incarnation's grant, which only the grant provenance can tell from the holder's.
    let found = (0..60).find_map(|seed| {
        let out = execute(&TOMBSTONE, ProfileName::PreTombstone, seed, None, None).expect("run");
        out.violations
            .iter()
            .find(|v| v.property == "no_stale_accept" && v.witness.contains("earlier grant"))
            .map(|v| v.witness.clone())
    });
    assert!(found.is_some(), "no zombie write accepted in 60 seeds of pre_tombstone");
}

#[test]
fn key_points_of_targeted_scenarios_fire_under_current() {
    for s in [&F3_CHECK_THEN_MUTATE as &dyn Scenario, &scenarios::soak::BOOT_RACE, &TOMBSTONE] {
        assert!(!s.key_points().is_empty(), "{} declares no key point", s.name());
        let report = sweep::run(
            s,
            &SweepOptions {
                profile: ProfileName::Current,
                range: SeedRange { start: 0, end: 40 },
                shard: None,
                jobs: 2,
                fail_fast: false,
                determinism_every: 0,
                progress: false,
            },
        );
        for p in s.key_points() {
            let c = report.fault_points_hit.get(p.name()).cloned().unwrap_or_default();
            assert!(c.fired > 0, "{}: key point {} never fired in 40 seeds", s.name(), p.name());
            assert!(c.fired_and_passed_runs <= c.fired_runs);
        }
    }
    assert!(SOAK.key_points().is_empty());
}

#[test]
fn a_row_whose_scenario_is_missing_is_reported_not_caught() {
    // A catalog without the tombstone scenario: the T row cannot be caught, and says why.
    let catalog: Vec<&'static dyn Scenario> = vec![&SOAK];
    let opts = FindingsOptions { seeds: 2, jobs: 1, rows: vec!["T".into()], progress: false, bar: false };
    let report = sim::findings::run(&catalog, &opts).expect("run");
    assert_eq!(report.findings.len(), 1);
    let t = &report.findings[0];
    assert!(!t.caught);
    assert!(t.reason.as_deref().unwrap_or("").contains("not in the catalog"), "{:?}", t.reason);
    assert!(!report.ok());
    assert!(sim::findings::run(&catalog, &FindingsOptions { rows: vec!["F9".into()], ..opts }).is_err());
}

#[test]
fn every_row_names_a_known_profile_and_a_matcher() {
    for row in FINDINGS {
        assert!(!row.requires.is_empty() && row.requires.iter().all(|g| !g.is_empty()), "{}", row.id);
        assert_ne!(row.profile, ProfileName::Current, "{}", row.id);
    }
}

#[test]
fn shrinking_keeps_the_finding_is_deterministic_and_cuts_the_plan() {
    for id in ["F3b", "B"] {
        let row = finding(id).expect("row");
        let s = scenario(row.scenario);
        let seed = search(s, row.profile, row, SeedRange { start: 0, end: 100 }, 2).first.expect("caught");
        let plan = plan_for(s, row.profile, seed);
        let a = shrink(s, row.profile, plan.clone(), row, 2000).expect("shrink");
        let b = shrink(s, row.profile, plan, row, 2000).expect("shrink");
        assert_eq!(a.minimal, b.minimal, "{id}: shrinking is not deterministic");
        assert!(
            a.minimal.decisions.len() * 4 <= a.original.decisions.len().max(1),
            "{id}: {} of {} decisions left",
            a.minimal.decisions.len(),
            a.original.decisions.len()
        );
        let again = execute(s, row.profile, seed, Some(a.minimal.clone()), None).expect("run");
        assert!(row.caught_by(&again.violations).is_some(), "{id}: the shrunk plan lost the finding");
    }
}

#[test]
fn shrinking_a_passing_plan_is_refused() {
    let plan = plan_for(&SOAK, ProfileName::Current, 3);
    let target = sim::shrink::SameProperty { property: "no_stale_accept".into(), op: None };
    assert!(shrink(&SOAK, ProfileName::Current, plan, &target, 10).is_err());
}

#[test]
fn explore_from_the_generic_soak_finds_t_and_the_table_shows_it() {
    let opts = FindingsOptions { seeds: 10, jobs: 2, rows: vec!["T".into()], progress: false, bar: false };
    let catalog = scenarios::catalog();
    let mut report = sim::findings::run(&catalog, &opts).expect("the T row");
    sim::explore::versus_findings(&mut report, &catalog, 2, 50, 2).expect("explore");
    let x = report.findings[0].explore.as_ref().expect("an explore column");
    assert_eq!((x.scenario.as_str(), x.runs, x.first_run.len()), ("soak", 50, 2));
    assert!(x.first_run.iter().all(|r| r.is_some_and(|run| (1..=50).contains(&run))), "{x:?}");
    // The sweeps of the disjoint ranges (seeds 0.. and 100000..): the soak finds T in each.
    assert_eq!(x.sweep_first_run.len(), 2, "{x:?}");
    assert!(x.sweep_first_run.iter().all(|r| r.is_some_and(|run| (1..=50).contains(&run))), "{x:?}");
    let table = report.table();
    assert!(table.contains("explore from the generic scenario"), "{table}");
    assert!(table.lines().any(|l| l.trim_start().starts_with("T ") && l.contains("median")), "{table}");
}

#[test]
fn findings_explores_current_from_the_generic_scenario_and_an_explore_failure_fails_the_verdict() {
    // A catalog of the soak alone: its `current` sweep, then the guided search from it.
    let catalog: Vec<&'static dyn Scenario> = vec![&SOAK];
    let scratch = tempfile::tempdir().expect("scratch");
    let opts = FindingsOptions { seeds: 4, jobs: 2, rows: Vec::new(), progress: false, bar: false };
    let mut report = sim::findings::run(&catalog, &opts).expect("run");
    assert!(report.current_clean.explore.is_empty(), "the search is a separate pass");
    sim::explore::current_pass(&mut report, &catalog, 64, 0, 2, scratch.path(), false).expect("pass");
    let e = &report.current_clean.explore;
    assert_eq!(e.len(), 1, "{e:?}");
    assert_eq!((e[0].scenario.as_str(), e[0].seed, e[0].runs), ("soak", 0, 64));
    assert!(e[0].failures.is_empty(), "{:?}", e[0].failures);
    // The sweep ran 4 seeds; the search's 64 plans (pauses and aimed faults among them)
    // reach further.
    let sweep = &report.current_clean.scenarios[0];
    assert_eq!((sweep.scenario.as_str(), sweep.failures), ("soak", 0));
    assert_eq!(e[0].sweep_states_reached, sweep.states_reached);
    assert!(e[0].sweep_states_reached > 0 && e[0].states_reached > e[0].sweep_states_reached, "{e:?}");
    let table = report.table();
    assert!(
        table
            .contains("explore (current, search seed 0): 1 generic scenario(s) x 64 runs, 0 failing (clean)"),
        "{table}"
    );
    let json = serde_json::to_value(&report).expect("json");
    assert_eq!(json["current_clean"]["explore"][0]["runs"], 64);
    let cases = sim::ci_report::from_findings(&report, &|_, _| None);
    let case = cases.iter().find(|c| c.name.starts_with("explore soak")).expect("an explore case");
    assert!(case.failures.is_empty());

    // The report with its rows and sweeps left out passes on the clean search alone, and
    // fails once the search has a failure; so does its CI case.
    let mut failed = report.clone();
    failed.findings.clear();
    failed.current_clean.scenarios.clear();
    assert!(failed.ok(), "with a clean search and nothing else the verdict passes");
    failed.current_clean.explore[0].failures.push(sim::findings::CurrentExploreFailure {
        run: 17,
        seed: 5,
        properties: vec!["no_stale_accept".into()],
        witness: "w".into(),
        reproduce: "fencesim run --scenario soak --profile current --seed 5 --plan p.json".into(),
        plan_file: "p.json".into(),
    });
    assert!(!failed.ok());
    let table = failed.table();
    assert!(table.contains("FAIL run=17 [no_stale_accept]: fencesim run --scenario soak"), "{table}");
    assert!(table.ends_with("verdict: FAIL\n"), "{table}");
    let cases = sim::ci_report::from_findings(&failed, &|_, _| None);
    let case = cases.iter().find(|c| c.name.starts_with("explore soak")).expect("an explore case");
    assert_eq!(case.failures.len(), 1);
    assert!(case.failures[0].reproduce.contains("--plan p.json"));

    // Another search seed is another search, and the table says which; 0 runs: no search.
    let mut other = report.clone();
    other.current_clean.explore.clear();
    sim::explore::current_pass(&mut other, &catalog, 16, 7, 2, scratch.path(), false).expect("pass");
    assert_eq!((other.current_clean.explore[0].seed, other.current_clean.explore[0].runs), (7, 16));
    assert!(other.table().contains("explore (current, search seed 7)"), "{}", other.table());
    let mut off = report.clone();
    off.current_clean.explore.clear();
    sim::explore::current_pass(&mut off, &catalog, 0, 0, 2, scratch.path(), false).expect("pass");
    assert!(off.current_clean.explore.is_empty());
}
