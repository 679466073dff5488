//! The reconciler's operator probe (`runs audit --repair`), judged from the oracle's own
//! audit table ([`super::contract::audit`]), never by calling the reconciler. A repair is
//! a meta write under a brief lease its holder took for the probe (the
//! `engine.repair.after_acquire` mark names that lease). rulvar's probe repairs only the two
//! sound classes (`meta-behind`, `stranded`) toward the journal, reports the ambiguous
//! `suspect` runs and never rewrites them, never writes a consistent run, and rewrites only
//! `status` and `updatedAt`: every other meta field is kept byte for byte. It skips a live
//! owner rather than racing it (its acquire is refused; `lease_exclusive` and
//! `no_stale_accept` judge the lease itself).

use std::collections::BTreeMap;

use serde_json::Value;

use super::contract::{audit, EntryView, MetaView, Verdict};
use super::model::{t, who, Judged};
use super::{Expectation, Property, Witness};
use crate::history::{Call, OpKind};

pub const ALL: &[Property] = &[Property {
    name: "repair_is_sound",
    expectation: Expectation::Always,
    claim: "An audit repair rewrites a run's meta only when the run is meta-behind or stranded by the audit table, to the status the journal derives, changing nothing but status and updatedAt.",
    not_checked: "Whether the probe ran at all (a coverage matter); repairs by tools that do not mark their lease.",
    check: repair_is_sound,
}];

/// Whether an applied meta write is an audit repair's: it carries a lease its process took
/// for the probe (the lease's epoch, on the same process incarnation and run, was marked at
/// `engine.repair.after_acquire`).
pub fn is_repair(j: &Judged, c: &Call) -> bool {
    let Some(l) = &c.lease else { return false };
    c.op == OpKind::PutMeta
        && j.history.marks.iter().any(|m| {
            m.point == "engine.repair.after_acquire"
                && m.node == c.node
                && m.incarnation == c.incarnation
                && m.run_id == c.run_id
                && m.epoch == Some(l.epoch.0)
        })
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

#[cfg(test)]
mod tests {
    //! A repair of a consistent run, to the wrong status, or that drops a field is caught;
    //! the sound repair of a crash between the settle and the meta write passes.

    use serde_json::json;

    use super::*;
    use crate::history::{History, Mark};
    use crate::oracle::testkit::{self, lease, with_payload};

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
            marks: vec![Mark {
                point: "engine.repair.after_acquire",
                node: 0,
                incarnation: 0,
                run_id: "r".into(),
                epoch: Some(2),
                applied_before: 2,
                invoked_before: 2,
            }],
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
}
