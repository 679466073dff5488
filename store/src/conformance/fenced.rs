//! rulvar's `fencedWritesConformance`: the `fenced_writes` marker and its promise on the
//! journal side (FW1 stale leases refused on `put_meta` and `delete`, across delete and
//! recreate too; FW2 run-match; FW4 unleased writes pass through).
//!
//! Promise: refusals must be `LeaseHeld` specifically (as the kit requires), and every
//! refused write is verified to have changed nothing.

use serde_json::json;

use super::{entry, seqs, Ck, Opener};
use crate::error::StoreError;
use crate::spi::{JournalStore, LeasableStore, MetaLookup};
use crate::types::{RunFilter, RunMeta, RunStatus};

pub const FENCED_MARKER_DECLARED: &str = "fenced-marker-declared";
pub const FENCED_META_STALE_REJECTED: &str = "fenced-meta-stale-rejected";
pub const FENCED_DELETE_STALE_REJECTED: &str = "fenced-delete-stale-rejected";
pub const FENCED_TOMBSTONE_ZOMBIE_REJECTED: &str = "fenced-tombstone-zombie-rejected";
pub const FENCED_RUN_MATCH: &str = "fenced-run-match";
pub const FENCED_UNLEASED_PASSTHROUGH: &str = "fenced-unleased-passthrough";

pub const FENCED_WRITES_CHECKS: &[&str] = &[
    FENCED_MARKER_DECLARED,
    FENCED_META_STALE_REJECTED,
    FENCED_DELETE_STALE_REJECTED,
    FENCED_TOMBSTONE_ZOMBIE_REJECTED,
    FENCED_RUN_MATCH,
    FENCED_UNLEASED_PASSTHROUGH,
];

pub(crate) const RUN: &str = "fenced-run";
pub(crate) const OTHER_RUN: &str = "fenced-other-run";

fn meta(status: RunStatus, segments: u64) -> RunMeta {
    let mut m = RunMeta::new(RUN, status);
    m.segments = Some(segments);
    m
}

fn shape(m: &Option<RunMeta>) -> Option<(RunStatus, Option<u64>)> {
    m.as_ref().map(|m| (m.status, m.segments))
}

/// The store declares `fenced_writes`.
pub async fn fenced_marker_declared<O: Opener>(opener: &O) -> Result<(), super::CheckFailure> {
    let ck = Ck(FENCED_MARKER_DECLARED);
    let p = ck.pair(opener).await?;
    ck.ensure(p.a.store.fenced_writes(), || "the store does not declare fenced_writes".into())
}

/// FW1 for `put_meta` (the F1 shape): A writes running/2 and releases; B acquires and
/// writes running/3; A's stale cancelled/2 is refused and the row stays running/3.
pub async fn fenced_meta_stale_rejected<O: Opener>(opener: &O) -> Result<(), super::CheckFailure> {
    let ck = Ck(FENCED_META_STALE_REJECTED);
    let p = ck.pair(opener).await?;
    let la = ck.ok(p.a.store.acquire(RUN, "worker-a").await, "A's acquire")?;
    ck.ok(p.a.store.put_meta(&meta(RunStatus::Running, 2), Some(&la)).await, "A's meta write running/2")?;
    ck.ok(p.a.store.release(&la).await, "A's release")?;
    let lb = ck.ok(p.b.store.acquire(RUN, "worker-b").await, "B's acquire")?;
    ck.ok(p.b.store.put_meta(&meta(RunStatus::Running, 3), Some(&lb)).await, "B's meta write running/3")?;
    ck.lease_held(
        p.a.store.put_meta(&meta(RunStatus::Cancelled, 2), Some(&la)).await,
        "A's stale meta write cancelled/2",
    )?;
    let now = ck.ok(p.b.store.get_meta(RUN).await, "get_meta")?;
    ck.eq(
        &shape(&now),
        &Some((RunStatus::Running, Some(3))),
        "meta (status, segments) after the stale write",
    )?;
    let sweep = ck.ok(p.b.store.list_runs(&RunFilter::resumable()).await, "list_runs(resumable)")?;
    ck.ensure(sweep.iter().any(|m| m.run_id == RUN), || "the run left the resumable sweep".into())?;
    Ok(())
}

/// FW1 for `delete` (F4): A appends and writes meta, releases; B acquires; A's stale
/// delete is refused and journal and meta survive; B's live delete removes both.
pub async fn fenced_delete_stale_rejected<O: Opener>(opener: &O) -> Result<(), super::CheckFailure> {
    let ck = Ck(FENCED_DELETE_STALE_REJECTED);
    let p = ck.pair(opener).await?;
    let la = ck.ok(p.a.store.acquire(RUN, "worker-a").await, "A's acquire")?;
    ck.ok(p.a.store.append(RUN, &entry(0, "a"), Some(&la)).await, "A's append of seq 0")?;
    ck.ok(p.a.store.put_meta(&meta(RunStatus::Running, 1), Some(&la)).await, "A's meta write")?;
    ck.ok(p.a.store.release(&la).await, "A's release")?;
    let lb = ck.ok(p.b.store.acquire(RUN, "worker-b").await, "B's acquire")?;
    ck.lease_held(p.a.store.delete(RUN, Some(&la)).await, "A's stale delete")?;
    ck.eq(&ck.ok(p.b.store.load(RUN).await, "load")?.len(), &1, "journal length after the stale delete")?;
    let m = ck.ok(p.b.store.get_meta(RUN).await, "get_meta")?;
    ck.eq(&shape(&m), &Some((RunStatus::Running, Some(1))), "meta after the stale delete")?;
    ck.ok(p.b.store.delete(RUN, Some(&lb)).await, "B's delete under its live lease")?;
    ck.eq(&ck.ok(p.b.store.load(RUN).await, "load")?.len(), &0, "journal length after B's delete")?;
    ck.eq(&ck.ok(p.b.store.get_meta(RUN).await, "get_meta")?, &None, "meta after B's delete")?;
    Ok(())
}

/// FW1 across delete and recreate: after the zombie cycle, `put_meta` ok and `delete`
/// under the zombie lease are refused; the recreated run stays running with one entry.
pub async fn fenced_tombstone_zombie_rejected<O: Opener>(opener: &O) -> Result<(), super::CheckFailure> {
    let ck = Ck(FENCED_TOMBSTONE_ZOMBIE_REJECTED);
    let p = ck.pair(opener).await?;
    let zombie = ck.ok(p.a.store.acquire(RUN, "stable-owner").await, "the zombie's acquire")?;
    ck.ok(p.a.store.append(RUN, &entry(0, "zombie"), Some(&zombie)).await, "the zombie's append")?;
    ck.ok(p.a.store.release(&zombie).await, "the zombie's release")?;
    ck.ok(p.b.store.delete(RUN, None).await, "the unleased delete")?;
    let fresh = ck.ok(p.b.store.acquire(RUN, "stable-owner").await, "the same owner's reacquire")?;
    ck.ok(p.b.store.append(RUN, &entry(0, "fresh"), Some(&fresh)).await, "the fresh holder's append")?;
    ck.ok(p.b.store.put_meta(&meta(RunStatus::Running, 1), Some(&fresh)).await, "the fresh holder's meta")?;
    ck.lease_held(
        p.a.store.put_meta(&meta(RunStatus::Ok, 1), Some(&zombie)).await,
        &format!("the zombie's meta write ok (zombie epoch {}, fresh epoch {})", zombie.epoch, fresh.epoch),
    )?;
    ck.lease_held(
        p.a.store.delete(RUN, Some(&zombie)).await,
        &format!("the zombie's delete (zombie epoch {}, fresh epoch {})", zombie.epoch, fresh.epoch),
    )?;
    let m = ck.ok(p.b.store.get_meta(RUN).await, "get_meta")?;
    ck.eq(&m.map(|m| m.status), &Some(RunStatus::Running), "recreated run's status")?;
    let loaded = ck.ok(p.b.store.load(RUN).await, "load")?;
    ck.eq(&loaded.len(), &1, "recreated journal length")?;
    ck.eq(&loaded[0].value["tag"], &json!("fresh"), "the recreated journal's only entry")?;
    Ok(())
}

/// FW2: a live lease for another run cannot guard `put_meta`, `append` or `delete` of
/// this run; meta and journal are unchanged.
pub async fn fenced_run_match<O: Opener>(opener: &O) -> Result<(), super::CheckFailure> {
    let ck = Ck(FENCED_RUN_MATCH);
    let p = ck.pair(opener).await?;
    ck.ok(p.a.store.append(RUN, &entry(0, "base"), None).await, "unleased append of seq 0")?;
    ck.ok(p.a.store.put_meta(&meta(RunStatus::Running, 1), None).await, "unleased meta write")?;
    let other = ck.ok(p.b.store.acquire(OTHER_RUN, "worker-other").await, "acquire of the other run")?;
    // All three are attempted before judging, so a failure names every surface that let
    // the foreign lease through.
    let outcomes = [
        ("meta write", p.b.store.put_meta(&meta(RunStatus::Cancelled, 9), Some(&other)).await),
        ("append of seq 1", p.b.store.append(RUN, &entry(1, "cross"), Some(&other)).await),
        ("delete", p.b.store.delete(RUN, Some(&other)).await),
    ];
    let wrong: Vec<String> = outcomes
        .iter()
        .filter(|(_, r)| !matches!(r, Err(StoreError::LeaseHeld { .. })))
        .map(|(what, r)| format!("{what} returned {r:?}"))
        .collect();
    ck.ensure(wrong.is_empty(), || {
        format!(
            "a live lease for {OTHER_RUN} guarded writes to {RUN}; expected LeaseHeld for each, but: {}",
            wrong.join("; ")
        )
    })?;
    let m = ck.ok(p.a.store.get_meta(RUN).await, "get_meta")?;
    ck.eq(&shape(&m), &Some((RunStatus::Running, Some(1))), "meta after the cross-run writes")?;
    ck.eq(&seqs(&ck.ok(p.a.store.load(RUN).await, "load")?), &vec![0], "journal after the cross-run writes")?;
    ck.eq(&ck.ok(p.a.store.load(OTHER_RUN).await, "load")?.len(), &0, "the other run's journal")?;
    Ok(())
}

/// FW4: unleased `put_meta`, `append` and `delete` all work.
pub async fn fenced_unleased_passthrough<O: Opener>(opener: &O) -> Result<(), super::CheckFailure> {
    let ck = Ck(FENCED_UNLEASED_PASSTHROUGH);
    let p = ck.pair(opener).await?;
    ck.ok(p.a.store.put_meta(&meta(RunStatus::Running, 1), None).await, "unleased meta write")?;
    ck.ok(p.a.store.append(RUN, &entry(0, "free"), None).await, "unleased append")?;
    let m = ck.ok(p.b.store.get_meta(RUN).await, "get_meta")?;
    ck.eq(&shape(&m), &Some((RunStatus::Running, Some(1))), "meta after the unleased write")?;
    ck.eq(&seqs(&ck.ok(p.b.store.load(RUN).await, "load")?), &vec![0], "journal after the unleased append")?;
    ck.ok(p.a.store.delete(RUN, None).await, "unleased delete")?;
    ck.eq(&ck.ok(p.b.store.get_meta(RUN).await, "get_meta")?, &None, "meta after the unleased delete")?;
    ck.eq(&ck.ok(p.b.store.load(RUN).await, "load")?.len(), &0, "journal after the unleased delete")?;
    Ok(())
}
