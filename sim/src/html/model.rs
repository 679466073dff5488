//! What the HTML timeline draws, derived from one run's recorded [`History`] and nothing
//! else: its events (the lines `--trace` writes, in the same order) and the calls those
//! events point at. No second recorder: a mark exists because the trace has a line for
//! its call, a stall because the trace has its fault line, a tenure because the store
//! applied a mutation that changed the run's lease row.
//!
//! Promises: the model of a run is a pure function of its history and report (no clock,
//! no hash-map order), and it never panics on a history it does not expect (an event
//! pointing at an unknown call is drawn from the event alone).

use std::collections::BTreeMap;

use crate::history::{Call, Event, History, OpKind, Outcome};
use crate::report::RunReport;

/// How a call ended, as the page colours it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CallClass {
    /// The store applied the mutation (its after-commit point was reached).
    Applied,
    /// Returned ok without applying anything (a boot, a read that failed quietly, ...).
    Ok,
    /// Refused with a typed error other than busy.
    Refused,
    /// SQLITE_BUSY.
    Busy,
    /// The node died with the call in flight.
    Unknown,
}

impl CallClass {
    pub fn as_str(self) -> &'static str {
        match self {
            CallClass::Applied => "applied",
            CallClass::Ok => "ok",
            CallClass::Refused => "refused",
            CallClass::Busy => "busy",
            CallClass::Unknown => "unknown",
        }
    }
}

/// One store call, drawn on its process lane.
#[derive(Clone, Debug)]
pub struct CallMark {
    pub call: usize,
    pub node: u32,
    pub incarnation: u32,
    /// Where it is drawn: the return (or, for a call that never returned, the instant of
    /// its last trace line).
    pub at_ns: u64,
    pub invoked_ns: u64,
    pub op: OpKind,
    pub run_id: String,
    pub epoch: Option<u64>,
    pub class: CallClass,
    /// Whether the store applied it (also true for an unknown call whose write committed).
    pub applied: bool,
    pub describe: String,
    pub outcome: String,
    /// The applying (or checking) store's clock, ms.
    pub store_ms: Option<i64>,
    pub applied_order: Option<usize>,
}

/// A stall (or crash) injected at a fault point, drawn on its node's lane.
#[derive(Clone, Debug)]
pub struct Stall {
    pub node: u32,
    pub start_ns: u64,
    pub end_ns: u64,
    pub what: String,
}

/// One process lane.
#[derive(Clone, Debug, Default)]
pub struct Lane {
    pub node: u32,
    /// (instant, the trace line's words) of each crash.
    pub crashes: Vec<(u64, String)>,
    /// (instant, incarnation) of each restart.
    pub restarts: Vec<(u64, u32)>,
    pub stalls: Vec<Stall>,
}

/// A lease tenure: one grant of one run's lease, from the grant to its release, takeover
/// or deletion (or the end of the run).
#[derive(Clone, Debug)]
pub struct Tenure {
    pub index: usize,
    pub run_id: String,
    pub epoch: u64,
    pub owner: String,
    pub node: Option<u32>,
    /// The acquire call that granted it.
    pub grant_call: usize,
    /// The grant's place in the store's apply order.
    pub start_order: usize,
    pub start_ns: u64,
    pub end_ns: u64,
    /// The place in the store's apply order of what ended it (`usize::MAX`: the run's end).
    pub end_order: usize,
    /// "release by n0 e3", "takeover by epoch 4", "deletion", "run end".
    pub end_reason: String,
    /// The expiry by the store's clock after the grant and each renewal, as virtual
    /// instants (the applying node's clock read against virtual time).
    pub expiries: Vec<u64>,
    /// Instants of the renewals that extended it.
    pub renewals: Vec<u64>,
    /// The apply order of each renewal (the grant's is `start_order`).
    pub renewal_orders: Vec<usize>,
    /// Instants at which a call that does not hold this tenure (another owner's, or a
    /// superseded epoch's) moved its row's expiry: the tenure's own expiry stays where its
    /// holder put it, as the oracle judges it.
    pub foreign: Vec<u64>,
}

impl Tenure {
    /// The last expiry instant (the grant's, or its latest renewal's).
    pub fn expiry_ns(&self) -> u64 {
        self.expiries.last().copied().unwrap_or(self.end_ns)
    }

    /// The spans in which the tenure was live, as `(from, from's apply order, to)`: from the
    /// grant to its expiry; a renewal before the expiry extends the span, a renewal after
    /// it (an expired lease renewed) opens a new one; every span ends by `end_ns`.
    pub fn spans(&self) -> Vec<(u64, usize, u64)> {
        let mut spans: Vec<(u64, usize, u64)> = Vec::new();
        let firsts = std::iter::once((self.start_ns, self.start_order));
        let froms = firsts.chain(self.renewals.iter().copied().zip(self.renewal_orders.iter().copied()));
        for ((from, order), &to) in froms.zip(&self.expiries) {
            match spans.last_mut() {
                Some(last) if from <= last.2 => last.2 = last.2.max(to),
                _ => spans.push((from, order, to)),
            }
        }
        for sp in &mut spans {
            sp.2 = sp.2.min(self.end_ns).max(sp.0);
        }
        spans.retain(|sp| sp.0 <= self.end_ns);
        spans
    }

    /// Where the tenure stopped being live before a call applied `order`-th at `at`, if the
    /// call lies outside every live span that began before it; `None` if it lies inside one.
    pub fn outside(&self, at: u64, order: usize) -> Option<Outside> {
        let before: Vec<(u64, usize, u64)> =
            self.spans().into_iter().filter(|sp| sp.1 < order || sp.0 < at).collect();
        // A call applied after what ended the tenure (a deletion in the same instant, say)
        // lies outside it even when the instants are equal.
        let ended_before = self.end_order < order;
        if !ended_before && before.iter().any(|sp| at >= sp.0 && at <= sp.2) {
            return None;
        }
        match before.last() {
            Some(sp) => Some(Outside { from: sp.2, to: at }),
            None => Some(Outside { from: at, to: self.start_ns }),
        }
    }
}

/// The stretch between a call and the tenure it claims: from where the tenure stopped being
/// live to the call (or from the call to the grant, for a call before it).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Outside {
    pub from: u64,
    pub to: u64,
}

impl Tenure {}

/// An engine fact drawn on its node's lane (PAY and TOOL, and the others smaller).
#[derive(Clone, Debug)]
pub struct FactMark {
    pub node: u32,
    pub at_ns: u64,
    /// "pay", "tool", "submit", "settled", "failed", "resume".
    pub kind: &'static str,
    pub text: String,
    pub run_id: String,
}

/// The violation the page leads with.
#[derive(Clone, Debug)]
pub struct Witness {
    pub property: String,
    pub sentence: String,
    pub culprit: Option<usize>,
    /// The tenure the culprit contradicts (the one its lease names, or the one live when
    /// an acquire was granted over it).
    pub tenure: Option<usize>,
    /// Where the culprit lies outside that tenure, if it does.
    pub outside: Option<Outside>,
}

/// Everything the page draws.
#[derive(Clone, Debug, Default)]
pub struct Timeline {
    pub end_ns: u64,
    pub lanes: Vec<Lane>,
    pub runs: Vec<String>,
    pub tenures: Vec<Tenure>,
    pub marks: Vec<CallMark>,
    pub facts: Vec<FactMark>,
    pub heal_ns: Option<u64>,
    pub witnesses: Vec<Witness>,
    /// The culprit call the page should lead with, when the caller knows which violation
    /// matters (a shrunk finding's).
    pub preferred: Option<usize>,
}

impl Timeline {
    /// The witness the page zooms to: the first violation that names a call.
    pub fn lead(&self) -> Option<&Witness> {
        self.witnesses
            .iter()
            .find(|w| self.preferred.is_some() && w.culprit == self.preferred)
            .or_else(|| self.witnesses.iter().find(|w| w.culprit.is_some()))
            .or(self.witnesses.first())
    }
}

fn class_of(c: &Call) -> CallClass {
    match &c.outcome {
        Outcome::Unknown => CallClass::Unknown,
        Outcome::Err { code, .. } if code == "busy" => CallClass::Busy,
        Outcome::Err { .. } => CallClass::Refused,
        Outcome::Ok { .. } if c.applied.is_some() => CallClass::Applied,
        Outcome::Ok { .. } => CallClass::Ok,
    }
}

/// "stall 393ms at sqlite.renew.after_check" -> Some(393).
fn stall_ms(fault: &str) -> Option<u64> {
    let rest = fault.strip_prefix("stall ")?;
    let (num, _) = rest.split_once("ms")?;
    num.parse().ok()
}

/// The virtual instant at which the store clock reading `at_ms` falls, judged against a
/// commit at `commit_ns` when that store's clock read `commit_ms`.
fn store_ms_to_ns(commit_ns: u64, commit_ms: i64, at_ms: i64) -> u64 {
    let delta = at_ms.saturating_sub(commit_ms).saturating_mul(1_000_000);
    if delta >= 0 {
        commit_ns.saturating_add(delta as u64)
    } else {
        commit_ns.saturating_sub(delta.unsigned_abs())
    }
}

/// Build the model of one run.
pub fn build(history: &History, report: &RunReport, preferred: Option<usize>) -> Timeline {
    let calls = &history.calls;
    let mut t = Timeline { preferred, ..Timeline::default() };
    let mut end_ns = report.virtual_ms.saturating_mul(1_000_000);
    let mut lanes: BTreeMap<u32, Lane> = BTreeMap::new();
    let mut marks: BTreeMap<usize, CallMark> = BTreeMap::new();
    for c in calls {
        lanes.entry(c.node).or_insert_with(|| Lane { node: c.node, ..Lane::default() });
    }
    for e in &history.events {
        end_ns = end_ns.max(e.at_ns);
        if let Some(n) = e.node {
            lanes.entry(n).or_insert_with(|| Lane { node: n, ..Lane::default() });
        }
        event_into(e, calls, &mut lanes, &mut marks, &mut t);
    }
    // A stall to the lease expiry lasts until its call returned, a pause until its process
    // continued (or the run ended).
    for lane in lanes.values_mut() {
        for s in &mut lane.stalls {
            if s.end_ns < s.start_ns {
                s.end_ns = end_ns;
            }
        }
    }
    t.end_ns = end_ns.max(1);
    t.lanes = lanes.into_values().collect();
    t.marks = marks.into_values().collect();
    t.marks.sort_by_key(|m| (m.at_ns, m.call));
    tenures_into(calls, &mut t);
    witnesses_into(report, calls, &mut t);
    t
}

fn event_into(
    e: &Event,
    calls: &[Call],
    lanes: &mut BTreeMap<u32, Lane>,
    marks: &mut BTreeMap<usize, CallMark>,
    t: &mut Timeline,
) {
    if let Some(id) = e.call {
        if let Some(c) = calls.get(id) {
            // The call's mark: its return line, or (no return) its last trace line.
            let returned = !e.op.is_empty();
            let keep_existing = marks.get(&id).is_some_and(|m| m.class != CallClass::Unknown);
            if returned || !keep_existing {
                let applied = c.applied.as_ref();
                marks.insert(
                    id,
                    CallMark {
                        call: id,
                        node: c.node,
                        incarnation: c.incarnation,
                        at_ns: e.at_ns,
                        invoked_ns: c.invoked_ns,
                        op: c.op,
                        run_id: c.run_id.clone(),
                        epoch: c.epoch().map(|x| x.0),
                        class: if returned { class_of(c) } else { CallClass::Unknown },
                        applied: applied.is_some(),
                        describe: crate::history::describe_call(c),
                        outcome: if returned { e.outcome.clone() } else { c.outcome.short() },
                        store_ms: applied.map(|a| a.store_now_ms).or(c.checked_now_ms),
                        applied_order: applied.map(|a| a.order),
                    },
                );
            }
        }
    }
    let Some(node) = e.node else {
        if e.op == "HEAL" {
            t.heal_ns = Some(e.at_ns);
        }
        return;
    };
    let lane = lanes.entry(node).or_insert_with(|| Lane { node, ..Lane::default() });
    if e.op == "CRASH" {
        lane.crashes.push((e.at_ns, e.outcome.clone()));
    } else if e.op == "CONTINUE" {
        // A process pause ends: close the lane's open pause band.
        if let Some(s) =
            lane.stalls.iter_mut().rev().find(|s| s.end_ns < s.start_ns && s.what.starts_with("pause"))
        {
            s.end_ns = e.at_ns;
        }
    } else if e.op == "RESTART" {
        let inc = e.outcome.strip_prefix("incarnation ").and_then(|n| n.parse().ok()).unwrap_or(0);
        lane.restarts.push((e.at_ns, inc));
    } else if !e.fault.is_empty() && e.op.is_empty() {
        if let Some(ms) = stall_ms(&e.fault) {
            let end = e.at_ns.saturating_add(ms.saturating_mul(1_000_000));
            lane.stalls.push(Stall { node, start_ns: e.at_ns, end_ns: end, what: e.fault.clone() });
        } else if e.fault.starts_with("stall to the lease expiry") {
            let end = e.call.and_then(|id| calls.get(id)).and_then(|c| c.returned_ns).unwrap_or(0);
            lane.stalls.push(Stall { node, start_ns: e.at_ns, end_ns: end, what: e.fault.clone() });
        } else if e.fault.starts_with("contend") {
            // Another writer held the lock across the call: a mark as long as the call.
            let end = e.call.and_then(|id| calls.get(id)).and_then(|c| c.returned_ns).unwrap_or(e.at_ns);
            lane.stalls.push(Stall {
                node,
                start_ns: e.at_ns,
                end_ns: end.max(e.at_ns),
                what: e.fault.clone(),
            });
        } else if e.fault.starts_with("pause the process") {
            // The whole process freezes until its CONTINUE line (or the run's end).
            lane.stalls.push(Stall { node, start_ns: e.at_ns, end_ns: 0, what: e.fault.clone() });
        }
    } else if e.call.is_none() {
        let kind = match e.op.split(' ').next().unwrap_or("") {
            "PAY" => Some("pay"),
            "TOOL" => Some("tool"),
            "SUBMIT" => Some("submit"),
            "SETTLED" => Some("settled"),
            "FAILED" => Some("failed"),
            "RESUME" => Some("resume"),
            _ => None,
        };
        if let Some(kind) = kind {
            let run_id = e.op.split(' ').nth(if kind == "failed" { 2 } else { 1 }).unwrap_or("").to_string();
            let text = if e.outcome.is_empty() { e.op.clone() } else { format!("{} ({})", e.op, e.outcome) };
            t.facts.push(FactMark { node, at_ns: e.at_ns, kind, text, run_id });
        }
    }
}

/// Walk the applied mutations in apply order and follow each run's lease row: a row with a
/// new epoch opens a tenure (closing the one before: a takeover), the same epoch with a
/// later expiry is a renewal, no row closes the tenure (a release or a deletion).
fn tenures_into(calls: &[Call], t: &mut Timeline) {
    let mut applied: Vec<&Call> = calls.iter().filter(|c| c.applied.is_some()).collect();
    applied.sort_by_key(|c| c.applied.as_ref().map_or(0, |a| a.order));
    let mut open: BTreeMap<String, usize> = BTreeMap::new();
    let mut runs: BTreeMap<String, ()> = BTreeMap::new();
    for c in applied {
        let Some(a) = &c.applied else { continue };
        if c.run_id.is_empty() || c.args.blob_ref.is_some() {
            continue;
        }
        runs.insert(c.run_id.clone(), ());
        let current = open.get(&c.run_id).copied();
        let who = format!("n{} e{}", c.node, c.epoch().map_or("-".into(), |e| e.0.to_string()));
        match &a.lease_row {
            None => {
                if let Some(i) = current {
                    let reason = match c.op {
                        OpKind::Release => format!("release by {who}"),
                        OpKind::Delete => format!("deletion by {who}"),
                        op => format!("{} by {who}", op.as_str()),
                    };
                    close(&mut t.tenures[i], a.at_ns, a.order, reason);
                    open.remove(&c.run_id);
                }
            }
            Some(row) => {
                let expiry = store_ms_to_ns(a.at_ns, a.store_now_ms, row.expires_at);
                match current {
                    Some(i) if t.tenures[i].epoch == row.epoch && t.tenures[i].owner == row.owner => {
                        let ten = &mut t.tenures[i];
                        let holder =
                            c.lease.as_ref().is_some_and(|l| l.owner == ten.owner && l.epoch.0 == ten.epoch);
                        if ten.expiries.last() != Some(&expiry) {
                            if holder {
                                ten.expiries.push(expiry);
                                ten.renewals.push(a.at_ns);
                                ten.renewal_orders.push(a.order);
                            } else {
                                ten.foreign.push(a.at_ns);
                            }
                        }
                    }
                    _ => {
                        if let Some(i) = current {
                            let reason = format!("takeover by epoch {}", row.epoch);
                            close(&mut t.tenures[i], a.at_ns, a.order, reason);
                        }
                        let index = t.tenures.len();
                        let granted_here = c.op == OpKind::Acquire
                            && c.granted.as_ref().is_none_or(|g| g.epoch.0 == row.epoch);
                        t.tenures.push(Tenure {
                            index,
                            run_id: c.run_id.clone(),
                            epoch: row.epoch,
                            owner: row.owner.clone(),
                            node: granted_here.then_some(c.node),
                            grant_call: c.id,
                            start_order: a.order,
                            start_ns: a.at_ns,
                            end_ns: u64::MAX,
                            end_order: usize::MAX,
                            end_reason: String::new(),
                            expiries: vec![expiry],
                            renewals: Vec::new(),
                            renewal_orders: Vec::new(),
                            foreign: Vec::new(),
                        });
                        open.insert(c.run_id.clone(), index);
                    }
                }
            }
        }
    }
    let end = t.end_ns;
    for ten in &mut t.tenures {
        if ten.end_ns == u64::MAX {
            ten.end_ns = end;
            ten.end_reason = "run end".into();
        }
    }
    t.runs = runs.into_keys().collect();
}

fn close(ten: &mut Tenure, at_ns: u64, order: usize, reason: String) {
    ten.end_ns = at_ns;
    ten.end_order = order;
    ten.end_reason = reason;
}

fn witnesses_into(report: &RunReport, calls: &[Call], t: &mut Timeline) {
    for v in &report.violations {
        let culprit = v.call.filter(|&id| id < calls.len());
        let tenure = culprit.and_then(|id| contradicted(&calls[id], t));
        let outside = match (culprit, tenure) {
            (Some(id), Some(i)) => {
                let c = &calls[id];
                let at = t.marks.iter().find(|m| m.call == id).map_or(c.invoked_ns, |m| m.at_ns);
                let order = c.applied.as_ref().map(|a| a.order).or(c.seen_at).unwrap_or(usize::MAX);
                t.tenures[i].outside(at, order)
            }
            _ => None,
        };
        t.witnesses.push(Witness {
            property: v.property.to_string(),
            sentence: v.witness.clone(),
            culprit,
            tenure,
            outside,
        });
    }
}

/// The tenure a culprit call contradicts: the one its lease was granted as, or (an acquire
/// granted while another tenure of the run was live) that live tenure.
fn contradicted(c: &Call, t: &Timeline) -> Option<usize> {
    // Before the culprit in the store's apply order (many calls share one instant).
    let order = c.applied.as_ref().map(|a| a.order).or(c.seen_at).unwrap_or(usize::MAX);
    if let Some(grant) = c.lease_grant {
        if let Some(ten) = t.tenures.iter().find(|x| x.grant_call == grant) {
            return Some(ten.index);
        }
    }
    if let Some(l) = &c.lease {
        return t
            .tenures
            .iter()
            .rfind(|x| {
                x.run_id == l.run_id && x.epoch == l.epoch.0 && x.owner == l.owner && x.start_order < order
            })
            .map(|x| x.index);
    }
    t.tenures
        .iter()
        .rfind(|x| x.run_id == c.run_id && x.grant_call != c.id && x.start_order < order)
        .map(|x| x.index)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tenure(expiries: &[u64], renewals: &[(u64, usize)], end: u64) -> Tenure {
        Tenure {
            index: 0,
            run_id: "r".into(),
            epoch: 3,
            owner: "w".into(),
            node: Some(1),
            grant_call: 0,
            start_order: 10,
            start_ns: 100,
            end_ns: end,
            end_order: usize::MAX,
            end_reason: "run end".into(),
            expiries: expiries.to_vec(),
            renewals: renewals.iter().map(|r| r.0).collect(),
            renewal_orders: renewals.iter().map(|r| r.1).collect(),
            foreign: Vec::new(),
        }
    }

    #[test]
    fn a_renewal_before_the_expiry_extends_the_span_and_one_after_it_opens_a_new_one() {
        let t = tenure(&[350, 500, 800], &[(300, 11), (600, 20)], 700);
        assert_eq!(t.spans(), vec![(100, 10, 500), (600, 20, 700)]);
        // Inside the first span; in the expired stretch; at the renewal's instant but applied
        // before it; after the renewal.
        assert_eq!(t.outside(400, 12), None);
        assert_eq!(t.outside(550, 15), Some(Outside { from: 500, to: 550 }));
        assert_eq!(t.outside(600, 19), Some(Outside { from: 500, to: 600 }));
        assert_eq!(t.outside(650, 21), None);
        // Before the grant.
        assert_eq!(t.outside(50, 5), Some(Outside { from: 50, to: 100 }));
    }

    #[test]
    fn a_takeover_cuts_the_live_span() {
        let t = tenure(&[350], &[], 200);
        assert_eq!(t.spans(), vec![(100, 10, 200)]);
        assert_eq!(t.outside(250, 30), Some(Outside { from: 200, to: 250 }));
    }
}
