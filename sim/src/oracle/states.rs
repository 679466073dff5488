//! Abstract state coverage: what a run exercised, in the protocol's own terms rather than
//! in lines of code. Computed from the history like a property, with no hooks of its own.
//!
//! Five families, each a finite universe that [`universe`] enumerates by name:
//!
//! - **store calls**: `call:<op>:<relation>:<outcome>:<fault>`: the operation; the caller's
//!   relation to the run's lease at the instant the call took effect or was refused (live
//!   holder, holder past its expiry not yet superseded, superseded, lease of another run, no
//!   lease; for an acquire: the run free, held live, held past expiry); what happened
//!   (applied, refused typed, busy, unknown); and the fault injected inside the call (none,
//!   stall, stall to the expiry instant, stall to 1 ms before it, crash before its commit,
//!   crash after its commit, another writer holding the write lock across it).
//! - **engine**: `meta:<from>-><to>`, the run's status transitions as applied meta writes
//!   made them; `crash:<engine point>:<recovery>`, where a crash cut a segment against how
//!   the run next settled (or that it never did, or was deleted).
//! - **deletes**: `delete_overlap:<op>`, which other operation another process had in
//!   flight on the run while a delete ran (`none` when nothing did).
//! - **races**: `race:<op>:<relation>-><op>:<relation>:<outcome>`, a happens-before pair
//!   across processes (as Mallory's feedback pairs events of different nodes): for each call
//!   on a run, the last call ANOTHER process (node and incarnation) made take effect on that
//!   run before it, with both relations and this call's outcome. Handovers are the common
//!   pairs; the findings live in the rare ones (`put_meta:live_holder->put_meta:no_lease:
//!   applied` is F1's shape, `acquire:held_expired->append:superseded:applied` F3a's).
//!
//! - **cut cascades**: `cut:<step>:<next>`, a deletion cascade whose identity's journal delete
//!   of the run never applied, by the last of its writes that did (`record`: the deletion
//!   record; `blob_delete`: a blob delete after it), against what the run met after it: a
//!   host's resume asked for (`resumed`), a meta write `running` (`booted`), another
//!   identity's journal delete (`deleted`), or none of these (`none`). A sweep or search that
//!   never cut a cascade at both steps and retried the run never tested the deletion record.
//! - **journal shapes**: `journal:<shape>`, the shape (`contract::journal_shape`: settled or
//!   not, entries after the settle, dangling dispatches before or after it, open
//!   suspensions) of every journal a load returned; `audit:<meta>:<shape>`, the meta status
//!   (`absent`: no row) and journal shape an operator's audit report was made from. These
//!   are the cells of the audit table (7.1): a misreading of it shows only where an audit
//!   meets the cell it misreads.
//!
//! A state is a dense index into the universe, so a sweep keeps one small array per sweep.
//! Nothing here judges: a state never reached is a hole in coverage, not a bug.

use std::collections::BTreeMap;

use serde_json::Value;
use store::{FaultPoint, Moment};

use super::contract::{entry_views, journal_shape, journal_shapes};
use super::model::{Grant, GrantWalk, Judged};
use super::repair::{audit_reads, read_state};
use crate::history::{Call, FactKind, FaultKind, OpKind, Outcome, Read};

/// The caller's relation to the run's lease when its call took effect or was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Relation {
    NoLease,
    LiveHolder,
    PastExpiry,
    Superseded,
    OtherRun,
    Free,
    HeldLive,
    HeldExpired,
}

impl Relation {
    fn name(self) -> &'static str {
        match self {
            Relation::NoLease => "no_lease",
            Relation::LiveHolder => "live_holder",
            Relation::PastExpiry => "past_expiry",
            Relation::Superseded => "superseded",
            Relation::OtherRun => "other_run",
            Relation::Free => "free",
            Relation::HeldLive => "held_live",
            Relation::HeldExpired => "held_expired",
        }
    }

    /// The relations an operation can stand in.
    fn of_op(op: OpKind) -> &'static [Relation] {
        use Relation::*;
        match op {
            OpKind::Acquire => &[Free, HeldLive, HeldExpired],
            OpKind::Renew | OpKind::Release => &[LiveHolder, PastExpiry, Superseded],
            OpKind::Append | OpKind::PutMeta | OpKind::Delete | OpKind::BlobPut | OpKind::BlobDelete => {
                &[NoLease, LiveHolder, PastExpiry, Superseded, OtherRun]
            }
            _ => &[NoLease],
        }
    }
}

const OUTCOMES: [&str; 4] = ["applied", "refused", "busy", "unknown"];
const FAULTS: [&str; 7] = [
    "none",
    "stall",
    "stall_to_expiry",
    "stall_before_expiry",
    "crash_before",
    "crash_after_commit",
    "contended",
];
const STATUSES: [&str; 6] = ["running", "suspended", "ok", "error", "cancelled", "exhausted"];
const CUT_STEPS: [&str; 2] = ["record", "blob_delete"];
const CUT_NEXTS: [&str; 4] = ["resumed", "booted", "deleted", "none"];
const RECOVERIES: [&str; 8] =
    ["running", "suspended", "ok", "error", "cancelled", "exhausted", "deleted", "never_settled"];

/// Whether `(op, outcome, fault)` can happen at all: a crash leaves the outcome unknown, and
/// a read has no commit to crash after.
fn possible(op: OpKind, outcome: &str, fault: &str) -> bool {
    let crash = fault.starts_with("crash");
    if crash != (outcome == "unknown") && crash {
        return false;
    }
    if fault == "contended" {
        // A contended write meets the lock before it can apply (or a check refuses it first).
        return op.is_mutation() && matches!(outcome, "busy" | "refused");
    }
    !(fault == "crash_after_commit" && !op.is_mutation() && op != OpKind::Boot)
}

/// Whether an operation is about one run (the race family pairs only those).
fn on_a_run(op: OpKind) -> bool {
    !matches!(op, OpKind::Boot | OpKind::ListRuns)
}

/// Every state's name, in index order.
pub fn universe() -> &'static [String] {
    static NAMES: std::sync::OnceLock<Vec<String>> = std::sync::OnceLock::new();
    NAMES.get_or_init(|| {
        let mut v = Vec::new();
        for op in OpKind::ALL {
            for r in Relation::of_op(op) {
                for o in OUTCOMES {
                    for f in FAULTS {
                        if possible(op, o, f) {
                            v.push(format!("call:{}:{}:{o}:{f}", op.as_str(), r.name()));
                        }
                    }
                }
            }
        }
        for from in std::iter::once("none").chain(STATUSES) {
            for to in STATUSES {
                v.push(format!("meta:{from}->{to}"));
            }
        }
        for p in FaultPoint::ALL.iter().filter(|p| p.moment() == Moment::Engine) {
            for r in RECOVERIES {
                v.push(format!("crash:{}:{r}", p.name()));
            }
        }
        for op in std::iter::once("none").chain(OpKind::ALL.iter().map(|o| o.as_str())) {
            v.push(format!("delete_overlap:{op}"));
        }
        for step in CUT_STEPS {
            for next in CUT_NEXTS {
                v.push(format!("cut:{step}:{next}"));
            }
        }
        let shapes = journal_shapes();
        for shape in &shapes {
            v.push(format!("journal:{shape}"));
        }
        for meta in std::iter::once("absent").chain(STATUSES) {
            for shape in &shapes {
                v.push(format!("audit:{meta}:{shape}"));
            }
        }
        for a in OpKind::ALL
            .into_iter()
            .filter(|&o| o.is_mutation() || matches!(o, OpKind::Acquire | OpKind::Renew | OpKind::Release))
        {
            for ra in Relation::of_op(a) {
                for b in OpKind::ALL.into_iter().filter(|&o| on_a_run(o)) {
                    for rb in Relation::of_op(b) {
                        for o in OUTCOMES {
                            v.push(format!(
                                "race:{}:{}->{}:{}:{o}",
                                a.as_str(),
                                ra.name(),
                                b.as_str(),
                                rb.name()
                            ));
                        }
                    }
                }
            }
        }
        v
    })
}

/// The index of a state by name.
fn index_of() -> &'static BTreeMap<&'static str, u16> {
    static INDEX: std::sync::OnceLock<BTreeMap<&'static str, u16>> = std::sync::OnceLock::new();
    INDEX.get_or_init(|| universe().iter().enumerate().map(|(i, n)| (n.as_str(), i as u16)).collect())
}

/// The states one run reached, as sorted, distinct indices into [`universe`].
pub fn reached(j: &Judged) -> Vec<u16> {
    let idx = index_of();
    let mut out: Vec<u16> = Vec::new();
    let mut push = |name: &str| {
        if let Some(&i) = idx.get(name) {
            out.push(i);
        }
    };
    // The fault inside each call (the last one that mattered: a crash outranks a stall; a
    // contention stands at a write's first point, so nothing of its call comes before it).
    let mut fault_of: BTreeMap<usize, &'static str> = BTreeMap::new();
    for f in &j.history.faults {
        let Some(call) = f.call else { continue };
        let name = match f.kind {
            FaultKind::Yield => continue,
            // A pause holds the call in flight as a stall does (and the process's other
            // tasks too, which their own calls' relations show).
            FaultKind::Stall | FaultKind::Pause => "stall",
            FaultKind::StallToExpiry => "stall_to_expiry",
            FaultKind::StallBeforeExpiry => "stall_before_expiry",
            FaultKind::Crash if f.point.moment() == Moment::AfterCommit => "crash_after_commit",
            FaultKind::Crash => "crash_before",
            FaultKind::Contend => "contended",
        };
        let e = fault_of.entry(call).or_insert(name);
        if name.starts_with("crash") || *e == "stall" {
            *e = name;
        }
    }
    // Relations, walking the calls by the instant they took effect (applied ones) or
    // returned (the rest) beside the grant walk over the applied ones.
    let mut by_time: Vec<&Call> = j.history.calls.iter().collect();
    by_time.sort_by_key(|c| match &c.applied {
        Some(a) => (a.at_ns, 0, a.order),
        None => (c.returned_ns.unwrap_or(c.invoked_ns), 1, c.id),
    });
    // A refused call's store clock is not recorded (no check passed): read it off the
    // node's clock offset at its applied calls (coverage only; skew drift is ignored).
    let mut offset: BTreeMap<u32, i64> = BTreeMap::new();
    for c in j.applied.iter().filter_map(|c| c.applied.as_ref().map(|a| (c.node, a))) {
        offset.entry(c.0).or_insert(c.1.store_now_ms - (c.1.at_ns / 1_000_000) as i64);
    }
    let clock_of = |c: &Call| {
        Judged::checked_ms(c).or_else(|| {
            let at = c.returned_ns.unwrap_or(c.invoked_ns);
            offset.get(&c.node).map(|o| o + (at / 1_000_000) as i64)
        })
    };
    let mut walk = GrantWalk::default();
    let mut next_applied = j.applied.iter().peekable();
    // Per run: the process (node, incarnation), operation and relation of the last call
    // that took effect on it.
    let mut last_effect: BTreeMap<&str, ((u32, u32), OpKind, Relation)> = BTreeMap::new();
    for c in by_time {
        let applied = c.applied.is_some();
        if !applied {
            // Catch the walk up with everything applied at or before this call's return.
            let at = c.returned_ns.unwrap_or(c.invoked_ns);
            while let Some(a) = next_applied.next_if(|a| Judged::applied_ns(a) <= at) {
                walk.apply(a);
            }
        } else {
            while let Some(a) =
                next_applied.next_if(|a| a.id != c.id && Judged::applied_ns(a) <= Judged::applied_ns(c))
            {
                walk.apply(a);
            }
        }
        let rel = relation_of(c, walk.before(c), clock_of(c));
        if applied && next_applied.peek().is_some_and(|a| a.id == c.id) {
            next_applied.next();
            walk.apply(c);
        }
        let outcome = match &c.outcome {
            Outcome::Ok { .. } => "applied",
            Outcome::Err { code, .. } if code == "busy" => "busy",
            Outcome::Err { .. } => "refused",
            Outcome::Unknown => "unknown",
        };
        let fault = fault_of.get(&c.id).copied().unwrap_or("none");
        push(&format!("call:{}:{}:{outcome}:{fault}", c.op.as_str(), rel.name()));
        if on_a_run(c.op) {
            let me = (c.node, c.incarnation);
            if let Some(&(who, op, r)) = last_effect.get(c.run_id.as_str()) {
                if who != me {
                    push(&format!(
                        "race:{}:{}->{}:{}:{outcome}",
                        op.as_str(),
                        r.name(),
                        c.op.as_str(),
                        rel.name()
                    ));
                }
            }
            if applied
                && (c.op.is_mutation() || matches!(c.op, OpKind::Acquire | OpKind::Renew | OpKind::Release))
            {
                last_effect.insert(c.run_id.as_str(), (me, c.op, rel));
            }
        }
    }
    // Meta transitions per run, in apply order.
    let mut last: BTreeMap<&str, String> = BTreeMap::new();
    for &c in &j.applied {
        match c.op {
            OpKind::Delete => {
                last.remove(c.run_id.as_str());
            }
            OpKind::PutMeta => {
                let Some(to) = status_of(c) else { continue };
                let from = last.insert(c.run_id.as_str(), to.clone()).unwrap_or_else(|| "none".into());
                push(&format!("meta:{from}->{to}"));
            }
            _ => {}
        }
    }
    // Engine crashes against how the run next settled.
    for f in
        j.history.faults.iter().filter(|f| f.kind == FaultKind::Crash && f.point.moment() == Moment::Engine)
    {
        let Some(run) = &f.run_id else { continue };
        let deleted = j
            .applied
            .iter()
            .any(|c| c.op == OpKind::Delete && &c.run_id == run && Judged::applied_ns(c) >= f.at_ns);
        let settled = j.history.facts.iter().find_map(|x| match &x.kind {
            FactKind::Settled { run_id, status, .. } if run_id == run && x.at_ns >= f.at_ns => {
                Some(status.clone())
            }
            _ => None,
        });
        let recovery = match (settled, deleted) {
            (Some(s), _) if RECOVERIES.contains(&s.as_str()) => s,
            (_, true) => "deleted".into(),
            _ => "never_settled".into(),
        };
        push(&format!("crash:{}:{recovery}", f.point.name()));
    }
    // What else was in flight on a run while it was deleted.
    for d in j.history.calls.iter().filter(|c| c.op == OpKind::Delete) {
        let end = d.returned_ns.unwrap_or(u64::MAX);
        let mut any = false;
        for c in j.history.calls.iter().filter(|c| c.node != d.node && c.run_id == d.run_id && c.id != d.id) {
            let c_end = c.returned_ns.unwrap_or(u64::MAX);
            if c.invoked_ns <= end && c_end >= d.invoked_ns {
                any = true;
                push(&format!("delete_overlap:{}", c.op.as_str()));
            }
        }
        if !any {
            push("delete_overlap:none");
        }
    }
    // Cut cascades: per identity and run, the last cascade write after which the identity's
    // journal delete of the run never applied, and what the run met next.
    let order = super::engine::order;
    let identity = |c: &Call| (c.node, c.incarnation, c.args.actor.clone(), c.run_id.clone());
    let mut cut: BTreeMap<(u32, u32, Option<String>, String), &Call> = BTreeMap::new();
    for w in super::goals::cascade_writes(j) {
        cut.insert(identity(w), w);
    }
    for (key, w) in cut {
        let (node, incarnation, run) = (key.0, key.1, key.3.as_str());
        let later = || j.applied.iter().filter(|c| c.run_id == run && order(c) > order(w));
        if later().any(|c| {
            c.op == OpKind::Delete && (c.node, c.incarnation, &c.args.actor) == (node, incarnation, &key.2)
        }) {
            continue;
        }
        let step = if w.op == OpKind::BlobPut { "record" } else { "blob_delete" };
        let resumed = j.history.facts.iter().any(|f| {
            matches!(&f.kind, FactKind::Resumed { run_id, .. } if run_id == run)
                && f.applied_before > order(w)
        });
        let booted = later().any(|c| c.op == OpKind::PutMeta && status_of(c).as_deref() == Some("running"));
        let deleted = later().any(|c| c.op == OpKind::Delete);
        for (hit, next) in [(resumed, "resumed"), (booted, "booted"), (deleted, "deleted")] {
            if hit {
                push(&format!("cut:{step}:{next}"));
            }
        }
        if !(resumed || booted || deleted) {
            push(&format!("cut:{step}:none"));
        }
    }
    // The shape of every journal a load returned, and of what each audit report read.
    for c in j.history.calls.iter().filter(|c| c.op == OpKind::Load) {
        if let Some(Read::Entries(entries)) = &c.read {
            if let Some(views) = entry_views(entries) {
                push(&format!("journal:{}", journal_shape(&views)));
            }
        }
    }
    for (i, f) in j.history.facts.iter().enumerate() {
        if !matches!(f.kind, FactKind::Audited { .. }) {
            continue;
        }
        let Some((meta, load)) = audit_reads(j, i) else { continue };
        let Some((status, entries)) = read_state(meta.as_ref(), load) else { continue };
        push(&format!("audit:{}:{}", status.map_or("absent", |s| s.word()), journal_shape(&entries)));
    }
    out.sort_unstable();
    out.dedup();
    out
}

/// The run's status in a meta write's payload (read as plain JSON).
fn status_of(c: &Call) -> Option<String> {
    let v: Value = serde_json::from_str(c.args.payload.as_deref()?).ok()?;
    let s = v.get("status")?.as_str()?;
    STATUSES.contains(&s).then(|| s.to_string())
}

fn relation_of(c: &Call, g: Option<&Grant>, now_ms: Option<i64>) -> Relation {
    let live = |g: &Grant| g.ended.is_none() && now_ms.is_none_or(|n| n < g.expires_at);
    if c.op == OpKind::Acquire {
        return match g {
            None => Relation::Free,
            Some(g) if g.ended.is_some() => Relation::Free,
            Some(g) if live(g) => Relation::HeldLive,
            Some(_) => Relation::HeldExpired,
        };
    }
    let Some(l) = &c.lease else { return Relation::NoLease };
    if l.run_id != c.run_id {
        return Relation::OtherRun;
    }
    match g {
        Some(g) if g.epoch == l.epoch.0 && g.owner == l.owner && g.ended.is_none() => {
            if live(g) {
                Relation::LiveHolder
            } else {
                Relation::PastExpiry
            }
        }
        _ => Relation::Superseded,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_universe_is_named_once_each_and_indexable() {
        let u = universe();
        assert!(u.len() > 300, "{}", u.len());
        let mut sorted: Vec<&String> = u.iter().collect();
        sorted.sort();
        sorted.dedup();
        assert_eq!(sorted.len(), u.len(), "a state is named twice");
        assert!(u.iter().any(|n| n == "call:append:superseded:applied:stall"));
        assert!(u.iter().any(|n| n == "call:acquire:held_expired:applied:none"));
        assert!(!u.iter().any(|n| n == "call:load:no_lease:unknown:crash_after_commit"));
        assert!(!u.iter().any(|n| n == "call:append:live_holder:applied:crash_before"));
        assert!(u.iter().any(|n| n == "crash:engine.settle.after_run_settle:ok"));
        assert_eq!(index_of().len(), u.len());
    }

    use store::{Epoch, Lease};

    use crate::history::FinalState;
    use crate::history::{Applied, Args, FaultRec, History};
    use crate::oracle::Expect;

    fn call(
        id: usize,
        node: u32,
        op: OpKind,
        at_ms: u64,
        lease: Option<(&str, u64)>,
        applied: Option<usize>,
    ) -> Call {
        Call {
            id,
            node,
            incarnation: 0,
            op,
            run_id: "r".into(),
            lease: lease.map(|(o, e)| Lease { run_id: "r".into(), owner: o.into(), epoch: Epoch(e) }),
            args: Args::default(),
            invoked_ns: at_ms * 1_000_000,
            returned_ns: Some(at_ms * 1_000_000 + 1),
            outcome: Outcome::Ok { detail: String::new() },
            granted: None,
            checked_now_ms: None,
            applied: applied.map(|order| Applied {
                order,
                at_ns: at_ms * 1_000_000,
                store_now_ms: at_ms as i64,
                lease_row: None,
                site_epoch: None,
            }),
            seen_at: None,
            read: None,
            store_clock: crate::history::StoreClock::NotObserved,
            lease_grant: None,
        }
    }

    fn names(h: &History) -> Vec<&'static str> {
        let fin = FinalState::default();
        let j = Judged::build(h, &fin, Expect::default());
        reached(&j).into_iter().map(|i| universe()[usize::from(i)].as_str()).collect()
    }

    #[test]
    fn a_stalled_stale_append_and_a_delete_racing_it_are_named() {
        let mut a = call(0, 0, OpKind::Acquire, 0, None, Some(0));
        a.args.owner = Some("a".into());
        a.granted = Some(Lease { run_id: "r".into(), owner: "a".into(), epoch: Epoch(1) });
        let mut b = call(1, 1, OpKind::Acquire, 10, None, Some(1));
        b.args.owner = Some("b".into());
        b.granted = Some(Lease { run_id: "r".into(), owner: "b".into(), epoch: Epoch(2) });
        let mut stale = call(2, 0, OpKind::Append, 20, Some(("a", 1)), None);
        stale.outcome = Outcome::Err { code: "lease_held".into(), message: String::new() };
        stale.invoked_ns = 5 * 1_000_000;
        let delete = call(3, 1, OpKind::Delete, 19, Some(("b", 2)), Some(2));
        let mut h = History { applied_count: 3, calls: vec![a, b, stale, delete], ..History::default() };
        h.faults.push(FaultRec {
            at_ns: 6_000_000,
            node: 0,
            point: FaultPoint::SqliteAppendAfterCheck,
            kind: FaultKind::Stall,
            call: Some(2),
            run_id: Some("r".into()),
            until_ns: Some(26_000_000),
        });
        let got = names(&h);
        for want in [
            "call:acquire:free:applied:none",
            "call:acquire:held_live:applied:none",
            "call:append:superseded:refused:stall",
            "call:delete:live_holder:applied:none",
            "delete_overlap:append",
            // The stale append returned after the new holder's delete took effect.
            "race:delete:live_holder->append:superseded:refused",
        ] {
            assert!(got.contains(&want), "{want} not in {got:?}");
        }
        assert!(!got.contains(&"delete_overlap:none"), "{got:?}");
        // The delete follows its own process's acquire: no race.
        assert!(!got.iter().any(|n| n.starts_with("race:acquire:held_live->delete")), "{got:?}");
    }

    #[test]
    fn a_load_names_its_journal_shape_and_an_audit_its_cell_of_the_table() {
        use crate::oracle::testkit;
        let entry = |seq: u64, kind: &str, status: &str, of: Option<u64>, value: serde_json::Value| {
            store::JournalEntry {
                seq: store::Seq(seq),
                kind: kind.into(),
                status: status.into(),
                key: String::new(),
                ref_seq: of.map(store::Seq),
                value,
                extra: serde_json::Map::new(),
            }
        };
        let settle = serde_json::json!({"decisionType": "run_settle", "runStatus": "suspended"});
        // Two waits, a suspended settle, one resolved: live work after the settle, one open.
        let journal = vec![
            entry(0, "external", "suspended", None, serde_json::json!({})),
            entry(1, "approval", "suspended", None, serde_json::json!({})),
            entry(2, "decision", "ok", None, settle),
            entry(3, "resolution", "ok", Some(0), serde_json::json!("yes")),
        ];
        let read = |id: usize, op: OpKind, what: Read| {
            let mut c = testkit::call(id, op);
            c.applied = None;
            c.args.actor = Some("op".into());
            c.read = Some(what);
            c
        };
        let mut h = testkit::history(vec![
            read(0, OpKind::GetMeta, Read::Meta(Some(testkit::meta_record("r", store::RunStatus::Running)))),
            read(1, OpKind::Load, Read::Entries(journal)),
            read(2, OpKind::Load, Read::Entries(Vec::new())),
        ]);
        h.facts.push(crate::history::Fact {
            at_ns: 2 * testkit::MS,
            applied_before: 0,
            node: 0,
            incarnation: 0,
            owner: "op".into(),
            invoked_before: 2,
            kind: FactKind::Audited {
                run_id: "r".into(),
                verdict: "meta-behind".into(),
                repair_to: Some("suspended".into()),
                counts: crate::history::AuditedCounts {
                    journal_entries: 4,
                    journal_settle: Some("suspended".into()),
                    entries_after_settle: 1,
                    dangling_dispatches: 0,
                    open_suspensions: 1,
                },
            },
        });
        let got = names(&h);
        for want in ["journal:settled_live:open", "journal:empty", "audit:running:settled_live:open"] {
            assert!(got.contains(&want), "{want} not in {got:?}");
        }
        // The audit was made from the first load (the second came after its report).
        assert!(!got.contains(&"audit:running:empty"), "{got:?}");
        assert_eq!(got.iter().filter(|n| n.starts_with("audit:")).count(), 1, "{got:?}");
    }

    #[test]
    fn a_cut_cascade_is_named_by_its_last_write_and_what_the_run_met_next() {
        use crate::oracle::testkit::engine::HistoryBuilder;
        use store::RunStatus;
        let cascade = |blob: bool| {
            let mut h = HistoryBuilder::engine_run();
            let a = h.acquire(0, "a", "r", 1);
            h.meta(0, Some(&a), "r", RunStatus::Error, 1);
            h.ckpt(0, &a, "r", 1, 1);
            h.deletion_record(1, None, "r", b"");
            if blob {
                h.mark(1, "engine.delete.before_blobs", "r", None);
                h.blob_delete(1, None, "r", "r/ckpt/1");
            }
            h
        };
        let cuts = |h: &HistoryBuilder| -> Vec<&'static str> {
            names(&h.h).into_iter().filter(|n| n.starts_with("cut:")).collect()
        };
        assert_eq!(cuts(&cascade(false)), ["cut:record:none"]);
        let mut store_level = cascade(true);
        store_level.h.facts.clear();
        assert!(cuts(&store_level).is_empty(), "a run no engine actor started: its bare ref is a blob");
        let mut h = cascade(true);
        h.fact(2, "host", FactKind::Resumed { run_id: "r".into(), workflow: "happy".into() });
        let b = h.acquire(2, "b", "r", 2);
        h.meta(2, Some(&b), "r", RunStatus::Running, 2);
        assert_eq!(cuts(&h), ["cut:blob_delete:resumed", "cut:blob_delete:booted"]);
        // The cascade's own journal delete: no cut. Another identity's: `deleted`.
        let mut h = cascade(true);
        h.delete(1, None, "r");
        assert!(cuts(&h).is_empty());
        let mut h = cascade(true);
        h.delete(0, None, "r");
        assert_eq!(cuts(&h), ["cut:blob_delete:deleted"]);
    }
}
