//! Lease threading (the RFC's phase 2): an identity that holds a lease on a run passes it in
//! every mutation it makes of that run: its meta writes, checkpoint saves and blob writes,
//! the retention delete under the worker's brief lease, the operator's offline resolution
//! and prune under theirs. A store can only fence what it is given, so an unleased write by
//! a holder is a hole even over a store that fences everything.
//!
//! "Holds" is judged from the history, not from what the actor believed: the identity's
//! latest grant of the run took effect before the call was made, no other grant of the run
//! took effect since, and the identity has not released it (nor deleted the run under it).
//! Which identity acted comes from `args.actor` (recorded by `history::under_actor`); calls
//! whose actor did not say are not judged. Unleased host decisions by an identity that holds
//! no lease stay legal.

use std::collections::BTreeMap;

use super::model::{t, Judged};
use super::{Expectation, Property, Witness};
use crate::history::{describe_call, Call, OpKind, Outcome};

pub const ALL: &[Property] = &[
    Property {
        name: "holder_threads_its_lease",
        expectation: Expectation::Always,
        claim: "Every mutation (append, meta write, delete, blob put or delete) an identity makes of a run while it holds that run's current grant carries that grant's lease.",
        not_checked: "Calls whose actor is not recorded (store-level actors); whether the lease was still live by the clock (a holder past its expiry must still pass it, but a lapse alone is not judged).",
        check: holder_threads_its_lease,
    },
    Property {
        name: "no_call_under_a_released_lease",
        expectation: Expectation::Always,
        claim: "Once an identity's release of a grant returned ok, the identity invokes no further call carrying that grant: a released lease is given up, and its work under the lease (a segment's settle, a retention or repair under a brief lease) comes before its release (docs/engine-model.md 1.4, 5.2).",
        not_checked: "Calls whose actor is not recorded (store-level actors use released leases on purpose); calls invoked while the release was still in flight; releases that failed or whose process died.",
        check: no_call_under_a_released_lease,
    },
];

fn no_call_under_a_released_lease(j: &Judged, out: &mut Vec<Witness>) {
    let ix = j.index();
    for r in &j.history.calls {
        let (Some(lease), Some(actor), Some(returned)) = (&r.lease, r.args.actor.as_deref(), r.returned_ns)
        else {
            continue;
        };
        if r.op != OpKind::Release || !r.outcome.is_ok() {
            continue;
        }
        let process = ix.of_process(r.node, r.incarnation);
        let after = &process[process.partition_point(|c| c.id <= r.id)..];
        let again = after.iter().find(|c| {
            c.invoked_ns >= returned
                && c.args.actor.as_deref() == Some(actor)
                && c.lease.as_ref() == Some(lease)
        });
        if let Some(c) = again {
            out.push(Witness {
                witness: format!(
                    "{actor} released its lease on run {} (epoch {}) at t={} and then invoked {} at t={} carrying it",
                    lease.run_id,
                    lease.epoch.0,
                    t(returned),
                    describe_call(c),
                    t(c.invoked_ns)
                ),
                op: Some(c.op.as_str()),
                call: Some(c.id),
            });
        }
    }
}

/// One grant of a run: when it took effect (apply order and instant), to whom, which epoch,
/// and when its holder gave it up (released it, or deleted the run under it), if it did.
struct Held<'h> {
    order: usize,
    at_ns: u64,
    owner: &'h str,
    epoch: u64,
    acquire: &'h Call,
    /// The id (invocation order) of the first call by which its holder gave it up.
    given_up: Option<usize>,
}

fn holder_threads_its_lease(j: &Judged, out: &mut Vec<Witness>) {
    let mut grants: BTreeMap<&str, Vec<Held>> = BTreeMap::new();
    for &c in &j.applied {
        if c.op != OpKind::Acquire {
            continue;
        }
        let epoch = Judged::granted_epoch(c);
        let (Some(epoch), Some(owner), Some(a)) = (epoch, c.args.owner.as_deref(), &c.applied) else {
            continue;
        };
        grants.entry(c.run_id.as_str()).or_default().push(Held {
            order: a.order,
            at_ns: a.at_ns,
            owner,
            epoch,
            acquire: c,
            given_up: None,
        });
    }
    // A holder gives its grant up when it invokes a release of it, or a delete of the run
    // under it that takes effect.
    for c in &j.history.calls {
        let Some(l) = &c.lease else { continue };
        if !(c.op == OpKind::Release || (c.op == OpKind::Delete && c.applied.is_some())) {
            continue;
        }
        if let Some(v) = grants.get_mut(l.run_id.as_str()) {
            for g in v.iter_mut().filter(|g| g.owner == l.owner && g.epoch == l.epoch.0) {
                g.given_up = Some(g.given_up.map_or(c.id, |x| x.min(c.id)));
            }
        }
    }
    for c in &j.history.calls {
        if !matches!(
            c.op,
            OpKind::Append | OpKind::PutMeta | OpKind::Delete | OpKind::BlobPut | OpKind::BlobDelete
        ) {
            continue;
        }
        let Some(actor) = c.args.actor.as_deref() else { continue };
        let Some(v) = grants.get(c.run_id.as_str()) else { continue };
        // The run's current grant when the call was made: for an applied call, the last
        // grant applied before it; for one that never took effect, the last whose acquire
        // returned before the call was invoked (call ids are the invocation order).
        let before = |g: &&Held| match &c.applied {
            Some(a) => g.order < a.order,
            None => g.acquire.id < c.id && g.acquire.returned_ns.is_some_and(|r| r <= c.invoked_ns),
        };
        let Some(current) = v.iter().filter(before).max_by_key(|g| g.order) else { continue };
        if current.owner != actor || current.given_up.is_some_and(|x| x < c.id) {
            continue;
        }
        let carried = c.lease.as_ref().filter(|l| l.run_id == c.run_id);
        if carried.is_some_and(|l| l.owner == current.owner && l.epoch.0 == current.epoch) {
            continue;
        }
        let what = match &c.lease {
            None => "carried no lease".to_string(),
            Some(l) => format!("carried {}'s epoch {} of run {}", l.owner, l.epoch.0, l.run_id),
        };
        let outcome = match &c.outcome {
            Outcome::Ok { .. } => "applied",
            Outcome::Err { .. } => "was refused",
            Outcome::Unknown => "was cut short",
        };
        out.push(
            Witness::new(format!(
                    "n{} ({actor}) holds epoch {} of run {} (granted at t={}) but its {} at t={} {what} ({outcome})",
                    c.node,
                    current.epoch,
                    c.run_id,
                    t(current.acquire.returned_ns.unwrap_or(current.at_ns)),
                    describe_call(c),
                    t(c.invoked_ns)
                ),
            )
            .on(c.op, c.id),
        );
    }
}

#[cfg(test)]
mod tests {
    //! An unleased meta write by the holder is caught; the same write by another identity,
    //! or after the holder released, passes.

    use super::*;
    use crate::oracle::testkit::{self, lease, MS};

    fn call(id: usize, op: OpKind, at_ms: u64, actor: &str, epoch: Option<u64>) -> Call {
        let mut c = testkit::call(id, op);
        (c.invoked_ns, c.returned_ns) = (at_ms * MS, Some(at_ms * MS));
        if let Some(a) = c.applied.as_mut() {
            a.at_ns = at_ms * MS;
        }
        c.lease = epoch.map(|e| lease(actor, e));
        c.args.actor = Some(actor.into());
        c
    }

    fn acquire(id: usize, at_ms: u64, owner: &str, epoch: u64) -> Call {
        let mut c = call(id, OpKind::Acquire, at_ms, owner, None);
        c.args.owner = Some(owner.into());
        c.granted = Some(lease(owner, epoch));
        c
    }

    fn judge(calls: Vec<Call>) -> Vec<Witness> {
        testkit::judge(&testkit::history(calls), holder_threads_its_lease)
    }

    #[test]
    fn an_unleased_write_by_the_holder_is_caught() {
        let v = judge(vec![acquire(0, 0, "w", 1), call(1, OpKind::PutMeta, 10, "w", None)]);
        assert_eq!(v.len(), 1, "{v:?}");
        assert_eq!((v[0].op, v[0].call), (Some("put_meta"), Some(1)));
        let v = judge(vec![acquire(0, 0, "w", 2), call(1, OpKind::BlobPut, 10, "w", Some(1))]);
        assert_eq!(v.len(), 1, "an older epoch of its own is not the held lease: {v:?}");
    }

    #[test]
    fn lawful_twins_pass() {
        // Carries its lease.
        assert!(judge(vec![acquire(0, 0, "w", 1), call(1, OpKind::Delete, 10, "w", Some(1))]).is_empty());
        // Another identity (a host decision by an identity holding nothing).
        assert!(judge(vec![acquire(0, 0, "w", 1), call(1, OpKind::PutMeta, 10, "host", None)]).is_empty());
        // After the holder released.
        let mut release = call(1, OpKind::Release, 5, "w", Some(1));
        release.applied = None;
        assert!(
            judge(vec![acquire(0, 0, "w", 1), release, call(2, OpKind::PutMeta, 10, "w", None)]).is_empty()
        );
        // After another grant took over.
        assert!(judge(vec![
            acquire(0, 0, "w", 1),
            acquire(1, 5, "x", 2),
            call(2, OpKind::PutMeta, 10, "w", None)
        ])
        .is_empty());
    }

    #[test]
    fn a_call_under_a_lease_its_identity_released_is_caught() {
        let released = |w: Vec<Call>| testkit::judge(&testkit::history(w), no_call_under_a_released_lease);
        let mut release = call(1, OpKind::Release, 5, "w", Some(1));
        release.applied = None;
        // Retention that gave its brief lease back before its delete.
        let v = released(vec![
            acquire(0, 0, "w", 1),
            release.clone(),
            call(2, OpKind::BlobDelete, 10, "w", Some(1)),
        ]);
        assert_eq!(v.len(), 1, "{v:?}");
        assert_eq!((v[0].op, v[0].call), (Some("blob_delete"), Some(2)));
        // The delete before the release; another identity's call under it (a store-level
        // actor's forged lease is not this identity's work); a later grant of its own; a
        // release that failed.
        assert!(released(vec![acquire(0, 0, "w", 1), call(1, OpKind::BlobDelete, 3, "w", Some(1)), {
            let mut r = release.clone();
            (r.id, r.invoked_ns, r.returned_ns) = (2, 5 * MS, Some(5 * MS));
            r
        }])
        .is_empty());
        assert!(released(vec![
            acquire(0, 0, "w", 1),
            release.clone(),
            call(2, OpKind::PutMeta, 10, "x", Some(1))
        ])
        .is_empty());
        assert!(released(vec![
            acquire(0, 0, "w", 1),
            release.clone(),
            acquire(2, 8, "w", 2),
            call(3, OpKind::PutMeta, 10, "w", Some(2))
        ])
        .is_empty());
        let mut refused = release;
        refused.outcome = Outcome::Err { code: "lease_held".into(), message: String::new() };
        assert!(released(vec![
            acquire(0, 0, "w", 1),
            refused,
            call(2, OpKind::BlobDelete, 10, "w", Some(1))
        ])
        .is_empty());
    }
}
