//! The `run_settle` entry's own fields, judged against the segment that wrote it. The reconciler
//! and every later boot read these fields (docs/engine-model.md 3.3; the reconciler's read: 7.1): `runStatus` is the status the
//! segment settled with, `segment` is its number (`segmentsBefore + 1`, the value its boot meta
//! write set), and the key is the one constant settle key. A wrong value is otherwise invisible
//! until a later boot or audit trips on it.
//!
//! The segment of a settle is its lease (run, owner, epoch): its boot meta write is the first
//! meta write carrying that lease, its terminal meta write the next one after the settle. Payloads
//! are read as plain JSON here (the oracle's own reading, not the store's decoder).

use std::collections::BTreeMap;

use serde_json::Value;
use store::engine::RUN_SETTLE_DECISION_TYPE;

use super::contract::{is_decision, EntryView, MetaView};
use super::model::{t, who, Judged};
use super::{Expectation, Property, Witness};
use crate::history::{Call, OpKind};

pub const ALL: &[Property] = &[Property {
    name: "run_settle_matches_its_segment",
    expectation: Expectation::Always,
    claim: "Every applied run_settle entry carries its segment's number (the segments value of that segment's boot meta write), the status of the terminal meta write that follows it from the same segment, and the same settle key as every other settle.",
    not_checked: "Settles whose segment wrote its meta without the lease (no boot write to match); the optional completion and pricing fields.",
    check: run_settle_matches_its_segment,
}];

/// `(runStatus, segment, key)` of a run_settle append; `None` for any other entry. The
/// status is kept as written (`None` when it is not a status word), so a settle recording a
/// wrong word is judged, not skipped.
fn settle_of(c: &Call) -> Option<(Option<String>, Option<u64>, String)> {
    let e = EntryView::parse(c.args.payload.as_deref()?)?;
    if !is_decision(&e, RUN_SETTLE_DECISION_TYPE) {
        return None;
    }
    Some((
        e.value.get("runStatus").and_then(Value::as_str).map(str::to_string),
        e.value.get("segment").and_then(Value::as_u64),
        e.key,
    ))
}

/// `(status, segments)` of a meta write.
fn meta_of(c: &Call) -> Option<(String, Option<u64>)> {
    let m = MetaView::parse(c.args.payload.as_deref()?)?;
    Some((m.status.word().to_string(), m.segments))
}

fn run_settle_matches_its_segment(j: &Judged, out: &mut Vec<Witness>) {
    // Per segment (run, owner, epoch): its meta writes in apply order.
    #[allow(clippy::type_complexity)]
    let mut metas: BTreeMap<(&str, &str, u64), Vec<(usize, &Call)>> = BTreeMap::new();
    for (i, &c) in j.applied.iter().enumerate() {
        if let (OpKind::PutMeta, Some(l)) = (c.op, &c.lease) {
            metas.entry((c.run_id.as_str(), l.owner.as_str(), l.epoch.0)).or_default().push((i, c));
        }
    }
    let mut first_key: Option<(String, &Call)> = None;
    for (i, &c) in j.applied.iter().enumerate() {
        if c.op != OpKind::Append {
            continue;
        }
        let Some((status, segment, key)) = settle_of(c) else { continue };
        let mut wrong = Vec::new();
        match &first_key {
            None => first_key = Some((key.clone(), c)),
            Some((k, first)) if *k != key => wrong.push(format!(
                "its key {key:?} differs from the settle key {k:?} of {}'s settle at t={}",
                who(first),
                t(Judged::applied_ns(first))
            )),
            Some(_) => {}
        }
        if let Some(l) = &c.lease {
            if let Some(writes) = metas.get(&(c.run_id.as_str(), l.owner.as_str(), l.epoch.0)) {
                let boot = writes.first().filter(|(k, _)| *k < i).and_then(|(_, m)| meta_of(m));
                if let Some((_, Some(booted))) = boot {
                    if segment != Some(booted) {
                        wrong.push(format!(
                            "it names segment {} where its segment's boot meta write set segments={booted}",
                            segment.map_or("none".into(), |s| s.to_string())
                        ));
                    }
                }
                let terminal = writes.iter().find(|(k, _)| *k > i).and_then(|(_, m)| meta_of(m));
                if let Some((meta_status, _)) = terminal {
                    if status.as_deref() != Some(meta_status.as_str()) {
                        wrong.push(format!(
                            "it records runStatus {} where the same segment's next meta write set {meta_status}",
                            status.as_deref().unwrap_or("none")
                        ));
                    }
                }
            }
        }
        if !wrong.is_empty() {
            out.push(
                Witness::new(format!(
                    "run {}: {}'s run_settle at t={} (seq {}): {}",
                    c.run_id,
                    who(c),
                    t(Judged::applied_ns(c)),
                    c.args.seq.unwrap_or(0),
                    wrong.join("; ")
                ))
                .on(c.op, c.id),
            );
        }
    }
}

#[cfg(test)]
mod tests {
    //! The property fails on a settle that names another segment or status and passes its
    //! lawful twin.

    use serde_json::json;

    use super::*;
    use crate::oracle::testkit::{self, lease, with_payload};

    fn call(id: usize, op: OpKind, payload: serde_json::Value) -> Call {
        let mut c = with_payload(testkit::call(id, op), payload);
        c.lease = Some(lease("w", 2));
        c.args.seq = Some(id as u64);
        c
    }

    fn settle(id: usize, status: &str, segment: u64) -> Call {
        call(
            id,
            OpKind::Append,
            json!({"seq": id, "kind": "decision", "status": "ok", "key": "run-settle",
                   "value": {"decisionType": "run_settle", "runStatus": status, "segment": segment}}),
        )
    }

    fn judge(calls: Vec<Call>) -> Vec<Witness> {
        testkit::judge(&testkit::history(calls), run_settle_matches_its_segment)
    }

    fn segment(settle: Call, terminal: &str) -> Vec<Call> {
        vec![
            call(0, OpKind::PutMeta, json!({"runId": "r", "status": "running", "segments": 3})),
            settle,
            call(2, OpKind::PutMeta, json!({"runId": "r", "status": terminal, "segments": 3})),
        ]
    }

    #[test]
    fn a_settle_naming_another_segment_or_status_is_caught() {
        let v = judge(segment(settle(1, "ok", 2), "ok"));
        assert_eq!(v.len(), 1, "{v:?}");
        assert!(v[0].witness.contains("names segment 2 where its segment's boot meta write set segments=3"));
        let v = judge(segment(settle(1, "error", 3), "ok"));
        assert_eq!(v.len(), 1, "{v:?}");
        assert!(v[0].witness.contains("runStatus error where the same segment's next meta write set ok"));
        assert!(judge(segment(settle(1, "ok", 3), "ok")).is_empty());
    }

    #[test]
    fn settles_with_two_keys_are_caught() {
        let mut other = settle(3, "ok", 3);
        other.args.payload = Some(other.args.payload.unwrap().replace("run-settle", "run-settle-2"));
        let mut calls = segment(settle(1, "ok", 3), "ok");
        calls.push(other);
        let v = judge(calls);
        assert_eq!(v.len(), 1, "{v:?}");
        assert!(v[0].witness.contains("differs from the settle key"), "{}", v[0].witness);
    }
}
