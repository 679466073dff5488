//! The oracle's executable sequential model of the store contract: given one store call at a
//! virtual instant, what a correct store returns (its value or its typed refusal) and what
//! its state becomes. Written from store-contract.md (1.2 journal, 1.3 meta lookup, 1.4
//! leases L1-L6, 1.5 transcripts T1-T3, 1.6-1.7 fenced writes FW1/FW2/FW4, 2.4-2.5 the
//! SqliteStore methods, 6 the in-memory stores) and the Rust port's typed errors, not from
//! the store crate's code; the differential tests (`sim/tests/store_vs_model.rs`) run every
//! generated call sequence against a store and against this model and require the same
//! answers and the same final state.
//!
//! Promise: nothing here calls the system under test. From `store` it names only plain data
//! (`Lease`, `Epoch`, `JournalEntry`, `RunMeta`, `RunFilter`, `LeaseRefusal`) and reads filters
//! and refs through the oracle's own [`contract`](super::contract). Every call is total: bad
//! input is a typed refusal that changes nothing, never a panic. What it does not model:
//! concurrency (calls are sequential; Busy never happens), faults, and stored payloads that do
//! not decode (its state holds only what calls wrote, so it never predicts `Corrupt`).

use std::collections::BTreeMap;

use serde_json::Value;
use store::{Epoch, JournalEntry, Lease, LeaseRefusal, RunFilter, RunMeta};

use super::contract::{filter_excludes_strictly, filter_matches, run_of_ref, safe_segment, MetaView, Status};

pub use super::contract::SEQ_LIMIT;

/// Which surfaces enforce a lease they are given, and how blobs are listed: the parts of the
/// contract a store declares rather than shares.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Surfaces {
    /// `put_meta` and `delete` enforce a lease (the journal side's `fencedWrites`, 1.6). When
    /// false a lease on them is ignored entirely (FW4 semantics whatever is passed).
    pub fenced_meta_and_delete: bool,
    /// Blob `put` and `delete` enforce a lease on the ref's run (the transcript side, 1.7).
    pub fenced_blobs: bool,
    /// The order of `list(run)`.
    pub blob_listing: BlobListing,
}

/// The order a transcript store lists a run's refs in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BlobListing {
    /// Sorted by ref (SqliteStore's `ORDER BY ref`, the twin's "exact sorted listing", 1.5).
    Sorted,
    /// First-put order (InMemoryTranscriptStore, section 6: "the result is not sorted").
    FirstPut,
}

impl Surfaces {
    /// SqliteStore under the `current` profile with its transcript twin: every surface fenced.
    pub const SQLITE_CURRENT: Surfaces =
        Surfaces { fenced_meta_and_delete: true, fenced_blobs: true, blob_listing: BlobListing::Sorted };
    /// The in-memory store and transcript store: leases and fenced appends, nothing else
    /// fenced, blobs listed in first-put order.
    pub const IN_MEMORY: Surfaces =
        Surfaces { fenced_meta_and_delete: false, fenced_blobs: false, blob_listing: BlobListing::FirstPut };
}

/// One store call, with every argument it carries.
#[derive(Clone, Debug, PartialEq)]
pub enum Call {
    Acquire { run_id: String, owner: String },
    Renew { lease: Lease },
    Release { lease: Lease },
    Append { run_id: String, entry: JournalEntry, lease: Option<Lease> },
    Load { run_id: String },
    PutMeta { meta: RunMeta, lease: Option<Lease> },
    GetMeta { run_id: String },
    ListRuns { filter: RunFilter },
    Delete { run_id: String, lease: Option<Lease> },
    BlobPut { blob_ref: String, bytes: Vec<u8>, lease: Option<Lease> },
    BlobGet { blob_ref: String },
    BlobList { run_id: String },
    BlobDelete { blob_ref: String, lease: Option<Lease> },
}

/// What a call returns when it succeeds.
#[derive(Clone, Debug, PartialEq)]
pub enum Answer {
    /// A mutation that took effect (append, put_meta, delete, renew, release, blob put/delete).
    Done,
    Granted(Lease),
    Entries(Vec<JournalEntry>),
    Meta(Option<Box<RunMeta>>),
    /// The rows matching the filter, by run id. Under a `statuses` filter a store may return
    /// more (see [`Reference::runs_a_store_may_add`]).
    Runs(Vec<RunMeta>),
    Bytes(Option<Vec<u8>>),
    Refs(Vec<String>),
}

/// A typed refusal. A refused call changed nothing.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Refusal {
    /// `LeaseHeldError` (1.1): a live lease on acquire, or a lease that does not guard this
    /// mutation; `run_id` is the run the refusal is about, `reason` why.
    LeaseHeld { run_id: String, reason: LeaseRefusal },
    /// A5: the seq is not above the run's stored maximum.
    OrderViolation { run_id: String, seq: u64 },
    /// A malformed argument, named by what it is: `run id`, `blob ref`, `journal entry seq`,
    /// `lease owner`.
    InvalidInput { what: &'static str },
}

/// One run's lease row.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LeaseRow {
    pub owner: String,
    pub epoch: u64,
    pub expires_at_ms: i64,
}

/// Everything a store holds, as the contract describes it.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct State {
    /// Per run, the entries in append order (a run without entries has no key).
    pub journals: BTreeMap<String, Vec<JournalEntry>>,
    pub meta: BTreeMap<String, RunMeta>,
    pub leases: BTreeMap<String, LeaseRow>,
    /// The epoch high-water mark per run; survives release, expiry and delete (L2).
    pub epochs: BTreeMap<String, u64>,
    /// `(ref, bytes)` in first-put order (a re-put keeps its place; a deleted ref re-put goes
    /// last).
    pub blobs: Vec<(String, Vec<u8>)>,
}

/// The sequential reference store.
#[derive(Clone, Debug)]
pub struct Reference {
    ttl_ms: i64,
    surfaces: Surfaces,
    state: State,
}

fn valid_run_id(run_id: &str) -> Result<(), Refusal> {
    if safe_segment(run_id) {
        Ok(())
    } else {
        Err(Refusal::InvalidInput { what: "run id" })
    }
}

fn valid_ref(blob_ref: &str) -> Result<(), Refusal> {
    if blob_ref.split('/').all(safe_segment) {
        Ok(())
    } else {
        Err(Refusal::InvalidInput { what: "blob ref" })
    }
}

/// The oracle's view of a meta record for the filter test (which reads status, name and
/// tags only; the record itself is kept whole in the state).
fn view(meta: &RunMeta) -> MetaView {
    MetaView {
        run_id: meta.run_id.clone(),
        status: Status::of(meta.status),
        segments: meta.segments,
        genesis: meta.genesis.clone(),
        name: meta.name.clone(),
        tags: meta.tags.clone(),
        workflow_name: meta.workflow_name.clone(),
        raw: Value::Null,
    }
}

impl Reference {
    /// An empty store with this lease ttl (ms) and these surfaces.
    pub fn new(ttl_ms: i64, surfaces: Surfaces) -> Reference {
        Reference { ttl_ms, surfaces, state: State::default() }
    }

    /// What the store holds now.
    pub fn state(&self) -> &State {
        &self.state
    }

    /// The lease row of `run_id`, if one stands (live or not).
    pub fn lease_row(&self, run_id: &str) -> Option<&LeaseRow> {
        self.state.leases.get(run_id)
    }

    /// Apply one call at store clock `now_ms`: the answer a correct store gives, and the
    /// state change it makes (none when refused).
    pub fn apply(&mut self, now_ms: i64, call: &Call) -> Result<Answer, Refusal> {
        match call {
            Call::Acquire { run_id, owner } => self.acquire(now_ms, run_id, owner),
            Call::Renew { lease } => self.renew(now_ms, lease),
            Call::Release { lease } => self.release(now_ms, lease),
            Call::Append { run_id, entry, lease } => self.append(now_ms, run_id, entry, lease.as_ref()),
            Call::Load { run_id } => {
                valid_run_id(run_id)?;
                Ok(Answer::Entries(self.state.journals.get(run_id).cloned().unwrap_or_default()))
            }
            Call::PutMeta { meta, lease } => self.put_meta(now_ms, meta, lease.as_ref()),
            Call::GetMeta { run_id } => {
                valid_run_id(run_id)?;
                Ok(Answer::Meta(self.state.meta.get(run_id).cloned().map(Box::new)))
            }
            Call::ListRuns { filter } => Ok(Answer::Runs(
                self.state.meta.values().filter(|m| filter_matches(filter, &view(m))).cloned().collect(),
            )),
            Call::Delete { run_id, lease } => self.delete(now_ms, run_id, lease.as_ref()),
            Call::BlobPut { blob_ref, bytes, lease } => {
                self.blob_put(now_ms, blob_ref, bytes, lease.as_ref())
            }
            Call::BlobGet { blob_ref } => {
                valid_ref(blob_ref)?;
                Ok(Answer::Bytes(
                    self.state.blobs.iter().find(|(r, _)| r == blob_ref).map(|(_, b)| b.clone()),
                ))
            }
            Call::BlobList { run_id } => {
                valid_run_id(run_id)?;
                // T3: the refs under `<runId>/`; a slashless ref is never listed.
                let mut refs: Vec<String> = self
                    .state
                    .blobs
                    .iter()
                    .filter(|(r, _)| r.contains('/') && run_of_ref(r) == run_id)
                    .map(|(r, _)| r.clone())
                    .collect();
                if self.surfaces.blob_listing == BlobListing::Sorted {
                    refs.sort();
                }
                Ok(Answer::Refs(refs))
            }
            Call::BlobDelete { blob_ref, lease } => self.blob_delete(now_ms, blob_ref, lease.as_ref()),
        }
    }

    /// The rows a store may return for `filter` beyond the exact answer: the contract lets a
    /// `statuses` filter over-match (1.2 meta separation), never `status` alone, `name` or
    /// `tags`.
    pub fn runs_a_store_may_add(&self, filter: &RunFilter) -> Vec<RunMeta> {
        self.state
            .meta
            .values()
            .filter(|m| {
                let v = view(m);
                !filter_matches(filter, &v) && !filter_excludes_strictly(filter, &v)
            })
            .cloned()
            .collect()
    }

    /// `assertFencing` (2.4): the lease must be its run's current live holder. The reasons in
    /// the order a store tells them: no row, another epoch, another owner, expired
    /// (`expires_at <= now`).
    fn holder_check(&self, now_ms: i64, lease: &Lease) -> Result<(), Refusal> {
        let refuse = |reason| Err(Refusal::LeaseHeld { run_id: lease.run_id.clone(), reason });
        match self.state.leases.get(&lease.run_id) {
            None => refuse(LeaseRefusal::NotHeld),
            Some(row) if row.epoch != lease.epoch.0 => refuse(LeaseRefusal::StaleEpoch),
            Some(row) if row.owner != lease.owner => refuse(LeaseRefusal::ForeignOwner),
            Some(row) if row.expires_at_ms <= now_ms => refuse(LeaseRefusal::Expired),
            Some(_) => Ok(()),
        }
    }

    /// A fenced mutation of `run_id` under `lease` (FW2 run-match first, then FW1).
    fn fence(&self, now_ms: i64, run_id: &str, lease: &Lease) -> Result<(), Refusal> {
        if lease.run_id != run_id {
            return Err(Refusal::LeaseHeld { run_id: run_id.to_string(), reason: LeaseRefusal::RunMismatch });
        }
        self.holder_check(now_ms, lease)
    }

    /// L1, L2, L6: a live row refuses whoever asks; otherwise epoch = high-water + 1, expiring
    /// at `now + ttl`.
    fn acquire(&mut self, now_ms: i64, run_id: &str, owner: &str) -> Result<Answer, Refusal> {
        valid_run_id(run_id)?;
        if owner.is_empty() {
            return Err(Refusal::InvalidInput { what: "lease owner" });
        }
        if self.state.leases.get(run_id).is_some_and(|row| row.expires_at_ms > now_ms) {
            return Err(Refusal::LeaseHeld {
                run_id: run_id.to_string(),
                reason: LeaseRefusal::HeldOnAcquire,
            });
        }
        let epoch = self.state.epochs.get(run_id).copied().unwrap_or(0).saturating_add(1);
        self.state.epochs.insert(run_id.to_string(), epoch);
        self.state.leases.insert(
            run_id.to_string(),
            LeaseRow { owner: owner.to_string(), epoch, expires_at_ms: now_ms.saturating_add(self.ttl_ms) },
        );
        Ok(Answer::Granted(Lease {
            run_id: run_id.to_string(),
            owner: owner.to_string(),
            epoch: Epoch(epoch),
        }))
    }

    /// L3: only the current live holder; expiry becomes `now + ttl`.
    fn renew(&mut self, now_ms: i64, lease: &Lease) -> Result<Answer, Refusal> {
        valid_run_id(&lease.run_id)?;
        self.holder_check(now_ms, lease)?;
        let ttl_ms = self.ttl_ms;
        if let Some(row) = self.state.leases.get_mut(&lease.run_id) {
            row.expires_at_ms = now_ms.saturating_add(ttl_ms);
        }
        Ok(Answer::Done)
    }

    /// L4: only the current live holder; the row goes.
    fn release(&mut self, now_ms: i64, lease: &Lease) -> Result<Answer, Refusal> {
        valid_run_id(&lease.run_id)?;
        self.holder_check(now_ms, lease)?;
        self.state.leases.remove(&lease.run_id);
        Ok(Answer::Done)
    }

    /// A5 and L5: every leasable store fences appends (run-match included); the fence is
    /// checked before the seq (2.5), and the seq must exceed the run's stored maximum.
    fn append(
        &mut self,
        now_ms: i64,
        run_id: &str,
        entry: &JournalEntry,
        lease: Option<&Lease>,
    ) -> Result<Answer, Refusal> {
        valid_run_id(run_id)?;
        if entry.seq.0 > SEQ_LIMIT {
            return Err(Refusal::InvalidInput { what: "journal entry seq" });
        }
        if let Some(lease) = lease {
            self.fence(now_ms, run_id, lease)?;
        }
        let journal = self.state.journals.get(run_id).map(Vec::as_slice).unwrap_or(&[]);
        if journal.iter().any(|e| e.seq >= entry.seq) {
            return Err(Refusal::OrderViolation { run_id: run_id.to_string(), seq: entry.seq.0 });
        }
        self.state.journals.entry(run_id.to_string()).or_default().push(entry.clone());
        Ok(Answer::Done)
    }

    /// Whole-record upsert (no merge), fenced when the store declares fenced writes.
    fn put_meta(&mut self, now_ms: i64, meta: &RunMeta, lease: Option<&Lease>) -> Result<Answer, Refusal> {
        valid_run_id(&meta.run_id)?;
        if let (Some(lease), true) = (lease, self.surfaces.fenced_meta_and_delete) {
            self.fence(now_ms, &meta.run_id, lease)?;
        }
        self.state.meta.insert(meta.run_id.clone(), meta.clone());
        Ok(Answer::Done)
    }

    /// Remove the journal, the meta row and the lease row; keep the epoch (the tombstone);
    /// never touch blobs.
    fn delete(&mut self, now_ms: i64, run_id: &str, lease: Option<&Lease>) -> Result<Answer, Refusal> {
        valid_run_id(run_id)?;
        if let (Some(lease), true) = (lease, self.surfaces.fenced_meta_and_delete) {
            self.fence(now_ms, run_id, lease)?;
        }
        self.state.journals.remove(run_id);
        self.state.meta.remove(run_id);
        self.state.leases.remove(run_id);
        Ok(Answer::Done)
    }

    /// T1 upsert; fenced on the ref's run when the store fences blobs.
    fn blob_put(
        &mut self,
        now_ms: i64,
        blob_ref: &str,
        bytes: &[u8],
        lease: Option<&Lease>,
    ) -> Result<Answer, Refusal> {
        valid_ref(blob_ref)?;
        if let (Some(lease), true) = (lease, self.surfaces.fenced_blobs) {
            self.fence(now_ms, run_of_ref(blob_ref), lease)?;
        }
        match self.state.blobs.iter_mut().find(|(r, _)| r == blob_ref) {
            Some(slot) => slot.1 = bytes.to_vec(),
            None => self.state.blobs.push((blob_ref.to_string(), bytes.to_vec())),
        }
        Ok(Answer::Done)
    }

    /// T2: a missing ref is a no-op, but a fenced store still checks the lease.
    fn blob_delete(&mut self, now_ms: i64, blob_ref: &str, lease: Option<&Lease>) -> Result<Answer, Refusal> {
        valid_ref(blob_ref)?;
        if let (Some(lease), true) = (lease, self.surfaces.fenced_blobs) {
            self.fence(now_ms, run_of_ref(blob_ref), lease)?;
        }
        self.state.blobs.retain(|(r, _)| r != blob_ref);
        Ok(Answer::Done)
    }
}

#[cfg(test)]
mod tests {
    //! The model against the contract's own checks, hand-written: each asserts a rule the
    //! model must encode, so a wrong model fails here before it misjudges a store.
    use crate::oracle::testkit::meta_record;

    use serde_json::json;
    use store::{RunStatus, Seq};

    use super::*;

    fn entry(seq: u64) -> JournalEntry {
        JournalEntry {
            seq: Seq(seq),
            kind: "k".into(),
            status: "ok".into(),
            key: String::new(),
            ref_seq: None,
            value: json!(seq),
            extra: serde_json::Map::new(),
        }
    }

    fn granted(r: Result<Answer, Refusal>) -> Lease {
        match r {
            Ok(Answer::Granted(l)) => l,
            other => panic!("expected a grant, got {other:?}"),
        }
    }

    fn reason(r: Result<Answer, Refusal>) -> LeaseRefusal {
        match r {
            Err(Refusal::LeaseHeld { reason, .. }) => reason,
            other => panic!("expected LeaseHeld, got {other:?}"),
        }
    }

    fn acquire(m: &mut Reference, now: i64, run: &str, owner: &str) -> Result<Answer, Refusal> {
        m.apply(now, &Call::Acquire { run_id: run.into(), owner: owner.into() })
    }

    #[test]
    fn expiry_is_the_instant_expires_at_equals_now() {
        let mut m = Reference::new(100, Surfaces::SQLITE_CURRENT);
        let a = granted(acquire(&mut m, 0, "r", "a"));
        assert_eq!(reason(acquire(&mut m, 99, "r", "b")), LeaseRefusal::HeldOnAcquire);
        let append =
            |l: &Lease, s| Call::Append { run_id: "r".into(), entry: entry(s), lease: Some(l.clone()) };
        assert_eq!(m.apply(99, &append(&a, 0)), Ok(Answer::Done));
        assert_eq!(reason(m.apply(100, &append(&a, 1))), LeaseRefusal::Expired, "expires_at <= now");
        assert_eq!(reason(m.apply(100, &Call::Renew { lease: a.clone() })), LeaseRefusal::Expired);
        let b = granted(acquire(&mut m, 100, "r", "b"));
        assert_eq!(b.epoch, Epoch(2));
        assert_eq!(reason(m.apply(100, &append(&a, 1))), LeaseRefusal::StaleEpoch);
        let forged = Lease { owner: "z".into(), ..b.clone() };
        assert_eq!(reason(m.apply(100, &append(&forged, 1))), LeaseRefusal::ForeignOwner);
        let other_run = Lease { run_id: "s".into(), ..b.clone() };
        assert_eq!(
            reason(
                m.apply(100, &Call::Append { run_id: "r".into(), entry: entry(1), lease: Some(other_run) })
            ),
            LeaseRefusal::RunMismatch
        );
        assert_eq!(m.state().journals["r"].len(), 1, "refusals change nothing");
    }

    #[test]
    fn epochs_survive_release_and_delete_and_a5_is_against_the_maximum() {
        let mut m = Reference::new(100, Surfaces::SQLITE_CURRENT);
        let a = granted(acquire(&mut m, 0, "r", "a"));
        assert_eq!(m.apply(1, &Call::Release { lease: a.clone() }), Ok(Answer::Done));
        assert_eq!(reason(m.apply(1, &Call::Release { lease: a })), LeaseRefusal::NotHeld);
        let put = |s| Call::Append { run_id: "r".into(), entry: entry(s), lease: None };
        assert_eq!(m.apply(1, &put(5)), Ok(Answer::Done));
        assert_eq!(m.apply(1, &put(5)), Err(Refusal::OrderViolation { run_id: "r".into(), seq: 5 }));
        assert_eq!(m.apply(1, &put(9)), Ok(Answer::Done), "gaps are legal");
        assert_eq!(m.apply(1, &Call::Delete { run_id: "r".into(), lease: None }), Ok(Answer::Done));
        assert_eq!(m.apply(1, &Call::Load { run_id: "r".into() }), Ok(Answer::Entries(vec![])));
        assert_eq!(granted(acquire(&mut m, 1, "r", "a")).epoch, Epoch(2), "the tombstone");
        assert_eq!(
            m.apply(1, &Call::Append { run_id: "r".into(), entry: entry(SEQ_LIMIT + 1), lease: None }),
            Err(Refusal::InvalidInput { what: "journal entry seq" })
        );
    }

    #[test]
    fn unfenced_surfaces_ignore_a_lease_and_listing_follows_the_store() {
        let stale = Lease { run_id: "r".into(), owner: "a".into(), epoch: Epoch(7) };
        for (surfaces, expect_refused) in [(Surfaces::SQLITE_CURRENT, true), (Surfaces::IN_MEMORY, false)] {
            let mut m = Reference::new(100, surfaces);
            let r = m.apply(
                0,
                &Call::PutMeta { meta: meta_record("r", RunStatus::Ok), lease: Some(stale.clone()) },
            );
            assert_eq!(r.is_err(), expect_refused, "{surfaces:?}");
            let r = m.apply(
                0,
                &Call::BlobPut { blob_ref: "r/b".into(), bytes: vec![1], lease: Some(stale.clone()) },
            );
            assert_eq!(r.is_err(), expect_refused, "{surfaces:?}");
        }
        let mut m = Reference::new(100, Surfaces::IN_MEMORY);
        for r in ["r/z", "r/a", "r", "rx/a", "r/a/b"] {
            assert_eq!(
                m.apply(0, &Call::BlobPut { blob_ref: r.into(), bytes: vec![], lease: None }),
                Ok(Answer::Done)
            );
        }
        let list = |m: &mut Reference| m.apply(0, &Call::BlobList { run_id: "r".into() });
        assert_eq!(list(&mut m), Ok(Answer::Refs(vec!["r/z".into(), "r/a".into(), "r/a/b".into()])));
        m.surfaces = Surfaces::SQLITE_CURRENT;
        assert_eq!(list(&mut m), Ok(Answer::Refs(vec!["r/a".into(), "r/a/b".into(), "r/z".into()])));
        assert_eq!(
            m.apply(0, &Call::BlobGet { blob_ref: "r//a".into() }),
            Err(Refusal::InvalidInput { what: "blob ref" })
        );
    }

    #[test]
    fn a_statuses_filter_may_over_match_but_status_name_and_tags_may_not() {
        let mut m = Reference::new(100, Surfaces::SQLITE_CURRENT);
        for (run, status) in [("a", RunStatus::Running), ("b", RunStatus::Ok)] {
            assert_eq!(
                m.apply(0, &Call::PutMeta { meta: meta_record(run, status), lease: None }),
                Ok(Answer::Done)
            );
        }
        let statuses = RunFilter { statuses: Some(vec![RunStatus::Running]), ..RunFilter::default() };
        assert_eq!(
            m.apply(0, &Call::ListRuns { filter: statuses.clone() }),
            Ok(Answer::Runs(vec![meta_record("a", RunStatus::Running)]))
        );
        assert_eq!(m.runs_a_store_may_add(&statuses), vec![meta_record("b", RunStatus::Ok)]);
        let status = RunFilter { status: Some(RunStatus::Running), ..RunFilter::default() };
        assert!(m.runs_a_store_may_add(&status).is_empty());
    }
}
