//! rulvar's `leasableStoreConformance`: exclusive acquire (L1), the monotonic epoch across
//! release and delete (L2, the tombstone), release fencing (L3-L5), and the ttl and renew
//! cadence (L6).
//!
//! Promise: staleness comes from release and reacquire only, except in
//! `lease-ttl-and-renew-cadence`, which opens its stores with ttl 600 and moves its own
//! manual clock.

use super::{describe, entry, seqs, Ck, Opener};
use crate::env::ManualClock;
use crate::spi::{JournalStore, LeasableStore};
use crate::types::Epoch;

pub const LEASE_EXCLUSIVE_ACQUIRE: &str = "lease-exclusive-acquire";
pub const FENCING_STALE_EPOCH: &str = "fencing-stale-epoch";
pub const FENCING_EPOCH_TOMBSTONE: &str = "fencing-epoch-tombstone";
pub const LEASE_RELEASE_FENCES: &str = "lease-release-fences";
pub const LEASE_TTL_AND_RENEW_CADENCE: &str = "lease-ttl-and-renew-cadence";

pub const LEASABLE_CHECKS: &[&str] = &[
    LEASE_EXCLUSIVE_ACQUIRE,
    FENCING_STALE_EPOCH,
    FENCING_EPOCH_TOMBSTONE,
    LEASE_RELEASE_FENCES,
    LEASE_TTL_AND_RENEW_CADENCE,
];

const RUN: &str = "lease-run";

/// L1: A acquires (lease shape checked); B's acquire and A's own second acquire fail with
/// `LeaseHeld`; after A releases, B acquires a greater epoch.
pub async fn lease_exclusive_acquire<O: Opener>(opener: &O) -> Result<(), super::CheckFailure> {
    let ck = Ck(LEASE_EXCLUSIVE_ACQUIRE);
    let p = ck.pair(opener).await?;
    let la = ck.ok(p.a.store.acquire(RUN, "worker-a").await, "A's acquire")?;
    ck.eq(&la.run_id.as_str(), &RUN, "lease run id")?;
    ck.eq(&la.owner.as_str(), &"worker-a", "lease owner")?;
    ck.ensure(la.epoch >= Epoch(1), || format!("the first epoch must be at least 1, got {}", la.epoch))?;
    ck.lease_held(p.b.store.acquire(RUN, "worker-b").await, "B's acquire while A holds the lease")?;
    ck.lease_held(p.a.store.acquire(RUN, "worker-a").await, "A's second acquire (no re-entrancy)")?;
    ck.ok(p.a.store.release(&la).await, "A's release")?;
    let lb = ck.ok(p.b.store.acquire(RUN, "worker-b").await, "B's acquire after A released")?;
    ck.ensure(lb.epoch > la.epoch, || {
        format!("B's epoch must exceed A's: A {}, B {}", describe(&la), describe(&lb))
    })?;
    Ok(())
}

/// L2/L5: A appends seq 0 and releases; B acquires a greater epoch and appends seq 1; A's
/// append of seq 2 (a valid next seq, so only the fence can stop it) is refused and
/// invisible.
pub async fn fencing_stale_epoch<O: Opener>(opener: &O) -> Result<(), super::CheckFailure> {
    let ck = Ck(FENCING_STALE_EPOCH);
    let p = ck.pair(opener).await?;
    let la = ck.ok(p.a.store.acquire(RUN, "worker-a").await, "A's acquire")?;
    ck.ok(p.a.store.append(RUN, &entry(0, "a"), Some(&la)).await, "A's append of seq 0")?;
    ck.ok(p.a.store.release(&la).await, "A's release")?;
    let lb = ck.ok(p.b.store.acquire(RUN, "worker-b").await, "B's acquire")?;
    ck.ensure(lb.epoch > la.epoch, || format!("B's epoch {} must exceed A's {}", lb.epoch, la.epoch))?;
    ck.ok(p.b.store.append(RUN, &entry(1, "b"), Some(&lb)).await, "B's append of seq 1")?;
    ck.rejects(p.a.store.append(RUN, &entry(2, "stale-a"), Some(&la)).await, "A's stale append of seq 2")?;
    let loaded = ck.ok(p.b.store.load(RUN).await, "load")?;
    ck.eq(&seqs(&loaded), &vec![0, 1], "journal seqs (the stale append must be invisible)")?;
    Ok(())
}

/// L2 across delete: a stable-owner zombie acquires, appends and releases; an unleased
/// delete; the same owner reacquires with a strictly greater epoch and appends seq 0; the
/// zombie's append and renew are refused; the journal holds one entry.
pub async fn fencing_epoch_tombstone<O: Opener>(opener: &O) -> Result<(), super::CheckFailure> {
    let ck = Ck(FENCING_EPOCH_TOMBSTONE);
    let p = ck.pair(opener).await?;
    let zombie = ck.ok(p.a.store.acquire(RUN, "stable-owner").await, "the zombie's acquire")?;
    ck.ok(p.a.store.append(RUN, &entry(0, "zombie"), Some(&zombie)).await, "the zombie's append of seq 0")?;
    ck.ok(p.a.store.release(&zombie).await, "the zombie's release")?;
    ck.ok(p.b.store.delete(RUN, None).await, "the unleased delete")?;
    let fresh = ck.ok(p.b.store.acquire(RUN, "stable-owner").await, "the same owner's reacquire")?;
    ck.ensure(fresh.epoch > zombie.epoch, || {
        format!(
            "the epoch must survive delete as a tombstone: the recreated run's epoch is {}, \
             the deleted incarnation's was {}",
            fresh.epoch, zombie.epoch
        )
    })?;
    ck.ok(
        p.b.store.append(RUN, &entry(0, "fresh"), Some(&fresh)).await,
        "the fresh holder's append of seq 0",
    )?;
    ck.rejects(
        p.a.store.append(RUN, &entry(1, "zombie"), Some(&zombie)).await,
        "the zombie's append of seq 1",
    )?;
    ck.rejects(p.a.store.renew(&zombie).await, "the zombie's renew")?;
    let loaded = ck.ok(p.b.store.load(RUN).await, "load")?;
    ck.eq(&loaded.len(), &1, "recreated journal length")?;
    ck.eq(&loaded[0].value["tag"], &serde_json::json!("fresh"), "the recreated journal's only entry")?;
    Ok(())
}

/// L3/L4/L5: acquire, renew, release; then renew, a second release and an append under the
/// lease are all refused and nothing is visible.
pub async fn lease_release_fences<O: Opener>(opener: &O) -> Result<(), super::CheckFailure> {
    let ck = Ck(LEASE_RELEASE_FENCES);
    let p = ck.pair(opener).await?;
    let l = ck.ok(p.a.store.acquire(RUN, "worker-a").await, "acquire")?;
    ck.ok(p.a.store.renew(&l).await, "renew of the live lease")?;
    ck.ok(p.a.store.release(&l).await, "release")?;
    ck.rejects(p.a.store.renew(&l).await, "renew after release")?;
    ck.rejects(p.a.store.release(&l).await, "second release")?;
    ck.rejects(
        p.a.store.append(RUN, &entry(0, "released"), Some(&l)).await,
        "append under the released lease",
    )?;
    ck.eq(&ck.ok(p.b.store.load(RUN).await, "load")?, &vec![], "journal after the refused append")?;
    Ok(())
}

/// L6: with ttl 600, renewing every 200 ms for 900 ms keeps B out; the store reports its
/// ttl; an unrenewed lease is still held at 0.9 x ttl and reclaimable at 1.2 x ttl with a
/// greater epoch.
pub async fn lease_ttl_and_renew_cadence<O: Opener>(opener: &O) -> Result<(), super::CheckFailure> {
    let ck = Ck(LEASE_TTL_AND_RENEW_CADENCE);
    const TTL: i64 = 600;
    let clock = ManualClock::starting_at(super::CLOCK_START_MS);
    let a = ck.open(opener, TTL, &clock).await?;
    let b = ck.open(opener, TTL, &clock).await?;
    ck.eq(&a.store.lease_ttl(), &Some(std::time::Duration::from_millis(TTL as u64)), "lease_ttl()")?;
    let l = ck.ok(a.store.acquire("ttl-run", "worker-a").await, "A's acquire")?;
    let mut elapsed = 0;
    while elapsed < TTL * 3 / 2 {
        clock.advance(TTL / 3);
        elapsed += TTL / 3;
        ck.ok(a.store.renew(&l).await, &format!("A's renew at +{elapsed} ms"))?;
        ck.lease_held(
            b.store.acquire("ttl-run", "worker-b").await,
            &format!("B's acquire at +{elapsed} ms"),
        )?;
    }
    let first = ck.ok(a.store.acquire("expiring-run", "worker-a").await, "A's acquire of expiring-run")?;
    clock.advance(TTL * 9 / 10);
    ck.lease_held(
        b.store.acquire("expiring-run", "worker-b").await,
        "B's acquire of expiring-run at 0.9 x ttl (not expired yet)",
    )?;
    clock.advance(TTL * 3 / 10);
    let reclaimed =
        ck.ok(b.store.acquire("expiring-run", "worker-b").await, "B's acquire of expiring-run at 1.2 x ttl")?;
    ck.ensure(reclaimed.epoch > first.epoch, || {
        format!("the reclaimed epoch {} must exceed the expired {}", reclaimed.epoch, first.epoch)
    })?;
    Ok(())
}
