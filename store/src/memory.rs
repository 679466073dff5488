//! The in-memory store and in-memory transcript store: process-local, with rulvar's
//! single-writer semantics.
//!
//! Leases exist (acquire, renew, release, the epoch tombstone) and journal appends are
//! fenced (L5), because the engine model needs a leasable store to run against in unit
//! tests. `put_meta`, `delete` and the transcript surfaces ignore a lease: there is no
//! `fenced_writes` marker, exactly like rulvar's in-memory and file stores. Nothing here is
//! shared across processes, and every call completes without yielding (A1 holds trivially).

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::rc::Rc;
use std::time::Duration;

use crate::env::Env;
use crate::error::{LeaseRefusal, Result, StoreError};
use crate::spi::{JournalStore, LeasableStore, MetaLookup, TranscriptStore};
use crate::sqlite::validate_ttl_ms;
use crate::types::{
    run_of_ref, validate_owner, validate_ref, validate_run_id, Epoch, JournalEntry, Lease, RunFilter, RunMeta,
};

#[derive(Default)]
struct State {
    /// Stored as JSON text, as rulvar deep-copies through JSON.
    entries: BTreeMap<String, Vec<String>>,
    meta: BTreeMap<String, String>,
    leases: BTreeMap<String, (String, Epoch, i64)>,
    epochs: BTreeMap<String, Epoch>,
}

/// Process-local journal, meta and leases.
#[derive(Clone)]
pub struct InMemoryStore {
    state: Rc<RefCell<State>>,
    env: Rc<dyn Env>,
    ttl_ms: i64,
}

impl InMemoryStore {
    pub fn new(env: Rc<dyn Env>, ttl_ms: i64) -> Result<InMemoryStore> {
        validate_ttl_ms(ttl_ms)?;
        Ok(InMemoryStore { state: Rc::default(), env, ttl_ms })
    }

    fn check_fence(&self, st: &State, lease: &Lease, run_id: &str) -> Result<()> {
        if lease.run_id != run_id {
            return Err(StoreError::lease(run_id, LeaseRefusal::RunMismatch));
        }
        match st.leases.get(&lease.run_id) {
            None => Err(StoreError::lease(run_id, LeaseRefusal::NotHeld)),
            Some((_, e, _)) if *e != lease.epoch => Err(StoreError::lease(run_id, LeaseRefusal::StaleEpoch)),
            Some((o, _, _)) if *o != lease.owner => {
                Err(StoreError::lease(run_id, LeaseRefusal::ForeignOwner))
            }
            Some((_, _, exp)) if *exp <= self.env.now_ms() => {
                Err(StoreError::lease(run_id, LeaseRefusal::Expired))
            }
            Some(_) => Ok(()),
        }
    }
}

impl JournalStore for InMemoryStore {
    async fn append(&self, run_id: &str, entry: &JournalEntry, lease: Option<&Lease>) -> Result<()> {
        validate_run_id(run_id)?;
        entry.validate()?;
        let mut st = self.state.borrow_mut();
        if let Some(l) = lease {
            self.check_fence(&st, l, run_id)?;
        }
        let journal = st.entries.entry(run_id.to_string()).or_default();
        // A5 against the last entry (rulvar's in-memory rule).
        if let Some(last) = journal.last() {
            let last = JournalEntry::from_json(last)?;
            if entry.seq <= last.seq {
                return Err(StoreError::JournalOrderViolation {
                    run_id: run_id.to_string(),
                    seq: entry.seq.0,
                });
            }
        }
        journal.push(entry.to_json());
        Ok(())
    }

    async fn load(&self, run_id: &str) -> Result<Vec<JournalEntry>> {
        validate_run_id(run_id)?;
        let st = self.state.borrow();
        st.entries
            .get(run_id)
            .map_or(Ok(Vec::new()), |j| j.iter().map(|t| JournalEntry::from_json(t)).collect())
    }

    async fn put_meta(&self, meta: &RunMeta, _lease: Option<&Lease>) -> Result<()> {
        meta.validate()?;
        self.state.borrow_mut().meta.insert(meta.run_id.clone(), meta.to_json());
        Ok(())
    }

    async fn list_runs(&self, filter: &RunFilter) -> Result<Vec<RunMeta>> {
        let st = self.state.borrow();
        let mut out = Vec::new();
        for text in st.meta.values() {
            let meta = RunMeta::from_json(text)?;
            if filter.matches(&meta) {
                out.push(meta);
            }
        }
        Ok(out)
    }

    async fn delete(&self, run_id: &str, _lease: Option<&Lease>) -> Result<()> {
        validate_run_id(run_id)?;
        let mut st = self.state.borrow_mut();
        st.entries.remove(run_id);
        st.meta.remove(run_id);
        st.leases.remove(run_id);
        Ok(())
    }
}

impl MetaLookup for InMemoryStore {
    async fn get_meta(&self, run_id: &str) -> Result<Option<RunMeta>> {
        validate_run_id(run_id)?;
        self.state.borrow().meta.get(run_id).map(|t| RunMeta::from_json(t)).transpose()
    }
}

impl LeasableStore for InMemoryStore {
    async fn acquire(&self, run_id: &str, owner: &str) -> Result<Lease> {
        validate_run_id(run_id)?;
        validate_owner(owner)?;
        let now = self.env.now_ms();
        let mut st = self.state.borrow_mut();
        if st.leases.get(run_id).is_some_and(|(_, _, exp)| *exp > now) {
            return Err(StoreError::lease(run_id, LeaseRefusal::HeldOnAcquire));
        }
        let epoch = Epoch(st.epochs.get(run_id).map_or(0, |e| e.0) + 1);
        st.epochs.insert(run_id.to_string(), epoch);
        st.leases.insert(run_id.to_string(), (owner.to_string(), epoch, now + self.ttl_ms));
        Ok(Lease { run_id: run_id.to_string(), owner: owner.to_string(), epoch })
    }

    async fn renew(&self, lease: &Lease) -> Result<()> {
        validate_run_id(&lease.run_id)?;
        let mut st = self.state.borrow_mut();
        self.check_fence(&st, lease, &lease.run_id)?;
        let exp = self.env.now_ms() + self.ttl_ms;
        if let Some(row) = st.leases.get_mut(&lease.run_id) {
            row.2 = exp;
        }
        Ok(())
    }

    async fn release(&self, lease: &Lease) -> Result<()> {
        validate_run_id(&lease.run_id)?;
        let mut st = self.state.borrow_mut();
        self.check_fence(&st, lease, &lease.run_id)?;
        st.leases.remove(&lease.run_id);
        Ok(())
    }

    fn lease_ttl(&self) -> Option<Duration> {
        Some(Duration::from_millis(self.ttl_ms as u64))
    }
}

/// `(ref, bytes)` in insertion order, which is rulvar's listing order.
type Blobs = Vec<(String, Vec<u8>)>;

/// Process-local blobs; ignores every lease (single writer by contract).
#[derive(Clone, Default)]
pub struct InMemoryTranscriptStore {
    blobs: Rc<RefCell<Blobs>>,
}

impl InMemoryTranscriptStore {
    pub fn new() -> InMemoryTranscriptStore {
        InMemoryTranscriptStore::default()
    }
}

impl TranscriptStore for InMemoryTranscriptStore {
    async fn put(&self, blob_ref: &str, bytes: &[u8], _lease: Option<&Lease>) -> Result<()> {
        validate_ref(blob_ref)?;
        let mut blobs = self.blobs.borrow_mut();
        match blobs.iter_mut().find(|(r, _)| r == blob_ref) {
            Some(slot) => slot.1 = bytes.to_vec(),
            None => blobs.push((blob_ref.to_string(), bytes.to_vec())),
        }
        Ok(())
    }

    async fn get(&self, blob_ref: &str) -> Result<Option<Vec<u8>>> {
        validate_ref(blob_ref)?;
        Ok(self.blobs.borrow().iter().find(|(r, _)| r == blob_ref).map(|(_, b)| b.clone()))
    }

    async fn list(&self, run_id: &str) -> Result<Vec<String>> {
        validate_run_id(run_id)?;
        Ok(self
            .blobs
            .borrow()
            .iter()
            .filter(|(r, _)| r.contains('/') && run_of_ref(r) == run_id)
            .map(|(r, _)| r.clone())
            .collect())
    }

    async fn delete(&self, blob_ref: &str, _lease: Option<&Lease>) -> Result<()> {
        validate_ref(blob_ref)?;
        self.blobs.borrow_mut().retain(|(r, _)| r != blob_ref);
        Ok(())
    }
}
