//! The engine-level properties: what a run's lifecycle must keep, judged from the store's
//! apply-ordered history, the engine facts (payments, tool effects, submissions, settles)
//! and the final state. Like the store properties, none knows which flaw a profile has.
//!
//! Who is the holder: a fact acts under the latest grant of the run to the fact's owner
//! identity, an unleased write under the latest grant to its node incarnation; either is
//! the CURRENT holder when no other grant of the run took effect after that one. Payments by a superseded holder (a
//! zombie that has not yet noticed its loss) are the inherent at-least-once window of any
//! lease: the repayment rules below judge only current holders.
//!
//! A run's generation starts at each applied journal delete of it: dispatch seqs, blobs
//! and counters are judged within one generation.

use std::collections::BTreeMap;

use serde_json::Value;
use store::engine::{classify, decode_checkpoint, Verdict};
use store::{JournalEntry, RunMeta, RunStatus};

use super::model::{t, walk_grants, who, Judged};
use super::{Expectation, Property, Violation};
use crate::actors::engine::{catalog_workflows, expected_value};
use crate::history::{Call, Fact, FactKind, OpKind};

/// Every engine-level property, in report order.
pub const ALL: &[Property] = &[
    Property {
        name: "segments_never_regress",
        expectation: Expectation::Always,
        claim: "Within one generation of a run, the segments counter of successive applied meta writes never decreases.",
        not_checked: "Whether the counter was bumped at all (a crash before the boot meta write leaves it).",
        check: segments_never_regress,
    },
    Property {
        name: "journal_never_behind_meta",
        expectation: Expectation::Always,
        claim: "Every applied terminal meta write leaves the run consistent with its journal by the reconciler's table (the settle precedes the meta, and no terminal meta lands over live journal work).",
        not_checked: "Non-terminal meta writes (a meta-behind residue after a crash is legal and repairable).",
        check: journal_never_behind_meta,
    },
    Property {
        name: "no_stranded_run",
        expectation: Expectation::Always,
        claim: "No run ends with a terminal meta row over live journal work (the reconciler's stranded verdict).",
        not_checked: "Runs with no meta row.",
        check: no_stranded_run,
    },
    Property {
        name: "checkpoint_never_regresses",
        expectation: Expectation::Always,
        claim: "No applied checkpoint write replaces a later turn with an earlier one, and no current holder pays a turn an earlier checkpoint already covered.",
        not_checked: "Checkpoint contents beyond the turn count; payments by superseded holders.",
        check: checkpoint_never_regresses,
    },
    Property {
        name: "completed_dispatch_never_repaid",
        expectation: Expectation::Always,
        claim: "No current holder pays or runs a tool for a dispatch whose terminal is durable, and a turn is paid again only in the documented windows (no terminal yet, and not covered by a saved checkpoint).",
        not_checked: "Payments by superseded holders (the lease's inherent at-least-once window).",
        check: completed_dispatch_never_repaid,
    },
    Property {
        name: "one_ok_settle_per_completed_run",
        expectation: Expectation::Always,
        claim: "Each run's journal holds at most one ok run_settle, a run whose meta is ok and that journals settles ends with exactly that one, and two settles of the same status have journal work between them.",
        not_checked: "Journals without any run_settle (engines before the journaled settle).",
        check: one_ok_settle_per_completed_run,
    },
    Property {
        name: "no_live_run_deleted",
        expectation: Expectation::Always,
        claim: "No applied deletion removes a run while another holder's grant of it is live and unreleased.",
        not_checked: "Deletions of runs nobody holds (a host decision).",
        check: no_live_run_deleted,
    },
    Property {
        name: "settled_value_matches_workflow",
        expectation: Expectation::Always,
        claim: "Every segment that settles ok returns exactly the workflow's value in this world.",
        not_checked: "Values of runs whose workflow the world does not know.",
        check: settled_value_matches_workflow,
    },
    Property {
        name: "all_runs_settle_after_heal",
        expectation: Expectation::Eventually,
        claim: "After the heal (faults off, every node up, suspensions answered), every run with a meta row is terminal and consistent with its journal, and no journal is left without a meta row.",
        not_checked: "Scenarios without a heal phase; runs lost before their first meta write.",
        check: all_runs_settle_after_heal,
    },
];

/// The position of a call in the apply order (`usize::MAX` when the store noted none).
fn order(c: &Call) -> usize {
    c.applied.as_ref().map_or(usize::MAX, |a| a.order)
}

/// One grant, by apply order.
struct GrantRec {
    order: usize,
    epoch: u64,
    node: u32,
    incarnation: u32,
    owner: String,
}

/// Grants and deletions per run, in apply order.
struct Lifecycle {
    grants: BTreeMap<String, Vec<GrantRec>>,
    deletes: BTreeMap<String, Vec<usize>>,
}

impl Lifecycle {
    fn build(j: &Judged) -> Lifecycle {
        let mut l = Lifecycle { grants: BTreeMap::new(), deletes: BTreeMap::new() };
        for &c in &j.applied {
            match c.op {
                OpKind::Acquire => {
                    let epoch = c
                        .granted
                        .as_ref()
                        .map(|g| g.epoch.0)
                        .or(c.applied.as_ref().and_then(|a| a.site_epoch));
                    if let Some(epoch) = epoch {
                        l.grants.entry(c.run_id.clone()).or_default().push(GrantRec {
                            order: order(c),
                            epoch,
                            node: c.node,
                            incarnation: c.incarnation,
                            owner: c.args.owner.clone().unwrap_or_default(),
                        });
                    }
                }
                OpKind::Delete => l.deletes.entry(c.run_id.clone()).or_default().push(order(c)),
                _ => {}
            }
        }
        l
    }

    /// The generation of `run` at apply position `before` (deletions applied before it).
    fn generation(&self, run: &str, before: usize) -> usize {
        self.deletes.get(run).map_or(0, |d| d.iter().filter(|&&o| o < before).count())
    }

    /// Whether node `n` incarnation `i` held the run's latest grant at `before`, and its epoch.
    fn current_node(&self, run: &str, node: u32, incarnation: u32, before: usize) -> Option<u64> {
        let grants = self.grants.get(run)?;
        let last = grants.iter().rfind(|g| g.order < before)?;
        (last.node == node && last.incarnation == incarnation).then_some(last.epoch)
    }

    /// Whether the fact's owner held the run's latest grant when the fact happened.
    fn current_owner(&self, run: &str, f: &Fact) -> Option<u64> {
        let grants = self.grants.get(run)?;
        let last = grants.iter().rfind(|g| g.order < f.applied_before)?;
        (last.owner == f.owner && last.node == f.node).then_some(last.epoch)
    }
}

fn meta_of(c: &Call) -> Option<RunMeta> {
    c.args.payload.as_deref().and_then(|p| RunMeta::from_json(p).ok())
}

fn entry_of(c: &Call) -> Option<JournalEntry> {
    c.args.payload.as_deref().and_then(|p| JournalEntry::from_json(p).ok())
}

fn segments_never_regress(j: &Judged, out: &mut Vec<Violation>) {
    let mut last: BTreeMap<&str, (u64, &Call)> = BTreeMap::new();
    for &c in &j.applied {
        match c.op {
            OpKind::Delete => {
                last.remove(c.run_id.as_str());
            }
            OpKind::PutMeta => {
                let Some(m) = meta_of(c) else { continue };
                let Some(seg) = m.segments else { continue };
                if let Some(&(prev, pc)) = last.get(c.run_id.as_str()) {
                    if seg < prev {
                        out.push(Violation {
                            property: "segments_never_regress",
                            witness: format!(
                                "run {}: {}'s meta write ({}) at t={} set segments={seg} after {}'s write at t={} had set segments={prev}",
                                c.run_id,
                                who(c),
                                m.status,
                                t(Judged::applied_ns(c)),
                                who(pc),
                                t(Judged::applied_ns(pc))
                            ),
                        });
                    }
                }
                if last.get(c.run_id.as_str()).is_none_or(|&(prev, _)| seg >= prev) {
                    last.insert(c.run_id.as_str(), (seg, c));
                }
            }
            _ => {}
        }
    }
}

fn journal_never_behind_meta(j: &Judged, out: &mut Vec<Violation>) {
    let mut journal: BTreeMap<&str, Vec<JournalEntry>> = BTreeMap::new();
    for &c in &j.applied {
        match c.op {
            OpKind::Delete => {
                journal.remove(c.run_id.as_str());
            }
            OpKind::Append => {
                if let Some(e) = entry_of(c) {
                    journal.entry(c.run_id.as_str()).or_default().push(e);
                }
            }
            OpKind::PutMeta => {
                let Some(m) = meta_of(c) else { continue };
                if !m.status.is_terminal() {
                    continue;
                }
                let entries = journal.get(c.run_id.as_str()).map_or(&[][..], |v| v.as_slice());
                let audit = classify(&c.run_id, Some(m.status), entries);
                if audit.verdict != Verdict::Consistent {
                    out.push(Violation {
                        property: "journal_never_behind_meta",
                        witness: format!(
                            "run {}: {}'s meta write ({}) at t={} left the run {:?} by the reconciler: {}",
                            c.run_id,
                            who(c),
                            m.status,
                            t(Judged::applied_ns(c)),
                            audit.verdict,
                            audit.reason
                        ),
                    });
                }
            }
            _ => {}
        }
    }
}

fn final_entries(j: &Judged, run: &str) -> Vec<JournalEntry> {
    j.fin
        .entries
        .get(run)
        .map(|v| v.iter().filter_map(|p| JournalEntry::from_json(p).ok()).collect())
        .unwrap_or_default()
}

fn final_status(j: &Judged, run: &str) -> Option<RunStatus> {
    j.fin.meta.get(run).and_then(|p| RunMeta::from_json(p).ok()).map(|m| m.status)
}

fn no_stranded_run(j: &Judged, out: &mut Vec<Violation>) {
    for run in j.fin.meta.keys() {
        let audit = classify(run, final_status(j, run), &final_entries(j, run));
        if audit.verdict == Verdict::Stranded {
            out.push(Violation {
                property: "no_stranded_run",
                witness: format!("run {run} ends stranded: {}", audit.reason),
            });
        }
    }
}

/// The turn count of a checkpoint write's bytes (0 for undecodable bytes).
fn turns_of(c: &Call) -> u32 {
    c.args.bytes.as_deref().and_then(decode_checkpoint).map_or(0, |s| s.turns)
}

/// `<run>/ckpt/<seq>` -> seq.
fn ckpt_seq(blob_ref: &str) -> Option<u64> {
    let mut parts = blob_ref.splitn(3, '/');
    let _run = parts.next()?;
    (parts.next()? == "ckpt").then_some(())?;
    parts.next()?.parse().ok()
}

/// One dispatch of one generation of a run: (run, generation, running seq).
type DispatchKey = (String, usize, u64);

/// One applied checkpoint save: (apply order, turns, made by the current holder).
type Save = (usize, u32, bool);

/// Per-dispatch durable progress: checkpoint saves and terminals, by apply order.
struct Progress {
    saves: BTreeMap<DispatchKey, Vec<Save>>,
    /// (run, generation, dispatch) -> order of the first applied terminal (ref = dispatch).
    terminals: BTreeMap<DispatchKey, (usize, String)>,
}

fn progress(j: &Judged, life: &Lifecycle) -> Progress {
    let mut p = Progress { saves: BTreeMap::new(), terminals: BTreeMap::new() };
    walk_grants(j, |c, g| {
        let o = order(c);
        match c.op {
            OpKind::BlobPut => {
                let Some(r) = c.args.blob_ref.as_deref() else { return };
                let Some(seq) = ckpt_seq(r) else { return };
                let gen = life.generation(&c.run_id, o);
                let legit = match &c.lease {
                    Some(_) => super::model::is_legit(c, g),
                    None => life.current_node(&c.run_id, c.node, c.incarnation, o).is_some(),
                };
                p.saves.entry((c.run_id.clone(), gen, seq)).or_default().push((o, turns_of(c), legit));
            }
            OpKind::Append => {
                let Some(e) = entry_of(c) else { return };
                let (Some(r), false) = (e.ref_seq, e.status == "running") else { return };
                if !matches!(e.kind.as_str(), "agent" | "step") {
                    return;
                }
                let gen = life.generation(&c.run_id, o);
                p.terminals.entry((c.run_id.clone(), gen, r.0)).or_insert((o, e.status.clone()));
            }
            _ => {}
        }
    });
    p
}

fn checkpoint_never_regresses(j: &Judged, out: &mut Vec<Violation>) {
    const P: &str = "checkpoint_never_regresses";
    // (a) applied saves of one ref never go back in turns.
    let mut last: BTreeMap<&str, (u32, &Call)> = BTreeMap::new();
    for &c in &j.applied {
        match c.op {
            OpKind::Delete => last.retain(|r, _| store::types::run_of_ref(r) != c.run_id),
            OpKind::BlobDelete => {
                if let Some(r) = c.args.blob_ref.as_deref() {
                    last.remove(r);
                }
            }
            OpKind::BlobPut => {
                let Some(r) = c.args.blob_ref.as_deref() else { continue };
                if ckpt_seq(r).is_none() {
                    continue;
                }
                let turns = turns_of(c);
                if let Some(&(prev, pc)) = last.get(r) {
                    if turns < prev {
                        out.push(Violation {
                            property: P,
                            witness: format!(
                                "{}'s save of {r} at t={} wrote turn {turns} over turn {prev} saved by {} at t={}",
                                who(c),
                                t(Judged::applied_ns(c)),
                                who(pc),
                                t(Judged::applied_ns(pc))
                            ),
                        });
                    }
                }
                last.insert(r, (turns, c));
            }
            _ => {}
        }
    }
    // (b) no current holder pays a turn a legitimate earlier save covered.
    let life = Lifecycle::build(j);
    let prog = progress(j, &life);
    for f in &j.history.facts {
        let FactKind::Paid { run_id, dispatch, turn, .. } = &f.kind else { continue };
        if life.current_owner(run_id, f).is_none() {
            continue;
        }
        let gen = life.generation(run_id, f.applied_before);
        let covered = prog.saves.get(&(run_id.clone(), gen, *dispatch)).and_then(|v| {
            v.iter().filter(|(o, _, legit)| *o < f.applied_before && *legit).map(|s| s.1).max()
        });
        if let Some(covered) = covered.filter(|&c| c > *turn) {
            out.push(Violation {
                property: P,
                witness: format!(
                    "n{} paid turn {turn} of run {run_id} dispatch {dispatch} at t={} though a holder had already checkpointed {covered} turns of it (a boot restored an older turn)",
                    f.node,
                    t(f.at_ns)
                ),
            });
        }
    }
}

fn completed_dispatch_never_repaid(j: &Judged, out: &mut Vec<Violation>) {
    const P: &str = "completed_dispatch_never_repaid";
    let life = Lifecycle::build(j);
    let prog = progress(j, &life);
    let mut seen: BTreeMap<(String, usize, u64, u32, &'static str), &Fact> = BTreeMap::new();
    for f in &j.history.facts {
        let (run_id, dispatch, turn, what) = match &f.kind {
            FactKind::Paid { run_id, dispatch, turn, .. } => (run_id, *dispatch, *turn, "paid turn"),
            FactKind::Tool { run_id, dispatch, turn, .. } => (run_id, *dispatch, *turn, "tool of turn"),
            _ => continue,
        };
        if life.current_owner(run_id, f).is_none() {
            continue;
        }
        let gen = life.generation(run_id, f.applied_before);
        let key = (run_id.clone(), gen, dispatch);
        if let Some((o, status)) = prog.terminals.get(&key).filter(|(o, _)| *o < f.applied_before) {
            let _ = o;
            out.push(Violation {
                property: P,
                witness: format!(
                    "n{} {what} {turn} of run {run_id} dispatch {dispatch} at t={} after the dispatch's {status} terminal was durable",
                    f.node,
                    t(f.at_ns)
                ),
            });
            continue;
        }
        let covered = prog
            .saves
            .get(&key)
            .and_then(|v| v.iter().filter(|(o, _, legit)| *o < f.applied_before && *legit).map(|s| s.1).max())
            .unwrap_or(0);
        let k = (run_id.clone(), gen, dispatch, turn, what);
        if let Some(prev) = seen.get(&k) {
            if turn < covered {
                out.push(Violation {
                    property: P,
                    witness: format!(
                        "n{} {what} {turn} of run {run_id} dispatch {dispatch} again at t={} (first by n{} at t={}) though {covered} turns were checkpointed",
                        f.node,
                        t(f.at_ns),
                        prev.node,
                        t(prev.at_ns)
                    ),
                });
            }
        } else {
            seen.insert(k, f);
        }
    }
}

fn settle_status(e: &JournalEntry) -> Option<RunStatus> {
    if e.kind != "decision" {
        return None;
    }
    if e.value.get("decisionType").and_then(Value::as_str) != Some(store::engine::RUN_SETTLE_DECISION_TYPE) {
        return None;
    }
    e.value.get("runStatus").and_then(Value::as_str).and_then(RunStatus::parse)
}

fn one_ok_settle_per_completed_run(j: &Judged, out: &mut Vec<Violation>) {
    const P: &str = "one_ok_settle_per_completed_run";
    for run in j.fin.entries.keys() {
        let entries = final_entries(j, run);
        let settles: Vec<(usize, RunStatus)> =
            entries.iter().enumerate().filter_map(|(i, e)| settle_status(e).map(|s| (i, s))).collect();
        if settles.is_empty() {
            continue;
        }
        let oks = settles.iter().filter(|(_, s)| *s == RunStatus::Ok).count();
        if oks > 1 {
            out.push(Violation {
                property: P,
                witness: format!("run {run}: the journal holds {oks} ok run_settle entries"),
            });
        }
        if final_status(j, run) == Some(RunStatus::Ok) && settles.last().map(|s| s.1) != Some(RunStatus::Ok) {
            out.push(Violation {
                property: P,
                witness: format!(
                    "run {run}: meta is ok but the journal's last run_settle is {}",
                    settles.last().map_or("none".to_string(), |s| s.1.to_string())
                ),
            });
        }
        for w in settles.windows(2) {
            if w[0].1 == w[1].1 && w[1].0 == w[0].0 + 1 {
                out.push(Violation {
                    property: P,
                    witness: format!(
                        "run {run}: two {} run_settle entries at positions {} and {} with no journal work between them",
                        w[0].1,
                        w[0].0 + 1,
                        w[1].0 + 1
                    ),
                });
            }
        }
    }
}

fn no_live_run_deleted(j: &Judged, out: &mut Vec<Violation>) {
    walk_grants(j, |c, g| {
        if c.op != OpKind::Delete {
            return;
        }
        let Some(g) = g else { return };
        if g.ended.is_some() {
            return;
        }
        let now = Judged::checked_ms(c).unwrap_or(i64::MIN);
        if now >= g.expires_at {
            return;
        }
        let own = match &c.lease {
            Some(l) => l.epoch.0 == g.epoch && l.owner == g.owner,
            None => g.node == c.node && c.args.owner.as_deref().is_none_or(|o| o == g.owner),
        };
        if !own {
            out.push(Violation {
                property: "no_live_run_deleted",
                witness: format!(
                    "{}'s delete of run {} at t={} removed it while epoch {} of n{} ({}) was live for {}ms more",
                    who(c),
                    c.run_id,
                    t(Judged::applied_ns(c)),
                    g.epoch,
                    g.node,
                    g.owner,
                    g.expires_at - now
                ),
            });
        }
    });
}

fn settled_value_matches_workflow(j: &Judged, out: &mut Vec<Violation>) {
    let workflows = catalog_workflows();
    let mut submitted: BTreeMap<&str, &str> = BTreeMap::new();
    for f in &j.history.facts {
        match &f.kind {
            FactKind::Submitted { run_id, workflow } => {
                submitted.insert(run_id, workflow);
            }
            FactKind::Settled { run_id, status, value, segment } if status == "ok" => {
                let Some(wf) = submitted.get(run_id.as_str()).and_then(|w| workflows.get(*w)) else {
                    continue;
                };
                let want = expected_value(wf);
                let have: Option<Value> = value.as_deref().and_then(|v| serde_json::from_str(v).ok());
                if have.as_ref() != Some(&want) {
                    out.push(Violation {
                        property: "settled_value_matches_workflow",
                        witness: format!(
                            "run {run_id}: n{}'s segment {segment} settled ok at t={} with {} instead of {want}",
                            f.node,
                            t(f.at_ns),
                            value.as_deref().unwrap_or("no value")
                        ),
                    });
                }
            }
            _ => {}
        }
    }
}

fn all_runs_settle_after_heal(j: &Judged, out: &mut Vec<Violation>) {
    if !j.history.facts.iter().any(|f| f.kind == FactKind::Healed) {
        return;
    }
    const P: &str = "all_runs_settle_after_heal";
    for run in j.fin.meta.keys() {
        let status = final_status(j, run);
        let audit = classify(run, status, &final_entries(j, run));
        if !status.is_some_and(|s| s.is_terminal()) || audit.verdict != Verdict::Consistent {
            out.push(Violation {
                property: P,
                witness: format!(
                    "run {run} ends {} ({:?} by the reconciler: {})",
                    status.map_or("without meta".to_string(), |s| s.to_string()),
                    audit.verdict,
                    audit.reason
                ),
            });
        }
    }
    for (run, entries) in &j.fin.entries {
        if !entries.is_empty() && !j.fin.meta.contains_key(run) {
            out.push(Violation {
                property: P,
                witness: format!("run {run} ends with {} journal entries and no meta row", entries.len()),
            });
        }
    }
}
