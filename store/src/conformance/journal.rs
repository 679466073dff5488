//! rulvar's `journalStoreConformance`: A1 atomicity, A2 total order, A3 read-your-writes,
//! A4 opaque payload, A5 monotonic seq (sequential and raced), and meta separation.
//!
//! Promise: each check follows the steps of docs/store-contract.md 1.2 and needs
//! nothing but the journal and meta-lookup surfaces (leases are never used here).

use std::collections::BTreeSet;

use futures::future::{join_all, LocalBoxFuture};
use futures::FutureExt;
use serde_json::{json, Value};

use super::{canonical, canonical_entry, entry, seqs, Ck, Opener};
use crate::env::ManualClock;
use crate::error::StoreError;
use crate::spi::{JournalStore, MetaLookup};
use crate::types::{JournalEntry, RunFilter, RunMeta, RunStatus};

pub const A1_APPEND_ATOMICITY: &str = "a1-append-atomicity";
pub const A2_TOTAL_ORDER: &str = "a2-total-order";
pub const A3_READ_YOUR_WRITES: &str = "a3-read-your-writes";
pub const A4_OPAQUE_PAYLOAD: &str = "a4-opaque-payload";
pub const A5_MONOTONIC_SEQ: &str = "a5-monotonic-seq";
pub const A5_STALE_TAIL_RACE: &str = "a5-stale-tail-race";
pub const META_SEPARATION: &str = "meta-separation";

pub const JOURNAL_CHECKS: &[&str] = &[
    A1_APPEND_ATOMICITY,
    A2_TOTAL_ORDER,
    A3_READ_YOUR_WRITES,
    A4_OPAQUE_PAYLOAD,
    A5_MONOTONIC_SEQ,
    A5_STALE_TAIL_RACE,
    META_SEPARATION,
];

const RUN: &str = "journal-run";

/// One concurrently issued operation's outcome.
enum Outcome {
    Appended(u64, Result<(), StoreError>),
    Loaded(Result<Vec<JournalEntry>, StoreError>),
}

/// A1: 12 entries with ~8 KB payloads issued together with two interleaved loads; every
/// entry a load sees equals one submitted entry, and the final journal holds all 12.
pub async fn a1_append_atomicity<O: Opener>(opener: &O) -> Result<(), super::CheckFailure> {
    let ck = Ck(A1_APPEND_ATOMICITY);
    let p = ck.pair(opener).await?;
    let store = &p.a.store;
    let submitted: Vec<JournalEntry> = (0..12u64)
        .map(|i| {
            let fill = char::from(b'a' + i as u8).to_string().repeat(8192);
            JournalEntry::new(i, "a1.payload", "ok", json!({ "index": i, "pad": fill }))
        })
        .collect();
    let wanted: BTreeSet<String> = submitted.iter().map(canonical_entry).collect();
    let mut ops: Vec<LocalBoxFuture<'_, Outcome>> = Vec::new();
    for (i, e) in submitted.iter().enumerate() {
        ops.push(async move { Outcome::Appended(e.seq.0, store.append(RUN, e, None).await) }.boxed_local());
        if i == 3 || i == 8 {
            ops.push(async move { Outcome::Loaded(store.load(RUN).await) }.boxed_local());
        }
    }
    for outcome in join_all(ops).await {
        match outcome {
            Outcome::Appended(seq, r) => ck.ok(r, &format!("concurrent append of seq {seq}"))?,
            Outcome::Loaded(r) => {
                for seen in ck.ok(r, "interleaved load")? {
                    ck.ensure(wanted.contains(&canonical_entry(&seen)), || {
                        format!(
                            "an interleaved load saw an entry (seq {}) that equals no submitted entry",
                            seen.seq
                        )
                    })?;
                }
            }
        }
    }
    let fin = ck.ok(store.load(RUN).await, "final load")?;
    ck.eq(&fin.len(), &12, "final journal length")?;
    for seen in &fin {
        ck.ensure(wanted.contains(&canonical_entry(seen)), || {
            format!("the final journal holds an entry (seq {}) that equals no submitted entry", seen.seq)
        })?;
    }
    Ok(())
}

/// A2: 10 sequential then 8 concurrent appends; 18 unique entries, two identical loads,
/// the first 10 unchanged.
pub async fn a2_total_order<O: Opener>(opener: &O) -> Result<(), super::CheckFailure> {
    let ck = Ck(A2_TOTAL_ORDER);
    let p = ck.pair(opener).await?;
    let store = &p.a.store;
    let sequential: Vec<JournalEntry> = (0..10).map(|i| entry(i, &format!("seq-{i}"))).collect();
    for e in &sequential {
        ck.ok(store.append(RUN, e, None).await, &format!("sequential append of seq {}", e.seq))?;
    }
    let concurrent: Vec<JournalEntry> = (10..18).map(|i| entry(i, &format!("conc-{i}"))).collect();
    let results = join_all(concurrent.iter().map(|e| store.append(RUN, e, None))).await;
    for (e, r) in concurrent.iter().zip(results) {
        ck.ok(r, &format!("concurrent append of seq {}", e.seq))?;
    }
    let first = ck.ok(store.load(RUN).await, "first load")?;
    let second = ck.ok(store.load(RUN).await, "second load")?;
    ck.eq(&first.len(), &18, "journal length")?;
    let unique: BTreeSet<u64> = seqs(&first).into_iter().collect();
    ck.eq(&unique.len(), &18, "distinct seqs in the journal")?;
    ck.ensure(first == second, || {
        format!("two loads disagree: {:?} then {:?}", seqs(&first), seqs(&second))
    })?;
    ck.ensure(first[..10] == sequential[..], || {
        format!("the first 10 entries changed: expected seqs 0..10, got {:?}", seqs(&first[..10]))
    })?;
    Ok(())
}

/// A3: after each awaited append, `load` ends with that entry.
pub async fn a3_read_your_writes<O: Opener>(opener: &O) -> Result<(), super::CheckFailure> {
    let ck = Ck(A3_READ_YOUR_WRITES);
    let p = ck.pair(opener).await?;
    for i in 0..6 {
        let e = entry(i, &format!("ryw-{i}"));
        ck.ok(p.a.store.append(RUN, &e, None).await, &format!("append of seq {i}"))?;
        let loaded = ck.ok(p.a.store.load(RUN).await, "load after append")?;
        ck.ensure(loaded.last() == Some(&e), || {
            format!("after appending seq {i}, load ends with {:?} instead", loaded.last().map(|l| l.seq))
        })?;
        ck.eq(&loaded.len(), &(i as usize + 1), "journal length")?;
    }
    Ok(())
}

/// A4: a legacy entry (no hashVersion, unknown kind, unicode, 0.1 + 0.2, a nested null, an
/// unknown top-level field) round-trips exactly, and the store injects nothing.
pub async fn a4_opaque_payload<O: Opener>(opener: &O) -> Result<(), super::CheckFailure> {
    let ck = Ck(A4_OPAQUE_PAYLOAD);
    let p = ck.pair(opener).await?;
    let sum = 0.1_f64 + 0.2_f64;
    let raw: Value = json!({
        "v": 1,
        "seq": 0,
        "scope": "legacy",
        "key": "legacy/☃",
        "ordinal": 0,
        "kind": "wormhole.v9",
        "status": "ok",
        "value": {
            "text": "naïve café ☃ 𝄞 日本語 \"quoted\" \\ back\nslash\ttab",
            "sum": sum,
            "nested": { "deep": [1, null, { "x": null }], "none": null },
        },
        "futureTopLevel": { "kept": true, "list": [] },
    });
    let legacy = ck.ok(JournalEntry::from_value(raw.clone()), "decoding the legacy entry")?;
    ck.ok(p.a.store.append(RUN, &legacy, None).await, "append of the legacy entry")?;
    let loaded = ck.ok(p.b.store.load(RUN).await, "load from a second instance")?;
    ck.eq(&loaded.len(), &1, "journal length")?;
    let back = serde_json::to_value(&loaded[0]).map_err(|e| ck.fail(format!("re-encoding: {e}")))?;
    ck.eq(&canonical(&back), &canonical(&raw), "the round-tripped entry (keys sorted)")?;
    ck.ensure(back.get("hashVersion").is_none(), || "the store injected a hashVersion field".into())?;
    let got = back["value"]["sum"].as_f64();
    ck.ensure(got.map(f64::to_bits) == Some(sum.to_bits()), || {
        format!("0.1 + 0.2 did not round-trip exactly: expected {sum:?}, got {got:?}")
    })?;
    Ok(())
}

/// A5: after seq 0 and 1, seq 1 and then seq 0 fail with `JournalOrderViolation`; the
/// journal stays `0,1`; seq 2 then succeeds.
pub async fn a5_monotonic_seq<O: Opener>(opener: &O) -> Result<(), super::CheckFailure> {
    let ck = Ck(A5_MONOTONIC_SEQ);
    let p = ck.pair(opener).await?;
    let s = &p.a.store;
    ck.ok(s.append(RUN, &entry(0, "first"), None).await, "append of seq 0")?;
    ck.ok(s.append(RUN, &entry(1, "second"), None).await, "append of seq 1")?;
    ck.order_violation(s.append(RUN, &entry(1, "dup"), None).await, "re-append of seq 1")?;
    ck.order_violation(s.append(RUN, &entry(0, "back"), None).await, "append of seq 0 after seq 1")?;
    let loaded = ck.ok(s.load(RUN).await, "load")?;
    ck.eq(&seqs(&loaded), &vec![0, 1], "journal seqs after the refused appends")?;
    ck.ensure(loaded.iter().all(|e| e.value["tag"] != "dup" && e.value["tag"] != "back"), || {
        "a refused entry is visible".into()
    })?;
    ck.ok(s.append(RUN, &entry(2, "third"), None).await, "append of seq 2")?;
    ck.eq(&seqs(&ck.ok(s.load(RUN).await, "load")?), &vec![0, 1, 2], "journal seqs")?;
    Ok(())
}

/// A5 under a race: after seq 0..2, two instances append seq 3 concurrently; exactly one
/// wins, the loser gets `JournalOrderViolation`, and the order stays strictly increasing.
pub async fn a5_stale_tail_race<O: Opener>(opener: &O) -> Result<(), super::CheckFailure> {
    let ck = Ck(A5_STALE_TAIL_RACE);
    let p = ck.pair(opener).await?;
    for i in 0..3 {
        ck.ok(p.a.store.append(RUN, &entry(i, "base"), None).await, &format!("append of seq {i}"))?;
    }
    let (ea, eb) = (entry(3, "racer-a"), entry(3, "racer-b"));
    let (ra, rb) = futures::join!(p.a.store.append(RUN, &ea, None), p.b.store.append(RUN, &eb, None));
    let winner = match (&ra, &rb) {
        (Ok(()), Err(StoreError::JournalOrderViolation { .. })) => "racer-a",
        (Err(StoreError::JournalOrderViolation { .. }), Ok(())) => "racer-b",
        _ => {
            return Err(ck.fail(format!(
                "expected exactly one seq-3 append to win and the other to fail with \
                 JournalOrderViolation, got {ra:?} and {rb:?}"
            )))
        }
    };
    let loaded = ck.ok(p.a.store.load(RUN).await, "load")?;
    ck.eq(&seqs(&loaded), &vec![0, 1, 2, 3], "journal seqs")?;
    ck.eq(&loaded[3].value["tag"], &json!(winner), "the seq-3 entry's writer")?;
    Ok(())
}

fn meta(run_id: &str, status: RunStatus, name: &str, tags: &[&str]) -> RunMeta {
    let mut m = RunMeta::new(run_id, status);
    m.name = Some(name.to_string());
    m.tags = Some(tags.iter().map(|t| t.to_string()).collect());
    m
}

fn ids(list: &[RunMeta]) -> Vec<String> {
    let mut ids: Vec<String> = list.iter().map(|m| m.run_id.clone()).collect();
    ids.sort();
    ids
}

/// Meta separation: unknown runs load `[]`; `put_meta` is a whole-record upsert; filters
/// honour status, name and tags; every optional field round-trips; `get_meta` agrees with
/// `list_runs` and resolves `None` for a missing run; `delete` removes journal and meta.
pub async fn meta_separation<O: Opener>(opener: &O) -> Result<(), super::CheckFailure> {
    let ck = Ck(META_SEPARATION);
    let clock = ManualClock::starting_at(super::CLOCK_START_MS);
    let a = ck.open(opener, super::MANDATORY_TTL_MS, &clock).await?;
    let s = &a.store;
    ck.eq(
        &ck.ok(s.load("never-written").await, "load of an unknown run")?,
        &vec![],
        "unknown run's journal",
    )?;
    ck.eq(
        &ck.ok(s.get_meta("never-written").await, "get_meta of a missing run")?,
        &None,
        "missing run's meta",
    )?;

    let mut rich = meta("run-1", RunStatus::Running, "alpha", &["x", "y"]);
    rich.segments = Some(1);
    rich.genesis = Some("gen-1".into());
    rich.updated_at = Some("2026-01-01T00:00:00.000Z".into());
    rich.workflow_name = Some("wf".into());
    rich.workflow_hash = Some("sha256:abc".into());
    rich.workflow_source_ref = Some("run-1/workflow-source".into());
    for (k, v) in [
        ("budgetUsd", json!(1.25)),
        ("argsHash", json!("args-h")),
        ("execKeyDerivation", json!("v2")),
        ("scope", json!({ "tenant": "t1", "nested": [null, 0.1] })),
        ("unknownFutureField", json!({ "kept": true })),
    ] {
        rich.extra.insert(k.into(), v);
    }
    ck.ok(s.put_meta(&rich, None).await, "put_meta run-1")?;
    let mut replaced = rich.clone();
    replaced.segments = Some(2);
    replaced.extra.remove("argsHash");
    ck.ok(s.put_meta(&replaced, None).await, "second put_meta run-1 (whole-record upsert)")?;
    ck.ok(s.put_meta(&meta("run-2", RunStatus::Ok, "beta", &["x"]), None).await, "put_meta run-2")?;
    ck.ok(s.put_meta(&meta("run-3", RunStatus::Suspended, "alpha", &["y"]), None).await, "put_meta run-3")?;

    let all = ck.ok(s.list_runs(&RunFilter::default()).await, "list_runs()")?;
    ck.eq(&ids(&all), &vec!["run-1".into(), "run-2".into(), "run-3".into()], "list_runs() run ids")?;
    let got = ck.ok(s.get_meta("run-1").await, "get_meta run-1")?;
    ck.eq(&got, &Some(replaced.clone()), "run-1 meta after the upsert (whole record, no merge)")?;
    let got = got.unwrap_or_else(|| replaced.clone());
    ck.eq(&canonical(&json!(got)), &canonical(&json!(replaced)), "run-1 meta JSON (keys sorted)")?;
    for m in &all {
        let one = ck.ok(s.get_meta(&m.run_id).await, "get_meta")?;
        ck.eq(&one.as_ref(), &Some(m), &format!("get_meta({}) against list_runs", m.run_id))?;
    }

    let by = |f: RunFilter| async move { s.list_runs(&f).await };
    let f = RunFilter { status: Some(RunStatus::Ok), ..RunFilter::default() };
    ck.eq(&ids(&ck.ok(by(f).await, "status filter")?), &vec!["run-2".into()], "status ok")?;
    let f = RunFilter { name: Some("alpha".into()), ..RunFilter::default() };
    ck.eq(&ids(&ck.ok(by(f).await, "name filter")?), &vec!["run-1".into(), "run-3".into()], "name alpha")?;
    let f = RunFilter { tags: Some(vec!["x".into()]), ..RunFilter::default() };
    ck.eq(&ids(&ck.ok(by(f).await, "tags filter")?), &vec!["run-1".into(), "run-2".into()], "tags [x]")?;
    let f = RunFilter { tags: Some(vec!["x".into(), "y".into()]), ..RunFilter::default() };
    ck.eq(&ids(&ck.ok(by(f).await, "tags filter")?), &vec!["run-1".into()], "tags [x, y] (all-of)")?;
    let resumable = ids(&ck.ok(by(RunFilter::resumable()).await, "statuses filter")?);
    ck.ensure(resumable.contains(&"run-1".into()) && resumable.contains(&"run-3".into()), || {
        format!("statuses [running, suspended] dropped a match: got {resumable:?}")
    })?;
    let f = RunFilter { statuses: Some(vec![]), ..RunFilter::default() };
    ck.eq(&ids(&ck.ok(by(f).await, "empty statuses filter")?), &vec![], "statuses [] alone")?;

    ck.ok(s.append("run-1", &entry(0, "meta-sep"), None).await, "append to run-1")?;
    ck.ok(s.delete("run-1", None).await, "delete run-1")?;
    ck.eq(&ck.ok(s.load("run-1").await, "load after delete")?, &vec![], "run-1 journal after delete")?;
    ck.eq(&ck.ok(s.get_meta("run-1").await, "get_meta after delete")?, &None, "run-1 meta after delete")?;
    let rest = ck.ok(s.list_runs(&RunFilter::default()).await, "list_runs after delete")?;
    ck.eq(&ids(&rest), &vec!["run-2".into(), "run-3".into()], "runs left after deleting run-1")?;
    Ok(())
}
