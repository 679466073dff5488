//! Holders that know they lost their lease. Once a segment's renew or fenced write has been
//! refused with `lease_held`, the segment has been told it is superseded: rulvar's contract
//! is that any renew failure cancels the body, and a refused fenced write fails it. From
//! that instant the segment pays for no provider turn and runs no tool.
//!
//! What stays exempt is the lease's inherent at-least-once window: work a superseded holder
//! did after another grant of its run took effect but before anything told it so. Its size
//! is reported per run ([`windows`]) and bounded: the engine puts a fenced write between any
//! two paid turns of a segment (a checkpoint after a tool turn, a terminal after the last
//! turn, a running entry before each dispatch), so a superseded holder that is still working
//! learns of its loss within one turn: at most one provider payment and one tool after the
//! other grant took effect. A holder that ignores a refusal, or writes without its lease,
//! keeps paying past that.
//!
//! A segment is identified by its run, the owner identity and process incarnation that
//! acted, and the epoch of that identity's latest grant of the run before the fact (facts
//! carry the count of mutations applied before them, so grants are ordered exactly).

use std::collections::BTreeMap;

use serde::Serialize;

use super::model::{t, Judged};
use super::{Expectation, Property, Witness};
use crate::history::{describe_call, Call, Fact, FactKind, OpKind, Outcome};

/// The lost-lease properties.
pub const ALL: &[Property] = &[
    Property {
        name: "no_work_after_lease_lost",
        expectation: Expectation::Always,
        claim: "After a segment's renew or fenced write is refused with lease_held, that segment makes no further provider payment and runs no further tool.",
        not_checked: "Work a superseded holder did before any refusal told it (the at-least-once window, reported per run and bounded by the next property); work in the same virtual instant as the refusal.",
        check: no_work_after_lease_lost,
    },
    Property {
        name: "superseded_holder_stops_within_a_turn",
        expectation: Expectation::Always,
        claim: "After another grant of its run takes effect, a segment pays for at most one more provider turn and runs at most one more tool before it stops or is told (the at-least-once window is one turn: a fenced write stands between any two).",
        not_checked: "A holder whose lease expired with nobody taking over (it is not superseded); when the window's work happened, only how much of it there was.",
        check: superseded_holder_stops_within_a_turn,
    },
    Property {
        name: "a_failed_renew_stops_the_heartbeat",
        expectation: Expectation::Always,
        claim: "Once a renew of an engine run's lease is refused (any refusal: lease_held, busy, invalid), the process that made it never renews that lease again: any renew failure requests cancel and stops the timer, and a worker cancels the drive and frees its slot (docs/engine-model.md 1.4, 5.2).",
        not_checked: "Runs no engine actor started (store-level actors renew by their own rules); renews whose outcome is unknown (the process died with it in flight).",
        check: a_failed_renew_stops_the_heartbeat,
    },
];

fn a_failed_renew_stops_the_heartbeat(j: &Judged, out: &mut Vec<Witness>) {
    let runs = super::engine::engine_runs(j);
    // Per (process, lease): the first refused renew.
    let mut refused: BTreeMap<(u32, u32, &str, &str, u64), &Call> = BTreeMap::new();
    let mut reported = std::collections::BTreeSet::new();
    for c in j.history.calls.iter().filter(|c| c.op == OpKind::Renew && runs.contains(c.run_id.as_str())) {
        let Some(l) = &c.lease else { continue };
        let key = (c.node, c.incarnation, l.run_id.as_str(), l.owner.as_str(), l.epoch.0);
        if let Some(first) = refused.get(&key) {
            if c.invoked_ns >= first.returned_ns.unwrap_or(u64::MAX) && reported.insert(key) {
                out.push(
                    Witness::new(format!(
                        "n{} renewed run {} under epoch {} at t={} after its renew at t={} was refused ({}): a failed renew must cancel the segment and stop its heartbeat",
                        c.node,
                        l.run_id,
                        l.epoch.0,
                        t(c.invoked_ns),
                        t(first.returned_ns.unwrap_or_default()),
                        match &first.outcome {
                            Outcome::Err { code, .. } => code.as_str(),
                            _ => "?",
                        }
                    ))
                    .on(c.op, c.id),
                );
                continue;
            }
        }
        if matches!(c.outcome, Outcome::Err { .. }) {
            refused.entry(key).or_insert(c);
        }
    }
}

fn superseded_holder_stops_within_a_turn(j: &Judged, out: &mut Vec<Witness>) {
    for w in windows(j) {
        if w.paid > 1 || w.tools > 1 {
            out.push(Witness::new(format!(
                "{}: more than one turn's work after another grant took effect",
                w.describe()
            )));
        }
    }
}

/// One grant, in apply order.
struct GrantAt {
    order: usize,
    epoch: u64,
    owner: String,
    node: u32,
    incarnation: u32,
    at_ns: u64,
}

/// `(run, owner, node, incarnation, epoch)`: one segment.
type SegmentKey = (String, String, u32, u32, u64);

/// Grants per run in apply order, and the first `lease_held` refusal each segment met.
pub(super) struct Segments<'h> {
    grants: BTreeMap<&'h str, Vec<GrantAt>>,
    refused: BTreeMap<SegmentKey, &'h Call>,
}

impl<'h> Segments<'h> {
    fn build(j: &Judged<'h>) -> Segments<'h> {
        let mut grants: BTreeMap<&str, Vec<GrantAt>> = BTreeMap::new();
        for &c in j.applied.iter().filter(|c| c.op == OpKind::Acquire) {
            let epoch = Judged::granted_epoch(c);
            let (Some(epoch), Some(a)) = (epoch, &c.applied) else { continue };
            grants.entry(c.run_id.as_str()).or_default().push(GrantAt {
                order: a.order,
                epoch,
                owner: c.args.owner.clone().unwrap_or_default(),
                node: c.node,
                incarnation: c.incarnation,
                at_ns: a.at_ns,
            });
        }
        let mut refused: BTreeMap<SegmentKey, &Call> = BTreeMap::new();
        for c in &j.history.calls {
            let (Some(l), Outcome::Err { code, .. }) = (&c.lease, &c.outcome) else { continue };
            if code != "lease_held" || c.op == OpKind::Acquire || c.returned_ns.is_none() {
                continue;
            }
            let key = (l.run_id.clone(), l.owner.clone(), c.node, c.incarnation, l.epoch.0);
            let first = refused.entry(key).or_insert(c);
            if c.returned_ns < first.returned_ns {
                *first = c;
            }
        }
        Segments { grants, refused }
    }

    /// The segment a fact acted in: its identity's latest grant of the run before it, and
    /// the first grant of the run (by anyone) after that one, if any took effect before it.
    fn of(&self, run: &str, f: &Fact) -> Option<(&GrantAt, Option<&GrantAt>)> {
        let grants = self.grants.get(run)?;
        let i = grants.iter().rposition(|g| {
            g.order < f.applied_before
                && g.owner == f.owner
                && g.node == f.node
                && g.incarnation == f.incarnation
        })?;
        let next = grants.get(i + 1).filter(|n| n.order < f.applied_before);
        Some((&grants[i], next))
    }
}

fn work_of(f: &Fact) -> Option<(&str, &'static str, u64, u32)> {
    match &f.kind {
        FactKind::Paid { run_id, dispatch, turn, .. } => Some((run_id, "paid turn", *dispatch, *turn)),
        FactKind::Tool { run_id, dispatch, turn, .. } => {
            Some((run_id, "ran the tool of turn", *dispatch, *turn))
        }
        _ => None,
    }
}

/// What the lost-lease properties and the report read, built once per judged run.
pub(super) struct LostLease<'h> {
    segments: Segments<'h>,
    windows: Vec<Window>,
}

fn lost_lease<'a, 'h>(j: &'a Judged<'h>) -> &'a LostLease<'h> {
    j.lost_lease.get_or_init(|| {
        let segments = Segments::build(j);
        let windows = windows_of(j, &segments);
        LostLease { segments, windows }
    })
}

fn no_work_after_lease_lost(j: &Judged, out: &mut Vec<Witness>) {
    let segs = &lost_lease(j).segments;
    let mut reported: BTreeMap<SegmentKey, ()> = BTreeMap::new();
    for f in &j.history.facts {
        let Some((run, what, dispatch, turn)) = work_of(f) else { continue };
        let Some((g, _)) = segs.of(run, f) else { continue };
        let key: SegmentKey = (run.to_string(), f.owner.clone(), f.node, f.incarnation, g.epoch);
        let Some(r) = segs.refused.get(&key) else { continue };
        let learned = r.returned_ns.unwrap_or(u64::MAX);
        if f.at_ns <= learned || reported.contains_key(&key) {
            continue;
        }
        reported.insert(key, ());
        out.push(
            Witness::new(format!(
                    "run {run}: n{} ({})'s segment under epoch {} was refused at t={} ({} returned lease_held) yet {what} {turn} of dispatch {dispatch} at t={}",
                    f.node,
                    f.owner,
                    g.epoch,
                    t(learned),
                    describe_call(r),
                    t(f.at_ns)
                ),
            )
            .on(r.op, r.id),
        );
    }
}

/// One superseded holder's at-least-once window: the work it did after another grant of
/// its run took effect and before a refusal told it (or to its end, if nothing did).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Window {
    pub run_id: String,
    pub owner: String,
    pub node: u32,
    pub epoch: u64,
    /// When the next grant of the run took effect (virtual ns).
    pub superseded_ns: u64,
    /// When a refusal told the holder (`None`: nothing did).
    pub learned_ns: Option<u64>,
    pub paid: u32,
    pub tools: u32,
}

impl Window {
    /// "run r: n1 (worker-n1-i0) under epoch 3 paid 2 turns and ran 1 tool between t=.. and t=..".
    pub fn describe(&self) -> String {
        format!(
            "run {}: n{} ({}) under epoch {} paid {} turn(s) and ran {} tool(s) after its supersession at t={}{}",
            self.run_id,
            self.node,
            self.owner,
            self.epoch,
            self.paid,
            self.tools,
            t(self.superseded_ns),
            self.learned_ns.map_or(", never told".to_string(), |l| format!(", before it was told at t={}", t(l)))
        )
    }
}

/// The at-least-once windows of a run, in run and segment order (only non-empty ones).
pub fn windows<'a>(j: &'a Judged) -> &'a [Window] {
    &lost_lease(j).windows
}

fn windows_of(j: &Judged, segs: &Segments) -> Vec<Window> {
    let mut by_segment: BTreeMap<SegmentKey, Window> = BTreeMap::new();
    for f in &j.history.facts {
        let Some((run, _, _, _)) = work_of(f) else { continue };
        let Some((g, Some(next))) = segs.of(run, f) else { continue };
        let key: SegmentKey = (run.to_string(), f.owner.clone(), f.node, f.incarnation, g.epoch);
        let learned = segs.refused.get(&key).and_then(|c| c.returned_ns);
        if learned.is_some_and(|l| f.at_ns > l) {
            continue; // judged by no_work_after_lease_lost, not part of the window
        }
        let w = by_segment.entry(key).or_insert_with(|| Window {
            run_id: run.to_string(),
            owner: f.owner.clone(),
            node: f.node,
            epoch: g.epoch,
            superseded_ns: next.at_ns,
            learned_ns: learned,
            paid: 0,
            tools: 0,
        });
        match f.kind {
            FactKind::Paid { .. } => w.paid += 1,
            _ => w.tools += 1,
        }
    }
    by_segment.into_values().collect()
}

#[cfg(test)]
mod tests {
    //! The property fails on a minimal history (a segment pays after its refused renew) and
    //! passes its lawful twin (the payment came before the refusal: the window).

    #[test]
    fn a_renew_after_a_refused_renew_is_caught() {
        use crate::history::{Args, OpKind};
        use crate::oracle::testkit::engine::HistoryBuilder;
        let renews = |engine: bool, again: bool| {
            let mut h = if engine { HistoryBuilder::engine_run() } else { HistoryBuilder::default() };
            let a = h.acquire(0, "w", "r", 1);
            h.push(0, OpKind::Renew, "r", Some(a.clone()), Args::default(), None);
            h.refuse_last("busy");
            if again {
                h.push(0, OpKind::Renew, "r", Some(a.clone()), Args::default(), None);
            }
            h.push(0, OpKind::Release, "r", Some(a), Args::default(), None);
            h.judge("a_failed_renew_stops_the_heartbeat")
        };
        let v = renews(true, true);
        assert_eq!(v.len(), 1, "{v:?}");
        assert!(v[0].witness.contains("was refused (busy)"), "{}", v[0].witness);
        assert!(renews(true, false).is_empty(), "the refusal, then the cancel's release");
        assert!(renews(false, true).is_empty(), "a store-level actor's run");
    }

    use store::{Epoch, Lease};

    use super::*;
    use crate::history::FinalState;
    use crate::history::{Applied, Args, History};
    use crate::oracle::Expect;

    const MS: u64 = 1_000_000;

    fn acquire(id: usize, owner: &str, node: u32, epoch: u64, order: usize, at_ms: u64) -> Call {
        let lease = Lease { run_id: "r".into(), owner: owner.into(), epoch: Epoch(epoch) };
        Call {
            id,
            node,
            incarnation: 0,
            op: OpKind::Acquire,
            run_id: "r".into(),
            lease: None,
            args: Args { owner: Some(owner.into()), ..Args::default() },
            invoked_ns: at_ms * MS,
            returned_ns: Some(at_ms * MS),
            outcome: Outcome::Ok { detail: String::new() },
            granted: Some(lease),
            checked_now_ms: None,
            applied: Some(Applied {
                order,
                at_ns: at_ms * MS,
                store_now_ms: 0,
                lease_row: None,
                site_epoch: None,
            }),
            seen_at: None,
            read: None,
            store_clock: crate::history::StoreClock::NotObserved,
            lease_grant: None,
        }
    }

    fn refused_renew(id: usize, owner: &str, node: u32, epoch: u64, at_ms: u64) -> Call {
        let mut c = acquire(id, owner, node, epoch, 0, at_ms);
        c.op = OpKind::Renew;
        c.lease = c.granted.take();
        c.args.owner = None;
        c.applied = None;
        c.outcome = Outcome::Err { code: "lease_held".into(), message: String::new() };
        c
    }

    fn paid(owner: &str, node: u32, at_ms: u64, applied_before: usize, turn: u32) -> Fact {
        Fact {
            at_ns: at_ms * MS,
            applied_before,
            invoked_before: 0,
            node,
            incarnation: 0,
            owner: owner.into(),
            kind: FactKind::Paid {
                run_id: "r".into(),
                op: "a".into(),
                dispatch: 0,
                turn,
                conversation: String::new(),
            },
        }
    }

    fn judge(h: &History) -> (Vec<Witness>, Vec<Window>) {
        let fin = FinalState::default();
        let j = Judged::build(h, &fin, Expect::default());
        let mut out = Vec::new();
        no_work_after_lease_lost(&j, &mut out);
        (out, windows(&j).to_vec())
    }

    /// `a` holds epoch 1 from t=0; `b` takes over with epoch 2 at t=10; `a`'s renew is
    /// refused at t=20.
    fn takeover() -> History {
        let calls =
            vec![acquire(0, "a", 0, 1, 0, 0), acquire(1, "b", 1, 2, 1, 10), refused_renew(2, "a", 0, 1, 20)];
        History { applied_count: 2, calls, ..History::default() }
    }

    #[test]
    fn a_payment_after_the_refused_renew_is_caught() {
        let mut h = takeover();
        h.facts.push(paid("a", 0, 30, 2, 3));
        let (v, _) = judge(&h);
        assert_eq!(v.len(), 1, "{v:?}");
        assert_eq!((v[0].op, v[0].call), (Some("renew"), Some(2)));
        assert!(v[0].witness.contains("paid turn 3"), "{}", v[0].witness);
    }

    #[test]
    fn a_payment_in_the_window_is_reported_not_judged() {
        let mut h = takeover();
        h.facts.push(paid("a", 0, 5, 1, 0)); // before the takeover: no window
        h.facts.push(paid("a", 0, 15, 2, 1)); // superseded, not yet told: the window
        let (v, w) = judge(&h);
        assert!(v.is_empty(), "{v:?}");
        assert_eq!(w.len(), 1, "{w:?}");
        assert_eq!((w[0].paid, w[0].tools, w[0].epoch), (1, 0, 1));
        assert_eq!((w[0].superseded_ns, w[0].learned_ns), (10 * MS, Some(20 * MS)));
    }

    #[test]
    fn a_new_grant_to_the_same_identity_is_a_new_segment() {
        let mut h = takeover();
        // `a` acquires again (epoch 3, after b's lease lapsed) and pays under it.
        h.calls.push(acquire(3, "a", 0, 3, 2, 40));
        h.applied_count = 3;
        h.facts.push(paid("a", 0, 50, 3, 0));
        let (v, _) = judge(&h);
        assert!(v.is_empty(), "{v:?}");
    }

    #[test]
    fn a_second_turn_paid_after_the_takeover_is_caught_and_one_is_the_window() {
        let judge_window = |h: &History| {
            let fin = FinalState::default();
            let j = Judged::build(h, &fin, Expect::default());
            let mut out = Vec::new();
            superseded_holder_stops_within_a_turn(&j, &mut out);
            out
        };
        // One turn paid between the takeover (t=10) and the refusal (t=20): the window.
        let mut h = takeover();
        h.facts.push(paid("a", 0, 12, 2, 1));
        assert!(judge_window(&h).is_empty());
        // A second turn in the same window: the holder did not stop within a turn.
        h.facts.push(paid("a", 0, 16, 2, 2));
        let v = judge_window(&h);
        assert_eq!(v.len(), 1, "{v:?}");
        assert!(v[0].witness.contains("paid 2 turn(s)"), "{}", v[0].witness);
    }
}
