//! The store SPI: the Rust shape of rulvar's frozen store seams (`JournalStore`,
//! `MetaLookupStore`, `LeasableStore`, `TranscriptStore`).
//!
//! Every method is async and takes `&self`; implementations are single-threaded (a
//! simulated process, or one OS process) and need not be `Send`. Each mutation takes an
//! optional lease. Whether a store *enforces* it is the store's declared capability:
//! journal appends are fenced by every leasable store; `put_meta`, `delete` and the
//! transcript surfaces only by a store whose `fenced_writes()` is true.

use std::time::Duration;

use crate::error::Result;
use crate::types::{JournalEntry, Lease, RunFilter, RunMeta};

/// The journal and the meta catalog (rulvar's "five methods").
#[allow(async_fn_in_trait)]
pub trait JournalStore {
    /// Append one entry. A1 atomic, A2 ordered, A3 read-your-writes, A4 opaque, A5
    /// monotonic seq (an entry whose seq is not above the stored maximum is refused with
    /// `JournalOrderViolation` and never visible). A leasable store refuses a stale lease.
    async fn append(&self, run_id: &str, entry: &JournalEntry, lease: Option<&Lease>) -> Result<()>;
    /// The run's entries in append order; `[]` for an unknown run.
    async fn load(&self, run_id: &str) -> Result<Vec<JournalEntry>>;
    /// Whole-record upsert of the run's meta row.
    async fn put_meta(&self, meta: &RunMeta, lease: Option<&Lease>) -> Result<()>;
    /// Every meta row matching the filter (a `statuses` filter may over-match, never drop).
    async fn list_runs(&self, filter: &RunFilter) -> Result<Vec<RunMeta>>;
    /// Remove the run's entries, meta row and lease row; keep the epoch tombstone; never
    /// touch transcript blobs.
    async fn delete(&self, run_id: &str, lease: Option<&Lease>) -> Result<()>;
    /// The `fencedWrites` marker: `put_meta` and `delete` enforce a lease they are given.
    fn fenced_writes(&self) -> bool {
        false
    }
}

/// Point lookup of one run's meta.
#[allow(async_fn_in_trait)]
pub trait MetaLookup {
    /// The stored record, or `None` for a missing run (never an error for a missing run).
    async fn get_meta(&self, run_id: &str) -> Result<Option<RunMeta>>;
}

/// Leases with fencing epochs (rules L1-L6).
#[allow(async_fn_in_trait)]
pub trait LeasableStore: JournalStore {
    /// L1/L2: refuse a live lease (`LeaseHeld`, whoever asks); otherwise grant
    /// `epoch = high-water + 1` expiring at `now + ttl`.
    async fn acquire(&self, run_id: &str, owner: &str) -> Result<Lease>;
    /// L3: only the current live holder may renew; sets expiry to `now + ttl`.
    async fn renew(&self, lease: &Lease) -> Result<()>;
    /// L4: only the current live holder may release; deletes the lease row.
    async fn release(&self, lease: &Lease) -> Result<()>;
    /// L6: the store-configured ttl, if the store exposes it.
    fn lease_ttl(&self) -> Option<Duration>;
}

/// Opaque blobs under `<runId>/...` refs (turn checkpoints, transcripts, sources).
#[allow(async_fn_in_trait)]
pub trait TranscriptStore {
    /// T1: store the bytes; a fenced store verifies the lease of the ref's run.
    async fn put(&self, blob_ref: &str, bytes: &[u8], lease: Option<&Lease>) -> Result<()>;
    /// T1: the bytes (a copy), or `None` for a missing ref.
    async fn get(&self, blob_ref: &str) -> Result<Option<Vec<u8>>>;
    /// T3: the refs under `<runId>/`; a slashless ref is never listed.
    async fn list(&self, run_id: &str) -> Result<Vec<String>>;
    /// T2: remove one blob; a missing ref is a no-op (a fenced store still checks the lease).
    async fn delete(&self, blob_ref: &str, lease: Option<&Lease>) -> Result<()>;
    /// The `fencedWrites` marker of the transcript side.
    fn fenced_writes(&self) -> bool {
        false
    }
}
