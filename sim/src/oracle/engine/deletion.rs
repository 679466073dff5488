//! The deletion family: deleting a run respects its holder and leaves nothing behind. No
//! deletion under a lease removes a run another holder's live grant owns, an engine
//! cascade leaves none of the run's blobs, and a deleted run is never written again unless
//! its host submitted or explicitly resumed it since.
//!
//! Each property is judged from the apply-ordered history and the engine facts, under the
//! holder and generation rules of [`super`].

use std::collections::BTreeMap;

use super::super::contract::{is_deletion_record_put, names_generation, record_names, run_of_ref, MetaView};
use super::super::model::{t, walk_grants, who, Judged};
use super::super::{Expectation, Property, Witness};
use super::*;
use crate::history::{Call, FactKind, Mark, OpKind, Read};
use crate::verdict::RetentionRule;

/// The mark that says which engine deletion cascade of node `n` (incarnation `i`) made the
/// journal delete `c`: the nearest before it of the retention's brief lease
/// (`worker.retention.after_acquire`) and a host cascade's (`engine.delete.after_blobs`).
/// `None`: no cascade (a bare store delete).
fn cascade_mark<'h>(j: &Judged<'h>, c: &Call) -> Option<&'h Mark> {
    let before = order(c);
    j.history.marks.iter().rev().find(|m| {
        m.node == c.node
            && m.incarnation == c.incarnation
            && m.run_id == c.run_id
            && m.applied_before <= before
            && matches!(m.point, "engine.delete.after_blobs" | "worker.retention.after_acquire")
    })
}

/// The epoch an engine deletion cascade acts under when its journal delete carries no lease
/// (see [`cascade_mark`]). `None`: no cascade, or one without a lease (a host decision).
fn cascade_epoch(j: &Judged, c: &Call) -> Option<u64> {
    cascade_mark(j, c).and_then(|m| m.epoch)
}

pub const NO_LIVE_RUN_DELETED: Property = Property {
        name: "no_live_run_deleted",
        expectation: Expectation::Always,
        claim: "No deletion made under a lease (its own, or the engine cascade's brief lease it did not pass on) removes a run while another holder's grant of it is live and unreleased.",
        not_checked: "Deletions under no lease outside an engine cascade (a host decision), and runs nobody holds.",
        check: no_live_run_deleted,
};

fn no_live_run_deleted(j: &Judged, out: &mut Vec<Witness>) {
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
            out.push(Witness {
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

pub const RETENTION_DELETES_WHAT_ITS_RULE_SELECTS: Property = Property {
        name: "retention_deletes_what_its_rule_selects",
        expectation: Expectation::Always,
        claim: "A queue worker's retention delete removes only a run whose meta, as the accepted writes left it when the delete applied, is terminal and selected by the retention rule the scenario declares (its id prefix; a completed run of more than one segment kept when the rule keeps retried runs).",
        not_checked: "Retention deletes of a run with no meta at that instant (no record is removed), a meta the oracle cannot read, and scenarios that declare no rule.",
        check: retention_deletes_what_its_rule_selects,
};

/// The oracle's own reading of a declared retention rule over a meta record.
fn rule_selects(rule: RetentionRule, m: &MetaView) -> bool {
    let retried = m.status == Status::Ok && m.segments.unwrap_or(1) > 1;
    m.run_id.starts_with(rule.id_prefix) && !(rule.keep_completed_retried && retried)
}

fn retention_deletes_what_its_rule_selects(j: &Judged, out: &mut Vec<Witness>) {
    let Some(rule) = j.expect.retention else { return };
    let mut meta: BTreeMap<&str, &Call> = BTreeMap::new();
    for &c in &j.applied {
        match c.op {
            OpKind::PutMeta => {
                meta.insert(c.run_id.as_str(), c);
            }
            OpKind::Delete => {
                let last = meta.remove(c.run_id.as_str());
                if cascade_mark(j, c).is_none_or(|m| m.point != "worker.retention.after_acquire") {
                    continue;
                }
                let Some((w, m)) = last.and_then(|w| Some((w, meta_of(w)?))) else { continue };
                let why = if !m.status.is_terminal() {
                    "it is not terminal"
                } else if !rule_selects(rule, &m) {
                    "the scenario's retention rule keeps it"
                } else {
                    continue;
                };
                out.push(Witness {
                    witness: format!(
                        "{}'s retention delete of run {} at t={} removed it while its meta, as {}'s write at t={} left it, is {} (segments {}): {why}",
                        who(c),
                        c.run_id,
                        t(Judged::applied_ns(c)),
                        who(w),
                        t(Judged::applied_ns(w)),
                        m.status,
                        m.segments.map_or("none".to_string(), |n| n.to_string()),
                    ),
                    op: Some(c.op.as_str()),
                    call: Some(c.id),
                });
            }
            _ => {}
        }
    }
}

pub const DELETED_RUN_LEAVES_NO_BLOBS: Property = Property {
        name: "deleted_run_leaves_no_blobs",
        expectation: Expectation::Always,
        claim: "When an engine deletion cascade's journal delete applies, none of the run's blobs remain (a recreated run id must not inherit a dead incarnation's checkpoints). Every journal delete of a run an engine host started is a cascade's: the engine deletes a run only through deleteRun's cascade (a host's delete, retention, a drive finishing a marked deletion), so one that skipped the blobs is judged too.",
        not_checked: "Bare store deletes of runs no engine host started (a bare store delete never touches blobs); blobs a lease holder put after an unleased host cascade listed the run's blobs (the host deleted a run someone held: its decision).",
        check: deleted_run_leaves_no_blobs,
};

fn deleted_run_leaves_no_blobs(j: &Judged, out: &mut Vec<Witness>) {
    let engine_runs = engine_runs(j);
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
                let marked = j
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
                if !marked && !engine_runs.contains(c.run_id.as_str()) && !listed_then_deleted(j, c) {
                    continue;
                }
                // A cascade under no lease at all (not retention's, not a host's leased one) is
                // a host's decision, as in `no_live_run_deleted`: a blob a lease holder put
                // after the cascade's listing of the run's blobs was not the cascade's to see.
                let listed_at = if c.lease.is_none() && cascade_epoch(j, c).is_none() {
                    j.history
                        .calls
                        .iter()
                        .filter(|l| {
                            l.op == OpKind::BlobList
                                && l.node == c.node
                                && l.incarnation == c.incarnation
                                && l.run_id == c.run_id
                                && l.invoked_ns <= c.invoked_ns
                                && l.outcome.is_ok()
                        })
                        .filter_map(|l| l.seen_at)
                        .max()
                } else {
                    None
                };
                let unseen = |put: &Call| listed_at.is_some_and(|at| put.lease.is_some() && order(put) >= at);
                let left: Vec<&str> = blobs
                    .iter()
                    .filter(|(r, put)| run_of_ref(r) == c.run_id && r.contains('/') && !unseen(put))
                    .map(|(r, _)| *r)
                    .collect();
                if !left.is_empty() {
                    out.push(Witness {
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

/// Whether the process of journal delete `c` listed the run's blobs (an ok `blob_list`)
/// since its own previous delete of the run: a deletion cascade, by its calls alone, whatever
/// order it then deleted in. Only a cascade lists a run's blobs and deletes its journal; the
/// marks of its fault points name the cascades that deleted in the contract's order, this
/// names the ones that did not.
fn listed_then_deleted(j: &Judged, c: &Call) -> bool {
    let same = |l: &&Call| l.node == c.node && l.incarnation == c.incarnation && l.run_id == c.run_id;
    let since = j
        .history
        .calls
        .iter()
        .filter(same)
        .filter(|l| l.op == OpKind::Delete && l.id < c.id)
        .map(|l| l.id)
        .max();
    j.history.calls.iter().filter(same).any(|l| {
        l.op == OpKind::BlobList && l.outcome.is_ok() && l.id < c.id && since.is_none_or(|s| l.id > s)
    })
}

pub const DELETED_RUN_STAYS_DELETED: Property = Property {
        name: "deleted_run_stays_deleted",
        expectation: Expectation::Always,
        claim: "After a run's journal delete applies, nothing writes the run again (journal, meta or blob) unless its host submitted or explicitly resumed it since: a deleted run is never resurrected by a worker or a stale holder. A resume asks as of its prepare's meta read, and also as of its re-read under the lease when both reads saw the run gone (a retry of a gone run recreates it; one absence is not told from another).",
        not_checked: "Runs no engine actor started; writes that were refused; a put of the bare ref `<run>` (not one of the run's blobs: no listing returns it, T3).",
        check: deleted_run_stays_deleted,
};

fn deleted_run_stays_deleted(j: &Judged, out: &mut Vec<Witness>) {
    let runs = engine_runs(j);
    if runs.is_empty() {
        return;
    }
    // When each run's host asked for it (a submission or an explicit resume), by apply count.
    // A resume asks as of the read it prepares from, its first meta read: a resume decided
    // before a deletion whose prepare saw the deletion resumes the run as it is then (a
    // user's retry of a run that is gone), so its intent counts from what that read saw. Its
    // re-read under the lease does not move the intent: a run that vanished since the prepare
    // is refused (docs/engine-model.md 1.2 and P), not brought back. Except where both reads
    // saw the run gone: a retry of a gone run recreates it, and an absence has no generation
    // to tell it from another (a run recreated and deleted again between the two reads is
    // gone as the prepare saw it), so such a resume asks as of its re-read as well.
    let mut intents: BTreeMap<&str, Vec<usize>> = BTreeMap::new();
    for f in &j.history.facts {
        match &f.kind {
            FactKind::Submitted { run_id, .. } => intents.entry(run_id).or_default().push(f.applied_before),
            FactKind::Resumed { run_id, .. } => {
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
                let reads: Vec<&Call> = j
                    .history
                    .calls
                    .iter()
                    .filter(mine)
                    .filter(|c| c.op == OpKind::GetMeta && c.id < first_write && c.outcome.is_ok())
                    .filter(|c| c.seen_at.is_some())
                    .collect();
                let read = reads.first().and_then(|c| c.seen_at);
                let asks = intents.entry(run_id).or_default();
                asks.push(read.map_or(f.applied_before, |r| r.max(f.applied_before)));
                let gone = |c: &&Call| matches!(c.read, Some(Read::Meta(None)));
                if let (Some(first), Some(last)) = (reads.first(), reads.last()) {
                    if reads.len() > 1 && gone(first) && gone(last) {
                        asks.extend(last.seen_at);
                    }
                }
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
                // A bare ref (no `/`) is not one of the run's blobs (T3: no listing returns
                // it): a straggling cascade's deletion record brings nothing of the run back.
                if c.op == OpKind::BlobPut && !c.args.blob_ref.as_deref().is_some_and(|r| r.contains('/')) {
                    continue;
                }
                let Some(&d) = deleted.get(run) else { continue };
                let (after, at) = (order(d) + 1, order(c));
                let asked = intents.get(run).is_some_and(|v| v.iter().any(|&a| a >= after && a <= at));
                if !asked {
                    out.push(Witness {
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

/// A put of the run's deletion record: the bare ref `<run>` (docs/engine-model.md 6.1), of a
/// run an engine actor started (a store-level workload's bare ref is a blob like another).
fn is_deletion_record(c: &Call, runs: &std::collections::BTreeSet<&str>) -> bool {
    is_deletion_record_put(c) && runs.contains(c.run_id.as_str())
}

/// Whether the engine writes deletion records at all in this history (an engine run's bare
/// ref was put): a profile without the record leaves the properties that rest on it nothing
/// to judge.
fn writes_deletion_records(j: &Judged, runs: &std::collections::BTreeSet<&str>) -> bool {
    j.history.calls.iter().any(|c| is_deletion_record(c, runs))
}

pub const DELETION_RECORD_PRECEDES_BLOB_DELETES: Property = Property {
        name: "deletion_record_precedes_blob_deletes",
        expectation: Expectation::Always,
        claim: "Where the engine writes deletion records, a deletion cascade whose meta read found a meta writes the run's deletion record (the bare ref `<run>`) naming that meta's generation (its `genesis`, the empty string for none) before its first blob delete: a cascade's blob delete (after its identity's `engine.delete.before_blobs` or `worker.retention.after_acquire` point) applies only after such a record by the same identity since its listing of the run's blobs; a cascade that read no meta owes the record of the meta the serial history held from its listing to that delete (docs/engine-model.md 6.1: a cascade cut from the record on leaves a run no resume boots; one cut before it must have deleted nothing).",
        not_checked: "Runs no engine actor started (a store-level workload's bare ref is not a deletion record); histories in which no deletion record was ever put (profiles without it: nothing to judge); a cascade whose meta read found no meta (no record is owed), or that made none while the run's meta was absent or changed generation between its listing and its first blob delete; blob deletes of another identity of the process, or a prune's.",
        check: deletion_record_precedes_blob_deletes,
};

fn deletion_record_precedes_blob_deletes(j: &Judged, out: &mut Vec<Witness>) {
    let runs = engine_runs(j);
    if !writes_deletion_records(j, &runs) {
        return;
    }
    let calls = &j.history.calls;
    let same = |a: &Call, b: &Call| {
        (a.node, a.incarnation) == (b.node, b.incarnation)
            && a.args.actor == b.args.actor
            && a.run_id == b.run_id
    };
    let mut judged: std::collections::BTreeSet<usize> = std::collections::BTreeSet::new();
    // Cascade writes are of engine runs only.
    for d in super::super::goals::cascade_writes(j).into_iter().filter(|c| c.op == OpKind::BlobDelete) {
        // The cascade's listing (its identity's last blob listing of the run before it) and
        // the meta read the cascade decided from (its last meta read of the run since).
        let Some(list) = calls[..d.id].iter().rev().find(|c| c.op == OpKind::BlobList && same(c, d)) else {
            continue;
        };
        if !judged.insert(list.id) {
            continue; // one judgment per cascade: at its first blob delete
        }
        // With none since the listing, a meta read the cascade made right after its blob
        // deletes (its next call on the run that is not one) decided the record too late.
        let read =
            calls[list.id..d.id].iter().rev().find(|c| c.op == OpKind::GetMeta && same(c, d)).or_else(|| {
                calls[d.id + 1..]
                    .iter()
                    .filter(|c| same(c, d))
                    .find(|c| c.op != OpKind::BlobDelete)
                    .filter(|c| c.op == OpKind::GetMeta)
            });
        // A cascade that read no meta at all owes the record all the same when the serial
        // history had the run's meta, of one generation, from its listing to the delete.
        let genesis: Option<String> = match read.map(|c| c.read.as_ref()) {
            Some(Some(Read::Meta(Some(meta)))) => meta.genesis.clone(),
            Some(_) => continue,
            None => {
                let at_list = list.seen_at.and_then(|at| meta_before(j, &d.run_id, at));
                let at_delete = meta_before(j, &d.run_id, order(d));
                match (at_list, at_delete) {
                    (Some(a), Some(b)) if a.genesis == b.genesis => b.genesis,
                    _ => continue,
                }
            }
        };
        let generation = genesis.as_deref();
        let record = |before: bool| {
            j.applied.iter().copied().find(|&w| {
                is_deletion_record(w, &runs)
                    && same(w, d)
                    && w.id > list.id
                    && (order(w) < order(d)) == before
                    && record_names(w, generation)
            })
        };
        if record(true).is_some() {
            continue;
        }
        let witness = match record(false) {
            Some(w) => format!(
                "{}'s deletion cascade of run {} deleted blob {} at t={} before writing the run's deletion record at t={}: a cascade cut between the two leaves a run with blobs gone and no record, which a resume boots",
                who(d),
                d.run_id,
                d.args.blob_ref.as_deref().unwrap_or("?"),
                t(Judged::applied_ns(d)),
                t(Judged::applied_ns(w)),
            ),
            None => format!(
                "{}'s deletion cascade of run {} deleted blob {} at t={} with no deletion record naming the generation {:?} its meta read found: a cascade cut from here leaves a run with blobs gone that a resume boots",
                who(d),
                d.run_id,
                d.args.blob_ref.as_deref().unwrap_or("?"),
                t(Judged::applied_ns(d)),
                generation.unwrap_or_default(),
            ),
        };
        out.push(Witness { witness, op: Some(d.op.as_str()), call: Some(d.id) });
    }
}

pub const A_GENERATION_HAS_A_NAME_OF_ITS_OWN: Property = Property {
    name: "a_generation_has_a_name_of_its_own",
    expectation: Expectation::Always,
    claim: "Where the engine writes deletion records, the first applied meta write of each generation of a run (its first ever, or its first after an applied delete of the run) carries a genesis, and one no earlier generation of the run carried: a deletion record names a generation by its genesis (the empty string for none), so a generation without a name of its own would be named by an earlier generation's record, refused as being deleted and deleted by a worker (docs/engine-model.md 5.3 and 6.1; a fresh start mints one, and so does a resume that recreates a run it found without meta).",
    not_checked: "Runs no engine actor started; histories in which no deletion record was ever put (profiles without it, where a recreated run boots with no genesis as rulvar's does); later meta writes of a generation (recorded_fields_carried holds them to its first).",
    check: a_generation_has_a_name_of_its_own,
};

fn a_generation_has_a_name_of_its_own(j: &Judged, out: &mut Vec<Witness>) {
    let runs = engine_runs(j);
    if !writes_deletion_records(j, &runs) {
        return;
    }
    // Per run: the geneses of its earlier generations, and whether the current one has
    // written its first meta yet.
    let mut earlier: BTreeMap<&str, Vec<Option<String>>> = BTreeMap::new();
    let mut named: BTreeMap<&str, Option<String>> = BTreeMap::new();
    for &c in j.applied.iter().filter(|c| runs.contains(c.run_id.as_str())) {
        let run = c.run_id.as_str();
        match c.op {
            OpKind::Delete => {
                if let Some(genesis) = named.remove(run) {
                    earlier.entry(run).or_default().push(genesis);
                }
            }
            OpKind::PutMeta if !named.contains_key(run) => {
                let Some(m) = meta_of(c) else { continue };
                let before = earlier.get(run).map_or(&[][..], Vec::as_slice);
                let complaint = match &m.genesis {
                    None => Some("carries no genesis".to_string()),
                    Some(g) if before.contains(&m.genesis) => {
                        Some(format!("carries genesis {g:?}, which an earlier generation of the run carried"))
                    }
                    Some(_) => None,
                };
                if let Some(complaint) = complaint {
                    out.push(
                        Witness::new(format!(
                            "run {run}: {}'s meta write ({}) at t={}, the first of generation {} of the run, {complaint}",
                            who(c),
                            m.status,
                            t(Judged::applied_ns(c)),
                            before.len() + 1
                        ))
                        .on(c.op, c.id),
                    );
                }
                named.insert(run, m.genesis);
            }
            _ => {}
        }
    }
}

pub const A_DELETION_RECORD_OUTLIVES_ITS_GENERATION: Property = Property {
    name: "a_deletion_record_outlives_its_generation",
    expectation: Expectation::Always,
    claim: "A run's deletion record (the bare ref `<run>`) is never deleted while the generation it names lives: no blob delete of it applies while the run's meta, in the serial history as of that delete, is a meta whose genesis the record holds (docs/engine-model.md 6.1: the record is what keeps a resume from booting a generation a cut cascade left, so it may go only once the journal delete has ended that generation, or a later generation has replaced it).",
    not_checked: "Runs no engine actor started; deletes of the record after the run's delete or under another generation (harmless: no meta it names is left); deletes with no apply position.",
    check: a_deletion_record_outlives_its_generation,
};

fn a_deletion_record_outlives_its_generation(j: &Judged, out: &mut Vec<Witness>) {
    let runs = engine_runs(j);
    let ix = j.index();
    for &c in &j.applied {
        let run = c.run_id.as_str();
        if c.op != OpKind::BlobDelete || c.args.blob_ref.as_deref() != Some(run) || !runs.contains(run) {
            continue;
        }
        let Some(at) = c.applied.as_ref().map(|a| a.order) else { continue };
        let before = ix.recorded_before(run, at);
        let Some(record) = before.iter().rev().find(|d| is_deletion_record_put(d)) else { continue };
        let Some(meta) = meta_before(j, run, at) else { continue };
        if !record_names(record, meta.genesis.as_deref()) {
            continue;
        }
        out.push(
            Witness::new(format!(
                "run {run}: {} deleted the run's deletion record at t={} while the generation it names ({}, put by {} at t={}) still had its meta ({}, segments {:?})",
                who(c),
                t(Judged::applied_ns(c)),
                meta.genesis.as_deref().map_or("no genesis".to_string(), |g| format!("genesis {g:?}")),
                who(record),
                t(Judged::applied_ns(record)),
                meta.status,
                meta.segments,
            ))
            .on(c.op, c.id),
        );
    }
}

pub const NO_BOOT_OF_A_RECORDED_GENERATION: Property = Property {
        name: "no_boot_of_a_recorded_generation",
        expectation: Expectation::Always,
        claim: "Once a run's deletion record (the bare ref `<run>`) names the generation of its meta (the meta's `genesis`; an empty record names a meta without one), no segment booted under a lease granted after that writes a meta raising the run's segments (docs/engine-model.md 6.1: a resume refuses such a run before any write, both of an owned resume's reads check the record, and only a deletion finishes it).",
        not_checked: "Runs no engine actor started; profiles that write no deletion record (nothing to judge); a boot under a lease granted before the record applied (the resume's reads came before it: the cascade's lease is what fences that race); a meta or record the oracle cannot read.",
        check: no_boot_of_a_recorded_generation,
};

fn no_boot_of_a_recorded_generation(j: &Judged, out: &mut Vec<Witness>) {
    let runs = engine_runs(j);
    let mut meta: BTreeMap<&str, MetaView> = BTreeMap::new();
    let mut record: BTreeMap<&str, &Call> = BTreeMap::new();
    // Per (run, epoch) granted while a record named the meta's generation: that record, and
    // the meta's segments at the grant.
    let mut marked: BTreeMap<(&str, u64), (&Call, u64)> = BTreeMap::new();
    for &c in &j.applied {
        let run = c.run_id.as_str();
        match c.op {
            OpKind::BlobPut if is_deletion_record(c, &runs) => {
                record.insert(run, c);
            }
            OpKind::Delete => {
                meta.remove(run);
            }
            OpKind::Acquire => {
                let Some(g) = &c.granted else { continue };
                let named = match (meta.get(run), record.get(run)) {
                    (Some(m), Some(r)) => {
                        record_names(r, m.genesis.as_deref()).then(|| (*r, m.segments.unwrap_or(0)))
                    }
                    _ => None,
                };
                match named {
                    Some(n) => marked.insert((run, g.epoch.0), n),
                    None => marked.remove(&(run, g.epoch.0)),
                };
            }
            OpKind::PutMeta => {
                let Some(m) = meta_of(c) else { continue };
                let boot =
                    c.lease.as_ref().filter(|l| l.run_id == run).and_then(|l| marked.get(&(run, l.epoch.0)));
                if let Some(&(r, before)) = boot.filter(|(_, before)| m.segments.unwrap_or(0) > *before) {
                    out.push(Witness {
                        witness: format!(
                            "{}'s meta write at t={} booted run {} (segments {} -> {}) under a lease granted after {}'s deletion record at t={} named its generation {:?}: a resume must refuse a run being deleted",
                            who(c),
                            t(Judged::applied_ns(c)),
                            run,
                            before,
                            m.segments.unwrap_or(0),
                            who(r),
                            t(Judged::applied_ns(r)),
                            String::from_utf8_lossy(r.args.bytes.as_deref().unwrap_or_default()),
                        ),
                        op: Some(c.op.as_str()),
                        call: Some(c.id),
                    });
                }
                meta.insert(run, m);
            }
            _ => {}
        }
    }
}

pub const A_DRIVE_FINISHES_A_MARKED_DELETION: Property = Property {
        name: "a_drive_finishes_a_marked_deletion",
        expectation: Expectation::Always,
        claim: "A worker whose sweep acquired a run, read its meta under that lease and then read the run's deletion record naming that meta's generation (a deletion cascade began on it and was cut) deletes the run before it releases the lease: only a deletion finishes a marked run, and its drive is the one holder left to do it, whether or not the worker has a retention duty (docs/engine-model.md 5.3 and 6.1).",
        not_checked: "Drives one of whose calls on the run failed after the record read (the cascade may stop there), or whose process died before a release (the next holder inherits the duty); host and operator resumes (they refuse a marked run and leave it to a deletion); records or metas the oracle cannot read.",
        check: a_drive_finishes_a_marked_deletion,
};

fn a_drive_finishes_a_marked_deletion(j: &Judged, out: &mut Vec<Witness>) {
    let runs = engine_runs(j);
    let ix = j.index();
    for a in &j.history.calls {
        let (Some(lease), Some(owner)) = (&a.granted, a.args.actor.as_deref()) else { continue };
        if a.op != OpKind::Acquire || !a.outcome.is_ok() || !runs.contains(a.run_id.as_str()) {
            continue;
        }
        // A sweep's drive grant: its process passed the sweep's point after the acquire
        // under this epoch (retention's brief lease and an operator's pass other points).
        if !ix.marked("worker.sweep.after_acquire", a.node, a.incarnation, &a.run_id, Some(lease.epoch.0)) {
            continue;
        }
        let process = ix.of_process(a.node, a.incarnation);
        let tenure: Vec<&Call> = process[process.partition_point(|c| c.id <= a.id)..]
            .iter()
            .copied()
            .filter(|c| c.run_id == a.run_id && c.args.actor.as_deref() == Some(owner))
            .collect();
        let Some(end) =
            tenure.iter().position(|c| c.op == OpKind::Release && c.lease.as_ref() == Some(lease))
        else {
            continue;
        };
        let (tenure, release) = (&tenure[..end], tenure[end]);
        let mut genesis: Option<Option<&str>> = None;
        let mut found = None;
        for (k, c) in tenure.iter().enumerate() {
            match (&c.op, &c.read) {
                (OpKind::GetMeta, Some(Read::Meta(m))) => genesis = m.as_ref().map(|m| m.genesis.as_deref()),
                (OpKind::BlobGet, Some(Read::Blob(Some(bytes))))
                    if c.args.blob_ref.as_deref() == Some(a.run_id.as_str())
                        && genesis.is_some_and(|g| names_generation(bytes, g)) =>
                {
                    found = Some(k);
                    break;
                }
                _ => {}
            }
        }
        let Some(k) = found else { continue };
        let rest = &tenure[k + 1..];
        if rest.iter().any(|c| c.op == OpKind::Delete || !c.outcome.is_ok()) {
            continue;
        }
        let read = tenure[k];
        out.push(Witness {
            witness: format!(
                "run {}: {} acquired it in a sweep at t={} (epoch {}), read at t={} its deletion record naming the generation of the meta it read ({:?}), and released the lease at t={} without deleting the run",
                a.run_id,
                who(a),
                t(a.invoked_ns),
                lease.epoch.0,
                t(read.invoked_ns),
                genesis.flatten().unwrap_or_default(),
                t(release.invoked_ns),
            ),
            op: Some(read.op.as_str()),
            call: Some(read.id),
        });
    }
}

#[cfg(test)]
mod tests {

    use serde_json::{json, Value};
    use store::RunStatus;

    use crate::history::FactKind;
    use crate::oracle::testkit::engine::*;
    use crate::oracle::Expect;

    #[test]
    fn a_retention_delete_outside_the_declared_rule_is_caught() {
        use crate::verdict::RetentionRule;
        const RULE: RetentionRule = RetentionRule { id_prefix: "tmp-", keep_completed_retried: true };
        // A host's segment leaves the run's meta as given, then a retention cascade deletes it.
        let retention = |status: RunStatus, segments: u64, run: &str, point: &'static str| {
            let mut h = HistoryBuilder {
                expect: Expect { retention: Some(RULE), ..Expect::default() },
                ..HistoryBuilder::default()
            };
            let a = h.acquire(1, "host", run, 1);
            h.meta(1, Some(&a), run, status, segments);
            let w = h.acquire(0, "worker", run, 2);
            h.mark(0, point, run, Some(2));
            h.delete(0, Some(&w), run);
            h
        };
        let after_acquire = "worker.retention.after_acquire";
        // What the rule selects: a failed run, a run completed in its first segment.
        assert!(retention(RunStatus::Error, 1, "tmp-r", after_acquire).judge(RETENTION).is_empty());
        assert!(retention(RunStatus::Ok, 1, "tmp-r", after_acquire).judge(RETENTION).is_empty());
        assert!(retention(RunStatus::Error, 3, "tmp-r", after_acquire).judge(RETENTION).is_empty());
        // A completed run a retry got through, a run that is running again, a run of another
        // prefix: each kept by the rule.
        for (status, segments, run, why) in [
            (RunStatus::Ok, 2, "tmp-r", "the scenario's retention rule keeps it"),
            (RunStatus::Running, 1, "tmp-r", "it is not terminal"),
            (RunStatus::Ok, 1, "r", "the scenario's retention rule keeps it"),
        ] {
            let v = retention(status, segments, run, after_acquire).judge(RETENTION);
            assert_eq!(v.len(), 1, "{status:?} {segments} {run}: {v:?}");
            assert!(v[0].witness.contains(why), "{}", v[0].witness);
        }
        // The same delete made by a host's cascade is the user's decision, not retention's.
        assert!(retention(RunStatus::Ok, 2, "tmp-r", "engine.delete.after_blobs")
            .judge(RETENTION)
            .is_empty());
        // A rule that keeps no retried run deletes the completed one; no rule, nothing judged.
        let mut h = retention(RunStatus::Ok, 2, "tmp-r", after_acquire);
        h.expect.retention = Some(RetentionRule { keep_completed_retried: false, ..RULE });
        assert!(h.judge(RETENTION).is_empty());
        h.expect.retention = None;
        assert!(h.judge(RETENTION).is_empty());
    }

    const RETENTION: &str = "retention_deletes_what_its_rule_selects";

    #[test]
    fn a_deleted_run_written_again_without_a_resume_is_caught() {
        let mut h = HistoryBuilder::engine_run();
        let a = h.acquire(0, "a", "r", 1);
        h.meta(0, Some(&a), "r", RunStatus::Ok, 1);
        h.delete(0, Some(&a), "r");
        let b = h.acquire(1, "worker", "r", 2);
        h.meta(1, Some(&b), "r", RunStatus::Running, 1);
        let v = h.judge("deleted_run_stays_deleted");
        assert_eq!(v.len(), 1, "{v:?}");
        assert!(v[0].witness.contains("wrote it again with no submission or resume"), "{}", v[0].witness);

        // The same writes after the host's explicit resume are the user's retry.
        let mut h = HistoryBuilder::engine_run();
        let a = h.acquire(0, "a", "r", 1);
        h.meta(0, Some(&a), "r", RunStatus::Ok, 1);
        h.delete(0, Some(&a), "r");
        h.fact(2, "host", FactKind::Resumed { run_id: "r".into(), workflow: "happy".into() });
        let b = h.acquire(2, "host", "r", 2);
        h.meta(2, Some(&b), "r", RunStatus::Running, 1);
        assert!(h.judge("deleted_run_stays_deleted").is_empty());

        // A retry that prepared from the run as it was, before the delete, and wrote it after
        // the delete although its re-read under the lease saw it gone: a ghost. The same retry
        // whose prepare already saw it gone resumes a run that is gone, as the user asked.
        for (prepared_before, caught) in [(true, true), (false, false)] {
            let mut h = HistoryBuilder::engine_run();
            let a = h.acquire(0, "a", "r", 1);
            h.meta(0, Some(&a), "r", RunStatus::Error, 1);
            h.fact(2, "host", FactKind::Resumed { run_id: "r".into(), workflow: "happy".into() });
            if prepared_before {
                h.read_meta(2, "host", "r");
            }
            h.delete(0, Some(&a), "r");
            h.read_meta(2, "host", "r");
            let b = h.acquire(2, "host", "r", 2);
            h.read_meta(2, "host", "r");
            h.meta(2, Some(&b), "r", RunStatus::Running, 1);
            let v = h.judge("deleted_run_stays_deleted");
            assert_eq!(v.len(), usize::from(caught), "prepared before the delete: {prepared_before}: {v:?}");
        }
    }

    /// A worker's sweep acquires run `r` (epoch 2; `sweep`: its drive's point marked, not a
    /// retention or operator grant) whose deletion record names the meta's
    /// generation `g1`, reads the meta and then the record (as a drive's resume does), then
    /// `finish` (what it does under the lease), then releases; every call of the worker
    /// says who it is.
    fn marked_drive(
        sweep: bool,
        record: &[u8],
        finish: impl Fn(&mut HistoryBuilder, &store::Lease),
    ) -> HistoryBuilder {
        use crate::history::{Args, OpKind, Read};
        let mut h = HistoryBuilder::engine_run();
        let a = h.acquire(0, "host", "r", 1);
        h.meta_with(0, Some(&a), "r", RunStatus::Suspended, 1, serde_json::json!({"genesis": "g1"}));
        let args = Args { blob_ref: Some("r".into()), bytes: Some(b"g1".to_vec()), ..Args::default() };
        h.push(0, OpKind::BlobPut, "r", None, args, None);
        let from = h.h.calls.len();
        let b = h.acquire(1, "worker", "r", 2);
        if sweep {
            h.mark(1, "worker.sweep.after_acquire", "r", Some(2));
        }
        h.read_meta(1, "worker", "r");
        let meta = store::RunMeta {
            run_id: "r".into(),
            status: RunStatus::Suspended,
            updated_at: None,
            segments: Some(1),
            genesis: Some("g1".into()),
            name: None,
            tags: None,
            workflow_name: None,
            workflow_hash: None,
            workflow_source_ref: None,
            extra: Default::default(),
        };
        h.h.calls.last_mut().unwrap().read = Some(Read::Meta(Some(meta)));
        h.read_meta(1, "worker", "r");
        let get = h.h.calls.last_mut().unwrap();
        (get.op, get.args.blob_ref, get.read) =
            (OpKind::BlobGet, Some("r".into()), Some(Read::Blob(Some(record.to_vec()))));
        finish(&mut h, &b);
        h.push(1, OpKind::Release, "r", Some(b), Args::default(), None);
        for c in &mut h.h.calls[from..] {
            c.args.actor = Some("worker".into());
        }
        h
    }

    #[test]
    fn a_drive_that_releases_a_marked_run_without_deleting_it_is_caught() {
        let p = "a_drive_finishes_a_marked_deletion";
        let v = marked_drive(true, b"g1", |_, _| {}).judge(p);
        assert_eq!(v.len(), 1, "{v:?}");
        assert!(v[0].witness.contains("without deleting the run"), "{}", v[0].witness);
        // The drive that finishes the deletion under its lease; a record naming another
        // generation (the run is not marked); the same reads outside a sweep (an operator's
        // resume, which refuses and leaves it); a delete of the drive that failed.
        assert!(marked_drive(true, b"g1", |h, l| h.delete(1, Some(l), "r")).judge(p).is_empty());
        assert!(marked_drive(true, b"g0", |_, _| {}).judge(p).is_empty());
        assert!(marked_drive(false, b"g1", |_, _| {}).judge(p).is_empty());
        let failed = marked_drive(true, b"g1", |h, l| {
            h.blob_delete(1, Some(l), "r", "r/ckpt/1");
            h.h.calls.last_mut().unwrap().outcome =
                crate::history::Outcome::Err { code: "busy".into(), message: String::new() };
        });
        assert!(failed.judge(p).is_empty());
    }

    #[test]
    fn a_retry_of_a_gone_run_may_recreate_it_after_a_generation_came_and_went() {
        // The host's retry prepares from the run gone; another host's retry recreates it and
        // the user deletes it again; the first retry's re-read under its lease sees it gone as
        // its prepare did, and recreates it: the retry the user asked for, not a ghost. With
        // no re-read (or one that did not see it gone), the write follows the second delete
        // with no intent since: caught.
        for (reread_gone, caught) in [(true, false), (false, true)] {
            let mut h = HistoryBuilder::engine_run();
            let a = h.acquire(0, "a", "r", 1);
            h.meta(0, Some(&a), "r", RunStatus::Suspended, 1);
            h.delete(0, None, "r");
            h.fact(2, "host", FactKind::Resumed { run_id: "r".into(), workflow: "happy".into() });
            h.read_meta_gone(2, "host", "r");
            h.fact(0, "a", FactKind::Resumed { run_id: "r".into(), workflow: "happy".into() });
            let b = h.acquire(0, "a", "r", 2);
            h.meta(0, Some(&b), "r", RunStatus::Suspended, 1);
            h.delete(0, None, "r");
            let c = h.acquire(2, "host", "r", 3);
            if reread_gone {
                h.read_meta_gone(2, "host", "r");
            } else {
                h.read_meta(2, "host", "r");
            }
            h.meta(2, Some(&c), "r", RunStatus::Running, 1);
            let v = h.judge("deleted_run_stays_deleted");
            assert_eq!(v.len(), usize::from(caught), "re-read saw it gone: {reread_gone}: {v:?}");
        }
    }

    #[test]
    fn a_deletion_record_put_after_the_delete_is_not_a_resurrection_but_a_blob_is() {
        use crate::history::{Args, OpKind};
        let put = |h: &mut HistoryBuilder, r: &str| {
            let args = Args { blob_ref: Some(r.into()), bytes: Some(b"g1".to_vec()), ..Args::default() };
            h.push(1, OpKind::BlobPut, "r", None, args, None);
        };
        let mut h = HistoryBuilder::engine_run();
        let a = h.acquire(0, "a", "r", 1);
        h.meta(0, Some(&a), "r", RunStatus::Ok, 1);
        h.delete(0, Some(&a), "r");
        put(&mut h, "r"); // a straggling unleased cascade's record of the dead generation
        assert!(h.judge("deleted_run_stays_deleted").is_empty());
        put(&mut h, "r/ckpt/3");
        let v = h.judge("deleted_run_stays_deleted");
        assert_eq!(v.len(), 1, "{v:?}");
        assert!(v[0].witness.contains("blob_put"), "{}", v[0].witness);
    }

    /// A cascade of run `r` by node 1's host: its blob listing, then (in `order`) its record
    /// put and its blob delete of `r/ckpt/1`.
    fn cascade(record_first: bool) -> HistoryBuilder {
        use crate::history::{Args, OpKind};
        let mut h = HistoryBuilder::engine_run();
        let a = h.acquire(0, "a", "r", 1);
        h.meta_with(0, Some(&a), "r", RunStatus::Error, 1, serde_json::json!({"genesis": "g1"}));
        h.ckpt(0, &a, "r", 1, 1);
        h.push(1, OpKind::BlobList, "r", None, Args::default(), None);
        h.read_meta(1, "host", "r");
        h.h.calls.last_mut().expect("the read").args.actor = None;
        let mut seen = crate::oracle::testkit::meta_record("r", RunStatus::Error);
        seen.genesis = Some("g1".into());
        h.h.calls.last_mut().expect("the read").read = Some(crate::history::Read::Meta(Some(seen)));
        if record_first {
            h.deletion_record(1, None, "r", b"g1");
        }
        h.mark(1, "engine.delete.before_blobs", "r", None);
        h.blob_delete(1, None, "r", "r/ckpt/1");
        if !record_first {
            h.deletion_record(1, None, "r", b"g1");
        }
        h
    }

    #[test]
    fn a_cascade_that_reads_the_meta_after_its_blob_deletes_is_caught() {
        use crate::history::{Args, OpKind};
        let p = "deletion_record_precedes_blob_deletes";
        // Listing, blob delete, then the meta read and the record it decides (`late`); or a
        // meta read that found no meta before the delete, then the journal delete (lawful:
        // no record is owed, and the cascade's next call is no meta read).
        let run = |late: bool| {
            let mut h = HistoryBuilder::engine_run();
            let a = h.acquire(0, "a", "r", 1);
            h.meta_with(0, Some(&a), "r", RunStatus::Error, 1, serde_json::json!({"genesis": "g1"}));
            h.ckpt(0, &a, "r", 1, 1);
            h.push(1, OpKind::BlobList, "r", None, Args::default(), None);
            let read = |h: &mut HistoryBuilder, found: bool| {
                h.read_meta(1, "host", "r");
                let mut seen = crate::oracle::testkit::meta_record("r", RunStatus::Error);
                seen.genesis = Some("g1".into());
                let c = h.h.calls.last_mut().expect("the read");
                c.args.actor = None;
                c.read = Some(crate::history::Read::Meta(found.then_some(seen)));
            };
            if !late {
                read(&mut h, false);
            }
            h.mark(1, "engine.delete.before_blobs", "r", None);
            h.blob_delete(1, None, "r", "r/ckpt/1");
            if late {
                read(&mut h, true);
                h.deletion_record(1, None, "r", b"g1");
            } else {
                h.delete(1, None, "r");
                // Another run's record, so the property has something to judge.
                h.deletion_record(0, None, "q", b"");
            }
            h.judge(p)
        };
        let v = run(true);
        assert_eq!(v.len(), 1, "{v:?}");
        assert!(v[0].witness.contains("before writing the run's deletion record"), "{}", v[0].witness);
        assert!(run(false).is_empty());
    }

    #[test]
    fn a_cascade_that_reads_no_meta_owes_the_record_of_the_meta_the_history_held() {
        use crate::history::{Args, OpKind};
        let p = "deletion_record_precedes_blob_deletes";
        // Node 1's unleased cascade lists, deletes a checkpoint and the journal without any
        // meta read or record.
        let run = |with_meta: bool| {
            let mut h = HistoryBuilder::engine_run();
            // An earlier generation's record: the engine writes them.
            h.deletion_record(0, None, "r", b"g0");
            let a = h.acquire(0, "a", "r", 1);
            if with_meta {
                h.meta_with(0, Some(&a), "r", RunStatus::Error, 1, serde_json::json!({"genesis": "g1"}));
            }
            h.ckpt(0, &a, "r", 1, 1);
            h.push(1, OpKind::BlobList, "r", None, Args::default(), None);
            h.mark(1, "engine.delete.before_blobs", "r", None);
            h.blob_delete(1, None, "r", "r/ckpt/1");
            h.delete(1, None, "r");
            h.judge(p)
        };
        let v = run(true);
        assert_eq!(v.len(), 1, "{v:?}");
        assert!(v[0].witness.contains("no deletion record naming the generation \"g1\""), "{}", v[0].witness);
        // No meta in the history: no record is owed.
        assert!(run(false).is_empty());
    }

    #[test]
    fn a_blob_delete_before_the_deletion_record_is_caught() {
        let p = "deletion_record_precedes_blob_deletes";
        assert!(cascade(true).judge(p).is_empty());
        let v = cascade(false).judge(p);
        assert_eq!(v.len(), 1, "{v:?}");
        assert!(v[0].witness.contains("r/ckpt/1"), "{}", v[0].witness);
        // A record of another generation does not mark this one; with no record put at all
        // (a profile without it) nothing is judged.
        let mut h = cascade(false);
        for c in
            h.h.calls.iter_mut().filter(|c| {
                c.op == crate::history::OpKind::BlobPut && c.args.blob_ref.as_deref() == Some("r")
            })
        {
            c.args.bytes = Some(b"g0".to_vec());
        }
        let v = h.judge(p);
        assert_eq!(v.len(), 1, "{v:?}");
        assert!(v[0].witness.contains("no deletion record naming the generation \"g1\""), "{}", v[0].witness);
        // No record put at all (a profile without it): nothing to judge.
        let mut h = HistoryBuilder::engine_run();
        let a = h.acquire(0, "a", "r", 1);
        h.ckpt(0, &a, "r", 1, 1);
        h.push(1, crate::history::OpKind::BlobList, "r", None, Default::default(), None);
        h.read_meta(1, "host", "r");
        h.h.calls.last_mut().expect("the read").args.actor = None;
        let seen = crate::oracle::testkit::meta_record("r", RunStatus::Error);
        h.h.calls.last_mut().expect("the read").read = Some(crate::history::Read::Meta(Some(seen)));
        h.mark(1, "engine.delete.before_blobs", "r", None);
        h.blob_delete(1, None, "r", "r/ckpt/1");
        assert!(h.judge(p).is_empty());
        // A run no engine actor started: its bare ref is a blob like another (the soak's).
        let mut h = cascade(false);
        h.h.facts.clear();
        assert!(h.judge(p).is_empty());
        // Another node's blob delete (a prune elsewhere) is not this cascade's.
        let mut h = HistoryBuilder::engine_run();
        let a = h.acquire(0, "a", "r", 1);
        h.ckpt(0, &a, "r", 1, 1);
        h.push(1, crate::history::OpKind::BlobList, "r", None, Default::default(), None);
        h.blob_delete(0, Some(&a), "r", "r/ckpt/1");
        h.deletion_record(1, None, "r", b"");
        assert!(h.judge(p).is_empty());
    }

    #[test]
    fn a_boot_granted_after_the_record_named_its_generation_is_caught() {
        let p = "no_boot_of_a_recorded_generation";
        let boot = |h: &mut HistoryBuilder, genesis: &str| {
            let b = h.acquire(2, "b", "r", 2);
            h.meta_with(2, Some(&b), "r", RunStatus::Running, 2, serde_json::json!({"genesis": genesis}));
        };
        let mut h = cascade(true);
        boot(&mut h, "g1");
        let v = h.judge(p);
        assert_eq!(v.len(), 1, "{v:?}");
        assert!(v[0].witness.contains("\"g1\""), "{}", v[0].witness);
        h.h.facts.clear();
        assert!(h.judge(p).is_empty(), "a run no engine actor started");
        // Granted before the record: the race the cascade's lease fences, not the resume's.
        let mut h = HistoryBuilder::engine_run();
        let a = h.acquire(0, "a", "r", 1);
        h.meta_with(0, Some(&a), "r", RunStatus::Error, 1, serde_json::json!({"genesis": "g1"}));
        let b = h.acquire(2, "b", "r", 2);
        let args = crate::history::Args {
            blob_ref: Some("r".into()),
            bytes: Some(b"g1".to_vec()),
            ..Default::default()
        };
        h.push(1, crate::history::OpKind::BlobPut, "r", None, args, None);
        h.meta_with(2, Some(&b), "r", RunStatus::Running, 2, serde_json::json!({"genesis": "g1"}));
        assert!(h.judge(p).is_empty());
        // A record of an older generation names nothing: the run was deleted and submitted anew.
        let mut h = cascade(true);
        let c = h.acquire(1, "a", "r", 2);
        h.delete(1, Some(&c), "r");
        let d = h.acquire(0, "a", "r", 3);
        h.meta_with(0, Some(&d), "r", RunStatus::Error, 1, serde_json::json!({"genesis": "g2"}));
        boot(&mut h, "g2");
        assert!(h.judge(p).is_empty());
        // A meta without a genesis is named by an empty record.
        let mut h = HistoryBuilder::engine_run();
        let a = h.acquire(0, "a", "r", 1);
        h.meta(0, Some(&a), "r", RunStatus::Error, 1);
        h.deletion_record(1, None, "r", b"");
        let b = h.acquire(2, "b", "r", 2);
        h.meta(2, Some(&b), "r", RunStatus::Running, 2);
        assert_eq!(h.judge(p).len(), 1);
    }

    #[test]
    fn deleting_a_run_another_holder_owns_is_caught() {
        let mut h = HistoryBuilder::engine_run();
        let r = h.acquire(0, "retention", "r", 1);
        h.delete(0, Some(&r), "r");
        assert!(h.judge("no_live_run_deleted").is_empty(), "the holder may delete its own run");
        // A host decision under no lease is out of scope.
        let mut h = HistoryBuilder::engine_run();
        let _r = h.acquire(0, "retention", "r", 1);
        h.now_ms += TTL; // the brief lease lapses
        let _host = h.acquire(1, "host", "r", 2);
        h.delete(0, None, "r");
        assert!(h.judge("no_live_run_deleted").is_empty(), "an unleased host delete");
        // The same delete made by a retention cascade that did not pass its brief lease on.
        let mut h = HistoryBuilder::engine_run();
        let _r = h.acquire(0, "retention", "r", 1);
        h.mark(0, "worker.retention.after_acquire", "r", Some(1));
        h.now_ms += TTL;
        let _host = h.acquire(1, "host", "r", 2);
        h.delete(0, None, "r");
        let v = h.judge("no_live_run_deleted");
        assert_eq!(v.len(), 1, "{v:?}");
    }

    #[test]
    fn a_cascade_that_deletes_the_journal_before_the_blobs_is_caught_by_its_listing() {
        use crate::history::{Args, OpKind};
        // A cascade lists the run's blobs, then (out of order) deletes the journal while a
        // checkpoint is still stored: no fault-point mark names it a cascade.
        let cascade_of = |mut h: HistoryBuilder, list: bool| {
            let w = h.acquire(0, "w", "r", 1);
            h.ckpt(0, &w, "r", 3, 1);
            let d = h.acquire(1, "retention", "r", 2);
            if list {
                h.push(1, OpKind::BlobList, "r", None, Args::default(), None);
                // A read: it applies nothing.
                h.h.applied_count -= 1;
                h.h.calls.last_mut().expect("pushed").applied = None;
            }
            h.delete(1, Some(&d), "r");
            h
        };
        let cascade = |list: bool| cascade_of(HistoryBuilder::engine_run(), list);
        let v = cascade(true).judge("deleted_run_leaves_no_blobs");
        assert!(v.len() == 1 && v[0].witness.contains("r/ckpt/3"), "{v:?}");
        // The engine deletes a run only through a cascade, so a journal delete of a run an
        // engine host started is judged even with no listing and no cascade mark (a drive
        // that "finishes" a marked deletion with the journal delete alone).
        let v = cascade(false).judge("deleted_run_leaves_no_blobs");
        assert!(v.len() == 1 && v[0].witness.contains("r/ckpt/3"), "{v:?}");
        // A bare store delete of a run no engine host started is not a cascade: not judged
        // unless it listed the run's blobs since its process's previous delete of the run.
        assert!(cascade_of(HistoryBuilder::default(), false).judge("deleted_run_leaves_no_blobs").is_empty());
        let mut h = cascade_of(HistoryBuilder::default(), true);
        assert_eq!(h.judge("deleted_run_leaves_no_blobs").len(), 1, "a listed cascade is");
        // An older cascade's listing does not make a later bare delete a cascade.
        let w = h.acquire(0, "w", "r", 3);
        h.ckpt(0, &w, "r", 5, 1);
        let d = h.acquire(1, "retention", "r", 4);
        h.delete(1, Some(&d), "r");
        let v = h.judge("deleted_run_leaves_no_blobs");
        assert_eq!(v.len(), 1, "only the listed cascade is judged: {v:?}");
    }

    #[test]
    fn a_blob_a_holder_put_after_an_unleased_host_cascade_listed_the_run_is_not_a_leftover() {
        use crate::history::{Args, OpKind};
        // Host n1's unleased cascade lists the run's blobs and deletes the one it saw; then a
        // holder puts a checkpoint (under its lease, or under none); then the host's journal
        // delete applies with that put still stored.
        let cascade = |put_leased: bool| {
            let mut h = HistoryBuilder::engine_run();
            let w = h.acquire(0, "w", "r", 1);
            h.ckpt(0, &w, "r", 3, 1);
            h.push(1, OpKind::BlobList, "r", None, Args::default(), None);
            h.h.applied_count -= 1;
            h.h.calls.last_mut().expect("pushed").applied = None;
            let seen = Args { blob_ref: Some("r/ckpt/3".into()), ..Args::default() };
            h.push(1, OpKind::BlobDelete, "r", None, seen, None);
            let v = h.acquire(0, "w", "r", 2);
            h.ckpt(0, &v, "r", 5, 1);
            if !put_leased {
                h.h.calls.last_mut().expect("pushed").lease = None;
            }
            h.delete(1, None, "r");
            h
        };
        // The holder's put came after the listing: the host deleted a run someone held.
        assert!(cascade(true).judge("deleted_run_leaves_no_blobs").is_empty());
        // The exemption is that narrow: the same put made under no lease is a leftover.
        let v = cascade(false).judge("deleted_run_leaves_no_blobs");
        assert!(v.len() == 1 && v[0].witness.contains("r/ckpt/5"), "{v:?}");
    }

    #[test]
    fn a_generation_booted_without_a_genesis_of_its_own_is_caught() {
        let genesis = |g: &str| json!({ "genesis": g });
        let gen = |h: &mut HistoryBuilder, epoch: u64, more: Value| {
            let l = h.acquire(0, "w", "r", epoch);
            h.meta_with(0, Some(&l), "r", RunStatus::Running, 1, more.clone());
            h.meta_with(0, Some(&l), "r", RunStatus::Ok, 1, more);
            h.deletion_record(0, Some(&l), "r", b"g1");
            h.delete(0, Some(&l), "r");
        };
        let mut h = HistoryBuilder::engine_run();
        gen(&mut h, 1, genesis("g1"));
        gen(&mut h, 2, genesis("g2"));
        assert!(h.judge("a_generation_has_a_name_of_its_own").is_empty());
        // A recreation with no genesis, then one that reuses the first generation's.
        gen(&mut h, 3, json!({}));
        gen(&mut h, 4, genesis("g1"));
        let v = h.judge("a_generation_has_a_name_of_its_own");
        assert_eq!(v.len(), 2, "{v:?}");
        assert!(
            v[0].witness.contains("the first of generation 3 of the run, carries no genesis"),
            "{}",
            v[0].witness
        );
        assert!(v[1].witness.contains("genesis \"g1\", which an earlier generation"), "{}", v[1].witness);
        // Where no deletion record was ever put there is nothing to judge.
        let mut h = HistoryBuilder::engine_run();
        let l = h.acquire(0, "w", "r", 1);
        h.meta(0, Some(&l), "r", RunStatus::Running, 1);
        assert!(h.judge("a_generation_has_a_name_of_its_own").is_empty());
    }

    #[test]
    fn a_deletion_record_deleted_under_its_living_generation_is_caught() {
        let p = "a_deletion_record_outlives_its_generation";
        let mut h = HistoryBuilder::engine_run();
        let l = h.acquire(0, "w", "r", 1);
        h.meta_with(0, Some(&l), "r", RunStatus::Ok, 1, json!({ "genesis": "g1" }));
        h.deletion_record(0, Some(&l), "r", b"g1");
        h.blob_delete(0, Some(&l), "r", "r/ckpt/1");
        assert!(h.judge(p).is_empty());
        // The cascade clears its record before its journal delete: the generation lives on.
        h.blob_delete(0, Some(&l), "r", "r");
        let v = h.judge(p);
        assert_eq!(v.len(), 1, "{v:?}");
        assert!(v[0].witness.contains("generation it names (genesis \"g1\""), "{}", v[0].witness);
        // After the run's delete, or under a generation the record does not name, it may go.
        let mut h = HistoryBuilder::engine_run();
        let l = h.acquire(0, "w", "r", 1);
        h.meta_with(0, Some(&l), "r", RunStatus::Ok, 1, json!({ "genesis": "g1" }));
        h.deletion_record(0, Some(&l), "r", b"g1");
        h.delete(0, Some(&l), "r");
        let m = h.acquire(0, "w", "r", 2);
        h.blob_delete(0, Some(&m), "r", "r");
        h.meta_with(0, Some(&m), "r", RunStatus::Running, 1, json!({ "genesis": "g2" }));
        h.blob_delete(0, Some(&m), "r", "r");
        assert!(h.judge(p).is_empty());
    }
}
