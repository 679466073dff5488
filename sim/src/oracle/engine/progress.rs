//! The progress family: a run that ends ok did its work. Every op of its workflow has a
//! terminal, every provider and tool turn of an ok dispatch ran, every await was answered;
//! and a segment that settles ok after a failed settle dispatched again every op whose last
//! dispatch ended error, limit or cancelled (terminals that never replay); and an answer
//! (a resolution or abandon) goes to an open suspension, once, as a terminal goes to a live
//! dispatch, once; an await suspends once while its suspension is open; and a terminal
//! says how its dispatch ended (`cancelled` by a cancel, `error` by failed work); and an
//! engine refuses a start as a second live segment only while one of its own is in flight;
//! and a dangling dispatch is picked up under its own running entry, never replaced.
//!
//! Each property is judged from the apply-ordered history and the engine facts, under the
//! holder and generation rules of [`super`].

use std::collections::BTreeMap;

use store::engine::Op;

use super::super::contract::{op_key, settle_status, EntryView, Status};
use super::super::model::{t, who, Judged};
use super::super::{Expectation, Property, Witness};
use super::*;
use crate::history::{Call, FactKind, OpKind};
use crate::ledger::catalog_workflows;

/// Whether an entry belongs to a two-phase dispatch (its running entry or its terminal).
fn is_dispatch(e: &EntryView) -> bool {
    matches!(e.kind.as_str(), "agent" | "step" | "child")
}

pub const NON_REPLAYABLE_TERMINAL_RERUNS: Property = Property {
        name: "non_replayable_terminal_reruns",
        expectation: Expectation::Always,
        claim: "A segment that settles a run ok, booted while the journal's last settle was not ok, dispatched again (a new running entry) every op whose latest dispatch had ended error, limit or cancelled: those are never replayed as results.",
        not_checked: "Meta writes and appends that carry no lease; ops whose latest terminal is ok (those replay).",
        check: non_replayable_terminal_reruns,
};

fn non_replayable_terminal_reruns(j: &Judged, out: &mut Vec<Witness>) {
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
                out.push(Witness {
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

pub const COMPLETED_RUN_DID_ITS_WORK: Property = Property {
        name: "completed_run_did_its_work",
        expectation: Expectation::Always,
        claim: "A run that ends ok did all of its workflow's work: every step and agent op has a terminal entry, an ok one paid every provider turn and ran every tool turn of its dispatch at least once, and every await's suspension has its own journaled resolution.",
        not_checked: "Exactly-once (repayment is completed_dispatch_never_repaid's); runs whose workflow the world does not know; runs that do not end ok.",
        check: completed_run_did_its_work,
};

fn completed_run_did_its_work(j: &Judged, out: &mut Vec<Witness>) {
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
            FactKind::Paid { run_id, op, dispatch, turn, .. } => {
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
            out.push(Witness {
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

pub const EACH_SUSPENSION_ANSWERED_ONCE: Property = Property {
        name: "each_suspension_answered_once",
        expectation: Expectation::Always,
        claim: "Every resolution or abandon entry that applies answers an open suspension: an external or approval entry of the same run and generation, status suspended, that no earlier applied resolution or abandon answered (rulvar's resolveSuspended refuses any other target, and an attempt that lost the race to answer is no answer).",
        not_checked: "Runs no engine actor started; what the answer's value holds.",
        check: each_suspension_answered_once,
};

fn each_suspension_answered_once(j: &Judged, out: &mut Vec<Witness>) {
    out.extend(suspension_walk(j).answers);
}

pub const EACH_AWAIT_SUSPENDS_ONCE: Property = Property {
        name: "each_await_suspends_once",
        expectation: Expectation::Always,
        claim: "An external or approval suspension that applies is its await's only open one: no earlier suspension of the same run, generation and key is still unanswered (an await that replays onto its open suspension parks again and appends nothing).",
        not_checked: "Runs no engine actor started; suspensions whose earlier twin was answered (a resolution or an abandon).",
        check: each_await_suspends_once,
};

fn each_await_suspends_once(j: &Judged, out: &mut Vec<Witness>) {
    out.extend(suspension_walk(j).suspensions);
}

/// What the apply-ordered walk over suspensions and their answers found wrong.
struct SuspensionWalk {
    /// Answers (resolution or abandon) to no open suspension.
    answers: Vec<Witness>,
    /// Suspensions appended while an earlier one of the same await was still open.
    suspensions: Vec<Witness>,
}

fn suspension_walk(j: &Judged) -> SuspensionWalk {
    let runs = engine_runs(j);
    /// One suspension of the run's current generation: its await key, the call that appended
    /// it, and the call that answered it, if one did.
    struct Open<'a> {
        key: String,
        by: &'a Call,
        answered: Option<&'a Call>,
    }
    let mut walk = SuspensionWalk { answers: Vec::new(), suspensions: Vec::new() };
    // Per run, in this generation: suspension seq -> its record.
    let mut open: BTreeMap<&str, BTreeMap<u64, Open>> = BTreeMap::new();
    for &c in &j.applied {
        if !runs.contains(c.run_id.as_str()) {
            continue;
        }
        match c.op {
            OpKind::Delete => {
                open.remove(c.run_id.as_str());
            }
            OpKind::Append => {
                let Some(e) = entry_of(c) else { continue };
                let suspensions = open.entry(c.run_id.as_str()).or_default();
                if matches!(e.kind.as_str(), "external" | "approval") && e.status == "suspended" {
                    if let Some((seq, twin)) =
                        suspensions.iter().find(|(_, s)| s.key == e.key && s.answered.is_none())
                    {
                        walk.suspensions.push(Witness {
                            witness: format!(
                                "run {}: {}'s {} suspension at seq {} (t={}) for {} while {}'s at seq {seq} (t={}) was still open",
                                c.run_id,
                                who(c),
                                e.kind,
                                e.seq,
                                t(Judged::applied_ns(c)),
                                e.key,
                                who(twin.by),
                                t(Judged::applied_ns(twin.by))
                            ),
                            op: Some(c.op.as_str()),
                            call: Some(c.id),
                        });
                    }
                    suspensions.insert(e.seq, Open { key: e.key.clone(), by: c, answered: None });
                    continue;
                }
                if !matches!(e.kind.as_str(), "resolution" | "abandon") {
                    continue;
                }
                let target = e.ref_seq.map_or("no ref".to_string(), |s| format!("seq {s}"));
                let why = match e.ref_seq.and_then(|s| suspensions.get_mut(&s)) {
                    None => format!("{target}, which is no suspension of this run's journal"),
                    Some(Open { answered: Some(first), .. }) => format!(
                        "{target}, which {}'s {} had already answered at t={}",
                        who(first),
                        entry_of(first)
                            .map_or("entry".to_string(), |f| format!("{} at seq {}", f.kind, f.seq)),
                        t(Judged::applied_ns(first))
                    ),
                    Some(slot) => {
                        slot.answered = Some(c);
                        continue;
                    }
                };
                walk.answers.push(Witness {
                    witness: format!(
                        "run {}: {}'s {} at seq {} (t={}) answers {why}",
                        c.run_id,
                        who(c),
                        e.kind,
                        e.seq,
                        t(Judged::applied_ns(c))
                    ),
                    op: Some(c.op.as_str()),
                    call: Some(c.id),
                });
            }
            _ => {}
        }
    }
    walk
}

pub const EACH_DISPATCH_ENDS_ONCE: Property = Property {
        name: "each_dispatch_ends_once",
        expectation: Expectation::Always,
        claim: "Every agent, step or child terminal that applies ends a dispatch of its run's journal in this generation: a running entry of the same kind and key that no earlier applied terminal ended (a dispatch has one terminal; a cancel drains only a dispatch still live).",
        not_checked: "Runs no engine actor started; which status the terminal has.",
        check: each_dispatch_ends_once,
};

fn each_dispatch_ends_once(j: &Judged, out: &mut Vec<Witness>) {
    let runs = engine_runs(j);
    // Per run, in this generation: running seq -> (kind, key, the call that ended it, if one did).
    type Dispatches<'h> = BTreeMap<u64, (String, String, Option<&'h Call>)>;
    let mut live: BTreeMap<&str, Dispatches> = BTreeMap::new();
    for &c in &j.applied {
        if !runs.contains(c.run_id.as_str()) {
            continue;
        }
        match c.op {
            OpKind::Delete => {
                live.remove(c.run_id.as_str());
            }
            OpKind::Append => {
                let Some(e) = entry_of(c) else { continue };
                if !is_dispatch(&e) {
                    continue;
                }
                let dispatches = live.entry(c.run_id.as_str()).or_default();
                if e.status == "running" {
                    dispatches.insert(e.seq, (e.kind.clone(), e.key.clone(), None));
                    continue;
                }
                let target = e.ref_seq.map_or("no ref".to_string(), |s| format!("seq {s}"));
                let why = match e.ref_seq.and_then(|s| dispatches.get_mut(&s)) {
                    Some((kind, key, _)) if *kind != e.kind || *key != e.key => {
                        format!("{target}, a dispatch of {kind} {key:?}, not of this {} {:?}", e.kind, e.key)
                    }
                    None => format!("{target}, which is no running entry of this run's journal"),
                    Some((_, _, Some(first))) => format!(
                        "{target}, which {}'s {} had already ended at t={}",
                        who(first),
                        entry_of(first).map_or("entry".to_string(), |f| format!(
                            "{} terminal at seq {}",
                            f.status, f.seq
                        )),
                        t(Judged::applied_ns(first))
                    ),
                    Some((_, _, slot)) => {
                        *slot = Some(c);
                        continue;
                    }
                };
                out.push(Witness {
                    witness: format!(
                        "run {}: {}'s {} {} terminal at seq {} (t={}) ends {why}",
                        c.run_id,
                        who(c),
                        e.status,
                        e.kind,
                        e.seq,
                        t(Judged::applied_ns(c))
                    ),
                    op: Some(c.op.as_str()),
                    call: Some(c.id),
                });
            }
            _ => {}
        }
    }
}

pub const ONE_TERMINAL_ATTEMPT_PER_DISPATCH: Property = Property {
        name: "one_terminal_attempt_per_dispatch",
        expectation: Expectation::Always,
        claim: "A lease holder tries at most once to end a dispatch: whatever became of its first agent, step or child terminal append for a running entry (applied, refused, busy or lost), it invokes no second terminal of the same kind and key for that entry (a drain ends only a dispatch whose terminal was never tried).",
        not_checked: "Terminals tried under different grants (a later holder dispatches again under a new seq); runs no engine actor started.",
        check: one_terminal_attempt_per_dispatch,
};

fn one_terminal_attempt_per_dispatch(j: &Judged, out: &mut Vec<Witness>) {
    let runs = engine_runs(j);
    // Per (run, grant epoch, owner, running seq, kind, key): the first terminal append invoked.
    let mut tried: BTreeMap<(&str, u64, &str, u64, String, String), &Call> = BTreeMap::new();
    for c in &j.history.calls {
        if c.op != OpKind::Append || !runs.contains(c.run_id.as_str()) {
            continue;
        }
        let Some(l) = &c.lease else { continue };
        let Some(e) = entry_of(c) else { continue };
        if !is_dispatch(&e) || e.status == "running" {
            continue;
        }
        let Some(of) = e.ref_seq else { continue };
        let key = (c.run_id.as_str(), l.epoch.0, l.owner.as_str(), of, e.kind.clone(), e.key.clone());
        match tried.get(&key) {
            None => {
                tried.insert(key, c);
            }
            Some(first) => {
                let fate = match (&first.applied, &first.outcome) {
                    (Some(_), _) => "applied".to_string(),
                    (None, crate::history::Outcome::Err { code, .. }) => format!("refused {code}"),
                    (None, _) => "with no known outcome".to_string(),
                };
                out.push(Witness {
                    witness: format!(
                        "run {}: {} tried a second {} terminal ({}) for {} {:?} dispatch seq {of} at t={}; its first ({}, t={}) was {fate}",
                        c.run_id,
                        who(c),
                        e.kind,
                        e.status,
                        e.kind,
                        e.key,
                        t(c.invoked_ns),
                        entry_of(first).map_or("?".to_string(), |f| f.status),
                        t(first.invoked_ns),
                    ),
                    op: Some(c.op.as_str()),
                    call: Some(c.id),
                });
            }
        }
    }
}

pub const OK_RESULTS_ARE_REPLAYED: Property = Property {
        name: "ok_results_are_replayed",
        expectation: Expectation::Always,
        claim: "An op whose latest dispatch in its run's journal (this generation) ended ok or escalated is replayed from that result, never dispatched again: no running entry of the same kind and key applies after that terminal (docs/engine-model.md: a resume matches an op against its latest attempt).",
        not_checked: "Ops whose latest dispatch ended limit (replayed only once the run settled ok), error or cancelled (those rerun: `non_replayable_terminal_reruns`); runs no engine actor started.",
        check: ok_results_are_replayed,
};

fn ok_results_are_replayed(j: &Judged, out: &mut Vec<Witness>) {
    let runs = engine_runs(j);
    // Per run, in this generation: (kind, key) -> (latest running seq, its ok terminal's call).
    type Latest<'h> = BTreeMap<(String, String), (u64, Option<&'h Call>)>;
    let mut latest: BTreeMap<&str, Latest> = BTreeMap::new();
    for &c in &j.applied {
        if !runs.contains(c.run_id.as_str()) {
            continue;
        }
        match c.op {
            OpKind::Delete => {
                latest.remove(c.run_id.as_str());
            }
            OpKind::Append => {
                let Some(e) = entry_of(c) else { continue };
                if !is_dispatch(&e) {
                    continue;
                }
                let ops = latest.entry(c.run_id.as_str()).or_default();
                let op = (e.kind.clone(), e.key.clone());
                if e.status == "running" {
                    if let Some((rseq, Some(done))) = ops.get(&op) {
                        out.push(Witness {
                            witness: format!(
                                "run {}: {} dispatched {} {:?} again (running entry at seq {}, t={}) though its latest dispatch (seq {rseq}) had ended {} at t={}: an ok result replays",
                                c.run_id,
                                who(c),
                                e.kind,
                                e.key,
                                e.seq,
                                t(Judged::applied_ns(c)),
                                entry_of(done).map_or("ok".to_string(), |d| d.status),
                                t(Judged::applied_ns(done)),
                            ),
                            op: Some(c.op.as_str()),
                            call: Some(c.id),
                        });
                    }
                    ops.insert(op, (e.seq, None));
                } else if let Some((rseq, slot)) = ops.get_mut(&op) {
                    if e.ref_seq == Some(*rseq) {
                        *slot = matches!(e.status.as_str(), "ok" | "escalated").then_some(c);
                    }
                }
            }
            _ => {}
        }
    }
}

pub const DISPATCHES_END_BEFORE_THE_SETTLE: Property = Property {
        name: "dispatches_end_before_the_settle",
        expectation: Expectation::Always,
        claim: "A holder that settles a segment ok or cancelled first tried to end every dispatch it had under way in it: each agent, step or child running entry it appended (applied) has a terminal append of the same kind and key invoked under the same grant before the grant's run_settle is invoked, and so does each dangling dispatch of an earlier segment it picked up and went on with under the grant (paid a turn of, ran a tool of): a terminal naming its running entry (a cancel drains the dispatch it cut off with a `cancelled` terminal, whichever segment opened it, and an append in flight when the cancel came completes and counts; docs/engine-model.md 3.2 step 1).",
        not_checked: "Segments that settle error, suspended or exhausted (a dispatch that failed on its own stays dangling; a suspended child run leaves its parent's dispatch open); a dangling dispatch from an earlier segment that this grant picked up but neither paid a turn of nor ran a tool of before the settle; runs no engine actor started.",
        check: dispatches_end_before_the_settle,
};

/// A dispatch a grant has under way: one it started (its running entry), or one it picked
/// up dangling from an earlier segment and went on with (paid a turn of, ran a tool of).
enum Underway<'h> {
    Started { kind: String, key: String, running: &'h Call },
    PickedUp { op: String, first_ns: u64 },
}

fn dispatches_end_before_the_settle(j: &Judged, out: &mut Vec<Witness>) {
    let runs = engine_runs(j);
    let facts = &j.history.facts;
    // Per (run, grant epoch, owner), in invocation order: the dispatches under way since the
    // grant's last settle attempt and not yet given a terminal attempt (running seq -> how).
    type Open<'h> = BTreeMap<u64, Underway<'h>>;
    let mut open: BTreeMap<(&str, u64, &str), Open> = BTreeMap::new();
    // Dispatches a grant gave a terminal attempt, and each identity's latest lease on a run.
    let mut ended: std::collections::BTreeSet<(&str, u64, &str, u64)> = Default::default();
    let mut holding: BTreeMap<(u32, u32, &str, &str), (u64, &str)> = BTreeMap::new();
    let mut next_fact = 0;
    for c in &j.history.calls {
        // The identity's work on a dangling dispatch before this call, under the grant it
        // held then.
        while let Some(f) = facts.get(next_fact).filter(|f| f.invoked_before <= c.id) {
            next_fact += 1;
            let (FactKind::Paid { run_id, op, dispatch, .. } | FactKind::Tool { run_id, op, dispatch, .. }) =
                &f.kind
            else {
                continue;
            };
            let Some(&(epoch, owner)) =
                holding.get(&(f.node, f.incarnation, f.owner.as_str(), run_id.as_str()))
            else {
                continue;
            };
            let grant = (run_id.as_str(), epoch, owner);
            if !ended.contains(&(grant.0, epoch, owner, *dispatch)) {
                let under_way = open.entry(grant).or_default();
                under_way
                    .entry(*dispatch)
                    .or_insert(Underway::PickedUp { op: op.clone(), first_ns: f.at_ns });
            }
        }
        if let Some(l) = c.lease.as_ref().or(c.granted.as_ref().filter(|_| c.outcome.is_ok())) {
            holding.insert(
                (c.node, c.incarnation, l.owner.as_str(), c.run_id.as_str()),
                (l.epoch.0, l.owner.as_str()),
            );
        }
        if c.op != OpKind::Append || !runs.contains(c.run_id.as_str()) {
            continue;
        }
        let Some(l) = &c.lease else { continue };
        let Some(e) = entry_of(c) else { continue };
        let held = (c.run_id.as_str(), l.epoch.0, l.owner.as_str());
        let grant = open.entry(held).or_default();
        if let Some(status) = settle_status(&e) {
            let under_way = std::mem::take(grant);
            if !matches!(status, Status::Ok | Status::Cancelled) {
                continue;
            }
            for (seq, how) in under_way {
                let what = match how {
                    Underway::Started { kind, key, running } => format!(
                        "its {kind} {key:?} dispatch (running entry at seq {seq}, applied t={})",
                        t(Judged::applied_ns(running))
                    ),
                    Underway::PickedUp { op, first_ns } => format!(
                        "the dangling dispatch of {op:?} it picked up (running entry at seq {seq}, from an earlier segment; its work on it from t={})",
                        t(first_ns)
                    ),
                };
                out.push(Witness {
                    witness: format!(
                        "run {}: {} settled {} (run_settle at seq {}, t={}) with {what} never given a terminal",
                        c.run_id,
                        who(c),
                        status.word(),
                        e.seq,
                        t(c.invoked_ns),
                    ),
                    op: Some(c.op.as_str()),
                    call: Some(c.id),
                });
            }
            continue;
        }
        if !is_dispatch(&e) {
            continue;
        }
        if e.status == "running" {
            if c.applied.is_some() {
                grant.insert(
                    e.seq,
                    Underway::Started { kind: e.kind.clone(), key: e.key.clone(), running: c },
                );
            }
        } else if let Some(of) = e.ref_seq {
            let ends = match grant.get(&of) {
                Some(Underway::Started { kind, key, .. }) => *kind == e.kind && *key == e.key,
                Some(Underway::PickedUp { .. }) | None => true,
            };
            if ends {
                grant.remove(&of);
                ended.insert((held.0, held.1, held.2, of));
            }
        }
    }
}

pub const TERMINALS_SAY_HOW_DISPATCHES_ENDED: Property = Property {
        name: "terminals_say_how_dispatches_ended",
        expectation: Expectation::Always,
        claim: "An agent, step or child terminal that applies says how its dispatch ended: `cancelled` only when a cancel cut it off (the grant that wrote it settles that segment cancelled: its next run_settle append says so; docs/engine-model.md 2.3, the drain), and `error` only when its work failed, which no work in this world does (the simulated provider and tools always answer).",
        not_checked: "`ok`, `limit` and `escalated` terminals (the progress and settle properties judge what they carry); a cancelled terminal whose grant made no run_settle append after it (a crash, a refused settle); terminals without a lease.",
        check: terminals_say_how_dispatches_ended,
};

fn terminals_say_how_dispatches_ended(j: &Judged, out: &mut Vec<Witness>) {
    let runs = engine_runs(j);
    let calls = &j.history.calls;
    for (i, c) in calls.iter().enumerate() {
        if c.op != OpKind::Append || c.applied.is_none() || !runs.contains(c.run_id.as_str()) {
            continue;
        }
        let (Some(lease), Some(e)) = (&c.lease, entry_of(c)) else { continue };
        if !is_dispatch(&e) || e.status == "running" {
            continue;
        }
        let why = match e.status.as_str() {
            "error" => Some("no work in this world fails (the simulated provider and tools always answer)".to_string()),
            "cancelled" => calls[i + 1..]
                .iter()
                .filter(|d| {
                    d.op == OpKind::Append
                        && d.run_id == c.run_id
                        && (d.node, d.incarnation) == (c.node, c.incarnation)
                        && d.lease.as_ref() == Some(lease)
                })
                .find_map(|d| entry_of(d).and_then(|s| settle_status(&s)).map(|s| (d, s)))
                .filter(|(_, s)| *s != Status::Cancelled)
                .map(|(d, s)| format!("the same grant then settled the segment {} (run_settle at t={}): no cancel cut the dispatch off", s.word(), t(d.invoked_ns))),
            _ => None,
        };
        if let Some(why) = why {
            out.push(Witness {
                witness: format!(
                    "run {}: {} ended its {} {:?} dispatch (running entry at seq {}) {} at seq {} (t={}), but {why}",
                    c.run_id,
                    who(c),
                    e.kind,
                    e.key,
                    e.ref_seq.map_or("?".to_string(), |s| s.to_string()),
                    e.status,
                    e.seq,
                    t(Judged::applied_ns(c)),
                ),
                op: Some(c.op.as_str()),
                call: Some(c.id),
            });
        }
    }
}

pub const A_DANGLING_DISPATCH_IS_PICKED_UP: Property = Property {
        name: "a_dangling_dispatch_is_picked_up",
        expectation: Expectation::Always,
        claim: "A new dispatch of an op (an applied running entry of its kind and key) opens only when that op's latest running entry in the journal already has its terminal: a dangling dispatch is redispatched under its own running entry, from its checkpoint (docs/engine-model.md 4.1, 4.4), never replaced by a fresh one that pays its checkpointed turns again.",
        not_checked: "Appends the store did not apply (a lost running append is judged as the journal holds it); runs no engine actor started.",
        check: a_dangling_dispatch_is_picked_up,
};

fn a_dangling_dispatch_is_picked_up(j: &Judged, out: &mut Vec<Witness>) {
    let runs = engine_runs(j);
    // Per run: the dispatches with no terminal yet, by running seq: (kind, key, its append).
    let mut open: BTreeMap<&str, BTreeMap<u64, (String, String, &Call)>> = BTreeMap::new();
    for &c in j.applied.iter().filter(|c| runs.contains(c.run_id.as_str())) {
        match c.op {
            OpKind::Delete => {
                open.remove(c.run_id.as_str());
            }
            OpKind::Append => {
                let Some(e) = entry_of(c).filter(is_dispatch) else { continue };
                let run = open.entry(c.run_id.as_str()).or_default();
                if e.status != "running" {
                    if let Some(r) = e.ref_seq {
                        run.remove(&r);
                    }
                    continue;
                }
                let dangling = run.iter().find(|(_, (kind, key, _))| *kind == e.kind && *key == e.key);
                if let Some((seq, (_, _, w))) = dangling {
                    out.push(Witness {
                        witness: format!(
                            "run {}: {}'s running entry seq {} at t={} opened a new dispatch of {} {} while the dispatch {}'s append opened at seq {seq} (t={}) had no terminal",
                            c.run_id,
                            who(c),
                            e.seq,
                            t(Judged::applied_ns(c)),
                            e.kind,
                            e.key,
                            who(w),
                            t(Judged::applied_ns(w))
                        ),
                        op: Some(c.op.as_str()),
                        call: Some(c.id),
                    });
                }
                run.insert(e.seq, (e.kind.clone(), e.key.clone(), c));
            }
            _ => {}
        }
    }
}

pub const A_LIVE_REFUSAL_HAS_A_LIVE_SEGMENT: Property = Property {
        name: "a_live_refusal_has_a_live_segment",
        expectation: Expectation::Always,
        claim: "An engine refuses to start a segment of a run as a second live one (docs/engine-model.md 1.1 and O5: at most one live segment per run per engine) only while a segment of that run it started is still in flight: a start whose outcome (a settle or a failure) it has not yet reported.",
        not_checked: "Worker drives (no fact marks their start): only the starts a host reports (a submission, an explicit resume) and the refusals of that host's engine.",
        check: a_live_refusal_has_a_live_segment,
};

/// The words of the engine's refusal of a second live segment.
pub(in crate::oracle) const LIVE_REFUSAL: &str = "already has a live segment";

fn a_live_refusal_has_a_live_segment(j: &Judged, out: &mut Vec<Witness>) {
    // Per (engine, run): how many starts it reported that have not yet ended.
    let mut open: BTreeMap<(&str, &str), usize> = BTreeMap::new();
    for f in &j.history.facts {
        let owner = f.owner.as_str();
        match &f.kind {
            FactKind::Submitted { run_id, .. } | FactKind::Resumed { run_id, .. } => {
                *open.entry((owner, run_id.as_str())).or_default() += 1;
            }
            FactKind::Settled { run_id, .. } | FactKind::Failed { run_id, .. } => {
                let Some(starts) = open.get_mut(&(owner, run_id.as_str())) else { continue };
                // This outcome ends one start (outcomes end the starts in any order: the
                // count is what matters).
                *starts = starts.saturating_sub(1);
                let FactKind::Failed { error, .. } = &f.kind else { continue };
                if error.contains(LIVE_REFUSAL) && *starts == 0 {
                    out.push(Witness {
                        witness: format!(
                            "{owner} at t={} refused to start run {run_id} as already live, but every segment of it that engine started had ended: {error}",
                            t(f.at_ns)
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

pub const A_LIVE_SEGMENT_BLOCKS_A_SECOND_START: Property = Property {
    name: "a_live_segment_blocks_a_second_start",
    expectation: Expectation::Always,
    claim: "An engine identity acquires a run only when every grant of that run it acquired before has been given back (its release invoked, or a delete of the run under it applied): a second run or resume of a run whose segment is live in the same engine is refused before any side effect (docs/engine-model.md 1.1 and O5: at most one live segment per run per engine), and a worker skips runs active in its engine.",
    not_checked: "Grants whose process died holding them (a restarted process is another engine); what a second start read before its refusal (reads are no side effect).",
    check: a_live_segment_blocks_a_second_start,
};

fn a_live_segment_blocks_a_second_start(j: &Judged, out: &mut Vec<Witness>) {
    let runs = engine_runs(j);
    // Per (process, identity, run): the grant it holds and has not given back.
    let mut held: BTreeMap<(u32, u32, &str, &str), &Call> = BTreeMap::new();
    for c in j.history.calls.iter().filter(|c| runs.contains(c.run_id.as_str())) {
        match c.op {
            OpKind::Acquire => {
                let Some(owner) = c.args.owner.as_deref() else { continue };
                let key = (c.node, c.incarnation, owner, c.run_id.as_str());
                if let Some(live) = held.get(&key) {
                    out.push(
                        Witness::new(format!(
                            "{owner} on n{} acquired run {} at t={} while its own grant of epoch {} (granted at t={}) was not given back: a second start of a live run in one engine must be refused before any side effect",
                            c.node,
                            c.run_id,
                            t(c.invoked_ns),
                            Judged::granted_epoch(live).unwrap_or_default(),
                            t(live.returned_ns.unwrap_or(live.invoked_ns))
                        ))
                        .on(c.op, c.id),
                    );
                    held.remove(&key);
                    continue;
                }
                if c.outcome.is_ok() && c.granted.is_some() {
                    held.insert(key, c);
                }
            }
            // A release gives the grant back once invoked; a delete of the run under it
            // does once it takes effect (it removed the lease row).
            OpKind::Release | OpKind::Delete if c.op == OpKind::Release || c.applied.is_some() => {
                let Some(l) = &c.lease else { continue };
                let key = (c.node, c.incarnation, l.owner.as_str(), l.run_id.as_str());
                if held.get(&key).is_some_and(|g| Judged::granted_epoch(g) == Some(l.epoch.0)) {
                    held.remove(&key);
                }
            }
            _ => {}
        }
    }
}

pub const A_HOLDER_APPENDS_ABOVE_ITS_JOURNAL: Property = Property {
        name: "a_holder_appends_above_its_journal",
        expectation: Expectation::Always,
        claim: "No engine append made under the run's latest grant is refused as a journal order violation (A5): the holder read the journal under that grant, nobody else may append while it holds it, and it mints each seq above everything it read and appended since (docs/engine-model.md 2.1, a failed append consumes its seq), so only a writer that lost its lease, or writes without one, can fall behind the tail.",
        not_checked: "Appends without a lease; appends whose grant another grant or a delete of the run had followed by the time the store answered (the store properties judge the refusal itself).",
        check: a_holder_appends_above_its_journal,
};

fn a_holder_appends_above_its_journal(j: &Judged, out: &mut Vec<Witness>) {
    let runs = engine_runs(j);
    for c in &j.history.calls {
        if c.op != OpKind::Append || !runs.contains(c.run_id.as_str()) {
            continue;
        }
        if !matches!(&c.outcome, crate::history::Outcome::Err { code, .. } if code == "journal_order_violation")
        {
            continue;
        }
        let (Some(lease), Some(seen)) = (&c.lease, c.seen_at) else { continue };
        let latest = j.applied.iter().rfind(|d| {
            d.run_id == c.run_id && order(d) < seen && matches!(d.op, OpKind::Acquire | OpKind::Delete)
        });
        let current = latest
            .is_some_and(|d| d.op == OpKind::Acquire && Judged::granted_epoch(d) == Some(lease.epoch.0));
        if !current {
            continue;
        }
        let held = j.applied.iter().filter(|d| d.run_id == c.run_id && order(d) < seen).fold(
            None::<u64>,
            |max, d| match d.op {
                OpKind::Delete => None,
                OpKind::Append => d.args.seq.map_or(max, |s| Some(max.map_or(s, |m| m.max(s)))),
                _ => max,
            },
        );
        out.push(Witness {
            witness: format!(
                "run {}: {}'s append of seq {} under epoch {}, the run's latest grant, was refused as out of order at t={} (the journal held seq {} by then): the holder minted a seq at or below its own journal's tail",
                c.run_id,
                who(c),
                c.args.seq.map_or("?".to_string(), |s| s.to_string()),
                lease.epoch.0,
                t(c.returned_ns.unwrap_or(c.invoked_ns)),
                held.map_or("none".to_string(), |s| s.to_string()),
            ),
            op: Some(c.op.as_str()),
            call: Some(c.id),
        });
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use crate::oracle::testkit::engine::*;

    #[test]
    fn a_second_acquire_while_the_engines_own_grant_is_live_is_caught() {
        use crate::history::{Args, OpKind};
        // Host h holds run r (epoch 1); then `between` happens, then `who` on `node` acquires r.
        let second = |between: &str, who: &str, node: u32| {
            let mut h = HistoryBuilder::engine_run();
            let a = h.acquire(0, "h", "r", 1);
            match between {
                "release" => h.push(0, OpKind::Release, "r", Some(a), Args::default(), None),
                "delete" => h.delete(0, Some(&a), "r"),
                "refused delete" => {
                    h.delete(0, Some(&a), "r");
                    h.refuse_last("busy");
                }
                _ => {}
            }
            h.acquire(node, who, "r", 2);
            h.judge("a_live_segment_blocks_a_second_start")
        };
        let v = second("", "h", 0);
        assert_eq!(v.len(), 1, "{v:?}");
        assert!(v[0].witness.contains("was not given back"), "{}", v[0].witness);
        assert!(second("release", "h", 0).is_empty());
        assert!(second("delete", "h", 0).is_empty(), "the delete removed the lease row");
        assert_eq!(second("refused delete", "h", 0).len(), 1, "a refused delete gives nothing back");
        assert!(second("", "other", 0).is_empty(), "another identity of the process");
        assert!(second("", "h", 1).is_empty(), "another process");
    }

    #[test]
    fn a_dangling_dispatch_replaced_by_a_fresh_one_is_caught() {
        let p = "a_dangling_dispatch_is_picked_up";
        // Dispatch 1 ended error; dispatch 2 (its rerun) dangles after a crash; the next holder
        // opens dispatch 3 instead of picking 2 up.
        let run = |pick_up: bool| {
            let mut h = HistoryBuilder::engine_run();
            let a = h.acquire(0, "w", "r", 1);
            h.append(0, &a, "r", op_entry(1, "agent", "op:0:one", "running", None));
            h.append(0, &a, "r", op_entry(2, "agent", "op:0:one", "error", Some(1)));
            h.append(0, &a, "r", op_entry(3, "agent", "op:0:one", "running", None));
            let b = h.acquire(1, "w2", "r", 2);
            if pick_up {
                h.append(1, &b, "r", op_entry(4, "agent", "op:0:one", "ok", Some(3)));
            } else {
                h.append(1, &b, "r", op_entry(4, "agent", "op:0:one", "running", None));
            }
            h.judge(p)
        };
        assert!(run(true).is_empty());
        let v = run(false);
        assert_eq!(v.len(), 1, "{v:?}");
        assert!(v[0].witness.contains("had no terminal"), "{}", v[0].witness);
        // Another op's dispatch, and a dispatch after a delete, are new ones.
        let mut h = HistoryBuilder::engine_run();
        let a = h.acquire(0, "w", "r", 1);
        h.append(0, &a, "r", op_entry(1, "agent", "op:0:one", "running", None));
        h.append(0, &a, "r", op_entry(2, "agent", "op:1:two", "running", None));
        h.delete(0, Some(&a), "r");
        let b = h.acquire(0, "w", "r", 2);
        h.append(0, &b, "r", op_entry(0, "agent", "op:0:one", "running", None));
        assert!(h.judge(p).is_empty());
    }

    #[test]
    fn a_live_refusal_with_no_segment_in_flight_is_caught() {
        use crate::history::FactKind;
        let p = "a_live_refusal_has_a_live_segment";
        let resumed = || FactKind::Resumed { run_id: "r".into(), workflow: "happy".into() };
        let settled =
            || FactKind::Settled { run_id: "r".into(), status: "ok".into(), value: None, segment: 1 };
        let failed =
            |error: &str| FactKind::Failed { run_id: "r".into(), what: "retry".into(), error: error.into() };
        let refused = || failed("config error: run r already has a live segment in this engine");
        // The host's submission is still running when its retry is refused: lawful.
        let mut h = HistoryBuilder::engine_run();
        h.fact(0, "host", resumed());
        h.fact(0, "host", refused());
        h.fact(0, "host", settled());
        assert!(h.judge(p).is_empty());
        // The retry is refused after the submission settled, and after a retry that failed in
        // its reads: the engine kept a segment that had ended.
        for ended in [settled(), failed("store error: busy")] {
            let mut h = HistoryBuilder::engine_run();
            h.fact(0, "host", ended);
            h.fact(0, "host", resumed());
            h.fact(0, "host", refused());
            let v = h.judge(p);
            assert_eq!(v.len(), 1, "{v:?}");
            assert!(
                v[0].witness.contains("every segment of it that engine started had ended"),
                "{}",
                v[0].witness
            );
        }
        // Another host's segment in flight is not this engine's: its refusal is still caught;
        // a refusal by an engine that reported no start of the run is not judged.
        let mut h = HistoryBuilder::engine_run();
        h.fact(0, "host", settled());
        h.fact(1, "other", resumed());
        h.fact(0, "host", resumed());
        h.fact(0, "host", refused());
        assert_eq!(h.judge(p).len(), 1);
        let mut h = HistoryBuilder::engine_run();
        h.fact(1, "worker", refused());
        assert!(h.judge(p).is_empty());
    }

    #[test]
    fn a_terminal_that_misstates_how_its_dispatch_ended_is_caught() {
        let p = "terminals_say_how_dispatches_ended";
        let ended = |terminal: &str, settled: &str| {
            let mut h = HistoryBuilder::engine_run();
            let a = h.acquire(0, "w", "r", 1);
            h.append(0, &a, "r", op_entry(1, "agent", "op:0:one", "running", None));
            h.append(0, &a, "r", op_entry(2, "agent", "op:0:one", terminal, Some(1)));
            h.append(0, &a, "r", settle(3, settled));
            h.judge(p)
        };
        // The drain of a cancel, and work that returned: lawful.
        assert!(ended("cancelled", "cancelled").is_empty());
        assert!(ended("ok", "ok").is_empty());
        assert!(ended("limit", "error").is_empty());
        // A drain written as an error, and a cancelled terminal in a segment no cancel ended.
        let v = ended("error", "cancelled");
        assert!(v.len() == 1 && v[0].witness.contains("no work in this world fails"), "{v:?}");
        let v = ended("cancelled", "ok");
        assert!(v.len() == 1 && v[0].witness.contains("settled the segment ok"), "{v:?}");
        // Another grant's settle says nothing about this one's terminal.
        let mut h = HistoryBuilder::engine_run();
        let a = h.acquire(0, "w", "r", 1);
        h.append(0, &a, "r", op_entry(1, "agent", "op:0:one", "running", None));
        h.append(0, &a, "r", op_entry(2, "agent", "op:0:one", "cancelled", Some(1)));
        let b = h.acquire(1, "v", "r", 2);
        h.append(1, &b, "r", settle(3, "ok"));
        assert!(h.judge(p).is_empty());
    }

    #[test]
    fn a_holder_behind_its_own_tail_is_caught() {
        let p = "a_holder_appends_above_its_journal";
        let mut h = HistoryBuilder::engine_run();
        let a = h.acquire(0, "w", "r", 1);
        h.append(0, &a, "r", op_entry(0, "agent", "op:0:one", "running", None));
        h.append(0, &a, "r", op_entry(2, "agent", "op:0:one", "ok", Some(0)));
        // The latest grant's holder appends seq 2 again: it minted from the journal's length.
        h.append_lost(0, &a, "r", settle(2, "ok"), "journal_order_violation");
        let v = h.judge(p);
        assert_eq!(v.len(), 1, "{v:?}");
        assert!(v[0].witness.contains("journal held seq 2"), "{}", v[0].witness);
        // A superseded holder behind the tail is the fence's business, not this property's.
        let mut h = HistoryBuilder::engine_run();
        let a = h.acquire(0, "w", "r", 1);
        let b = h.acquire(1, "v", "r", 2);
        h.append(1, &b, "r", op_entry(0, "agent", "op:0:one", "running", None));
        h.append_lost(
            0,
            &a,
            "r",
            op_entry(0, "agent", "op:0:one", "running", None),
            "journal_order_violation",
        );
        assert!(h.judge(p).is_empty());
        // A busy refusal of the holder is no order violation.
        let mut h = HistoryBuilder::engine_run();
        let a = h.acquire(0, "w", "r", 1);
        h.append_lost(0, &a, "r", op_entry(0, "agent", "op:0:one", "running", None), "busy");
        assert!(h.judge(p).is_empty());
    }

    #[test]
    fn a_dispatch_ended_twice_is_caught() {
        let mut h = HistoryBuilder::engine_run();
        let a = h.acquire(0, "w", "r", 1);
        h.append(0, &a, "r", op_entry(1, "agent", "op:0:one", "running", None));
        h.append(0, &a, "r", op_entry(2, "agent", "op:0:one", "ok", Some(1)));
        h.append(0, &a, "r", op_entry(3, "step", "op:1:two", "running", None));
        assert!(h.judge("each_dispatch_ends_once").is_empty());
        // A cancel drain over the dispatch that had just ended.
        h.append(0, &a, "r", op_entry(4, "agent", "op:0:one", "cancelled", Some(1)));
        let v = h.judge("each_dispatch_ends_once");
        assert_eq!(v.len(), 1, "{v:?}");
        assert!(v[0].witness.contains("had already ended"), "{}", v[0].witness);
        // A terminal of another op's dispatch, and one of no dispatch at all.
        h.append(0, &a, "r", op_entry(5, "agent", "op:0:one", "ok", Some(3)));
        h.append(0, &a, "r", op_entry(6, "step", "op:1:two", "ok", Some(9)));
        let v = h.judge("each_dispatch_ends_once");
        assert_eq!(v.len(), 3, "{v:?}");
        assert!(v[1].witness.contains("a dispatch of step"), "{}", v[1].witness);
        assert!(v[2].witness.contains("no running entry"), "{}", v[2].witness);
        // After a delete the seqs start again.
        h.delete(0, Some(&a), "r");
        h.append(0, &a, "r", op_entry(1, "agent", "op:0:one", "running", None));
        h.append(0, &a, "r", op_entry(2, "agent", "op:0:one", "ok", Some(1)));
        assert_eq!(h.judge("each_dispatch_ends_once").len(), 3);
    }

    #[test]
    fn an_ok_result_dispatched_again_is_caught() {
        let mut h = HistoryBuilder::engine_run();
        let a = h.acquire(0, "w", "r", 1);
        h.append(0, &a, "r", op_entry(1, "agent", "op:0:one", "running", None));
        h.append(0, &a, "r", op_entry(2, "agent", "op:0:one", "limit", Some(1)));
        // A rerun after a limit is allowed, and so is one of a dispatch still open.
        h.append(0, &a, "r", op_entry(3, "agent", "op:0:one", "running", None));
        h.append(0, &a, "r", op_entry(4, "step", "op:1:two", "running", None));
        let b = h.acquire(1, "v", "r", 2);
        h.append(1, &b, "r", op_entry(5, "step", "op:1:two", "running", None));
        h.append(1, &b, "r", op_entry(6, "step", "op:1:two", "ok", Some(5)));
        h.append(1, &b, "r", op_entry(7, "agent", "op:0:one", "ok", Some(3)));
        assert!(h.judge("ok_results_are_replayed").is_empty());
        // The agent's latest dispatch ended ok: a new running entry for it is a rerun.
        let c = h.acquire(0, "w", "r", 3);
        h.append(0, &c, "r", op_entry(8, "agent", "op:0:one", "running", None));
        let v = h.judge("ok_results_are_replayed");
        assert_eq!(v.len(), 1, "{v:?}");
        assert!(v[0].witness.contains("latest dispatch (seq 3) had ended ok"), "{}", v[0].witness);
        // After a delete the run starts over.
        h.delete(0, Some(&c), "r");
        h.append(0, &c, "r", op_entry(1, "step", "op:1:two", "running", None));
        assert_eq!(h.judge("ok_results_are_replayed").len(), 1);
    }

    #[test]
    fn a_clean_or_cancelled_settle_over_a_dispatch_never_ended_is_caught() {
        let mut h = HistoryBuilder::engine_run();
        let a = h.acquire(0, "w", "r", 1);
        h.append(0, &a, "r", op_entry(1, "agent", "op:0:one", "running", None));
        h.append(0, &a, "r", op_entry(2, "agent", "op:0:one", "cancelled", Some(1)));
        h.append(0, &a, "r", settle(3, "cancelled"));
        assert!(h.judge("dispatches_end_before_the_settle").is_empty());
        // The next grant's dispatch is cut off, and its cancel settles without the drain.
        let b = h.acquire(1, "v", "r", 2);
        h.append(1, &b, "r", op_entry(4, "step", "op:1:two", "running", None));
        h.append(1, &b, "r", settle(5, "cancelled"));
        let v = h.judge("dispatches_end_before_the_settle");
        assert_eq!(v.len(), 1, "{v:?}");
        assert!(v[0].witness.contains("running entry at seq 4"), "{}", v[0].witness);
        // A terminal whose append was refused still counts as tried; an error settle demands
        // nothing (a dispatch that failed on its own stays dangling).
        let c = h.acquire(0, "w", "r", 3);
        h.append(0, &c, "r", op_entry(6, "step", "op:1:two", "running", None));
        h.append_lost(0, &c, "r", op_entry(7, "step", "op:1:two", "ok", Some(6)), "SQLITE_BUSY");
        h.append(0, &c, "r", settle(8, "ok"));
        let d = h.acquire(1, "v", "r", 4);
        h.append(1, &d, "r", op_entry(9, "step", "op:1:two", "running", None));
        h.append(1, &d, "r", settle(10, "error"));
        assert_eq!(h.judge("dispatches_end_before_the_settle").len(), 1);
        // A terminal of another key does not end the dispatch.
        let e = h.acquire(0, "w", "r", 5);
        h.append(0, &e, "r", op_entry(11, "step", "op:1:two", "running", None));
        h.append(0, &e, "r", op_entry(12, "step", "op:2:three", "ok", Some(11)));
        h.append(0, &e, "r", settle(13, "ok"));
        assert_eq!(h.judge("dispatches_end_before_the_settle").len(), 2);
    }

    #[test]
    fn a_cancel_over_a_picked_up_dispatch_it_went_on_with_must_drain_it() {
        let mut h = HistoryBuilder::engine_run();
        let a = h.acquire(0, "w", "r", 1);
        h.append(0, &a, "r", op_entry(1, "agent", "op:0:a", "running", None));
        // w died with the dispatch dangling. v picks it up, pays a turn, and is cancelled.
        let b = h.acquire(1, "v", "r", 2);
        h.pay(1, "v", "r", 1, 0);
        h.append(1, &b, "r", op_entry(2, "agent", "op:0:a", "cancelled", Some(1)));
        h.append(1, &b, "r", settle(3, "cancelled"));
        assert!(h.judge("dispatches_end_before_the_settle").is_empty());
        // A later dispatch of the same op, dangling again, picked up and cut without a drain.
        let c = h.acquire(0, "w", "r", 3);
        h.append(0, &c, "r", op_entry(4, "agent", "op:0:a", "running", None));
        let d = h.acquire(1, "v", "r", 4);
        h.pay(1, "v", "r", 4, 0);
        h.append(1, &d, "r", settle(5, "cancelled"));
        let v = h.judge("dispatches_end_before_the_settle");
        assert_eq!(v.len(), 1, "{v:?}");
        assert!(
            v[0].witness.contains("dangling dispatch of \"a\" it picked up (running entry at seq 4"),
            "{}",
            v[0].witness
        );
        // A grant that picked the dispatch up but never went on with it owes nothing; nor
        // does another identity's work under its own grant count against this one.
        let e = h.acquire(0, "w", "r", 5);
        h.pay(1, "v", "r", 4, 1);
        h.append(0, &e, "r", settle(6, "cancelled"));
        assert_eq!(h.judge("dispatches_end_before_the_settle").len(), 1);
    }

    #[test]
    fn a_second_terminal_attempt_is_caught_whatever_the_first_became() {
        let mut h = HistoryBuilder::engine_run();
        let a = h.acquire(0, "w", "r", 1);
        h.append(0, &a, "r", op_entry(1, "agent", "op:0:one", "running", None));
        h.append_lost(0, &a, "r", op_entry(2, "agent", "op:0:one", "ok", Some(1)), "SQLITE_BUSY");
        assert!(h.judge("one_terminal_attempt_per_dispatch").is_empty());
        // The drain ends the same dispatch again though its terminal was already tried.
        h.append(0, &a, "r", op_entry(2, "agent", "op:0:one", "cancelled", Some(1)));
        let v = h.judge("one_terminal_attempt_per_dispatch");
        assert_eq!(v.len(), 1, "{v:?}");
        assert!(v[0].witness.contains("was refused SQLITE_BUSY"), "{}", v[0].witness);
        // A later holder's terminal for the same seq is another grant's attempt.
        let b = h.acquire(1, "v", "r", 2);
        h.append(1, &b, "r", op_entry(3, "agent", "op:0:one", "cancelled", Some(1)));
        assert_eq!(h.judge("one_terminal_attempt_per_dispatch").len(), 1);
        // Another dispatch of the same holder is judged on its own.
        h.append(1, &b, "r", op_entry(4, "step", "op:1:two", "running", None));
        h.append(1, &b, "r", op_entry(5, "step", "op:1:two", "ok", Some(4)));
        assert_eq!(h.judge("one_terminal_attempt_per_dispatch").len(), 1);
        h.append(1, &b, "r", op_entry(6, "step", "op:1:two", "cancelled", Some(4)));
        assert_eq!(h.judge("one_terminal_attempt_per_dispatch").len(), 2);
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
        let facts = |h: &mut HistoryBuilder| {
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
    fn an_await_suspending_again_while_its_suspension_is_open_is_caught() {
        use crate::oracle::testkit::engine::{lease, HistoryBuilder};
        let mut h = HistoryBuilder::engine_run();
        let w = h.acquire(0, "w", "r", 1);
        h.append(0, &w, "r", op_entry(0, "external", "await:k", "suspended", None));
        h.append(0, &w, "r", op_entry(1, "external", "await:other", "suspended", None));
        assert!(h.judge("each_await_suspends_once").is_empty(), "two awaits, one suspension each");
        // A later tenure replays onto the open suspension and journals it again.
        let w2 = h.acquire(1, "w2", "r", 2);
        h.append(1, &w2, "r", op_entry(2, "external", "await:k", "suspended", None));
        let v = h.judge("each_await_suspends_once");
        assert!(
            v.len() == 1 && v[0].witness.contains("at seq 0") && v[0].witness.contains("still open"),
            "{v:?}"
        );
        // Answered first (a resolution, or an abandon), a second suspension of the key is no fault.
        for answer in ["resolution", "abandon"] {
            let mut h = HistoryBuilder::engine_run();
            let w = h.acquire(0, "w", "r", 1);
            h.append(0, &w, "r", op_entry(0, "external", "await:k", "suspended", None));
            h.acquire(1, "op", "r", 2);
            h.append(1, &lease("r", "op", 2), "r", op_entry(1, answer, "await:k", "ok", Some(0)));
            let w = h.acquire(0, "w", "r", 3);
            h.append(0, &w, "r", op_entry(2, "external", "await:k", "suspended", None));
            assert!(h.judge("each_await_suspends_once").is_empty(), "{answer}");
        }
        // A delete starts a new generation: the recreated run's await suspends afresh.
        let mut h = HistoryBuilder::engine_run();
        let w = h.acquire(0, "w", "r", 1);
        h.append(0, &w, "r", op_entry(0, "external", "await:k", "suspended", None));
        h.delete(0, Some(&w), "r");
        let w = h.acquire(0, "w", "r", 2);
        h.append(0, &w, "r", op_entry(0, "external", "await:k", "suspended", None));
        assert!(h.judge("each_await_suspends_once").is_empty());
    }

    #[test]
    fn a_suspension_answered_twice_or_an_answer_to_nothing_is_caught() {
        use crate::oracle::testkit::engine::{lease, HistoryBuilder};
        let mut h = HistoryBuilder::engine_run();
        let w = h.acquire(0, "w", "r", 1);
        h.append(0, &w, "r", op_entry(0, "external", "await:k", "suspended", None));
        let op = lease("r", "op", 2);
        h.acquire(1, "op", "r", 2);
        h.append(1, &op, "r", op_entry(1, "resolution", "await:k", "ok", Some(0)));
        assert!(h.judge("each_suspension_answered_once").is_empty(), "one answer to an open suspension");
        // A second operator's answer to the same suspension.
        h.acquire(2, "op2", "r", 3);
        h.append(2, &lease("r", "op2", 3), "r", op_entry(2, "resolution", "await:k", "ok", Some(0)));
        let v = h.judge("each_suspension_answered_once");
        assert!(v.len() == 1 && v[0].witness.contains("had already answered"), "{v:?}");
        // An answer to an entry that is no suspension.
        let mut h = HistoryBuilder::engine_run();
        let w = h.acquire(0, "w", "r", 1);
        h.append(0, &w, "r", op_entry(0, "step", "op:0:s", "running", None));
        h.append(0, &w, "r", op_entry(1, "resolution", "await:k", "ok", Some(0)));
        let v = h.judge("each_suspension_answered_once");
        assert!(v.len() == 1 && v[0].witness.contains("no suspension"), "{v:?}");
        // A delete starts a new generation: the recreated run's suspension is open again.
        let mut h = HistoryBuilder::engine_run();
        let w = h.acquire(0, "w", "r", 1);
        h.append(0, &w, "r", op_entry(0, "external", "await:k", "suspended", None));
        h.append(0, &w, "r", op_entry(1, "resolution", "await:k", "ok", Some(0)));
        h.delete(0, Some(&w), "r");
        let w = h.acquire(0, "w", "r", 2);
        h.append(0, &w, "r", op_entry(0, "external", "await:k", "suspended", None));
        h.append(0, &w, "r", op_entry(1, "resolution", "await:k", "ok", Some(0)));
        assert!(h.judge("each_suspension_answered_once").is_empty());
    }
}
