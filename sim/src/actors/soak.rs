//! A deterministic re-creation of rulvar's multi-process soak writer protocol
//! (`runSoakWriter`): tenures that start with a marker append, the op mix, the eight-surface
//! stale probe sweep with a fresh tail, victim deletion cycles, live cross-run probes, and
//! stalls past the ttl; plus the activity quorum (`DEFAULT_SOAK_QUORUM`) and the writers'
//! own reports, which the referee reads.
//!
//! Differences from rulvar, on purpose: the dice come from the node's own seeded stream,
//! and in the simulator a writer can be killed at any fault point and restarted (a new
//! incarnation starts a fresh protocol; its old lease becomes a zombie).
//!
//! fencesim additions (`Surfaces::All` only, dice from their own stream): after an accepted
//! op-mix append, half the time a live-lease order probe re-appends the tail seq (or the one
//! below it) and expects the A5 guard's `JournalOrderViolation`; the live cross-run probe
//! also tries append, put_meta, run delete and blob delete on `soak-other` under the live
//! lease (run mismatch expected); and after a completed victim cycle, half the time the
//! writer acquires the deleted victim's id again (recreating the run) and probes with the
//! lease of the incarnation it deleted: a leased delete, attributed to that earlier grant
//! (`history::under_grant`). The epoch tombstone makes the new grant's epoch higher and the
//! probe is refused; a store that forgets a run's epoch with the run grants the same epoch
//! again and the old lease passes (T). After one accepted op-mix blob put in four, the
//! writer lists the run's blobs mid-storm, half the time after putting the slashless ref
//! `soak-run` (stored, never listed: T3). rulvar's writer makes none of these.
//!
//! Runtime-agnostic: the writer never names a runtime. Its clock and sleeps come from the
//! store's [`Env`] (virtual time on madsim, the wall clock and `std::thread::sleep` in a
//! real process), its reports go to a [`SoakHost`] (the simulated world's shared state, or
//! a real process's JSON Lines report and stop file). The same writer therefore runs on
//! madsim in a simulation and under `futures::executor::block_on` in a real OS process
//! (`fencesim soak --real`, see `crate::real`).

use std::cell::{Cell, RefCell};
use std::rc::Rc;
use std::time::Duration;

use rand_chacha::ChaCha8Rng;
use serde::Serialize;
use serde_json::json;
use store::{
    Env, JournalEntry, JournalStore, LeasableStore, Lease, RunMeta, RunStatus, StoreError, TranscriptStore,
};

use crate::history::under_grant;
use crate::recorded::{RecordedStore, RecordedTranscripts};
use crate::seed::{rng, Draw};
use crate::verdict::Violation;

pub const SOAK_RUN: &str = "soak-run";
pub const SOAK_OTHER: &str = "soak-other";

/// One writer report event (rulvar's JSONL kinds).
#[derive(Clone, Debug, Serialize)]
pub struct SoakEvent {
    pub w: u32,
    pub kind: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub surface: Option<&'static str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub epoch: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub nonce: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

/// rulvar's DEFAULT_SOAK_QUORUM.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub struct Activity {
    pub epochs: u64,
    pub stale_rejects: u64,
    pub appends: u64,
    pub meta_writes: u64,
    pub blob_puts: u64,
    pub blob_deletes: u64,
    pub victim_cycles: u64,
    pub live_cross_rejects: u64,
    pub busy_retries: u64,
}

pub const DEFAULT_SOAK_QUORUM: Activity = Activity {
    epochs: 4,
    stale_rejects: 16,
    appends: 8,
    meta_writes: 5,
    blob_puts: 5,
    blob_deletes: 1,
    victim_cycles: 1,
    live_cross_rejects: 1,
    busy_retries: 0,
};

impl Activity {
    pub fn meets(&self, q: &Activity) -> bool {
        self.epochs >= q.epochs
            && self.stale_rejects >= q.stale_rejects
            && self.appends >= q.appends
            && self.meta_writes >= q.meta_writes
            && self.blob_puts >= q.blob_puts
            && self.blob_deletes >= q.blob_deletes
            && self.victim_cycles >= q.victim_cycles
            && self.live_cross_rejects >= q.live_cross_rejects
    }
}

/// State shared by the writers and the supervisor of one soak.
pub struct SoakShared {
    pub events: RefCell<Vec<SoakEvent>>,
    pub stop: Cell<bool>,
    /// Writers that finished their protocol (logged `done`), per node.
    pub done: RefCell<Vec<bool>>,
    pub seed: u64,
    pub ttl_ms: u64,
    /// The writers run the small workload ([`WriterSpec::small`]).
    pub small: bool,
}

impl SoakShared {
    pub fn new(seed: u64, ttl_ms: u64, nodes: u32, small: bool) -> SoakShared {
        SoakShared {
            events: RefCell::new(Vec::new()),
            stop: Cell::new(false),
            done: RefCell::new(vec![false; nodes as usize]),
            seed,
            ttl_ms,
            small,
        }
    }

    /// rulvar's `countSoakActivity` over the events so far.
    pub fn activity(&self) -> Activity {
        activity_of(&self.events.borrow())
    }
}

/// Where a writer reports and learns that the storm is over.
pub trait SoakHost {
    /// Append one report event.
    fn log(&self, event: SoakEvent);
    /// Whether the referee has called the storm off.
    fn stopped(&self) -> bool;
}

impl SoakHost for SoakShared {
    fn log(&self, event: SoakEvent) {
        self.events.borrow_mut().push(event);
    }
    fn stopped(&self) -> bool {
        self.stop.get()
    }
}

/// rulvar's `countSoakActivity`.
pub fn activity_of(events: &[SoakEvent]) -> Activity {
    let mut a = Activity::default();
    let mut epochs = std::collections::BTreeSet::new();
    for e in events {
        match (e.kind, e.surface) {
            ("grant", _) => {
                epochs.insert(e.epoch);
            }
            ("stale-reject", _) => a.stale_rejects += 1,
            ("accept", Some("marker" | "append")) => a.appends += 1,
            ("accept", Some("meta")) => a.meta_writes += 1,
            ("accept", Some("blob-put")) => a.blob_puts += 1,
            ("accept", Some(_)) => a.blob_deletes += 1,
            ("victim", _) => a.victim_cycles += 1,
            ("live-cross-reject", _) => a.live_cross_rejects += 1,
            ("busy", _) => a.busy_retries += 1,
            _ => {}
        }
    }
    a.epochs = epochs.len() as u64;
    a
}

enum Try<T> {
    Ok(T),
    Lease,
    Order,
}

/// A fatal writer error (rulvar rethrows it and the process exits non-zero).
pub struct Fatal(pub String);

/// Which surfaces a writer storms.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Surfaces {
    /// rulvar's full op mix and eight-probe stale sweep.
    All,
    /// Only the surfaces every profile fences (append, renew, release): what is left to
    /// find is the fence check's own atomicity (F3).
    LeaseCore,
}

impl Surfaces {
    /// `all` or `lease-core`.
    pub fn parse(text: &str) -> Result<Surfaces, String> {
        match text {
            "all" => Ok(Surfaces::All),
            "lease-core" => Ok(Surfaces::LeaseCore),
            other => Err(format!("unknown surfaces {other:?}; expected all or lease-core")),
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            Surfaces::All => "all",
            Surfaces::LeaseCore => "lease-core",
        }
    }

    /// rulvar's quorum; the lease-core variant counts only the surfaces it storms.
    pub fn quorum(self) -> Activity {
        match self {
            Surfaces::All => DEFAULT_SOAK_QUORUM,
            Surfaces::LeaseCore => {
                Activity { epochs: 4, stale_rejects: 16, appends: 8, ..Activity::default() }
            }
        }
    }
}

/// Whether a writer already reported something that fails the storm (the verdict cannot
/// change, so the referee may end the storm early).
pub fn ended_by_violation(events: &[SoakEvent]) -> bool {
    events.iter().any(|e| matches!(e.kind, "stale-accept" | "order-accept" | "fatal"))
}

/// The soak's own checks over the writers' reports: the quorum (unless a violation ended
/// the storm early) and every `stale-accept`, `order-accept`, `error` and `fatal` event.
/// `within` says what the cap was measured in, for the witness ("60000ms of virtual time").
pub fn referee(events: &[SoakEvent], quorum: &Activity, within: &str) -> Vec<Violation> {
    let mut out = Vec::new();
    let activity = activity_of(events);
    if !activity.meets(quorum) && !ended_by_violation(events) {
        out.push(Violation::new(
            "soak_quorum_reached",
            format!("activity quorum not reached within {within}: {activity:?}"),
        ));
    }
    for e in events {
        if matches!(e.kind, "stale-accept" | "order-accept" | "error" | "fatal") {
            out.push(Violation::new(
                "soak_referee",
                format!(
                    "writer w{} reported {} on {} (epoch {}){}",
                    e.w,
                    e.kind,
                    e.surface.unwrap_or("-"),
                    e.epoch.map_or("-".into(), |x| x.to_string()),
                    e.message.as_ref().map_or(String::new(), |m| format!(": {m}"))
                ),
            ));
        }
    }
    out
}

/// Who a writer is and what it storms.
#[derive(Clone, Copy, Debug)]
pub struct WriterSpec {
    /// Writer index (`soak-w<w>`); the node index in the simulator.
    pub w: u32,
    /// How many times this writer has been restarted (0 in a real process).
    pub incarnation: u32,
    /// The storm's seed: the writer's dice come from `(seed, "workload", w, incarnation)`.
    pub seed: u64,
    pub ttl_ms: u64,
    pub surfaces: Surfaces,
    /// The small configuration of `explore --exhaustive`: one or two operations per tenure
    /// and acquire polls a fifth to a half of the ttl apart (instead of 3 to 8 operations
    /// and 3 to 15 ms), so that a run reaches few enough fault points to enumerate every
    /// plan of two faults. The dice are drawn alike; only their scale differs.
    pub small: bool,
}

/// One writer.
pub struct Writer {
    pub surfaces: Surfaces,
    pub w: u32,
    pub owner: String,
    pub ttl_ms: u64,
    /// See [`WriterSpec::small`].
    pub small: bool,
    pub store: RecordedStore,
    pub blobs: RecordedTranscripts,
    /// Clock and sleeps (virtual on madsim, real in a real process).
    pub env: Rc<dyn Env>,
    pub host: Rc<dyn SoakHost>,
    pub rng: RefCell<ChaCha8Rng>,
    /// The fencesim probes' own dice, so rulvar's op mix draws the same numbers with or
    /// without them.
    pub probe_rng: RefCell<ChaCha8Rng>,
    /// The recreate probe's dice (a stream of its own: the other probes draw as before).
    pub recreate_rng: RefCell<ChaCha8Rng>,
    /// The listing probe's dice (a stream of its own, for the same reason).
    pub listing_rng: RefCell<ChaCha8Rng>,
}

impl Writer {
    pub fn new(spec: WriterSpec, store: RecordedStore, env: Rc<dyn Env>, host: Rc<dyn SoakHost>) -> Writer {
        let blobs = store.transcripts();
        let stream = u64::from(spec.w) * 1000 + u64::from(spec.incarnation);
        let probe_rng = rng(spec.seed, "soak-probes", stream);
        let recreate_rng = rng(spec.seed, "soak-recreate", stream);
        let listing_rng = rng(spec.seed, "soak-listing", stream);
        let rng = rng(spec.seed, "workload", stream);
        Writer {
            surfaces: spec.surfaces,
            w: spec.w,
            owner: format!("soak-w{}", spec.w),
            ttl_ms: spec.ttl_ms,
            small: spec.small,
            store,
            blobs,
            env,
            host,
            rng: RefCell::new(rng),
            probe_rng: RefCell::new(probe_rng),
            recreate_rng: RefCell::new(recreate_rng),
            listing_rng: RefCell::new(listing_rng),
        }
    }

    fn log(
        &self,
        kind: &'static str,
        surface: Option<&'static str>,
        epoch: Option<u64>,
        nonce: Option<String>,
    ) {
        self.host.log(SoakEvent { w: self.w, kind, surface, epoch, nonce, message: None });
    }

    fn log_msg(&self, kind: &'static str, surface: Option<&'static str>, message: String) {
        self.host.log(SoakEvent {
            w: self.w,
            kind,
            surface,
            epoch: None,
            nonce: None,
            message: Some(message),
        });
    }

    fn unit(&self) -> f64 {
        self.rng.borrow_mut().unit()
    }

    async fn sleep_ms(&self, ms: u64) {
        self.env.sleep(Duration::from_millis(ms.max(1))).await;
    }

    /// rulvar's `attempt`: busy is retried, lease and order are answers. rulvar bounds the
    /// retries at 500 rounds of 1-3 ms; here the simulator can stall a lock holder past the
    /// ttl several times inside one transaction, so the bound is 500 rounds AND at least
    /// 40 ttls of virtual time (a writer starved that long is a real liveness failure).
    async fn attempt<T, F, Fut>(&self, surface: &'static str, mut op: F) -> Result<Try<T>, Fatal>
    where
        F: FnMut() -> Fut,
        Fut: std::future::Future<Output = Result<T, StoreError>>,
    {
        let started = self.env.monotonic();
        let patience = Duration::from_millis(self.ttl_ms * 40);
        let mut round = 0u32;
        while round < 500 || self.env.monotonic().saturating_sub(started) < patience {
            round += 1;
            match op().await {
                Ok(v) => return Ok(Try::Ok(v)),
                Err(StoreError::LeaseHeld { .. }) => return Ok(Try::Lease),
                Err(StoreError::JournalOrderViolation { .. }) => return Ok(Try::Order),
                Err(StoreError::Busy { .. }) => {
                    self.log("busy", Some(surface), None, None);
                    let ms = 1 + (self.unit() * 3.0) as u64;
                    self.sleep_ms(ms).await;
                }
                Err(e) => {
                    self.log_msg("error", Some(surface), e.to_string());
                    return Err(Fatal(format!("{surface}: {e}")));
                }
            }
        }
        self.log_msg("error", Some(surface), format!("busy for {round} rounds"));
        Err(Fatal(format!("{surface}: busy for {round} rounds")))
    }

    async fn tail_seq(&self) -> Result<u64, Fatal> {
        match self.attempt("load", || self.store.load(SOAK_RUN)).await? {
            Try::Ok(entries) => Ok(entries.iter().map(|e| e.seq.0).max().unwrap_or(0)),
            _ => Err(Fatal("load refused".into())),
        }
    }

    fn entry(seq: u64, nonce: &str, epoch: u64) -> JournalEntry {
        JournalEntry::new(seq, "soak", "ok", json!({ "soak": { "nonce": nonce, "epoch": epoch } }))
    }

    /// The whole protocol until the stop flag; a fatal error ends it early.
    pub async fn run(&self) -> Result<(), Fatal> {
        while !self.host.stopped() {
            self.tenure().await?;
        }
        self.log("done", None, None, None);
        Ok(())
    }

    async fn tenure(&self) -> Result<(), Fatal> {
        let lease = match self.store.acquire(SOAK_RUN, &self.owner).await {
            Ok(l) => l,
            Err(StoreError::LeaseHeld { .. } | StoreError::Busy { .. }) => {
                let u = self.unit();
                let ms = if self.small {
                    self.ttl_ms / 5 + (u * (self.ttl_ms * 3 / 10) as f64) as u64
                } else {
                    3 + (u * 12.0) as u64
                };
                self.sleep_ms(ms).await;
                return Ok(());
            }
            Err(e) => {
                self.log_msg("fatal", Some("acquire"), e.to_string());
                return Err(Fatal(format!("acquire: {e}")));
            }
        };
        let epoch = lease.epoch.0;
        self.log("grant", None, Some(epoch), None);
        let mut tail = self.tail_seq().await?;
        let mut counter = 0u64;
        let nonce = |c: u64| format!("w{}-e{epoch}-c{c}", self.w);

        let n = nonce(counter);
        let marker = Self::entry(tail + 1, &n, epoch);
        match self.attempt("marker", || self.store.append(SOAK_RUN, &marker, Some(&lease))).await? {
            Try::Ok(()) => {
                self.log("accept", Some("marker"), Some(epoch), Some(n));
                counter += 1;
                tail += 1;
            }
            Try::Lease => {
                self.log("fence-kick", Some("marker"), Some(epoch), None);
                return self.stale_sweep(&lease).await;
            }
            Try::Order => {
                self.log_msg("error", Some("marker"), "JournalOrderViolation under a live lease".into());
                return Ok(());
            }
        }

        let u = self.unit();
        let ops = if self.small { 1 + (u * 2.0) as u64 } else { 3 + (u * 6.0) as u64 };
        let mut alive = true;
        let mut victims = 0u64;
        for _ in 0..ops {
            if !alive || self.host.stopped() {
                break;
            }
            let mut roll = self.unit();
            if self.surfaces == Surfaces::LeaseCore {
                // append 60%, renew 40%
                roll = if roll < 0.6 { 0.0 } else { 0.9 };
            }
            let n = nonce(counter);
            if roll < 0.30 {
                let entry = Self::entry(tail + 1, &n, epoch);
                match self.attempt("append", || self.store.append(SOAK_RUN, &entry, Some(&lease))).await? {
                    Try::Ok(()) => {
                        self.log("accept", Some("append"), Some(epoch), Some(n));
                        counter += 1;
                        tail += 1;
                        if self.surfaces == Surfaces::All {
                            alive = self.order_probe(&lease, tail).await?;
                        }
                    }
                    Try::Lease => {
                        self.log("fence-kick", Some("append"), Some(epoch), None);
                        alive = false;
                    }
                    Try::Order => {
                        self.log_msg(
                            "error",
                            Some("append"),
                            "JournalOrderViolation under a live lease".into(),
                        );
                        alive = false;
                    }
                }
            } else if roll < 0.50 {
                let mut meta = RunMeta::new(SOAK_RUN, RunStatus::Running);
                meta.updated_at = Some(format!("soak-{n}"));
                meta.extra.insert("soak".into(), json!({ "nonce": n }));
                match self.attempt("meta", || self.store.put_meta(&meta, Some(&lease))).await? {
                    Try::Ok(()) => {
                        self.log("accept", Some("meta"), Some(epoch), Some(n));
                        counter += 1;
                    }
                    _ => {
                        self.log("fence-kick", Some("meta"), Some(epoch), None);
                        alive = false;
                    }
                }
            } else if roll < 0.65 {
                let r = format!("{SOAK_RUN}/blob-{}", (self.unit() * 4.0) as u64);
                let bytes = json!({ "soak": { "nonce": n } }).to_string().into_bytes();
                match self.attempt("blob-put", || self.blobs.put(&r, &bytes, Some(&lease))).await? {
                    Try::Ok(()) => {
                        self.log("accept", Some("blob-put"), Some(epoch), Some(n.clone()));
                        counter += 1;
                        if self.surfaces == Surfaces::All {
                            alive = self.listing_probe(&lease, &n).await?;
                        }
                    }
                    _ => {
                        self.log("fence-kick", Some("blob-put"), Some(epoch), None);
                        alive = false;
                    }
                }
            } else if roll < 0.75 {
                let r = format!("{SOAK_RUN}/blob-{}", (self.unit() * 4.0) as u64);
                match self.attempt("blob-delete", || self.blobs.delete(&r, Some(&lease))).await? {
                    Try::Ok(()) => {
                        self.log("accept", Some("blob-delete"), Some(epoch), Some(n));
                        counter += 1;
                    }
                    _ => {
                        self.log("fence-kick", Some("blob-delete"), Some(epoch), None);
                        alive = false;
                    }
                }
            } else if roll < 0.85 {
                let vid = format!("victim-w{}-e{epoch}-{victims}", self.w);
                victims += 1;
                match self.victim_cycle(&vid).await? {
                    None => self.log("victim", None, Some(epoch), Some(vid)),
                    Some(true) => {
                        self.log("fence-kick", Some("victim"), Some(epoch), None);
                        alive = false;
                    }
                    Some(false) => self.log_msg("victim-abandoned", Some("victim"), vid),
                }
            } else if roll < 0.93 {
                match self.attempt("renew", || self.store.renew(&lease)).await? {
                    Try::Ok(()) => self.log("renewed", None, Some(epoch), None),
                    _ => {
                        self.log("fence-kick", Some("renew"), Some(epoch), None);
                        alive = false;
                    }
                }
            } else {
                let r = format!("{SOAK_OTHER}/blob");
                let bytes = json!({ "soak": { "nonce": n } }).to_string().into_bytes();
                match self.attempt("cross-run", || self.blobs.put(&r, &bytes, Some(&lease))).await? {
                    Try::Ok(()) => self.log("stale-accept", Some("cross-run"), Some(epoch), Some(n.clone())),
                    _ => self.log("live-cross-reject", None, Some(epoch), None),
                }
                if self.surfaces == Surfaces::All {
                    self.cross_run_probes(&lease, &n).await?;
                }
            }
        }

        if !alive {
            return self.stale_sweep(&lease).await;
        }
        if self.unit() < 0.5 {
            self.log("stall", None, Some(epoch), None);
            self.sleep_ms((self.ttl_ms * 14).div_ceil(10)).await;
            return self.stale_sweep(&lease).await;
        }
        match self.attempt("release", || self.store.release(&lease)).await? {
            Try::Ok(()) => self.log("released", None, Some(epoch), None),
            _ => {
                self.log("fence-kick", Some("release"), Some(epoch), None);
                return self.stale_sweep(&lease).await;
            }
        }
        Ok(())
    }

    /// fencesim addition: one append in eight, re-append at or below the tail this live lease
    /// just wrote (the tail seq three times in four, else the one below it, when there is one) and expect
    /// the A5 guard to refuse it. An accepted probe is reported (`order-accept`); the journal
    /// then holds a non-increasing seq for `journal_equals_serial_history`. Returns whether
    /// the lease is still alive.
    async fn order_probe(&self, lease: &Lease, tail: u64) -> Result<bool, Fatal> {
        let roll = self.probe_rng.borrow_mut().unit();
        if roll >= 0.125 {
            return Ok(true);
        }
        let epoch = lease.epoch.0;
        let seq = if roll < 0.09375 || tail < 2 { tail } else { tail - 1 };
        let nonce = format!("order-w{}-e{epoch}-s{seq}", self.w);
        let entry = Self::entry(seq, &nonce, epoch);
        match self.attempt("order-probe", || self.store.append(SOAK_RUN, &entry, Some(lease))).await? {
            Try::Order => self.log("order-reject", Some("append"), Some(epoch), None),
            Try::Ok(()) => self.log("order-accept", Some("append"), Some(epoch), Some(nonce)),
            Try::Lease => {
                self.log("fence-kick", Some("order-probe"), Some(epoch), None);
                return Ok(false);
            }
        }
        Ok(true)
    }

    /// fencesim addition: one accepted op-mix blob put in four, list the run's blobs (T3, a
    /// read `reads_see_serial_history` judges against its own model); half of those first
    /// put the slashless ref `soak-run` under the live lease (legal, fenced on the run it
    /// names, stored but never listed), as rulvar's sqlite unit test does. rulvar's soak
    /// compares the listing once, at the end; this one lists mid-storm, between the other
    /// writers' puts and deletes. Returns whether the lease is still alive.
    async fn listing_probe(&self, lease: &Lease, nonce: &str) -> Result<bool, Fatal> {
        let roll = self.listing_rng.borrow_mut().unit();
        if roll >= 0.25 {
            return Ok(true);
        }
        let epoch = lease.epoch.0;
        if roll < 0.125 {
            let bytes = json!({ "soak": { "slashless": nonce } }).to_string().into_bytes();
            match self.attempt("blob-put", || self.blobs.put(SOAK_RUN, &bytes, Some(lease))).await? {
                Try::Ok(()) => self.log("slashless-put", Some("blob-put"), Some(epoch), None),
                _ => {
                    self.log("fence-kick", Some("blob-put"), Some(epoch), None);
                    return Ok(false);
                }
            }
        }
        let refs = match self.attempt("blob-list", || self.blobs.list(SOAK_RUN)).await? {
            Try::Ok(refs) => refs,
            _ => return Ok(true),
        };
        self.log_msg("listed", Some("blob-list"), format!("{} refs", refs.len()));
        Ok(true)
    }

    /// fencesim addition: after rulvar's cross-run blob put, one of the other cross-run
    /// surfaces (drawn from the probe stream) under the same live lease of `soak-run`,
    /// expected to be refused by the run-match rule before it touches `soak-other`. An
    /// accepted one is reported (`stale-accept`).
    async fn cross_run_probes(&self, lease: &Lease, nonce: &str) -> Result<(), Fatal> {
        let epoch = lease.epoch.0;
        let all: [&'static str; 4] =
            ["cross-run-append", "cross-run-meta", "cross-run-delete", "cross-run-blob-delete"];
        let pick = (self.probe_rng.borrow_mut().unit() * 4.0) as usize;
        for surface in [all[pick.min(3)]] {
            let r = match surface {
                "cross-run-append" => {
                    let entry = Self::entry(1, nonce, epoch);
                    self.attempt(surface, || self.store.append(SOAK_OTHER, &entry, Some(lease))).await?
                }
                "cross-run-meta" => {
                    let mut meta = RunMeta::new(SOAK_OTHER, RunStatus::Running);
                    meta.extra.insert("soak".into(), json!({ "nonce": nonce }));
                    self.attempt(surface, || self.store.put_meta(&meta, Some(lease))).await?
                }
                "cross-run-delete" => {
                    self.attempt(surface, || self.store.delete(SOAK_OTHER, Some(lease))).await?
                }
                _ => {
                    let r = format!("{SOAK_OTHER}/blob");
                    self.attempt(surface, || self.blobs.delete(&r, Some(lease))).await?
                }
            };
            match r {
                Try::Ok(()) => self.log("stale-accept", Some(surface), Some(epoch), Some(nonce.to_string())),
                Try::Lease => self.log("live-cross-reject", Some(surface), Some(epoch), None),
                Try::Order => self.log_msg(
                    "error",
                    Some(surface),
                    "JournalOrderViolation where the run-match rule should reject first".into(),
                ),
            }
        }
        Ok(())
    }

    /// `None` = cycle completed; `Some(true)` = refused by a lease; `Some(false)` = abandoned.
    async fn victim_cycle(&self, vid: &str) -> Result<Option<bool>, Fatal> {
        let vl = match self.store.acquire(vid, &self.owner).await {
            Ok(l) => l,
            Err(StoreError::LeaseHeld { .. }) => return Ok(Some(true)),
            Err(_) => return Ok(Some(false)),
        };
        let grant = self.store.latest_grant(vid);
        let blob = format!("{vid}/blob");
        let first = Self::entry(1, vid, vl.epoch.0);
        let steps: [&'static str; 5] = ["append", "meta", "blob-put", "blob-delete", "run-delete"];
        for step in steps {
            let r = match step {
                "append" => self.attempt(step, || self.store.append(vid, &first, Some(&vl))).await?,
                "meta" => {
                    let meta = RunMeta::new(vid, RunStatus::Running);
                    self.attempt(step, || self.store.put_meta(&meta, Some(&vl))).await?
                }
                "blob-put" => self.attempt(step, || self.blobs.put(&blob, b"victim", Some(&vl))).await?,
                "blob-delete" => self.attempt(step, || self.blobs.delete(&blob, Some(&vl))).await?,
                _ => self.attempt(step, || self.store.delete(vid, Some(&vl))).await?,
            };
            match r {
                Try::Ok(()) => {}
                Try::Lease => return Ok(Some(true)),
                Try::Order => return Ok(Some(false)),
            }
        }
        if let Some(grant) = grant {
            self.recreate_probe(vid, &vl, grant).await?;
        }
        Ok(None)
    }

    /// fencesim addition (see the module header): recreate the deleted victim `vid` and probe
    /// with `old`, the lease of its deleted incarnation (granted by acquire call `grant`): a
    /// leased delete. Refused under the epoch tombstone; the recreated run is then deleted
    /// under its own lease, as the victim was.
    async fn recreate_probe(&self, vid: &str, old: &Lease, grant: usize) -> Result<(), Fatal> {
        if self.surfaces != Surfaces::All || self.recreate_rng.borrow_mut().unit() >= 0.5 {
            return Ok(());
        }
        let Ok(fresh) = self.store.acquire(vid, &self.owner).await else { return Ok(()) };
        let epoch = old.epoch.0;
        let probe =
            under_grant(grant, self.attempt("run-delete", || self.store.delete(vid, Some(old)))).await?;
        match probe {
            Try::Ok(()) => {
                // The old lease deleted the recreated run: nothing left to clean up.
                self.log("stale-accept", Some("run-delete"), Some(epoch), Some(vid.to_string()));
                return Ok(());
            }
            Try::Lease => self.log("stale-reject", Some("run-delete"), Some(epoch), None),
            Try::Order => self.log_msg(
                "error",
                Some("run-delete"),
                "JournalOrderViolation where the fence should reject first".into(),
            ),
        }
        self.attempt("run-delete", || self.store.delete(vid, Some(&fresh))).await?;
        Ok(())
    }

    /// The eight probes with the dead lease, re-reading the tail first so the A5 guard
    /// cannot mask a fencing hole.
    async fn stale_sweep(&self, lease: &Lease) -> Result<(), Fatal> {
        let epoch = lease.epoch.0;
        let nonce = format!("stale-w{}-e{epoch}", self.w);
        let blob0 = format!("{SOAK_RUN}/blob-0");
        let other = format!("{SOAK_OTHER}/blob");
        let surfaces: [&'static str; 8] =
            ["append", "meta", "blob-put", "blob-delete", "run-delete", "renew", "cross-run", "release"];
        for surface in surfaces {
            if self.surfaces == Surfaces::LeaseCore && !matches!(surface, "append" | "renew" | "release") {
                continue;
            }
            let r = match surface {
                "append" => {
                    let entry = Self::entry(self.tail_seq().await? + 1, &nonce, epoch);
                    self.attempt(surface, || self.store.append(SOAK_RUN, &entry, Some(lease))).await?
                }
                "meta" => {
                    let mut meta = RunMeta::new(SOAK_RUN, RunStatus::Cancelled);
                    meta.extra.insert("soak".into(), json!({ "nonce": nonce }));
                    self.attempt(surface, || self.store.put_meta(&meta, Some(lease))).await?
                }
                "blob-put" => {
                    let bytes = json!({ "soak": { "nonce": nonce } }).to_string().into_bytes();
                    self.attempt(surface, || self.blobs.put(&blob0, &bytes, Some(lease))).await?
                }
                "blob-delete" => self.attempt(surface, || self.blobs.delete(&blob0, Some(lease))).await?,
                "run-delete" => self.attempt(surface, || self.store.delete(SOAK_RUN, Some(lease))).await?,
                "renew" => self.attempt(surface, || self.store.renew(lease)).await?,
                "cross-run" => {
                    let bytes = json!({ "soak": { "nonce": nonce } }).to_string().into_bytes();
                    self.attempt(surface, || self.blobs.put(&other, &bytes, Some(lease))).await?
                }
                _ => self.attempt(surface, || self.store.release(lease)).await?,
            };
            match r {
                Try::Ok(()) => self.log("stale-accept", Some(surface), Some(epoch), Some(nonce.clone())),
                Try::Lease => self.log("stale-reject", Some(surface), Some(epoch), None),
                Try::Order => self.log_msg(
                    "error",
                    Some(surface),
                    "JournalOrderViolation where the fence should reject first".into(),
                ),
            }
        }
        Ok(())
    }
}
