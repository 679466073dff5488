//! rulvar's `fencedTranscriptsConformance`: the transcript side's `fenced_writes` marker
//! and its promise (a stale or cross-run lease cannot put or delete a blob; the prior blob
//! survives byte-intact), plus the unleased passthrough (T1-T3).
//!
//! Promise: leases are minted on the journal side of the same instance; the ref under test
//! is `fenced-run/ckpt/7` and blobs are `[0x01, tag, 0x2a]`, as in the kit.

use super::fenced::{OTHER_RUN, RUN};
use super::{Ck, Opener};
use crate::spi::{LeasableStore, TranscriptStore};

pub const FENCED_TRANSCRIPTS_MARKER_DECLARED: &str = "fenced-transcripts-marker-declared";
pub const FENCED_TRANSCRIPTS_STALE_PUT_REJECTED: &str = "fenced-transcripts-stale-put-rejected";
pub const FENCED_TRANSCRIPTS_STALE_DELETE_REJECTED: &str = "fenced-transcripts-stale-delete-rejected";
pub const FENCED_TRANSCRIPTS_RUN_MATCH: &str = "fenced-transcripts-run-match";
pub const FENCED_TRANSCRIPTS_UNLEASED_PASSTHROUGH: &str = "fenced-transcripts-unleased-passthrough";

pub const FENCED_TRANSCRIPTS_CHECKS: &[&str] = &[
    FENCED_TRANSCRIPTS_MARKER_DECLARED,
    FENCED_TRANSCRIPTS_STALE_PUT_REJECTED,
    FENCED_TRANSCRIPTS_STALE_DELETE_REJECTED,
    FENCED_TRANSCRIPTS_RUN_MATCH,
    FENCED_TRANSCRIPTS_UNLEASED_PASSTHROUGH,
];

pub(crate) const REF: &str = "fenced-run/ckpt/7";

pub(crate) fn blob(tag: u8) -> Vec<u8> {
    vec![0x01, tag, 0x2a]
}

/// The transcript side declares `fenced_writes`.
pub async fn fenced_transcripts_marker_declared<O: Opener>(opener: &O) -> Result<(), super::CheckFailure> {
    let ck = Ck(FENCED_TRANSCRIPTS_MARKER_DECLARED);
    let p = ck.pair(opener).await?;
    ck.ensure(p.a.blobs.fenced_writes(), || "the transcript store does not declare fenced_writes".into())
}

/// The F2 shape: A puts blob 1 and releases; B acquires and puts blob 3; A's stale put of
/// blob 2 is refused and both instances read blob 3.
pub async fn fenced_transcripts_stale_put_rejected<O: Opener>(opener: &O) -> Result<(), super::CheckFailure> {
    let ck = Ck(FENCED_TRANSCRIPTS_STALE_PUT_REJECTED);
    let p = ck.pair(opener).await?;
    let la = ck.ok(p.a.store.acquire(RUN, "worker-a").await, "A's acquire")?;
    ck.ok(p.a.blobs.put(REF, &blob(1), Some(&la)).await, "A's put of blob 1")?;
    ck.ok(p.a.store.release(&la).await, "A's release")?;
    let lb = ck.ok(p.b.store.acquire(RUN, "worker-b").await, "B's acquire")?;
    ck.ok(p.b.blobs.put(REF, &blob(3), Some(&lb)).await, "B's put of blob 3")?;
    ck.lease_held(p.a.blobs.put(REF, &blob(2), Some(&la)).await, "A's stale put of blob 2")?;
    ck.eq(&ck.ok(p.b.blobs.get(REF).await, "get via B")?, &Some(blob(3)), "blob via B after the stale put")?;
    ck.eq(&ck.ok(p.a.blobs.get(REF).await, "get via A")?, &Some(blob(3)), "blob via A after the stale put")?;
    Ok(())
}

/// A puts blob 3 and releases; B acquires; A's stale delete is refused and blob 3 stays;
/// B's live delete removes it; repeating it (a missing ref under a live lease) is a no-op.
pub async fn fenced_transcripts_stale_delete_rejected<O: Opener>(
    opener: &O,
) -> Result<(), super::CheckFailure> {
    let ck = Ck(FENCED_TRANSCRIPTS_STALE_DELETE_REJECTED);
    let p = ck.pair(opener).await?;
    let la = ck.ok(p.a.store.acquire(RUN, "worker-a").await, "A's acquire")?;
    ck.ok(p.a.blobs.put(REF, &blob(3), Some(&la)).await, "A's put of blob 3")?;
    ck.ok(p.a.store.release(&la).await, "A's release")?;
    let lb = ck.ok(p.b.store.acquire(RUN, "worker-b").await, "B's acquire")?;
    ck.lease_held(p.a.blobs.delete(REF, Some(&la)).await, "A's stale delete")?;
    ck.eq(&ck.ok(p.b.blobs.get(REF).await, "get")?, &Some(blob(3)), "blob after the stale delete")?;
    ck.ok(p.b.blobs.delete(REF, Some(&lb)).await, "B's delete under its live lease")?;
    ck.eq(&ck.ok(p.b.blobs.get(REF).await, "get")?, &None, "blob after B's delete")?;
    ck.ok(p.b.blobs.delete(REF, Some(&lb)).await, "B's repeated delete of the missing ref")?;
    Ok(())
}

/// A live lease for the other run can neither put nor delete `fenced-run/...`; positive
/// control: the same lease may put `fenced-other-run/ckpt/1`.
pub async fn fenced_transcripts_run_match<O: Opener>(opener: &O) -> Result<(), super::CheckFailure> {
    let ck = Ck(FENCED_TRANSCRIPTS_RUN_MATCH);
    let p = ck.pair(opener).await?;
    ck.ok(p.a.blobs.put(REF, &blob(1), None).await, "unleased put of blob 1")?;
    let other = ck.ok(p.b.store.acquire(OTHER_RUN, "worker-other").await, "acquire of the other run")?;
    ck.lease_held(p.b.blobs.put(REF, &blob(2), Some(&other)).await, "put under the other run's lease")?;
    ck.lease_held(p.b.blobs.delete(REF, Some(&other)).await, "delete under the other run's lease")?;
    ck.eq(&ck.ok(p.a.blobs.get(REF).await, "get")?, &Some(blob(1)), "blob after the cross-run writes")?;
    let own = "fenced-other-run/ckpt/1";
    ck.ok(p.b.blobs.put(own, &blob(4), Some(&other)).await, "put of the lease's own run (positive control)")?;
    ck.eq(&ck.ok(p.a.blobs.get(own).await, "get")?, &Some(blob(4)), "the other run's own blob")?;
    Ok(())
}

/// T1-T3 without a lease: put, get, list includes the ref, delete, get is `None`, and a
/// repeated delete is a no-op.
pub async fn fenced_transcripts_unleased_passthrough<O: Opener>(
    opener: &O,
) -> Result<(), super::CheckFailure> {
    let ck = Ck(FENCED_TRANSCRIPTS_UNLEASED_PASSTHROUGH);
    let p = ck.pair(opener).await?;
    let bytes: Vec<u8> = (0..=255u8).collect();
    ck.ok(p.a.blobs.put(REF, &bytes, None).await, "unleased put")?;
    ck.eq(&ck.ok(p.b.blobs.get(REF).await, "get")?, &Some(bytes.clone()), "blob bytes (byte-exact)")?;
    let listed = ck.ok(p.b.blobs.list(RUN).await, "list")?;
    ck.ensure(listed.iter().any(|r| r == REF), || format!("list({RUN}) lacks {REF}: {listed:?}"))?;
    ck.ok(p.a.blobs.delete(REF, None).await, "unleased delete")?;
    ck.eq(&ck.ok(p.b.blobs.get(REF).await, "get")?, &None, "blob after delete")?;
    ck.ok(p.a.blobs.delete(REF, None).await, "repeated unleased delete (a no-op)")?;
    Ok(())
}
