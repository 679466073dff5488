//! The checks have teeth: the checks that no flaw profile fails (the journal suite, the
//! lease basics, the unleased passthroughs) are run against deliberately broken wrappers
//! of the in-memory stores, and each must fail on the mutation it targets while the
//! unmutated wrapper passes.

use std::cell::RefCell;
use std::rc::Rc;
use std::time::Duration;

use futures::executor::block_on;
use serde_json::json;
use store::conformance::{self, Instance, Opener};
use store::{
    Env, Epoch, InMemoryStore, InMemoryTranscriptStore, JournalEntry, JournalStore, LeasableStore, Lease,
    MetaLookup, Result, RunFilter, RunMeta, StoreError, TranscriptStore,
};

/// One broken rule.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Mutation {
    None,
    /// `load` drops the last entry.
    LoadDropsLast,
    /// `load` returns the entries in reverse order.
    LoadReversed,
    /// `load` rewrites every entry's value.
    LoadRewritesValue,
    /// `load` injects a `hashVersion` field.
    LoadInjectsHashVersion,
    /// The A5 refusal surfaces as an untyped storage error.
    OrderViolationUntyped,
    /// `append` drops the lease (no fencing).
    AppendIgnoresLease,
    /// `acquire` on a held lease hands out a fake lease instead of refusing.
    AcquireNeverRefuses,
    /// `renew` does nothing.
    RenewNoop,
    /// `release` does nothing.
    ReleaseNoop,
    /// `list_runs` ignores the filter.
    ListIgnoresFilter,
    /// `delete` keeps the meta row.
    DeleteKeepsMeta,
    /// `get` on a blob returns nothing.
    BlobGetNone,
}

#[derive(Clone)]
struct Mutant {
    inner: InMemoryStore,
    m: Mutation,
}

#[derive(Clone)]
struct MutantBlobs {
    inner: InMemoryTranscriptStore,
    m: Mutation,
}

impl JournalStore for Mutant {
    async fn append(&self, run_id: &str, entry: &JournalEntry, lease: Option<&Lease>) -> Result<()> {
        let lease = if self.m == Mutation::AppendIgnoresLease { None } else { lease };
        match self.inner.append(run_id, entry, lease).await {
            Err(StoreError::JournalOrderViolation { .. }) if self.m == Mutation::OrderViolationUntyped => {
                Err(StoreError::Storage { during: "append", message: "constraint".into() })
            }
            other => other,
        }
    }
    async fn load(&self, run_id: &str) -> Result<Vec<JournalEntry>> {
        let mut entries = self.inner.load(run_id).await?;
        match self.m {
            Mutation::LoadDropsLast => {
                entries.pop();
            }
            Mutation::LoadReversed => entries.reverse(),
            Mutation::LoadRewritesValue => entries.iter_mut().for_each(|e| e.value = json!("rewritten")),
            Mutation::LoadInjectsHashVersion => {
                entries.iter_mut().for_each(|e| {
                    e.extra.insert("hashVersion".into(), json!(2));
                });
            }
            _ => {}
        }
        Ok(entries)
    }
    async fn put_meta(&self, meta: &RunMeta, lease: Option<&Lease>) -> Result<()> {
        self.inner.put_meta(meta, lease).await
    }
    async fn list_runs(&self, filter: &RunFilter) -> Result<Vec<RunMeta>> {
        let filter =
            if self.m == Mutation::ListIgnoresFilter { RunFilter::default() } else { filter.clone() };
        self.inner.list_runs(&filter).await
    }
    async fn delete(&self, run_id: &str, lease: Option<&Lease>) -> Result<()> {
        let kept = self.inner.get_meta(run_id).await?;
        self.inner.delete(run_id, lease).await?;
        match (self.m, kept) {
            (Mutation::DeleteKeepsMeta, Some(meta)) => self.inner.put_meta(&meta, None).await,
            _ => Ok(()),
        }
    }
}

impl MetaLookup for Mutant {
    async fn get_meta(&self, run_id: &str) -> Result<Option<RunMeta>> {
        self.inner.get_meta(run_id).await
    }
}

impl LeasableStore for Mutant {
    async fn acquire(&self, run_id: &str, owner: &str) -> Result<Lease> {
        match self.inner.acquire(run_id, owner).await {
            Err(StoreError::LeaseHeld { .. }) if self.m == Mutation::AcquireNeverRefuses => {
                Ok(Lease { run_id: run_id.into(), owner: owner.into(), epoch: Epoch(99) })
            }
            other => other,
        }
    }
    async fn renew(&self, lease: &Lease) -> Result<()> {
        if self.m == Mutation::RenewNoop {
            return Ok(());
        }
        self.inner.renew(lease).await
    }
    async fn release(&self, lease: &Lease) -> Result<()> {
        if self.m == Mutation::ReleaseNoop {
            return Ok(());
        }
        self.inner.release(lease).await
    }
    fn lease_ttl(&self) -> Option<Duration> {
        self.inner.lease_ttl()
    }
}

impl TranscriptStore for MutantBlobs {
    async fn put(&self, blob_ref: &str, bytes: &[u8], lease: Option<&Lease>) -> Result<()> {
        self.inner.put(blob_ref, bytes, lease).await
    }
    async fn get(&self, blob_ref: &str) -> Result<Option<Vec<u8>>> {
        let got = self.inner.get(blob_ref).await?;
        Ok(if self.m == Mutation::BlobGetNone { None } else { got })
    }
    async fn list(&self, run_id: &str) -> Result<Vec<String>> {
        self.inner.list(run_id).await
    }
    async fn delete(&self, blob_ref: &str, lease: Option<&Lease>) -> Result<()> {
        self.inner.delete(blob_ref, lease).await
    }
}

/// As `MemoryOpener`: the first open creates the state, later opens share it.
struct MutantOpener {
    m: Mutation,
    first: RefCell<Option<Instance<Mutant, MutantBlobs>>>,
}

impl Opener for MutantOpener {
    type Store = Mutant;
    type Blobs = MutantBlobs;
    async fn open(&self, ttl_ms: i64, env: Rc<dyn Env>) -> Result<Instance<Mutant, MutantBlobs>> {
        let mut first = self.first.borrow_mut();
        if let Some(existing) = first.as_ref() {
            return Ok(existing.clone());
        }
        let made = Instance {
            store: Mutant { inner: InMemoryStore::new(env, ttl_ms)?, m: self.m },
            blobs: MutantBlobs { inner: InMemoryTranscriptStore::new(), m: self.m },
        };
        *first = Some(made.clone());
        Ok(made)
    }
}

fn run(id: &str, m: Mutation) -> std::result::Result<(), conformance::CheckFailure> {
    block_on(conformance::run(id, &MutantOpener { m, first: RefCell::new(None) }))
}

/// (check, a mutation it must catch).
const TARGETS: &[(&str, Mutation)] = &[
    ("a1-append-atomicity", Mutation::LoadRewritesValue),
    ("a1-append-atomicity", Mutation::LoadDropsLast),
    ("a2-total-order", Mutation::LoadReversed),
    ("a3-read-your-writes", Mutation::LoadDropsLast),
    ("a4-opaque-payload", Mutation::LoadInjectsHashVersion),
    ("a4-opaque-payload", Mutation::LoadRewritesValue),
    ("a5-monotonic-seq", Mutation::OrderViolationUntyped),
    ("a5-stale-tail-race", Mutation::OrderViolationUntyped),
    ("meta-separation", Mutation::ListIgnoresFilter),
    ("meta-separation", Mutation::DeleteKeepsMeta),
    ("lease-exclusive-acquire", Mutation::AcquireNeverRefuses),
    ("lease-exclusive-acquire", Mutation::ReleaseNoop),
    ("fencing-stale-epoch", Mutation::AppendIgnoresLease),
    ("fencing-epoch-tombstone", Mutation::AppendIgnoresLease),
    ("lease-release-fences", Mutation::ReleaseNoop),
    ("lease-release-fences", Mutation::AppendIgnoresLease),
    ("lease-ttl-and-renew-cadence", Mutation::RenewNoop),
    ("lease-ttl-and-renew-cadence", Mutation::AcquireNeverRefuses),
    ("fenced-unleased-passthrough", Mutation::DeleteKeepsMeta),
    ("fenced-transcripts-unleased-passthrough", Mutation::BlobGetNone),
];

#[test]
fn unmutated_wrapper_passes_every_targeted_check() {
    for (id, _) in TARGETS {
        if let Err(f) = run(id, Mutation::None) {
            panic!("the unmutated wrapper fails {f}");
        }
    }
}

#[test]
fn every_targeted_check_catches_its_mutation() {
    let mut escaped = Vec::new();
    for &(id, m) in TARGETS {
        match run(id, m) {
            Ok(()) => escaped.push(format!("{id} passed under {m:?}")),
            Err(f) => println!("{m:?} caught by {f}"),
        }
    }
    assert!(escaped.is_empty(), "mutations escaped:\n{}", escaped.join("\n"));
}
