//! The store conformance suite, as library code any store can run: rulvar's
//! `journalStoreConformance`, `leasableStoreConformance`, `fencedWritesConformance` and
//! `fencedTranscriptsConformance`, plus the F3 interleave checks that pin the atomic
//! fence (check and mutation in one transaction).
//!
//! Promises:
//! - Every check is a named async function returning `Result<(), CheckFailure>`; a failure
//!   carries the check id and says what was expected and what happened. No check panics.
//! - Check ids are rulvar's, verbatim ([`ALL_CHECKS`]); [`run`] dispatches by id.
//! - A check gets an [`Opener`]: a fresh, empty backing (one database file) from which it
//!   opens as many store instances as it needs, each with the ttl and environment the
//!   check chooses. Time is a [`ManualClock`] owned by the check; staleness comes from
//!   release and reacquire, except in the ttl check and the interleave checks, which
//!   advance the clock. Nothing sleeps; everything runs on one thread, deterministically.

use std::cell::RefCell;
use std::fmt;
use std::path::PathBuf;
use std::rc::Rc;

use serde_json::Value;

use crate::env::{Env, ManualClock, ManualEnv};
use crate::error::StoreError;
use crate::memory::{InMemoryStore, InMemoryTranscriptStore};
use crate::profile::Profile;
use crate::spi::{LeasableStore, MetaLookup, TranscriptStore};
use crate::sqlite::{SqliteOptions, SqliteStore, SqliteTranscripts};
use crate::types::{JournalEntry, Lease};

pub mod fenced;
pub mod interleave;
pub mod journal;
pub mod killpoints;
pub mod leasable;
pub mod transcripts;

pub use fenced::FENCED_WRITES_CHECKS;
pub use interleave::INTERLEAVE_CHECKS;
pub use journal::JOURNAL_CHECKS;
pub use leasable::LEASABLE_CHECKS;
pub use transcripts::FENCED_TRANSCRIPTS_CHECKS;

/// Every check id, suite by suite.
pub const ALL_CHECKS: &[&str] = &[
    journal::A1_APPEND_ATOMICITY,
    journal::A2_TOTAL_ORDER,
    journal::A3_READ_YOUR_WRITES,
    journal::A4_OPAQUE_PAYLOAD,
    journal::A5_MONOTONIC_SEQ,
    journal::A5_STALE_TAIL_RACE,
    journal::META_SEPARATION,
    leasable::LEASE_EXCLUSIVE_ACQUIRE,
    leasable::FENCING_STALE_EPOCH,
    leasable::FENCING_EPOCH_TOMBSTONE,
    leasable::LEASE_RELEASE_FENCES,
    leasable::LEASE_TTL_AND_RENEW_CADENCE,
    fenced::FENCED_MARKER_DECLARED,
    fenced::FENCED_META_STALE_REJECTED,
    fenced::FENCED_DELETE_STALE_REJECTED,
    fenced::FENCED_TOMBSTONE_ZOMBIE_REJECTED,
    fenced::FENCED_RUN_MATCH,
    fenced::FENCED_UNLEASED_PASSTHROUGH,
    transcripts::FENCED_TRANSCRIPTS_MARKER_DECLARED,
    transcripts::FENCED_TRANSCRIPTS_STALE_PUT_REJECTED,
    transcripts::FENCED_TRANSCRIPTS_STALE_DELETE_REJECTED,
    transcripts::FENCED_TRANSCRIPTS_RUN_MATCH,
    transcripts::FENCED_TRANSCRIPTS_UNLEASED_PASSTHROUGH,
    interleave::FENCED_APPEND_TAKEOVER_WINDOW,
    interleave::FENCED_RELEASE_TAKEOVER_WINDOW,
    interleave::FENCED_RENEW_TAKEOVER_WINDOW,
    interleave::FENCED_BLOB_PUT_TAKEOVER_WINDOW,
];

/// A failed check: which one, and what was expected versus what happened.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CheckFailure {
    pub id: &'static str,
    pub message: String,
}

impl fmt::Display for CheckFailure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.id, self.message)
    }
}

impl std::error::Error for CheckFailure {}

/// One opened store instance: the journal side and its transcript side, sharing one
/// transactional domain (leases minted on the journal side guard the blobs).
#[derive(Clone)]
pub struct Instance<S, B> {
    pub store: S,
    pub blobs: B,
}

/// A fresh, empty backing. Each `open` is one more store instance over the same data (for
/// SQLite: a new connection to the same file), with its own ttl and environment.
#[allow(async_fn_in_trait)]
pub trait Opener {
    type Store: LeasableStore + MetaLookup + Clone + 'static;
    type Blobs: TranscriptStore + Clone + 'static;
    async fn open(
        &self,
        ttl_ms: i64,
        env: Rc<dyn Env>,
    ) -> Result<Instance<Self::Store, Self::Blobs>, StoreError>;
}

/// `SqliteStore` instances over one database file, all running one profile.
#[derive(Clone, Debug)]
pub struct SqliteOpener {
    pub path: PathBuf,
    pub profile: Profile,
}

impl SqliteOpener {
    pub fn new(path: impl Into<PathBuf>, profile: Profile) -> SqliteOpener {
        SqliteOpener { path: path.into(), profile }
    }
}

impl Opener for SqliteOpener {
    type Store = SqliteStore;
    type Blobs = SqliteTranscripts;
    async fn open(
        &self,
        ttl_ms: i64,
        env: Rc<dyn Env>,
    ) -> Result<Instance<SqliteStore, SqliteTranscripts>, StoreError> {
        let store =
            SqliteStore::open(SqliteOptions::new(&self.path).ttl_ms(ttl_ms).profile(self.profile), env)
                .await?;
        let blobs = store.transcripts();
        Ok(Instance { store, blobs })
    }
}

/// In-memory stores are process-local: the first `open` creates the store (with that
/// ttl and environment); every later `open` returns a handle to the same state, sharing
/// the first call's ttl and environment.
#[derive(Default)]
pub struct MemoryOpener {
    first: RefCell<Option<Instance<InMemoryStore, InMemoryTranscriptStore>>>,
}

impl MemoryOpener {
    pub fn new() -> MemoryOpener {
        MemoryOpener::default()
    }
}

impl Opener for MemoryOpener {
    type Store = InMemoryStore;
    type Blobs = InMemoryTranscriptStore;
    async fn open(
        &self,
        ttl_ms: i64,
        env: Rc<dyn Env>,
    ) -> Result<Instance<InMemoryStore, InMemoryTranscriptStore>, StoreError> {
        let mut first = self.first.borrow_mut();
        if let Some(existing) = first.as_ref() {
            return Ok(existing.clone());
        }
        let made =
            Instance { store: InMemoryStore::new(env, ttl_ms)?, blobs: InMemoryTranscriptStore::new() };
        *first = Some(made.clone());
        Ok(made)
    }
}

/// Run one check by id.
pub async fn run<O: Opener>(id: &str, opener: &O) -> Result<(), CheckFailure> {
    match id {
        journal::A1_APPEND_ATOMICITY => journal::a1_append_atomicity(opener).await,
        journal::A2_TOTAL_ORDER => journal::a2_total_order(opener).await,
        journal::A3_READ_YOUR_WRITES => journal::a3_read_your_writes(opener).await,
        journal::A4_OPAQUE_PAYLOAD => journal::a4_opaque_payload(opener).await,
        journal::A5_MONOTONIC_SEQ => journal::a5_monotonic_seq(opener).await,
        journal::A5_STALE_TAIL_RACE => journal::a5_stale_tail_race(opener).await,
        journal::META_SEPARATION => journal::meta_separation(opener).await,
        leasable::LEASE_EXCLUSIVE_ACQUIRE => leasable::lease_exclusive_acquire(opener).await,
        leasable::FENCING_STALE_EPOCH => leasable::fencing_stale_epoch(opener).await,
        leasable::FENCING_EPOCH_TOMBSTONE => leasable::fencing_epoch_tombstone(opener).await,
        leasable::LEASE_RELEASE_FENCES => leasable::lease_release_fences(opener).await,
        leasable::LEASE_TTL_AND_RENEW_CADENCE => leasable::lease_ttl_and_renew_cadence(opener).await,
        fenced::FENCED_MARKER_DECLARED => fenced::fenced_marker_declared(opener).await,
        fenced::FENCED_META_STALE_REJECTED => fenced::fenced_meta_stale_rejected(opener).await,
        fenced::FENCED_DELETE_STALE_REJECTED => fenced::fenced_delete_stale_rejected(opener).await,
        fenced::FENCED_TOMBSTONE_ZOMBIE_REJECTED => fenced::fenced_tombstone_zombie_rejected(opener).await,
        fenced::FENCED_RUN_MATCH => fenced::fenced_run_match(opener).await,
        fenced::FENCED_UNLEASED_PASSTHROUGH => fenced::fenced_unleased_passthrough(opener).await,
        transcripts::FENCED_TRANSCRIPTS_MARKER_DECLARED => {
            transcripts::fenced_transcripts_marker_declared(opener).await
        }
        transcripts::FENCED_TRANSCRIPTS_STALE_PUT_REJECTED => {
            transcripts::fenced_transcripts_stale_put_rejected(opener).await
        }
        transcripts::FENCED_TRANSCRIPTS_STALE_DELETE_REJECTED => {
            transcripts::fenced_transcripts_stale_delete_rejected(opener).await
        }
        transcripts::FENCED_TRANSCRIPTS_RUN_MATCH => transcripts::fenced_transcripts_run_match(opener).await,
        transcripts::FENCED_TRANSCRIPTS_UNLEASED_PASSTHROUGH => {
            transcripts::fenced_transcripts_unleased_passthrough(opener).await
        }
        interleave::FENCED_APPEND_TAKEOVER_WINDOW => interleave::fenced_append_takeover_window(opener).await,
        interleave::FENCED_RELEASE_TAKEOVER_WINDOW => {
            interleave::fenced_release_takeover_window(opener).await
        }
        interleave::FENCED_RENEW_TAKEOVER_WINDOW => interleave::fenced_renew_takeover_window(opener).await,
        interleave::FENCED_BLOB_PUT_TAKEOVER_WINDOW => {
            interleave::fenced_blob_put_takeover_window(opener).await
        }
        _ => Err(CheckFailure { id: "unknown", message: format!("no check has the id {id:?}") }),
    }
}

/// The lease ttl the mandatory checks open their stores with (rulvar's SqliteStore suite
/// uses 600000: long enough that nothing expires unless a check moves the clock).
pub const MANDATORY_TTL_MS: i64 = 600_000;

/// Where every check's manual clock starts (rulvar's fixtures use 1,000,000).
pub const CLOCK_START_MS: i64 = 1_000_000;

/// A manual environment over `clock`.
pub(crate) fn manual(clock: &ManualClock) -> Rc<dyn Env> {
    Rc::new(ManualEnv::new(clock.clone()))
}

/// Helpers bound to one check id, so every failure names its check.
#[derive(Clone, Copy)]
pub(crate) struct Ck(pub &'static str);

impl Ck {
    pub(crate) fn fail(self, message: impl Into<String>) -> CheckFailure {
        CheckFailure { id: self.0, message: message.into() }
    }

    /// `step` must succeed.
    pub(crate) fn ok<T>(self, r: Result<T, StoreError>, step: &str) -> Result<T, CheckFailure> {
        r.map_err(|e| self.fail(format!("{step}: expected success, got error {e:?}")))
    }

    /// `step` must fail (any error).
    pub(crate) fn rejects<T: fmt::Debug>(
        self,
        r: Result<T, StoreError>,
        step: &str,
    ) -> Result<StoreError, CheckFailure> {
        match r {
            Ok(v) => Err(self.fail(format!("{step}: expected a rejection, but it was accepted ({v:?})"))),
            Err(e) => Ok(e),
        }
    }

    /// `step` must fail with `LeaseHeld`.
    pub(crate) fn lease_held<T: fmt::Debug>(
        self,
        r: Result<T, StoreError>,
        step: &str,
    ) -> Result<(), CheckFailure> {
        match r {
            Err(StoreError::LeaseHeld { .. }) => Ok(()),
            Err(e) => Err(self.fail(format!("{step}: expected LeaseHeld, got error {e:?}"))),
            Ok(v) => Err(self.fail(format!("{step}: expected LeaseHeld, but it was accepted ({v:?})"))),
        }
    }

    /// `step` must fail with `JournalOrderViolation`.
    pub(crate) fn order_violation<T: fmt::Debug>(
        self,
        r: Result<T, StoreError>,
        step: &str,
    ) -> Result<(), CheckFailure> {
        match r {
            Err(StoreError::JournalOrderViolation { .. }) => Ok(()),
            Err(e) => Err(self.fail(format!("{step}: expected JournalOrderViolation, got error {e:?}"))),
            Ok(v) => {
                Err(self.fail(format!("{step}: expected JournalOrderViolation, but it was accepted ({v:?})")))
            }
        }
    }

    pub(crate) fn ensure(self, cond: bool, message: impl FnOnce() -> String) -> Result<(), CheckFailure> {
        if cond {
            Ok(())
        } else {
            Err(self.fail(message()))
        }
    }

    pub(crate) fn eq<T: PartialEq + fmt::Debug>(
        self,
        actual: &T,
        expected: &T,
        what: &str,
    ) -> Result<(), CheckFailure> {
        self.ensure(actual == expected, || format!("{what}: expected {expected:?}, got {actual:?}"))
    }

    /// Open one instance with a manual environment over `clock`.
    pub(crate) async fn open<O: Opener>(
        self,
        opener: &O,
        ttl_ms: i64,
        clock: &ManualClock,
    ) -> Result<Instance<O::Store, O::Blobs>, CheckFailure> {
        self.ok(opener.open(ttl_ms, manual(clock)).await, "opening a store instance")
    }

    /// Two instances over the same backing (A and B), the mandatory ttl, one shared clock.
    pub(crate) async fn pair<O: Opener>(self, opener: &O) -> Result<Pair<O>, CheckFailure> {
        let clock = ManualClock::starting_at(CLOCK_START_MS);
        let a = self.open(opener, MANDATORY_TTL_MS, &clock).await?;
        let b = self.open(opener, MANDATORY_TTL_MS, &clock).await?;
        Ok(Pair { clock, a, b })
    }
}

/// Instances A and B over one backing, and their shared clock.
pub(crate) struct Pair<O: Opener> {
    #[allow(dead_code)]
    pub clock: ManualClock,
    pub a: Instance<O::Store, O::Blobs>,
    pub b: Instance<O::Store, O::Blobs>,
}

/// A small journal entry tagged so a reader can tell which writer produced it.
pub(crate) fn entry(seq: u64, tag: &str) -> JournalEntry {
    JournalEntry::new(seq, "conformance.step", "ok", serde_json::json!({ "tag": tag }))
}

/// The seqs of a journal, in stored order.
pub(crate) fn seqs(entries: &[JournalEntry]) -> Vec<u64> {
    entries.iter().map(|e| e.seq.0).collect()
}

/// rulvar's `stableStringify`: JSON with every object's keys sorted, recursively.
pub fn canonical(value: &Value) -> String {
    fn sorted(v: &Value) -> Value {
        match v {
            Value::Object(map) => {
                let mut keys: Vec<&String> = map.keys().collect();
                keys.sort();
                Value::Object(keys.into_iter().map(|k| (k.clone(), sorted(&map[k]))).collect())
            }
            Value::Array(items) => Value::Array(items.iter().map(sorted).collect()),
            other => other.clone(),
        }
    }
    sorted(value).to_string()
}

/// The canonical form of an entry as stored.
pub(crate) fn canonical_entry(e: &JournalEntry) -> String {
    canonical(&serde_json::to_value(e).unwrap_or(Value::Null))
}

/// A lease as a failure message shows it.
pub(crate) fn describe(lease: &Lease) -> String {
    format!("{}@{} epoch {}", lease.owner, lease.run_id, lease.epoch)
}
