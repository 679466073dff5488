//! The tombstone workload (T): processes that share one stable owner identity take turns
//! on one run id, delete it (released then unleased, or under their lease) and recreate it,
//! and keep every lease they ever held. At random moments a process probes with one of
//! its OLD leases (a zombie from an earlier incarnation of the run): an append with a
//! fresh tail, a renew, a meta write, a blob put, a leased delete or a release.
//!
//! What it promises: no step is scripted. Which tenure ends how, which zombie probes
//! when, and on which surface, come from the node's seeded workload stream; the window
//! between a delete, the recreate and a zombie's write is widened or closed by the plan's
//! stalls. Every lease-carrying call is made under [`under_grant`], so the oracle knows
//! which grant a lease came from even when two grants are equal as values.

use std::cell::{Cell, RefCell};
use std::rc::Rc;
use std::time::Duration;

use rand_chacha::ChaCha8Rng;
use serde_json::json;
use store::{
    JournalEntry, JournalStore, LeasableStore, Lease, RunMeta, RunStatus, StoreError, TranscriptStore,
};

use sim::history::under_grant;
use sim::recorded::{RecordedStore, RecordedTranscripts};
use sim::seed::{rng, Draw};

/// The run every process deletes and recreates.
pub const TOMB_RUN: &str = "tomb-run";
/// The owner identity every process presents (stable across processes and restarts, as a
/// deployment-wide worker identity is).
pub const TOMB_OWNER: &str = "tomb-worker";

/// What the processes did, counted for the scenario's quorum.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TombActivity {
    /// Acquires that succeeded after at least one delete of the run had committed.
    pub recreations: u64,
    /// Probes with a lease granted before a delete that committed before the probe.
    pub cross_probes: u64,
    pub deletes: u64,
}

/// State shared by the processes and the supervisor of one run.
pub struct TombShared {
    pub seed: u64,
    pub ttl_ms: u64,
    pub stop: Cell<bool>,
    pub done: RefCell<Vec<bool>>,
    pub activity: Cell<TombActivity>,
    /// Unexpected store errors (neither a lease refusal, Busy nor the A5 guard).
    pub errors: RefCell<Vec<String>>,
}

impl TombShared {
    pub fn new(seed: u64, ttl_ms: u64, nodes: u32) -> TombShared {
        TombShared {
            seed,
            ttl_ms,
            stop: Cell::new(false),
            done: RefCell::new(vec![false; nodes as usize]),
            activity: Cell::new(TombActivity::default()),
            errors: RefCell::new(Vec::new()),
        }
    }

    fn count(&self, f: impl FnOnce(&mut TombActivity)) {
        let mut a = self.activity.get();
        f(&mut a);
        self.activity.set(a);
    }
}

/// A lease this process held, with the acquire call that granted it and the number of
/// deletes the process had seen committed at that moment.
#[derive(Clone)]
struct Held {
    lease: Lease,
    grant: usize,
    deletes_seen: u64,
}

/// How a call ended, from the protocol's point of view.
enum Answer<T> {
    Ok(T),
    /// A lease refusal or the A5 guard: an answer, not an error.
    Refused,
    /// Busy for too long, or an unexpected error (recorded).
    GaveUp,
}

/// One process.
pub struct Tenant {
    node: u32,
    store: RecordedStore,
    blobs: RecordedTranscripts,
    shared: Rc<TombShared>,
    rng: RefCell<ChaCha8Rng>,
    held: RefCell<Vec<Held>>,
}

impl Tenant {
    pub fn new(node: u32, incarnation: u32, store: RecordedStore, shared: Rc<TombShared>) -> Tenant {
        let blobs = store.transcripts();
        let rng = rng(shared.seed, "tomb-workload", u64::from(node) * 1000 + u64::from(incarnation));
        Tenant { node, store, blobs, shared, rng: RefCell::new(rng), held: RefCell::new(Vec::new()) }
    }

    fn unit(&self) -> f64 {
        self.rng.borrow_mut().unit()
    }

    fn pick(&self, n: usize) -> usize {
        (self.rng.borrow_mut().between(0, n.saturating_sub(1) as u64)) as usize
    }

    async fn sleep_ms(&self, ms: u64) {
        madsim::time::sleep(Duration::from_millis(ms.max(1))).await;
    }

    /// Retry Busy (bounded by 40 ttls of virtual time); lease refusals and the A5 guard
    /// are answers.
    async fn attempt<T, F, Fut>(&self, what: &str, mut op: F) -> Answer<T>
    where
        F: FnMut() -> Fut,
        Fut: std::future::Future<Output = Result<T, StoreError>>,
    {
        let started = sim::time::now_ns();
        let patience = self.shared.ttl_ms * 40 * 1_000_000;
        loop {
            match op().await {
                Ok(v) => return Answer::Ok(v),
                Err(StoreError::LeaseHeld { .. } | StoreError::JournalOrderViolation { .. }) => {
                    return Answer::Refused
                }
                Err(StoreError::Busy { .. }) => {
                    if sim::time::now_ns() - started >= patience {
                        return Answer::GaveUp;
                    }
                    let ms = 1 + (self.unit() * 3.0) as u64;
                    self.sleep_ms(ms).await;
                }
                Err(e) => {
                    self.shared.errors.borrow_mut().push(format!("n{} {what}: {e}", self.node));
                    return Answer::GaveUp;
                }
            }
        }
    }

    fn entry(seq: u64, tag: &str) -> JournalEntry {
        JournalEntry::new(seq, "tomb", "ok", json!({ "tomb": tag }))
    }

    async fn tail(&self) -> Option<u64> {
        match self.attempt("load", || self.store.load(TOMB_RUN)).await {
            Answer::Ok(v) => Some(v.iter().map(|e| e.seq.0).max().unwrap_or(0)),
            _ => None,
        }
    }

    /// Until the stop flag.
    pub async fn run(&self) {
        while !self.shared.stop.get() {
            if !self.held.borrow().is_empty() && self.unit() < 0.4 {
                self.zombie_probe().await;
            }
            self.tenure().await;
        }
    }

    async fn tenure(&self) {
        let lease = match self.store.acquire(TOMB_RUN, TOMB_OWNER).await {
            Ok(l) => l,
            Err(StoreError::LeaseHeld { .. } | StoreError::Busy { .. }) => {
                let ms = 3 + (self.unit() * 12.0) as u64;
                self.sleep_ms(ms).await;
                return;
            }
            Err(e) => {
                self.shared.errors.borrow_mut().push(format!("n{} acquire: {e}", self.node));
                self.sleep_ms(self.shared.ttl_ms).await;
                return;
            }
        };
        let Some(grant) = self.store.latest_grant(TOMB_RUN) else {
            return;
        };
        let deletes_seen = self.shared.activity.get().deletes;
        if deletes_seen > 0 {
            self.shared.count(|a| a.recreations += 1);
        }
        self.held.borrow_mut().push(Held { lease: lease.clone(), grant, deletes_seen });
        under_grant(grant, self.work(&lease)).await;
    }

    /// One tenure's work under its own lease, then how it ends.
    async fn work(&self, lease: &Lease) {
        let Some(tail) = self.tail().await else { return };
        let tag = format!("n{}-e{}-holder", self.node, lease.epoch);
        let marker = Self::entry(tail + 1, &tag);
        if !matches!(
            self.attempt("append", || self.store.append(TOMB_RUN, &marker, Some(lease))).await,
            Answer::Ok(())
        ) {
            return;
        }
        if self.unit() < 0.5 {
            let mut meta = RunMeta::new(TOMB_RUN, RunStatus::Running);
            meta.extra.insert("tomb".into(), json!(tag));
            if !matches!(
                self.attempt("put_meta", || self.store.put_meta(&meta, Some(lease))).await,
                Answer::Ok(())
            ) {
                return;
            }
        }
        if self.unit() < 0.5 {
            let r = format!("{TOMB_RUN}/blob");
            let bytes = tag.clone().into_bytes();
            if !matches!(
                self.attempt("blob_put", || self.blobs.put(&r, &bytes, Some(lease))).await,
                Answer::Ok(())
            ) {
                return;
            }
        }
        let roll = self.unit();
        if roll < 0.45 {
            // Release, then (usually) the host deletes the run without a lease.
            if !matches!(self.attempt("release", || self.store.release(lease)).await, Answer::Ok(())) {
                return;
            }
            if self.unit() < 0.8 {
                let r = self.attempt("delete", || self.store.delete(TOMB_RUN, None)).await;
                if matches!(r, Answer::Ok(())) {
                    self.shared.count(|a| a.deletes += 1);
                }
            }
        } else if roll < 0.7 {
            // Retention under the lease.
            let r = self.attempt("delete", || self.store.delete(TOMB_RUN, Some(lease))).await;
            if matches!(r, Answer::Ok(())) {
                self.shared.count(|a| a.deletes += 1);
            }
        } else {
            // The process stalls and its lease expires; another process may delete the run.
            self.sleep_ms(self.shared.ttl_ms * 12 / 10 + (self.unit() * 40.0) as u64).await;
            if self.unit() < 0.5 {
                let r = self.attempt("delete", || self.store.delete(TOMB_RUN, None)).await;
                if matches!(r, Answer::Ok(())) {
                    self.shared.count(|a| a.deletes += 1);
                }
            }
        }
    }

    /// Mutate under one of this process's old leases (one to three surfaces).
    async fn zombie_probe(&self) {
        let old = {
            let held = self.held.borrow();
            held[self.pick(held.len())].clone()
        };
        if self.shared.activity.get().deletes > old.deletes_seen {
            self.shared.count(|a| a.cross_probes += 1);
        }
        under_grant(old.grant, self.probe(&old.lease)).await;
    }

    async fn probe(&self, lease: &Lease) {
        let surfaces = 1 + self.pick(3);
        for _ in 0..surfaces {
            let tag = format!("n{}-e{}-zombie", self.node, lease.epoch);
            match self.pick(6) {
                0 => {
                    let Some(tail) = self.tail().await else { return };
                    let e = Self::entry(tail + 1, &tag);
                    self.attempt("append", || self.store.append(TOMB_RUN, &e, Some(lease))).await;
                }
                1 => {
                    self.attempt("renew", || self.store.renew(lease)).await;
                }
                2 => {
                    let mut meta = RunMeta::new(TOMB_RUN, RunStatus::Cancelled);
                    meta.extra.insert("tomb".into(), json!(tag));
                    self.attempt("put_meta", || self.store.put_meta(&meta, Some(lease))).await;
                }
                3 => {
                    let r = format!("{TOMB_RUN}/blob");
                    let bytes = tag.into_bytes();
                    self.attempt("blob_put", || self.blobs.put(&r, &bytes, Some(lease))).await;
                }
                4 => {
                    let r = self.attempt("delete", || self.store.delete(TOMB_RUN, Some(lease))).await;
                    if matches!(r, Answer::Ok(())) {
                        self.shared.count(|a| a.deletes += 1);
                    }
                }
                _ => {
                    self.attempt("release", || self.store.release(lease)).await;
                }
            }
        }
    }
}
