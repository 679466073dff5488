//! The reconciler's operator probe (`runs audit --repair`), judged from the oracle's own
//! audit table ([`super::contract::audit`]), never by calling the reconciler. A repair is
//! a meta write under a brief lease its holder took for the probe (the
//! `engine.repair.after_acquire` mark names that lease). rulvar's probe repairs only the two
//! sound classes (`meta-behind`, `stranded`) toward the journal, reports the ambiguous
//! `suspect` runs and never rewrites them, never writes a consistent run, and rewrites only
//! `status` and `updatedAt`: every other meta field is kept byte for byte. It skips a live
//! owner rather than racing it (its acquire is refused; `lease_exclusive` and
//! `no_stale_accept` judge the lease itself).
//!
//! What the probe reports is judged too, from the reads it made: each `Audited` fact (the
//! verdict and repair target `runs audit` prints) must be the table applied to the meta row
//! and journal that audit read, and a repair under its brief lease must decide from what it
//! re-read under that lease. Reads are trusted here as returned; `reads_see_serial_history`
//! judges whether they were right.

use std::collections::BTreeMap;

use serde_json::Value;

use super::contract::{audit, entry_views, EntryView, MetaView, Status, Verdict};
use super::model::{t, who, Judged};
use super::{Expectation, Property, Witness};
use crate::history::{AuditedCounts, Call, FactKind, OpKind, Read};

pub const ALL: &[Property] = &[Property {
    name: "repair_is_sound",
    expectation: Expectation::Always,
    claim: "An audit repair rewrites a run's meta only when the run is meta-behind or stranded by the audit table, to the status the journal derives, changing nothing but status and updatedAt.",
    not_checked: "Whether the probe ran at all (a coverage matter); repairs by tools that do not mark their lease.",
    check: repair_is_sound,
}, Property {
    name: "audits_follow_the_decision_table",
    expectation: Expectation::Always,
    claim: "What the operator's audit reports of a run (its verdict and repair target) is the decision table (7.1) applied to the meta row and journal that audit read. A repair under its brief lease decides from what it re-read under that lease: it rewrites the meta exactly when the table names a repair and the run still has a meta row, to that status, and never without having read the journal under the lease. A whole-catalog census lists with no filter and reports each listed run exactly once.",
    not_checked: "Audits a crash cut short (no report, or a brief lease never released); whether the probe ran at all (a coverage matter); reads that failed (the audit then reports nothing).",
    check: audits_follow_the_decision_table,
}, Property {
    name: "repairs_write_under_their_lease",
    expectation: Expectation::Always,
    claim: "An audit repair writes a run's meta only under the brief lease it took for the probe: no meta write without a lease applies from a process whose last engine point on that run was `engine.repair.after_acquire` (7.2: the probe skips a run a live owner holds rather than racing it unleased).",
    not_checked: "Meta writes after another engine point of the process on the run (a segment's, a deletion's); writes that were refused.",
    check: repairs_write_under_their_lease,
}];

fn repairs_write_under_their_lease(j: &Judged, out: &mut Vec<Witness>) {
    for &c in j.applied.iter().filter(|c| c.op == OpKind::PutMeta && c.lease.is_none()) {
        let last = j.history.marks.iter().rev().find(|m| {
            (m.node, m.incarnation) == (c.node, c.incarnation)
                && m.run_id == c.run_id
                && m.invoked_before <= c.id
        });
        let Some(m) = last.filter(|m| m.point == "engine.repair.after_acquire") else { continue };
        out.push(
            Witness::new(format!(
                "{}'s meta write of run {} at t={} carried no lease after its repair point (epoch {}): a repair raced the run's holder unleased",
                who(c),
                c.run_id,
                t(Judged::applied_ns(c)),
                m.epoch.map_or("none".to_string(), |e| e.to_string()),
            ))
            .on(c.op, c.id),
        );
    }
}

/// Whether an applied meta write is an audit repair's: it carries a lease its process took
/// for the probe (the lease's epoch, on the same process incarnation and run, was marked at
/// `engine.repair.after_acquire`).
pub fn is_repair(j: &Judged, c: &Call) -> bool {
    let Some(l) = &c.lease else { return false };
    c.op == OpKind::PutMeta
        && j.index().marked("engine.repair.after_acquire", c.node, c.incarnation, &c.run_id, Some(l.epoch.0))
}

/// The record without the two fields a repair may change.
fn kept(v: &Value) -> Value {
    let mut v = v.clone();
    if let Some(o) = v.as_object_mut() {
        o.remove("status");
        o.remove("updatedAt");
    }
    v
}

fn repair_is_sound(j: &Judged, out: &mut Vec<Witness>) {
    let mut journal: BTreeMap<&str, Vec<EntryView>> = BTreeMap::new();
    let mut meta: BTreeMap<&str, MetaView> = BTreeMap::new();
    for &c in &j.applied {
        let run = c.run_id.as_str();
        match c.op {
            OpKind::Append => {
                if let Some(e) = c.args.payload.as_deref().and_then(EntryView::parse) {
                    journal.entry(run).or_default().push(e);
                }
            }
            OpKind::Delete => {
                journal.remove(run);
                meta.remove(run);
            }
            OpKind::PutMeta => {
                let Some(new) = c.args.payload.as_deref().and_then(MetaView::parse) else { continue };
                if is_repair(j, c) {
                    let entries = journal.get(run).map_or(&[][..], |v| v.as_slice());
                    let old = meta.get(run);
                    let a = audit(old.map(|m| m.status), entries);
                    let mut wrong = Vec::new();
                    if !matches!(a.verdict, Verdict::MetaBehind | Verdict::Stranded) {
                        wrong.push(format!("the run was {:?} ({})", a.verdict, a.reason));
                    } else if a.repair_to != Some(new.status) {
                        wrong.push(format!(
                            "it wrote {} where the journal derives {}",
                            new.status,
                            a.repair_to.map_or("nothing".into(), |s| s.to_string())
                        ));
                    }
                    match old {
                        Some(old) if kept(&old.raw) != kept(&new.raw) => {
                            wrong.push("it changed fields other than status and updatedAt".into())
                        }
                        None => wrong.push("the run had no meta row to repair".into()),
                        _ => {}
                    }
                    if !wrong.is_empty() {
                        out.push(
                            Witness::new(format!(
                                "run {run}: {}'s audit repair at t={}: {}",
                                who(c),
                                t(Judged::applied_ns(c)),
                                wrong.join("; ")
                            ))
                            .on(c.op, c.id),
                        );
                    }
                }
                meta.insert(run, new);
            }
            _ => {}
        }
    }
}

/// The meta status and journal two successful reads returned, as the oracle's views;
/// `None` when either read did not return (`meta: None`), or returned a record the oracle
/// cannot read.
pub(super) fn read_state(
    meta: Option<&Option<store::RunMeta>>,
    load: &Call,
) -> Option<(Option<Status>, Vec<EntryView>)> {
    let m = meta?;
    let Some(Read::Entries(entries)) = &load.read else { return None };
    let status = match m {
        None => None,
        Some(m) => Some(Status::from_word(&m.status.to_string())?),
    };
    Some((status, entry_views(entries)?))
}

/// What a meta read returned (`None`: it did not return).
fn meta_read(c: &Call) -> Option<&Option<store::RunMeta>> {
    match &c.read {
        Some(Read::Meta(m)) => Some(m),
        _ => None,
    }
}

/// A census (`facts[i]`, `runs` reports) listed the whole catalog (no filter) and reported
/// each run of that listing exactly once, and nothing else.
fn census_is_whole(
    j: &Judged,
    i: usize,
    auditor: &dyn Fn(&crate::history::Fact) -> bool,
    mine: &dyn Fn(&Call) -> bool,
    runs: u64,
    out: &mut Vec<Witness>,
) {
    let (calls, facts) = (&j.history.calls, &j.history.facts);
    let f = &facts[i];
    let listing =
        calls[..f.invoked_before.min(calls.len())].iter().rev().find(|c| mine(c) && c.op == OpKind::ListRuns);
    let Some(listing) = listing else {
        out.push(Witness::new(format!(
            "{}'s census at t={} reported {runs} runs without listing the catalog",
            f.owner,
            t(f.at_ns)
        )));
        return;
    };
    let Some(Read::Runs { metas, filter }) = &listing.read else { return };
    if filter.status.is_some() || filter.statuses.is_some() || filter.name.is_some() || filter.tags.is_some()
    {
        out.push(
            Witness::new(format!(
                "{}'s census at t={} listed the catalog through a filter ({filter:?}): runs it excludes are never audited",
                f.owner,
                t(f.at_ns)
            ))
            .on(listing.op, listing.id),
        );
    }
    let mut reported: Vec<&str> = facts[..i]
        .iter()
        .filter(|g| auditor(g) && g.invoked_before > listing.id)
        .filter_map(|g| match &g.kind {
            FactKind::Audited { run_id, .. } => Some(run_id.as_str()),
            _ => None,
        })
        .collect();
    reported.sort_unstable();
    let mut listed: Vec<&str> = metas.iter().map(|m| m.run_id.as_str()).collect();
    listed.sort_unstable();
    if reported != listed || runs != listed.len() as u64 {
        out.push(
            Witness::new(format!(
                "{}'s census at t={} said {runs} runs and reported [{}] where its listing returned [{}]",
                f.owner,
                t(f.at_ns),
                reported.join(", "),
                listed.join(", ")
            ))
            .on(listing.op, listing.id),
        );
    }
}

/// "5 entries, settle ok, 1 after it, 0 dangling, 1 open".
fn show_counts(c: &AuditedCounts) -> String {
    format!(
        "{} entries, settle {}, {} after it, {} dangling, {} open",
        c.journal_entries,
        c.journal_settle.as_deref().unwrap_or("none"),
        c.entries_after_settle,
        c.dangling_dispatches,
        c.open_suspensions
    )
}

/// "meta-behind, repair to running" / "consistent".
fn said(verdict: &str, repair_to: Option<&str>) -> String {
    match repair_to {
        Some(to) => format!("{verdict}, repair to {to}"),
        None => verdict.to_string(),
    }
}

/// The reads the audit report `facts[i]` (an `Audited` fact) was made from: its auditor's
/// latest meta read of the run (a listing's record of the run counts: the whole-catalog audit
/// classifies each run by its listed status) and latest load of it, since the auditor's
/// previous report of that run. The meta read is `None` when it did not return, `Some(None)`
/// when it found no row. `None` when either read is missing or the fact is no audit report.
#[allow(clippy::type_complexity)]
pub(super) fn audit_reads<'h>(
    j: &Judged<'h>,
    i: usize,
) -> Option<(Option<Option<store::RunMeta>>, &'h Call)> {
    let calls = &j.history.calls;
    let facts = &j.history.facts;
    let f = facts.get(i)?;
    let FactKind::Audited { run_id, .. } = &f.kind else { return None };
    let auditor = |g: &crate::history::Fact| {
        (g.node, g.incarnation, g.owner.as_str()) == (f.node, f.incarnation, f.owner.as_str())
    };
    let mine = |c: &Call| {
        (c.node, c.incarnation) == (f.node, f.incarnation)
            && c.args.actor.as_deref() == Some(f.owner.as_str())
    };
    let before = &calls[..f.invoked_before.min(calls.len())];
    let from = facts[..i]
        .iter()
        .rev()
        .find(|g| auditor(g) && matches!(&g.kind, FactKind::Audited { run_id: r, .. } if r == run_id))
        .map_or(0, |g| g.invoked_before);
    let window = &before[from.min(before.len())..];
    let load = window.iter().rev().find(|c| mine(c) && c.op == OpKind::Load && c.run_id == *run_id)?;
    let meta = window.iter().rev().find_map(|c| {
        if !mine(c) {
            return None;
        }
        match (&c.op, &c.read) {
            (OpKind::GetMeta, Some(Read::Meta(m))) if c.run_id == *run_id => Some(Some(m.clone())),
            (OpKind::GetMeta, None) if c.run_id == *run_id => Some(None),
            (OpKind::ListRuns, Some(Read::Runs { metas, .. })) => {
                metas.iter().find(|m| m.run_id == *run_id).map(|m| Some(Some(m.clone())))
            }
            _ => None,
        }
    })?;
    Some((meta, load))
}

fn audits_follow_the_decision_table(j: &Judged, out: &mut Vec<Witness>) {
    let calls = &j.history.calls;
    let facts = &j.history.facts;
    // The reports: each judged against the auditor's latest reads of the run since its
    // previous report of that run (the listing's record of the run counts as a meta read:
    // the whole-catalog audit classifies each run by its listed status).
    for (i, f) in facts.iter().enumerate() {
        let auditor = |g: &crate::history::Fact| {
            (g.node, g.incarnation, g.owner.as_str()) == (f.node, f.incarnation, f.owner.as_str())
        };
        let mine = |c: &Call| {
            (c.node, c.incarnation) == (f.node, f.incarnation)
                && c.args.actor.as_deref() == Some(f.owner.as_str())
        };
        let (run_id, verdict, repair_to, counts) = match &f.kind {
            FactKind::Audited { run_id, verdict, repair_to, counts } => (run_id, verdict, repair_to, counts),
            FactKind::Census { runs } => {
                census_is_whole(j, i, &auditor, &mine, *runs, out);
                continue;
            }
            _ => continue,
        };
        let Some((meta, load)) = audit_reads(j, i) else {
            out.push(Witness::new(format!(
                "run {run_id}: {}'s audit at t={} reported {} without reading the run's meta row and journal",
                f.owner,
                t(f.at_ns),
                said(verdict, repair_to.as_deref())
            )));
            continue;
        };
        let Some((status, entries)) = read_state(meta.as_ref(), load) else { continue };
        let want = audit(status, &entries);
        let want_to = want.repair_to.map(Status::word);
        let c = &want.counts;
        let want_counts = AuditedCounts {
            journal_entries: c.entries as u64,
            journal_settle: c.settle.map(|s| s.word().to_string()),
            entries_after_settle: c.after_settle as u64,
            dangling_dispatches: c.dangling as u64,
            open_suspensions: c.open as u64,
        };
        if *counts != want_counts {
            out.push(
                Witness::new(format!(
                    "run {run_id}: {}'s audit at t={} counted {} where its reads (meta {}, a journal of {} entries) give {}",
                    f.owner,
                    t(f.at_ns),
                    show_counts(counts),
                    status.map_or("absent".to_string(), |s| s.to_string()),
                    entries.len(),
                    show_counts(&want_counts)
                ))
                .on(load.op, load.id),
            );
        }
        if want.verdict.word() != verdict || want_to != repair_to.as_deref() {
            out.push(
                Witness::new(format!(
                    "run {run_id}: {}'s audit at t={} reported {} where its reads (meta {}, a journal of {} entries) give {} ({})",
                    f.owner,
                    t(f.at_ns),
                    said(verdict, repair_to.as_deref()),
                    status.map_or("absent".to_string(), |s| s.to_string()),
                    entries.len(),
                    said(want.verdict.word(), want_to),
                    want.reason
                ))
                .on(load.op, load.id),
            );
        }
    }
    // The repairs: from the brief lease's mark to its release, what the probe read and wrote.
    for m in j.history.marks.iter().filter(|m| m.point == "engine.repair.after_acquire") {
        let Some(epoch) = m.epoch else { continue };
        let upto = m.invoked_before.min(calls.len());
        let ours = |c: &Call| (c.node, c.incarnation) == (m.node, m.incarnation) && c.run_id == m.run_id;
        let under = |c: &Call| c.lease.as_ref().is_some_and(|l| l.epoch.0 == epoch);
        let Some(grant) = calls[..upto].iter().rev().find(|c| {
            c.op == OpKind::Acquire && ours(c) && c.granted.as_ref().is_some_and(|g| g.epoch.0 == epoch)
        }) else {
            continue;
        };
        let actor = grant.args.actor.as_deref();
        let mut tenure = Vec::new();
        let mut released = false;
        for c in calls[upto..].iter().filter(|c| ours(c) && c.args.actor.as_deref() == actor) {
            if c.op == OpKind::Release && under(c) {
                released = true;
                break;
            }
            tenure.push(c);
        }
        if !released {
            // A crash cut the repair short (or the lease was never given back, which
            // `a_taken_lease_is_given_back` judges).
            continue;
        }
        let run = m.run_id.as_str();
        let write = tenure.iter().position(|c| c.op == OpKind::PutMeta && under(c));
        let reread = tenure.iter().position(|c| c.op == OpKind::GetMeta).and_then(|a| {
            let b = a + 1 + tenure[a + 1..].iter().position(|c| c.op == OpKind::Load)?;
            Some((a, b))
        });
        let holder = who(grant);
        let at = t(Judged::applied_ns(grant));
        // "run r: n0 (op)'s audit repair under the brief lease of t=1.0s <what>".
        let said_of = |what: String| {
            format!("run {run}: {holder}'s audit repair under the brief lease of t={at} {what}")
        };
        let at_write = |w: usize, what: String| Witness::new(said_of(what)).on(tenure[w].op, tenure[w].id);
        let (a, b) = match reread {
            Some((a, b)) if write.is_none_or(|w| b < w) => (a, b),
            _ => {
                if let Some(w) = write {
                    let what = "wrote the meta without first re-reading the meta row and the journal under that lease";
                    out.push(at_write(w, what.into()));
                }
                continue;
            }
        };
        let Some((status, entries)) = read_state(meta_read(tenure[a]), tenure[b]) else {
            if let Some(w) = write {
                out.push(at_write(w, "wrote the meta though its re-read under that lease failed".into()));
            }
            continue;
        };
        let want = audit(status, &entries);
        match (want.repair_to, write) {
            (None, Some(w)) => out.push(at_write(
                w,
                format!(
                    "rewrote the meta of a run its re-read gives {} ({})",
                    want.verdict.word(),
                    want.reason
                ),
            )),
            (Some(to), Some(w)) => {
                let wrote = tenure[w].args.payload.as_deref().and_then(MetaView::parse).map(|v| v.status);
                if wrote != Some(to) {
                    out.push(at_write(
                        w,
                        format!(
                            "wrote {} where its re-read gives {} ({})",
                            wrote.map_or("an unreadable record".to_string(), |s| s.to_string()),
                            said(want.verdict.word(), Some(to.word())),
                            want.reason
                        ),
                    ));
                }
            }
            (Some(to), None) => {
                // Lawful only when the row was gone (or unreadable) at the last look before
                // the write.
                let last_look = tenure[b + 1..].iter().find(|c| c.op == OpKind::GetMeta);
                let excused = match last_look.map(|c| &c.read) {
                    Some(Some(Read::Meta(None))) | Some(None) => true,
                    Some(Some(_)) => false,
                    None => status.is_none(),
                };
                if !excused {
                    out.push(Witness::new(said_of(format!(
                        "released it without rewriting the meta, though its re-read gives {} ({})",
                        said(want.verdict.word(), Some(to.word())),
                        want.reason
                    ))));
                }
            }
            (None, None) => {}
        }
    }
}

#[cfg(test)]
mod tests {
    //! A repair of a consistent run, to the wrong status, or that drops a field is caught;
    //! the sound repair of a crash between the settle and the meta write passes.

    use serde_json::json;

    use super::*;
    use crate::history::History;
    use crate::oracle::testkit::{self, lease, no_filter, with_payload};

    fn call(id: usize, op: OpKind, payload: Value, epoch: u64) -> Call {
        let mut c = with_payload(testkit::call(id, op), payload);
        c.lease = Some(lease("o", epoch));
        c
    }

    /// A run whose settle `ok` is journaled and whose meta still says running (a crash
    /// between the two writes), then the repair write `repair` under epoch 2.
    fn judge(repair: Value) -> Vec<Witness> {
        let settle = json!({"seq": 1, "kind": "decision", "status": "ok", "key": "run-settle",
                            "value": {"decisionType": "run_settle", "runStatus": "ok", "segment": 1}});
        let calls = vec![
            call(
                0,
                OpKind::PutMeta,
                json!({"runId": "r", "status": "running", "segments": 1, "name": "n"}),
                1,
            ),
            call(1, OpKind::Append, settle, 1),
            call(2, OpKind::PutMeta, repair, 2),
        ];
        let h = History {
            applied_count: 3,
            calls,
            marks: vec![testkit::mark("engine.repair.after_acquire", 2, 2)],
            ..History::default()
        };
        testkit::judge(&h, repair_is_sound)
    }

    #[test]
    fn the_sound_repair_passes_and_unsound_ones_are_caught() {
        let sound = json!({"runId": "r", "status": "ok", "segments": 1, "name": "n", "updatedAt": "x"});
        assert!(judge(sound).is_empty());
        let wrong_status = json!({"runId": "r", "status": "error", "segments": 1, "name": "n"});
        let v = judge(wrong_status);
        assert_eq!(v.len(), 1, "{v:?}");
        assert!(v[0].witness.contains("wrote error where the journal derives ok"), "{}", v[0].witness);
        let dropped = json!({"runId": "r", "status": "ok", "segments": 1});
        let v = judge(dropped);
        assert_eq!(v.len(), 1, "{v:?}");
        assert!(v[0].witness.contains("changed fields other than status"), "{}", v[0].witness);
    }

    /// A journal entry, spelled out field by field (no function of the system under test).
    fn entry(seq: u64, kind: &str, status: &str, ref_seq: Option<u64>, value: Value) -> store::JournalEntry {
        store::JournalEntry {
            seq: store::Seq(seq),
            kind: kind.into(),
            status: status.into(),
            key: String::new(),
            ref_seq: ref_seq.map(store::Seq),
            value,
            extra: serde_json::Map::new(),
        }
    }

    /// A journal whose `ok` settle is followed by a dispatch that never ended: live work
    /// after the settle (the table derives `running`).
    fn live_after_settle() -> Vec<store::JournalEntry> {
        let settle = json!({"decisionType": "run_settle", "runStatus": "ok", "segment": 1});
        vec![
            entry(0, "agent", "running", None, json!({})),
            entry(1, "agent", "ok", Some(0), json!("v")),
            entry(2, "decision", "ok", None, settle),
            entry(3, "agent", "running", None, json!({})),
        ]
    }

    /// An unleased read of run `r` by the operator `op` on node 0.
    fn read(id: usize, op: OpKind, what: Read) -> Call {
        let mut c = testkit::call(id, op);
        c.applied = None;
        c.args.actor = Some("op".into());
        c.read = Some(what);
        c
    }

    /// The operator read meta `status` and `journal`, then reported `verdict`/`repair_to`.
    fn report(
        status: store::RunStatus,
        journal: Vec<store::JournalEntry>,
        verdict: &str,
        repair_to: Option<&str>,
    ) -> Vec<Witness> {
        report_counted(status, journal, verdict, repair_to, &live_counts())
    }

    /// A fact of the operator `op` on node 0, after the first `invoked_before` calls.
    fn by_op(invoked_before: usize, kind: FactKind) -> crate::history::Fact {
        crate::history::Fact {
            at_ns: invoked_before as u64 * testkit::MS,
            applied_before: 0,
            node: 0,
            incarnation: 0,
            owner: "op".into(),
            invoked_before,
            kind,
        }
    }

    /// The counts the audit of [`live_after_settle`] reports.
    fn live_counts() -> AuditedCounts {
        AuditedCounts {
            journal_entries: 4,
            journal_settle: Some("ok".into()),
            entries_after_settle: 1,
            dangling_dispatches: 1,
            open_suspensions: 0,
        }
    }

    /// As [`report`], with the counts the report carries.
    fn report_counted(
        status: store::RunStatus,
        journal: Vec<store::JournalEntry>,
        verdict: &str,
        repair_to: Option<&str>,
        counts: &AuditedCounts,
    ) -> Vec<Witness> {
        let calls = vec![
            read(0, OpKind::GetMeta, Read::Meta(Some(testkit::meta_record("r", status)))),
            read(1, OpKind::Load, Read::Entries(journal)),
        ];
        let h = History {
            calls,
            facts: vec![by_op(
                2,
                FactKind::Audited {
                    run_id: "r".into(),
                    verdict: verdict.into(),
                    repair_to: repair_to.map(String::from),
                    counts: counts.clone(),
                },
            )],
            ..History::default()
        };
        testkit::judge(&h, audits_follow_the_decision_table)
    }

    #[test]
    fn an_audit_report_is_the_table_over_what_it_read() {
        use store::RunStatus::{Ok as Done, Running};
        // Terminal meta over live work after the settle: stranded, repair to running.
        assert!(report(Done, live_after_settle(), "stranded", Some("running")).is_empty());
        // The same reads with a running meta row: consistent.
        assert!(report(Running, live_after_settle(), "consistent", None).is_empty());
        one_saying(
            report(Done, live_after_settle(), "consistent", None),
            "reported consistent where its reads (meta ok, a journal of 4 entries) give stranded, repair to running",
        );
        one_saying(report(Done, live_after_settle(), "meta-behind", Some("running")), "reported meta-behind");
        one_saying(
            report(Done, live_after_settle(), "stranded", Some("suspended")),
            "repair to suspended where",
        );
        // The right verdict with a miscount: the first dispatch counted dangling too.
        let miscounted = AuditedCounts { dangling_dispatches: 2, ..live_counts() };
        one_saying(
            report_counted(Done, live_after_settle(), "stranded", Some("running"), &miscounted),
            "counted 4 entries, settle ok, 1 after it, 2 dangling, 0 open where",
        );
        // A report the auditor never read for.
        let mut h = History::default();
        h.facts.push(by_op(
            0,
            FactKind::Audited {
                run_id: "r".into(),
                verdict: "consistent".into(),
                repair_to: None,
                counts: AuditedCounts::default(),
            },
        ));
        let v = testkit::judge(&h, audits_follow_the_decision_table);
        assert_eq!(v.len(), 1, "{v:?}");
        assert!(v[0].witness.contains("without reading"), "{}", v[0].witness);
    }

    /// A repair tenure under the brief lease of epoch 2: the acquire, the mark, then `tail`
    /// (calls by the operator, ids from 1), then the release.
    fn tenure(tail: Vec<Call>) -> Vec<Witness> {
        let mut grant = testkit::call(0, OpKind::Acquire);
        grant.args.actor = Some("op".into());
        grant.args.owner = Some("op".into());
        grant.granted = Some(lease("op", 2));
        let mut calls = vec![grant];
        calls.extend(tail);
        let mut release = testkit::call(calls.len(), OpKind::Release);
        release.args.actor = Some("op".into());
        release.lease = Some(lease("op", 2));
        calls.push(release);
        let h = History {
            applied_count: calls.len(),
            calls,
            marks: vec![testkit::mark("engine.repair.after_acquire", 2, 1)],
            ..History::default()
        };
        testkit::judge(&h, audits_follow_the_decision_table)
    }

    fn write(id: usize, status: &str) -> Call {
        let mut c = call(id, OpKind::PutMeta, json!({"runId": "r", "status": status}), 2);
        c.args.actor = Some("op".into());
        c
    }

    fn meta_read(id: usize, status: store::RunStatus) -> Call {
        read(id, OpKind::GetMeta, Read::Meta(Some(testkit::meta_record("r", status))))
    }

    #[test]
    fn a_repair_write_without_its_lease_is_caught() {
        use crate::oracle::testkit::engine::HistoryBuilder;
        use store::RunStatus;
        let repaired = |leased: bool, point: &'static str| {
            let mut h = HistoryBuilder::engine_run();
            let a = h.acquire(0, "w", "r", 1);
            h.meta(0, Some(&a), "r", RunStatus::Running, 1);
            h.mark(1, point, "r", leased.then_some(2));
            let b = leased.then(|| h.acquire(1, "op", "r", 2));
            h.meta(1, b.as_ref(), "r", RunStatus::Ok, 1);
            h.judge("repairs_write_under_their_lease")
        };
        let v = repaired(false, "engine.repair.after_acquire");
        assert_eq!(v.len(), 1, "{v:?}");
        assert!(v[0].witness.contains("no lease after its repair point (epoch none)"), "{}", v[0].witness);
        assert!(repaired(true, "engine.repair.after_acquire").is_empty());
        assert!(repaired(false, "engine.boot.before_meta").is_empty(), "not a repair");
    }

    #[test]
    fn a_repair_decides_from_its_reread_under_the_lease() {
        use store::RunStatus::{Ok as Done, Running};
        let journal = || read(2, OpKind::Load, Read::Entries(live_after_settle()));
        // The sound repair: re-read, look again, write running.
        let sound = vec![meta_read(1, Done), journal(), meta_read(3, Done), write(4, "running")];
        assert!(tenure(sound).is_empty());
        // A consistent run left alone.
        assert!(tenure(vec![meta_read(1, Running), journal()]).is_empty());
        // The row gone at the last look: nothing to write.
        let gone = vec![meta_read(1, Done), journal(), read(3, OpKind::GetMeta, Read::Meta(None))];
        assert!(tenure(gone).is_empty());
        // Written without re-reading the journal under the lease.
        one_saying(tenure(vec![meta_read(1, Done), write(2, "running")]), "without first re-reading");
        // The wrong status.
        one_saying(
            tenure(vec![meta_read(1, Done), journal(), meta_read(3, Done), write(4, "suspended")]),
            "wrote suspended where its re-read gives stranded, repair to running",
        );
        // A consistent run rewritten.
        one_saying(
            tenure(vec![meta_read(1, Running), journal(), meta_read(3, Running), write(4, "ok")]),
            "rewrote the meta of a run its re-read gives consistent",
        );
        // A stranded run left stranded.
        one_saying(
            tenure(vec![meta_read(1, Done), journal(), meta_read(3, Done)]),
            "released it without rewriting the meta",
        );
    }

    /// Exactly one witness, and it says `text`.
    fn one_saying(v: Vec<Witness>, text: &str) {
        assert!(v.len() == 1 && v[0].witness.contains(text), "want one witness saying {text:?}: {v:?}");
    }

    /// A census by `op`: one listing of `listed` runs (each `ok`, over the live-after-settle
    /// journal), a load of each, then one report per run in `reported` and the `Census` fact.
    fn census(listed: &[&str], reported: &[&str], runs: u64) -> Vec<Witness> {
        let metas: Vec<store::RunMeta> =
            listed.iter().map(|r| testkit::meta_record(r, store::RunStatus::Ok)).collect();
        let mut list = read(0, OpKind::ListRuns, Read::Runs { filter: no_filter(), metas });
        list.run_id = String::new();
        let mut calls = vec![list];
        for r in listed {
            let mut load = read(calls.len(), OpKind::Load, Read::Entries(live_after_settle()));
            load.run_id = (*r).into();
            calls.push(load);
        }
        let fact = |kind: FactKind| by_op(listed.len() + 1, kind);
        let mut facts: Vec<_> = reported
            .iter()
            .map(|r| {
                fact(FactKind::Audited {
                    run_id: (*r).into(),
                    verdict: "stranded".into(),
                    repair_to: Some("running".into()),
                    counts: live_counts(),
                })
            })
            .collect();
        facts.push(fact(FactKind::Census { runs }));
        let h = History { calls, facts, ..History::default() };
        testkit::judge(&h, audits_follow_the_decision_table)
    }

    #[test]
    fn a_census_reports_each_listed_run_once_from_its_listed_status() {
        // Each listed run classified by its listed status (ok over live work: stranded).
        assert!(census(&["a", "b"], &["a", "b"], 2).is_empty());
        let v = census(&["a", "b"], &["a"], 1);
        assert_eq!(v.len(), 1, "{v:?}");
        assert!(v[0].witness.contains("reported [a] where its listing returned [a, b]"), "{}", v[0].witness);
        // A run reported twice: the second report read nothing since the first.
        let v = census(&["a", "b"], &["a", "b", "b"], 3);
        assert!(v.iter().any(|w| w.witness.contains("reported [a, b, b]")), "{v:?}");
        assert!(
            v.iter().any(|w| w.witness.contains("run b") && w.witness.contains("without reading")),
            "{v:?}"
        );
        let v = census(&["a", "b"], &["a", "b"], 3);
        assert!(v[0].witness.contains("said 3 runs"), "{}", v[0].witness);
        // A census through a filter.
        let metas = vec![testkit::meta_record("a", store::RunStatus::Ok)];
        let filter = store::RunFilter { status: Some(store::RunStatus::Ok), ..no_filter() };
        let mut list = read(0, OpKind::ListRuns, Read::Runs { filter, metas });
        list.run_id = String::new();
        let mut load = read(1, OpKind::Load, Read::Entries(live_after_settle()));
        load.run_id = "a".into();
        let fact = |kind: FactKind| by_op(2, kind);
        let audited = FactKind::Audited {
            run_id: "a".into(),
            verdict: "stranded".into(),
            repair_to: Some("running".into()),
            counts: live_counts(),
        };
        let h = History {
            calls: vec![list, load],
            facts: vec![fact(audited), fact(FactKind::Census { runs: 1 })],
            ..History::default()
        };
        let v = testkit::judge(&h, audits_follow_the_decision_table);
        assert!(v.len() == 1 && v[0].witness.contains("through a filter"), "{v:?}");
        // A run reported that was never loaded.
        let v = census(&["a"], &["a", "c"], 2);
        assert!(
            v.iter().any(|w| w.witness.contains("run c") && w.witness.contains("without reading")),
            "{v:?}"
        );
    }
}
