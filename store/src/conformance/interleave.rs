//! The F3 interleave checks (docs/store-contract.md 4): a takeover cannot land between a
//! fence check and its mutation, for append, release, renew and blob put.
//!
//! How: store B is opened first on a shared manual clock; store A is opened with
//! `ManualEnv::with_hook`, whose hook fires once, at the operation's `*.after_check` fault
//! point, advances the clock past A's ttl and runs B's `acquire` inside A's call, recording
//! the result. The fixed store holds the write lock across check and mutation, so B gets
//! `Busy` and A's mutation completes as A's own; afterwards everything stale is refused.
//! Under `FenceTxn::Split` (v1.44.0) B's acquire commits inside the window and the stale
//! mutation lands; the failure message says what it did. A store whose surface ignores the
//! lease never reaches the fault point, which fails the check too.
//!
//! Promise: deterministic, one thread, no sleeps. The fault point names are SqliteStore's;
//! another store can run these checks by consulting its environment at the same points.

use std::cell::{Cell, RefCell};
use std::rc::Rc;

use super::{entry, seqs, Ck, Instance, Opener, CLOCK_START_MS};
use crate::env::{Crash, Env, FaultSite, HookFn, LocalFuture, ManualClock, ManualEnv};
use crate::error::StoreError;
use crate::fault::FaultPoint;
use crate::spi::{JournalStore, LeasableStore, TranscriptStore};
use crate::types::Lease;

pub const FENCED_APPEND_TAKEOVER_WINDOW: &str = "fenced-append-takeover-window";
pub const FENCED_RELEASE_TAKEOVER_WINDOW: &str = "fenced-release-takeover-window";
pub const FENCED_RENEW_TAKEOVER_WINDOW: &str = "fenced-renew-takeover-window";
pub const FENCED_BLOB_PUT_TAKEOVER_WINDOW: &str = "fenced-blob-put-takeover-window";

pub const INTERLEAVE_CHECKS: &[&str] = &[
    FENCED_APPEND_TAKEOVER_WINDOW,
    FENCED_RELEASE_TAKEOVER_WINDOW,
    FENCED_RENEW_TAKEOVER_WINDOW,
    FENCED_BLOB_PUT_TAKEOVER_WINDOW,
];

const RUN: &str = "window-run";
const REF: &str = "window-run/ckpt/7";

/// What the hook saw and did.
#[derive(Default)]
struct Takeover {
    armed: Cell<bool>,
    fired: Cell<u32>,
    outcome: RefCell<Option<Result<Lease, StoreError>>>,
}

/// A (hooked) and B over one backing, and their shared clock.
struct Rig<O: Opener> {
    clock: ManualClock,
    a: Instance<O::Store, O::Blobs>,
    b: Instance<O::Store, O::Blobs>,
    takeover: Rc<Takeover>,
    point: FaultPoint,
}

impl<O: Opener> Rig<O> {
    /// Open B (ttl `b_ttl`), then A (ttl `a_ttl`) with a hook that, once armed, advances
    /// the clock by `advance` ms at `point` and runs B's acquire.
    async fn open(
        ck: Ck,
        opener: &O,
        point: FaultPoint,
        a_ttl: i64,
        b_ttl: i64,
        advance: i64,
    ) -> Result<Rig<O>, super::CheckFailure> {
        let clock = ManualClock::starting_at(CLOCK_START_MS);
        let b = ck.open(opener, b_ttl, &clock).await?;
        let takeover = Rc::new(Takeover::default());
        let hook: Rc<HookFn> = {
            let (t, store_b, c) = (takeover.clone(), b.store.clone(), clock.clone());
            Rc::new(move |site: &FaultSite<'_>| {
                if site.point != point || site.run_id != Some(RUN) || !t.armed.get() {
                    return None;
                }
                t.armed.set(false);
                t.fired.set(t.fired.get() + 1);
                let (t, store_b, c) = (t.clone(), store_b.clone(), c.clone());
                let fut: LocalFuture<'static, Result<(), Crash>> = Box::pin(async move {
                    c.advance(advance);
                    let r = store_b.acquire(RUN, "worker-b").await;
                    *t.outcome.borrow_mut() = Some(r);
                    Ok(())
                });
                Some(fut)
            })
        };
        let env: Rc<dyn Env> = Rc::new(ManualEnv::with_hook(clock.clone(), hook));
        let a = ck.ok(opener.open(a_ttl, env).await, "opening store A with the takeover hook")?;
        Ok(Rig { clock, a, b, takeover, point })
    }

    fn arm(&self) {
        self.takeover.armed.set(true);
    }

    /// Judge what happened inside A's call: `Ok(None)` when B's acquire met `Busy` (the
    /// fixed behaviour), `Ok(Some(lease))` when the takeover committed inside the window.
    fn window(&self, ck: Ck, what: &str) -> Result<Option<Lease>, super::CheckFailure> {
        if self.takeover.fired.get() == 0 {
            return Err(ck.fail(format!(
                "the takeover hook at {} never fired during {what}: the call ran no fence check \
                 before its mutation (the lease is ignored on this surface)",
                self.point
            )));
        }
        match self.takeover.outcome.borrow_mut().take() {
            Some(Err(StoreError::Busy { .. })) => Ok(None),
            Some(Ok(lb)) => Ok(Some(lb)),
            Some(Err(e)) => Err(ck.fail(format!(
                "B's acquire inside {what}'s window: expected Busy (A holds the write lock), got {e:?}"
            ))),
            None => Err(ck.fail(format!("B's acquire inside {what}'s window never completed"))),
        }
    }
}

/// A takeover cannot land between an append's fence check and its insert.
pub async fn fenced_append_takeover_window<O: Opener>(opener: &O) -> Result<(), super::CheckFailure> {
    let ck = Ck(FENCED_APPEND_TAKEOVER_WINDOW);
    let rig = Rig::open(ck, opener, FaultPoint::SqliteAppendAfterCheck, 100, 100, 150).await?;
    let la = ck.ok(rig.a.store.acquire(RUN, "worker-a").await, "A's acquire")?;
    ck.ok(rig.a.store.append(RUN, &entry(0, "a"), Some(&la)).await, "A's append of seq 0")?;
    rig.arm();
    let r = rig.a.store.append(RUN, &entry(1, "a-window"), Some(&la)).await;
    if let Some(lb) = rig.window(ck, "A's append of seq 1")? {
        let journal = rig.b.store.load(RUN).await.map(|j| seqs(&j));
        return Err(ck.fail(format!(
            "B acquired epoch {} between A's fence check and its insert; A's append of seq 1 under \
             epoch {} then returned {r:?}, and the journal reads {journal:?} under B's tenure",
            lb.epoch, la.epoch
        )));
    }
    ck.ok(r, "A's append of seq 1 (serialized before the takeover)")?;
    let lb = ck.ok(rig.b.store.acquire(RUN, "worker-b").await, "B's acquire after A's append")?;
    ck.ensure(lb.epoch > la.epoch, || format!("B's epoch {} must exceed A's {}", lb.epoch, la.epoch))?;
    ck.ok(rig.b.store.append(RUN, &entry(2, "b"), Some(&lb)).await, "B's append of seq 2")?;
    ck.lease_held(
        rig.a.store.append(RUN, &entry(3, "stale-a"), Some(&la)).await,
        "A's stale append of seq 3",
    )?;
    let journal = ck.ok(rig.b.store.load(RUN).await, "load")?;
    ck.eq(&seqs(&journal), &vec![0, 1, 2], "journal seqs")?;
    Ok(())
}

/// A stale release cannot delete the lease a successor holds.
pub async fn fenced_release_takeover_window<O: Opener>(opener: &O) -> Result<(), super::CheckFailure> {
    let ck = Ck(FENCED_RELEASE_TAKEOVER_WINDOW);
    let rig = Rig::open(ck, opener, FaultPoint::SqliteReleaseAfterCheck, 100, 100, 150).await?;
    let la = ck.ok(rig.a.store.acquire(RUN, "worker-a").await, "A's acquire")?;
    rig.arm();
    let r = rig.a.store.release(&la).await;
    if let Some(lb) = rig.window(ck, "A's release")? {
        let third = rig.b.store.acquire(RUN, "worker-c").await;
        return Err(ck.fail(format!(
            "B acquired epoch {} between A's fence check and its release; A's release then returned \
             {r:?}, and a third owner's acquire while B's lease is live returned {third:?} (a success \
             means the stale release deleted B's row)",
            lb.epoch
        )));
    }
    ck.ok(r, "A's release (serialized before the takeover)")?;
    let lb = ck.ok(rig.b.store.acquire(RUN, "worker-b").await, "B's acquire after A's release")?;
    ck.ensure(lb.epoch > la.epoch, || format!("B's epoch {} must exceed A's {}", lb.epoch, la.epoch))?;
    ck.lease_held(rig.a.store.release(&la).await, "A's second (stale) release")?;
    ck.lease_held(rig.a.store.acquire(RUN, "worker-c").await, "worker-c's acquire while B holds the lease")?;
    ck.ok(rig.b.store.append(RUN, &entry(0, "b"), Some(&lb)).await, "B's append under its lease")?;
    Ok(())
}

/// A stale renew cannot extend the lease a successor holds. A runs ttl 1000 and B ttl 100,
/// so a renew that rewrote B's row would move B's expiry by 900 ms.
pub async fn fenced_renew_takeover_window<O: Opener>(opener: &O) -> Result<(), super::CheckFailure> {
    let ck = Ck(FENCED_RENEW_TAKEOVER_WINDOW);
    let rig = Rig::open(ck, opener, FaultPoint::SqliteRenewAfterCheck, 1000, 100, 1050).await?;
    let la = ck.ok(rig.a.store.acquire(RUN, "worker-a").await, "A's acquire")?;
    rig.arm();
    let r = rig.a.store.renew(&la).await;
    if let Some(lb) = rig.window(ck, "A's renew")? {
        rig.clock.advance(110);
        let third = rig.b.store.acquire(RUN, "worker-c").await;
        return Err(ck.fail(format!(
            "B acquired epoch {} (expiring 100 ms later) between A's fence check and its renew; A's \
             renew then returned {r:?}; 10 ms after B's own expiry a third owner's acquire returned \
             {third:?} (a refusal means the stale renew rewrote B's expires_at to A's now + 1000 ms)",
            lb.epoch
        )));
    }
    ck.ok(r, "A's renew (serialized before the takeover)")?;
    // A's renew committed at +1050 with A's ttl: A now holds until +2050.
    rig.clock.advance(1010);
    let lb =
        ck.ok(rig.b.store.acquire(RUN, "worker-b").await, "B's acquire after A's renewed lease lapsed")?;
    ck.ensure(lb.epoch > la.epoch, || format!("B's epoch {} must exceed A's {}", lb.epoch, la.epoch))?;
    ck.lease_held(rig.a.store.renew(&la).await, "A's stale renew")?;
    rig.clock.advance(90);
    ck.lease_held(rig.b.store.acquire(RUN, "worker-c").await, "worker-c's acquire 10 ms before B's expiry")?;
    rig.clock.advance(20);
    let lc =
        ck.ok(rig.b.store.acquire(RUN, "worker-c").await, "worker-c's acquire 10 ms after B's expiry")?;
    ck.ensure(lc.epoch > lb.epoch, || format!("C's epoch {} must exceed B's {}", lc.epoch, lb.epoch))?;
    Ok(())
}

/// A takeover cannot land between a blob put's fence check and its write.
pub async fn fenced_blob_put_takeover_window<O: Opener>(opener: &O) -> Result<(), super::CheckFailure> {
    let ck = Ck(FENCED_BLOB_PUT_TAKEOVER_WINDOW);
    let rig = Rig::open(ck, opener, FaultPoint::SqliteBlobPutAfterCheck, 100, 100, 150).await?;
    let la = ck.ok(rig.a.store.acquire(RUN, "worker-a").await, "A's acquire")?;
    rig.arm();
    let r = rig.a.blobs.put(REF, &[1, 1, 0x2a], Some(&la)).await;
    if let Some(lb) = rig.window(ck, "A's blob put")? {
        let now = rig.b.blobs.get(REF).await;
        return Err(ck.fail(format!(
            "B acquired epoch {} between A's fence check and its blob write; A's put then returned \
             {r:?}, and the blob reads {now:?} under B's tenure",
            lb.epoch
        )));
    }
    ck.ok(r, "A's blob put (serialized before the takeover)")?;
    let lb = ck.ok(rig.b.store.acquire(RUN, "worker-b").await, "B's acquire after A's put")?;
    ck.ok(rig.b.blobs.put(REF, &[1, 3, 0x2a], Some(&lb)).await, "B's blob put")?;
    ck.lease_held(rig.a.blobs.put(REF, &[1, 2, 0x2a], Some(&la)).await, "A's stale blob put")?;
    ck.eq(&ck.ok(rig.a.blobs.get(REF).await, "get via A")?, &Some(vec![1, 3, 0x2a]), "blob via A")?;
    ck.eq(&ck.ok(rig.b.blobs.get(REF).await, "get via B")?, &Some(vec![1, 3, 0x2a]), "blob via B")?;
    Ok(())
}
