//! The answers family: an operator's offline answer (`resolve_offline`) to a suspension that
//! is open on a run that has not ended lands, and one to a run that has ended appends nothing. The engine may refuse an answer for two
//! reasons only (docs/engine-model.md 5.5, and this model's re-check P): the suspension is
//! no longer open, or the run's meta, read under the answer's brief lease, is terminal.
//!
//! Judged from the operator's `Answering` facts (what it meant to answer), its calls under
//! the brief lease it was granted, and the apply-ordered history (what the journal held when
//! its meta read was made).

use std::collections::BTreeMap;

use super::super::contract::{EntryView, Status};
use super::super::model::{t, Judged};
use super::super::{Expectation, Property, Witness};
use super::*;
use crate::history::{Call, FactKind, OpKind, Read};

pub const AN_ANSWER_TO_A_LIVE_RUN_LANDS: Property = Property {
    name: "an_answer_to_a_live_run_lands",
    expectation: Expectation::Always,
    claim: "An operator's offline answer that was granted its brief lease, read the run's meta under it as not ended (running or suspended) while the suspension it answers was still open, appends its resolution under that lease before giving it back: an answer is refused only when the suspension is no longer open or the run has ended (docs/engine-model.md 5.5; the terminal re-check, P).",
    not_checked: "Answers whose acquire was refused (held, busy), or a call of which failed or never returned (the process died); answers during which another writer changed the run between the meta read and the release (the suspension may have been answered meanwhile); answers that read no meta under the lease (profiles without the re-check).",
    check: an_answer_to_a_live_run_lands,
};

/// Whether the journal of `run`, as it stood when `seen` mutations had applied, holds the
/// suspension at `seq` for await `key`, with nothing referencing it (no resolution, no
/// abandon).
fn open_at(appends: &[(usize, Option<EntryView>)], seen: usize, seq: u64, key: &str) -> bool {
    let mut live: Vec<&EntryView> = Vec::new();
    for (_, entry) in appends.iter().take_while(|(o, _)| *o < seen) {
        match entry {
            // A delete of the run (`None`): a new generation starts empty.
            None => live.clear(),
            Some(e) => live.push(e),
        }
    }
    let suspended = live.iter().any(|e| {
        e.seq == seq
            && matches!(e.kind.as_str(), "external" | "approval")
            && e.status == "suspended"
            && e.value.get("key").and_then(|k| k.as_str()) == Some(key)
    });
    suspended && !live.iter().any(|e| e.ref_seq == Some(seq))
}

/// One offline answer the properties can judge: granted its brief lease, it read the run's
/// meta under it, with the suspension it answers open in the journal as of that read, every
/// call of it returned, and no other writer changed the run before its release.
pub(in crate::oracle) struct Answer<'h> {
    /// The answering identity, and the run and await key it answered.
    pub owner: &'h str,
    pub run_id: &'h str,
    pub key: &'h str,
    pub suspension: u64,
    pub epoch: u64,
    /// Its meta read, and the status it read.
    pub read: &'h Call,
    pub status: Status,
    pub release: &'h Call,
    /// Whether it appended a resolution under its lease.
    pub answered: bool,
}

/// The judgeable offline answers of a run, in fact order.
pub(in crate::oracle) fn answers<'h>(j: &Judged<'h>) -> Vec<Answer<'h>> {
    let runs = engine_runs(j);
    let mut found = Vec::new();
    if !j.history.facts.iter().any(|f| matches!(f.kind, FactKind::Answering { .. })) {
        return found;
    }
    // Per run: its applied appends (the entry) and deletes (`None`), in apply order.
    let mut journal: BTreeMap<&str, Vec<(usize, Option<EntryView>)>> = BTreeMap::new();
    for &c in &j.applied {
        if !runs.contains(c.run_id.as_str()) {
            continue;
        }
        match c.op {
            OpKind::Append => journal.entry(c.run_id.as_str()).or_default().push((order(c), entry_of(c))),
            OpKind::Delete => journal.entry(c.run_id.as_str()).or_default().push((order(c), None)),
            _ => {}
        }
    }
    let calls = &j.history.calls;
    for f in &j.history.facts {
        let FactKind::Answering { run_id, key, suspension } = &f.kind else { continue };
        if !runs.contains(run_id.as_str()) {
            continue;
        }
        // The operator's calls on the run from the fact on, in invocation order.
        let mut mine = own_calls_on(calls, f, run_id, calls.len()).into_iter();
        let Some(acquire) = mine.next().filter(|c| c.op == OpKind::Acquire) else { continue };
        let Some(lease) = acquire.granted.as_ref().filter(|_| acquire.outcome.is_ok()) else { continue };
        // Its calls under that grant, through the release that gives it back.
        let mut window: Vec<&Call> = Vec::new();
        for c in mine {
            window.push(c);
            if c.op == OpKind::Release && c.lease.as_ref() == Some(lease) {
                break;
            }
        }
        let Some(release) = window.last().copied().filter(|c| c.op == OpKind::Release) else { continue };
        if window.iter().any(|c| !c.outcome.is_ok() || c.returned_ns.is_none()) {
            continue;
        }
        let Some((read, status)) = window.iter().find_map(|c| match (&c.op, &c.read) {
            (OpKind::GetMeta, Some(Read::Meta(Some(m)))) => Some((*c, Status::of(m.status))),
            _ => None,
        }) else {
            continue;
        };
        let Some(seen) = read.seen_at else { continue };
        let appends = journal.get(run_id.as_str()).map_or(&[][..], |v| v.as_slice());
        if !open_at(appends, seen, *suspension, key) {
            continue;
        }
        // Another writer's mutation of the run between the read and the release.
        let until = release.applied.as_ref().map_or(release.seen_at.unwrap_or(usize::MAX), |a| a.order);
        let disturbed = j.applied.iter().any(|d| {
            d.run_id == *run_id && (seen..until).contains(&order(d)) && !window.iter().any(|w| w.id == d.id)
        });
        if disturbed {
            continue;
        }
        let answered = window.iter().any(|c| {
            c.op == OpKind::Append
                && c.lease.as_ref() == Some(lease)
                && entry_of(c).is_some_and(|e| e.kind == "resolution")
        });
        found.push(Answer {
            owner: &f.owner,
            run_id,
            key,
            suspension: *suspension,
            epoch: lease.epoch.0,
            read,
            status,
            release,
            answered,
        });
    }
    found
}

fn an_answer_to_a_live_run_lands(j: &Judged, out: &mut Vec<Witness>) {
    for a in answers(j).into_iter().filter(|a| !a.answered && !a.status.is_terminal()) {
        out.push(
            Witness::new(format!(
                "run {}: {}'s offline answer to the suspension at seq {} ({}) held epoch {} and read the meta {} at t={}, with that suspension open, and gave the lease back at t={} without appending a resolution: an answer is refused only when the suspension is no longer open or the run has ended",
                a.run_id,
                a.owner,
                a.suspension,
                a.key,
                a.epoch,
                a.status.word(),
                t(a.read.invoked_ns),
                t(a.release.invoked_ns)
            ))
            .on(a.release.op, a.release.id),
        );
    }
}

pub const A_DELIVERED_ANSWER_IS_JOURNALED: Property = Property {
    name: "a_delivered_answer_is_journaled",
    expectation: Expectation::Always,
    claim: "An operator's offline answer that the engine reported delivered (`resolve_offline` returned ok) appended, under the brief lease it was granted for it, a resolution entry for that await (`await:<key>`) that returned ok: an answer with no open suspension to resolve, or to a run that has ended, is refused with a typed error, never reported delivered while nothing was written (docs/engine-model.md 5.5).",
    not_checked: "Answers whose outcome the process did not live to report; whether the resolution references the suspension the operator meant (an_answer_to_a_live_run_lands judges the open ones).",
    check: a_delivered_answer_is_journaled,
};

fn a_delivered_answer_is_journaled(j: &Judged, out: &mut Vec<Witness>) {
    for f in &j.history.facts {
        let FactKind::Answered { run_id, key } = &f.kind else { continue };
        let mine = own_calls_before(j.index(), f, run_id);
        // The answer's own calls: from its acquire (the identity's latest before the fact).
        let from = mine.iter().rposition(|c| c.op == OpKind::Acquire).unwrap_or(0);
        let wanted = format!("await:{key}");
        let journaled = mine[from..].iter().any(|c| {
            c.op == OpKind::Append
                && c.outcome.is_ok()
                && entry_of(c).is_some_and(|e| e.kind == "resolution" && e.key == wanted)
        });
        if !journaled {
            out.push(Witness::new(format!(
                "run {run_id}: {}'s offline answer to {key} was reported delivered at t={} though it appended no resolution for it ({} calls of its own on the run since its acquire)",
                f.owner,
                t(f.at_ns),
                mine.len() - from
            )));
        }
    }
}

pub const AN_ANSWER_TO_AN_ENDED_RUN_IS_REFUSED: Property = Property {
    name: "an_answer_to_an_ended_run_is_refused",
    expectation: Expectation::Always,
    claim: "An operator's offline answer appends no resolution under its brief lease while the run's meta, in the serial history as of that append, says the run has ended (ok, error or cancelled): no worker resumes an ended run, so an answer appended after its settle would sit in the journal as live work under a terminal meta, the reconciler's stranded run. The lease makes the meta the answer can read under it the meta its append lands on; a status read before the acquire is no check (docs/engine-model.md 5.5; the terminal re-check, P).",
    not_checked: "Answers whose acquire was refused; answers during which another writer changed the run between the grant and the append (the lease was not what kept the meta still); answers not announced by an `Answering` fact.",
    check: an_answer_to_an_ended_run_is_refused,
};

fn an_answer_to_an_ended_run_is_refused(j: &Judged, out: &mut Vec<Witness>) {
    if !j.history.facts.iter().any(|f| matches!(f.kind, FactKind::Answering { .. })) {
        return;
    }
    let ix = j.index();
    let calls = &j.history.calls;
    for f in &j.history.facts {
        let FactKind::Answering { run_id, key, suspension } = &f.kind else { continue };
        let mut mine = own_calls_on(calls, f, run_id, calls.len()).into_iter();
        let Some(acquire) = mine.next().filter(|c| c.op == OpKind::Acquire) else { continue };
        let Some(lease) = acquire.granted.as_ref().filter(|_| acquire.outcome.is_ok()) else { continue };
        for c in mine.take_while(|c| !(c.op == OpKind::Release && c.lease.as_ref() == Some(lease))) {
            let resolution = c.op == OpKind::Append
                && c.lease.as_ref() == Some(lease)
                && c.applied.is_some()
                && entry_of(c).is_some_and(|e| e.kind == "resolution");
            if !resolution {
                continue;
            }
            let (from, to) = (order(acquire), order(c));
            // Another writer's mutation of the run between the grant and the append.
            if ix.recorded_between(run_id, from, to).iter().any(|d| d.lease.as_ref() != Some(lease)) {
                continue;
            }
            // The meta the append landed on.
            let Some(ended) = meta_before(j, run_id, to).map(|m| m.status) else { continue };
            if !ended.is_terminal() {
                continue;
            }
            out.push(
                Witness::new(format!(
                    "run {run_id}: {}'s offline answer to the suspension at seq {suspension} ({key}) held epoch {} and appended a resolution at t={} over a meta that said {}: an answer to an ended run must be refused",
                    f.owner,
                    lease.epoch.0,
                    t(Judged::applied_ns(c)),
                    ended.word(),
                ))
                .on(c.op, c.id),
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;
    use store::RunStatus;

    use crate::history::{Args, FactKind, OpKind, Read};
    use crate::oracle::testkit::engine::*;
    use crate::oracle::testkit::meta_record;

    /// Run `r`: a segment appended the approval `k` at seq 0 and died with the meta
    /// `running`; then operator `op` on n1 answers it: its acquire, its meta read (which
    /// reads `read`), `between` (another writer's append, if any), its resolution when
    /// `appends`, its release.
    fn answer(read: RunStatus, answered_before: bool, between: bool, appends: bool) -> HistoryBuilder {
        answer_over(None, read, answered_before, between, appends)
    }

    /// [`answer`], with the segment's settle meta write of `settled` (if any) after its
    /// suspension.
    fn answer_over(
        settled: Option<RunStatus>,
        read: RunStatus,
        answered_before: bool,
        between: bool,
        appends: bool,
    ) -> HistoryBuilder {
        let mut h = HistoryBuilder::engine_run();
        let seg = h.acquire(0, "host", "r", 1);
        h.meta(0, Some(&seg), "r", RunStatus::Running, 1);
        let suspension = json!({"seq": 0, "kind": "approval", "status": "suspended", "key": "await:k", "value": {"key": "k"}});
        h.append(0, &seg, "r", suspension);
        if answered_before {
            h.append(0, &seg, "r", op_entry(1, "resolution", "await:k", "ok", Some(0)));
        }
        if let Some(s) = settled {
            h.meta(0, Some(&seg), "r", s, 1);
        }
        h.fact(1, "op", FactKind::Answering { run_id: "r".into(), key: "k".into(), suspension: 0 });
        let first = h.h.calls.len();
        let l = h.acquire(1, "op", "r", 2);
        h.read_meta(1, "op", "r");
        h.h.calls.last_mut().expect("a read").read = Some(Read::Meta(Some(meta_record("r", read))));
        let mut others = Vec::new();
        if between {
            others.push(h.h.calls.len());
            let zombie = lease("r", "host", 1);
            h.append(0, &zombie, "r", op_entry(2, "resolution", "await:k", "ok", Some(0)));
        }
        if appends {
            h.append(1, &l, "r", op_entry(3, "resolution", "await:k", "ok", Some(0)));
        }
        h.push(1, OpKind::Release, "r", Some(l), Args::default(), None);
        for c in h.h.calls.iter_mut().skip(first).filter(|c| !others.contains(&c.id)) {
            c.args.actor = Some("op".into());
        }
        h
    }

    #[test]
    fn an_answer_reported_delivered_must_have_appended_its_resolution() {
        let p = "a_delivered_answer_is_journaled";
        let delivered = |appends: bool, key: &str| {
            let mut h = answer(RunStatus::Running, false, false, appends);
            h.fact(1, "op", FactKind::Answered { run_id: "r".into(), key: key.into() });
            h
        };
        assert!(delivered(true, "k").judge(p).is_empty(), "appended, then reported");
        let v = delivered(false, "k").judge(p);
        assert!(v.len() == 1 && v[0].witness.contains("appended no resolution"), "{v:?}");
        assert_eq!(delivered(true, "other").judge(p).len(), 1, "a resolution of another await");
        // A second answer, reported delivered after an acquire of its own that appended
        // nothing: the first answer's resolution does not count for it.
        let mut h = delivered(true, "k");
        h.fact(1, "op", FactKind::Answering { run_id: "r".into(), key: "k".into(), suspension: 0 });
        let first = h.h.calls.len();
        let l = h.acquire(1, "op", "r", 3);
        h.push(1, OpKind::Release, "r", Some(l), Args::default(), None);
        for c in h.h.calls.iter_mut().skip(first) {
            c.args.actor = Some("op".into());
        }
        h.fact(1, "op", FactKind::Answered { run_id: "r".into(), key: "k".into() });
        assert_eq!(h.judge(p).len(), 1, "a redelivery that wrote nothing");
    }

    #[test]
    fn an_answer_that_read_a_live_meta_over_an_open_suspension_must_append() {
        assert!(answer(RunStatus::Running, false, false, true)
            .judge("an_answer_to_a_live_run_lands")
            .is_empty());
        assert!(answer(RunStatus::Suspended, false, false, true)
            .judge("an_answer_to_a_live_run_lands")
            .is_empty());
        let v = answer(RunStatus::Running, false, false, false).judge("an_answer_to_a_live_run_lands");
        assert_eq!(v.len(), 1, "{v:?}");
        assert!(v[0].witness.contains("read the meta running"), "{}", v[0].witness);
        assert_eq!(
            answer(RunStatus::Suspended, false, false, false).judge("an_answer_to_a_live_run_lands").len(),
            1
        );
    }

    #[test]
    fn an_answer_may_be_refused_over_an_ended_run_an_answered_suspension_or_a_changed_run() {
        // The run has ended: the re-check refuses it.
        assert!(answer(RunStatus::Cancelled, false, false, false)
            .judge("an_answer_to_a_live_run_lands")
            .is_empty());
        // The suspension was answered before the read.
        assert!(answer(RunStatus::Running, true, false, false)
            .judge("an_answer_to_a_live_run_lands")
            .is_empty());
        // Another writer changed the run between the read and the release.
        assert!(answer(RunStatus::Running, false, true, false)
            .judge("an_answer_to_a_live_run_lands")
            .is_empty());
    }

    #[test]
    fn an_answer_appended_over_an_ended_meta_is_caught() {
        let p = "an_answer_to_an_ended_run_is_refused";
        for ended in [RunStatus::Cancelled, RunStatus::Error, RunStatus::Ok] {
            // Whatever the answer read (here: a stale `suspended`, as a read before the
            // acquire would show), the meta its append lands on had ended.
            let v = answer_over(Some(ended), RunStatus::Suspended, false, false, true).judge(p);
            assert_eq!(v.len(), 1, "{v:?}");
            assert!(v[0].witness.contains(&format!("over a meta that said {ended}")), "{}", v[0].witness);
            assert!(answer_over(Some(ended), ended, false, false, false).judge(p).is_empty(), "refused");
        }
        // A live meta's answer lands; an answer whose grant another writer's append followed
        // is not judged.
        assert!(answer_over(Some(RunStatus::Suspended), RunStatus::Suspended, false, false, true)
            .judge(p)
            .is_empty());
        assert!(answer(RunStatus::Running, false, false, true).judge(p).is_empty());
        assert!(answer_over(Some(RunStatus::Cancelled), RunStatus::Cancelled, false, true, true)
            .judge(p)
            .is_empty());
    }

    #[test]
    fn the_goal_counts_a_landed_answer_to_a_run_left_running_only() {
        let met = |h: &HistoryBuilder| {
            let j = crate::oracle::model::Judged::build(&h.h, &h.fin, h.expect);
            crate::oracle::goals::GOALS
                .iter()
                .find(|g| g.name == "answer_to_a_running_run_landed")
                .is_some_and(|g| (g.check)(&j))
        };
        assert!(met(&answer(RunStatus::Running, false, false, true)));
        assert!(!met(&answer(RunStatus::Suspended, false, false, true)), "the meta said suspended");
        assert!(!met(&answer(RunStatus::Running, false, false, false)), "nothing landed");
    }
}
