//! `store`: the system under test, in two parts with one boundary between them.
//!
//! - **The store layer**: a Rust re-creation of rulvar's stores: the SPI ([`spi`]),
//!   `SqliteStore` with fenced writes and its transcript twin ([`sqlite`]), the in-memory
//!   stores ([`memory`]), the conformance checks ([`conformance`]), and its fault points
//!   (the `sqlite.*` group of [`fault`]).
//! - **The engine model** ([`engine`]): the part of rulvar that drives the stores (segments,
//!   settle, checkpoints, host deletion and pruning, the queue worker, the reconciler). It
//!   reaches the stores only through the SPI traits, the outside world only through
//!   [`engine::Effects`] (paid provider calls, tool side effects), and has its own fault
//!   points (the `engine.*` and `worker.*` group of [`fault`], between two durable writes).
//!   It is described in docs/engine-model.md.
//!
//! Both run the historical flaw profiles ([`profile`]): store switches and engine switches.
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
