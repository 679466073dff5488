//! The reference model the properties read: the history's mutations in apply order, the
//! lease grants they imply, and the journal, meta and blob state a correct store would
//! hold after applying exactly those mutations; and the history looked up by run, lease,
//! process and mark ([`Index`]), so a property judging each call reads that call's
//! neighbours instead of scanning the whole history (judging a run that ends at the call
//! budget takes seconds, not a minute).
//!
//! Unknown outcomes (the node died with the call in flight) are resolved from what the
//! store applied: a call with an after-commit record is applied, at that position; one
//! without is absent. A call that returned an error but has an after-commit record is
//! itself a violation (`rejected_call_changed_nothing`).

use std::collections::BTreeMap;

use crate::history::FinalState;
use crate::history::{Call, History, OpKind, Outcome};
use crate::oracle::contract::EntryView;
use crate::oracle::Expect;

/// A lease grant as the legitimate operations define it.
#[derive(Clone, Debug)]
pub struct Grant {
    pub owner: String,
    pub epoch: u64,
    pub expires_at: i64,
    pub node: u32,
    /// The acquire call that made the grant.
    pub call: usize,
    pub granted_ns: u64,
    /// Set when its holder released it, or a legitimate delete removed it.
    pub ended: Option<(u64, &'static str)>,
}

/// Everything the properties judge.
pub struct Judged<'h> {
    pub history: &'h History,
    pub fin: &'h FinalState,
    pub expect: Expect,
    /// Mutations that took effect, in apply order.
    pub applied: Vec<&'h Call>,
    /// The serial replay of `applied`, built once for every property that reads it.
    replayed: std::cell::OnceCell<Replay<'h>>,
    /// The engine properties' per-dispatch view, built once for those that read it.
    pub(super) dispatches: std::cell::OnceCell<super::engine::Dispatches>,
    /// The lost-lease view (segments, their refusals and at-least-once windows), built once
    /// for the properties and the report that read it.
    pub(super) lost_lease: std::cell::OnceCell<super::lost_lease::LostLease<'h>>,
    /// Lookups by run, lease and process, built once for the properties that would
    /// otherwise scan the whole history per call they judge.
    index: std::cell::OnceCell<Index<'h>>,
}

impl<'h> Judged<'h> {
    pub fn build(history: &'h History, fin: &'h FinalState, expect: Expect) -> Judged<'h> {
        let mut applied: Vec<&Call> = history
            .calls
            .iter()
            .filter(|c| c.op.is_mutation())
            .filter(|c| c.applied.is_some() || (c.outcome.is_ok() && c.op.is_mutation()))
            .collect();
        // Calls with an after-commit record sort by it; an Ok call without one (a store
        // that skipped its hook) sorts at its return.
        applied.sort_by_key(|c| match &c.applied {
            Some(a) => (a.at_ns, a.order, 0),
            None => (c.returned_ns.unwrap_or(u64::MAX), usize::MAX, c.id),
        });
        // The recorder numbers after-commit records as they happen, in virtual (or, for a real
        // soak, re-ranked machine) time: by instant, the positions must rise. If they do not,
        // the replay below would apply mutations out of the store's order.
        let mut last: Option<&Call> = None;
        for &c in applied.iter().filter(|c| c.applied.is_some()) {
            if let (Some(prev), Some(a), Some(pa)) = (last, &c.applied, last.and_then(|p| p.applied.as_ref()))
            {
                assert!(
                    a.order > pa.order,
                    "apply order not monotone: call {} (position {} at {} ns) sorts after call {} (position {} at {} ns)",
                    c.id,
                    a.order,
                    a.at_ns,
                    prev.id,
                    pa.order,
                    pa.at_ns
                );
            }
            last = Some(c);
        }
        Judged {
            history,
            fin,
            expect,
            applied,
            replayed: std::cell::OnceCell::new(),
            dispatches: std::cell::OnceCell::new(),
            lost_lease: std::cell::OnceCell::new(),
            index: std::cell::OnceCell::new(),
        }
    }

    /// The history's lookups by run, lease and process (built on first use).
    pub fn index(&self) -> &Index<'h> {
        self.index.get_or_init(|| Index::build(self))
    }

    /// Per-run model state after replaying every applied mutation (built on first use).
    pub fn replay(&self) -> &Replay<'h> {
        self.replayed.get_or_init(|| replay(&self.applied))
    }

    /// The instant a call took effect.
    pub fn applied_ns(c: &Call) -> u64 {
        c.applied.as_ref().map(|a| a.at_ns).or(c.returned_ns).unwrap_or(0)
    }

    /// The epoch an acquire was granted: the one it returned, or (its process died with the
    /// call in flight) the one the store reported at its after-commit point.
    pub fn granted_epoch(c: &Call) -> Option<u64> {
        c.granted.as_ref().map(|g| g.epoch.0).or(c.applied.as_ref().and_then(|a| a.site_epoch))
    }

    /// The store clock the call's check (or, failing that, its commit) read.
    pub fn checked_ms(c: &Call) -> Option<i64> {
        c.checked_now_ms.or(c.applied.as_ref().map(|a| a.store_now_ms))
    }
}

/// The history looked up by run, lease and process. Every list keeps its source's order
/// (apply order for applied mutations, call order for calls), so a property that scanned
/// the whole history and filtered gets the same calls in the same order from its list.
#[derive(Default)]
pub struct Index<'h> {
    /// Applied mutations with an apply position, per run, by position.
    recorded: BTreeMap<&'h str, Vec<&'h Call>>,
    /// Mutations taken as applied with no apply position (an Ok call whose store skipped
    /// its after-commit record), per run.
    unrecorded: BTreeMap<&'h str, Vec<&'h Call>>,
    /// Calls that carried a lease, per (the lease's run, its epoch), in call order.
    leased: BTreeMap<&'h str, BTreeMap<u64, Vec<&'h Call>>>,
    /// Calls that carried a lease, per (the call's own run, the lease's epoch), in call
    /// order.
    leased_on: BTreeMap<&'h str, BTreeMap<u64, Vec<&'h Call>>>,
    /// Calls per process (node, incarnation), in call order.
    process: BTreeMap<(u32, u32), Vec<&'h Call>>,
    /// Per run, the journal's shape after each recorded append or delete: (position,
    /// generation, length). A delete starts a new, empty generation.
    shape: BTreeMap<&'h str, Vec<(usize, usize, usize)>>,
    /// Every mark, as (point, node, incarnation, run, epoch).
    marks: std::collections::BTreeSet<(&'h str, u32, u32, &'h str, Option<u64>)>,
    /// Per run, every recorded append's entry parsed once (built on first use).
    journals: std::cell::OnceCell<BTreeMap<&'h str, Journals>>,
}

/// One run's recorded journal history: the entries of every generation in apply order,
/// the position of each, and where each delete cut it.
#[derive(Default)]
struct Journals {
    positions: Vec<usize>,
    entries: Vec<EntryView>,
    /// (the delete's position, how many entries preceded it).
    deletes: Vec<(usize, usize)>,
}

/// A recorded call's apply position.
fn position(c: &Call) -> usize {
    c.applied.as_ref().map_or(usize::MAX, |a| a.order)
}

impl<'h> Index<'h> {
    fn build(j: &Judged<'h>) -> Index<'h> {
        let mut ix = Index::default();
        for &c in &j.applied {
            let run = c.run_id.as_str();
            let Some(at) = c.applied.as_ref().map(|a| a.order) else {
                ix.unrecorded.entry(run).or_default().push(c);
                continue;
            };
            ix.recorded.entry(run).or_default().push(c);
            let shape = ix.shape.entry(run).or_default();
            let (generation, len) = shape.last().map_or((0, 0), |&(_, g, l)| (g, l));
            match c.op {
                OpKind::Append => shape.push((at, generation, len + 1)),
                OpKind::Delete => shape.push((at, generation + 1, 0)),
                _ => {}
            }
        }
        for c in &j.history.calls {
            if let Some(l) = &c.lease {
                ix.leased.entry(l.run_id.as_str()).or_default().entry(l.epoch.0).or_default().push(c);
                ix.leased_on.entry(c.run_id.as_str()).or_default().entry(l.epoch.0).or_default().push(c);
            }
            ix.process.entry((c.node, c.incarnation)).or_default().push(c);
        }
        for m in &j.history.marks {
            ix.marks.insert((m.point, m.node, m.incarnation, m.run_id.as_str(), m.epoch));
        }
        ix
    }

    /// The recorded mutations of `run` whose apply position lies strictly between `from`
    /// and `to`, by position (`Judged::build` checks that positions rise).
    pub fn recorded_between(&self, run: &str, from: usize, to: usize) -> &[&'h Call] {
        let all = self.recorded.get(run).map_or(&[][..], Vec::as_slice);
        let lo = all.partition_point(|c| position(c) <= from);
        let hi = all.partition_point(|c| position(c) < to).max(lo);
        &all[lo..hi]
    }

    /// The recorded mutations of `run` applied before position `to`, by position.
    pub fn recorded_before(&self, run: &str, to: usize) -> &[&'h Call] {
        let all = self.recorded.get(run).map_or(&[][..], Vec::as_slice);
        &all[..all.partition_point(|c| position(c) < to)]
    }

    /// The mutations of `run` taken as applied without an apply position.
    pub fn unrecorded(&self, run: &str) -> &[&'h Call] {
        self.unrecorded.get(run).map_or(&[], Vec::as_slice)
    }

    /// Every call made under epoch `epoch` of `run`'s lease, in call order.
    pub fn under_lease(&self, run: &str, epoch: u64) -> &[&'h Call] {
        self.leased.get(run).and_then(|e| e.get(&epoch)).map_or(&[], Vec::as_slice)
    }

    /// Every call on `run` that carried a lease of epoch `epoch` (of any run), in call
    /// order.
    pub fn on_run_under_epoch(&self, run: &str, epoch: u64) -> &[&'h Call] {
        self.leased_on.get(run).and_then(|e| e.get(&epoch)).map_or(&[], Vec::as_slice)
    }

    /// Whether process (`node`, `incarnation`) marked `point` on `run` under `epoch`.
    pub fn marked(&self, point: &str, node: u32, incarnation: u32, run: &str, epoch: Option<u64>) -> bool {
        self.marks.contains(&(point, node, incarnation, run, epoch))
    }

    /// Every call of process (`node`, `incarnation`), in call order.
    pub fn of_process(&self, node: u32, incarnation: u32) -> &[&'h Call] {
        self.process.get(&(node, incarnation)).map_or(&[], Vec::as_slice)
    }

    /// `run`'s journal as the recorded mutations applied before position `upto` left it
    /// (an append whose payload is no entry adds nothing; a delete empties it).
    pub fn journal_before(&self, run: &str, upto: usize) -> &[EntryView] {
        let journals = self.journals.get_or_init(|| {
            let mut out: BTreeMap<&'h str, Journals> = BTreeMap::new();
            for (&run, calls) in &self.recorded {
                let j = out.entry(run).or_default();
                for &c in calls {
                    match c.op {
                        OpKind::Append => {
                            if let Some(e) = c.args.payload.as_deref().and_then(EntryView::parse) {
                                j.positions.push(position(c));
                                j.entries.push(e);
                            }
                        }
                        OpKind::Delete => j.deletes.push((position(c), j.entries.len())),
                        _ => {}
                    }
                }
            }
            out
        });
        let Some(j) = journals.get(run) else { return &[] };
        let hi = j.positions.partition_point(|&at| at < upto);
        let cut = j.deletes.partition_point(|&(at, _)| at < upto);
        let lo = cut.checked_sub(1).map_or(0, |i| j.deletes[i].1).min(hi);
        &j.entries[lo..hi]
    }

    /// `run`'s journal (generation, length) after the mutations applied before position
    /// `upto`.
    pub fn journal_at(&self, run: &str, upto: usize) -> (usize, usize) {
        let Some(shape) = self.shape.get(run) else { return (0, 0) };
        let n = shape.partition_point(|&(at, _, _)| at < upto);
        n.checked_sub(1).map_or((0, 0), |i| (shape[i].1, shape[i].2))
    }
}

/// "n1 (soak-w1)".
pub fn who(c: &Call) -> String {
    match (&c.lease, &c.args.owner) {
        (Some(l), _) => format!("n{} ({})", c.node, l.owner),
        (None, Some(o)) => format!("n{} ({o})", c.node),
        _ => format!("n{}", c.node),
    }
}

/// Instants in witnesses print as the timeline prints them.
pub use crate::time::secs as t;

/// Replays lease operations in apply order, calling `visit` with the grant current for
/// the call's lease run BEFORE the call takes effect, then applying the call.
pub fn walk_grants<'h>(j: &Judged<'h>, mut visit: impl FnMut(&'h Call, Option<&Grant>)) {
    let mut walk = GrantWalk::default();
    for &c in &j.applied {
        visit(c, walk.before(c));
        walk.apply(c);
    }
}

/// The grants of every run as the applied lease operations define them, one applied call
/// at a time.
#[derive(Default)]
pub struct GrantWalk {
    current: BTreeMap<String, Grant>,
}

impl GrantWalk {
    /// The run a call's lease names (its own run when it carries none).
    fn key(c: &Call) -> &str {
        c.lease.as_ref().map_or(c.run_id.as_str(), |l| l.run_id.as_str())
    }

    /// The grant current for the call's lease run before it takes effect.
    pub fn before(&self, c: &Call) -> Option<&Grant> {
        self.current.get(Self::key(c))
    }

    /// The grant current for `run` now.
    pub fn of(&self, run: &str) -> Option<&Grant> {
        self.current.get(run)
    }

    /// Apply one applied call.
    pub fn apply(&mut self, c: &Call) {
        let key = Self::key(c).to_string();
        let legit = is_legit(c, self.current.get(&key));
        match c.op {
            OpKind::Acquire => {
                let epoch = Judged::granted_epoch(c);
                let row = c.applied.as_ref().and_then(|a| a.lease_row.clone());
                if let Some(epoch) = epoch {
                    let expires_at = row.map_or(i64::MAX, |r| r.expires_at);
                    self.current.insert(
                        c.run_id.clone(),
                        Grant {
                            owner: c.args.owner.clone().unwrap_or_default(),
                            epoch,
                            expires_at,
                            node: c.node,
                            call: c.id,
                            granted_ns: Judged::applied_ns(c),
                            ended: None,
                        },
                    );
                }
            }
            OpKind::Renew if legit => {
                if let (Some(g), Some(row)) =
                    (self.current.get_mut(&key), c.applied.as_ref().and_then(|a| a.lease_row.as_ref()))
                {
                    g.expires_at = row.expires_at;
                }
            }
            OpKind::Release if legit => {
                if let Some(g) = self.current.get_mut(&key) {
                    g.ended = Some((Judged::applied_ns(c), "released"));
                }
            }
            OpKind::Delete if legit || c.lease.is_none() => {
                if let Some(g) = self.current.get_mut(&c.run_id) {
                    if g.ended.is_none() {
                        g.ended = Some((Judged::applied_ns(c), "deleted with its run"));
                    }
                }
            }
            _ => {}
        }
    }
}

/// Whether a lease-carrying call's lease was the current live holder when it took effect.
pub fn is_legit(c: &Call, g: Option<&Grant>) -> bool {
    staleness(c, g).is_none()
}

/// Why a lease-carrying call was stale, in words; `None` if it was the live holder (or
/// carried no lease).
pub fn staleness(c: &Call, g: Option<&Grant>) -> Option<String> {
    let lease = c.lease.as_ref()?;
    let Some(g) = g else {
        return Some(format!("no grant of run {} was current", lease.run_id));
    };
    if g.epoch != lease.epoch.0 {
        return Some(format!(
            "epoch {} had been granted to n{} ({}) at t={}",
            g.epoch,
            g.node,
            g.owner,
            t(g.granted_ns)
        ));
    }
    if g.owner != lease.owner {
        return Some(format!("epoch {} belongs to {}", g.epoch, g.owner));
    }
    if c.lease_grant.is_some_and(|id| id != g.call) {
        return Some(format!(
            "epoch {} had been granted anew to n{} ({}) at t={}, while the caller's lease came from an earlier grant",
            g.epoch,
            g.node,
            g.owner,
            t(g.granted_ns)
        ));
    }
    if let Some((at, why)) = g.ended {
        return Some(format!("epoch {} was {why} at t={}", g.epoch, t(at)));
    }
    if let Some(now) = Judged::checked_ms(c) {
        if now >= g.expires_at {
            return Some(format!(
                "epoch {} had expired ({}ms past its expiry by the store's clock)",
                g.epoch,
                now - g.expires_at
            ));
        }
    }
    None
}

/// True when the call ended in an error the caller saw.
pub fn rejected(c: &Call) -> bool {
    matches!(c.outcome, Outcome::Err { .. })
}

/// Per-run model state after replaying every applied mutation in apply order.
pub struct Replay<'h> {
    pub journal: BTreeMap<String, Vec<&'h Call>>,
    pub meta: BTreeMap<String, Vec<&'h Call>>,
    pub blobs: BTreeMap<String, Vec<&'h Call>>,
}

fn replay<'h>(applied: &[&'h Call]) -> Replay<'h> {
    let mut r = Replay { journal: BTreeMap::new(), meta: BTreeMap::new(), blobs: BTreeMap::new() };
    for &c in applied {
        match c.op {
            OpKind::Append => r.journal.entry(c.run_id.clone()).or_default().push(c),
            OpKind::PutMeta => r.meta.entry(c.run_id.clone()).or_default().push(c),
            OpKind::Delete => {
                r.journal.remove(&c.run_id);
                r.meta.remove(&c.run_id);
            }
            OpKind::BlobPut | OpKind::BlobDelete => {
                let key = c.args.blob_ref.clone().unwrap_or_default();
                let v = r.blobs.entry(key).or_default();
                if c.op == OpKind::BlobDelete {
                    v.clear();
                }
                v.push(c);
            }
            _ => {}
        }
    }
    r
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::oracle::testkit::{call, history};

    #[test]
    #[should_panic(expected = "apply order not monotone")]
    fn positions_that_fall_as_time_rises_are_a_harness_bug() {
        let mut late = call(1, OpKind::PutMeta);
        late.applied.as_mut().expect("applied").order = 0;
        let mut early = call(0, OpKind::PutMeta);
        early.applied.as_mut().expect("applied").order = 1;
        let h = history(vec![early, late]);
        let fin = FinalState::default();
        Judged::build(&h, &fin, Expect::default());
    }
}
