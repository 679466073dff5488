//! `AnyStore`: the one store type the recorder wraps, either the in-process Rust
//! `SqliteStore` or a foreign store in a child process. Pure delegation; no behaviour.

use std::time::Duration;

use store::{
    JournalEntry, JournalStore, LeasableStore, Lease, MetaLookup, RunFilter, RunMeta, SqliteStore,
    SqliteTranscripts, StoreError, TranscriptStore,
};

use super::{ForeignStore, ForeignTranscripts};

/// The Rust store or a foreign one.
#[derive(Clone)]
pub enum AnyStore {
    Sqlite(SqliteStore),
    Foreign(ForeignStore),
}

/// The transcript side of an [`AnyStore`].
#[derive(Clone)]
pub enum AnyTranscripts {
    Sqlite(SqliteTranscripts),
    Foreign(ForeignTranscripts),
}

impl From<SqliteStore> for AnyStore {
    fn from(s: SqliteStore) -> AnyStore {
        AnyStore::Sqlite(s)
    }
}

impl From<ForeignStore> for AnyStore {
    fn from(s: ForeignStore) -> AnyStore {
        AnyStore::Foreign(s)
    }
}

impl AnyStore {
    pub fn transcripts(&self) -> AnyTranscripts {
        match self {
            AnyStore::Sqlite(s) => AnyTranscripts::Sqlite(s.transcripts()),
            AnyStore::Foreign(s) => AnyTranscripts::Foreign(s.transcripts()),
        }
    }
}

macro_rules! both {
    ($self:expr, $s:ident => $body:expr) => {
        match $self {
            AnyStore::Sqlite($s) => $body,
            AnyStore::Foreign($s) => $body,
        }
    };
}

macro_rules! both_t {
    ($self:expr, $s:ident => $body:expr) => {
        match $self {
            AnyTranscripts::Sqlite($s) => $body,
            AnyTranscripts::Foreign($s) => $body,
        }
    };
}

impl JournalStore for AnyStore {
    async fn append(
        &self,
        run_id: &str,
        entry: &JournalEntry,
        lease: Option<&Lease>,
    ) -> Result<(), StoreError> {
        both!(self, s => s.append(run_id, entry, lease).await)
    }
    async fn load(&self, run_id: &str) -> Result<Vec<JournalEntry>, StoreError> {
        both!(self, s => s.load(run_id).await)
    }
    async fn put_meta(&self, meta: &RunMeta, lease: Option<&Lease>) -> Result<(), StoreError> {
        both!(self, s => s.put_meta(meta, lease).await)
    }
    async fn list_runs(&self, filter: &RunFilter) -> Result<Vec<RunMeta>, StoreError> {
        both!(self, s => s.list_runs(filter).await)
    }
    async fn delete(&self, run_id: &str, lease: Option<&Lease>) -> Result<(), StoreError> {
        both!(self, s => JournalStore::delete(s, run_id, lease).await)
    }
    fn fenced_writes(&self) -> bool {
        both!(self, s => JournalStore::fenced_writes(s))
    }
}

impl MetaLookup for AnyStore {
    async fn get_meta(&self, run_id: &str) -> Result<Option<RunMeta>, StoreError> {
        both!(self, s => s.get_meta(run_id).await)
    }
}

impl LeasableStore for AnyStore {
    async fn acquire(&self, run_id: &str, owner: &str) -> Result<Lease, StoreError> {
        both!(self, s => s.acquire(run_id, owner).await)
    }
    async fn renew(&self, lease: &Lease) -> Result<(), StoreError> {
        both!(self, s => s.renew(lease).await)
    }
    async fn release(&self, lease: &Lease) -> Result<(), StoreError> {
        both!(self, s => s.release(lease).await)
    }
    fn lease_ttl(&self) -> Option<Duration> {
        both!(self, s => s.lease_ttl())
    }
}

impl TranscriptStore for AnyTranscripts {
    async fn put(&self, blob_ref: &str, bytes: &[u8], lease: Option<&Lease>) -> Result<(), StoreError> {
        both_t!(self, s => s.put(blob_ref, bytes, lease).await)
    }
    async fn get(&self, blob_ref: &str) -> Result<Option<Vec<u8>>, StoreError> {
        both_t!(self, s => s.get(blob_ref).await)
    }
    async fn list(&self, run_id: &str) -> Result<Vec<String>, StoreError> {
        both_t!(self, s => s.list(run_id).await)
    }
    async fn delete(&self, blob_ref: &str, lease: Option<&Lease>) -> Result<(), StoreError> {
        both_t!(self, s => TranscriptStore::delete(s, blob_ref, lease).await)
    }
    fn fenced_writes(&self) -> bool {
        both_t!(self, s => TranscriptStore::fenced_writes(s))
    }
}
