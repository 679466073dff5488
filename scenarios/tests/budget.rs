//! The run's read budget: the recorder keeps every read's result for the oracle, so a run
//! whose reads return more items than its budget ends there, and `run_ends_within_budget`
//! says so in words. A budget the run stays under changes nothing.

use sim::runner::{execute, execute_with};
use sim::world::{RunOptions, READ_BUDGET};
use store::ProfileName;

fn queue() -> &'static dyn sim::world::Scenario {
    sim::catalog::find_scenario(&scenarios::catalog(), "queue").expect("queue is in the catalog")
}

#[test]
fn a_run_whose_reads_outgrow_the_budget_ends_and_the_oracle_says_why() {
    let seed = 3;
    let whole = execute(queue(), ProfileName::Current, seed, None, None).expect("run");
    assert!(whole.violations.is_empty(), "{:?}", whole.violations);
    let items = whole.history.read_items;
    assert!(items > 200, "a queue run reads its journals: {items} items");
    assert!(items * 20 < READ_BUDGET, "a queue run records a small share of the budget: {items}");
    // The same run with a budget of a tenth of what it reads.
    let small = RunOptions { read_budget: Some(items / 10), ..RunOptions::default() };
    let cut = execute_with(queue(), ProfileName::Current, seed, None, None, true, &small).expect("run");
    let v: Vec<&sim::verdict::Violation> =
        cut.violations.iter().filter(|v| v.property == "run_ends_within_budget").collect();
    assert_eq!(v.len(), 1, "{:?}", cut.violations);
    assert!(v[0].witness.contains("reads returned"), "{}", v[0].witness);
    assert!(cut.history.read_items < items, "the run stopped reading early");
    assert!(cut.history.calls.len() < whole.history.calls.len());
    // A budget above what the run reads: the same run, call for call.
    let roomy = RunOptions { read_budget: Some(items + 1), ..RunOptions::default() };
    let same = execute_with(queue(), ProfileName::Current, seed, None, None, true, &roomy).expect("run");
    assert!(same.violations.is_empty(), "{:?}", same.violations);
    assert_eq!(same.report.trace_hash, whole.report.trace_hash);
}
