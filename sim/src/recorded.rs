//! The recording wrapper: the same store SPI, every call noted in the history as an
//! invocation and a return (or `Unknown` when the node dies with it in flight).
//!
//! Actors (soak writers, engine segments, workers) talk to a `RecordedStore` exactly as
//! they would to the store itself; the wrapper adds no behaviour.

use std::future::Future;
use std::time::Duration;

use store::{
    JournalEntry, JournalStore, LeasableStore, Lease, MetaLookup, RunFilter, RunMeta, SqliteStore,
    StoreError, TranscriptStore,
};

use crate::foreign::{AnyStore, AnyTranscripts};

use crate::history::{Args, OpKind, Outcome, Read, Recorder, WithCall};
use crate::record_text::{entry_text, meta_text};

/// Marks a call `Unknown` if its future is dropped before it returns (the node died).
struct InFlight {
    rec: Recorder,
    id: usize,
    done: bool,
}

impl Drop for InFlight {
    fn drop(&mut self) {
        if !self.done {
            self.rec.unknown(self.id);
        }
    }
}

/// Who is calling: the node and its incarnation.
#[derive(Clone)]
pub struct Caller {
    pub rec: Recorder,
    pub node: u32,
    pub incarnation: u32,
}

impl Caller {
    /// Record one call around `fut`.
    #[allow(clippy::too_many_arguments)]
    pub async fn call<T, F>(
        &self,
        op: OpKind,
        run_id: &str,
        lease: Option<&Lease>,
        args: Args,
        fut: F,
        detail: impl FnOnce(&T) -> String,
        granted: impl FnOnce(&T) -> Option<Lease>,
    ) -> Result<T, StoreError>
    where
        F: Future<Output = Result<T, StoreError>>,
    {
        self.record(op, run_id, lease, args, fut, detail, granted, |_| None).await
    }

    /// Record one read around `fut`, keeping what it returned when it succeeded (reads carry
    /// no lease and grant none).
    pub async fn read<T, F>(
        &self,
        op: OpKind,
        run_id: &str,
        args: Args,
        fut: F,
        detail: impl FnOnce(&T) -> String,
        keep: impl FnOnce(&T) -> Read,
    ) -> Result<T, StoreError>
    where
        F: Future<Output = Result<T, StoreError>>,
    {
        self.record(op, run_id, None, args, fut, detail, none, |v| Some(keep(v))).await
    }

    /// Construct this node's `SqliteStore`, recorded as its `boot` call (the simulated and
    /// the real writers boot the same way).
    pub async fn boot(
        &self,
        options: store::SqliteOptions,
        env: std::rc::Rc<dyn store::Env>,
    ) -> Result<SqliteStore, StoreError> {
        let args = Args { ttl_ms: Some(options.ttl_ms), ..Args::default() };
        self.call(OpKind::Boot, "", None, args, SqliteStore::open(options, env), |_| String::new(), |_| None)
            .await
    }

    /// Start this node's foreign store process, recorded as its `boot` call, with the options
    /// the Rust store would be built with.
    pub async fn boot_foreign(
        &self,
        spec: std::sync::Arc<crate::foreign::ForeignSpec>,
        db: &std::path::Path,
        options: &store::SqliteOptions,
        env: std::rc::Rc<dyn store::Env>,
    ) -> Result<crate::foreign::driver::ForeignStore, StoreError> {
        let label = format!("node {} incarnation {}", self.node, self.incarnation);
        let opts = crate::foreign::driver::ForeignOptions::for_world(spec, db, options, label);
        let fut = crate::foreign::driver::ForeignStore::open(opts, env);
        let args = Args { ttl_ms: Some(options.ttl_ms), ..Args::default() };
        self.call(OpKind::Boot, "", None, args, fut, |_| String::new(), |_| None).await
    }

    /// The recording itself: invoke, await, keep the read, return (a dropped future leaves
    /// the call in flight, its outcome unknown).
    #[allow(clippy::too_many_arguments)]
    async fn record<T, F>(
        &self,
        op: OpKind,
        run_id: &str,
        lease: Option<&Lease>,
        args: Args,
        fut: F,
        detail: impl FnOnce(&T) -> String,
        granted: impl FnOnce(&T) -> Option<Lease>,
        read: impl FnOnce(&T) -> Option<Read>,
    ) -> Result<T, StoreError>
    where
        F: Future<Output = Result<T, StoreError>>,
    {
        let id = self.rec.invoke(self.node, self.incarnation, op, run_id, lease, args, self.rec.now());
        let mut guard = InFlight { rec: self.rec.clone(), id, done: false };
        let r = WithCall { id, inner: Box::pin(fut) }.await;
        let g = r.as_ref().ok().and_then(granted);
        if let Some(value) = r.as_ref().ok().and_then(read) {
            self.rec.read(id, value);
        }
        self.rec.ret(id, Outcome::from_result(&r, detail), g, self.rec.now());
        guard.done = true;
        r
    }
}

/// A recorded store (the Rust `SqliteStore` or a foreign one).
#[derive(Clone)]
pub struct RecordedStore {
    pub inner: AnyStore,
    pub caller: Caller,
}

/// A recorded transcript twin.
#[derive(Clone)]
pub struct RecordedTranscripts {
    pub inner: AnyTranscripts,
    pub caller: Caller,
}

impl RecordedStore {
    pub fn transcripts(&self) -> RecordedTranscripts {
        RecordedTranscripts { inner: self.inner.transcripts(), caller: self.caller.clone() }
    }

    /// The id of this process incarnation's latest successful acquire of `run_id`: the grant
    /// to attribute its lease-carrying calls to (`history::under_grant`).
    pub fn latest_grant(&self, run_id: &str) -> Option<usize> {
        self.caller.rec.latest_grant(self.caller.node, self.caller.incarnation, run_id)
    }
}

fn none<T>(_: &T) -> Option<Lease> {
    None
}
fn blank<T>(_: &T) -> String {
    String::new()
}

impl JournalStore for RecordedStore {
    async fn append(
        &self,
        run_id: &str,
        entry: &JournalEntry,
        lease: Option<&Lease>,
    ) -> Result<(), StoreError> {
        let args = Args { seq: Some(entry.seq.0), payload: Some(entry_text(entry)), ..Args::default() };
        let fut = self.inner.append(run_id, entry, lease);
        self.caller.call(OpKind::Append, run_id, lease, args, fut, blank, none).await
    }

    async fn load(&self, run_id: &str) -> Result<Vec<JournalEntry>, StoreError> {
        let fut = self.inner.load(run_id);
        self.caller
            .read(
                OpKind::Load,
                run_id,
                Args::default(),
                fut,
                |v: &Vec<JournalEntry>| format!("{} entries", v.len()),
                |v: &Vec<JournalEntry>| Read::Entries(v.clone()),
            )
            .await
    }

    async fn put_meta(&self, meta: &RunMeta, lease: Option<&Lease>) -> Result<(), StoreError> {
        let args = Args { payload: Some(meta_text(meta)), ..Args::default() };
        let fut = self.inner.put_meta(meta, lease);
        let detail = format!("status={}", meta.status);
        self.caller.call(OpKind::PutMeta, &meta.run_id, lease, args, fut, |_| detail, none).await
    }

    async fn list_runs(&self, filter: &RunFilter) -> Result<Vec<RunMeta>, StoreError> {
        let fut = self.inner.list_runs(filter);
        self.caller
            .read(
                OpKind::ListRuns,
                "",
                Args::default(),
                fut,
                |v: &Vec<RunMeta>| format!("{} runs", v.len()),
                |v: &Vec<RunMeta>| Read::Runs { filter: filter.clone(), metas: v.clone() },
            )
            .await
    }

    async fn delete(&self, run_id: &str, lease: Option<&Lease>) -> Result<(), StoreError> {
        let fut = self.inner.delete(run_id, lease);
        self.caller.call(OpKind::Delete, run_id, lease, Args::default(), fut, blank, none).await
    }

    fn fenced_writes(&self) -> bool {
        self.inner.fenced_writes()
    }
}

impl MetaLookup for RecordedStore {
    async fn get_meta(&self, run_id: &str) -> Result<Option<RunMeta>, StoreError> {
        let fut = self.inner.get_meta(run_id);
        self.caller
            .read(OpKind::GetMeta, run_id, Args::default(), fut, blank, |m: &Option<RunMeta>| {
                Read::Meta(m.clone())
            })
            .await
    }
}

impl LeasableStore for RecordedStore {
    async fn acquire(&self, run_id: &str, owner: &str) -> Result<Lease, StoreError> {
        let args = Args { owner: Some(owner.to_string()), ..Args::default() };
        let fut = self.inner.acquire(run_id, owner);
        self.caller
            .call(
                OpKind::Acquire,
                run_id,
                None,
                args,
                fut,
                |l: &Lease| format!("epoch={}", l.epoch),
                |l: &Lease| Some(l.clone()),
            )
            .await
    }

    async fn renew(&self, lease: &Lease) -> Result<(), StoreError> {
        let fut = self.inner.renew(lease);
        self.caller.call(OpKind::Renew, &lease.run_id, Some(lease), Args::default(), fut, blank, none).await
    }

    async fn release(&self, lease: &Lease) -> Result<(), StoreError> {
        let fut = self.inner.release(lease);
        self.caller.call(OpKind::Release, &lease.run_id, Some(lease), Args::default(), fut, blank, none).await
    }

    fn lease_ttl(&self) -> Option<Duration> {
        self.inner.lease_ttl()
    }
}

impl TranscriptStore for RecordedTranscripts {
    async fn put(&self, blob_ref: &str, bytes: &[u8], lease: Option<&Lease>) -> Result<(), StoreError> {
        let args =
            Args { blob_ref: Some(blob_ref.to_string()), bytes: Some(bytes.to_vec()), ..Args::default() };
        let fut = self.inner.put(blob_ref, bytes, lease);
        self.caller
            .call(OpKind::BlobPut, store::types::run_of_ref(blob_ref), lease, args, fut, blank, none)
            .await
    }

    async fn get(&self, blob_ref: &str) -> Result<Option<Vec<u8>>, StoreError> {
        let args = Args { blob_ref: Some(blob_ref.to_string()), ..Args::default() };
        let fut = self.inner.get(blob_ref);
        self.caller
            .read(
                OpKind::BlobGet,
                store::types::run_of_ref(blob_ref),
                args,
                fut,
                blank,
                |b: &Option<Vec<u8>>| Read::Blob(b.clone()),
            )
            .await
    }

    async fn list(&self, run_id: &str) -> Result<Vec<String>, StoreError> {
        let fut = self.inner.list(run_id);
        self.caller
            .read(
                OpKind::BlobList,
                run_id,
                Args::default(),
                fut,
                |v: &Vec<String>| format!("{} refs", v.len()),
                |v: &Vec<String>| Read::Refs(v.clone()),
            )
            .await
    }

    async fn delete(&self, blob_ref: &str, lease: Option<&Lease>) -> Result<(), StoreError> {
        let args = Args { blob_ref: Some(blob_ref.to_string()), ..Args::default() };
        let fut = self.inner.delete(blob_ref, lease);
        self.caller
            .call(OpKind::BlobDelete, store::types::run_of_ref(blob_ref), lease, args, fut, blank, none)
            .await
    }

    fn fenced_writes(&self) -> bool {
        self.inner.fenced_writes()
    }
}
