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
//!
//! One file per invariant family, each with its claim in its header: [`meta`], [`settles`],
//! [`payments`], [`progress`], [`answers`], [`deletion`], [`liveness`], [`workers`]. This file holds what they share:
//! which runs are judged, grants and deletions per run, and per-dispatch progress.

use std::collections::BTreeMap;

use super::contract::{checkpoint_seq, checkpoint_turns, EntryView, MetaView, Status};
use super::model::{walk_grants, Index, Judged};
use super::Property;
use crate::history::{Call, Fact, FactKind, OpKind};

pub mod answers;
pub mod deletion;
pub mod liveness;
pub mod meta;
pub mod payments;
pub mod progress;
pub mod settles;
pub mod workers;

/// Every engine-level property, in report order.
pub const ALL: &[Property] = &[
    meta::SEGMENTS_NEVER_REGRESS,
    meta::A_META_WRITE_CARRIES_ITS_WRITERS_NOW,
    meta::EVERY_BOOT_BUMPS_SEGMENTS,
    meta::JOURNAL_NEVER_BEHIND_META,
    meta::RECORDED_FIELDS_CARRIED,
    meta::A_RESUME_KEEPS_THE_RUNS_WORKFLOW,
    meta::A_SEGMENT_WRITES_ONE_RECORD,
    meta::A_RUN_CARRIES_ITS_LABELS,
    meta::A_RESUMED_SEGMENT_RECORDS_NO_LABELS,
    meta::A_RESUME_BOOTS_THE_NEXT_SEGMENT,
    meta::A_RESUME_OF_A_MISSING_RUN_BOOTS,
    settles::SETTLE_FOLLOWS_SEGMENT_WORK,
    settles::TERMINAL_META_MATCHES_THE_LAST_SETTLE,
    settles::NO_CLEAN_SETTLE_OVER_A_LOST_APPEND,
    settles::SETTLES_ONLY_ON_CHANGE,
    settles::SETTLE_FAILURES_REACH_THE_HANDLE,
    settles::AN_ERROR_SETTLE_FOLLOWS_A_FAILED_CALL,
    settles::SETTLE_REJECTIONS_FOLLOW_THE_TABLE,
    settles::A_BOOTED_SEGMENT_SETTLES_BEFORE_ITS_RELEASE,
    settles::NO_STRANDED_RUN,
    payments::CHECKPOINT_NEVER_REGRESSES,
    payments::COMPLETED_DISPATCH_NEVER_REPAID,
    payments::AGENTS_STAY_WITHIN_THEIR_LIMITS,
    payments::AN_AGENT_ENDS_AT_ITS_LIMIT_ONLY_WHEN_REACHED,
    payments::PROVIDER_SEES_ITS_CONVERSATION,
    payments::A_DISPATCH_PAYS_ITS_TURNS_IN_ORDER,
    settles::ONE_OK_SETTLE_PER_COMPLETED_RUN,
    deletion::NO_LIVE_RUN_DELETED,
    progress::NON_REPLAYABLE_TERMINAL_RERUNS,
    progress::OK_RESULTS_ARE_REPLAYED,
    deletion::DELETED_RUN_LEAVES_NO_BLOBS,
    deletion::RETENTION_DELETES_WHAT_ITS_RULE_SELECTS,
    settles::SETTLED_VALUE_MATCHES_WORKFLOW,
    deletion::DELETED_RUN_STAYS_DELETED,
    deletion::DELETION_RECORD_PRECEDES_BLOB_DELETES,
    deletion::A_GENERATION_HAS_A_NAME_OF_ITS_OWN,
    deletion::A_DELETION_RECORD_OUTLIVES_ITS_GENERATION,
    deletion::NO_BOOT_OF_A_RECORDED_GENERATION,
    deletion::A_DRIVE_FINISHES_A_MARKED_DELETION,
    progress::COMPLETED_RUN_DID_ITS_WORK,
    progress::EACH_SUSPENSION_ANSWERED_ONCE,
    progress::EACH_AWAIT_SUSPENDS_ONCE,
    payments::EACH_RECEIPT_FOLLOWS_ITS_PAID_CALL,
    payments::EACH_PAID_CALL_GETS_ITS_RECEIPT,
    payments::EACH_TOOL_TURN_IS_CHECKPOINTED,
    payments::A_TERMINAL_NAMES_THE_CHECKPOINT_IT_SAVED,
    payments::PAID_CALLS_STAY_WITHIN_THE_BUDGET,
    payments::A_RUN_EXHAUSTS_AT_ITS_BUDGET,
    payments::AN_EXHAUSTED_SETTLE_SAYS_WHERE_THE_BODY_STOPPED,
    progress::EACH_DISPATCH_ENDS_ONCE,
    progress::ONE_TERMINAL_ATTEMPT_PER_DISPATCH,
    progress::DISPATCHES_END_BEFORE_THE_SETTLE,
    progress::TERMINALS_SAY_HOW_DISPATCHES_ENDED,
    progress::A_HOLDER_APPENDS_ABOVE_ITS_JOURNAL,
    progress::A_LIVE_REFUSAL_HAS_A_LIVE_SEGMENT,
    progress::A_LIVE_SEGMENT_BLOCKS_A_SECOND_START,
    progress::A_DANGLING_DISPATCH_IS_PICKED_UP,
    answers::AN_ANSWER_TO_A_LIVE_RUN_LANDS,
    answers::AN_ANSWER_TO_AN_ENDED_RUN_IS_REFUSED,
    answers::A_DELIVERED_ANSWER_IS_JOURNALED,
    liveness::ALL_RUNS_SETTLE_AFTER_HEAL,
    liveness::A_HOLDER_LEFT_ALONE_KEEPS_ITS_LEASE,
    liveness::RENEWS_KEEP_THE_CADENCE,
    liveness::RENEWS_LAST_UNTIL_SETTLED,
    workers::A_STOPPED_WORKER_TAKES_NO_RUN,
    workers::A_STOPPED_DRIVE_STARTS_NO_TURN,
    workers::A_SWEEP_TRIES_EVERY_CANDIDATE,
    workers::A_PARKED_RUN_STAYS_PARKED,
    workers::A_TAKEN_LEASE_IS_GIVEN_BACK,
    workers::A_BRIEF_LEASE_IS_GIVEN_BACK_FIRST,
    workers::A_RETURNED_SEGMENT_GAVE_ITS_LEASE_BACK,
];

/// The runs an engine actor started (a `Submitted` fact): the engine properties judge only
/// these, never the store-level actors' runs (the soak's, the tombstone's).
pub(super) fn engine_runs<'h>(j: &Judged<'h>) -> std::collections::BTreeSet<&'h str> {
    j.history
        .facts
        .iter()
        .filter_map(|f| match &f.kind {
            FactKind::Submitted { run_id, .. } => Some(run_id.as_str()),
            _ => None,
        })
        .collect()
}

/// The return of the explicit resume that `facts[i]` (a `Resumed` fact) records: the same
/// identity's next settle or failure of that run; `None` when a crash ended the resume.
pub(in crate::oracle) fn resume_return(facts: &[Fact], i: usize) -> Option<&Fact> {
    let f = facts.get(i)?;
    let FactKind::Resumed { run_id, .. } = &f.kind else { return None };
    facts[i + 1..].iter().find(|g| {
        (g.node, g.incarnation, g.owner.as_str()) == (f.node, f.incarnation, f.owner.as_str())
            && matches!(&g.kind, FactKind::Settled { run_id: r, .. } | FactKind::Failed { run_id: r, .. } if r == run_id)
    })
}

/// One host's explicit resume, as the history shows it.
pub(super) struct Resume<'h> {
    /// The `Resumed` fact.
    pub fact: &'h Fact,
    pub run_id: &'h str,
    /// The workflow the resume was passed.
    pub workflow: &'h str,
    /// What it returned ([`resume_return`]); `None` when a crash ended it.
    pub end: Option<&'h Fact>,
    /// The calls its identity made on the run from the fact until its return (to the end of
    /// the history when it never returned), in invocation order.
    pub mine: Vec<&'h Call>,
}

/// Every explicit resume in the history, in fact order.
pub(super) fn resumes<'h>(j: &Judged<'h>) -> impl Iterator<Item = Resume<'h>> {
    let (facts, calls) = (&j.history.facts[..], &j.history.calls[..]);
    facts.iter().enumerate().filter_map(move |(i, fact)| {
        let FactKind::Resumed { run_id, workflow } = &fact.kind else { return None };
        let end = resume_return(facts, i);
        let mine = own_calls_on(calls, fact, run_id, end.map_or(calls.len(), |e| e.invoked_before));
        Some(Resume { fact, run_id, workflow, end, mine })
    })
}

/// The calls the identity of fact `f` (its process incarnation and owner) made on run
/// `run_id` from the fact on, up to call id `end` (exclusive), in invocation order.
pub(in crate::oracle) fn own_calls_on<'h>(
    calls: &'h [Call],
    f: &Fact,
    run_id: &str,
    end: usize,
) -> Vec<&'h Call> {
    let end = end.min(calls.len());
    calls[f.invoked_before.min(end)..end]
        .iter()
        .filter(|c| {
            (c.node, c.incarnation) == (f.node, f.incarnation)
                && c.args.actor.as_deref() == Some(f.owner.as_str())
                && c.run_id == run_id
        })
        .collect()
}

/// The calls the identity of fact `f` (its process incarnation and owner) made on run
/// `run_id` before the fact, in invocation order: the backward twin of [`own_calls_on`].
pub(super) fn own_calls_before<'h>(ix: &Index<'h>, f: &Fact, run_id: &str) -> Vec<&'h Call> {
    let process = ix.of_process(f.node, f.incarnation);
    process[..process.partition_point(|c| c.id < f.invoked_before)]
        .iter()
        .copied()
        .filter(|c| c.run_id == run_id && c.args.actor.as_deref() == Some(f.owner.as_str()))
        .collect()
}

/// The start of the segment that fact `facts[i]` (of run `run_id`) belongs to: the latest
/// submission or retry of the run, or sweep, by the fact's identity (process incarnation and
/// owner) among the facts before it invoked before call `upto`, skipping each start whose
/// return (a `Settled` or `Failed` of the run by the identity) came before `facts[i]` (a
/// second start refused at once, a double-clicked retry, returns before the first does).
pub(super) fn segment_start<'h>(facts: &'h [Fact], i: usize, run_id: &str, upto: usize) -> Option<&'h Fact> {
    let f = facts.get(i)?;
    let mut returned = 0usize;
    for g in facts[..i].iter().rev() {
        if (g.node, g.incarnation, g.owner.as_str()) != (f.node, f.incarnation, f.owner.as_str()) {
            continue;
        }
        match &g.kind {
            FactKind::Settled { run_id: r, .. } | FactKind::Failed { run_id: r, .. } if r == run_id => {
                returned += 1;
            }
            FactKind::Submitted { run_id: r, .. } | FactKind::Resumed { run_id: r, .. } if r == run_id => {
                if returned > 0 {
                    returned -= 1;
                } else if g.invoked_before <= upto {
                    return Some(g);
                }
            }
            FactKind::SweepBegan if g.invoked_before <= upto => return Some(g),
            _ => {}
        }
    }
    None
}

/// The position of a call in the apply order (`usize::MAX` when the store noted none).
pub(super) fn order(c: &Call) -> usize {
    c.applied.as_ref().map_or(usize::MAX, |a| a.order)
}

/// One grant, by apply order.
pub(super) struct GrantRec {
    order: usize,
    epoch: u64,
    node: u32,
    incarnation: u32,
    owner: String,
}

/// Grants and deletions per run, in apply order.
pub(super) struct Lifecycle {
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

    /// The apply position of the last grant of `run` at `epoch` applied before `before`.
    fn grant_order(&self, run: &str, epoch: u64, before: usize) -> Option<usize> {
        self.grants.get(run)?.iter().rfind(|g| g.epoch == epoch && g.order < before).map(|g| g.order)
    }

    /// Whether the fact's owner held the run's latest grant when the fact happened.
    fn current_owner(&self, run: &str, f: &Fact) -> Option<u64> {
        self.current_grant(run, f).map(|g| g.epoch)
    }

    /// The run's latest grant before fact `f`, when `f`'s process and owner hold it.
    fn current_grant(&self, run: &str, f: &Fact) -> Option<&GrantRec> {
        let grants = self.grants.get(run)?;
        let last = grants.iter().rfind(|g| g.order < f.applied_before)?;
        (last.owner == f.owner && last.node == f.node).then_some(last)
    }
}

pub(super) fn meta_of(c: &Call) -> Option<MetaView> {
    c.args.payload.as_deref().and_then(MetaView::parse)
}

/// The meta a mutation of `run` at apply position `at` landed on, in the serial history: the
/// last recorded meta write before it that the oracle can read; `None` when the run had none,
/// or a delete came after it.
pub(super) fn meta_before(j: &Judged, run: &str, at: usize) -> Option<MetaView> {
    j.index()
        .recorded_before(run, at)
        .iter()
        .rev()
        .find_map(|d| match d.op {
            OpKind::Delete => Some(None),
            OpKind::PutMeta => meta_of(d).map(Some),
            _ => None,
        })
        .flatten()
}

pub(super) fn entry_of(c: &Call) -> Option<EntryView> {
    c.args.payload.as_deref().and_then(EntryView::parse)
}

pub(super) fn final_entries(j: &Judged, run: &str) -> Vec<EntryView> {
    j.fin.entries.get(run).map(|v| v.iter().filter_map(|p| EntryView::parse(p)).collect()).unwrap_or_default()
}

pub(super) fn final_status(j: &Judged, run: &str) -> Option<Status> {
    j.fin.meta.get(run).and_then(|p| MetaView::parse(p)).map(|m| m.status)
}

/// The turn count of a checkpoint write's bytes (0 for undecodable bytes).
pub(super) fn turns_of(c: &Call) -> u32 {
    c.args.bytes.as_deref().and_then(checkpoint_turns).unwrap_or(0)
}

/// One dispatch of one generation of a run: (run, generation, running seq).
pub(super) type DispatchKey = (String, usize, u64);

/// One applied checkpoint save: (apply order, turns, made by the current holder).
pub(super) type Save = (usize, u32, bool);

/// Grants, deletions and per-dispatch progress: what the payment properties read, built once
/// per judged run (see [`Judged`]'s cache).
pub(super) struct Dispatches {
    life: Lifecycle,
    prog: Progress,
}

pub(super) fn dispatches<'a>(j: &'a Judged) -> (&'a Lifecycle, &'a Progress) {
    let d = j.dispatches.get_or_init(|| {
        let life = Lifecycle::build(j);
        let prog = progress(j, &life);
        Dispatches { life, prog }
    });
    (&d.life, &d.prog)
}

/// Per-dispatch durable progress: checkpoint saves and terminals, by apply order.
pub(super) struct Progress {
    saves: BTreeMap<DispatchKey, Vec<Save>>,
    /// (run, generation, dispatch) -> order of the first applied terminal (ref = dispatch).
    terminals: BTreeMap<DispatchKey, (usize, String)>,
}

pub(super) fn progress(j: &Judged, life: &Lifecycle) -> Progress {
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
