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
//! Only runs an engine actor started (a `Submitted` fact) are judged: the store-level actors
//! (soak writers, tombstone tenants) write meta and journals by other rules.
//!
//! A run's generation starts at each applied journal delete of it: dispatch seqs, blobs
//! and counters are judged within one generation.

use std::collections::BTreeMap;

use serde_json::Value;
use store::engine::Op;

use super::contract::{
    audit, checkpoint_seq, checkpoint_turns, op_key, run_of_ref, settle_status, EntryView, MetaView, Status,
    Verdict,
};
use super::model::{t, walk_grants, who, Judged};
use super::{Expectation, Property, Violation};
use crate::history::{Call, Fact, FactKind, OpKind};
use crate::ledger::{catalog_workflows, expected_value};

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
        name: "every_boot_bumps_segments",
        expectation: Expectation::Always,
        claim: "The first meta write of a run under a new lease (a segment's boot write) sets segments above every earlier write's, so no two segments share a counter base.",
        not_checked: "Meta writes that carry no lease (engines before the lease was threaded into meta).",
        check: every_boot_bumps_segments,
    },
    Property {
        name: "journal_never_behind_meta",
        expectation: Expectation::Always,
        claim: "Every applied terminal meta write leaves the run consistent with its journal by the reconciler's table (the settle precedes the meta, and no terminal meta lands over live journal work).",
        not_checked: "Non-terminal meta writes (a meta-behind residue after a crash is legal and repairable).",
        check: journal_never_behind_meta,
    },
    Property {
        name: "settle_follows_segment_work",
        expectation: Expectation::Always,
        claim: "A segment that appended anything before its settle meta write appended a run_settle of that status as its last entry (the write-on-change rule: new work is always journaled as settled).",
        not_checked: "Meta writes that carry no lease; segments that appended nothing (their settle is skipped when the status is unchanged).",
        check: settle_follows_segment_work,
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
        claim: "No deletion made under a lease (its own, or the engine cascade's brief lease it did not pass on) removes a run while another holder's grant of it is live and unreleased.",
        not_checked: "Deletions under no lease outside an engine cascade (a host decision), and runs nobody holds.",
        check: no_live_run_deleted,
    },
    Property {
        name: "non_replayable_terminal_reruns",
        expectation: Expectation::Always,
        claim: "A segment that settles a run ok, booted while the journal's last settle was not ok, dispatched again (a new running entry) every op whose latest dispatch had ended error, limit or cancelled: those are never replayed as results.",
        not_checked: "Meta writes and appends that carry no lease; ops whose latest terminal is ok (those replay).",
        check: non_replayable_terminal_reruns,
    },
    Property {
        name: "deleted_run_leaves_no_blobs",
        expectation: Expectation::Always,
        claim: "When an engine deletion cascade's journal delete applies, none of the run's blobs remain (a recreated run id must not inherit a dead incarnation's checkpoints).",
        not_checked: "Deletions outside an engine cascade (a bare store delete never touches blobs).",
        check: deleted_run_leaves_no_blobs,
    },
    Property {
        name: "settled_value_matches_workflow",
        expectation: Expectation::Always,
        claim: "Every segment that settles ok returns exactly the workflow's value in this world.",
        not_checked: "Values of runs whose workflow the world does not know.",
        check: settled_value_matches_workflow,
    },
    Property {
        name: "deleted_run_stays_deleted",
        expectation: Expectation::Always,
        claim: "After a run's journal delete applies, nothing writes the run again (journal, meta or blob) unless its host submitted or explicitly resumed it since: a deleted run is never resurrected by a worker or a stale holder.",
        not_checked: "Runs no engine actor started; writes that were refused.",
        check: deleted_run_stays_deleted,
    },
    Property {
        name: "completed_run_did_its_work",
        expectation: Expectation::Always,
        claim: "A run that ends ok did all of its workflow's work: every step and agent op has a terminal entry, an ok one paid every provider turn and ran every tool turn of its dispatch at least once, and every await's suspension has its own journaled resolution.",
        not_checked: "Exactly-once (repayment is completed_dispatch_never_repaid's); runs whose workflow the world does not know; runs that do not end ok.",
        check: completed_run_did_its_work,
    },
    Property {
        name: "all_runs_settle_after_heal",
        expectation: Expectation::Eventually,
        claim: "After the heal (faults off, every node up, suspensions answered), every run with a meta row is terminal and consistent with its journal, and no journal is left without a meta row.",
        not_checked: "Scenarios without a heal phase; runs lost before their first meta write.",
        check: all_runs_settle_after_heal,
    },
];

/// The runs an engine actor started (a `Submitted` fact): the engine properties judge only
/// these, never the store-level actors' runs (the soak's, the tombstone's).
fn engine_runs<'h>(j: &Judged<'h>) -> std::collections::BTreeSet<&'h str> {
    j.history
        .facts
        .iter()
        .filter_map(|f| match &f.kind {
            FactKind::Submitted { run_id, .. } => Some(run_id.as_str()),
            _ => None,
        })
        .collect()
}

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
                    let epoch = Judged::granted_epoch(c);
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

fn meta_of(c: &Call) -> Option<MetaView> {
    c.args.payload.as_deref().and_then(MetaView::parse)
}

fn entry_of(c: &Call) -> Option<EntryView> {
    c.args.payload.as_deref().and_then(EntryView::parse)
}

fn segments_never_regress(j: &Judged, out: &mut Vec<Violation>) {
    let runs = engine_runs(j);
    let mut last: BTreeMap<&str, (u64, &Call)> = BTreeMap::new();
    for &c in j.applied.iter().filter(|c| runs.contains(c.run_id.as_str())) {
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
                            op: Some(c.op.as_str()),
                            call: Some(c.id),
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

fn every_boot_bumps_segments(j: &Judged, out: &mut Vec<Violation>) {
    let runs = engine_runs(j);
    // Per run: the highest segments written so far, and the epoch of the last leased write.
    let mut seen: BTreeMap<&str, (u64, Option<u64>)> = BTreeMap::new();
    for &c in j.applied.iter().filter(|c| runs.contains(c.run_id.as_str())) {
        match c.op {
            OpKind::Delete => {
                seen.remove(c.run_id.as_str());
            }
            OpKind::PutMeta => {
                let Some(m) = meta_of(c) else { continue };
                let Some(seg) = m.segments else { continue };
                let Some(epoch) = c.lease.as_ref().map(|l| l.epoch.0) else { continue };
                if super::repair::is_repair(j, c) {
                    continue; // an audit repair rewrites the status, not a segment's boot
                }
                let entry = seen.entry(c.run_id.as_str()).or_insert((0, None));
                if entry.1.is_some_and(|e| e != epoch) && seg <= entry.0 {
                    out.push(Violation {
                        property: "every_boot_bumps_segments",
                        witness: format!(
                            "run {}: {}'s first meta write under epoch {epoch} ({}) at t={} set segments={seg}, not above the {} already written",
                            c.run_id,
                            who(c),
                            m.status,
                            t(Judged::applied_ns(c)),
                            entry.0
                        ),
                        op: Some(c.op.as_str()),
                        call: Some(c.id),
                    });
                }
                *entry = (entry.0.max(seg), Some(epoch));
            }
            _ => {}
        }
    }
}

fn journal_never_behind_meta(j: &Judged, out: &mut Vec<Violation>) {
    let runs = engine_runs(j);
    let mut journal: BTreeMap<&str, Vec<EntryView>> = BTreeMap::new();
    for &c in j.applied.iter().filter(|c| runs.contains(c.run_id.as_str())) {
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
                let audit = audit(Some(m.status), entries);
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
                        op: Some(c.op.as_str()),
                        call: Some(c.id),
                    });
                }
            }
            _ => {}
        }
    }
}

fn settle_follows_segment_work(j: &Judged, out: &mut Vec<Violation>) {
    let runs = engine_runs(j);
    // Per (run, epoch, owner): the last entry that lease appended.
    let mut last: BTreeMap<(&str, u64, &str), EntryView> = BTreeMap::new();
    for &c in j.applied.iter().filter(|c| runs.contains(c.run_id.as_str())) {
        let Some(l) = &c.lease else { continue };
        let key = (c.run_id.as_str(), l.epoch.0, l.owner.as_str());
        match c.op {
            OpKind::Append => {
                if let Some(e) = entry_of(c) {
                    last.insert(key, e);
                }
            }
            OpKind::PutMeta => {
                let Some(m) = meta_of(c) else { continue };
                if m.status == Status::Running {
                    continue;
                }
                let Some(e) = last.get(&key) else { continue };
                if settle_status(e) != Some(m.status) {
                    out.push(Violation {
                        property: "settle_follows_segment_work",
                        witness: format!(
                            "run {}: {}'s settle meta write ({}) at t={} follows its own {} entry seq {} and no run_settle of that status",
                            c.run_id,
                            who(c),
                            m.status,
                            t(Judged::applied_ns(c)),
                            e.kind,
                            e.seq
                        ),
                        op: Some(c.op.as_str()),
                        call: Some(c.id),
                    });
                }
            }
            _ => {}
        }
    }
}

fn final_entries(j: &Judged, run: &str) -> Vec<EntryView> {
    j.fin.entries.get(run).map(|v| v.iter().filter_map(|p| EntryView::parse(p)).collect()).unwrap_or_default()
}

fn final_status(j: &Judged, run: &str) -> Option<Status> {
    j.fin.meta.get(run).and_then(|p| MetaView::parse(p)).map(|m| m.status)
}

fn no_stranded_run(j: &Judged, out: &mut Vec<Violation>) {
    let runs = engine_runs(j);
    for run in j.fin.meta.keys().filter(|r| runs.contains(r.as_str())) {
        let audit = audit(final_status(j, run), &final_entries(j, run));
        if audit.verdict == Verdict::Stranded {
            out.push(Violation {
                property: "no_stranded_run",
                witness: format!("run {run} ends stranded: {}", audit.reason),
                op: None,
                call: None,
            });
        }
    }
}

/// The turn count of a checkpoint write's bytes (0 for undecodable bytes).
fn turns_of(c: &Call) -> u32 {
    c.args.bytes.as_deref().and_then(checkpoint_turns).unwrap_or(0)
}

/// One dispatch of one generation of a run: (run, generation, running seq).
type DispatchKey = (String, usize, u64);

/// One applied checkpoint save: (apply order, turns, made by the current holder).
type Save = (usize, u32, bool);

/// Grants, deletions and per-dispatch progress: what the payment properties read, built once
/// per judged run (see [`Judged`]'s cache).
pub(super) struct Dispatches {
    life: Lifecycle,
    prog: Progress,
}

fn dispatches<'a>(j: &'a Judged) -> (&'a Lifecycle, &'a Progress) {
    let d = j.dispatches.get_or_init(|| {
        let life = Lifecycle::build(j);
        let prog = progress(j, &life);
        Dispatches { life, prog }
    });
    (&d.life, &d.prog)
}

/// Per-dispatch durable progress: checkpoint saves and terminals, by apply order.
struct Progress {
    saves: BTreeMap<DispatchKey, Vec<Save>>,
    /// (run, generation, dispatch) -> order of the first applied terminal (ref = dispatch).
    terminals: BTreeMap<DispatchKey, (usize, String)>,
}

fn progress(j: &Judged, life: &Lifecycle) -> Progress {
    let mut p = Progress { saves: BTreeMap::new(), terminals: BTreeMap::new() };
    // Dispatches exist only in runs an engine actor started; other runs' appends are not
    // engine entries and are not decoded here.
    let runs = engine_runs(j);
    if runs.is_empty() {
        return p;
    }
    walk_grants(j, |c, g| {
        if !runs.contains(c.run_id.as_str()) {
            return;
        }
        let o = order(c);
        match c.op {
            OpKind::BlobPut => {
                let Some(r) = c.args.blob_ref.as_deref() else { return };
                let Some(seq) = checkpoint_seq(r) else { return };
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
                p.terminals.entry((c.run_id.clone(), gen, r)).or_insert((o, e.status.clone()));
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
            OpKind::Delete => last.retain(|r, _| run_of_ref(r) != c.run_id),
            OpKind::BlobDelete => {
                if let Some(r) = c.args.blob_ref.as_deref() {
                    last.remove(r);
                }
            }
            OpKind::BlobPut => {
                let Some(r) = c.args.blob_ref.as_deref() else { continue };
                if checkpoint_seq(r).is_none() {
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
                            op: Some(c.op.as_str()),
                            call: Some(c.id),
                        });
                    }
                }
                last.insert(r, (turns, c));
            }
            _ => {}
        }
    }
    // (b) no current holder pays a turn a legitimate earlier save covered.
    let (life, prog) = dispatches(j);
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
                op: None,
                call: None,
            });
        }
    }
}

fn completed_dispatch_never_repaid(j: &Judged, out: &mut Vec<Violation>) {
    const P: &str = "completed_dispatch_never_repaid";
    let (life, prog) = dispatches(j);
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
                op: None,
                call: None,
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
                    op: None,
                    call: None,
                });
            }
        } else {
            seen.insert(k, f);
        }
    }
}

fn one_ok_settle_per_completed_run(j: &Judged, out: &mut Vec<Violation>) {
    let runs = engine_runs(j);
    const P: &str = "one_ok_settle_per_completed_run";
    for run in j.fin.entries.keys().filter(|r| runs.contains(r.as_str())) {
        let entries = final_entries(j, run);
        let settles: Vec<(usize, Status)> =
            entries.iter().enumerate().filter_map(|(i, e)| settle_status(e).map(|s| (i, s))).collect();
        if settles.is_empty() {
            continue;
        }
        let oks = settles.iter().filter(|(_, s)| *s == Status::Ok).count();
        if oks > 1 {
            out.push(Violation {
                property: P,
                witness: format!("run {run}: the journal holds {oks} ok run_settle entries"),
                op: None,
                call: None,
            });
        }
        if final_status(j, run) == Some(Status::Ok) && settles.last().map(|s| s.1) != Some(Status::Ok) {
            out.push(Violation {
                property: P,
                witness: format!(
                    "run {run}: meta is ok but the journal's last run_settle is {}",
                    settles.last().map_or("none".to_string(), |s| s.1.to_string())
                ),
                op: None,
                call: None,
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
                    op: None,
                    call: None,
                });
            }
        }
    }
}

/// The epoch an engine deletion cascade of node `n` (incarnation `i`) acts under when its
/// journal delete carries no lease: the retention's brief lease (noted at
/// `worker.retention.after_acquire`), or a host cascade's lease (at `engine.delete.after_blobs`).
/// `None`: no cascade, or one without a lease (a host decision).
fn cascade_epoch(j: &Judged, c: &Call) -> Option<u64> {
    let before = order(c);
    for m in j.history.marks.iter().rev() {
        if m.node != c.node
            || m.incarnation != c.incarnation
            || m.run_id != c.run_id
            || m.applied_before > before
        {
            continue;
        }
        match m.point {
            "engine.delete.after_blobs" | "worker.retention.after_acquire" => return m.epoch,
            _ => {}
        }
    }
    None
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
        // Whose lease the deletion acts under: its own, or (carried by no lease) the
        // engine cascade's. A deletion under no lease at all is a host decision.
        let own = match &c.lease {
            Some(l) => l.epoch.0 == g.epoch && l.owner == g.owner,
            None => match cascade_epoch(j, c) {
                Some(epoch) => epoch == g.epoch,
                None => return,
            },
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
                op: Some(c.op.as_str()),
                call: Some(c.id),
            });
        }
    });
}

fn non_replayable_terminal_reruns(j: &Judged, out: &mut Vec<Violation>) {
    let runs = engine_runs(j);
    /// What one lease saw at its boot, and what it appended since.
    struct Tenure {
        must_rerun: Vec<String>,
        rerun: Vec<String>,
    }
    let mut journal: BTreeMap<&str, Vec<EntryView>> = BTreeMap::new();
    let mut tenures: BTreeMap<(&str, u64, &str), Tenure> = BTreeMap::new();
    for &c in j.applied.iter().filter(|c| runs.contains(c.run_id.as_str())) {
        if c.op == OpKind::Delete {
            journal.remove(c.run_id.as_str());
            continue;
        }
        let Some(l) = &c.lease else { continue };
        if !matches!(c.op, OpKind::Append | OpKind::PutMeta) {
            continue;
        }
        let key = (c.run_id.as_str(), l.epoch.0, l.owner.as_str());
        let entries = journal.entry(c.run_id.as_str()).or_default();
        let tenure = tenures.entry(key).or_insert_with(|| {
            let settled_ok = entries.iter().rev().find_map(settle_status) == Some(Status::Ok);
            // Per op key: its latest dispatch (running entry) and that dispatch's terminal.
            let mut latest: BTreeMap<&str, Option<&str>> = BTreeMap::new();
            for e in entries.iter() {
                if matches!(e.kind.as_str(), "agent" | "step") && e.status == "running" && e.ref_seq.is_none()
                {
                    let terminal =
                        entries.iter().find(|t| t.ref_seq == Some(e.seq)).map(|t| t.status.as_str());
                    latest.insert(e.key.as_str(), terminal);
                }
            }
            let must_rerun = if settled_ok {
                Vec::new()
            } else {
                latest
                    .iter()
                    .filter(|(_, s)| matches!(**s, Some("error" | "limit" | "cancelled")))
                    .map(|(k, _)| k.to_string())
                    .collect()
            };
            Tenure { must_rerun, rerun: Vec::new() }
        });
        if c.op != OpKind::Append {
            continue;
        }
        let Some(e) = entry_of(c) else { continue };
        if e.status == "running" && e.ref_seq.is_none() {
            tenure.rerun.push(e.key.clone());
        }
        if settle_status(&e) == Some(Status::Ok) {
            for k in tenure.must_rerun.iter().filter(|k| !tenure.rerun.contains(k)) {
                out.push(Violation {
                    property: "non_replayable_terminal_reruns",
                    witness: format!(
                        "run {}: {} settled ok at t={} without dispatching {k} again, whose latest terminal was not ok when it booted (a non-replayable terminal was replayed)",
                        c.run_id,
                        who(c),
                        t(Judged::applied_ns(c))
                    ),
                    op: Some(c.op.as_str()),
                    call: Some(c.id),
                });
            }
        }
        entries.push(e);
    }
}

fn deleted_run_leaves_no_blobs(j: &Judged, out: &mut Vec<Violation>) {
    let mut blobs: BTreeMap<&str, &Call> = BTreeMap::new();
    for &c in &j.applied {
        match c.op {
            OpKind::BlobPut => {
                if let Some(r) = c.args.blob_ref.as_deref() {
                    blobs.insert(r, c);
                }
            }
            OpKind::BlobDelete => {
                if let Some(r) = c.args.blob_ref.as_deref() {
                    blobs.remove(r);
                }
            }
            OpKind::Delete => {
                let before = order(c);
                let cascade = j
                    .history
                    .marks
                    .iter()
                    .rev()
                    .find(|m| {
                        m.node == c.node
                            && m.incarnation == c.incarnation
                            && m.run_id == c.run_id
                            && m.applied_before <= before
                    })
                    .is_some_and(|m| {
                        matches!(m.point, "engine.delete.after_blobs" | "worker.retention.after_blobs")
                    });
                if !cascade {
                    continue;
                }
                let left: Vec<&str> =
                    blobs.keys().copied().filter(|r| run_of_ref(r) == c.run_id && r.contains('/')).collect();
                if !left.is_empty() {
                    out.push(Violation {
                        property: "deleted_run_leaves_no_blobs",
                        witness: format!(
                            "{}'s cascade deleted run {} at t={} with {} of its blobs still stored ({})",
                            who(c),
                            c.run_id,
                            t(Judged::applied_ns(c)),
                            left.len(),
                            left.join(", ")
                        ),
                        op: Some(c.op.as_str()),
                        call: Some(c.id),
                    });
                }
            }
            _ => {}
        }
    }
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
                        op: None,
                        call: None,
                    });
                }
            }
            _ => {}
        }
    }
}

fn deleted_run_stays_deleted(j: &Judged, out: &mut Vec<Violation>) {
    let runs = engine_runs(j);
    if runs.is_empty() {
        return;
    }
    // When each run's host asked for it (a submission or an explicit resume), by apply count.
    // A resume asks as of the reads it prepares from: a resume decided before a deletion
    // whose reads saw the deletion resumes the run as it is then (a user's retry of a run
    // that is gone), so its intent counts from what those reads saw.
    let mut intents: BTreeMap<&str, Vec<usize>> = BTreeMap::new();
    for f in &j.history.facts {
        match &f.kind {
            FactKind::Submitted { run_id, .. } => intents.entry(run_id).or_default().push(f.applied_before),
            FactKind::Resumed { run_id } => {
                let mine = |c: &&Call| {
                    c.run_id == *run_id
                        && c.args.actor.as_deref() == Some(f.owner.as_str())
                        && c.invoked_ns >= f.at_ns
                };
                let first_write = j
                    .history
                    .calls
                    .iter()
                    .filter(mine)
                    .filter(|c| matches!(c.op, OpKind::Append | OpKind::PutMeta | OpKind::BlobPut))
                    .map(|c| c.id)
                    .min()
                    .unwrap_or(usize::MAX);
                let read = j
                    .history
                    .calls
                    .iter()
                    .filter(mine)
                    .filter(|c| c.op == OpKind::GetMeta && c.id < first_write && c.outcome.is_ok())
                    .filter_map(|c| c.seen_at)
                    .max();
                intents
                    .entry(run_id)
                    .or_default()
                    .push(read.map_or(f.applied_before, |r| r.max(f.applied_before)));
            }
            _ => {}
        }
    }
    let mut deleted: BTreeMap<&str, &Call> = BTreeMap::new();
    for &c in &j.applied {
        let run = c.run_id.as_str();
        if !runs.contains(run) {
            continue;
        }
        match c.op {
            OpKind::Delete => {
                deleted.insert(run, c);
            }
            OpKind::Append | OpKind::PutMeta | OpKind::BlobPut => {
                let Some(&d) = deleted.get(run) else { continue };
                let (after, at) = (order(d) + 1, order(c));
                let asked = intents.get(run).is_some_and(|v| v.iter().any(|&a| a >= after && a <= at));
                if !asked {
                    out.push(Violation {
                        property: "deleted_run_stays_deleted",
                        witness: format!(
                            "run {run} was deleted by {} at t={}; {}'s {} at t={} wrote it again with no submission or resume since",
                            who(d),
                            t(Judged::applied_ns(d)),
                            who(c),
                            c.op.as_str(),
                            t(Judged::applied_ns(c))
                        ),
                        op: Some(c.op.as_str()),
                        call: Some(c.id),
                    });
                }
                deleted.remove(run);
            }
            _ => {}
        }
    }
}

fn completed_run_did_its_work(j: &Judged, out: &mut Vec<Violation>) {
    use std::collections::BTreeSet;
    let workflows = catalog_workflows();
    let mut workflow_of: BTreeMap<&str, &str> = BTreeMap::new();
    let mut paid: BTreeSet<(&str, &str, u64, u32)> = BTreeSet::new();
    let mut ran: BTreeSet<(&str, &str, u64, u32)> = BTreeSet::new();
    for f in &j.history.facts {
        match &f.kind {
            FactKind::Submitted { run_id, workflow } => {
                workflow_of.insert(run_id, workflow);
            }
            FactKind::Paid { run_id, op, dispatch, turn } => {
                paid.insert((run_id, op, *dispatch, *turn));
            }
            FactKind::Tool { run_id, op, dispatch, turn } => {
                ran.insert((run_id, op, *dispatch, *turn));
            }
            _ => {}
        }
    }
    for (run, wf_name) in workflow_of {
        if final_status(j, run) != Some(Status::Ok) {
            continue;
        }
        let Some(wf) = workflows.get(wf_name) else { continue };
        let entries = final_entries(j, run);
        let mut missing: Vec<String> = Vec::new();
        for (index, op) in wf.ops.iter().enumerate() {
            let key = op_key(op, index);
            match op {
                Op::Step { name } | Op::Agent { name, .. } => {
                    let kind = if matches!(op, Op::Step { .. }) { "step" } else { "agent" };
                    let Some(terminal) = entries.iter().rev().find(|e| {
                        e.key == key && e.kind == kind && e.status != "running" && e.ref_seq.is_some()
                    }) else {
                        missing.push(format!("{key} has no terminal entry"));
                        continue;
                    };
                    // Only an ok terminal did all its turns (a `limit` stopped early by design).
                    if terminal.status != "ok" {
                        continue;
                    }
                    let dispatch = terminal.ref_seq.unwrap_or(0);
                    let (provider_turns, tool_turns) = match op {
                        // An agent that cannot end ok within a sane turn count is not judged.
                        Op::Agent { tool_turns, .. } if *tool_turns > 1_000 => continue,
                        Op::Agent { tool_turns, .. } => (Some(*tool_turns), *tool_turns),
                        _ => (None, 1),
                    };
                    for turn in 0..=provider_turns.unwrap_or(0) {
                        if provider_turns.is_some() && !paid.contains(&(run, name.as_str(), dispatch, turn)) {
                            missing.push(format!(
                                "{key}: provider turn {turn} of dispatch {dispatch} was never paid"
                            ));
                        }
                    }
                    for turn in 0..tool_turns {
                        if !ran.contains(&(run, name.as_str(), dispatch, turn)) {
                            missing.push(format!("{key}: tool turn {turn} of dispatch {dispatch} never ran"));
                        }
                    }
                }
                Op::Await { .. } => {
                    let Some(suspension) = entries.iter().rev().find(|e| {
                        e.key == key
                            && matches!(e.kind.as_str(), "external" | "approval")
                            && e.status == "suspended"
                    }) else {
                        missing.push(format!("{key} never suspended"));
                        continue;
                    };
                    if !entries.iter().any(|e| e.kind == "resolution" && e.ref_seq == Some(suspension.seq)) {
                        missing.push(format!(
                            "{key}: the suspension at seq {} has no resolution",
                            suspension.seq
                        ));
                    }
                }
            }
        }
        if let Some(first) = missing.first() {
            out.push(Violation {
                property: "completed_run_did_its_work",
                witness: format!(
                    "run {run} ({wf_name}) ends ok but {first}{}",
                    if missing.len() > 1 {
                        format!(" (and {} more)", missing.len() - 1)
                    } else {
                        String::new()
                    }
                ),
                op: None,
                call: None,
            });
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
        let audit = audit(status, &final_entries(j, run));
        if !status.is_some_and(|s| s.is_terminal()) || audit.verdict != Verdict::Consistent {
            out.push(Violation {
                property: P,
                witness: format!(
                    "run {run} ends {} ({:?} by the reconciler: {})",
                    status.map_or("without meta".to_string(), |s| s.to_string()),
                    audit.verdict,
                    audit.reason
                ),
                op: None,
                call: None,
            });
        }
    }
    for (run, entries) in &j.fin.entries {
        if !entries.is_empty() && !j.fin.meta.contains_key(run) {
            out.push(Violation {
                property: P,
                witness: format!("run {run} ends with {} journal entries and no meta row", entries.len()),
                op: None,
                call: None,
            });
        }
    }
}

#[cfg(test)]
mod tests {
    //! Each engine property shown able to fail on a minimal violating history, and quiet on
    //! its lawful twin.

    use serde_json::json;
    use store::{Epoch, Lease, RunStatus};

    use super::*;
    use crate::history::FinalState;
    use crate::history::{Applied, Args, History, LeaseRow, Outcome};
    use crate::oracle::{Expect, Violation};

    const TTL: i64 = 300;

    /// A history under construction: every mutation applies 1 ms after the previous one.
    #[derive(Default)]
    struct H {
        h: History,
        fin: FinalState,
        now_ms: i64,
    }

    fn lease(run: &str, owner: &str, epoch: u64) -> Lease {
        Lease { run_id: run.into(), owner: owner.into(), epoch: Epoch(epoch) }
    }

    impl H {
        /// A history in which an engine host started run `r`.
        fn engine_run() -> H {
            let mut h = H::default();
            h.fact(0, "host", FactKind::Submitted { run_id: "r".into(), workflow: "happy".into() });
            h
        }
        fn push(
            &mut self,
            node: u32,
            op: OpKind,
            run: &str,
            lease: Option<Lease>,
            args: Args,
            granted: Option<Lease>,
        ) {
            self.now_ms += 1;
            let id = self.h.calls.len();
            let order = self.h.applied_count;
            self.h.applied_count += 1;
            let ns = self.now_ms as u64 * 1_000_000;
            let row = granted.as_ref().map(|g| LeaseRow {
                owner: g.owner.clone(),
                epoch: g.epoch.0,
                expires_at: self.now_ms + TTL,
            });
            self.h.calls.push(Call {
                id,
                node,
                incarnation: 0,
                op,
                run_id: run.into(),
                lease,
                args,
                invoked_ns: ns,
                returned_ns: Some(ns),
                outcome: Outcome::Ok { detail: String::new() },
                granted,
                checked_now_ms: Some(self.now_ms),
                lease_grant: None,
                applied: Some(Applied {
                    order,
                    at_ns: ns,
                    store_now_ms: self.now_ms,
                    lease_row: row,
                    site_epoch: None,
                }),
                seen_at: Some(order + 1),
                read: None,
            });
        }
        fn acquire(&mut self, node: u32, owner: &str, run: &str, epoch: u64) -> Lease {
            let l = lease(run, owner, epoch);
            let args = Args { owner: Some(owner.into()), ..Args::default() };
            self.push(node, OpKind::Acquire, run, None, args, Some(l.clone()));
            l
        }
        fn meta(&mut self, node: u32, l: Option<&Lease>, run: &str, status: RunStatus, segments: u64) {
            let m =
                json!({"runId": run, "status": Status::of(status).word(), "segments": segments}).to_string();
            let args = Args { payload: Some(m.clone()), ..Args::default() };
            self.push(node, OpKind::PutMeta, run, l.cloned(), args, None);
            self.fin.meta.insert(run.into(), m);
        }
        fn append(&mut self, node: u32, l: &Lease, run: &str, e: Value) {
            let args = Args { seq: e["seq"].as_u64(), payload: Some(e.to_string()), ..Args::default() };
            self.push(node, OpKind::Append, run, Some(l.clone()), args, None);
            self.fin.entries.entry(run.into()).or_default().push(e.to_string());
        }
        fn ckpt(&mut self, node: u32, l: &Lease, run: &str, dispatch: u64, turns: u32) {
            // The checkpoint blob format of docs/engine-model.md 4.2: 0x01, then the state's JSON.
            let mut bytes = vec![0x01];
            let state = json!({"v": 1, "turns": turns, "toolCallsUsed": turns, "messages": []});
            bytes.extend(state.to_string().into_bytes());
            let r = format!("{run}/ckpt/{dispatch}");
            let args = Args { blob_ref: Some(r), bytes: Some(bytes), ..Args::default() };
            self.push(node, OpKind::BlobPut, run, Some(l.clone()), args, None);
        }
        fn delete(&mut self, node: u32, l: Option<&Lease>, run: &str) {
            self.push(node, OpKind::Delete, run, l.cloned(), Args::default(), None);
            self.fin.entries.remove(run);
            self.fin.meta.remove(run);
        }
        fn fact(&mut self, node: u32, owner: &str, kind: FactKind) {
            self.h.facts.push(Fact {
                at_ns: self.now_ms as u64 * 1_000_000,
                applied_before: self.h.applied_count,
                node,
                incarnation: 0,
                owner: owner.into(),
                kind,
            });
        }
        fn pay(&mut self, node: u32, owner: &str, run: &str, dispatch: u64, turn: u32) {
            self.fact(node, owner, FactKind::Paid { run_id: run.into(), op: "a".into(), dispatch, turn });
        }
        fn judge(&self, property: &str) -> Vec<Violation> {
            let j = Judged::build(&self.h, &self.fin, Expect::default());
            let p = ALL.iter().find(|p| p.name == property).expect("a known property");
            let mut out = Vec::new();
            (p.check)(&j, &mut out);
            out
        }
    }

    fn running(seq: u64) -> Value {
        json!({"seq": seq, "kind": "agent", "status": "running", "key": "op:0:a", "value": {"op": "a"}})
    }

    fn terminal(seq: u64, of: u64, status: &str) -> Value {
        json!({"seq": seq, "kind": "agent", "status": status, "key": "op:0:a", "ref": of, "value": "v"})
    }

    fn settle(seq: u64, status: &str) -> Value {
        json!({
            "seq": seq,
            "kind": "decision",
            "status": "ok",
            "key": "run-settle",
            "value": {"decisionType": "run_settle", "runStatus": status}
        })
    }

    /// A journal entry of op `key` (kind, status), referencing `of` when given.
    fn op_entry(seq: u64, kind: &str, key: &str, status: &str, of: Option<u64>) -> Value {
        json!({"seq": seq, "kind": kind, "status": status, "key": key, "ref": of, "value": "v"})
    }

    /// Run `r` of workflow `workflow` ending ok with `entries` as its final journal.
    fn ended_ok(workflow: &str, entries: &[Value]) -> H {
        let mut h = H::default();
        h.fact(0, "host", FactKind::Submitted { run_id: "r".into(), workflow: workflow.into() });
        h.fin.entries.insert("r".into(), entries.iter().map(Value::to_string).collect());
        h.fin.meta.insert("r".into(), json!({"runId": "r", "status": "ok"}).to_string());
        h
    }

    fn paid(h: &mut H, op: &str, dispatch: u64, turn: u32) {
        h.fact(0, "a", FactKind::Paid { run_id: "r".into(), op: op.into(), dispatch, turn });
    }

    fn tool(h: &mut H, op: &str, dispatch: u64, turn: u32) {
        h.fact(0, "a", FactKind::Tool { run_id: "r".into(), op: op.into(), dispatch, turn });
    }

    #[test]
    fn a_deleted_run_written_again_without_a_resume_is_caught() {
        let mut h = H::engine_run();
        let a = h.acquire(0, "a", "r", 1);
        h.meta(0, Some(&a), "r", RunStatus::Ok, 1);
        h.delete(0, Some(&a), "r");
        let b = h.acquire(1, "worker", "r", 2);
        h.meta(1, Some(&b), "r", RunStatus::Running, 1);
        let v = h.judge("deleted_run_stays_deleted");
        assert_eq!(v.len(), 1, "{v:?}");
        assert!(v[0].witness.contains("wrote it again with no submission or resume"), "{}", v[0].witness);

        // The same writes after the host's explicit resume are the user's retry.
        let mut h = H::engine_run();
        let a = h.acquire(0, "a", "r", 1);
        h.meta(0, Some(&a), "r", RunStatus::Ok, 1);
        h.delete(0, Some(&a), "r");
        h.fact(2, "host", FactKind::Resumed { run_id: "r".into() });
        let b = h.acquire(2, "host", "r", 2);
        h.meta(2, Some(&b), "r", RunStatus::Running, 1);
        assert!(h.judge("deleted_run_stays_deleted").is_empty());
    }

    #[test]
    fn a_completed_run_missing_a_paid_turn_is_caught() {
        let journal = [
            op_entry(1, "agent", "op:0:one", "running", None),
            op_entry(2, "agent", "op:0:one", "ok", Some(1)),
            op_entry(3, "agent", "op:1:two", "running", None),
            op_entry(4, "agent", "op:1:two", "ok", Some(3)),
        ];
        let mut h = ended_ok("happy", &journal);
        paid(&mut h, "one", 1, 0);
        assert_eq!(h.judge("completed_run_did_its_work").len(), 1, "op two was never paid");
        paid(&mut h, "two", 3, 0);
        assert!(h.judge("completed_run_did_its_work").is_empty());
        // A run that does not end ok is not judged.
        let mut h = ended_ok("happy", &journal[..2]);
        h.fin.meta.insert("r".into(), json!({"runId": "r", "status": "running"}).to_string());
        assert!(h.judge("completed_run_did_its_work").is_empty());
    }

    #[test]
    fn a_completed_run_whose_tool_turn_never_ran_is_caught() {
        let journal = [
            op_entry(1, "step", "op:0:fetch", "running", None),
            op_entry(2, "step", "op:0:fetch", "ok", Some(1)),
            op_entry(3, "agent", "op:1:research", "running", None),
            op_entry(4, "agent", "op:1:research", "ok", Some(3)),
            op_entry(5, "step", "op:2:publish", "running", None),
            op_entry(6, "step", "op:2:publish", "ok", Some(5)),
        ];
        let mut h = ended_ok("pipeline", &journal);
        tool(&mut h, "fetch", 1, 0);
        tool(&mut h, "publish", 5, 0);
        for turn in 0..=4 {
            paid(&mut h, "research", 3, turn);
        }
        for turn in [0, 1, 3] {
            tool(&mut h, "research", 3, turn);
        }
        let v = h.judge("completed_run_did_its_work");
        assert_eq!(v.len(), 1, "{v:?}");
        assert!(v[0].witness.contains("tool turn 2 of dispatch 3 never ran"), "{}", v[0].witness);
        // The same turn run under an earlier dispatch does not count for this one.
        tool(&mut h, "research", 1, 2);
        assert_eq!(h.judge("completed_run_did_its_work").len(), 1);
        tool(&mut h, "research", 3, 2);
        assert!(h.judge("completed_run_did_its_work").is_empty());
        // A step with no terminal at all is missing work.
        let mut h = ended_ok("pipeline", &journal[..4]);
        tool(&mut h, "fetch", 1, 0);
        for turn in 0..=4 {
            paid(&mut h, "research", 3, turn);
            tool(&mut h, "research", 3, turn);
        }
        let v = h.judge("completed_run_did_its_work");
        assert!(v.len() == 1 && v[0].witness.contains("op:2:publish has no terminal entry"), "{v:?}");
    }

    #[test]
    fn a_completed_run_past_an_unresolved_suspension_is_caught() {
        let mut journal = vec![
            op_entry(1, "agent", "op:0:draft", "running", None),
            op_entry(2, "agent", "op:0:draft", "ok", Some(1)),
            op_entry(3, "external", "await:sign-off", "suspended", None),
            op_entry(4, "agent", "op:2:publish", "running", None),
            op_entry(5, "agent", "op:2:publish", "ok", Some(4)),
        ];
        let facts = |h: &mut H| {
            paid(h, "draft", 1, 0);
            paid(h, "publish", 4, 0);
        };
        let mut h = ended_ok("approval", &journal);
        facts(&mut h);
        let v = h.judge("completed_run_did_its_work");
        assert!(v.len() == 1 && v[0].witness.contains("has no resolution"), "{v:?}");
        // A resolution of another suspension does not count.
        journal.push(op_entry(6, "resolution", "await:other", "ok", Some(99)));
        let mut h = ended_ok("approval", &journal);
        facts(&mut h);
        assert_eq!(h.judge("completed_run_did_its_work").len(), 1);
        journal.push(op_entry(7, "resolution", "await:sign-off", "ok", Some(3)));
        let mut h = ended_ok("approval", &journal);
        facts(&mut h);
        assert!(h.judge("completed_run_did_its_work").is_empty());
    }

    #[test]
    fn segments_regression_is_caught_and_a_bump_is_not() {
        let mut h = H::engine_run();
        let a = h.acquire(0, "a", "r", 1);
        h.meta(0, Some(&a), "r", RunStatus::Running, 1);
        let b = h.acquire(1, "b", "r", 2);
        h.meta(1, Some(&b), "r", RunStatus::Running, 2);
        assert!(h.judge("segments_never_regress").is_empty());
        h.meta(0, None, "r", RunStatus::Error, 1);
        let v = h.judge("segments_never_regress");
        assert_eq!(v.len(), 1, "{v:?}");
        assert!(v[0].witness.contains("segments=1"), "{}", v[0].witness);
    }

    #[test]
    fn runs_no_engine_actor_started_are_not_judged() {
        let mut h = H::default();
        let a = h.acquire(0, "a", "r", 1);
        h.meta(0, Some(&a), "r", RunStatus::Running, 2);
        h.meta(0, None, "r", RunStatus::Error, 1);
        assert!(h.judge("segments_never_regress").is_empty(), "a store-level actor's run");
        h.fact(0, "host", FactKind::Submitted { run_id: "r".into(), workflow: "happy".into() });
        assert_eq!(h.judge("segments_never_regress").len(), 1);
    }

    #[test]
    fn a_boot_that_does_not_bump_segments_is_caught() {
        let mut h = H::engine_run();
        let a = h.acquire(0, "a", "r", 1);
        h.meta(0, Some(&a), "r", RunStatus::Running, 1);
        h.meta(0, Some(&a), "r", RunStatus::Ok, 1);
        let b = h.acquire(1, "b", "r", 2);
        h.meta(1, Some(&b), "r", RunStatus::Running, 2);
        h.meta(1, Some(&b), "r", RunStatus::Ok, 2);
        assert!(h.judge("every_boot_bumps_segments").is_empty());
        let c = h.acquire(2, "c", "r", 3);
        h.meta(2, Some(&c), "r", RunStatus::Running, 2);
        assert_eq!(h.judge("every_boot_bumps_segments").len(), 1);
        assert!(h.judge("segments_never_regress").is_empty(), "equal is no regression");
    }

    #[test]
    fn a_terminal_meta_over_live_work_is_caught() {
        let mut h = H::engine_run();
        let a = h.acquire(0, "a", "r", 1);
        h.meta(0, Some(&a), "r", RunStatus::Running, 1);
        h.append(0, &a, "r", running(1));
        h.append(0, &a, "r", terminal(2, 1, "ok"));
        h.append(0, &a, "r", settle(3, "ok"));
        h.meta(0, Some(&a), "r", RunStatus::Ok, 1);
        assert!(h.judge("journal_never_behind_meta").is_empty());
        assert!(h.judge("no_stranded_run").is_empty());
        assert!(h.judge("one_ok_settle_per_completed_run").is_empty());
        // A later segment starts work; a stale terminal meta lands over it.
        let b = h.acquire(1, "b", "r", 2);
        h.append(1, &b, "r", running(4));
        h.meta(0, None, "r", RunStatus::Error, 1);
        assert_eq!(h.judge("journal_never_behind_meta").len(), 1);
        assert_eq!(h.judge("no_stranded_run").len(), 1);
    }

    #[test]
    fn settles_are_one_per_status_change() {
        let mut h = H::engine_run();
        let a = h.acquire(0, "a", "r", 1);
        h.append(0, &a, "r", settle(1, "suspended"));
        h.append(0, &a, "r", settle(2, "suspended"));
        assert_eq!(h.judge("one_ok_settle_per_completed_run").len(), 1, "two equal settles back to back");
        let mut h = H::engine_run();
        let a = h.acquire(0, "a", "r", 1);
        h.append(0, &a, "r", settle(1, "ok"));
        h.append(0, &a, "r", running(2));
        h.append(0, &a, "r", settle(3, "ok"));
        h.meta(0, Some(&a), "r", RunStatus::Ok, 1);
        let v = h.judge("one_ok_settle_per_completed_run");
        assert!(v.iter().any(|v| v.witness.contains("2 ok run_settle")), "{v:?}");
        let mut h = H::engine_run();
        let a = h.acquire(0, "a", "r", 1);
        h.append(0, &a, "r", settle(1, "error"));
        h.meta(0, Some(&a), "r", RunStatus::Ok, 1);
        assert_eq!(
            h.judge("one_ok_settle_per_completed_run").len(),
            1,
            "meta ok over a journal settled error"
        );
    }

    #[test]
    fn checkpoint_regressions_and_regressed_boots_are_caught() {
        let mut h = H::engine_run();
        let a = h.acquire(0, "a", "r", 1);
        h.append(0, &a, "r", running(1));
        h.pay(0, "a", "r", 1, 0);
        h.ckpt(0, &a, "r", 1, 1);
        h.pay(0, "a", "r", 1, 1);
        // a crash; b restores turn 1 and repays turn 1 only: lawful.
        let b = h.acquire(1, "b", "r", 2);
        h.pay(1, "b", "r", 1, 1);
        h.ckpt(1, &b, "r", 1, 2);
        h.pay(1, "b", "r", 1, 2);
        h.ckpt(1, &b, "r", 1, 3);
        assert!(h.judge("checkpoint_never_regresses").is_empty());
        assert!(h.judge("completed_dispatch_never_repaid").is_empty());
        // a stale save of turn 2 lands over turn 3, and the next boot repays turn 2.
        h.ckpt(0, &a, "r", 1, 2);
        let _c = h.acquire(2, "c", "r", 3);
        h.pay(2, "c", "r", 1, 2);
        let v = h.judge("checkpoint_never_regresses");
        assert_eq!(v.len(), 2, "{v:?}");
        assert_eq!(h.judge("completed_dispatch_never_repaid").len(), 1);
    }

    #[test]
    fn paying_a_completed_dispatch_is_caught_but_a_zombie_payment_is_not_judged() {
        let mut h = H::engine_run();
        let a = h.acquire(0, "a", "r", 1);
        h.append(0, &a, "r", running(1));
        h.pay(0, "a", "r", 1, 0);
        let b = h.acquire(1, "b", "r", 2);
        // a, superseded, pays again before it notices: the lease's inherent window.
        h.pay(0, "a", "r", 1, 0);
        h.pay(1, "b", "r", 1, 0);
        h.append(1, &b, "r", terminal(2, 1, "ok"));
        assert!(h.judge("completed_dispatch_never_repaid").is_empty());
        h.pay(1, "b", "r", 1, 0);
        let v = h.judge("completed_dispatch_never_repaid");
        assert_eq!(v.len(), 1, "{v:?}");
        assert!(v[0].witness.contains("terminal was durable"), "{}", v[0].witness);
    }

    #[test]
    fn deleting_a_run_another_holder_owns_is_caught() {
        let mut h = H::engine_run();
        let r = h.acquire(0, "retention", "r", 1);
        h.delete(0, Some(&r), "r");
        assert!(h.judge("no_live_run_deleted").is_empty(), "the holder may delete its own run");
        // A host decision under no lease is out of scope.
        let mut h = H::engine_run();
        let _r = h.acquire(0, "retention", "r", 1);
        h.now_ms += TTL; // the brief lease lapses
        let _host = h.acquire(1, "host", "r", 2);
        h.delete(0, None, "r");
        assert!(h.judge("no_live_run_deleted").is_empty(), "an unleased host delete");
        // The same delete made by a retention cascade that did not pass its brief lease on.
        let mut h = H::engine_run();
        let _r = h.acquire(0, "retention", "r", 1);
        h.h.marks.push(crate::history::Mark {
            point: "worker.retention.after_acquire",
            node: 0,
            incarnation: 0,
            run_id: "r".into(),
            epoch: Some(1),
            applied_before: h.h.applied_count,
        });
        h.now_ms += TTL;
        let _host = h.acquire(1, "host", "r", 2);
        h.delete(0, None, "r");
        let v = h.judge("no_live_run_deleted");
        assert_eq!(v.len(), 1, "{v:?}");
    }

    #[test]
    fn a_wrong_settled_value_is_caught() {
        let mut h = H::engine_run();
        h.fact(0, "a", FactKind::Submitted { run_id: "r".into(), workflow: "happy".into() });
        let good = json!({"one": "alpha", "two": "beta"}).to_string();
        h.fact(
            0,
            "a",
            FactKind::Settled { run_id: "r".into(), status: "ok".into(), value: Some(good), segment: 1 },
        );
        assert!(h.judge("settled_value_matches_workflow").is_empty());
        let bad = json!({"one": "alpha"}).to_string();
        h.fact(
            0,
            "a",
            FactKind::Settled { run_id: "r".into(), status: "ok".into(), value: Some(bad), segment: 2 },
        );
        assert_eq!(h.judge("settled_value_matches_workflow").len(), 1);
    }

    #[test]
    fn an_unsettled_run_after_the_heal_is_caught() {
        let mut h = H::engine_run();
        let a = h.acquire(0, "a", "r", 1);
        h.meta(0, Some(&a), "r", RunStatus::Running, 1);
        assert!(h.judge("all_runs_settle_after_heal").is_empty(), "no heal phase: not judged");
        h.fact(0, "", FactKind::Healed);
        assert_eq!(h.judge("all_runs_settle_after_heal").len(), 1);
        h.meta(0, Some(&a), "r", RunStatus::Ok, 1);
        assert!(h.judge("all_runs_settle_after_heal").is_empty());
    }
}
