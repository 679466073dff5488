//! The payment family: paid work is not paid twice, nor past what the workflow allows. A
//! dispatch's checkpoint never goes back in turns (and no boot resumes from a regressed
//! one), a dispatch whose terminal is durable is never paid again by a current holder, and
//! no agent pays a turn or runs a tool beyond the limits its workflow declares; a provider
//! is sent its dispatch's conversation, and a billing receipt follows the call it records;
//! in a priced world no segment pays past its run's budget, and a run is exhausted exactly
//! when a segment spent it.
//!
//! Each property is judged from the apply-ordered history and the engine facts, under the
//! holder and generation rules of [`super`].

use std::collections::BTreeMap;

use super::super::contract::{
    checkpoint_seq, checkpoint_turns, entry_views, receipt_of, run_of_ref, EntryView, JournalRefs,
};
use super::super::model::{t, who, Judged};
use super::super::{Expectation, Property, Witness};
use super::*;
use store::engine::{Op, Workflow};

use crate::history::{Call, Fact, FactKind, OpKind, Read};
use crate::ledger::{catalog_workflows, field, reply, tool_result};

pub const CHECKPOINT_NEVER_REGRESSES: Property = Property {
        name: "checkpoint_never_regresses",
        expectation: Expectation::Always,
        claim: "No applied checkpoint write replaces a later turn with an earlier one, and no current holder pays a turn an earlier checkpoint already covered.",
        not_checked: "Checkpoint contents beyond the turn count; payments by superseded holders.",
        check: checkpoint_never_regresses,
};

fn checkpoint_never_regresses(j: &Judged, out: &mut Vec<Witness>) {
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
                        out.push(Witness {
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
            out.push(Witness {
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

pub const COMPLETED_DISPATCH_NEVER_REPAID: Property = Property {
        name: "completed_dispatch_never_repaid",
        expectation: Expectation::Always,
        claim: "No current holder pays or runs a tool for a dispatch whose terminal is durable, and a turn is paid again only in the documented windows (no terminal yet, and not covered by a saved checkpoint).",
        not_checked: "Payments by superseded holders (the lease's inherent at-least-once window).",
        check: completed_dispatch_never_repaid,
};

fn completed_dispatch_never_repaid(j: &Judged, out: &mut Vec<Witness>) {
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
            out.push(Witness {
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
                out.push(Witness {
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

pub const AGENTS_STAY_WITHIN_THEIR_LIMITS: Property = Property {
        name: "agents_stay_within_their_limits",
        expectation: Expectation::Always,
        claim: "No agent pays a turn or runs a tool its workflow's limits forbid: paid turns stay under max_turns, a turn after the first is paid only when the one before asked for a tool within max_tool_calls, a tool runs only on a turn under tool_turns and max_tool_calls; a step pays nothing and runs its one tool as turn 0.",
        not_checked: "Ops of a workflow the world does not know; how many times a lawful turn is paid (completed_dispatch_never_repaid).",
        check: agents_stay_within_their_limits,
};

pub const PROVIDER_SEES_ITS_CONVERSATION: Property = Property {
        name: "provider_sees_its_conversation",
        expectation: Expectation::Always,
        claim: "A paid turn t of an agent is sent its dispatch's conversation: t messages, the n-th carrying turn n's reply and tool result as this world's provider and tool gave them, in turn order (a resumed dispatch restores them from its checkpoint, so a restore that keeps the turn count but loses, reorders or mixes up messages is caught).",
        not_checked: "Ops of a workflow the world does not know; payments recorded without their conversation; what the provider does with it.",
        check: provider_sees_its_conversation,
};

pub const A_DISPATCH_PAYS_ITS_TURNS_IN_ORDER: Property = Property {
        name: "a_dispatch_pays_its_turns_in_order",
        expectation: Expectation::Always,
        claim: "A dispatch's turn t > 0 is paid only after its own turn t - 1 was paid: a fresh dispatch and a rerun of an error, limit or cancelled terminal start at turn 0 (no checkpoint boot, docs/engine-model.md 8.3), and a resume restores only the checkpoint its own dispatch saved (4.4), which covers turns that dispatch paid.",
        not_checked: "Donor checkpoints (rulvar's park/unpark and graft channels, which the engine model does not have); how many times a turn is paid (completed_dispatch_never_repaid).",
        check: a_dispatch_pays_its_turns_in_order,
};

fn a_dispatch_pays_its_turns_in_order(j: &Judged, out: &mut Vec<Witness>) {
    let (life, _) = dispatches(j);
    // Per (run, generation, dispatch): the turns paid so far, by anyone.
    let mut paid: BTreeMap<(&str, usize, u64), std::collections::BTreeSet<u32>> = BTreeMap::new();
    for f in &j.history.facts {
        let FactKind::Paid { run_id, dispatch, turn, .. } = &f.kind else { continue };
        let gen = life.generation(run_id, f.applied_before);
        let turns = paid.entry((run_id.as_str(), gen, *dispatch)).or_default();
        // Judged: a payment by the run's current holder whose grant is of this generation (a
        // superseded holder, or one whose run was deleted under it, pays in the lease's
        // at-least-once window, judged elsewhere).
        let judged = life.current_grant(run_id, f).is_some_and(|g| life.generation(run_id, g.order) == gen);
        if judged && *turn > 0 && !turns.contains(&(turn - 1)) {
            out.push(Witness {
                witness: format!(
                    "n{} paid turn {turn} of run {run_id} dispatch {dispatch} at t={} though turn {} of that dispatch was never paid (its turns so far: {:?})",
                    f.node,
                    t(f.at_ns),
                    turn - 1,
                    turns
                ),
                op: None,
                call: None,
            });
        }
        turns.insert(*turn);
    }
}

pub const EACH_RECEIPT_FOLLOWS_ITS_PAID_CALL: Property = Property {
        name: "each_receipt_follows_its_paid_call",
        expectation: Expectation::Always,
        claim: "A billing receipt that applies (a provider-call decision keyed pc:<dispatch>:<turn>) records a call its writer already paid: the same process and owner paid that run's dispatch and turn under the lease the receipt carries, before the receipt's append was invoked (a receipt is journaled after its call, never for a call not yet made).",
        not_checked: "Receipts of runs no engine actor started; unleased receipts; paid calls whose receipt was lost (a lost append is the flush barrier's, no_clean_settle_over_a_lost_append).",
        check: each_receipt_follows_its_paid_call,
};

fn each_receipt_follows_its_paid_call(j: &Judged, out: &mut Vec<Witness>) {
    let runs = engine_runs(j);
    let (life, _) = dispatches(j);
    // Per (run, dispatch, turn): the payments of it, in fact order.
    let mut payments: BTreeMap<(&str, u64, u32), Vec<&Fact>> = BTreeMap::new();
    for f in &j.history.facts {
        if let FactKind::Paid { run_id, dispatch, turn, .. } = &f.kind {
            payments.entry((run_id.as_str(), *dispatch, *turn)).or_default().push(f);
        }
    }
    for &c in &j.applied {
        if c.op != OpKind::Append || !runs.contains(c.run_id.as_str()) {
            continue;
        }
        let (Some(lease), Some(e)) = (&c.lease, entry_of(c)) else { continue };
        let Some(receipt) = receipt_of(&e) else { continue };
        let why = match receipt {
            None => format!("a malformed key {:?}", e.key),
            Some((dispatch, turn)) => {
                let grant = life.grant_order(&c.run_id, lease.epoch.0, order(c));
                let paid =
                    payments.get(&(c.run_id.as_str(), dispatch, turn)).into_iter().flatten().any(|f| {
                        f.node == c.node
                            && f.incarnation == c.incarnation
                            && f.owner == lease.owner
                            && f.invoked_before <= c.id
                            && grant.is_some_and(|g| f.applied_before > g)
                    });
                if paid {
                    continue;
                }
                format!(
                    "no payment of dispatch {dispatch} turn {turn} by its writer under epoch {} before it",
                    lease.epoch.0
                )
            }
        };
        out.push(Witness {
            witness: format!(
                "run {}: {}'s receipt at seq {} (t={}) has {why}",
                c.run_id,
                who(c),
                e.seq,
                t(Judged::applied_ns(c))
            ),
            op: Some(c.op.as_str()),
            call: Some(c.id),
        });
    }
}

pub const EACH_PAID_CALL_GETS_ITS_RECEIPT: Property = Property {
        name: "each_paid_call_gets_its_receipt",
        expectation: Expectation::Always,
        claim: "A current holder that paid turn t of a dispatch and then went on with that dispatch under the same grant (paid a later turn of it, or appended its terminal, other than cancelled) had first tried to journal that call's billing receipt pc:<dispatch>:<t> (docs/engine-model.md 3, step 4: per wire call, the paid call, then its receipt append; a refusal is swallowed, so the attempt is what is owed). A turn paid again by a redispatch owes a receipt of its own.",
        not_checked: "Whether the receipt applied (a refused one is latched: no_clean_settle_over_a_lost_append); a dispatch cut right after the call (a crash, a cancel); payments by superseded holders.",
        check: each_paid_call_gets_its_receipt,
};

/// A run, a process and a dispatch: (run, node, incarnation, dispatch).
type ProcessDispatch<'a> = (&'a str, u32, u32, u64);
/// A run, a grant's epoch and the process holding it: (run, epoch, node, incarnation).
type GrantProcess<'a> = (&'a str, u64, u32, u32);

fn each_paid_call_gets_its_receipt(j: &Judged, out: &mut Vec<Witness>) {
    let runs = engine_runs(j);
    if runs.is_empty() {
        return;
    }
    let (life, _) = dispatches(j);
    // A payment by the run's current holder: the grant's epoch.
    let held = |f: &Fact, run_id: &str| {
        life.current_grant(run_id, f).filter(|g| g.incarnation == f.incarnation).map(|g| g.epoch)
    };
    // Per (run, node, incarnation, dispatch): its payments by the current holder, in fact
    // order, with the grant's epoch.
    let mut paid: BTreeMap<ProcessDispatch, Vec<(&Fact, u32, u64)>> = BTreeMap::new();
    for f in &j.history.facts {
        let FactKind::Paid { run_id, dispatch, turn, .. } = &f.kind else { continue };
        if let Some(epoch) = held(f, run_id) {
            paid.entry((run_id.as_str(), f.node, f.incarnation, *dispatch))
                .or_default()
                .push((f, *turn, epoch));
        }
    }
    // Per (run, epoch, node, incarnation): that process's appends to the run under the
    // grant, with their entries, in call order (parsed once, from the index's leased calls).
    let mut appends: BTreeMap<GrantProcess, Vec<(&Call, super::EntryView)>> = BTreeMap::new();
    for (&(run_id, node, incarnation, dispatch), list) in &paid {
        for (k, &(f, turn, epoch)) in list.iter().enumerate() {
            let mine = appends.entry((run_id, epoch, node, incarnation)).or_insert_with(|| {
                if !runs.contains(run_id) {
                    return Vec::new();
                }
                j.index()
                    .on_run_under_epoch(run_id, epoch)
                    .iter()
                    .filter(|c| c.op == OpKind::Append && (c.node, c.incarnation) == (node, incarnation))
                    .filter_map(|&c| entry_of(c).map(|e| (c, e)))
                    .collect()
            });
            let from = f.invoked_before;
            // Where the dispatch went on: its next payment under this grant, or its first
            // terminal other than `cancelled` appended under it.
            let next_paid =
                list[k + 1..].iter().find(|&&(_, _, e)| e == epoch).map(|(h, _, _)| h.invoked_before);
            let terminal = mine
                .iter()
                .find(|(c, e)| {
                    c.id >= from
                        && e.ref_seq == Some(dispatch)
                        && !matches!(e.status.as_str(), "running" | "cancelled")
                })
                .map(|(c, _)| c.id);
            let Some(end) = [next_paid, terminal].into_iter().flatten().min() else { continue };
            let receipted = mine
                .iter()
                .any(|(c, e)| c.id >= from && c.id < end && receipt_of(e) == Some(Some((dispatch, turn))));
            if !receipted {
                out.push(Witness {
                    witness: format!(
                        "n{node} paid turn {turn} of run {run_id} dispatch {dispatch} at t={} under epoch {epoch} and went on with the dispatch without trying to journal its receipt pc:{dispatch}:{turn}",
                        t(f.at_ns)
                    ),
                    op: None,
                    call: None,
                });
            }
        }
    }
}

pub const EACH_TOOL_TURN_IS_CHECKPOINTED: Property = Property {
    name: "each_tool_turn_is_checkpointed",
    expectation: Expectation::Always,
    claim: "A current holder that ran the tool of an agent's turn t and then went on with that dispatch under the same grant (paid a later turn of it, or appended its terminal, other than cancelled) had first tried to save the dispatch's checkpoint <run>/ckpt/<dispatch> covering that turn (turns >= t + 1): a checkpoint is saved after every tool turn, before the next turn is paid (docs/engine-model.md 4.3 and O3).",
    not_checked: "Whether the save applied (a refused one is latched); a step's tool (a step saves no checkpoint); a dispatch cut right after its tool (a crash, a cancel); tools run by superseded holders.",
    check: each_tool_turn_is_checkpointed,
};

pub const A_TERMINAL_NAMES_THE_CHECKPOINT_IT_SAVED: Property = Property {
    name: "a_terminal_names_the_checkpoint_it_saved",
    expectation: Expectation::Always,
    claim: "An applied dispatch terminal (an `agent`, `step` or `child` entry with a `ref`, other than `cancelled`) carries `checkpointRef` exactly when its process, under the grant it appended with, had saved that dispatch's checkpoint <run>/ckpt/<ref> (a put that returned ok) since the grant, and then names that very ref: the terminal records `checkpointRef` if any save happened (docs/engine-model.md 4.3 and step 4 of the segment), which is how a prune finds the spent checkpoints of ok terminals (6.2).",
    not_checked: "`cancelled` terminals (the model's drain writes them bare); terminals whose grant the history does not show; saves by another process of the same identity.",
    check: a_terminal_names_the_checkpoint_it_saved,
};

fn a_terminal_names_the_checkpoint_it_saved(j: &Judged, out: &mut Vec<Witness>) {
    let runs = engine_runs(j);
    if runs.is_empty() {
        return;
    }
    // The acquires that granted each (run, epoch), in call order: a profile whose epoch
    // restarts after a delete grants the same epoch again.
    let mut grants: BTreeMap<(&str, u64), Vec<usize>> = BTreeMap::new();
    for a in j.history.calls.iter().filter(|a| a.op == OpKind::Acquire) {
        if let Some(g) = a.granted.as_ref() {
            grants.entry((a.run_id.as_str(), g.epoch.0)).or_default().push(a.id);
        }
    }
    for &c in &j.applied {
        if c.op != OpKind::Append || !runs.contains(c.run_id.as_str()) {
            continue;
        }
        let (Some(lease), Some(e)) = (c.lease.as_ref().filter(|l| l.run_id == c.run_id), entry_of(c)) else {
            continue;
        };
        let Some(dispatch) = e.ref_seq.filter(|_| matches!(e.kind.as_str(), "agent" | "step" | "child"))
        else {
            continue;
        };
        if matches!(e.status.as_str(), "running" | "suspended" | "cancelled") {
            continue;
        }
        // The latest grant of the terminal's (run, epoch) before it.
        let Some(grant) = grants
            .get(&(lease.run_id.as_str(), lease.epoch.0))
            .and_then(|ids| ids.iter().copied().take_while(|&g| g < c.id).last())
        else {
            continue;
        };
        // The appending process's calls since the grant, before the terminal.
        let process = j.index().of_process(c.node, c.incarnation);
        let since_grant =
            &process[process.partition_point(|d| d.id <= grant)..process.partition_point(|d| d.id < c.id)];
        let checkpoint = format!("{}/ckpt/{dispatch}", c.run_id);
        let saved = since_grant.iter().any(|d| {
            d.op == OpKind::BlobPut
                && d.args.blob_ref.as_deref() == Some(checkpoint.as_str())
                && d.lease.as_ref().is_none_or(|l| l == lease)
                && matches!(d.outcome, crate::history::Outcome::Ok { .. })
        });
        let named = e.raw.get("checkpointRef");
        let wrong = match (saved, named) {
            (true, None) => format!("does not name the checkpoint {checkpoint} it saved"),
            (false, Some(n)) => format!("names checkpoint {n} though it saved none of the dispatch"),
            (true, Some(n)) if n.as_str() != Some(checkpoint.as_str()) => {
                format!("names checkpoint {n}, not the {checkpoint} it saved")
            }
            _ => continue,
        };
        out.push(Witness {
            witness: format!(
                "n{}'s {} terminal of run {} dispatch {dispatch} (seq {}, epoch {}) at t={} {wrong}",
                c.node,
                e.status,
                c.run_id,
                e.seq,
                lease.epoch.0,
                t(c.invoked_ns)
            ),
            op: None,
            call: Some(c.id),
        });
    }
}

fn each_tool_turn_is_checkpointed(j: &Judged, out: &mut Vec<Witness>) {
    let runs = engine_runs(j);
    if runs.is_empty() {
        return;
    }
    let workflows = catalog_workflows();
    let (life, _) = dispatches(j);
    let held = |f: &Fact, run_id: &str| {
        life.current_grant(run_id, f).filter(|g| g.incarnation == f.incarnation).map(|g| g.epoch)
    };
    // Per (run, node, incarnation, dispatch): the current holder's agent tool runs and
    // payments, in fact order, with the grant's epoch.
    let mut work: BTreeMap<ProcessDispatch, Vec<(&Fact, u64)>> = BTreeMap::new();
    for (f, op) in paid_and_tool_facts(j, &workflows) {
        let (FactKind::Paid { run_id, dispatch, .. } | FactKind::Tool { run_id, dispatch, .. }) = &f.kind
        else {
            continue;
        };
        if !matches!(op, Op::Agent { .. }) {
            continue;
        }
        if let Some(epoch) = held(f, run_id) {
            work.entry((run_id.as_str(), f.node, f.incarnation, *dispatch)).or_default().push((f, epoch));
        }
    }
    let calls = &j.history.calls;
    for (&(run_id, node, incarnation, dispatch), list) in &work {
        let mine = |c: &&Call| (c.node, c.incarnation) == (node, incarnation) && c.run_id == run_id;
        let checkpoint = format!("{run_id}/ckpt/{dispatch}");
        for (k, &(f, epoch)) in list.iter().enumerate() {
            let FactKind::Tool { turn, .. } = &f.kind else { continue };
            let from = f.invoked_before;
            // Where the dispatch went on: its next payment under this grant, or its first
            // terminal other than `cancelled` appended under it.
            let next_paid = list[k + 1..]
                .iter()
                .find(|&&(g, e)| e == epoch && matches!(g.kind, FactKind::Paid { .. }))
                .map(|(g, _)| g.invoked_before);
            let terminal = j
                .index()
                .on_run_under_epoch(run_id, epoch)
                .iter()
                .filter(|c| c.id >= from && c.op == OpKind::Append && mine(c))
                .find(|c| {
                    entry_of(c).is_some_and(|e| {
                        e.ref_seq == Some(dispatch) && !matches!(e.status.as_str(), "running" | "cancelled")
                    })
                })
                .map(|c| c.id);
            let Some(end) = [next_paid, terminal].into_iter().flatten().min() else { continue };
            let saved =
                calls.get(from..end.min(calls.len())).unwrap_or_default().iter().filter(mine).any(|c| {
                    c.op == OpKind::BlobPut
                        && c.args.blob_ref.as_deref() == Some(checkpoint.as_str())
                        && c.args.bytes.as_deref().and_then(checkpoint_turns).is_some_and(|n| n > *turn)
                });
            if !saved {
                out.push(Witness::new(format!(
                    "n{node} ran the tool of turn {turn} of run {run_id} dispatch {dispatch} at t={} under epoch {epoch} and went on with the dispatch without trying to save its checkpoint {checkpoint} covering that turn",
                    t(f.at_ns)
                )));
            }
        }
    }
}

/// Each paid turn and tool run of a submitted run, with the spec of the op it names in that
/// run's workflow, in fact order (ops of a workflow or op the world does not know are left out).
fn paid_and_tool_facts<'h, 'w>(
    j: &Judged<'h>,
    workflows: &'w BTreeMap<String, Workflow>,
) -> Vec<(&'h Fact, &'w Op)> {
    let mut submitted: BTreeMap<&str, &str> = BTreeMap::new();
    let mut out = Vec::new();
    for f in &j.history.facts {
        let (run_id, op) = match &f.kind {
            FactKind::Submitted { run_id, workflow } => {
                submitted.insert(run_id, workflow);
                continue;
            }
            FactKind::Paid { run_id, op, .. } | FactKind::Tool { run_id, op, .. } => (run_id, op),
            _ => continue,
        };
        let Some(wf) = submitted.get(run_id.as_str()).and_then(|w| workflows.get(*w)) else { continue };
        if let Some(spec) = wf.ops.iter().find(|o| field(o) == op.as_str()) {
            out.push((f, spec));
        }
    }
    out
}

fn provider_sees_its_conversation(j: &Judged, out: &mut Vec<Witness>) {
    let workflows = catalog_workflows();
    for (f, spec) in paid_and_tool_facts(j, &workflows) {
        let FactKind::Paid { run_id, op, turn, conversation, .. } = &f.kind else { continue };
        let Op::Agent { .. } = spec else { continue };
        let turn = *turn;
        if conversation.is_empty() {
            continue;
        }
        if let Some(wrong) = conversation_fault(op, turn, conversation) {
            out.push(Witness {
                witness: format!(
                    "n{} paid turn {turn} of {op} in run {run_id} at t={} with a conversation that {wrong}: {conversation}",
                    f.node,
                    t(f.at_ns)
                ),
                op: None,
                call: None,
            });
        }
    }
}

/// What is wrong with the conversation sent with turn `turn` of agent `op` (the oracle's own
/// reading of it: a JSON array whose n-th message names turn n, that turn's reply and its
/// tool's result), or `None` when it is the one the turns before it made.
fn conversation_fault(op: &str, turn: u32, conversation: &str) -> Option<String> {
    let Ok(serde_json::Value::Array(messages)) = serde_json::from_str::<serde_json::Value>(conversation)
    else {
        return Some("is no list of messages".into());
    };
    if messages.len() != turn as usize {
        return Some(format!("holds {} messages, not {turn}", messages.len()));
    }
    for (n, m) in (0u32..).zip(&messages) {
        let turn_ok = m.get("turn").and_then(|v| v.as_u64()) == Some(u64::from(n));
        let reply_ok = m.get("reply") == Some(&reply(op, n));
        let tool_ok = m.get("tool") == Some(&tool_result(op, n));
        if !(turn_ok && reply_ok && tool_ok) {
            return Some(format!("has message {n} not turn {n}'s reply and tool result"));
        }
    }
    None
}

/// Whether turn `turn` of `op` may be paid (`tool` false) or have its tool run (`tool`
/// true), by the agent semantics of the workflow (the oracle's own reading of them: turn
/// t asks for a tool while t < tool_turns; a tool is refused once max_tool_calls are used;
/// max_turns paid turns end the agent).
fn within_limits(op: &Op, turn: u32, tool: bool) -> bool {
    match *op {
        Op::Step { .. } => tool && turn == 0,
        Op::Agent { tool_turns, max_turns, max_tool_calls, .. } => {
            if tool {
                turn < max_turns && turn < tool_turns && turn < max_tool_calls
            } else {
                turn < max_turns && (turn == 0 || (turn - 1 < tool_turns && turn - 1 < max_tool_calls))
            }
        }
        Op::Await { .. } => false,
    }
}

fn agents_stay_within_their_limits(j: &Judged, out: &mut Vec<Witness>) {
    let workflows = catalog_workflows();
    for (f, spec) in paid_and_tool_facts(j, &workflows) {
        let (run_id, op, turn, tool) = match &f.kind {
            FactKind::Paid { run_id, op, turn, .. } => (run_id, op, *turn, false),
            FactKind::Tool { run_id, op, turn, .. } => (run_id, op, *turn, true),
            _ => continue,
        };
        if !within_limits(spec, turn, tool) {
            out.push(Witness {
                witness: format!(
                    "n{} {} turn {turn} of {op} in run {run_id} at t={}, past the limits of {spec:?}",
                    f.node,
                    if tool { "ran the tool of" } else { "paid" },
                    t(f.at_ns)
                ),
                op: None,
                call: None,
            });
        }
    }
}

pub const AN_AGENT_ENDS_AT_ITS_LIMIT_ONLY_WHEN_REACHED: Property = Property {
        name: "an_agent_ends_at_its_limit_only_when_reached",
        expectation: Expectation::Always,
        claim: "An agent's `limit` terminal follows the turn at which its limits stop it (docs/engine-model.md 9.1; the kill-point table's limit row: 3 calls, 2 tools, turn 3's request hits the cap): under a tool cap below its script's tool turns and its max_turns, the writer of the terminal paid turn max_tool_calls itself (only the reply shows the request a cap refuses); under a turn cap (max_turns within both), a tool ran on turn max_turns - 1; an agent whose script ends within its limits never ends `limit`.",
        not_checked: "Agents of a workflow the world does not know; `limit` terminals of superseded holders' segments are judged as any other (the writer's own paid turn is asked for).",
        check: an_agent_ends_at_its_limit_only_when_reached,
};

fn an_agent_ends_at_its_limit_only_when_reached(j: &Judged, out: &mut Vec<Witness>) {
    let workflows = catalog_workflows();
    let (life, _) = dispatches(j);
    let mut submitted: BTreeMap<&str, &str> = BTreeMap::new();
    for f in &j.history.facts {
        if let FactKind::Submitted { run_id, workflow } = &f.kind {
            submitted.entry(run_id).or_insert(workflow);
        }
    }
    for &c in &j.applied {
        if c.op != OpKind::Append {
            continue;
        }
        let Some(e) = entry_of(c).filter(|e| e.kind == "agent" && e.status == "limit") else { continue };
        let name = e.key.splitn(3, ':').nth(2).unwrap_or_default();
        let Some(Op::Agent { tool_turns, max_turns, max_tool_calls, .. }) = submitted
            .get(c.run_id.as_str())
            .and_then(|w| workflows.get(*w))
            .and_then(|wf| wf.ops.iter().find(|o| field(o) == name))
        else {
            continue;
        };
        let (tt, mt, mc) = (*tool_turns, *max_turns, *max_tool_calls);
        if mt == 0 {
            continue;
        }
        let at = order(c);
        let gen = life.generation(&c.run_id, at);
        let facts = j.history.facts.iter().filter(|f| {
            f.applied_before <= at
                && life.generation(&c.run_id, f.applied_before) == gen
                && match &f.kind {
                    FactKind::Paid { run_id, op, .. } | FactKind::Tool { run_id, op, .. } => {
                        *run_id == c.run_id && op == name
                    }
                    _ => false,
                }
        });
        let why = if mc < tt && mc < mt {
            let paid = facts
                .filter(|f| f.node == c.node && f.incarnation == c.incarnation)
                .any(|f| matches!(&f.kind, FactKind::Paid { turn, .. } if *turn == mc));
            if paid {
                continue;
            }
            format!("without paying turn {mc} itself, the turn whose reply asks for the tool its cap of {mc} refuses")
        } else if mt <= tt && mt <= mc {
            if facts.into_iter().any(|f| matches!(&f.kind, FactKind::Tool { turn, .. } if *turn + 1 == mt)) {
                continue;
            }
            format!("though no tool ran on turn {}, the last its max_turns {mt} allows", mt - 1)
        } else {
            format!(
                "though its script asks for {tt} tool turn(s), within max_tool_calls {mc} and max_turns {mt}"
            )
        };
        out.push(Witness {
            witness: format!(
                "{} appended the `limit` terminal of {name} (run {}, dispatch {}) at t={} {why}",
                who(c),
                c.run_id,
                e.ref_seq.unwrap_or(0),
                t(c.returned_ns.unwrap_or(c.invoked_ns))
            ),
            op: Some(c.op.as_str()),
            call: Some(c.id),
        });
    }
}

pub const PAID_CALLS_STAY_WITHIN_THE_BUDGET: Property = Property {
        name: "paid_calls_stay_within_the_budget",
        expectation: Expectation::Always,
        claim: "In a priced world (a `priced` fact), no segment makes a paid call once its run's spend reached the budget its boot meta records (`budgetUsd`, in dollars): the spend is the billing receipts in the journal the segment loaded before its boot (none for a fresh run) plus every paid call the segment made, at the world's price each (docs/engine-model.md 2, the budget seed; 3.1, BudgetExhaustedError).",
        not_checked: "Segments whose boot meta records no budget, or whose load the oracle cannot read; calls a crash left without a receipt before a later segment loaded (that segment seeds from what the journal holds, as rulvar's fold does).",
        check: paid_calls_stay_within_the_budget,
};

pub const A_RUN_EXHAUSTS_AT_ITS_BUDGET: Property = Property {
        name: "a_run_exhausts_at_its_budget",
        expectation: Expectation::Always,
        claim: "In a priced world, a segment that settles ok had spent less than its run's budget, and one that settles exhausted had spent all of it (the spend of paid_calls_stay_within_the_budget): a completed body that spent its budget is exhausted, and nothing else exhausts a run (docs/engine-model.md 3.1). A segment that settles error having spent all of it, whose only failed store calls on the run since its acquire were billing receipts (swallowed at the call site, latched), and that neither appended a suspension nor loaded an open one, should have settled exhausted: the flush barrier turns only ok and suspended into error (3.1 step 5).",
        not_checked: "Segments that settle cancelled or suspended (a cancel may follow a spent budget, and a parked body stays suspended); error settles after any other failed call, or of a segment that may have parked; segments with no recorded budget.",
        check: a_run_exhausts_at_its_budget,
};

pub const AN_EXHAUSTED_SETTLE_SAYS_WHERE_THE_BODY_STOPPED: Property = Property {
        name: "an_exhausted_settle_says_where_the_body_stopped",
        expectation: Expectation::Always,
        claim: "A segment that settles its run exhausted while it holds the run keeps the workflow's value exactly when its body completed (docs/engine-model.md 3.1): with a value, no step or agent dispatch of the run is left without a terminal; without one, a paid call was refused, which leaves that agent's dispatch without a terminal (docs/engine-model.md P, stop 60), at a turn the agent's limits allowed (an agent at its limits ends with `limit` before any budget is asked: the turn a restore from its latest checkpoint would pay next).",
        not_checked: "Segments of superseded holders; the limits of agents of a workflow the world does not know; a refusal whose dispatch a later holder ended before the settle.",
        check: an_exhausted_settle_says_where_the_body_stopped,
};

fn an_exhausted_settle_says_where_the_body_stopped(j: &Judged, out: &mut Vec<Witness>) {
    let workflows = catalog_workflows();
    let (life, prog) = dispatches(j);
    let ix = j.index();
    let mut submitted: BTreeMap<&str, &str> = BTreeMap::new();
    for f in &j.history.facts {
        let (run_id, value, segment) = match &f.kind {
            FactKind::Submitted { run_id, workflow } => {
                submitted.insert(run_id, workflow);
                continue;
            }
            FactKind::Settled { run_id, status, value, segment } if status == "exhausted" => {
                (run_id, value, segment)
            }
            _ => continue,
        };
        if life.current_owner(run_id, f).is_none() {
            continue;
        }
        let entries = ix.journal_before(run_id, f.applied_before);
        let refs = JournalRefs::of(entries);
        let open: Vec<&EntryView> = entries
            .iter()
            .filter(|e| matches!(e.kind.as_str(), "agent" | "step" | "child") && refs.dangling(e))
            .collect();
        let said = match (value.is_some(), open.last()) {
            (true, Some(e)) => format!(
                "with the workflow's value though its {} dispatch at seq {} has no terminal (the body did not complete)",
                e.kind, e.seq
            ),
            (false, None) => "with no value though no dispatch was left without a terminal (a refused paid call leaves its agent's; a completed body keeps its value)".to_string(),
            (true, None) => continue,
            (false, Some(e)) => {
                // The refused dispatch: its agent's next turn must be one its limits allow.
                let name = e.key.splitn(3, ':').nth(2).unwrap_or_default();
                let Some(spec) = submitted
                    .get(run_id.as_str())
                    .and_then(|w| workflows.get(*w))
                    .and_then(|wf| wf.ops.iter().find(|o| field(o) == name))
                else {
                    continue;
                };
                let gen = life.generation(run_id, f.applied_before);
                let restored = prog
                    .saves
                    .get(&(run_id.clone(), gen, e.seq))
                    .and_then(|v| v.iter().rfind(|(o, _, legit)| *o < f.applied_before && *legit))
                    .map_or(0, |s| s.1);
                if e.kind != "agent" || within_limits(spec, restored, false) {
                    continue;
                }
                format!(
                    "with no value, its agent {name} (dispatch seq {}) refused at turn {restored}, which its limits end with `limit` ({spec:?})",
                    e.seq
                )
            }
        };
        out.push(Witness {
            witness: format!(
                "run {run_id}: n{}'s segment {segment} settled exhausted at t={} {said}",
                f.node,
                t(f.at_ns)
            ),
            op: None,
            call: None,
        });
    }
}

/// The price of a paid call in this world, in cents: `None` when it is not priced.
fn price(j: &Judged) -> Option<u64> {
    j.history.facts.iter().find_map(|f| match f.kind {
        FactKind::Priced { cents } => Some(cents),
        _ => None,
    })
}

/// One segment's budget as the oracle reckons it at one of its facts.
struct Spend<'h> {
    /// The segment's boot meta write (`running`).
    boot: &'h Call,
    /// The budget its boot meta records, in cents.
    budget: u64,
    /// The receipts in the journal it loaded before its boot.
    receipts: u64,
    /// The paid calls it made before the fact.
    paid: u64,
    /// What that comes to at the world's price, in cents.
    spent: u64,
}

/// The spend, at fact `facts[i]`, of the segment of run `run_id` that the fact's identity
/// (process incarnation and owner) booted last before it: `None` when there is no such
/// boot, its meta records no budget, or its load is not readable.
fn spend_at<'h>(j: &Judged<'h>, price: u64, i: usize, run_id: &str) -> Option<Spend<'h>> {
    let facts = &j.history.facts;
    let f = facts.get(i)?;
    let mine = own_calls_before(j.index(), f, run_id);
    let is_boot =
        |c: &&&Call| c.op == OpKind::PutMeta && meta_of(c).is_some_and(|m| m.status == Status::Running);
    let at = mine.iter().rposition(|c| is_boot(&c))?;
    let boot = mine[at];
    let since = mine[..at].iter().rfind(is_boot).map_or(0, |c| c.id + 1);
    let budget = meta_of(boot)?.raw.get("budgetUsd")?.as_u64()?.saturating_mul(100);
    // The segment began at its identity's latest start before its boot: a fresh submission
    // seeds nothing (a load before it read an earlier generation), a retry or a worker's
    // sweep seeds from its load after the start.
    let began = segment_start(facts, i, run_id, boot.id);
    let fresh = began.is_some_and(|g| matches!(g.kind, FactKind::Submitted { .. }));
    let since = since.max(began.map_or(0, |g| g.invoked_before));
    let load = mine[..at].iter().rfind(|c| c.id >= since && c.op == OpKind::Load).filter(|_| !fresh);
    let receipts = match load {
        None => 0,
        Some(load) => {
            let Some(Read::Entries(entries)) = &load.read else { return None };
            entry_views(entries)?.iter().filter(|e| receipt_of(e).is_some()).count() as u64
        }
    };
    let paid = facts[..i]
        .iter()
        .filter(|g| {
            (g.node, g.incarnation, g.owner.as_str()) == (f.node, f.incarnation, f.owner.as_str())
                && g.invoked_before > boot.id
                && matches!(&g.kind, FactKind::Paid { run_id: r, .. } if r == run_id)
        })
        .count() as u64;
    let spent = receipts.saturating_add(paid).saturating_mul(price);
    Some(Spend { boot, budget, receipts, paid, spent })
}

impl Spend<'_> {
    /// How the spend was reckoned, for a witness.
    fn said(&self, price: u64) -> String {
        format!(
            "{} of its {} cents ({} receipts in the journal it loaded and {} paid calls since its boot meta at t={}, {price} cents each)",
            self.spent,
            self.budget,
            self.receipts,
            self.paid,
            t(self.boot.invoked_ns)
        )
    }
}

/// Whether the segment that settled in fact `f` (its identity's calls on `run_id` since its
/// latest acquire) lost at least one billing receipt and had no other call refused, appended
/// no suspension, and loaded no journal with an open one (so its body did not park).
fn only_receipts_lost_unparked(j: &Judged, f: &Fact, run_id: &str) -> bool {
    let mine = own_calls_before(j.index(), f, run_id);
    let from = mine.iter().rposition(|c| c.op == OpKind::Acquire && c.outcome.is_ok()).unwrap_or(0);
    let mut lost_receipt = false;
    for c in &mine[from..] {
        let entry = (c.op == OpKind::Append).then(|| entry_of(c)).flatten();
        if c.outcome.refusal().is_some() {
            if entry.as_ref().is_some_and(|e| receipt_of(e).is_some()) {
                lost_receipt = true;
            } else {
                return false;
            }
        }
        if entry.is_some_and(|e| e.status == "suspended") {
            return false;
        }
    }
    // The journal the body ran over: its identity's latest load before the settle.
    if let Some(load) = mine.iter().rfind(|c| c.op == OpKind::Load) {
        let Some(Read::Entries(entries)) = &load.read else { return false };
        let Some(views) = entry_views(entries) else { return false };
        let refs = JournalRefs::of(&views);
        if views.iter().any(|e| refs.open_suspension(e)) {
            return false;
        }
    }
    lost_receipt
}

/// Whether a segment that had spent its budget, and lost billing receipts and no other call
/// (unparked), settled `exhausted` or `error`: the window where the budget and the lost-append
/// latch both decide the settle (the goal `receipt_lost_at_the_budget`).
pub(crate) fn receipt_lost_at_the_budget(j: &Judged) -> bool {
    let Some(price) = price(j) else { return false };
    j.history.facts.iter().enumerate().any(|(i, f)| {
        let FactKind::Settled { run_id, status, .. } = &f.kind else { return false };
        matches!(status.as_str(), "exhausted" | "error")
            && spend_at(j, price, i, run_id).is_some_and(|s| s.spent >= s.budget)
            && only_receipts_lost_unparked(j, f, run_id)
    })
}

/// Whether a segment paid a call that took its spend from below its budget to past it (a
/// price that does not divide the budget): the goal `paid_call_overshot_the_budget`.
pub(crate) fn paid_call_overshot_the_budget(j: &Judged) -> bool {
    let Some(price) = price(j) else { return false };
    j.history.facts.iter().enumerate().any(|(i, f)| {
        let FactKind::Paid { run_id, .. } = &f.kind else { return false };
        spend_at(j, price, i, run_id).is_some_and(|s| s.spent < s.budget && s.spent + price > s.budget)
    })
}

fn paid_calls_stay_within_the_budget(j: &Judged, out: &mut Vec<Witness>) {
    let Some(price) = price(j) else { return };
    for (i, f) in j.history.facts.iter().enumerate() {
        let FactKind::Paid { run_id, op, turn, .. } = &f.kind else { continue };
        let Some(spend) = spend_at(j, price, i, run_id) else { continue };
        if spend.spent >= spend.budget {
            out.push(Witness {
                witness: format!(
                    "n{} paid turn {turn} of {op} in run {run_id} at t={} though its segment had spent {}",
                    f.node,
                    t(f.at_ns),
                    spend.said(price)
                ),
                op: None,
                call: None,
            });
        }
    }
}

fn a_run_exhausts_at_its_budget(j: &Judged, out: &mut Vec<Witness>) {
    let Some(price) = price(j) else { return };
    for (i, f) in j.history.facts.iter().enumerate() {
        let FactKind::Settled { run_id, status, segment, .. } = &f.kind else { continue };
        if !matches!(status.as_str(), "ok" | "exhausted" | "error") {
            continue;
        }
        let Some(spend) = spend_at(j, price, i, run_id) else { continue };
        let spent = spend.spent >= spend.budget;
        let wrong = match status.as_str() {
            "ok" if spent => "ok though it had spent",
            "exhausted" if !spent => "exhausted though it had spent only",
            "error" if spent && only_receipts_lost_unparked(j, f, run_id) => {
                "error (its only failed calls were billing receipts, and a lost append turns only ok and suspended into error) though it had spent"
            }
            _ => continue,
        };
        out.push(Witness::new(format!(
            "run {run_id}: n{}'s segment {segment} settled {wrong} {} at t={}",
            f.node,
            spend.said(price),
            t(f.at_ns)
        )));
    }
}

#[cfg(test)]
mod tests {

    use crate::oracle::testkit::engine::*;

    /// Dispatch 0 of run r by w on node 0 (epoch 1): its running entry, a save of its
    /// checkpoint when `save`, then its terminal of `status` naming `named` (if any).
    fn terminal_after(save: bool, status: &str, named: Option<&str>) -> HistoryBuilder {
        let mut h = HistoryBuilder::engine_run();
        let a = h.acquire(0, "w", "r", 1);
        h.append(0, &a, "r", running(0));
        if save {
            h.ckpt(0, &a, "r", 0, 1);
        }
        let mut t = terminal(1, 0, status);
        if let Some(n) = named {
            t["checkpointRef"] = serde_json::json!(n);
        }
        h.append(0, &a, "r", t);
        h
    }

    #[test]
    fn a_terminal_names_its_checkpoint_exactly_when_it_saved_one() {
        let p = "a_terminal_names_the_checkpoint_it_saved";
        assert!(terminal_after(true, "ok", Some("r/ckpt/0")).judge(p).is_empty(), "saved and named");
        assert!(terminal_after(false, "ok", None).judge(p).is_empty(), "nothing saved, nothing named");
        assert!(terminal_after(true, "limit", Some("r/ckpt/0")).judge(p).is_empty(), "a limit terminal");
        assert!(terminal_after(true, "cancelled", None).judge(p).is_empty(), "the drain's bare terminal");
        assert_eq!(terminal_after(true, "ok", None).judge(p).len(), 1, "saved, not named");
        assert_eq!(terminal_after(false, "ok", Some("r/ckpt/0")).judge(p).len(), 1, "named, never saved");
        assert_eq!(terminal_after(true, "ok", Some("r/ckpt/7")).judge(p).len(), 1, "names another ref");
    }

    #[test]
    fn a_save_counts_only_when_it_returned_ok_under_the_terminals_grant_in_its_process() {
        let p = "a_terminal_names_the_checkpoint_it_saved";
        // A save under an earlier grant: the redispatch under the next one saved nothing.
        let mut h = HistoryBuilder::engine_run();
        let a = h.acquire(0, "w", "r", 1);
        h.append(0, &a, "r", running(0));
        h.ckpt(0, &a, "r", 0, 1);
        let b = h.acquire(0, "w", "r", 2);
        h.append(0, &b, "r", terminal(1, 0, "ok"));
        assert!(h.judge(p).is_empty(), "the earlier grant's save");
        // Another process saved it under the same lease: not this process's save.
        let mut h = HistoryBuilder::engine_run();
        let a = h.acquire(0, "w", "r", 1);
        h.append(0, &a, "r", running(0));
        h.ckpt(1, &a, "r", 0, 1);
        h.append(0, &a, "r", terminal(1, 0, "ok"));
        assert!(h.judge(p).is_empty(), "another process's save");
        // A refused save is no save.
        let mut h = HistoryBuilder::engine_run();
        let a = h.acquire(0, "w", "r", 1);
        h.append(0, &a, "r", running(0));
        h.ckpt(0, &a, "r", 0, 1);
        h.refuse_last("busy");
        h.append(0, &a, "r", terminal(1, 0, "ok"));
        assert!(h.judge(p).is_empty(), "a refused save");
        let mut t = terminal(2, 0, "ok");
        t["checkpointRef"] = serde_json::json!("r/ckpt/0");
        h.append(0, &a, "r", t);
        assert_eq!(h.judge(p).len(), 1, "a refused save named");
    }

    #[test]
    fn an_epoch_granted_again_later_judges_a_terminal_by_the_grant_before_it() {
        let p = "a_terminal_names_the_checkpoint_it_saved";
        // A profile whose epoch restarts after a delete grants epoch 1 again, after the
        // terminal: the terminal is judged by the grant it appended under.
        let later_grant = |named: Option<&str>| {
            let mut h = terminal_after(true, "ok", named);
            let b = h.acquire(1, "v", "r", 1);
            h.append(1, &b, "r", running(2));
            h
        };
        assert!(later_grant(Some("r/ckpt/0")).judge(p).is_empty(), "saved and named, epoch reused later");
        assert_eq!(later_grant(None).judge(p).len(), 1, "saved, not named, epoch reused later");
    }

    /// Run r, priced at 25 cents a call with a 1-dollar budget: identity w (node 1) loads a
    /// journal holding `loaded` receipts, acquires, boots, pays `paid` turns, then settles
    /// `status` (with a value when `value`).
    fn budgeted(loaded: u64, paid: u32, status: &str, value: bool) -> HistoryBuilder {
        use crate::history::{FactKind, OpKind, Read};
        let mut h = HistoryBuilder::engine_run();
        h.fact(0, "", FactKind::Priced { cents: 25 });
        let entries = (0..loaded)
            .map(|i| {
                // Spelled out field by field (no function of the system under test).
                store::JournalEntry {
                    seq: store::Seq(i),
                    kind: "decision".into(),
                    status: "ok".into(),
                    key: format!("pc:0:{i}"),
                    ref_seq: None,
                    value: serde_json::json!({"decisionType": "provider-call", "agentRef": 0}),
                    extra: serde_json::Map::new(),
                }
            })
            .collect();
        h.read_meta(1, "w", "r");
        let load = h.h.calls.last_mut().expect("a read");
        load.op = OpKind::Load;
        load.read = Some(Read::Entries(entries));
        let a = h.acquire(1, "w", "r", 1);
        h.meta_with(1, Some(&a), "r", store::RunStatus::Running, 2, serde_json::json!({"budgetUsd": 1}));
        h.h.calls.last_mut().expect("the boot").args.actor = Some("w".into());
        for turn in 0..paid {
            h.pay(1, "w", "r", 0, turn);
        }
        let value = value.then(|| "{}".to_string());
        h.fact(1, "w", FactKind::Settled { run_id: "r".into(), status: status.into(), value, segment: 2 });
        h
    }

    #[test]
    fn a_paid_call_that_takes_the_spend_past_the_budget_meets_the_goal() {
        use crate::history::FactKind;
        let goal = |h: &HistoryBuilder| h.meets("paid_call_overshot_the_budget");
        // 25 cents on a dollar: the fourth call lands on it exactly.
        assert!(!goal(&budgeted(0, 4, "exhausted", true)));
        // 30 cents: the fourth call takes 90 to 120.
        let priced_at = |cents: u64, paid: u32| {
            let mut h = budgeted(0, paid, "exhausted", true);
            for f in h.h.facts.iter_mut() {
                if let FactKind::Priced { cents: c } = &mut f.kind {
                    *c = cents;
                }
            }
            h
        };
        assert!(goal(&priced_at(30, 4)));
        assert!(!goal(&priced_at(30, 3)), "90 of 100: not past it yet");
        // The oracle allows the overshooting call and refuses the one after it.
        assert!(priced_at(30, 4).judge("paid_calls_stay_within_the_budget").is_empty());
        assert_eq!(priced_at(30, 5).judge("paid_calls_stay_within_the_budget").len(), 1);
        // Exhausted at 90 of 100 (a gate that refused the call it could not cover): caught.
        let v = priced_at(30, 3).judge("a_run_exhausts_at_its_budget");
        assert!(v.len() == 1 && v[0].witness.contains("exhausted though it had spent only"), "{v:?}");
    }

    #[test]
    fn an_error_settle_over_a_spent_budget_and_only_lost_receipts_is_caught() {
        use crate::history::FactKind;
        let p = "a_run_exhausts_at_its_budget";
        // w's segment pays `paid` turns of a 1-dollar budget at 25 cents, loses the receipt of
        // the first (refused `code`), appends a suspension when `parks`, then settles error.
        let run = |paid: u32, code: &str, parks: bool| {
            let mut h = budgeted(0, 0, "ok", false);
            h.h.facts.pop();
            let a = lease("r", "w", 1);
            for turn in 0..paid {
                h.pay(1, "w", "r", 0, turn);
            }
            let receipt = serde_json::json!({"seq": 1, "kind": "decision", "status": "ok", "key": "pc:0:0", "value": {"decisionType": "provider-call", "agentRef": 0}});
            h.append_lost(1, &a, "r", receipt, code);
            if parks {
                h.append(1, &a, "r", op_entry(2, "external", "await:k", "suspended", None));
            }
            for c in h.h.calls.iter_mut().filter(|c| c.op == crate::history::OpKind::Append) {
                c.args.actor = Some("w".into());
            }
            h.fact(
                1,
                "w",
                FactKind::Settled { run_id: "r".into(), status: "error".into(), value: None, segment: 2 },
            );
            h
        };
        let v = run(4, "busy", false).judge(p);
        assert!(v.len() == 1 && v[0].witness.contains("settled error"), "{v:?}");
        // The goal `receipt_lost_at_the_budget` names this window, lawful or not.
        let goal = |h: &HistoryBuilder| h.meets("receipt_lost_at_the_budget");
        assert!(goal(&run(4, "busy", false)), "spent, only a receipt lost, settled error");
        assert!(!goal(&run(3, "busy", false)), "not spent");
        assert!(!goal(&run(4, "busy", true)), "parked");
        assert!(!goal(&budgeted(0, 4, "exhausted", false)), "spent, no receipt lost");
        assert!(run(3, "busy", false).judge(p).is_empty(), "75 of 100 cents: the body errs on");
        assert!(run(4, "busy", true).judge(p).is_empty(), "a parked body is suspended, then error");
        let mut h = run(4, "busy", false);
        h.h.facts.pop();
        h.append_lost(1, &lease("r", "w", 1), "r", terminal(2, 0, "ok"), "busy");
        h.h.calls.last_mut().expect("the append").args.actor = Some("w".into());
        h.fact(
            1,
            "w",
            FactKind::Settled { run_id: "r".into(), status: "error".into(), value: None, segment: 2 },
        );
        assert!(h.judge(p).is_empty(), "another call failed too");
    }

    #[test]
    fn an_exhausted_settle_that_misstates_where_its_body_stopped_is_caught() {
        use crate::history::FactKind;
        let p = "an_exhausted_settle_says_where_the_body_stopped";
        // Run r runs two_approvals; w's segment dispatches `revise` (seq 5) with `saved` turns
        // checkpointed (or ends it with `ended`), then settles exhausted, with a value or not.
        let run = |saved: Option<u32>, ended: bool, value: bool| {
            let mut h = HistoryBuilder::default();
            h.fact(0, "host", FactKind::Submitted { run_id: "r".into(), workflow: "two-approvals".into() });
            let a = h.acquire(0, "w", "r", 1);
            h.append(0, &a, "r", op_entry(5, "agent", "op:2:revise", "running", None));
            if let Some(turns) = saved {
                h.ckpt(0, &a, "r", 5, turns);
            }
            if ended {
                h.append(0, &a, "r", op_entry(6, "agent", "op:2:revise", "limit", Some(5)));
            }
            let value = value.then(|| "{}".to_string());
            h.fact(
                0,
                "w",
                FactKind::Settled { run_id: "r".into(), status: "exhausted".into(), value, segment: 1 },
            );
            h.judge(p)
        };
        assert!(run(Some(2), false, false).is_empty(), "refused at turn 2, which revise may pay");
        let v = run(Some(3), false, false);
        assert!(v.len() == 1 && v[0].witness.contains("refused at turn 3"), "{v:?}");
        let v = run(Some(1), false, true);
        assert!(v.len() == 1 && v[0].witness.contains("has no terminal"), "{v:?}");
        assert!(run(Some(3), true, true).is_empty(), "completed, value kept");
        let v = run(Some(3), true, false);
        assert!(v.len() == 1 && v[0].witness.contains("no dispatch was left"), "{v:?}");
    }

    #[test]
    fn a_paid_call_past_the_budget_is_caught() {
        let p = "paid_calls_stay_within_the_budget";
        assert!(budgeted(0, 4, "ok", true).judge(p).is_empty(), "four calls spend the dollar at the last");
        let v = budgeted(0, 5, "ok", true).judge(p);
        assert!(
            v.len() == 1 && v[0].witness.contains("paid turn 4") && v[0].witness.contains("100 of its 100"),
            "{v:?}"
        );
        assert!(budgeted(2, 2, "ok", true).judge(p).is_empty(), "two receipts loaded, two calls");
        let v = budgeted(3, 2, "ok", true).judge(p);
        assert!(v.len() == 1 && v[0].witness.contains("3 receipts"), "{v:?}");
        // A fresh submission seeds nothing: a load before it read an earlier generation.
        let mut h = budgeted(3, 4, "ok", true);
        let boot = h.h.calls.iter().position(|c| c.op == crate::history::OpKind::PutMeta).expect("a boot");
        let submitted = crate::history::FactKind::Submitted { run_id: "r".into(), workflow: "happy".into() };
        let mut fact = h.h.facts[0].clone();
        fact.owner = "w".into();
        fact.node = 1;
        fact.invoked_before = boot;
        fact.kind = submitted;
        let at = h.h.facts.iter().position(|f| f.invoked_before > boot).expect("a later fact");
        h.h.facts.insert(at, fact);
        assert!(h.judge(p).is_empty(), "{:?}", h.judge(p));
        // A retry double-clicked between the load and the boot returns at once: the segment
        // still began at the first retry, and its load seeds the spend.
        let mut h = budgeted(3, 2, "ok", true);
        let boot = h.h.calls.iter().position(|c| c.op == crate::history::OpKind::PutMeta).expect("a boot");
        let at = h.h.facts.iter().position(|f| f.invoked_before > boot).expect("a later fact");
        let mut first = h.h.facts[0].clone();
        (first.owner, first.node, first.invoked_before) = ("w".into(), 1, 0);
        first.kind = crate::history::FactKind::Resumed { run_id: "r".into(), workflow: "happy".into() };
        let mut second = first.clone();
        second.invoked_before = boot;
        let mut refused = second.clone();
        refused.kind = crate::history::FactKind::Failed {
            run_id: "r".into(),
            what: "retry".into(),
            error: "live".into(),
        };
        h.h.facts.splice(at..at, [second, refused]);
        h.h.facts.insert(1, first);
        assert_eq!(h.judge(p).len(), 1, "three receipts loaded, then two calls on a one-dollar budget");
        // Unpriced, nothing is judged.
        let mut h = budgeted(0, 9, "ok", true);
        h.h.facts.retain(|f| !matches!(f.kind, crate::history::FactKind::Priced { .. }));
        assert!(h.judge(p).is_empty());
    }

    #[test]
    fn an_exhausted_settle_that_did_not_spend_the_budget_is_caught() {
        let p = "a_run_exhausts_at_its_budget";
        assert!(budgeted(1, 2, "ok", true).judge(p).is_empty(), "75 of 100 cents");
        assert_eq!(
            budgeted(1, 3, "ok", true).judge(p).len(),
            1,
            "a completed body that spent it is exhausted"
        );
        assert!(budgeted(1, 3, "exhausted", true).judge(p).is_empty());
        assert!(budgeted(4, 0, "exhausted", false).judge(p).is_empty(), "refused at the first call");
        let v = budgeted(1, 2, "exhausted", false).judge(p);
        assert!(v.len() == 1 && v[0].witness.contains("exhausted though it had spent only 75"), "{v:?}");
        assert!(budgeted(1, 2, "error", false).judge(p).is_empty(), "error is not judged");
    }

    /// A billing receipt entry at `seq` keyed `key`.
    fn receipt(seq: u64, key: &str) -> serde_json::Value {
        serde_json::json!({"seq": seq, "kind": "decision", "status": "ok", "key": key,
            "value": {"decisionType": "provider-call", "agentRef": 0}})
    }

    #[test]
    fn a_tool_turn_the_dispatch_went_past_without_its_checkpoint_is_caught() {
        use crate::history::FactKind;
        // Run r runs `pipeline` (the agent `research` checkpoints after each tool turn; the
        // step `fetch` saves none). Dispatch 1 pays turn 0, runs its tool, then maybe saves a
        // checkpoint of `saved` turns, then `next`: pays turn 1, appends its ok terminal, or
        // nothing (the process died).
        let run = |op: &str, saved: Option<u32>, next: &str| {
            let mut h = HistoryBuilder::default();
            h.fact(0, "host", FactKind::Submitted { run_id: "r".into(), workflow: "pipeline".into() });
            let a = h.acquire(0, "a", "r", 1);
            h.append(0, &a, "r", running(0));
            let paid = |turn| FactKind::Paid {
                run_id: "r".into(),
                op: op.into(),
                dispatch: 0,
                turn,
                conversation: String::new(),
            };
            h.fact(0, "a", paid(0));
            h.fact(0, "a", FactKind::Tool { run_id: "r".into(), op: op.into(), dispatch: 0, turn: 0 });
            if let Some(turns) = saved {
                h.ckpt(0, &a, "r", 0, turns);
            }
            match next {
                "pay" => h.fact(0, "a", paid(1)),
                "terminal" => h.append(0, &a, "r", terminal(1, 0, "ok")),
                _ => {}
            }
            h.judge("each_tool_turn_is_checkpointed")
        };
        assert!(run("research", Some(1), "pay").is_empty());
        let v = run("research", None, "pay");
        assert_eq!(v.len(), 1, "{v:?}");
        assert!(v[0].witness.contains("without trying to save its checkpoint r/ckpt/0"), "{}", v[0].witness);
        assert_eq!(run("research", Some(0), "pay").len(), 1, "a checkpoint that does not cover the turn");
        assert_eq!(run("research", None, "terminal").len(), 1, "a terminal after an unsaved tool turn");
        assert!(run("research", Some(1), "terminal").is_empty());
        assert!(run("research", None, "").is_empty(), "cut right after its tool");
        assert!(run("fetch", None, "terminal").is_empty(), "a step saves no checkpoint");
    }

    #[test]
    fn a_receipt_for_a_call_its_writer_had_not_paid_is_caught() {
        let mut h = HistoryBuilder::engine_run();
        let a = h.acquire(0, "a", "r", 1);
        h.append(0, &a, "r", running(0));
        h.pay(0, "a", "r", 0, 0);
        h.append(0, &a, "r", receipt(1, "pc:0:0"));
        assert!(h.judge("each_receipt_follows_its_paid_call").is_empty(), "paid, then its receipt");
        // The receipt of turn 1 before its payment.
        h.append(0, &a, "r", receipt(2, "pc:0:1"));
        h.pay(0, "a", "r", 0, 1);
        let v = h.judge("each_receipt_follows_its_paid_call");
        assert!(v.len() == 1 && v[0].witness.contains("seq 2") && v[0].witness.contains("turn 1"), "{v:?}");
        // A later tenure of the same owner receipts turn 0 again without paying it again;
        // another owner receipts a turn only the first paid.
        let mut h = HistoryBuilder::engine_run();
        h.acquire(0, "a", "r", 1);
        h.pay(0, "a", "r", 0, 0);
        let a2 = h.acquire(0, "a", "r", 2);
        h.append(0, &a2, "r", receipt(0, "pc:0:0"));
        let b = h.acquire(1, "b", "r", 3);
        h.append(1, &b, "r", receipt(1, "pc:0:0"));
        assert_eq!(h.judge("each_receipt_follows_its_paid_call").len(), 2);
        // A malformed receipt key; a decision of another type is no receipt.
        let mut h = HistoryBuilder::engine_run();
        let a = h.acquire(0, "a", "r", 1);
        h.pay(0, "a", "r", 0, 0);
        h.append(0, &a, "r", receipt(0, "pc:0:0:0"));
        h.append(0, &a, "r", op_entry(1, "decision", "pc:9:9", "ok", None));
        let v = h.judge("each_receipt_follows_its_paid_call");
        assert!(v.len() == 1 && v[0].witness.contains("malformed"), "{v:?}");
    }

    #[test]
    fn a_turn_paid_before_its_dispatch_paid_the_one_before_is_caught() {
        // a pays turns 0 and 1 of dispatch 1 and checkpoints 2 turns; b takes over, restores
        // them and pays turn 2; an error terminal, then a rerun (dispatch 4) from turn 0.
        let mut h = HistoryBuilder::engine_run();
        let a = h.acquire(0, "a", "r", 1);
        h.append(0, &a, "r", running(1));
        h.pay(0, "a", "r", 1, 0);
        h.pay(0, "a", "r", 1, 1);
        h.ckpt(0, &a, "r", 1, 2);
        let b = h.acquire(1, "b", "r", 2);
        h.pay(1, "b", "r", 1, 2);
        h.append(1, &b, "r", terminal(3, 1, "error"));
        h.append(1, &b, "r", running(4));
        h.pay(1, "b", "r", 4, 0);
        h.pay(1, "b", "r", 4, 1);
        assert!(h.judge("a_dispatch_pays_its_turns_in_order").is_empty());
        // The rerun boots the earlier attempt's checkpoint: it pays turn 2 of dispatch 5 first.
        h.append(1, &b, "r", terminal(5, 4, "cancelled"));
        h.append(1, &b, "r", running(6));
        h.pay(1, "b", "r", 6, 2);
        let v = h.judge("a_dispatch_pays_its_turns_in_order");
        assert!(v.len() == 1 && v[0].witness.contains("turn 2 of run r dispatch 6"), "{v:?}");
        // A superseded holder's payment is not judged here; nor one whose run was deleted
        // under it (its turns before the delete are of the earlier generation).
        let mut h = HistoryBuilder::engine_run();
        h.acquire(0, "a", "r", 1);
        h.acquire(1, "b", "r", 2);
        h.pay(0, "a", "r", 3, 1);
        h.pay(1, "b", "r", 7, 0);
        h.delete(2, None, "r");
        h.pay(1, "b", "r", 7, 1);
        assert!(h.judge("a_dispatch_pays_its_turns_in_order").is_empty());
        // The current holder is judged across a recreation: turn 0 of the old generation does
        // not admit turn 1 of the new one.
        let _c = h.acquire(2, "c", "r", 3);
        h.pay(2, "c", "r", 1, 1);
        assert_eq!(h.judge("a_dispatch_pays_its_turns_in_order").len(), 1);
    }

    #[test]
    fn a_paid_call_the_dispatch_went_past_without_its_receipt_is_caught() {
        let mut h = HistoryBuilder::engine_run();
        let a = h.acquire(0, "a", "r", 1);
        h.append(0, &a, "r", running(0));
        h.pay(0, "a", "r", 0, 0);
        h.append(0, &a, "r", receipt(1, "pc:0:0"));
        h.pay(0, "a", "r", 0, 1);
        // A crash here: a's turn 1 has no receipt, and nothing of a went on. b redispatches
        // and pays turn 1 again with a receipt of its own, then turn 2 with its receipt, then
        // turn 3, cut by a cancel: a cancelled terminal without turn 3's receipt.
        let b = h.acquire(1, "b", "r", 2);
        h.pay(1, "b", "r", 0, 1);
        h.append(1, &b, "r", receipt(2, "pc:0:1"));
        h.pay(1, "b", "r", 0, 2);
        h.append(1, &b, "r", receipt(3, "pc:0:2"));
        h.pay(1, "b", "r", 0, 3);
        h.append(1, &b, "r", terminal(4, 0, "cancelled"));
        assert!(h.judge("each_paid_call_gets_its_receipt").is_empty());
        // A redispatch that skips the receipt of the turn it pays again (its key is in the
        // journal already), then goes on to the next turn, and a last turn whose ok terminal
        // follows with no receipt.
        let mut h = HistoryBuilder::engine_run();
        let a = h.acquire(0, "a", "r", 1);
        h.append(0, &a, "r", running(0));
        h.pay(0, "a", "r", 0, 0);
        h.append(0, &a, "r", receipt(1, "pc:0:0"));
        let b = h.acquire(1, "b", "r", 2);
        h.pay(1, "b", "r", 0, 0);
        h.pay(1, "b", "r", 0, 1);
        h.append(1, &b, "r", terminal(2, 0, "ok"));
        let v = h.judge("each_paid_call_gets_its_receipt");
        assert!(v.len() == 2 && v[0].witness.contains("pc:0:0") && v[1].witness.contains("pc:0:1"), "{v:?}");
    }

    #[test]
    fn checkpoint_regressions_and_regressed_boots_are_caught() {
        let mut h = HistoryBuilder::engine_run();
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
    fn a_limit_terminal_needs_the_turn_its_limits_stop() {
        use crate::history::FactKind;
        // `limit` (max_turns 4, max_tool_calls 2, always asking for the tool): the writer of
        // the `limit` terminal paid turn 2, whose reply asks for the third tool.
        let limit_run = |paid_turns: &[u32], payer: u32| {
            let mut h = HistoryBuilder::default();
            h.fact(0, "host", FactKind::Submitted { run_id: "r".into(), workflow: "limit".into() });
            let a = h.acquire(0, "a", "r", 1);
            h.append(0, &a, "r", op_entry(0, "agent", "op:0:agentStatus", "running", None));
            for &turn in paid_turns {
                let node = if turn == 2 { payer } else { 0 };
                h.fact(
                    node,
                    "a",
                    FactKind::Paid {
                        run_id: "r".into(),
                        op: "agentStatus".into(),
                        dispatch: 0,
                        turn,
                        conversation: String::new(),
                    },
                );
                if turn < 2 {
                    tool(&mut h, "agentStatus", 0, turn);
                }
            }
            h.append(0, &a, "r", op_entry(1, "agent", "op:0:agentStatus", "limit", Some(0)));
            h.judge("an_agent_ends_at_its_limit_only_when_reached")
        };
        assert!(limit_run(&[0, 1, 2], 0).is_empty());
        // Ended at the cap before the wire: turn 2 never paid.
        let v = limit_run(&[0, 1], 0);
        assert_eq!(v.len(), 1, "{v:?}");
        assert!(v[0].witness.contains("without paying turn 2 itself"), "{}", v[0].witness);
        // Turn 2 paid by another process: the writer decided without the reply.
        assert_eq!(limit_run(&[0, 1, 2], 1).len(), 1);
        // `happy`'s tool-less agent never ends `limit`.
        let mut h = HistoryBuilder::default();
        h.fact(0, "host", FactKind::Submitted { run_id: "r".into(), workflow: "happy".into() });
        let a = h.acquire(0, "a", "r", 1);
        paid(&mut h, "one", 0, 0);
        h.append(0, &a, "r", op_entry(0, "agent", "op:0:one", "limit", Some(0)));
        let v = h.judge("an_agent_ends_at_its_limit_only_when_reached");
        assert_eq!(v.len(), 1, "{v:?}");
        assert!(v[0].witness.contains("within max_tool_calls"), "{}", v[0].witness);
    }

    #[test]
    fn turns_and_tools_past_the_workflows_limits_are_caught() {
        use crate::history::FactKind;
        // `limit`: one agent, always asking for a tool, max_turns 4, max_tool_calls 2: turns
        // 0, 1 and 2 paid, the tools of turns 0 and 1 run.
        let mut h = HistoryBuilder::default();
        h.fact(0, "host", FactKind::Submitted { run_id: "r".into(), workflow: "limit".into() });
        for turn in 0..3 {
            paid(&mut h, "agentStatus", 1, turn);
        }
        tool(&mut h, "agentStatus", 1, 0);
        tool(&mut h, "agentStatus", 1, 1);
        assert!(h.judge("agents_stay_within_their_limits").is_empty());
        tool(&mut h, "agentStatus", 1, 2);
        let v = h.judge("agents_stay_within_their_limits");
        assert_eq!(v.len(), 1, "a third tool call: {v:?}");
        assert!(v[0].witness.contains("ran the tool of turn 2"), "{}", v[0].witness);
        paid(&mut h, "agentStatus", 1, 3);
        assert_eq!(h.judge("agents_stay_within_their_limits").len(), 2, "turn 3 follows a refused tool");
        // `happy`: tool-less agents pay turn 0 only; an unknown op is not judged.
        let mut h = HistoryBuilder::engine_run();
        h.pay(0, "a", "r", 1, 0);
        paid(&mut h, "one", 1, 0);
        assert!(h.judge("agents_stay_within_their_limits").is_empty());
        paid(&mut h, "one", 1, 1);
        assert_eq!(h.judge("agents_stay_within_their_limits").len(), 1);
        // `pipeline`: a step runs its tool as turn 0 and pays nothing.
        let mut h = HistoryBuilder::default();
        h.fact(0, "host", FactKind::Submitted { run_id: "r".into(), workflow: "pipeline".into() });
        tool(&mut h, "fetch", 1, 0);
        assert!(h.judge("agents_stay_within_their_limits").is_empty());
        paid(&mut h, "fetch", 1, 0);
        assert_eq!(h.judge("agents_stay_within_their_limits").len(), 1);
    }

    #[test]
    fn a_turn_sent_a_conversation_other_than_its_earlier_turns_is_caught() {
        use crate::history::FactKind;
        use crate::ledger::{reply, tool_result};
        use serde_json::json;
        // `two-approvals`' reviser asks for a tool every turn: turn t is sent t messages.
        let name = "revise";
        let message = |n: u32| json!({ "turn": n, "reply": reply(name, n), "tool": tool_result(name, n) });
        let judge = |turn: u32, messages: Vec<serde_json::Value>| {
            let mut h = HistoryBuilder::default();
            h.fact(0, "host", FactKind::Submitted { run_id: "r".into(), workflow: "two-approvals".into() });
            let conversation = serde_json::Value::Array(messages).to_string();
            h.fact(
                0,
                "a",
                FactKind::Paid { run_id: "r".into(), op: name.into(), dispatch: 5, turn, conversation },
            );
            h.judge("provider_sees_its_conversation")
        };
        assert!(judge(0, vec![]).is_empty());
        assert!(judge(2, vec![message(0), message(1)]).is_empty());
        // A restore that kept the turn count but lost the messages.
        let v = judge(2, vec![]);
        assert_eq!(v.len(), 1, "{v:?}");
        assert!(v[0].witness.contains("holds 0 messages, not 2"), "{}", v[0].witness);
        // One message short (the last turn's never saved), swapped, or another turn's.
        assert_eq!(judge(2, vec![message(0)]).len(), 1);
        assert_eq!(judge(2, vec![message(1), message(0)]).len(), 1);
        let mut wrong = message(1);
        wrong["tool"] = tool_result(name, 0);
        assert_eq!(judge(2, vec![message(0), wrong]).len(), 1);
        // A step is not an agent, and a payment recorded without its conversation is not judged.
        let mut h = HistoryBuilder::default();
        h.fact(0, "host", FactKind::Submitted { run_id: "r".into(), workflow: "two-approvals".into() });
        paid(&mut h, name, 5, 2);
        assert!(h.judge("provider_sees_its_conversation").is_empty());
    }

    #[test]
    fn an_agent_that_reaches_max_turns_pays_no_more() {
        use crate::history::FactKind;
        // `two-approvals`' reviser always asks for a tool and ends on max_turns.
        let wf = crate::ledger::two_approvals();
        let Some(store::engine::Op::Agent { name, max_turns, max_tool_calls, tool_turns }) =
            wf.ops.iter().find(|o| crate::ledger::field(o) == "revise").cloned()
        else {
            panic!("two-approvals has a revise agent")
        };
        assert!(tool_turns >= max_turns && max_tool_calls >= max_turns, "revise must end on max_turns");
        let mut h = HistoryBuilder::default();
        h.fact(0, "host", FactKind::Submitted { run_id: "r".into(), workflow: "two-approvals".into() });
        for turn in 0..max_turns {
            paid(&mut h, &name, 5, turn);
            tool(&mut h, &name, 5, turn);
        }
        assert!(h.judge("agents_stay_within_their_limits").is_empty());
        paid(&mut h, &name, 5, max_turns);
        assert_eq!(h.judge("agents_stay_within_their_limits").len(), 1);
    }

    #[test]
    fn paying_a_completed_dispatch_is_caught_but_a_zombie_payment_is_not_judged() {
        let mut h = HistoryBuilder::engine_run();
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
}
