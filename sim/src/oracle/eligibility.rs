//! Deletion, pruning and resume eligibility. A worker's sweep resumes only runs whose meta
//! is `running` or `suspended`, never a terminal one (docs/engine-model.md 5.2 step 3; at
//! the instant of its boot write only with this model's re-check, P). Retention deletes only runs whose meta is terminal,
//! never a running or suspended run, whether or not anyone holds it (docs/engine-model.md 5.2 step 3, 5.4; at apply time only with this model's re-check, P);
//! `pruneRun` deletes only the checkpoints of `ok` agent terminals that no other entry
//! mentions, only ones its own blob listing returned, and a prune that runs to its end deletes
//! every one of them (docs/engine-model.md 6.2). Both are judged from the apply-ordered history against
//! the oracle's own replay of each run's journal and meta, read as plain JSON.
//!
//! Only deletions an engine identity made are judged (`args.actor`, recorded by
//! `history::under_actor`), and a run deletion by its status only when it carried a lease
//! (an unleased delete is a host's unfenced decision: a resume may boot the run between
//! the host's read and its delete); a checkpoint delete followed by the same identity's journal
//! delete of the run under the same lease, or made under a lease the worker took for
//! retention (the `worker.retention.after_acquire` mark) or in a `deleteRun` the identity
//! began (the `engine.delete.before_blobs` mark), is part of a deletion cascade,
//! judged by the run's status (unlawful over a live generation's meta), not as a prune.

use std::collections::BTreeMap;

use serde_json::Value;

use super::contract::{
    checkpoint_seq, is_deletion_record_put, record_names, EntryView, JournalRefs, MetaView, Status,
};
use super::model::{t, Judged};
use super::{Expectation, Property, Witness};
use crate::history::{describe_call, Call, FactKind, OpKind, Read};

pub const ALL: &[Property] = &[
    Property {
        name: "only_terminal_runs_deleted",
        expectation: Expectation::Always,
        claim: "A run deletion made by an engine identity under a lease (retention, a leased deletion cascade) applies only while the run's meta is terminal: a running or suspended run is never deleted, unless the deleter read that very status under the same lease and the lease was not taken for retention (a user deleting a run they see stuck `running`, under a brief lease granted only once its holder's lapsed). The lease is what makes the deleter's read of the status still true when the delete applies: no one else writes the run while it is held.",
        not_checked: "Deletions without a lease: rulvar's unleased deleteRun is an unfenced host decision, and nothing stops a resume from booting the run between the host's read of a terminal meta and its delete (explore found that window from queue-solo under current, docs/explore-findings/); deletions by actors that do not say who they are (host decisions of store-level actors); a delete that finishes a deletion another identity began (the run's deletion record, put by another identity, names the meta's generation when the delete applies: a worker's drive finishing a cascade an unleased host began while a resume booted the run, docs/engine-model.md 6.1); the scenario's own retention rule beyond terminality.",
        check: only_terminal_runs_deleted,
    },
    Property {
        name: "sweeps_resume_only_live_runs",
        expectation: Expectation::Always,
        claim: "A segment a worker's sweep drives (its lease is the one the sweep acquired: the `worker.sweep.after_acquire` mark) writes its first meta over a `running` or `suspended` meta: a run that settled terminal, or vanished, since the sweep listed it is not resumed.",
        not_checked: "Resumes by hosts (a retry of a finished run is theirs to make); sweeps whose segment writes no meta, or writes it without the lease (profiles before v1.45.0 thread the lease into appends only).",
        check: sweeps_resume_only_live_runs,
    },
    Property {
        name: "sweeps_skip_only_blocked_runs",
        expectation: Expectation::Always,
        claim: "A run a worker's sweep skips as parked (the `worker.sweep.skip_parked` mark) was blocked in the journal the sweep loaded under that lease: some `external` or `approval` suspension in it had no resolution or abandon. A run whose suspensions are all answered has work, and a worker that skips it leaves it to others, or to no one.",
        not_checked: "Why a run a sweep drives was chosen; skips of runs whose load the history does not show (a sweep that read nothing before its skip).",
        check: sweeps_skip_only_blocked_runs,
    },
    Property {
        name: "prune_only_spent_checkpoints",
        expectation: Expectation::Always,
        claim: "A checkpoint an engine identity deletes outside a deletion cascade belongs to an ok agent terminal in the run's journal (the checkpoint of its running entry) and no other entry mentions it (as a value or an object key, docs/engine-model.md 6.2); one a deletion cascade cut before its journal delete deletes is not one of a live generation (the run's meta is not `running` or `suspended`).",
        not_checked: "Blobs that are not checkpoints (`<run>/ckpt/<seq>`); deletions by actors that do not say who they are; the run's status under an unleased deletion cascade (a host's unfenced decision; FW4 is judged by the store family); a blob delete that finishes a deletion another identity began (the run's deletion record, put by another identity, names the meta's generation when it applies: a drive finishing a marked run's cascade, which a takeover may cut in turn, docs/engine-model.md 6.1).",
        check: prune_only_spent_checkpoints,
    },
    Property {
        name: "prune_deletes_every_spent_checkpoint",
        expectation: Expectation::Always,
        claim: "A prune that runs to its end (the `engine.prune.before_delete` mark, then its process releases the brief lease with none of the prune's blob deletes failing) deleted every spent checkpoint of the journal and blob list it read under that lease: the checkpoint named by each `ok` agent terminal whose blob existed, unless some entry mentions it anywhere (a value or a key; the terminal's own `checkpointRef` field excepted) (docs/engine-model.md 6.2).",
        not_checked: "Prunes a crash or a failed delete cut short; prunes without a lease; blobs that are not named by a terminal's `checkpointRef`.",
        check: prune_deletes_every_spent_checkpoint,
    },
    Property {
        name: "prune_deletes_only_listed_blobs",
        expectation: Expectation::Always,
        claim: "Every blob a prune deletes (after its `engine.prune.before_delete` mark, on the run, under the brief lease it took) was held, per the serial history, as of the blob listing it made under that lease before the mark: a prune's candidates are the checkpoints whose blob its own listing returned (docs/engine-model.md 6.2 steps 1 and 2), so a prune that lists nothing deletes nothing, and one never deletes, or counts, a checkpoint that was already gone.",
        not_checked: "Which listed blobs it deletes (`prune_only_spent_checkpoints` and `prune_deletes_every_spent_checkpoint`); prunes without a lease; what the prune returns (no workload records the count).",
        check: prune_deletes_only_listed_blobs,
    },
    Property {
        name: "a_prune_counts_what_it_deleted",
        expectation: Expectation::Always,
        claim: "The count a prune returns (the operator's `Pruned` fact) is the number of blob deletes it made after its `engine.prune.before_delete` mark, on the run under its brief lease, that returned ok (docs/engine-model.md 6.2: `pruneRun` returns the count deleted), and a prune returns a count only if none of those deletes failed: it awaits each delete in turn, so a refused one rejects the prune (6.2 step 4).",
        not_checked: "Prunes that failed or crashed (no count is returned); prunes by actors that record no `Pruned` fact.",
        check: a_prune_counts_what_it_deleted,
    },
];

/// Each run's journal and meta status (the oracle's own views), folded from applied calls.
#[derive(Default)]
struct Runs<'h> {
    journal: BTreeMap<&'h str, Vec<EntryView>>,
    status: BTreeMap<&'h str, Status>,
}

impl<'h> Runs<'h> {
    fn journal(&self, run: &str) -> &[EntryView] {
        self.journal.get(run).map_or(&[], |v| v.as_slice())
    }

    fn apply(&mut self, c: &'h Call) {
        let run = c.run_id.as_str();
        let payload = c.args.payload.as_deref();
        match c.op {
            OpKind::Append => {
                if let Some(e) = payload.and_then(EntryView::parse) {
                    self.journal.entry(run).or_default().push(e);
                }
            }
            OpKind::PutMeta => {
                if let Some(m) = payload.and_then(MetaView::parse) {
                    self.status.insert(run, m.status);
                }
            }
            OpKind::Delete => {
                self.journal.remove(run);
                self.status.remove(run);
            }
            _ => {}
        }
    }
}

/// [`Runs`] replayed in apply order; `visit` sees the state before each applied call.
fn replay<'h>(j: &Judged<'h>, mut visit: impl FnMut(&'h Call, &[EntryView], Option<Status>)) {
    let mut runs = Runs::default();
    for &c in &j.applied {
        let run = c.run_id.as_str();
        visit(c, runs.journal(run), runs.status.get(run).copied());
        runs.apply(c);
    }
}

/// The journal and blob deletes that finish a deletion another identity began: when the
/// delete applies, the run's deletion record (the bare ref `<run>`), put by another identity,
/// names the generation of the meta (its `genesis`, the empty string for none;
/// docs/engine-model.md 6.1: a worker whose drive meets such a run finishes the deletion under
/// the drive's lease, and a crash or a takeover may cut that cascade in turn).
fn finishing_deletes(j: &Judged) -> std::collections::BTreeSet<usize> {
    let who = |c: &Call| (c.node, c.incarnation, c.args.actor.clone());
    let mut genesis: BTreeMap<&str, Option<String>> = BTreeMap::new();
    let mut records: BTreeMap<&str, Vec<&Call>> = BTreeMap::new();
    let mut out = std::collections::BTreeSet::new();
    for &c in &j.applied {
        let run = c.run_id.as_str();
        match c.op {
            OpKind::PutMeta => {
                if let Some(m) = c.args.payload.as_deref().and_then(MetaView::parse) {
                    genesis.insert(run, m.genesis);
                }
            }
            OpKind::BlobPut if is_deletion_record_put(c) => {
                records.entry(run).or_default().push(c);
            }
            OpKind::Delete | OpKind::BlobDelete => {
                // The deleter's own cascade writes a record too: any other identity's counts.
                let g = if c.op == OpKind::Delete { genesis.remove(run) } else { genesis.get(run).cloned() };
                let named = g.is_some_and(|g| {
                    records.get(run).is_some_and(|rs| {
                        rs.iter().any(|r| who(r) != who(c) && record_names(r, g.as_deref()))
                    })
                });
                if named {
                    out.insert(c.id);
                }
            }
            _ => {}
        }
    }
    out
}

/// Whether `c`, a leased deletion write by an engine identity, deletes a live run on purpose:
/// the same process and identity read the run's meta under this lease (after the acquire
/// that granted it) and saw the live status `status` the run still has, and the lease was
/// not taken for retention (which deletes only terminal runs). A user who deletes a run they
/// see stuck `running` does so under a brief lease, and the lease keeps that read true.
fn deliberate_live_delete(j: &Judged, c: &Call, status: Option<Status>) -> bool {
    let (Some(lease), Some(status)) = (c.lease.as_ref(), status) else { return false };
    if lease.run_id != c.run_id
        || j.index().marked(
            "worker.retention.after_acquire",
            c.node,
            c.incarnation,
            &c.run_id,
            Some(lease.epoch.0),
        )
    {
        return false;
    }
    let process = j.index().of_process(c.node, c.incarnation);
    let before = &process[..process.partition_point(|p| p.id < c.id)];
    let mine = |p: &&&Call| p.run_id == c.run_id && p.args.actor == c.args.actor;
    let Some(granted) =
        before.iter().rposition(|p| mine(&p) && p.op == OpKind::Acquire && p.granted.as_ref() == Some(lease))
    else {
        return false;
    };
    let read = before[granted + 1..].iter().filter(mine).rev().find_map(|p| match (&p.op, &p.read) {
        (OpKind::GetMeta, Some(Read::Meta(m))) => Some(m.as_ref().map(|m| Status::of(m.status))),
        _ => None,
    });
    read == Some(Some(status))
}

fn only_terminal_runs_deleted(j: &Judged, out: &mut Vec<Witness>) {
    let finishing = finishing_deletes(j);
    replay(j, |c, journal, status| {
        if c.op != OpKind::Delete || c.args.actor.is_none() || c.lease.is_none() || finishing.contains(&c.id)
        {
            return;
        }
        if deliberate_live_delete(j, c, status) {
            return;
        }
        if status.is_none() && journal.is_empty() {
            return; // nothing to delete
        }
        if status.is_some_and(Status::is_terminal) {
            return;
        }
        out.push(
            Witness::new(format!(
                "n{} ({})'s {} took effect at t={} while the run's meta was {} ({} journal entries)",
                c.node,
                c.args.actor.as_deref().unwrap_or(""),
                describe_call(c),
                t(Judged::applied_ns(c)),
                status.map_or("missing", Status::word),
                journal.len()
            ))
            .on(c.op, c.id),
        );
    });
}

fn sweeps_resume_only_live_runs(j: &Judged, out: &mut Vec<Witness>) {
    // The grants the sweeps took, and whether each has written its first meta yet.
    let mut first_meta_seen: BTreeMap<(u32, u32, &str, u64), bool> = j
        .history
        .marks
        .iter()
        .filter(|m| m.point == "worker.sweep.after_acquire")
        .filter_map(|m| Some(((m.node, m.incarnation, m.run_id.as_str(), m.epoch?), false)))
        .collect();
    if first_meta_seen.is_empty() {
        return;
    }
    replay(j, |c, journal, status| {
        if c.op != OpKind::PutMeta {
            return;
        }
        let Some(lease) = c.lease.as_ref() else { return };
        let Some(seen) = first_meta_seen.get_mut(&(c.node, c.incarnation, c.run_id.as_str(), lease.epoch.0))
        else {
            return;
        };
        if std::mem::replace(seen, true) {
            return;
        }
        if matches!(status, Some(Status::Running | Status::Suspended)) {
            return;
        }
        out.push(
            Witness::new(format!(
                "n{} ({})'s sweep resumed {} at t={} under epoch {}: its first meta write landed over a {} meta ({} journal entries)",
                c.node,
                c.args.actor.as_deref().unwrap_or(""),
                c.run_id,
                t(Judged::applied_ns(c)),
                lease.epoch.0,
                status.map_or("missing", Status::word),
                journal.len()
            ))
            .on(c.op, c.id),
        );
    });
}

fn sweeps_skip_only_blocked_runs(j: &Judged, out: &mut Vec<Witness>) {
    let calls = &j.history.calls;
    for m in j.history.marks.iter().filter(|m| m.point == "worker.sweep.skip_parked") {
        let before = &calls[..m.invoked_before.min(calls.len())];
        // The sweep's grant, then the last load of the run the same identity made under it.
        let Some(grant) = before.iter().rev().find(|c| {
            c.op == OpKind::Acquire
                && (c.node, c.incarnation) == (m.node, m.incarnation)
                && c.run_id == m.run_id
                && c.granted.as_ref().map(|g| g.epoch.0) == m.epoch
        }) else {
            continue;
        };
        let Some(load) = before[grant.id.min(before.len())..].iter().rev().find(|c| {
            c.op == OpKind::Load
                && (c.node, c.incarnation) == (m.node, m.incarnation)
                && c.run_id == m.run_id
                && c.args.actor == grant.args.actor
                && c.outcome.is_ok()
        }) else {
            continue;
        };
        let Some(seen) = load.seen_at else { continue };
        // The journal as the serial history had it when the load returned.
        let mut runs = Runs::default();
        for &c in j.applied.iter().take(seen).filter(|c| c.run_id == m.run_id) {
            runs.apply(c);
        }
        let journal = runs.journal(&m.run_id);
        let refs = JournalRefs::of(journal);
        if journal.iter().any(|e| refs.open_suspension(e)) {
            continue;
        }
        let answered = journal
            .iter()
            .filter(|e| matches!(e.kind.as_str(), "resolution" | "abandon"))
            .map(|e| format!("{} of seq {}", e.kind, e.ref_seq.map_or("?".into(), |s| s.to_string())))
            .collect::<Vec<_>>();
        out.push(
            Witness::new(format!(
                "n{} ({})'s sweep skipped {} as parked under epoch {}, but the journal its load returned ({} entries) has no open suspension{}",
                m.node,
                grant.args.actor.as_deref().unwrap_or(""),
                m.run_id,
                m.epoch.unwrap_or(0),
                journal.len(),
                if answered.is_empty() { String::new() } else { format!(" (answered: {})", answered.join(", ")) }
            ))
            .on(load.op, load.id),
        );
    }
}

fn prune_only_spent_checkpoints(j: &Judged, out: &mut Vec<Witness>) {
    let finishing = finishing_deletes(j);
    replay(j, |c, journal, status| {
        if c.op != OpKind::BlobDelete || c.args.actor.is_none() || finishing.contains(&c.id) {
            return;
        }
        let Some(r) = c.args.blob_ref.as_deref() else { return };
        let Some(seq) = checkpoint_seq(r) else { return };
        // Part of a cascade: the same identity deletes the run under the same lease later,
        // or the blob delete is a retention cascade's (its brief lease was taken for
        // retention: a crash may cut the cascade before its journal delete).
        let cascade = j.history.calls.iter().any(|d| {
            d.op == OpKind::Delete
                && d.id > c.id
                && d.run_id == c.run_id
                && d.args.actor == c.args.actor
                && d.lease == c.lease
        }) || j.history.marks.iter().any(|m| {
            m.point == "worker.retention.after_acquire"
                && m.node == c.node
                && m.incarnation == c.incarnation
                && m.run_id == c.run_id
                && m.epoch.is_some()
                && m.epoch == c.lease.as_ref().map(|l| l.epoch.0)
        });
        if cascade {
            return;
        }
        // A `deleteRun` cascade a crash cut before its journal delete (after any of its blob
        // deletes): the process began the cascade (`engine.delete.before_blobs`) before this
        // blob delete, under this lease or, like it, under none (a host's unleased delete).
        // Its blob deletes are the deletion's. Under a lease they are lawful unless a live
        // generation's meta (`running` or `suspended`) is there: a retry resumed the run since
        // the cascade read it terminal, which the lease exists to prevent. With no meta, no
        // generation is live (a boot writes meta before any checkpoint), so what such a delete
        // meets is a dead generation's leftover. An unleased cascade's status is not judged,
        // as in only_terminal_runs_deleted: rulvar's unleased deleteRun is the host's unfenced
        // decision (a user deletes a run stuck `running` or abandons a suspended one), and
        // FW4, which refuses it while a holder's lease is live, is judged by the store family.
        let at = c.applied.as_ref().map_or(usize::MAX, |a| a.order);
        let cut_delete = j.history.marks.iter().any(|m| {
            m.point == "engine.delete.before_blobs"
                && m.node == c.node
                && m.incarnation == c.incarnation
                && m.run_id == c.run_id
                && m.applied_before <= at
                && m.epoch == c.lease.as_ref().map(|l| l.epoch.0)
        });
        if cut_delete {
            let judged = c.lease.is_some() && !deliberate_live_delete(j, c, status);
            if let Some(live) = status.filter(|s| !s.is_terminal() && judged) {
                out.push(
                    Witness::new(format!(
                        "n{} ({})'s {} at t={} deleted a checkpoint in a deletion cascade while the run's meta was {}",
                        c.node,
                        c.args.actor.as_deref().unwrap_or(""),
                        describe_call(c),
                        t(Judged::applied_ns(c)),
                        live.word()
                    ))
                    .on(c.op, c.id),
                );
            }
            return;
        }
        let terminal =
            journal.iter().position(|e| e.kind == "agent" && e.status == "ok" && e.ref_seq == Some(seq));
        let why = match terminal {
            None => Some(format!("no ok agent terminal of the dispatch at seq {seq} is in the journal")),
            Some(k) => journal.iter().enumerate().find_map(|(n, e)| {
                let mut raw = e.raw.clone();
                if n == k {
                    if let Some(m) = raw.as_object_mut() {
                        m.remove("checkpointRef");
                    }
                }
                mentions_anywhere(&raw, r).then(|| format!("the entry at seq {} still mentions it", e.seq))
            }),
        };
        if let Some(why) = why {
            out.push(
                Witness::new(format!(
                    "n{} ({})'s {} at t={} deleted a checkpoint that is not spent: {why}",
                    c.node,
                    c.args.actor.as_deref().unwrap_or(""),
                    describe_call(c),
                    t(Judged::applied_ns(c))
                ))
                .on(c.op, c.id),
            );
        }
    });
}

/// One prune as its process's calls show it: the brief lease it ran under (the grant before
/// its `engine.prune.before_delete` mark), the journal load and blob listing it made under
/// that lease before the mark, and the blob deletes it made on the run under that lease after
/// the mark, up to the release that ended it (or to the end of the history: a crash).
pub(super) struct Prune<'h> {
    node: u32,
    incarnation: u32,
    /// Calls invoked before the mark.
    invoked_before: usize,
    epoch: u64,
    run: &'h str,
    grant: &'h Call,
    load: Option<&'h Call>,
    list: Option<&'h Call>,
    release: Option<&'h Call>,
    pub(super) deletes: Vec<&'h Call>,
}

/// Every prune of the history, in mark order (marks without a lease or a grant before them
/// are skipped: nothing ties their calls to the prune).
pub(super) fn prunes<'h>(j: &Judged<'h>) -> Vec<Prune<'h>> {
    let ix = j.index();
    let mut out = Vec::new();
    for m in j.history.marks.iter().filter(|m| m.point == "engine.prune.before_delete") {
        let Some(epoch) = m.epoch else { continue };
        let run = m.run_id.as_str();
        // The process's calls on the run, before the mark and from it on (ids are positions
        // in the history's call list).
        let own = ix.of_process(m.node, m.incarnation);
        let cut = own.partition_point(|c| c.id < m.invoked_before);
        let (before, after) = own.split_at(cut);
        let on_run = |c: &&&'h Call| c.run_id == run;
        let under = |c: &&&'h Call| c.lease.as_ref().is_some_and(|l| l.epoch.0 == epoch);
        let Some(&grant) = before
            .iter()
            .filter(on_run)
            .rfind(|c| c.op == OpKind::Acquire && c.granted.as_ref().is_some_and(|g| g.epoch.0 == epoch))
        else {
            continue;
        };
        let read = |op: OpKind| {
            before
                .iter()
                .filter(|c| c.id >= grant.id)
                .filter(on_run)
                .rfind(|c| c.op == op && c.outcome.is_ok())
                .copied()
        };
        let release = after.iter().filter(on_run).filter(under).find(|c| c.op == OpKind::Release).copied();
        let end = release.map_or(usize::MAX, |r| r.id);
        let deletes = after
            .iter()
            .filter(on_run)
            .filter(under)
            .filter(|c| c.op == OpKind::BlobDelete && c.id < end)
            .copied()
            .collect();
        out.push(Prune {
            node: m.node,
            incarnation: m.incarnation,
            invoked_before: m.invoked_before,
            epoch,
            run,
            grant,
            load: read(OpKind::Load),
            list: read(OpKind::BlobList),
            release,
            deletes,
        });
    }
    out
}

/// The blob refs of `run` held as of apply position `upto`, from the serial history.
fn blobs_before<'h>(j: &Judged<'h>, run: &str, upto: usize) -> std::collections::BTreeSet<&'h str> {
    let mut blobs = std::collections::BTreeSet::new();
    for &c in j.index().recorded_before(run, upto) {
        match (c.op, c.args.blob_ref.as_deref()) {
            (OpKind::BlobPut, Some(r)) => {
                blobs.insert(r);
            }
            (OpKind::BlobDelete, Some(r)) => {
                blobs.remove(r);
            }
            _ => {}
        }
    }
    blobs
}

fn prune_deletes_every_spent_checkpoint(j: &Judged, out: &mut Vec<Witness>) {
    let ix = j.index();
    for p in prunes(j) {
        let (Some(load), Some(list), Some(release)) = (p.load, p.list, p.release) else { continue };
        if p.deletes.iter().any(|c| !c.outcome.is_ok()) {
            continue;
        }
        let (run, epoch) = (p.run, p.epoch);
        // The journal the load saw and the blobs the list saw, from the serial history.
        let journal = ix.journal_before(run, load.seen_at.unwrap_or(0));
        let blobs = blobs_before(j, run, list.seen_at.unwrap_or(0));
        let mut candidates: Vec<(&str, u64)> = Vec::new();
        for e in journal {
            if e.kind != "agent" || e.status != "ok" || e.ref_seq.is_none() {
                continue;
            }
            let Some(ck) = e.raw.get("checkpointRef").and_then(Value::as_str) else { continue };
            if let Some(&held) = blobs.get(ck) {
                if !candidates.iter().any(|(c, _)| *c == held) {
                    candidates.push((held, e.seq));
                }
            }
        }
        for (ck, owner) in candidates {
            let mentioned = journal.iter().any(|e| {
                let mut raw = e.raw.clone();
                if e.seq == owner {
                    if let Some(o) = raw.as_object_mut() {
                        o.remove("checkpointRef");
                    }
                }
                mentions_anywhere(&raw, ck)
            });
            if mentioned || p.deletes.iter().any(|c| c.args.blob_ref.as_deref() == Some(ck)) {
                continue;
            }
            out.push(
                Witness::new(format!(
                    "n{} ({})'s prune of {run} under epoch {epoch} (t={} to its release at t={}) left the spent checkpoint {ck}: the ok agent terminal at seq {owner} names it, its blob was listed, and no other entry mentions it",
                    p.node,
                    p.grant.args.owner.as_deref().unwrap_or(""),
                    t(p.grant.invoked_ns),
                    t(release.invoked_ns),
                ))
                .on(release.op, release.id),
            );
        }
    }
}

fn prune_deletes_only_listed_blobs(j: &Judged, out: &mut Vec<Witness>) {
    for p in prunes(j) {
        let listed = p.list.map(|l| blobs_before(j, p.run, l.seen_at.unwrap_or(0)));
        for c in &p.deletes {
            let Some(r) = c.args.blob_ref.as_deref() else { continue };
            let why = match &listed {
                None => "it listed no blobs of the run under that lease before deciding".to_string(),
                Some(blobs) if !blobs.contains(r) => format!(
                    "its listing at t={} did not hold that ref",
                    t(p.list.map_or(0, |l| l.invoked_ns))
                ),
                Some(_) => continue,
            };
            out.push(
                Witness::new(format!(
                    "n{} ({})'s prune of {} under epoch {} deleted {r} at t={}: {why} (a prune's candidates are checkpoints whose blob its own listing returned)",
                    p.node,
                    p.grant.args.owner.as_deref().unwrap_or(""),
                    p.run,
                    p.epoch,
                    t(c.invoked_ns),
                ))
                .on(c.op, c.id),
            );
        }
    }
}

fn a_prune_counts_what_it_deleted(j: &Judged, out: &mut Vec<Witness>) {
    if !j.history.facts.iter().any(|f| matches!(f.kind, FactKind::Pruned { .. })) {
        return;
    }
    let all = prunes(j);
    for f in &j.history.facts {
        let FactKind::Pruned { run_id, deleted } = &f.kind else { continue };
        // The process's last prune of the run marked before the fact.
        let Some(p) = all.iter().rfind(|p| {
            p.node == f.node
                && p.incarnation == f.incarnation
                && p.run == run_id.as_str()
                && p.invoked_before <= f.invoked_before
        }) else {
            continue;
        };
        if let Some(failed) =
            p.deletes.iter().find(|c| c.id < f.invoked_before && c.outcome.refusal().is_some())
        {
            out.push(Witness::new(format!(
                "n{} ({})'s prune of {run_id} under epoch {} returned {deleted} deleted at t={}, though its blob delete of {} at t={} was refused ({})",
                f.node,
                f.owner,
                p.epoch,
                t(f.at_ns),
                failed.args.blob_ref.as_deref().unwrap_or("?"),
                t(failed.invoked_ns),
                failed.outcome.refusal().unwrap_or_default(),
            )));
            continue;
        }
        let made = p.deletes.iter().filter(|c| c.id < f.invoked_before && c.outcome.is_ok()).count() as u64;
        if made != *deleted {
            out.push(Witness::new(format!(
                "n{} ({})'s prune of {run_id} under epoch {} returned {deleted} deleted at t={}, but it made {made} blob delete(s) that returned ok",
                f.node,
                f.owner,
                p.epoch,
                t(f.at_ns),
            )));
        }
    }
}

/// Whether any string inside `v`, or any key of an object inside it, equals `needle`
/// (pruneRun's keep rule, docs/engine-model.md 6.2).
fn mentions_anywhere(v: &Value, needle: &str) -> bool {
    match v {
        Value::String(s) => s == needle,
        Value::Array(a) => a.iter().any(|x| mentions_anywhere(x, needle)),
        Value::Object(m) => m.iter().any(|(k, x)| k == needle || mentions_anywhere(x, needle)),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    //! Each property fails on a minimal history and passes its lawful twin.

    use serde_json::json;

    use super::*;
    use crate::history::FinalState;
    use crate::history::{Args, History};
    use crate::oracle::testkit;
    use crate::oracle::Expect;

    fn call(id: usize, op: OpKind, args: Args) -> Call {
        let mut c = testkit::call(id, op);
        c.args = Args { actor: Some("worker".into()), ..args };
        c
    }

    fn meta(id: usize, status: &str) -> Call {
        call(
            id,
            OpKind::PutMeta,
            Args { payload: Some(json!({"runId": "r", "status": status}).to_string()), ..Args::default() },
        )
    }

    fn entry(id: usize, e: serde_json::Value) -> Call {
        call(id, OpKind::Append, Args { payload: Some(e.to_string()), ..Args::default() })
    }

    fn blob_delete(id: usize, r: &str) -> Call {
        call(id, OpKind::BlobDelete, Args { blob_ref: Some(r.into()), ..Args::default() })
    }

    fn judge(calls: Vec<Call>, p: fn(&Judged, &mut Vec<Witness>)) -> Vec<Witness> {
        testkit::judge(&testkit::history(calls), p)
    }

    /// Run r under node 1's lease (returned): an agent dispatch at seq 0 whose checkpoint
    /// r/ckpt/0 was saved, and its ok terminal at seq 1 naming it.
    fn spent_checkpoint(h: &mut testkit::engine::HistoryBuilder) -> store::Lease {
        use testkit::engine::op_entry;
        let a = h.acquire(1, "host", "r", 1);
        h.append(1, &a, "r", op_entry(0, "agent", "op:0:a", "running", None));
        h.ckpt(1, &a, "r", 0, 1);
        let mut t = op_entry(1, "agent", "op:0:a", "ok", Some(0));
        t["checkpointRef"] = json!("r/ckpt/0");
        h.append(1, &a, "r", t);
        a
    }

    /// A prune's reads of run r (`ops`, each seeing every mutation so far).
    fn prune_reads(h: &mut testkit::engine::HistoryBuilder, ops: &[OpKind]) {
        for &op in ops {
            let mut c = testkit::call(h.h.calls.len(), op);
            (c.run_id, c.seen_at) = ("r".into(), Some(h.h.applied_count));
            h.h.calls.push(c);
        }
    }

    #[test]
    fn a_prune_that_leaves_a_spent_checkpoint_is_caught() {
        use testkit::engine::HistoryBuilder;
        let p = "prune_deletes_every_spent_checkpoint";
        // Run r: an ok agent terminal naming its checkpoint r/ckpt/0 (and, `mentioned`, an
        // entry whose key is that ref); then a prune under a brief lease that reads the
        // journal and the blobs, reaches its mark, (`deletes`) deletes the checkpoint, and
        // (`released`) releases.
        let pruned = |mentioned: bool, deletes: bool, released: bool| {
            let mut h = HistoryBuilder::engine_run();
            let a = spent_checkpoint(&mut h);
            if mentioned {
                h.append(1, &a, "r", json!({"seq": 2, "kind": "decision", "status": "ok", "key": "k", "value": {"r/ckpt/0": 1}}));
            }
            let b = h.acquire(0, "op", "r", 2);
            prune_reads(&mut h, &[OpKind::Load, OpKind::BlobList]);
            h.mark(0, "engine.prune.before_delete", "r", Some(2));
            if deletes {
                let args = Args { blob_ref: Some("r/ckpt/0".into()), ..Args::default() };
                h.push(0, OpKind::BlobDelete, "r", Some(b.clone()), args, None);
            }
            if released {
                h.push(0, OpKind::Release, "r", Some(b), Args::default(), None);
            }
            h.judge(p)
        };
        assert!(pruned(false, true, true).is_empty());
        let v = pruned(false, false, true);
        assert_eq!(v.len(), 1, "{v:?}");
        assert!(v[0].witness.contains("left the spent checkpoint r/ckpt/0"), "{}", v[0].witness);
        // A mention by key keeps it; a prune a crash cut short owes nothing.
        assert!(pruned(true, false, true).is_empty());
        assert!(pruned(false, false, false).is_empty());
    }

    #[test]
    fn a_prune_that_deletes_what_it_did_not_list_is_caught() {
        use testkit::engine::HistoryBuilder;
        let p = "prune_deletes_only_listed_blobs";
        // Run r: an ok agent terminal naming its checkpoint r/ckpt/0, whose blob was put and
        // (`gone`) deleted again by an earlier prune; then a prune under a brief lease that
        // loads the journal, (`lists`) lists the blobs, reaches its mark and deletes the
        // checkpoint.
        let pruned = |gone: bool, lists: bool| {
            let mut h = HistoryBuilder::engine_run();
            let a = spent_checkpoint(&mut h);
            if gone {
                h.blob_delete(1, Some(&a), "r", "r/ckpt/0");
            }
            let b = h.acquire(0, "op", "r", 2);
            prune_reads(&mut h, if lists { &[OpKind::Load, OpKind::BlobList] } else { &[OpKind::Load] });
            h.mark(0, "engine.prune.before_delete", "r", Some(2));
            h.blob_delete(0, Some(&b), "r", "r/ckpt/0");
            h.push(0, OpKind::Release, "r", Some(b), Args::default(), None);
            h.judge(p)
        };
        assert!(pruned(false, true).is_empty());
        let v = pruned(true, true);
        assert_eq!(v.len(), 1, "{v:?}");
        assert!(v[0].witness.contains("did not hold that ref"), "{}", v[0].witness);
        let v = pruned(false, false);
        assert_eq!(v.len(), 1, "{v:?}");
        assert!(v[0].witness.contains("listed no blobs"), "{}", v[0].witness);
    }

    #[test]
    fn a_prune_whose_count_is_not_its_deletes_is_caught() {
        use testkit::engine::HistoryBuilder;
        let p = "a_prune_counts_what_it_deleted";
        // A spent checkpoint r/ckpt/0; a prune that lists, marks, deletes it and returns
        // `said` (the operator's `Pruned` fact, when `said` is some), then releases.
        // The same prune whose delete was `refused` (busy), going on to return its count.
        let pruned_after = |refused: bool, said: Option<u64>| {
            let mut h = HistoryBuilder::engine_run();
            spent_checkpoint(&mut h);
            let b = h.acquire(0, "op", "r", 2);
            prune_reads(&mut h, &[OpKind::Load, OpKind::BlobList]);
            h.mark(0, "engine.prune.before_delete", "r", Some(2));
            h.blob_delete(0, Some(&b), "r", "r/ckpt/0");
            if refused {
                h.h.calls.last_mut().unwrap().outcome =
                    crate::history::Outcome::Err { code: "busy".into(), message: String::new() };
            }
            if let Some(n) = said {
                h.fact(0, "op", FactKind::Pruned { run_id: "r".into(), deleted: n });
            }
            h.push(0, OpKind::Release, "r", Some(b), Args::default(), None);
            h.judge(p)
        };
        let pruned = |said| pruned_after(false, said);
        assert!(pruned(Some(1)).is_empty());
        assert!(pruned(None).is_empty());
        for wrong in [0, 2] {
            let v = pruned(Some(wrong));
            assert_eq!(v.len(), 1, "{v:?}");
            assert!(v[0].witness.contains(&format!("returned {wrong} deleted")), "{}", v[0].witness);
            assert!(v[0].witness.contains("made 1 blob delete"), "{}", v[0].witness);
        }
        assert!(pruned_after(true, None).is_empty());
        let v = pruned_after(true, Some(0));
        assert_eq!(v.len(), 1, "{v:?}");
        assert!(v[0].witness.contains("was refused (busy)"), "{}", v[0].witness);
    }

    #[test]
    fn deleting_a_suspended_run_is_caught() {
        let delete = |leased: bool| {
            let mut d = call(1, OpKind::Delete, Args::default());
            d.lease = leased.then(|| testkit::lease("worker", 2));
            d
        };
        let v = judge(vec![meta(0, "suspended"), delete(true)], only_terminal_runs_deleted);
        assert_eq!(v.len(), 1, "{v:?}");
        assert!(v[0].witness.contains("meta was suspended"), "{}", v[0].witness);
        assert!(judge(vec![meta(0, "ok"), delete(true)], only_terminal_runs_deleted).is_empty());
        // Without a lease nothing held the run between the deleter's read and its delete: a
        // resume may have booted it meanwhile, so the delete is not judged by the status.
        assert!(judge(vec![meta(0, "suspended"), delete(false)], only_terminal_runs_deleted).is_empty());
        // A delete that finishes a deletion another identity began (its record names the
        // meta's generation) is that identity's decision; the deleter's own record is not.
        let record = |actor: &str, bytes: &[u8]| {
            let args = Args { blob_ref: Some("r".into()), bytes: Some(bytes.to_vec()), ..Args::default() };
            let mut c = call(1, OpKind::BlobPut, args);
            c.args.actor = Some(actor.into());
            c
        };
        let finish = || {
            let mut d = call(2, OpKind::Delete, Args::default());
            d.lease = Some(testkit::lease("worker", 2));
            d
        };
        let mut running = meta(0, "running");
        running.args.payload = Some(json!({"runId": "r", "status": "running", "genesis": "g1"}).to_string());
        let finished =
            judge(vec![running.clone(), record("host", b"g1"), finish()], only_terminal_runs_deleted);
        assert!(finished.is_empty(), "{finished:?}");
        let mut own = record("worker", b"g1");
        own.id = 2;
        own.applied.as_mut().expect("applied").order = 2;
        let mut late = finish();
        late.id = 3;
        late.applied.as_mut().expect("applied").order = 3;
        let both = judge(vec![running.clone(), record("host", b"g1"), own, late], only_terminal_runs_deleted);
        assert!(both.is_empty(), "the host's record, then the finishing cascade's own: {both:?}");
        let v = judge(vec![running.clone(), record("worker", b"g1"), finish()], only_terminal_runs_deleted);
        assert_eq!(v.len(), 1, "the deleter's own record: {v:?}");
        let v = judge(vec![running, record("host", b"g0"), finish()], only_terminal_runs_deleted);
        assert_eq!(v.len(), 1, "a record of another generation: {v:?}");
    }

    #[test]
    fn a_run_deleted_as_its_deleter_read_it_under_the_lease_is_lawful() {
        use testkit::engine::HistoryBuilder;
        let p = "only_terminal_runs_deleted";
        // Run r left running by a holder that is gone; a host takes a brief lease
        // (`granted`), reads the meta (`read`: whether it reads it after the grant), and
        // deletes the run; `retention` marks the lease as a retention worker's.
        let stuck = |read: bool, retention: bool, changed: bool| {
            let mut h = HistoryBuilder::engine_run();
            let a = h.acquire(1, "host-a", "r", 1);
            h.meta(1, Some(&a), "r", store::RunStatus::Running, 1);
            let b = h.acquire(0, "host-b", "r", 2);
            if read {
                h.read_meta(0, "host-b", "r");
                let m = testkit::meta_record("r", store::RunStatus::Running);
                h.h.calls.last_mut().expect("just read").read = Some(Read::Meta(Some(m)));
            }
            if retention {
                h.mark(0, "worker.retention.after_acquire", "r", Some(2));
            }
            if changed {
                h.meta(0, Some(&b), "r", store::RunStatus::Suspended, 1);
            }
            h.delete(0, Some(&b), "r");
            for c in h.h.calls.iter_mut().filter(|c| c.node == 0) {
                c.args.actor = Some("host-b".into());
            }
            h.judge(p)
        };
        assert!(stuck(true, false, false).is_empty(), "{:?}", stuck(true, false, false));
        assert_eq!(stuck(false, false, false).len(), 1, "no read under the lease: judged by status");
        assert_eq!(stuck(true, true, false).len(), 1, "retention deletes only terminal runs");
        assert_eq!(stuck(true, false, true).len(), 1, "the status changed since the read");
    }

    #[test]
    fn a_sweep_resuming_a_run_that_settled_since_its_listing_is_caught() {
        // A host cancelled the run (unleased here), then the sweep's segment boots it.
        let sweep = |before: &str, mark: bool| {
            let mut boot = meta(1, "running");
            boot.lease = Some(testkit::lease("worker", 3));
            let mut settle = meta(2, "cancelled");
            settle.lease = boot.lease.clone();
            let calls = vec![meta(0, before), boot, settle];
            let h = History {
                applied_count: calls.len(),
                calls,
                marks: if mark {
                    vec![crate::history::Mark {
                        point: "worker.sweep.after_acquire",
                        node: 0,
                        incarnation: 0,
                        run_id: "r".into(),
                        epoch: Some(3),
                        applied_before: 1,
                        invoked_before: 1,
                    }]
                } else {
                    Vec::new()
                },
                ..History::default()
            };
            testkit::judge(&h, sweeps_resume_only_live_runs)
        };
        let v = sweep("cancelled", true);
        assert_eq!(v.len(), 1, "{v:?}");
        assert!(v[0].witness.contains("over a cancelled meta"), "{}", v[0].witness);
        // A suspended run is the sweep's to resume, and its own settle that follows the boot
        // is not a resume.
        assert!(sweep("suspended", true).is_empty());
        assert!(sweep("running", true).is_empty());
        // Without the sweep's mark the segment is a host's (a retry of a finished run).
        assert!(sweep("cancelled", false).is_empty());
    }

    #[test]
    fn a_sweep_skipping_a_run_whose_suspension_was_answered_is_caught() {
        use testkit::engine::{op_entry, HistoryBuilder};
        fn load(h: &mut HistoryBuilder) {
            let mut c = testkit::call(h.h.calls.len(), OpKind::Load);
            c.run_id = "r".into();
            c.seen_at = Some(h.h.applied_count);
            h.h.calls.push(c);
        }
        // The worker parked r at its open suspension and its sweep skips it under epoch 2;
        // `resolved`: a resolver answered the suspension, `seen`: before the sweep's load.
        let skip = |resolved: bool, seen: bool| {
            let mut h = HistoryBuilder::engine_run();
            let parked = h.acquire(0, "worker", "r", 1);
            h.append(0, &parked, "r", op_entry(0, "external", "await:k", "suspended", None));
            h.meta(0, Some(&parked), "r", store::RunStatus::Suspended, 1);
            let sweep = h.acquire(0, "worker", "r", 2);
            if !seen {
                load(&mut h);
            }
            if resolved {
                let resolver = h.acquire(1, "resolver", "r", 3);
                h.append(1, &resolver, "r", op_entry(1, "resolution", "await:k", "ok", Some(0)));
            }
            if seen {
                load(&mut h);
            }
            h.mark(0, "worker.sweep.skip_parked", "r", Some(sweep.epoch.0));
            h.judge("sweeps_skip_only_blocked_runs")
        };
        let v = skip(true, true);
        assert_eq!(v.len(), 1, "{v:?}");
        assert!(
            v[0].witness.contains("no open suspension (answered: resolution of seq 0)"),
            "{}",
            v[0].witness
        );
        // Still blocked: skipping it is what the park is for.
        assert!(skip(false, true).is_empty());
        // The load returned before the resolution landed: the sweep skipped what it saw blocked.
        assert!(skip(true, false).is_empty());
    }

    #[test]
    fn pruning_a_live_or_mentioned_checkpoint_is_caught() {
        let running = json!({"seq": 3, "kind": "agent", "status": "running", "key": "op:0:a"});
        let ok = json!({"seq": 4, "kind": "agent", "status": "ok", "key": "op:0:a", "ref": 3, "checkpointRef": "r/ckpt/3"});
        // The dispatch is still running: its checkpoint is live.
        let v =
            judge(vec![entry(0, running.clone()), blob_delete(1, "r/ckpt/3")], prune_only_spent_checkpoints);
        assert_eq!(v.len(), 1, "{v:?}");
        // Spent: the ok terminal names it and nothing else does.
        assert!(judge(
            vec![entry(0, running.clone()), entry(1, ok.clone()), blob_delete(2, "r/ckpt/3")],
            prune_only_spent_checkpoints
        )
        .is_empty());
        // Another entry mentions it.
        let other =
            json!({"seq": 5, "kind": "decision", "status": "ok", "key": "k", "value": {"see": "r/ckpt/3"}});
        let v = judge(
            vec![entry(0, running), entry(1, ok), entry(2, other), blob_delete(3, "r/ckpt/3")],
            prune_only_spent_checkpoints,
        );
        assert_eq!(v.len(), 1, "{v:?}");
        assert!(v[0].witness.contains("seq 5 still mentions it"), "{}", v[0].witness);
        // A mention as an object key keeps it too (the keep rule reads keys).
        let keyed =
            json!({"seq": 5, "kind": "decision", "status": "ok", "key": "k", "value": {"r/ckpt/3": 1}});
        let running = json!({"seq": 3, "kind": "agent", "status": "running", "key": "op:0:a"});
        let ok = json!({"seq": 4, "kind": "agent", "status": "ok", "key": "op:0:a", "ref": 3, "checkpointRef": "r/ckpt/3"});
        let v = judge(
            vec![entry(0, running), entry(1, ok), entry(2, keyed), blob_delete(3, "r/ckpt/3")],
            prune_only_spent_checkpoints,
        );
        assert_eq!(v.len(), 1, "{v:?}");
    }

    #[test]
    fn a_drive_finishing_another_identitys_deletion_is_not_a_prune_even_when_cut() {
        use testkit::engine::{op_entry, HistoryBuilder};
        let p = "prune_only_spent_checkpoints";
        // Run r, generation g, running with a live dispatch and its checkpoint; a host put the
        // deletion record (`by`: naming `names`), and a worker's drive, finishing the
        // deletion, deletes the checkpoint before a takeover cuts its cascade.
        let cut = |by: &str, names: &str| {
            let mut h = HistoryBuilder::engine_run();
            let a = h.acquire(1, "host", "r", 1);
            h.meta_with(1, Some(&a), "r", store::RunStatus::Running, 1, json!({"genesis": "g"}));
            h.append(1, &a, "r", op_entry(0, "agent", "op:0:a", "running", None));
            h.ckpt(1, &a, "r", 0, 1);
            let record_node = if by == "host" { 1 } else { 0 };
            h.deletion_record(record_node, None, "r", names.as_bytes());
            if let Some(c) = h.h.calls.last_mut() {
                c.args.actor = Some(by.into());
            }
            let w = h.acquire(0, "worker", "r", 2);
            h.blob_delete(0, Some(&w), "r", "r/ckpt/0");
            if let Some(c) = h.h.calls.last_mut() {
                c.args.actor = Some("worker".into());
            }
            h.judge(p)
        };
        assert!(cut("host", "g").is_empty(), "{:?}", cut("host", "g"));
        // A record of another generation, or only the deleter's own: a prune of a live checkpoint.
        assert_eq!(cut("host", "h").len(), 1);
        assert_eq!(cut("worker", "g").len(), 1);
    }

    #[test]
    fn a_retention_cascade_cut_short_by_a_crash_is_not_a_prune() {
        use store::{Epoch, Lease};
        let running = json!({"seq": 0, "kind": "agent", "status": "running", "key": "op:0:a"});
        let mut delete = blob_delete(1, "r/ckpt/0");
        delete.lease = Some(Lease { run_id: "r".into(), owner: "worker".into(), epoch: Epoch(2) });
        let calls = vec![entry(0, running), delete];
        let h = History {
            applied_count: calls.len(),
            calls,
            marks: vec![crate::oracle::testkit::mark("worker.retention.after_acquire", 2, 1)],
            ..History::default()
        };
        let fin = FinalState::default();
        let j = Judged::build(&h, &fin, Expect::default());
        let mut out = Vec::new();
        prune_only_spent_checkpoints(&j, &mut out);
        assert!(out.is_empty(), "{out:?}");
        // The same delete without the retention mark is a prune of a live checkpoint.
        let h = History { marks: Vec::new(), ..h };
        let j = Judged::build(&h, &fin, Expect::default());
        prune_only_spent_checkpoints(&j, &mut out);
        assert_eq!(out.len(), 1);
    }

    #[test]
    fn a_delete_run_cascade_cut_by_a_crash_is_judged_by_the_run_status() {
        use store::{Epoch, Lease};
        let running = json!({"seq": 0, "kind": "agent", "status": "running", "key": "op:0:a"});
        let cut = |status: &str| {
            let mut delete = blob_delete(2, "r/ckpt/0");
            delete.lease = Some(Lease { run_id: "r".into(), owner: "host".into(), epoch: Epoch(4) });
            let calls = vec![entry(0, running.clone()), meta(1, status), delete];
            History {
                applied_count: calls.len(),
                calls,
                marks: vec![crate::history::Mark {
                    point: "engine.delete.before_blobs",
                    node: 0,
                    incarnation: 0,
                    run_id: "r".into(),
                    epoch: Some(4),
                    applied_before: 2,
                    invoked_before: 2,
                }],
                ..History::default()
            }
        };
        let fin = FinalState::default();
        let judged = |h: &History| {
            let j = Judged::build(h, &fin, Expect::default());
            let mut out = Vec::new();
            prune_only_spent_checkpoints(&j, &mut out);
            out
        };
        // A terminal run's deletion, cut after its blobs: lawful, not a prune.
        assert!(judged(&cut("ok")).is_empty());
        // The same cascade over a running run deleted a live checkpoint.
        let v = judged(&cut("running"));
        assert_eq!(v.len(), 1, "{v:?}");
        assert!(
            v[0].witness.contains("deletion cascade while the run's meta was running"),
            "{}",
            v[0].witness
        );
        // Without the cascade's mark, a terminal run's unspent checkpoint delete is a prune.
        let h = History { marks: Vec::new(), ..cut("ok") };
        assert_eq!(judged(&h).len(), 1);
        // A host's unleased deleteRun: the mark and the blob delete carry no lease.
        let mut h = cut("ok");
        h.calls[2].lease = None;
        h.marks[0].epoch = None;
        assert!(judged(&h).is_empty());
        // An unleased deleteRun of a run the user saw stuck running: the host's decision.
        let mut stuck = cut("running");
        stuck.calls[2].lease = None;
        stuck.marks[0].epoch = None;
        assert!(judged(&stuck).is_empty());
        // A mark after the blob delete does not make it a deletion's.
        h.marks[0].applied_before = 3;
        assert_eq!(judged(&h).len(), 1);
        // Another cascade deleted the run meanwhile (no meta: no live generation); the cut
        // cascade's late blob delete meets a dead generation's leftover, not a live checkpoint.
        let mut h = cut("ok");
        let mut gone = testkit::call(2, OpKind::Delete);
        gone.run_id = "r".into();
        let mut late = blob_delete(3, "r/ckpt/0");
        late.lease = h.calls[2].lease.clone();
        h.calls = vec![h.calls[0].clone(), h.calls[1].clone(), gone, late];
        h.applied_count = 4;
        assert!(judged(&h).is_empty(), "{:?}", judged(&h));
        // The same late delete over a generation a retry booted since is still caught.
        h.calls[2] = meta(2, "running");
        assert_eq!(judged(&h).len(), 1);
    }
}
