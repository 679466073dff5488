//! Coverage goals ("sometimes" properties): situations a sweep must reach for its clean
//! verdict to mean something. A run never fails on a goal. Each scenario declares which
//! goals it exists to reach and in what share of its seeds ([`Required`]); a sweep that
//! falls short of a declared share is a coverage shortfall (exit code 3), not a pass: a
//! scenario that never takes a lease over from a silent holder has not tested fencing.

use std::collections::BTreeMap;

use serde_json::Value;

use super::contract::{is_deletion_record_put, record_names, EntryView, MetaView, Status};
use super::engine::order;
use super::model::{walk_grants, Judged};
use crate::history::{Call, FactKind, FaultKind, OpKind, Outcome};

pub use crate::verdict::{required, Required};

/// Whether `name` is a goal of [`GOALS`].
pub fn is_goal(name: &str) -> bool {
    GOALS.iter().any(|g| g.name == name)
}

/// One goal.
pub struct Goal {
    pub name: &'static str,
    pub claim: &'static str,
    pub check: fn(&Judged) -> bool,
}

/// Every goal, in report order.
pub const GOALS: &[Goal] = &[
    Goal {
        name: "takeover_of_a_silent_holder",
        claim: "An acquire was granted after the previous grant expired unreleased.",
        check: takeover_of_a_silent_holder,
    },
    Goal {
        name: "superseded_write_refused",
        claim:
            "A mutation carrying a superseded lease was refused (the fence held against a live stale writer).",
        check: superseded_write_refused,
    },
    Goal { name: "busy_met", claim: "A call met SQLITE_BUSY.", check: busy_met },
    Goal {
        name: "second_start_of_a_live_run_refused",
        claim: "An engine refused to start a run whose segment it still had live (a double-clicked retry): a_live_segment_blocks_a_second_start and a_live_refusal_has_a_live_segment had a second start to judge.",
        check: second_start_of_a_live_run_refused,
    },
    Goal {
        name: "answer_to_a_running_run_landed",
        claim: "An operator's offline answer to a suspension still open on a run whose meta, read under the answer's brief lease, said `running` (its segment died after suspending, or its settle's meta write failed) appended its resolution: an_answer_to_a_live_run_lands had such an answer to judge.",
        check: answer_to_a_running_run_landed,
    },
    Goal {
        name: "answer_to_an_ended_run_refused",
        claim: "An operator's offline answer to a suspension still open on a run whose meta, read under the answer's brief lease, said the run had ended (ok, error or cancelled) was refused: an_answer_to_an_ended_run_is_refused had such an answer to judge.",
        check: answer_to_an_ended_run_refused,
    },
    Goal {
        name: "read_beside_own_uncommitted_write",
        claim: "A read of a run was invoked after a write of that run by the same process, while that write stood stalled between its last statement and its commit: reads_see_serial_history judged whether it saw the uncommitted write.",
        check: read_beside_own_uncommitted_write,
    },
    Goal {
        name: "malformed_input_refused",
        claim: "A call the contract calls malformed (a run id, blob ref, owner or seq) was refused as invalid input.",
        check: malformed_input_refused,
    },
    Goal {
        name: "prune_deleted_two_checkpoints",
        claim: "An operator's prune deleted two or more spent checkpoints of one run under its brief lease: prune_deletes_every_spent_checkpoint, prune_deletes_only_listed_blobs and a_prune_counts_what_it_deleted judged a prune with more than one candidate.",
        check: prune_deleted_two_checkpoints,
    },
    Goal {
        name: "ttl_outside_the_domain_refused",
        claim: "A store constructed with a lease ttl outside L6's domain (1 to 2147483647 ms) was refused as a configuration error.",
        check: ttl_outside_the_domain_refused,
    },
    Goal {
        name: "crash_after_commit",
        claim: "A process died with a call in flight whose write had already committed.",
        check: crash_after_commit,
    },
    Goal {
        name: "restarted_process_wrote",
        claim: "A restarted process made a mutation that took effect.",
        check: restarted_process_wrote,
    },
    Goal {
        name: "run_resumed_by_a_later_segment",
        claim: "A run's meta was written by a segment after its first (segments >= 2).",
        check: run_resumed_by_a_later_segment,
    },
    Goal {
        name: "turn_paid_again_in_a_window",
        claim: "A turn was paid twice (the documented at-least-once window was exercised).",
        check: turn_paid_again_in_a_window,
    },
    Goal {
        name: "suspension_resolved",
        claim: "An open suspension was resolved by a resolution entry.",
        check: suspension_resolved,
    },
    Goal {
        name: "paying_holder_told_superseded",
        claim: "A segment that had paid for a turn met a lease_held refusal of its renew or a fenced write (no_work_after_lease_lost had something to judge).",
        check: paying_holder_told_superseded,
    },
    Goal {
        name: "run_settled_cancelled",
        claim: "A segment settled a run cancelled and its terminal meta write took effect (a cancel under a live lease: a worker stop, or a renew that failed while the lease was still valid).",
        check: run_settled_cancelled,
    },
    Goal {
        name: "parked_run_resumed_by_its_parker",
        claim: "An owner that last left a run suspended wrote its meta again after a resolution of that suspension landed (a worker that remembered parking the run let it through).",
        check: parked_run_resumed_by_its_parker,
    },
    Goal {
        name: "retries_of_one_run_raced",
        claim: "Two identities' explicit resumes of one run were in flight at once (the later one began before the earlier one returned).",
        check: retries_of_one_run_raced,
    },
    Goal {
        name: "lost_append_then_settled",
        claim: "A grant one of whose journal appends failed went on to journal a run_settle (a seq gap the segment wrote past, and a settle the integrity latch had to decide: no_clean_settle_over_a_lost_append had something to judge).",
        check: lost_append_then_settled,
    },
    Goal {
        name: "answer_redelivered_refused",
        claim: "An answer delivered again to a suspension already answered was refused by the engine as a config error (each_suspension_answered_once had a second answer to judge).",
        check: answer_redelivered_refused,
    },
    Goal {
        name: "stopped_sweep_returned",
        claim: "A worker told to stop while it swept returned from that sweep (a_stopped_worker_takes_no_run had a window to judge).",
        check: stopped_sweep_returned,
    },
    Goal {
        name: "resume_under_another_workflow_refused",
        claim: "A host's explicit resume passed another workflow than the one its run was submitted with, and returned a failure (a_resume_keeps_the_runs_workflow had a refused resume to judge).",
        check: resume_under_another_workflow_refused,
    },
    Goal {
        name: "retention_deleted_a_run",
        claim: "A worker's retention deleted a run under its brief lease (the delete applied after the worker's `worker.retention.after_acquire` point on that run: only_terminal_runs_deleted and no_live_run_deleted had a retention delete to judge).",
        check: retention_deleted_a_run,
    },
    Goal {
        name: "cut_cascade_then_retried",
        claim: "A resume was asked for a run whose deletion cascade had applied a write (its deletion record, or a blob delete after the process's `engine.delete.before_blobs` or `worker.retention.after_acquire` point on the run) and whose journal delete had not applied since: the resume met a half-deleted run, which completed_dispatch_never_repaid, checkpoint_never_regresses and deleted_run_stays_deleted judge.",
        check: cut_cascade_then_retried,
    },
    Goal {
        name: "ended_run_settled_again_otherwise",
        claim: "A run whose last journal entry was a run_settle of one terminal status (ok, error, cancelled, exhausted) had a run_settle of another status appended directly after it (a retry that replayed every op and ended another way: the settle's write-on-change rule had a changed status over an unchanged journal to decide, which terminal_meta_matches_the_last_settle judges).",
        check: ended_run_settled_again_otherwise,
    },
    Goal {
        name: "repair_found_nothing_to_write",
        claim: "An operator's repair was granted its brief lease on a run the audit had called meta-behind or stranded, and wrote no meta under it (the run was settled or repaired between the audit's reads and the acquire): the repair's path that gives back a lease it wrote nothing under, which a_brief_lease_is_given_back_first and a_taken_lease_is_given_back judge.",
        check: repair_found_nothing_to_write,
    },
    Goal {
        name: "paid_call_refused_by_the_budget",
        claim: "A segment settled a run exhausted with no value (a paid call was refused because the run's spend had reached its budget: paid_calls_stay_within_the_budget and a_run_exhausts_at_its_budget had a refusal to judge).",
        check: paid_call_refused_by_the_budget,
    },
    Goal {
        name: "body_completed_over_its_budget",
        claim: "A segment settled a run exhausted with a value (its body completed with the last paid call spending the budget: settled_value_matches_workflow judged the value that survives).",
        check: body_completed_over_its_budget,
    },
    Goal {
        name: "zero_budget_run_exhausted",
        claim: "A run whose meta records a budget of 0 dollars settled exhausted (a zero budget is the boundary: the run's spend has reached it before its first paid call, so paid_calls_stay_within_the_budget and a_run_exhausts_at_its_budget judged a run no paid call was allowed).",
        check: zero_budget_run_exhausted,
    },
    Goal {
        name: "receipt_lost_at_the_budget",
        claim: "A segment that had spent its budget, lost one or more billing receipts (a refused append it swallowed) and no other call, and did not park, settled exhausted or error: the budget and the lost-append latch both had a say in its settle, which a_run_exhausts_at_its_budget and each_paid_call_gets_its_receipt judge.",
        check: super::engine::payments::receipt_lost_at_the_budget,
    },
    Goal {
        name: "paid_call_overshot_the_budget",
        claim: "A segment paid a call that took its spend from below its budget to past it (the price divides no multiple that lands on the budget): the call is allowed, since the spend had not reached the budget, and the next is refused, which paid_calls_stay_within_the_budget and a_run_exhausts_at_its_budget judge on both sides.",
        check: super::engine::payments::paid_call_overshot_the_budget,
    },
    Goal {
        name: "empty_values_read_back",
        claim: "A meta record carrying an empty name and an empty tag list was applied and then read back by get_meta before its run's meta changed again (reads_see_serial_history judged whether an empty value reads back as written or as absent).",
        check: empty_values_read_back,
    },
    Goal {
        name: "holder_finished_a_marked_deletion",
        claim: "A journal delete under a lease of the run applied while the run's meta was live (running or suspended) and a deletion record put since the run's last delete named that meta's generation: a holder finished a deletion cascade another identity began and cut over a live run (docs/engine-model.md 5.3 and 6.1), which all_runs_settle_after_heal, holder_threads_its_lease and no_live_run_deleted had to judge.",
        check: holder_finished_a_marked_deletion,
    },
    Goal {
        name: "holder_finished_a_marked_running_deletion",
        claim: "As holder_finished_a_marked_deletion, with the run's meta `running` when the holder's delete applied: a cascade cut over a run its deleter read stuck running, whose marked generation a worker's drive had to finish deleting rather than boot (no_boot_of_a_recorded_generation judged the drive).",
        check: holder_finished_a_marked_running_deletion,
    },
    Goal {
        name: "worker_listed_a_workflow_it_lacks",
        claim: "A worker one release behind (its process's `Deployed` fact leaves a workflow out) listed a running or suspended run of a workflow it does not register: its sweep had a run to leave alone, lease untouched (a_sweep_tries_every_candidate and a_taken_lease_is_given_back judged it).",
        check: worker_listed_a_workflow_it_lacks,
    },
    Goal {
        name: "census_listed_a_run_with_no_entry",
        claim: "A whole-catalog census listed a run whose journal, by the serial history at the listing, held no entry (a run booted before its first append, or whose first dispatch died): audits_follow_the_decision_table had such a run to see reported.",
        check: census_listed_a_run_with_no_entry,
    },
];

/// The goals one run met.
pub fn met(j: &Judged) -> Vec<&'static str> {
    GOALS.iter().filter(|g| (g.check)(j)).map(|g| g.name).collect()
}

fn takeover_of_a_silent_holder(j: &Judged) -> bool {
    let mut hit = false;
    walk_grants(j, |c, g| {
        if c.op != OpKind::Acquire {
            return;
        }
        if let (Some(g), Some(now)) = (g, Judged::checked_ms(c)) {
            hit |= g.ended.is_none() && now >= g.expires_at;
        }
    });
    hit
}

fn superseded_write_refused(j: &Judged) -> bool {
    let mut max_epoch: BTreeMap<&str, u64> = BTreeMap::new();
    let mut calls: Vec<_> = j.history.calls.iter().collect();
    calls.sort_by_key(|c| c.returned_ns);
    for c in calls {
        if let Some(g) = &c.granted {
            let e = max_epoch.entry(g.run_id.as_str()).or_default();
            *e = (*e).max(g.epoch.0);
        }
        if let (Some(l), Outcome::Err { code, .. }) = (&c.lease, &c.outcome) {
            if code == "lease_held" && max_epoch.get(l.run_id.as_str()).is_some_and(|&m| m > l.epoch.0) {
                return true;
            }
        }
    }
    false
}

fn second_start_of_a_live_run_refused(j: &Judged) -> bool {
    j.history.facts.iter().any(|f| {
        matches!(&f.kind, FactKind::Failed { error, .. } if error.contains(super::engine::progress::LIVE_REFUSAL))
    })
}

fn answer_to_a_running_run_landed(j: &Judged) -> bool {
    super::engine::answers::answers(j).iter().any(|a| a.status == Status::Running && a.answered)
}

fn answer_to_an_ended_run_refused(j: &Judged) -> bool {
    super::engine::answers::answers(j).iter().any(|a| a.status.is_terminal() && !a.answered)
}

fn read_beside_own_uncommitted_write(j: &Judged) -> bool {
    let calls = &j.history.calls;
    j.history.faults.iter().any(|f| {
        let inside = f.point.name().ends_with(".before_commit");
        let stalled =
            matches!(f.kind, FaultKind::Stall | FaultKind::StallToExpiry | FaultKind::StallBeforeExpiry);
        if !inside || !stalled {
            return false;
        }
        let Some(w) = f.call.and_then(|id| calls.get(id)).filter(|c| Some(c.id) == f.call) else {
            return false;
        };
        let until = f.until_ns.unwrap_or(f.at_ns);
        calls.iter().any(|r| {
            matches!(r.op, OpKind::Load | OpKind::GetMeta)
                && r.id > w.id
                && (r.node, r.incarnation) == (w.node, w.incarnation)
                && r.run_id == w.run_id
                && (f.at_ns..until).contains(&r.invoked_ns)
        })
    })
}

fn busy_met(j: &Judged) -> bool {
    j.history.calls.iter().any(|c| c.outcome.is_busy())
}

fn malformed_input_refused(j: &Judged) -> bool {
    j.history.calls.iter().any(|c| {
        matches!(&c.outcome, Outcome::Err { code, .. } if code == "invalid_input")
            && super::contract::malformed_input(c.op, &c.run_id, &c.args).is_some()
    })
}

fn prune_deleted_two_checkpoints(j: &Judged) -> bool {
    super::eligibility::prunes(j)
        .iter()
        .any(|p| p.deletes.iter().filter(|c| c.applied.is_some()).count() >= 2)
}

fn ttl_outside_the_domain_refused(j: &Judged) -> bool {
    j.history.calls.iter().any(|c| {
        super::contract::boot_outside_the_ttl_domain(c)
            && matches!(&c.outcome, Outcome::Err { code, .. } if code == "config")
    })
}

fn ended_run_settled_again_otherwise(j: &Judged) -> bool {
    // Per run: the status of its journal's last entry when that entry is a run_settle
    // (`None` when the last entry is anything else, or the journal was deleted).
    let mut tail: BTreeMap<&str, Option<Status>> = BTreeMap::new();
    for c in &j.applied {
        match c.op {
            OpKind::Append => {
                let settled = c.args.payload.as_deref().and_then(EntryView::parse);
                let settled = settled.as_ref().and_then(super::contract::settle_status);
                let before = tail.insert(c.run_id.as_str(), settled).flatten();
                if let (Some(was), Some(now)) = (before, settled) {
                    if was.is_terminal() && now != was {
                        return true;
                    }
                }
            }
            OpKind::Delete => {
                tail.remove(c.run_id.as_str());
            }
            _ => {}
        }
    }
    false
}

fn repair_found_nothing_to_write(j: &Judged) -> bool {
    let ix = j.index();
    j.applied.iter().filter(|c| c.op == OpKind::Acquire).any(|g| {
        let Some(l) = g.granted.as_ref() else { return false };
        let under = ix.under_lease(&l.run_id, l.epoch.0);
        ix.marked("engine.repair.after_acquire", g.node, g.incarnation, &g.run_id, Some(l.epoch.0))
            && under.iter().any(|c| c.op == OpKind::Release && c.outcome.is_ok())
            && !under.iter().any(|c| c.op == OpKind::PutMeta)
    })
}

fn crash_after_commit(j: &Judged) -> bool {
    j.history.calls.iter().any(|c| c.outcome == Outcome::Unknown && c.applied.is_some())
}

fn restarted_process_wrote(j: &Judged) -> bool {
    j.applied.iter().any(|c| c.incarnation > 0)
}

/// The meta records of the applied meta writes, in apply order (undecodable ones skipped).
fn applied_metas<'h>(j: &'h Judged) -> impl Iterator<Item = MetaView> + 'h {
    j.applied
        .iter()
        .filter(|c| c.op == OpKind::PutMeta)
        .filter_map(|c| c.args.payload.as_deref().and_then(MetaView::parse))
}

fn run_resumed_by_a_later_segment(j: &Judged) -> bool {
    applied_metas(j).any(|m| m.segments.is_some_and(|s| s >= 2))
}

fn turn_paid_again_in_a_window(j: &Judged) -> bool {
    let mut seen: BTreeMap<(&str, u64, u32), ()> = BTreeMap::new();
    for f in &j.history.facts {
        if let FactKind::Paid { run_id, dispatch, turn, .. } = &f.kind {
            if seen.insert((run_id.as_str(), *dispatch, *turn), ()).is_some() {
                return true;
            }
        }
    }
    false
}

fn suspension_resolved(j: &Judged) -> bool {
    j.applied.iter().any(|c| {
        c.op == OpKind::Append
            && c.args.payload.as_deref().and_then(EntryView::parse).is_some_and(|e| e.kind == "resolution")
    })
}

fn paying_holder_told_superseded(j: &Judged) -> bool {
    let mut payers: BTreeMap<(&str, &str, u32), u64> = BTreeMap::new();
    for f in &j.history.facts {
        if let FactKind::Paid { run_id, .. } = &f.kind {
            payers.entry((run_id.as_str(), f.owner.as_str(), f.node)).or_insert(f.at_ns);
        }
    }
    j.history.calls.iter().any(|c| {
        let (Some(l), Outcome::Err { code, .. }) = (&c.lease, &c.outcome) else { return false };
        code == "lease_held"
            && c.op != OpKind::Acquire
            && payers
                .get(&(l.run_id.as_str(), l.owner.as_str(), c.node))
                .is_some_and(|&first| c.returned_ns.is_some_and(|r| r > first))
    })
}

/// Whether a segment settled a run exhausted with (`true`) or without a value.
fn settled_exhausted(j: &Judged, with_value: bool) -> bool {
    j.history.facts.iter().any(|f| {
        matches!(&f.kind, FactKind::Settled { status, value, .. }
            if status == "exhausted" && value.is_some() == with_value)
    })
}

fn paid_call_refused_by_the_budget(j: &Judged) -> bool {
    settled_exhausted(j, false)
}

fn body_completed_over_its_budget(j: &Judged) -> bool {
    settled_exhausted(j, true)
}

fn zero_budget_run_exhausted(j: &Judged) -> bool {
    applied_metas(j)
        .any(|m| m.status == Status::Exhausted && m.raw.get("budgetUsd").and_then(Value::as_u64) == Some(0))
}

fn empty_values_read_back(j: &Judged) -> bool {
    let ix = j.index();
    let empty = |c: &Call| {
        c.op == OpKind::PutMeta
            && c.args.payload.as_deref().and_then(MetaView::parse).is_some_and(|m| {
                m.name.as_deref() == Some("") && m.tags.as_ref().is_some_and(|t| t.is_empty())
            })
    };
    j.history.calls.iter().filter(|c| c.op == OpKind::GetMeta && c.outcome.is_ok()).any(|read| {
        let Some(at) = read.seen_at else { return false };
        let last = ix
            .recorded_before(&read.run_id, at)
            .iter()
            .rev()
            .find(|c| matches!(c.op, OpKind::PutMeta | OpKind::Delete));
        last.is_some_and(|c| empty(c))
    })
}

fn run_settled_cancelled(j: &Judged) -> bool {
    applied_metas(j).any(|m| m.status == Status::Cancelled)
}

fn parked_run_resumed_by_its_parker(j: &Judged) -> bool {
    // Per run: the owner whose meta write last left it suspended, and whether a resolution
    // landed after that write.
    let mut parked: BTreeMap<&str, (&str, bool)> = BTreeMap::new();
    for c in &j.applied {
        let Some(owner) = c.lease.as_ref().map(|l| l.owner.as_str()) else { continue };
        let payload = c.args.payload.as_deref();
        match c.op {
            OpKind::Append if payload.and_then(EntryView::parse).is_some_and(|e| e.kind == "resolution") => {
                if let Some(p) = parked.get_mut(c.run_id.as_str()) {
                    p.1 = true;
                }
            }
            OpKind::PutMeta => {
                let Some(m) = payload.and_then(MetaView::parse) else { continue };
                if m.status == Status::Suspended {
                    parked.insert(c.run_id.as_str(), (owner, false));
                } else if parked.remove(c.run_id.as_str()).is_some_and(|(o, resolved)| resolved && o == owner)
                {
                    return true;
                }
            }
            _ => {}
        }
    }
    false
}

fn retries_of_one_run_raced(j: &Judged) -> bool {
    let mut facts: Vec<_> = j.history.facts.iter().collect();
    facts.sort_by_key(|f| f.at_ns);
    // Per (run, owner): when its explicit resume began, until its settle or failure (a
    // resume its process died in never ends, and races nothing).
    let mut open: BTreeMap<(&str, &str), u64> = BTreeMap::new();
    let mut began: Vec<(&str, &str, u64)> = Vec::new();
    for f in facts {
        match &f.kind {
            FactKind::Resumed { run_id, .. } => {
                open.insert((run_id.as_str(), f.owner.as_str()), f.at_ns);
                began.push((run_id.as_str(), f.owner.as_str(), f.at_ns));
            }
            FactKind::Settled { run_id, .. } | FactKind::Failed { run_id, .. } => {
                if let Some(start) = open.remove(&(run_id.as_str(), f.owner.as_str())) {
                    let raced = began.iter().any(|&(r, o, t)| {
                        r == run_id.as_str() && o != f.owner.as_str() && t >= start && t < f.at_ns
                    });
                    if raced {
                        return true;
                    }
                }
            }
            _ => {}
        }
    }
    false
}

fn lost_append_then_settled(j: &Judged) -> bool {
    !super::engine::settles::settles_after_a_lost_append(j).is_empty()
}

fn answer_redelivered_refused(j: &Judged) -> bool {
    j.history
        .facts
        .iter()
        .any(|f| matches!(&f.kind, FactKind::Failed { what, .. } if what == "redelivered answer refused"))
}

fn stopped_sweep_returned(j: &Judged) -> bool {
    j.history.facts.iter().any(|f| f.kind == FactKind::StoppedSweepReturned)
}

fn resume_under_another_workflow_refused(j: &Judged) -> bool {
    let facts = &j.history.facts;
    let submitted: BTreeMap<&str, &str> = facts
        .iter()
        .filter_map(|f| match &f.kind {
            FactKind::Submitted { run_id, workflow } => Some((run_id.as_str(), workflow.as_str())),
            _ => None,
        })
        .collect();
    facts.iter().enumerate().any(|(i, f)| {
        let FactKind::Resumed { run_id, workflow } = &f.kind else { return false };
        if submitted.get(run_id.as_str()).is_none_or(|w| w == workflow) {
            return false;
        }
        super::engine::resume_return(facts, i).is_some_and(|g| matches!(g.kind, FactKind::Failed { .. }))
    })
}

fn retention_deleted_a_run(j: &Judged) -> bool {
    j.applied.iter().filter(|c| c.op == OpKind::Delete).any(|c| {
        let before = c.applied.as_ref().map_or(usize::MAX, |a| a.order);
        j.history.marks.iter().any(|m| {
            m.point == "worker.retention.after_acquire"
                && (m.node, m.incarnation) == (c.node, c.incarnation)
                && m.run_id == c.run_id
                && m.applied_before <= before
        })
    })
}

/// The deletion cascade writes that applied on runs an engine actor started, in apply order:
/// a put of a run's deletion record (a bare ref: only a cascade writes one; a store-level
/// workload's bare ref is a blob like another), and a blob delete whose identity's nearest
/// engine point on the run before it is a cascade's (`engine.delete.before_blobs`, or the
/// retention's `worker.retention.after_acquire`; a prune's blob deletes follow
/// `engine.prune.before_delete`).
pub(super) fn cascade_writes<'h>(j: &Judged<'h>) -> Vec<&'h Call> {
    let runs = super::engine::engine_runs(j);
    j.applied
        .iter()
        .copied()
        .filter(|c| runs.contains(c.run_id.as_str()))
        .filter(|c| match c.op {
            OpKind::BlobPut => is_deletion_record_put(c),
            OpKind::BlobDelete => {
                let order = order(c);
                j.history
                    .marks
                    .iter()
                    .rev()
                    .find(|m| {
                        (m.node, m.incarnation) == (c.node, c.incarnation)
                            && m.run_id == c.run_id
                            && m.applied_before <= order
                    })
                    .is_some_and(|m| {
                        matches!(m.point, "engine.delete.before_blobs" | "worker.retention.after_acquire")
                    })
            }
            _ => false,
        })
        .collect()
}

fn cut_cascade_then_retried(j: &Judged) -> bool {
    let mut cascade: BTreeMap<&str, Vec<usize>> = BTreeMap::new();
    for c in cascade_writes(j) {
        cascade.entry(c.run_id.as_str()).or_default().push(order(c));
    }
    let mut deletes: BTreeMap<&str, Vec<usize>> = BTreeMap::new();
    for &c in j.applied.iter().filter(|c| c.op == OpKind::Delete) {
        deletes.entry(c.run_id.as_str()).or_default().push(order(c));
    }
    j.history.facts.iter().any(|f| {
        let FactKind::Resumed { run_id, .. } = &f.kind else { return false };
        let run = run_id.as_str();
        let Some(&cut) = cascade.get(run).and_then(|v| v.iter().rev().find(|&&o| o < f.applied_before))
        else {
            return false;
        };
        !deletes.get(run).is_some_and(|d| d.iter().any(|&o| o > cut && o < f.applied_before))
    })
}

fn holder_finished_a_marked_deletion(j: &Judged) -> bool {
    holder_finished_a_marked(j, &[Status::Running, Status::Suspended])
}

fn holder_finished_a_marked_running_deletion(j: &Judged) -> bool {
    holder_finished_a_marked(j, &[Status::Running])
}

/// A leased journal delete applied while the run's meta was in one of `live` and a deletion
/// record put since the run's last delete named that meta's generation.
fn holder_finished_a_marked(j: &Judged, live: &[Status]) -> bool {
    let runs = super::engine::engine_runs(j);
    j.applied
        .iter()
        .filter(|c| c.op == OpKind::Delete && runs.contains(c.run_id.as_str()))
        .filter(|c| c.lease.as_ref().is_some_and(|l| l.run_id == c.run_id))
        .any(|c| {
            let Some(meta) = super::engine::meta_before(j, &c.run_id, order(c)) else { return false };
            let before = j.index().recorded_before(&c.run_id, order(c));
            let since = before.iter().rposition(|d| d.op == OpKind::Delete).map_or(0, |i| i + 1);
            let generation = &before[since..];
            live.contains(&meta.status)
                && generation
                    .iter()
                    .any(|d| is_deletion_record_put(d) && record_names(d, meta.genesis.as_deref()))
        })
}

fn worker_listed_a_workflow_it_lacks(j: &Judged) -> bool {
    j.history.facts.iter().any(|f| {
        let FactKind::Deployed { workflows } = &f.kind else { return false };
        let process = j.index().of_process(f.node, f.incarnation);
        process[process.partition_point(|c| c.id < f.invoked_before)..].iter().any(|c| {
            let Some(crate::history::Read::Runs { metas, .. }) = &c.read else { return false };
            c.op == OpKind::ListRuns
                && c.args.actor.as_deref() == Some(f.owner.as_str())
                && metas.iter().any(|m| {
                    matches!(m.status, store::RunStatus::Running | store::RunStatus::Suspended)
                        && m.workflow_name.as_ref().is_some_and(|w| !workflows.contains(w))
                })
        })
    })
}

fn census_listed_a_run_with_no_entry(j: &Judged) -> bool {
    let (calls, ix) = (&j.history.calls, j.index());
    j.history.facts.iter().filter(|f| matches!(f.kind, FactKind::Census { .. })).any(|f| {
        let listing = calls[..f.invoked_before.min(calls.len())].iter().rev().find(|c| {
            (c.node, c.incarnation) == (f.node, f.incarnation)
                && c.args.actor.as_deref() == Some(f.owner.as_str())
                && c.op == OpKind::ListRuns
        });
        let Some((listing, Some(crate::history::Read::Runs { metas, .. }))) = listing.map(|c| (c, &c.read))
        else {
            return false;
        };
        let at = listing.seen_at.unwrap_or(usize::MAX);
        metas.iter().any(|m| ix.journal_at(&m.run_id, at).1 == 0)
    })
}

#[cfg(test)]
mod tests {
    use store::RunStatus;

    use crate::history::FactKind;
    use crate::oracle::testkit::engine::*;

    fn met(h: &HistoryBuilder, goal: &str) -> bool {
        h.meets(goal)
    }

    /// An operator's census: a listing of `listed` (as `lister`), then the `Census` fact.
    fn census(h: &mut HistoryBuilder, lister: &str, listed: &[&str]) {
        let args = crate::history::Args { actor: Some(lister.into()), ..Default::default() };
        h.push(1, crate::history::OpKind::ListRuns, "", None, args, None);
        let c = h.h.calls.last_mut().expect("just pushed");
        c.applied = None;
        let metas =
            listed.iter().map(|r| crate::oracle::testkit::meta_record(r, RunStatus::Running)).collect();
        c.read = Some(crate::history::Read::Runs { filter: crate::oracle::testkit::no_filter(), metas });
        h.fact(1, "op", FactKind::Census { runs: listed.len() as u64 });
    }

    #[test]
    fn a_census_is_met_only_when_its_listing_showed_a_run_with_no_entry() {
        let goal = "census_listed_a_run_with_no_entry";
        let mut h = HistoryBuilder::engine_run();
        let a = h.acquire(0, "w", "r", 1);
        h.meta(0, Some(&a), "r", RunStatus::Running, 1);
        census(&mut h, "op", &["r"]);
        assert!(met(&h, goal), "booted, its first entry not yet appended");
        let mut h = HistoryBuilder::engine_run();
        let a = h.acquire(0, "w", "r", 1);
        h.meta(0, Some(&a), "r", RunStatus::Running, 1);
        census(&mut h, "someone-else", &["r"]);
        assert!(!met(&h, goal), "the census fact's own identity did not list");
        h.append(0, &a, "r", running(0));
        census(&mut h, "op", &["r"]);
        assert!(!met(&h, goal), "the run had an entry when it was listed");
    }

    /// Run r booted `status` by w, a deletion record naming `names` put by a host, then a
    /// delete of r by x, under a lease of r when `leased`.
    fn marked(status: RunStatus, names: &[u8], leased: bool) -> HistoryBuilder {
        let mut h = HistoryBuilder::engine_run();
        let a = h.acquire(0, "w", "r", 1);
        h.meta(0, Some(&a), "r", status, 1);
        h.deletion_record(1, None, "r", names);
        let b = h.acquire(2, "x", "r", 2);
        h.delete(2, leased.then_some(&b), "r");
        h
    }

    #[test]
    fn a_marked_deletion_is_met_by_the_live_status_the_holder_deleted_over() {
        let (any, running) =
            ("holder_finished_a_marked_deletion", "holder_finished_a_marked_running_deletion");
        let h = marked(RunStatus::Running, b"", true);
        assert!(met(&h, any) && met(&h, running), "a running generation the record names");
        let h = marked(RunStatus::Suspended, b"", true);
        assert!(met(&h, any), "a suspended generation the record names");
        assert!(!met(&h, running), "suspended is not running");
        let h = marked(RunStatus::Running, b"g-other", true);
        assert!(!met(&h, any) && !met(&h, running), "the record names another generation");
        let h = marked(RunStatus::Running, b"", false);
        assert!(!met(&h, any) && !met(&h, running), "an unleased delete is no holder's");
        let h = marked(RunStatus::Ok, b"", true);
        assert!(!met(&h, any) && !met(&h, running), "a terminal run is no live one");
    }

    #[test]
    fn a_lacking_worker_is_met_only_when_its_own_listing_showed_a_live_run_it_lacks() {
        let goal = "worker_listed_a_workflow_it_lacks";
        let listing = |h: &mut HistoryBuilder, lister: &str, status: RunStatus, workflow: &str| {
            let args = crate::history::Args { actor: Some(lister.into()), ..Default::default() };
            h.push(1, crate::history::OpKind::ListRuns, "", None, args, None);
            let c = h.h.calls.last_mut().expect("just pushed");
            c.applied = None;
            let mut m = crate::oracle::testkit::meta_record("r", status);
            m.workflow_name = Some(workflow.into());
            c.read = Some(crate::history::Read::Runs {
                filter: crate::oracle::testkit::no_filter(),
                metas: vec![m],
            });
        };
        let mut h = HistoryBuilder::engine_run();
        listing(&mut h, "w", RunStatus::Running, "survey");
        assert!(!met(&h, goal), "no worker is behind");
        h.fact(1, "w", FactKind::Deployed { workflows: vec!["happy".into()] });
        listing(&mut h, "w", RunStatus::Running, "happy");
        assert!(!met(&h, goal), "a workflow it registers");
        listing(&mut h, "w", RunStatus::Ok, "survey");
        assert!(!met(&h, goal), "an ended run is no candidate");
        listing(&mut h, "other", RunStatus::Running, "survey");
        assert!(!met(&h, goal), "another identity's listing");
        listing(&mut h, "w", RunStatus::Suspended, "survey");
        assert!(met(&h, goal));
    }

    #[test]
    fn a_zero_budget_is_met_only_by_an_exhausted_run_whose_budget_was_zero() {
        let goal = "zero_budget_run_exhausted";
        let mut h = HistoryBuilder::engine_run();
        let a = h.acquire(0, "w", "r", 1);
        h.meta_with(0, Some(&a), "r", RunStatus::Running, 1, serde_json::json!({"budgetUsd": 0}));
        assert!(!met(&h, goal), "booted on a zero budget, not settled yet");
        h.meta_with(0, Some(&a), "r", RunStatus::Exhausted, 1, serde_json::json!({"budgetUsd": 1}));
        assert!(!met(&h, goal), "exhausted on a one-dollar budget");
        h.meta_with(0, Some(&a), "r", RunStatus::Ok, 1, serde_json::json!({"budgetUsd": 0}));
        assert!(!met(&h, goal), "a zero budget that settled ok");
        h.meta_with(0, Some(&a), "r", RunStatus::Exhausted, 1, serde_json::json!({"budgetUsd": 0}));
        assert!(met(&h, goal));
    }

    #[test]
    fn empty_values_are_met_only_when_read_while_they_are_the_runs_meta() {
        let goal = "empty_values_read_back";
        let empties = serde_json::json!({"name": "", "tags": []});
        let mut h = HistoryBuilder::engine_run();
        let a = h.acquire(0, "w", "r", 1);
        h.meta_with(0, Some(&a), "r", RunStatus::Running, 1, empties.clone());
        assert!(!met(&h, goal), "written, never read");
        h.meta(0, Some(&a), "r", RunStatus::Running, 1);
        h.read_meta(0, "w", "r");
        assert!(!met(&h, goal), "another record replaced it before the read");
        h.meta_with(0, Some(&a), "r", RunStatus::Running, 1, serde_json::json!({"name": "", "tags": ["t"]}));
        h.read_meta(0, "w", "r");
        assert!(!met(&h, goal), "a tag list that is not empty");
        h.meta_with(0, Some(&a), "r", RunStatus::Running, 1, empties.clone());
        h.read_meta(0, "w", "other");
        assert!(!met(&h, goal), "a read of another run");
        h.read_meta(0, "w", "r");
        assert!(met(&h, goal));
        let mut h = HistoryBuilder::engine_run();
        h.meta_with(0, Some(&a), "r", RunStatus::Running, 1, empties);
        h.delete(0, Some(&a), "r");
        h.read_meta_gone(0, "w", "r");
        assert!(!met(&h, goal), "deleted before the read");
    }

    #[test]
    fn an_ended_run_is_met_only_when_settled_again_otherwise_over_nothing_new() {
        let goal = "ended_run_settled_again_otherwise";
        let mut h = HistoryBuilder::engine_run();
        let a = h.acquire(0, "a", "r", 1);
        h.append(0, &a, "r", running(0));
        h.append(0, &a, "r", settle(1, "cancelled"));
        let b = h.acquire(1, "b", "r", 2);
        h.append(1, &b, "r", settle(2, "cancelled"));
        assert!(!met(&h, goal), "the same status again");
        h.append(1, &b, "r", running(3));
        h.append(1, &b, "r", settle(4, "ok"));
        assert!(!met(&h, goal), "an entry came between the two settles");
        h.append(1, &b, "r", settle(5, "suspended"));
        assert!(met(&h, goal), "from ok to suspended over nothing new");
        let mut h = HistoryBuilder::engine_run();
        let a = h.acquire(0, "a", "r", 1);
        h.append(0, &a, "r", settle(0, "suspended"));
        h.append(0, &a, "r", settle(1, "ok"));
        assert!(!met(&h, goal), "the earlier settle was not terminal");
        h.delete(0, Some(&a), "r");
        h.append(0, &a, "r", settle(0, "error"));
        assert!(!met(&h, goal), "the journal was deleted between the two settles");
        h.append(0, &a, "r", settle(1, "error"));
        assert!(!met(&h, goal));
        h.append(0, &a, "r", settle(2, "ok"));
        assert!(met(&h, goal));
    }

    #[test]
    fn a_repair_is_met_only_when_it_released_a_lease_it_wrote_nothing_under() {
        let goal = "repair_found_nothing_to_write";
        let release = |h: &mut HistoryBuilder, l: &store::Lease| {
            let args = crate::history::Args::default();
            h.push(0, crate::history::OpKind::Release, "r", Some(l.clone()), args, None);
        };
        let mut h = HistoryBuilder::engine_run();
        let l = h.acquire(0, "op", "r", 1);
        h.read_meta(0, "op", "r");
        release(&mut h, &l);
        assert!(!met(&h, goal), "no repair mark on the grant");
        let mut h = HistoryBuilder::engine_run();
        let l = h.acquire(0, "op", "r", 1);
        h.mark(0, "engine.repair.after_acquire", "r", Some(1));
        h.meta(0, Some(&l), "r", RunStatus::Ok, 1);
        release(&mut h, &l);
        assert!(!met(&h, goal), "the repair wrote");
        let mut h = HistoryBuilder::engine_run();
        let l = h.acquire(0, "op", "r", 1);
        h.mark(0, "engine.repair.after_acquire", "r", Some(1));
        h.read_meta(0, "op", "r");
        assert!(!met(&h, goal), "not released (yet)");
        release(&mut h, &l);
        assert!(met(&h, goal));
    }

    #[test]
    fn a_lost_append_is_met_only_when_its_grant_settles_after_it() {
        let goal = "lost_append_then_settled";
        let mut h = HistoryBuilder::engine_run();
        let a = h.acquire(0, "a", "r", 1);
        h.append(0, &a, "r", running(0));
        h.append(0, &a, "r", settle(1, "ok"));
        assert!(!met(&h, goal), "nothing was lost");
        h.append_lost(0, &a, "r", op_entry(2, "decision", "pc:0:0", "ok", None), "busy");
        assert!(!met(&h, goal), "the settle came before the loss");
        let b = h.acquire(1, "b", "r", 2);
        h.append(1, &b, "r", settle(3, "error"));
        assert!(!met(&h, goal), "another grant settled");
        h.append(0, &a, "r", settle(4, "error"));
        assert!(met(&h, goal));
    }

    #[test]
    fn a_refused_resume_under_another_workflow_is_met_only_when_it_failed() {
        let goal = "resume_under_another_workflow_refused";
        let resumed = |wf: &str, end: FactKind| {
            let mut h = HistoryBuilder::engine_run();
            h.fact(0, "host", FactKind::Resumed { run_id: "r".into(), workflow: wf.into() });
            h.fact(
                1,
                "other",
                FactKind::Failed { run_id: "r".into(), what: "retry".into(), error: "x".into() },
            );
            h.fact(0, "host", end);
            h
        };
        let failed = || FactKind::Failed { run_id: "r".into(), what: "retry".into(), error: "config".into() };
        let settled =
            || FactKind::Settled { run_id: "r".into(), status: "ok".into(), value: None, segment: 2 };
        assert!(met(&resumed("limit", failed()), goal));
        assert!(!met(&resumed("limit", settled()), goal), "another identity's failure is not the resume's");
        assert!(!met(&resumed("happy", failed()), goal), "the run's own workflow");
    }

    #[test]
    fn a_retention_delete_is_met_only_after_the_workers_retention_point_on_that_run() {
        let goal = "retention_deleted_a_run";
        let mark = |h: &mut HistoryBuilder, node: u32, run: &str| {
            h.mark(node, "worker.retention.after_acquire", run, Some(1))
        };
        let mut h = HistoryBuilder::engine_run();
        let l = h.acquire(0, "worker", "r", 1);
        h.delete(0, Some(&l), "r");
        assert!(!met(&h, goal), "a host's delete, no retention point");
        mark(&mut h, 0, "s");
        mark(&mut h, 1, "r");
        h.delete(0, Some(&l), "r");
        assert!(!met(&h, goal), "retention points of another run, and of another node");
        mark(&mut h, 0, "r");
        assert!(!met(&h, goal), "the point, but no delete after it");
        h.delete(0, None, "r");
        assert!(met(&h, goal));
    }

    #[test]
    fn a_read_beside_its_own_uncommitted_write_is_met_only_inside_that_write() {
        use crate::history::{FaultKind, FaultRec};
        use store::FaultPoint;
        let goal = "read_beside_own_uncommitted_write";
        // An append by n0 stalls 10 ms at `point`, then `reader` reads the run `at` ms later.
        let stalled = |point: FaultPoint, kind: FaultKind, reader: u32, at: u64| {
            let mut h = HistoryBuilder::engine_run();
            let l = h.acquire(0, "w", "r", 1);
            h.append(0, &l, "r", serde_json::json!({"seq": 0, "kind": "agent"}));
            let write = h.h.calls.last().expect("the append").clone();
            h.h.faults.push(FaultRec {
                at_ns: write.invoked_ns,
                node: 0,
                point,
                kind,
                call: Some(write.id),
                run_id: Some("r".into()),
                until_ns: Some(write.invoked_ns + 10_000_000),
            });
            h.now_ms = (write.invoked_ns / 1_000_000) as i64 + at as i64 - 1;
            h.read_meta(reader, "page", "r");
            h
        };
        let inside = FaultPoint::SqliteAppendBeforeCommit;
        assert!(met(&stalled(inside, FaultKind::Stall, 0, 5), goal));
        assert!(!met(&stalled(inside, FaultKind::Stall, 1, 5), goal), "another process's read");
        assert!(!met(&stalled(inside, FaultKind::Stall, 0, 15), goal), "after the stall");
        assert!(!met(&stalled(inside, FaultKind::Yield, 0, 0), goal), "a yield holds nothing open");
        let checked = FaultPoint::SqliteAppendAfterCheck;
        assert!(!met(&stalled(checked, FaultKind::Stall, 0, 5), goal), "nothing written yet");
    }

    #[test]
    fn a_cut_cascade_then_retried_is_met_only_for_a_cascade_write_no_delete_finished() {
        let goal = "cut_cascade_then_retried";
        let resumed = |h: &mut HistoryBuilder| {
            h.fact(1, "host", FactKind::Resumed { run_id: "r".into(), workflow: "happy".into() })
        };
        let cascade = |record: bool| {
            let mut h = HistoryBuilder::engine_run();
            let l = h.acquire(0, "host", "r", 1);
            h.meta(0, Some(&l), "r", RunStatus::Error, 1);
            h.ckpt(0, &l, "r", 1, 1);
            if record {
                h.deletion_record(0, Some(&l), "r", b"");
            }
            h.mark(0, "engine.delete.before_blobs", "r", Some(1));
            h.blob_delete(0, Some(&l), "r", "r/ckpt/1");
            (h, l)
        };
        let (mut h, _) = cascade(false);
        assert!(!met(&h, goal), "no resume yet");
        resumed(&mut h);
        assert!(met(&h, goal), "a blob delete of the cascade, no journal delete, then a resume");
        let (mut h, l) = cascade(true);
        h.delete(0, Some(&l), "r");
        resumed(&mut h);
        assert!(!met(&h, goal), "the cascade finished before the resume");
        // A prune's blob delete is no cascade.
        let mut h = HistoryBuilder::engine_run();
        let l = h.acquire(0, "op", "r", 1);
        h.ckpt(0, &l, "r", 1, 1);
        h.mark(0, "engine.delete.before_blobs", "r", Some(1));
        h.mark(0, "engine.prune.before_delete", "r", Some(1));
        h.blob_delete(0, Some(&l), "r", "r/ckpt/1");
        resumed(&mut h);
        assert!(!met(&h, goal), "the nearest point is the prune's");
        // The deletion record alone is a cascade write.
        let mut h = HistoryBuilder::engine_run();
        h.deletion_record(0, None, "r", b"");
        resumed(&mut h);
        assert!(met(&h, goal));
    }

    /// Run `r` suspended by `worker`, then (when `resolved`) resolved by an operator, then
    /// booted again by `resumer`.
    fn parked(resolved: bool, resumer: &str) -> HistoryBuilder {
        let mut h = HistoryBuilder::engine_run();
        let w = h.acquire(0, "worker", "r", 1);
        h.meta(0, Some(&w), "r", RunStatus::Suspended, 1);
        let op = h.acquire(1, "operator", "r", 2);
        if resolved {
            h.append(1, &op, "r", op_entry(3, "resolution", "await:k", "ok", Some(2)));
        }
        let again = h.acquire(0, resumer, "r", 3);
        h.meta(0, Some(&again), "r", RunStatus::Running, 2);
        h
    }

    #[test]
    fn a_parked_run_counts_as_resumed_by_its_parker_only_past_a_resolution_and_by_that_owner() {
        assert!(met(&parked(true, "worker"), "parked_run_resumed_by_its_parker"));
        assert!(!met(&parked(false, "worker"), "parked_run_resumed_by_its_parker"), "no resolution landed");
        assert!(!met(&parked(true, "other"), "parked_run_resumed_by_its_parker"), "another owner resumed it");
    }

    fn retry(h: &mut HistoryBuilder, at_ms: i64, owner: &str, kind: FactKind) {
        h.now_ms = at_ms;
        h.fact(0, owner, kind);
    }

    fn resumed() -> FactKind {
        FactKind::Resumed { run_id: "r".into(), workflow: "happy".into() }
    }

    fn ended() -> FactKind {
        FactKind::Failed { run_id: "r".into(), what: "retry".into(), error: "lease held".into() }
    }

    #[test]
    fn retries_race_only_when_one_begins_before_the_other_returns() {
        let mut raced = HistoryBuilder::engine_run();
        retry(&mut raced, 10, "host-a", resumed());
        retry(&mut raced, 11, "host-b", resumed());
        retry(&mut raced, 12, "host-a", ended());
        assert!(met(&raced, "retries_of_one_run_raced"));

        let mut one_after_the_other = HistoryBuilder::engine_run();
        retry(&mut one_after_the_other, 10, "host-a", resumed());
        retry(&mut one_after_the_other, 11, "host-a", ended());
        retry(&mut one_after_the_other, 12, "host-b", resumed());
        retry(&mut one_after_the_other, 13, "host-b", ended());
        assert!(!met(&one_after_the_other, "retries_of_one_run_raced"));

        // host-a's process died in its resume: it never returned, so it raced nothing.
        let mut died = HistoryBuilder::engine_run();
        retry(&mut died, 10, "host-a", resumed());
        retry(&mut died, 11, "host-b", resumed());
        retry(&mut died, 12, "host-b", ended());
        assert!(!met(&died, "retries_of_one_run_raced"));

        // One owner's own retries never race each other.
        let mut same = HistoryBuilder::engine_run();
        retry(&mut same, 10, "host-a", resumed());
        retry(&mut same, 11, "host-a", resumed());
        retry(&mut same, 12, "host-a", ended());
        assert!(!met(&same, "retries_of_one_run_raced"));
    }
}
