//! Differential test of the reconciler: rulvar's `auditRun` decision table (docs/engine-model.md
//! 7.1) as the system under test implements it (`store::engine::classify`) against the
//! oracle's own statement of it (`sim::oracle::contract::audit`), over arbitrary journals and
//! meta statuses.
//!
//! The sweeps judge every audit an operator makes (`audits_follow_the_decision_table`), but
//! only over the journals the engine writes: some rows of the table (a terminal meta over
//! work after its settle with an open suspension and no dangling dispatch; an `exhausted`
//! meta over open suspensions with no settle) need a crash, a straddled read or a legacy
//! journal that no workload makes often. Here every row is reached: a journal is a short
//! sequence of the entries the table reads (dispatches and their terminals, suspensions and
//! their answers, settles of every status, billing receipts), with refs to earlier or later
//! seqs, under every meta status or none. The verdict, the status a repair writes and the
//! report's counts must agree.
//!
//! Cases: `DEFAULT_CASES` in `cargo test`, from a fixed proptest seed; `PROPTEST_CASES` and
//! `PROPTEST_RNG_SEED` override both. Failures are persisted in
//! `sim/proptest-regressions/audit_vs_model.txt` and replayed first on every run.

#[path = "support/proptest_config.rs"]
mod suite;

use proptest::prelude::*;
use proptest::test_runner::Config;
use serde_json::{json, Value};
use sim::oracle::contract::{audit, EntryView, Status};
use store::engine::{classify, Verdict};
use store::{JournalEntry, RunStatus};

/// Journals per `cargo test` (each is a pure function call on both sides).
const DEFAULT_CASES: u32 = 4000;

/// Every status, in the store type's order (a constant of the type, not a function).
const STATUSES: [RunStatus; 6] = RunStatus::ALL;

/// One entry the decision table reads, before its seq is known. `to` picks the seq a
/// ref-entry points at (modulo the journal's length, so it may point forward or at itself).
#[derive(Clone, Debug)]
enum Pick {
    Running,
    Terminal { to: usize, status: &'static str },
    Suspension { approval: bool },
    Answer { to: usize, abandon: bool },
    Settle { status: usize },
    Receipt,
}

fn pick() -> impl Strategy<Value = Pick> {
    prop_oneof![
        3 => Just(Pick::Running),
        3 => (any::<usize>(), prop::sample::select(vec!["ok", "error", "cancelled", "limit"]))
            .prop_map(|(to, status)| Pick::Terminal { to, status }),
        2 => any::<bool>().prop_map(|approval| Pick::Suspension { approval }),
        2 => (any::<usize>(), any::<bool>()).prop_map(|(to, abandon)| Pick::Answer { to, abandon }),
        3 => (0..STATUSES.len()).prop_map(|status| Pick::Settle { status }),
        1 => Just(Pick::Receipt),
    ]
}

/// The journal's entries as the JSON text a store returns them in, seqs 0, 1, 2, ...
fn journal(picks: &[Pick]) -> Vec<String> {
    let n = picks.len().max(1);
    picks
        .iter()
        .enumerate()
        .map(|(seq, p)| {
            let e: Value = match p {
                Pick::Running => json!({"seq": seq, "kind": "agent", "status": "running", "key": format!("op:{seq}:a"), "value": {"op": "a"}}),
                Pick::Terminal { to, status } => {
                    json!({"seq": seq, "kind": "agent", "status": status, "key": format!("op:{}:a", to % n), "ref": to % n, "value": "v"})
                }
                Pick::Suspension { approval } => {
                    let kind = if *approval { "approval" } else { "external" };
                    json!({"seq": seq, "kind": kind, "status": "suspended", "key": format!("await:{seq}"), "value": {"key": "k"}})
                }
                Pick::Answer { to, abandon } => {
                    let kind = if *abandon { "abandon" } else { "resolution" };
                    json!({"seq": seq, "kind": kind, "status": "ok", "key": format!("answer:{}", to % n), "ref": to % n, "value": "yes"})
                }
                Pick::Settle { status } => json!({
                    "seq": seq, "kind": "decision", "status": "ok", "key": "run-settle",
                    "value": {"decisionType": "run_settle", "runStatus": Status::of(STATUSES[*status]).word(), "segment": 1}
                }),
                Pick::Receipt => json!({
                    "seq": seq, "kind": "decision", "status": "ok", "key": format!("pc:0:{seq}"),
                    "value": {"decisionType": "provider-call", "agentRef": 0}
                }),
            };
            e.to_string()
        })
        .collect()
}

fn config() -> Config {
    suite::config(
        DEFAULT_CASES,
        concat!(env!("CARGO_MANIFEST_DIR"), "/proptest-regressions/audit_vs_model.txt"),
    )
}

fn word(v: Verdict) -> &'static str {
    match v {
        Verdict::Consistent => "consistent",
        Verdict::MetaBehind => "meta-behind",
        Verdict::Stranded => "stranded",
        Verdict::Suspect => "suspect",
    }
}

proptest! {
    #![proptest_config(config())]

    /// The reconciler classifies every (meta status, journal) as the oracle's table does:
    /// the same verdict, the same status to repair to, the same counts.
    #[test]
    fn the_reconciler_follows_the_oracles_decision_table(
        meta in prop::option::weighted(0.9, 0..STATUSES.len()),
        picks in prop::collection::vec(pick(), 0..9),
    ) {
        let texts = journal(&picks);
        let entries: Vec<JournalEntry> =
            texts.iter().map(|t| JournalEntry::from_json(t).expect("a well-formed entry")).collect();
        let views: Vec<EntryView> = texts.iter().map(|t| EntryView::parse(t).expect("a well-formed entry")).collect();
        let meta = meta.map(|i| STATUSES[i]);
        let got = classify("r", meta, &entries);
        let want = audit(meta.map(Status::of), &views);
        let why = format!("meta {:?} over {}: reconciler said {:?}, the table says {:?}", meta, texts.join(" "), got, want);
        prop_assert_eq!(word(got.verdict), want.verdict.word(), "{}", why);
        prop_assert_eq!(got.repair_to.map(|s| Status::of(s).word()), want.repair_to.map(Status::word), "{}", why);
        prop_assert_eq!(got.journal_entries, want.counts.entries, "{}", why);
        prop_assert_eq!(got.journal_settle.map(|s| Status::of(s).word()), want.counts.settle.map(Status::word), "{}", why);
        prop_assert_eq!(got.entries_after_settle, want.counts.after_settle, "{}", why);
        prop_assert_eq!(got.dangling_dispatches, want.counts.dangling, "{}", why);
        prop_assert_eq!(got.open_suspensions, want.counts.open, "{}", why);
    }
}

/// The generator reaches the rows the sweeps rarely do: a terminal meta over work after its
/// settle with an open suspension and no dangling dispatch (stranded, repair to suspended),
/// and an exhausted meta with open suspensions and no settle (suspect). Checked on both sides
/// so a table that lost the row on both is caught too.
#[test]
fn the_rare_rows_are_stated_by_both_sides() {
    let rows: [(RunStatus, Vec<Pick>, &str, Option<&str>); 2] = [
        (
            RunStatus::Cancelled,
            vec![Pick::Settle { status: 4 }, Pick::Suspension { approval: true }],
            "stranded",
            Some("suspended"),
        ),
        (RunStatus::Exhausted, vec![Pick::Suspension { approval: false }], "suspect", None),
    ];
    for (meta, picks, verdict, repair_to) in rows {
        let texts = journal(&picks);
        let entries: Vec<JournalEntry> =
            texts.iter().map(|t| JournalEntry::from_json(t).expect("entry")).collect();
        let views: Vec<EntryView> = texts.iter().map(|t| EntryView::parse(t).expect("entry")).collect();
        let got = classify("r", Some(meta), &entries);
        let want = audit(Some(Status::of(meta)), &views);
        assert_eq!(
            (word(got.verdict), got.repair_to.map(|s| Status::of(s).word())),
            (verdict, repair_to),
            "{texts:?}"
        );
        assert_eq!(
            (want.verdict.word(), want.repair_to.map(Status::word)),
            (verdict, repair_to),
            "{texts:?}"
        );
    }
}
