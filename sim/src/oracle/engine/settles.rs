//! The settle family: how a run's end is written. A segment's work is followed by its
//! `run_settle` and a settle is journaled only when the write-on-change rule asks for one;
//! a segment that booted settles before it lets its lease go, a settle write that failed
//! (but as the table allows) never resolves the handle, and a handle rejects with a settle
//! failure only as that table says; no run ends stranded (terminal meta
//! over live journal work), a completed run journals exactly one ok settle and never two
//! equal settles without work between them, and the settled value is the one its workflow
//! computes.
//!
//! Each property is judged from the apply-ordered history and the engine facts, under the
//! holder and generation rules of [`super`]; a settle append the store did not apply, from
//! its own process's calls and the entries its segment's load returned.

use std::collections::BTreeMap;

use serde_json::Value;

use super::super::contract::{audit, entry_views, settle_status, EntryView, Status, Verdict};
use super::super::model::{t, who, Judged};
use super::super::{Expectation, Property, Witness};
use super::*;
use crate::history::{Call, Fact, FactKind, OpKind, Outcome, Read};
use crate::ledger::{catalog_workflows, expected_value};

pub const SETTLE_FOLLOWS_SEGMENT_WORK: Property = Property {
        name: "settle_follows_segment_work",
        expectation: Expectation::Always,
        claim: "A segment that appended anything before its settle meta write appended a run_settle of that status as its last entry (the write-on-change rule: new work is always journaled as settled).",
        not_checked: "Meta writes that carry no lease; segments that appended nothing (their settle is skipped when the status is unchanged).",
        check: settle_follows_segment_work,
};

fn settle_follows_segment_work(j: &Judged, out: &mut Vec<Witness>) {
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
                    out.push(Witness {
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

/// Per run, its journal in the current generation as the settle properties read it: the seq
/// of its last entry (none: empty), and its latest run_settle (seq, status). Fed the applied
/// mutations in apply order; a delete starts an empty generation.
#[derive(Default)]
struct SettledJournals<'h>(BTreeMap<&'h str, SettledJournal>);

/// The seq of a journal's last entry (none: empty), and its latest run_settle (seq, status).
type SettledJournal = (Option<u64>, Option<(u64, Status)>);

impl<'h> SettledJournals<'h> {
    fn of(&self, run: &str) -> SettledJournal {
        self.0.get(run).copied().unwrap_or_default()
    }

    /// Take one applied mutation: a delete empties the run's journal, an append of an entry
    /// (`entry`, parsed by the caller) adds to it.
    fn apply(&mut self, c: &'h Call, entry: Option<&EntryView>) {
        match (c.op, entry) {
            (OpKind::Delete, _) => {
                self.0.remove(c.run_id.as_str());
            }
            (OpKind::Append, Some(e)) => {
                let run = self.0.entry(c.run_id.as_str()).or_default();
                run.0 = Some(e.seq);
                if let Some(status) = settle_status(e) {
                    run.1 = Some((e.seq, status));
                }
            }
            _ => {}
        }
    }
}

pub const TERMINAL_META_MATCHES_THE_LAST_SETTLE: Property = Property {
        name: "terminal_meta_matches_the_last_settle",
        expectation: Expectation::Always,
        claim: "A terminal meta write (ok, error, cancelled, exhausted) made under a lease lands on a journal whose latest run_settle (this generation) has that status, or on an empty journal: the write-on-change rule journals a settle whenever the status changed or none was recorded over a non-empty journal, even for a segment that only replayed.",
        not_checked: "Suspended and running meta writes; meta writes that carry no lease; runs no engine actor started.",
        check: terminal_meta_matches_the_last_settle,
};

fn terminal_meta_matches_the_last_settle(j: &Judged, out: &mut Vec<Witness>) {
    let runs = engine_runs(j);
    let mut journals = SettledJournals::default();
    for &c in j.applied.iter().filter(|c| runs.contains(c.run_id.as_str())) {
        match c.op {
            OpKind::Delete => journals.apply(c, None),
            OpKind::Append => {
                let Some(e) = entry_of(c) else { continue };
                journals.apply(c, Some(&e));
            }
            OpKind::PutMeta if c.lease.is_some() => {
                let Some(m) = meta_of(c) else { continue };
                if matches!(m.status, Status::Running | Status::Suspended) {
                    continue;
                }
                let (last, settle) = journals.of(&c.run_id);
                if last.is_none() || settle.is_some_and(|(_, s)| s == m.status) {
                    continue;
                }
                out.push(Witness {
                    witness: format!(
                        "run {}: {} wrote meta {} at t={} over a journal whose latest run_settle is {}",
                        c.run_id,
                        who(c),
                        m.status,
                        t(Judged::applied_ns(c)),
                        settle.map_or("missing".to_string(), |(seq, s)| format!("{s} (seq {seq})")),
                    ),
                    op: Some(c.op.as_str()),
                    call: Some(c.id),
                });
            }
            _ => {}
        }
    }
}

pub const SETTLES_ONLY_ON_CHANGE: Property = Property {
    name: "settles_only_on_change",
    expectation: Expectation::Always,
    claim: "A grant journals a run_settle only when the write-on-change rule asks for one: the grant appended work of its own before it (this generation), or the journal's latest run_settle has another status, or the journal holds entries and its last entry is not a run_settle (no settle at all, or work journaled after the last one: the model's `current` arm (c), docs/engine-model.md P). So a pure replay with an unchanged status over a journal that ends in its settle appends nothing, and an empty journal never gets a settle (docs/engine-model.md 3.3). A settle append the store did not apply (refused, busy) is judged by the same rule over the segment's own view: the journal its last load under the grant returned (none: a fresh run, empty) plus the appends of the grant that were applied, since that is all the segment knew when it chose to settle.",
    not_checked: "Settles appended without a lease (no grant to attribute the work to); unapplied settles whose grant's last load did not return readable entries (a history read back from a file keeps no reads).",
    check: settles_only_on_change,
};

fn settles_only_on_change(j: &Judged, out: &mut Vec<Witness>) {
    let runs = engine_runs(j);
    // The journals, and the grants (run, epoch, owner) that appended in this generation.
    let mut journals = SettledJournals::default();
    let mut worked: std::collections::BTreeSet<(&str, u64, &str)> = std::collections::BTreeSet::new();
    for &c in j.applied.iter().filter(|c| runs.contains(c.run_id.as_str())) {
        let run = c.run_id.as_str();
        match c.op {
            OpKind::Delete => {
                journals.apply(c, None);
                worked.retain(|k| k.0 != run);
            }
            OpKind::Append => {
                let Some(e) = entry_of(c) else { continue };
                let grant = c.lease.as_ref().map(|l| (run, l.epoch.0, l.owner.as_str()));
                if let Some(status) = settle_status(&e) {
                    let (last, latest) = journals.of(run);
                    let any = last.is_some();
                    // Repeated: the journal's last entry is its latest settle, of this very status.
                    let repeated = latest.is_some_and(|(seq, s)| s == status && Some(seq) == last);
                    if grant.is_some_and(|g| !worked.contains(&g)) && (!any || repeated) {
                        out.push(Witness {
                            witness: format!(
                                "run {run}: {} journaled a run_settle of {status} (seq {}) at t={} with no work of its own before it, over {}",
                                who(c),
                                e.seq,
                                t(Judged::applied_ns(c)),
                                if any {
                                    format!("a journal that already ends in a run_settle of {status}")
                                } else {
                                    "an empty journal".to_string()
                                },
                            ),
                            op: Some(c.op.as_str()),
                            call: Some(c.id),
                        });
                    }
                }
                journals.apply(c, Some(&e));
                if let Some(g) = grant {
                    worked.insert(g);
                }
            }
            _ => {}
        }
    }
    for c in j.history.calls.iter().filter(|c| c.op == OpKind::Append && c.applied.is_none()) {
        if !runs.contains(c.run_id.as_str()) {
            continue;
        }
        let (Some(lease), Some(e)) = (&c.lease, entry_of(c)) else { continue };
        let Some(status) = settle_status(&e) else { continue };
        let Some(view) = segment_view(j, c, lease) else { continue };
        // Repeated: the journal it booted from ends in a settle of this very status.
        let repeated = view.entries.last().and_then(settle_status) == Some(status);
        if view.worked || !(view.entries.is_empty() || repeated) {
            continue;
        }
        out.push(Witness {
            witness: format!(
                "run {}: {} tried to journal a run_settle of {status} (seq {}, {}) at t={} with no work of its own applied, over {}",
                c.run_id,
                who(c),
                e.seq,
                c.outcome.refusal().unwrap_or("not applied"),
                t(c.invoked_ns),
                if view.entries.is_empty() {
                    "the empty journal it booted from".to_string()
                } else {
                    format!("the journal it booted from, which already ends in a run_settle of {status}")
                },
            ),
            op: Some(c.op.as_str()),
            call: Some(c.id),
        });
    }
}

/// What a segment knew of its run's journal when it made call `c` under `lease`: the
/// entries its last load after the grant returned (a fresh segment loads nothing: empty),
/// then the appends it made under the grant that the store applied.
struct SegmentView {
    entries: Vec<EntryView>,
    /// Whether any of those appends is the grant's own (it did work this generation).
    worked: bool,
}

/// The view of the segment that made `c`, from its process's calls between the acquire that
/// granted `lease` and `c`; `None` when no such acquire is on record, or the last load in
/// that window did not return readable entries.
fn segment_view(j: &Judged, c: &Call, lease: &store::Lease) -> Option<SegmentView> {
    let process = j.index().of_process(c.node, c.incarnation);
    let before = &process[..process.partition_point(|p| p.id < c.id)];
    let grant = before.iter().rposition(|p| {
        p.op == OpKind::Acquire
            && p.run_id == c.run_id
            && p.granted.as_ref().is_some_and(|g| g.epoch == lease.epoch && g.owner == lease.owner)
    })?;
    let tenure = &before[grant + 1..];
    let mine = |p: &Call| p.run_id == c.run_id && p.args.actor.as_deref() == Some(lease.owner.as_str());
    let load = tenure.iter().rposition(|p| mine(p) && p.op == OpKind::Load);
    let (mut entries, after) = match load {
        Some(i) => match &tenure[i].read {
            Some(Read::Entries(es)) => (entry_views(es)?, i + 1),
            _ => return None,
        },
        None => (Vec::new(), 0),
    };
    let mut worked = false;
    for p in &tenure[after..] {
        let own = p.lease.as_ref().is_some_and(|l| l.epoch == lease.epoch && l.owner == lease.owner);
        if p.op == OpKind::Append && own && p.applied.is_some() {
            if let Some(e) = entry_of(p) {
                entries.push(e);
                worked = true;
            }
        }
    }
    Some(SegmentView { entries, worked })
}

pub const SETTLE_FAILURES_REACH_THE_HANDLE: Property = Property {
    name: "settle_failures_reach_the_handle",
    expectation: Expectation::Always,
    claim: "A segment whose handle resolved with its outcome had no settle write fail but as the table allows: its run_settle append (if it made one) was applied, and its terminal meta write was applied or refused as lease_held. Any other refusal of either must reach the caller as an error (docs/engine-model.md 3.4: SupersededError or SettlementError), never a resolved outcome over a meta row left behind the journal.",
    not_checked: "Segments whose process died (no outcome); runs no engine actor started; calls before the identity's latest acquire of the run.",
    check: settle_failures_reach_the_handle,
};

fn settle_failures_reach_the_handle(j: &Judged, out: &mut Vec<Witness>) {
    let runs = engine_runs(j);
    for f in &j.history.facts {
        let FactKind::Settled { run_id, status, segment, .. } = &f.kind else { continue };
        if !runs.contains(run_id.as_str()) {
            continue;
        }
        let Some(settled) = Status::from_word(status) else { continue };
        let (last_settle, last_meta) = settle_writes(&tenure_before(j, f, run_id), |s| s == settled);
        // A refused settle append rejects the handle whatever the code; a refused meta write
        // resolves it only when a successor holds the run.
        let failed = match (last_settle, last_meta) {
            (Some(c), _) if c.outcome.refusal().is_some() => Some((c, "run_settle append")),
            (_, Some(c)) if c.outcome.refusal().is_some_and(|code| code != "lease_held") => {
                Some((c, "meta write"))
            }
            _ => None,
        };
        if let Some((c, what)) = failed {
            out.push(Witness {
                witness: format!(
                    "run {run_id}: {}'s segment {segment} resolved {status} at t={} although its {what} at t={} was refused ({})",
                    f.owner,
                    t(f.at_ns),
                    t(c.returned_ns.unwrap_or(c.invoked_ns)),
                    c.outcome.refusal().unwrap_or("error"),
                ),
                op: Some(c.op.as_str()),
                call: Some(c.id),
            });
        }
    }
}

/// The calls of `run` by the identity of fact `f` (its own lease, or its acquires) made before
/// the fact, from that identity's latest granted acquire of the run on: the segment whose
/// outcome the fact reports.
fn tenure_before<'h>(j: &Judged<'h>, f: &Fact, run: &str) -> Vec<&'h Call> {
    let process = j.index().of_process(f.node, f.incarnation);
    let before = &process[..process.partition_point(|c| c.id < f.invoked_before)];
    let mine: Vec<&Call> = before
        .iter()
        .copied()
        .filter(|c| {
            c.run_id == run
                && (c.lease.as_ref().is_some_and(|l| l.owner == f.owner)
                    || (c.op == OpKind::Acquire && c.args.owner.as_deref() == Some(f.owner.as_str())))
        })
        .collect();
    let from = mine.iter().rposition(|c| c.op == OpKind::Acquire && c.outcome.is_ok()).unwrap_or(0);
    mine[from..].to_vec()
}

/// A tenure's last run_settle append, and its last meta write whose status `meta_is` accepts.
fn settle_writes<'h>(
    tenure: &[&'h Call],
    meta_is: impl Fn(Status) -> bool,
) -> (Option<&'h Call>, Option<&'h Call>) {
    let settle = tenure
        .iter()
        .rfind(|c| c.op == OpKind::Append && entry_of(c).as_ref().and_then(settle_status).is_some());
    let meta =
        tenure.iter().rfind(|c| c.op == OpKind::PutMeta && meta_of(c).is_some_and(|m| meta_is(m.status)));
    (settle.copied(), meta.copied())
}

pub const AN_ERROR_SETTLE_FOLLOWS_A_FAILED_CALL: Property = Property {
    name: "an_error_settle_follows_a_failed_call",
    expectation: Expectation::Always,
    claim: "A segment that settles error had one of its own store calls on the run fail since its identity's latest acquire of it (an append the integrity latch turned into error, a dispatch's write or read refused): in this world the provider and the tools never fail, so a store failure is the only thing docs/engine-model.md 3.1 leaves to give error. A refused paid call (the budget) is exhausted, a cancel cancelled, a parked body suspended.",
    not_checked: "Segments whose process died (no outcome); runs no engine actor started; which failure it was.",
    check: an_error_settle_follows_a_failed_call,
};

fn an_error_settle_follows_a_failed_call(j: &Judged, out: &mut Vec<Witness>) {
    let runs = engine_runs(j);
    for f in &j.history.facts {
        let FactKind::Settled { run_id, status, segment, .. } = &f.kind else { continue };
        if status != "error" || !runs.contains(run_id.as_str()) {
            continue;
        }
        let mine = own_calls_before(j.index(), f, run_id);
        let from = mine.iter().rposition(|c| c.op == OpKind::Acquire && c.outcome.is_ok()).unwrap_or(0);
        if mine[from..].iter().any(|c| c.outcome.refusal().is_some()) {
            continue;
        }
        out.push(Witness {
            witness: format!(
                "run {run_id}: {}'s segment {segment} settled error at t={} though none of its {} store calls on the run since its acquire failed",
                f.owner,
                t(f.at_ns),
                mine.len() - from
            ),
            op: None,
            call: None,
        });
    }
}

pub const SETTLE_REJECTIONS_FOLLOW_THE_TABLE: Property = Property {
    name: "settle_rejections_follow_the_table",
    expectation: Expectation::Always,
    claim: "A segment's handle rejects with a settle failure only as docs/engine-model.md 3.4 says: SupersededError when its run_settle append was refused lease_held, SettlementError when that append was refused otherwise or its terminal meta write was refused with anything but lease_held (which is swallowed).",
    not_checked: "Segments whose process died (no outcome); runs no engine actor started; rejections other than the two settle failures.",
    check: settle_rejections_follow_the_table,
};

/// The words of the engine's two settle failures (`SupersededError`, `SettlementError`).
const SUPERSEDED_AT_SETTLE: &str = "superseded while settling";
const SETTLEMENT_FAILED: &str = "settlement of run";

fn settle_rejections_follow_the_table(j: &Judged, out: &mut Vec<Witness>) {
    let runs = engine_runs(j);
    for f in &j.history.facts {
        let FactKind::Failed { run_id, error, .. } = &f.kind else { continue };
        let superseded = error.contains(SUPERSEDED_AT_SETTLE);
        if !runs.contains(run_id.as_str()) || !(superseded || error.contains(SETTLEMENT_FAILED)) {
            continue;
        }
        let (settle, meta) = settle_writes(&tenure_before(j, f, run_id), |s| s != Status::Running);
        let settle_code = settle.and_then(|c| c.outcome.refusal());
        let meta_code = meta.and_then(|c| c.outcome.refusal());
        let (why, at) = if superseded {
            match settle_code {
                Some("lease_held") => continue,
                Some(code) => (
                    format!("its run_settle append was refused {code}, not lease_held: a settlement failure"),
                    settle,
                ),
                None => ("no run_settle append of it was refused lease_held".to_string(), settle.or(meta)),
            }
        } else {
            match (settle_code, meta_code) {
                (Some("lease_held"), _) => {
                    ("its run_settle append was refused lease_held: superseded".to_string(), settle)
                }
                (Some(_), _) => continue,
                (None, Some(code)) if code != "lease_held" => continue,
                (None, Some(_)) => (
                    "its only refused settle write was the terminal meta write, refused lease_held, which the engine swallows".to_string(),
                    meta,
                ),
                (None, None) => ("no settle write of it was refused".to_string(), settle.or(meta)),
            }
        };
        out.push(Witness {
            witness: format!(
                "run {run_id}: {}'s segment rejected at t={} ({error}) but {why}",
                f.owner,
                t(f.at_ns)
            ),
            op: at.map(|c| c.op.as_str()),
            call: at.map(|c| c.id),
        });
    }
}

pub const A_BOOTED_SEGMENT_SETTLES_BEFORE_ITS_RELEASE: Property = Property {
    name: "a_booted_segment_settles_before_its_release",
    expectation: Expectation::Always,
    claim: "A segment that booted (its grant passed the engine's boot point and its running meta write applied) and whose process lives to release that grant first tries to settle: a meta write of another status, or a run_settle append, under the grant. Every way a live segment ends (done, parked, cancelled by a refused renew or a stop, superseded, a failed settle) goes through the settle (docs/engine-model.md 1.4, 3.4); only a crash skips it.",
    not_checked: "Grants whose process died before a release (no release call); releases by another process or incarnation than the boot's; grants that never booted a segment (skips, retention, repairs).",
    check: a_booted_segment_settles_before_its_release,
};

fn a_booted_segment_settles_before_its_release(j: &Judged, out: &mut Vec<Witness>) {
    let runs = engine_runs(j);
    // Per grant (run, epoch, owner, node, incarnation): the boot's running meta write, and
    // whether a settle write followed it.
    type Grant<'h> = (&'h str, u64, &'h str, u32, u32);
    let mut booted: BTreeMap<Grant, (&Call, bool)> = BTreeMap::new();
    for c in j.history.calls.iter().filter(|c| runs.contains(c.run_id.as_str())) {
        let Some(l) = &c.lease else { continue };
        let g = (c.run_id.as_str(), l.epoch.0, l.owner.as_str(), c.node, c.incarnation);
        match c.op {
            OpKind::PutMeta => match meta_of(c) {
                Some(m) if m.status == Status::Running => {
                    // A segment's boot passes its engine point first; an operator's repair
                    // to `running` does not.
                    let boot = j.index().marked(
                        "engine.boot.before_meta",
                        c.node,
                        c.incarnation,
                        &c.run_id,
                        Some(l.epoch.0),
                    );
                    if c.applied.is_some() && boot {
                        booted.entry(g).or_insert((c, false));
                    }
                }
                Some(_) => {
                    if let Some(b) = booted.get_mut(&g) {
                        b.1 = true;
                    }
                }
                None => {}
            },
            OpKind::Append if entry_of(c).as_ref().and_then(settle_status).is_some() => {
                if let Some(b) = booted.get_mut(&g) {
                    b.1 = true;
                }
            }
            OpKind::Release => {
                let Some((boot, settled)) = booted.remove(&g) else { continue };
                if !settled {
                    out.push(Witness {
                        witness: format!(
                            "run {}: {} booted a segment at t={} (epoch {}) and released its lease at t={} without a settle write",
                            c.run_id,
                            who(c),
                            t(Judged::applied_ns(boot)),
                            l.epoch.0,
                            t(c.invoked_ns),
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

pub const NO_CLEAN_SETTLE_OVER_A_LOST_APPEND: Property = Property {
    name: "no_clean_settle_over_a_lost_append",
    expectation: Expectation::Always,
    claim: "A segment one of whose journal appends returned an error never journals a run_settle of ok or suspended afterwards under that grant: the journal no longer holds what the segment executed (rulvar's integrity latch, RV3201: the flush turns a would-be ok or suspended into error).",
    not_checked: "Appends whose process died with the call in flight (their outcome is unknown to the segment); settles of error, cancelled or exhausted, which the latch leaves alone.",
    check: no_clean_settle_over_a_lost_append,
};

/// Every run_settle a grant journaled after one of its own appends had returned an error, in
/// apply order: (the settle's append, its status, the grant's first failed append). A grant is
/// (run, epoch, owner); its calls are sequential, so call ids order them.
pub(in crate::oracle) fn settles_after_a_lost_append<'h>(
    j: &Judged<'h>,
) -> Vec<(&'h Call, Status, &'h Call)> {
    let mut lost: BTreeMap<(&str, u64, &str), &Call> = BTreeMap::new();
    for c in j.history.calls.iter().filter(|c| c.op == OpKind::Append) {
        if let (Some(l), Outcome::Err { .. }) = (&c.lease, &c.outcome) {
            lost.entry((c.run_id.as_str(), l.epoch.0, l.owner.as_str())).or_insert(c);
        }
    }
    if lost.is_empty() {
        return Vec::new();
    }
    let mut out = Vec::new();
    for &c in j.applied.iter().filter(|c| c.op == OpKind::Append) {
        let Some(l) = &c.lease else { continue };
        let Some(&first) = lost.get(&(c.run_id.as_str(), l.epoch.0, l.owner.as_str())) else { continue };
        if first.id >= c.id {
            continue;
        }
        if let Some(status) = entry_of(c).as_ref().and_then(settle_status) {
            out.push((c, status, first));
        }
    }
    out
}

fn no_clean_settle_over_a_lost_append(j: &Judged, out: &mut Vec<Witness>) {
    let runs = engine_runs(j);
    for (c, status, first) in settles_after_a_lost_append(j) {
        if !runs.contains(c.run_id.as_str()) || !matches!(status, Status::Ok | Status::Suspended) {
            continue;
        }
        out.push(Witness {
            witness: format!(
                "run {}: {} journaled a run_settle of {status} at t={} after its own append of seq {} failed at t={} ({})",
                c.run_id,
                who(c),
                t(Judged::applied_ns(c)),
                first.args.seq.map_or("?".to_string(), |s| s.to_string()),
                t(first.returned_ns.unwrap_or(first.invoked_ns)),
                first.outcome.refusal().unwrap_or("error"),
            ),
            op: Some(c.op.as_str()),
            call: Some(c.id),
        });
    }
}

pub const NO_STRANDED_RUN: Property = Property {
    name: "no_stranded_run",
    expectation: Expectation::Always,
    claim: "No run ends with a terminal meta row over live journal work (the reconciler's stranded verdict).",
    not_checked: "Runs with no meta row.",
    check: no_stranded_run,
};

fn no_stranded_run(j: &Judged, out: &mut Vec<Witness>) {
    let runs = engine_runs(j);
    for run in j.fin.meta.keys().filter(|r| runs.contains(r.as_str())) {
        let audit = audit(final_status(j, run), &final_entries(j, run));
        if audit.verdict == Verdict::Stranded {
            out.push(Witness {
                witness: format!("run {run} ends stranded: {}", audit.reason),
                op: None,
                call: None,
            });
        }
    }
}

pub const ONE_OK_SETTLE_PER_COMPLETED_RUN: Property = Property {
        name: "one_ok_settle_per_completed_run",
        expectation: Expectation::Always,
        claim: "Each run's journal holds at most one ok run_settle, a run whose meta is ok and that journals settles ends with exactly that one, and two settles of the same status have journal work between them.",
        not_checked: "Journals without any run_settle (engines before the journaled settle).",
        check: one_ok_settle_per_completed_run,
};

fn one_ok_settle_per_completed_run(j: &Judged, out: &mut Vec<Witness>) {
    let runs = engine_runs(j);
    for run in j.fin.entries.keys().filter(|r| runs.contains(r.as_str())) {
        let entries = final_entries(j, run);
        let settles: Vec<(usize, Status)> =
            entries.iter().enumerate().filter_map(|(i, e)| settle_status(e).map(|s| (i, s))).collect();
        if settles.is_empty() {
            continue;
        }
        let oks = settles.iter().filter(|(_, s)| *s == Status::Ok).count();
        if oks > 1 {
            out.push(Witness {
                witness: format!("run {run}: the journal holds {oks} ok run_settle entries"),
                op: None,
                call: None,
            });
        }
        if final_status(j, run) == Some(Status::Ok) && settles.last().map(|s| s.1) != Some(Status::Ok) {
            out.push(Witness {
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
                out.push(Witness {
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

pub const SETTLED_VALUE_MATCHES_WORKFLOW: Property = Property {
    name: "settled_value_matches_workflow",
    expectation: Expectation::Always,
    claim: "Every segment that settles ok returns exactly the workflow's value in this world, and so does one that settles exhausted with a value (a budget spent by the body's last paid call: docs/engine-model.md 3.1, the value survives). A segment that settles error, cancelled or suspended returns no value: a failing body has none, an aborted run's value is dropped (3.1), and the flush barrier turns a lost append's ok into an error result (3.2 step 3).",
    not_checked: "Values of runs whose workflow the world does not know; whether an exhausted segment should have carried a value (its body completed) or not (a paid call was refused).",
    check: settled_value_matches_workflow,
};

fn settled_value_matches_workflow(j: &Judged, out: &mut Vec<Witness>) {
    let workflows = catalog_workflows();
    let mut submitted: BTreeMap<&str, &str> = BTreeMap::new();
    for f in &j.history.facts {
        match &f.kind {
            FactKind::Submitted { run_id, workflow } => {
                submitted.insert(run_id, workflow);
            }
            FactKind::Settled { run_id, status, value, segment }
                if status == "ok" || (status == "exhausted" && value.is_some()) =>
            {
                let Some(wf) = submitted.get(run_id.as_str()).and_then(|w| workflows.get(*w)) else {
                    continue;
                };
                let want = expected_value(wf);
                let have: Option<Value> = value.as_deref().and_then(|v| serde_json::from_str(v).ok());
                if have.as_ref() != Some(&want) {
                    out.push(Witness {
                        witness: format!(
                            "run {run_id}: n{}'s segment {segment} settled {status} at t={} with {} instead of {want}",
                            f.node,
                            t(f.at_ns),
                            value.as_deref().unwrap_or("no value")
                        ),
                        op: None,
                        call: None,
                    });
                }
            }
            FactKind::Settled { run_id, status, value: Some(value), segment }
                if matches!(status.as_str(), "error" | "cancelled" | "suspended") =>
            {
                out.push(Witness {
                    witness: format!(
                        "run {run_id}: n{}'s segment {segment} settled {status} at t={} with the value {value} (a run that settles {status} returns none)",
                        f.node,
                        t(f.at_ns),
                    ),
                    op: None,
                    call: None,
                });
            }
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;
    use store::RunStatus;

    use crate::history::FactKind;
    use crate::oracle::testkit::engine::*;

    #[test]
    fn an_error_settle_with_no_failed_call_is_caught() {
        let p = "an_error_settle_follows_a_failed_call";
        let settled = |h: &mut HistoryBuilder, status: &str| {
            let kind =
                FactKind::Settled { run_id: "r".into(), status: status.into(), value: None, segment: 1 };
            h.fact(0, "w", kind);
        };
        let mark_actor = |h: &mut HistoryBuilder| {
            for c in &mut h.h.calls {
                c.args.actor = Some("w".into());
            }
        };
        let mut h = HistoryBuilder::engine_run();
        let a = h.acquire(0, "w", "r", 1);
        h.meta(0, Some(&a), "r", RunStatus::Running, 1);
        h.append(0, &a, "r", op_entry(0, "step", "op:0:one", "running", None));
        mark_actor(&mut h);
        settled(&mut h, "error");
        let v = h.judge(p);
        assert!(v.len() == 1 && v[0].witness.contains("none of its 3 store calls"), "{v:?}");
        // The same with a lost append: judged legal.
        h.h.facts.pop();
        h.append_lost(0, &a, "r", op_entry(1, "step", "op:0:one", "ok", Some(0)), "busy");
        mark_actor(&mut h);
        settled(&mut h, "error");
        assert!(h.judge(p).is_empty(), "{:?}", h.judge(p));
        // A failure before the identity's latest acquire does not count.
        let b = h.acquire(0, "w", "r", 2);
        h.meta(0, Some(&b), "r", RunStatus::Running, 2);
        mark_actor(&mut h);
        settled(&mut h, "error");
        assert_eq!(h.judge(p).len(), 1);
        // Nor is any other status judged.
        settled(&mut h, "cancelled");
        assert_eq!(h.judge(p).len(), 1);
    }

    #[test]
    fn a_terminal_meta_over_a_journal_without_its_settle_is_caught() {
        let mut h = HistoryBuilder::engine_run();
        let a = h.acquire(0, "w", "r", 1);
        // Over an empty journal, no settle is owed.
        h.meta(0, Some(&a), "r", RunStatus::Ok, 1);
        h.append(0, &a, "r", op_entry(1, "step", "op:0:one", "running", None));
        h.append(0, &a, "r", op_entry(2, "step", "op:0:one", "ok", Some(1)));
        h.append(0, &a, "r", settle(3, "ok"));
        h.meta(0, Some(&a), "r", RunStatus::Ok, 1);
        assert!(h.judge("terminal_meta_matches_the_last_settle").is_empty());
        // A later segment settles error without journaling it.
        let b = h.acquire(1, "v", "r", 2);
        h.meta(1, Some(&b), "r", RunStatus::Error, 2);
        let v = h.judge("terminal_meta_matches_the_last_settle");
        assert_eq!(v.len(), 1, "{v:?}");
        assert!(v[0].witness.contains("latest run_settle is ok (seq 3)"), "{}", v[0].witness);
        // A journal with work and no settle at all.
        h.delete(1, Some(&b), "r");
        h.append(1, &b, "r", op_entry(1, "step", "op:0:one", "running", None));
        h.meta(1, Some(&b), "r", RunStatus::Cancelled, 1);
        let v = h.judge("terminal_meta_matches_the_last_settle");
        assert!(v.len() == 2 && v[1].witness.contains("missing"), "{v:?}");
    }

    #[test]
    fn a_terminal_meta_over_live_work_is_caught() {
        let mut h = HistoryBuilder::engine_run();
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

    fn settled(h: &mut HistoryBuilder, owner: &str, status: &str) {
        h.fact(
            0,
            owner,
            FactKind::Settled { run_id: "r".into(), status: status.into(), value: None, segment: 1 },
        );
    }

    #[test]
    fn a_settle_is_journaled_only_when_the_rule_asks() {
        // A grant that did work settles; a pure replay of the same status does not.
        let mut h = HistoryBuilder::engine_run();
        let a = h.acquire(0, "a", "r", 1);
        h.append(0, &a, "r", running(1));
        h.append(0, &a, "r", terminal(2, 1, "ok"));
        h.append(0, &a, "r", settle(3, "ok"));
        let b = h.acquire(0, "b", "r", 2);
        assert!(h.judge("settles_only_on_change").is_empty());
        h.append(0, &b, "r", settle(4, "ok"));
        let v = h.judge("settles_only_on_change");
        assert_eq!(v.len(), 1, "{v:?}");
        assert!(v[0].witness.contains("already ends in a run_settle of ok"), "{v:?}");
        // A replay that changes the status, and the third arm (entries, no settle), settle.
        let mut h = HistoryBuilder::engine_run();
        let a = h.acquire(0, "a", "r", 1);
        h.append(0, &a, "r", running(1));
        let b = h.acquire(0, "b", "r", 2);
        h.append(0, &b, "r", settle(2, "cancelled"));
        let c = h.acquire(0, "c", "r", 3);
        h.append(0, &c, "r", settle(3, "error"));
        assert!(h.judge("settles_only_on_change").is_empty());
        // An empty journal never gets one; a recreated run starts a new generation.
        let mut h = HistoryBuilder::engine_run();
        let a = h.acquire(0, "a", "r", 1);
        h.append(0, &a, "r", running(1));
        h.append(0, &a, "r", settle(2, "cancelled"));
        h.delete(0, Some(&a), "r");
        let b = h.acquire(0, "b", "r", 1);
        h.append(0, &b, "r", settle(1, "cancelled"));
        let v = h.judge("settles_only_on_change");
        assert_eq!(v.len(), 1, "{v:?}");
        assert!(v[0].witness.contains("empty journal"), "{v:?}");
    }

    #[test]
    fn work_after_the_last_settle_is_owed_a_settle_even_of_the_same_status() {
        // a settles error; b journals work and dies before its settle; c, which did no work
        // of its own, settles error again: the journal did not end in its settle, so the
        // settle is owed (the wider arm (c)), though its status repeats the old settle's.
        let mut h = HistoryBuilder::engine_run();
        let a = h.acquire(0, "a", "r", 1);
        h.append(0, &a, "r", running(1));
        h.append(0, &a, "r", settle(2, "error"));
        let b = h.acquire(0, "b", "r", 2);
        h.append(0, &b, "r", running(3));
        h.append(0, &b, "r", terminal(4, 3, "ok"));
        let c = h.acquire(0, "c", "r", 3);
        h.append(0, &c, "r", settle(5, "error"));
        assert!(h.judge("settles_only_on_change").is_empty());
        // Once the journal ends in c's settle, a fourth grant's repeat is flagged again.
        let d = h.acquire(0, "d", "r", 4);
        h.append(0, &d, "r", settle(6, "error"));
        let v = h.judge("settles_only_on_change");
        assert_eq!(v.len(), 1, "{v:?}");
        assert!(v[0].witness.contains("already ends in a run_settle of error"), "{v:?}");

        // The same judgement for an unapplied settle, over the journal its segment loaded.
        let booted = [running(1), settle(2, "error"), running(3), terminal(4, 3, "ok")];
        let mut h = journaled_by_a(&booted);
        let c = h.acquire(0, "c", "r", 2);
        load(&mut h, "c", &booted);
        h.append_lost(0, &c, "r", settle(5, "error"), "busy");
        assert!(h.judge("settles_only_on_change").is_empty(), "the unsettled tail is owed a settle");
        let d = h.acquire(0, "d", "r", 3);
        load(&mut h, "d", &booted[..2]);
        h.append_lost(0, &d, "r", settle(3, "error"), "busy");
        let v = h.judge("settles_only_on_change");
        assert_eq!(v.len(), 1, "{v:?}");
        assert!(v[0].witness.contains("which already ends in a run_settle of error"), "{v:?}");
    }

    /// A history in which grant `a` (epoch 1) journaled `entries` to run `r`.
    fn journaled_by_a(entries: &[serde_json::Value]) -> HistoryBuilder {
        let mut h = HistoryBuilder::engine_run();
        let a = h.acquire(0, "a", "r", 1);
        for e in entries {
            h.append(0, &a, "r", e.clone());
        }
        h
    }

    /// A load of run `r` by `actor` on node 0 that returned `entries` (a read: nothing applied).
    fn load(h: &mut HistoryBuilder, actor: &str, entries: &[serde_json::Value]) {
        let args = crate::history::Args { actor: Some(actor.into()), ..Default::default() };
        h.push(0, crate::history::OpKind::Load, "r", None, args, None);
        h.h.applied_count -= 1;
        let c = h.h.calls.last_mut().expect("pushed");
        c.applied = None;
        let es = entries.iter().map(|e| serde_json::from_value(e.clone()).expect("an entry")).collect();
        c.read = Some(crate::history::Read::Entries(es));
    }

    #[test]
    fn an_unapplied_settle_is_judged_from_the_segments_own_view() {
        // A fresh segment (no load) whose first append was refused settles error: the rule
        // asks for no settle over the empty journal it knows, refused or not.
        let mut h = HistoryBuilder::engine_run();
        let a = h.acquire(0, "a", "r", 1);
        h.append_lost(0, &a, "r", running(1), "lease_held");
        h.append_lost(0, &a, "r", settle(1, "error"), "lease_held");
        let v = h.judge("settles_only_on_change");
        assert_eq!(v.len(), 1, "{v:?}");
        assert!(v[0].witness.contains("the empty journal it booted from"), "{v:?}");
        assert!(v[0].witness.contains("lease_held"), "{v:?}");
        // The same segment with its first append applied did work: its refused settle is owed.
        let mut h = HistoryBuilder::engine_run();
        let a = h.acquire(0, "a", "r", 1);
        h.append(0, &a, "r", running(1));
        h.append_lost(0, &a, "r", settle(2, "error"), "busy");
        assert!(h.judge("settles_only_on_change").is_empty());

        // A resume that loaded a journal already settled ok, did nothing, and tried to settle
        // ok again; the same resume settling another status is owed its settle.
        let booted = [running(1), terminal(2, 1, "ok"), settle(3, "ok")];
        let mut h = journaled_by_a(&booted);
        let b = h.acquire(0, "b", "r", 2);
        load(&mut h, "b", &booted);
        h.append_lost(0, &b, "r", settle(4, "ok"), "lease_held");
        let v = h.judge("settles_only_on_change");
        assert_eq!(v.len(), 1, "{v:?}");
        assert!(v[0].witness.contains("already ends in a run_settle of ok"), "{v:?}");
        let c = h.acquire(0, "c", "r", 3);
        load(&mut h, "c", &booted);
        h.append_lost(0, &c, "r", settle(4, "cancelled"), "lease_held");
        assert_eq!(h.judge("settles_only_on_change").len(), 1, "a changed status is owed its settle");
        // b resumes a journal with work and no settle, after `loader` loaded it, and settles
        // error refused.
        let unsettled = |loader: &str| {
            let mut h = HistoryBuilder::engine_run();
            let a = h.acquire(0, "a", "r", 1);
            h.append(0, &a, "r", running(1));
            let b = h.acquire(0, "b", "r", 2);
            load(&mut h, loader, &[running(1)]);
            h.append_lost(0, &b, "r", settle(2, "error"), "lease_held");
            h
        };
        // Its own load: entries with no settle (the third arm) are owed one.
        assert!(unsettled("b").judge("settles_only_on_change").is_empty());
        // Another identity's load is not this segment's view: b loaded nothing, so its view is
        // empty and its settle over it is caught.
        let mut h = unsettled("someone");
        assert_eq!(h.judge("settles_only_on_change").len(), 1);
        // A load whose entries were not kept (a history read back from a file) is not judged.
        h.h.calls.iter_mut().filter(|c| c.op == crate::history::OpKind::Load).for_each(|c| {
            c.args.actor = Some("b".into());
            c.read = None;
        });
        assert!(h.judge("settles_only_on_change").is_empty());
    }

    #[test]
    fn a_failed_settle_write_must_not_resolve_the_handle() {
        // The meta write refused lease_held: swallowed, the handle resolves (3.4).
        let mut h = HistoryBuilder::engine_run();
        let a = h.acquire(0, "a", "r", 1);
        h.append(0, &a, "r", settle(1, "error"));
        h.meta(0, Some(&a), "r", RunStatus::Error, 1);
        h.refuse_last("lease_held");
        settled(&mut h, "a", "error");
        assert!(h.judge("settle_failures_reach_the_handle").is_empty());
        // Refused busy: a settlement error, not an outcome.
        let b = h.acquire(0, "a", "r", 2);
        h.append(0, &b, "r", settle(2, "ok"));
        h.meta(0, Some(&b), "r", RunStatus::Ok, 2);
        h.refuse_last("busy");
        settled(&mut h, "a", "ok");
        let v = h.judge("settle_failures_reach_the_handle");
        assert_eq!(v.len(), 1, "{v:?}");
        assert!(v[0].witness.contains("meta write") && v[0].witness.contains("busy"), "{v:?}");
        // A refused settle append (any code) skips the meta write and rejects the handle.
        let mut h = HistoryBuilder::engine_run();
        let a = h.acquire(0, "a", "r", 1);
        h.append(0, &a, "r", settle(1, "ok"));
        h.refuse_last("lease_held");
        settled(&mut h, "a", "ok");
        let v = h.judge("settle_failures_reach_the_handle");
        assert!(v.len() == 1 && v[0].witness.contains("run_settle append"), "{v:?}");
        // Only the identity's latest tenure counts: a refusal under an earlier grant does not.
        let mut h = HistoryBuilder::engine_run();
        let a = h.acquire(0, "a", "r", 1);
        h.meta(0, Some(&a), "r", RunStatus::Ok, 1);
        h.refuse_last("busy");
        let b = h.acquire(0, "a", "r", 2);
        h.meta(0, Some(&b), "r", RunStatus::Ok, 2);
        settled(&mut h, "a", "ok");
        assert!(h.judge("settle_failures_reach_the_handle").is_empty());
    }

    #[test]
    fn a_settle_rejection_the_table_does_not_give_is_caught() {
        const P: &str = "settle_rejections_follow_the_table";
        let reject = |h: &mut HistoryBuilder, error: &str| {
            h.fact(0, "a", FactKind::Failed { run_id: "r".into(), what: "run".into(), error: error.into() })
        };
        let superseded = "run r superseded while settling ok";
        let settlement = |stage: &str| format!("settlement of run r (ok) failed at {stage}: store: busy");
        // The settle append refused: lease_held is superseded, anything else a settlement error.
        for (code, error, lawful) in [
            ("lease_held", superseded.to_string(), true),
            ("busy", settlement("run-settle"), true),
            ("busy", superseded.to_string(), false),
            ("lease_held", settlement("run-settle"), false),
        ] {
            let mut h = HistoryBuilder::engine_run();
            let a = h.acquire(0, "a", "r", 1);
            h.append(0, &a, "r", settle(1, "ok"));
            h.refuse_last(code);
            reject(&mut h, &error);
            assert_eq!(h.judge(P).is_empty(), lawful, "{code} {error}: {:?}", h.judge(P));
        }
        // The settle applied and the terminal meta write refused: busy is a settlement error;
        // lease_held is swallowed, so neither rejection is the table's.
        for (code, error, lawful) in [
            ("busy", settlement("meta"), true),
            ("lease_held", settlement("meta"), false),
            ("lease_held", superseded.to_string(), false),
        ] {
            let mut h = HistoryBuilder::engine_run();
            let a = h.acquire(0, "a", "r", 1);
            h.append(0, &a, "r", settle(1, "ok"));
            h.meta(0, Some(&a), "r", RunStatus::Ok, 1);
            h.refuse_last(code);
            reject(&mut h, &error);
            let v = h.judge(P);
            assert_eq!(v.is_empty(), lawful, "{code} {error}: {v:?}");
        }
        // Other rejections are not judged.
        let mut h = HistoryBuilder::engine_run();
        reject(&mut h, "configuration error: run r already has a live segment in this engine");
        assert!(h.judge(P).is_empty());
    }

    #[test]
    fn a_booted_segment_released_without_a_settle_is_caught() {
        fn boot(h: &mut HistoryBuilder, l: &store::Lease) {
            h.mark(0, "engine.boot.before_meta", "r", Some(l.epoch.0));
            h.meta(0, Some(l), "r", RunStatus::Running, l.epoch.0);
        }
        fn release(h: &mut HistoryBuilder, l: &store::Lease) {
            h.push(0, crate::history::OpKind::Release, "r", Some(l.clone()), Default::default(), None);
        }
        let mut h = HistoryBuilder::engine_run();
        let a = h.acquire(0, "a", "r", 1);
        boot(&mut h, &a);
        h.append(0, &a, "r", running(1));
        h.append(0, &a, "r", settle(2, "cancelled"));
        h.meta(0, Some(&a), "r", RunStatus::Cancelled, 1);
        release(&mut h, &a);
        // A repair to running (no boot point) released at once is lawful.
        let r = h.acquire(0, "op", "r", 2);
        h.meta(0, Some(&r), "r", RunStatus::Running, 1);
        release(&mut h, &r);
        // A superseded segment whose settle append was refused tried its settle.
        let b = h.acquire(0, "b", "r", 3);
        boot(&mut h, &b);
        h.append(0, &b, "r", settle(3, "error"));
        h.refuse_last("lease_held");
        release(&mut h, &b);
        assert!(h.judge("a_booted_segment_settles_before_its_release").is_empty());
        // A segment that stopped after a refused renew and let go without settling.
        let c = h.acquire(0, "c", "r", 4);
        boot(&mut h, &c);
        h.append(0, &c, "r", running(3));
        release(&mut h, &c);
        let v = h.judge("a_booted_segment_settles_before_its_release");
        assert_eq!(v.len(), 1, "{v:?}");
        assert!(v[0].witness.contains("epoch 4"), "{v:?}");
    }

    #[test]
    fn a_clean_settle_after_a_lost_append_is_caught() {
        // The grant's receipt append failed busy; the segment went on and settled ok.
        let mut h = HistoryBuilder::engine_run();
        let a = h.acquire(0, "a", "r", 1);
        h.append(0, &a, "r", running(0));
        h.append_lost(0, &a, "r", op_entry(1, "decision", "pc:0:0", "ok", None), "busy");
        h.append(0, &a, "r", terminal(2, 0, "ok"));
        assert!(h.judge("no_clean_settle_over_a_lost_append").is_empty(), "no settle yet");
        h.append(0, &a, "r", settle(3, "ok"));
        let v = h.judge("no_clean_settle_over_a_lost_append");
        assert_eq!(v.len(), 1, "{v:?}");
        assert!(v[0].witness.contains("seq 1"), "{v:?}");
        // The latch's way: the same history settled error passes.
        let mut h = HistoryBuilder::engine_run();
        let a = h.acquire(0, "a", "r", 1);
        h.append_lost(0, &a, "r", op_entry(0, "decision", "pc:0:0", "ok", None), "busy");
        h.append(0, &a, "r", settle(1, "error"));
        assert!(h.judge("no_clean_settle_over_a_lost_append").is_empty());
        // A later grant of the same owner starts clean; so does another owner.
        let b = h.acquire(0, "a", "r", 2);
        h.append(0, &b, "r", settle(2, "suspended"));
        let c = h.acquire(1, "c", "r", 3);
        h.append(1, &c, "r", settle(3, "ok"));
        assert!(h.judge("no_clean_settle_over_a_lost_append").is_empty());
        // A suspension settled over the loss is caught too.
        h.append_lost(1, &c, "r", op_entry(4, "decision", "pc:0:1", "ok", None), "lease_held");
        h.append(1, &c, "r", settle(5, "suspended"));
        assert_eq!(h.judge("no_clean_settle_over_a_lost_append").len(), 1);
    }

    #[test]
    fn settles_are_one_per_status_change() {
        let mut h = HistoryBuilder::engine_run();
        let a = h.acquire(0, "a", "r", 1);
        h.append(0, &a, "r", settle(1, "suspended"));
        h.append(0, &a, "r", settle(2, "suspended"));
        assert_eq!(h.judge("one_ok_settle_per_completed_run").len(), 1, "two equal settles back to back");
        let mut h = HistoryBuilder::engine_run();
        let a = h.acquire(0, "a", "r", 1);
        h.append(0, &a, "r", settle(1, "ok"));
        h.append(0, &a, "r", running(2));
        h.append(0, &a, "r", settle(3, "ok"));
        h.meta(0, Some(&a), "r", RunStatus::Ok, 1);
        let v = h.judge("one_ok_settle_per_completed_run");
        assert!(v.iter().any(|v| v.witness.contains("2 ok run_settle")), "{v:?}");
        let mut h = HistoryBuilder::engine_run();
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
    fn a_wrong_settled_value_is_caught() {
        let mut h = HistoryBuilder::engine_run();
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
    fn a_failing_settle_that_returns_a_value_is_caught() {
        let good = json!({"one": "alpha", "two": "beta"}).to_string();
        for (status, value, caught) in [
            ("error", Some(good.clone()), true),
            ("cancelled", Some(good.clone()), true),
            ("suspended", Some(good.clone()), true),
            ("error", None, false),
            ("exhausted", None, false),
        ] {
            let mut h = HistoryBuilder::engine_run();
            h.fact(0, "a", FactKind::Submitted { run_id: "r".into(), workflow: "happy".into() });
            h.fact(
                0,
                "a",
                FactKind::Settled { run_id: "r".into(), status: status.into(), value, segment: 1 },
            );
            let v = h.judge("settled_value_matches_workflow");
            assert_eq!(v.len(), usize::from(caught), "{status}: {v:?}");
        }
    }
}
