//! `store`: the system under test. A Rust re-creation of rulvar's store layer (the SPI,
//! `SqliteStore` with fenced writes and its transcript twin, the in-memory stores), the
//! named fault points it exposes, and the historical flaw profiles it can run.
//!
//! The fencing contract, in one paragraph: a worker owns a run through a lease
//! `{run_id, owner, epoch}`; the epoch is a fencing token that strictly increases per run id,
//! across release, expiry, and delete-then-recreate (the tombstone). A store that declares
//! `fenced_writes` refuses, with a typed `LeaseHeld` and no change at all, every mutation
//! (append, meta write, deletion, blob put and delete, renew, release) that carries a lease
//! which is not the run's current live holder, or which names another run; the check commits
//! atomically with the mutation. A mutation without a lease keeps single-writer semantics.
//!
//! This crate never depends on the simulator: time, sleeps and fault points come through
//! one injected [`env::Env`].

pub mod conformance;
pub mod engine;
pub mod env;
pub mod error;
pub mod fault;
pub mod memory;
pub mod profile;
pub mod spi;
pub mod sqlite;
pub mod sync;
pub mod types;

pub use env::{Crash, Env, FaultSite, LocalFuture, ManualClock, ManualEnv, SystemEnv};
pub use error::{LeaseRefusal, Result, StoreError};
pub use fault::{FaultPoint, Moment};
pub use memory::{InMemoryStore, InMemoryTranscriptStore};
pub use profile::{BootRetry, EngineThreading, FenceTxn, Profile, ProfileName, SettleFailurePolicy};
pub use spi::{JournalStore, LeasableStore, MetaLookup, TranscriptStore};
pub use sqlite::{SqliteOptions, SqliteStore, SqliteStoreRef, SqliteTranscripts, Synchronous};
pub use types::{Epoch, JournalEntry, Lease, RunFilter, RunMeta, RunStatus, Seq};
