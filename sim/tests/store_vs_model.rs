//! Differential state-machine tests: arbitrary sequences of store calls (acquire, renew,
//! release, append, load, put_meta, get_meta, list_runs with every filter dimension, delete,
//! blob put/get/list/delete; leases current, stale, foreign and of another run; clock moves
//! across expiry, landing exactly on the expiry instant) run against a store and against the
//! oracle's reference model (`sim::oracle::reference`). Every answer (value or typed error)
//! and the final state must agree; proptest shrinks a disagreement to a short sequence.
//!
//! Stores: `SqliteStore` (current profile, a real database file, its transcript twin) and
//! the in-memory store and transcript store (whose contract the model states through its
//! `Surfaces`: only appends, renew and release fenced; blobs listed in first-put order).
//!
//! Cases: `DEFAULT_CASES` per store in `cargo test`, from a fixed proptest seed (the same
//! sequences on every run); `PROPTEST_CASES` and `PROPTEST_RNG_SEED` override both for a
//! deeper run (README, "Property tests"). Failures are persisted in
//! `sim/proptest-regressions/store_vs_model.txt` and replayed first on every run.

#[path = "support/proptest_config.rs"]
mod suite;

use std::path::{Path, PathBuf};
use std::rc::Rc;

use futures::executor::block_on;
use proptest::prelude::*;
use proptest::test_runner::{Config, RngSeed};
use serde_json::{Map, Value};
use sim::oracle::contract::{filter_matches, MetaView};
use sim::oracle::reference::{Answer, Call, Reference, Refusal, Surfaces, SEQ_LIMIT};
use store::{
    Epoch, InMemoryStore, InMemoryTranscriptStore, JournalEntry, JournalStore, LeasableStore, Lease,
    ManualClock, ManualEnv, MetaLookup, RunFilter, RunMeta, RunStatus, Seq, SqliteOptions, SqliteStore,
    SqliteTranscripts, StoreError, Synchronous, TranscriptStore,
};

/// Sequences per store in a plain `cargo test`.
const DEFAULT_CASES: u32 = 300;
/// The lease ttl of every store under test (ms): short, so clock moves cross it often.
const TTL_MS: i64 = 100;
/// Where the clock starts.
const T0: i64 = 1_000_000;

/// Valid run ids that trip naive implementations: prefixes of each other (`r`, `r1`, `r.1`,
/// `r_1`, `rx1`), a LIKE `_` wildcard that matches one character (`r_1` ~ `rx1`, `r.1`; `_` ~
/// `r`, `R`), a case pair for case-insensitive matching (`r`, `R`), dots, and a long id.
const RUNS: &[&str] = &["r", "r1", "R", "r_1", "rx1", "r.1", "_", LONG_RUN];
const LONG_RUN: &str = "llllllllllllllllllllllllllllllllllllllllllllllllllllllllllllllllllllllllllllllllllllllllllllllllllllllllllllllllllllllllllllllllllllllllllllllllllllllllllllllllllllllllllllllllllllllllllllllllllllllllllllllllllllllllllll";
/// Run ids every store must refuse (`InvalidInput`), changing nothing.
const BAD_RUNS: &[&str] = &["", ".", "..", "r/1", "r%", "ré", "r 1", "%", "r\u{0}"];
/// Blob ref tails after a run id (`""`: the slashless ref, stored but never listed).
const TAILS: &[&str] = &["", "/ckpt/1", "/ckpt/10", "/x", "/x/y", "/workflow-source"];
const BAD_REFS: &[&str] = &["", "r//x", "r/../x", "/r", "r/", "r/é", "r/%", "r/a b", "r/.", "r/x/"];
const OWNERS: &[&str] = &["w1", "w2"];
const NAMES: &[&str] = &["n", "n_", "nx", "N", "n%"];
const TAGS: &[&str] = &["a", "b", "a_", "A"];
/// Field names a meta record may carry beyond the named ones (1.1: they must round-trip).
/// None shadows a named field: a record whose `extra` repeats one is refused (see the tests
/// at the end of this file), which the model does not predict, so they stay out of the
/// sequences.
const META_EXTRA_KEYS: &[&str] = &["budgetUsd", "scope", "argsHash", "execKeyDerivation", "x", "ünï", "a b"];
/// Field names an entry may carry beyond the envelope. None shadows an envelope field (the
/// same refusal for entries).
const ENTRY_EXTRA_KEYS: &[&str] = &["hashVersion", "scope", "ordinal", "v", "ünï", "z"];

// ---------------------------------------------------------------------------------------
// The generated operations. Leases, seqs and clock targets are picked relative to what the
// sequence has done so far (resolved when the op runs), so shrinking keeps them meaningful.

#[derive(Clone, Debug)]
enum RunPick {
    Valid(usize),
    Bad(usize),
}

#[derive(Clone, Debug)]
enum RefPick {
    Valid { run: usize, tail: usize },
    Bad(usize),
}

/// A lease the op carries: one granted earlier (by index into the grants so far, or the
/// newest), possibly forged.
#[derive(Clone, Debug)]
struct LeasePick {
    grant: GrantPick,
    forge: Forgery,
}

#[derive(Clone, Debug)]
enum GrantPick {
    Newest,
    Index(usize),
}

#[derive(Clone, Debug)]
enum Forgery {
    AsGranted,
    OtherOwner,
    EpochBelow,
    EpochAbove,
    OtherRun(usize),
}

#[derive(Clone, Debug)]
enum SeqPick {
    /// The stored maximum + 1 (0 for an empty journal).
    Next,
    /// The stored maximum (A5 refuses it when the journal is not empty).
    Repeat,
    /// Below the stored maximum.
    Below,
    /// The maximum + k: a gap.
    Jump(u64),
    Limit,
    OverLimit,
}

#[derive(Clone, Debug)]
struct EntryBody {
    kind: String,
    status: String,
    key: String,
    ref_seq: Option<u64>,
    value: Value,
    extra: Vec<(usize, Value)>,
}

#[derive(Clone, Debug)]
struct MetaBody {
    status: RunStatus,
    updated_at: Option<String>,
    segments: Option<u64>,
    genesis: Option<String>,
    name: Option<usize>,
    tags: Option<Vec<usize>>,
    workflow_name: Option<String>,
    extra: Vec<(usize, Value)>,
}

#[derive(Clone, Debug)]
enum Op {
    /// Move the clock forward by this many ms.
    Advance(i64),
    /// Move the clock to the expiry of a granted lease's run (its lease row as it stands) plus
    /// `delta` (-1, 0 or +1), if that is ahead.
    ToExpiry {
        grant: GrantPick,
        delta: i64,
    },
    /// Send the following calls through the other connection (SqliteStore: a second store
    /// instance over the same file, as a second process would; in-memory: no-op).
    SwitchInstance,
    Acquire {
        run: RunPick,
        owner: usize,
    },
    Renew {
        lease: LeasePick,
    },
    Release {
        lease: LeasePick,
    },
    Append {
        run: RunPick,
        seq: SeqPick,
        body: EntryBody,
        lease: Option<LeasePick>,
    },
    Load {
        run: RunPick,
    },
    PutMeta {
        run: RunPick,
        body: MetaBody,
        lease: Option<LeasePick>,
    },
    GetMeta {
        run: RunPick,
    },
    ListRuns {
        filter: FilterPick,
    },
    Delete {
        run: RunPick,
        lease: Option<LeasePick>,
    },
    BlobPut {
        blob: RefPick,
        bytes: Vec<u8>,
        lease: Option<LeasePick>,
    },
    BlobGet {
        blob: RefPick,
    },
    BlobList {
        run: RunPick,
    },
    BlobDelete {
        blob: RefPick,
        lease: Option<LeasePick>,
    },
}

#[derive(Clone, Debug)]
struct FilterPick {
    status: Option<RunStatus>,
    statuses: Option<Vec<RunStatus>>,
    name: Option<usize>,
    tags: Option<Vec<usize>>,
}

fn run_pick() -> impl Strategy<Value = RunPick> {
    prop_oneof![
        12 => (0..RUNS.len()).prop_map(RunPick::Valid),
        1 => (0..BAD_RUNS.len()).prop_map(RunPick::Bad),
    ]
}

fn ref_pick() -> impl Strategy<Value = RefPick> {
    prop_oneof![
        12 => (0..RUNS.len(), 0..TAILS.len()).prop_map(|(run, tail)| RefPick::Valid { run, tail }),
        1 => (0..BAD_REFS.len()).prop_map(RefPick::Bad),
    ]
}

fn grant_pick() -> impl Strategy<Value = GrantPick> {
    prop_oneof![3 => Just(GrantPick::Newest), 2 => (0..8usize).prop_map(GrantPick::Index)]
}

fn lease_pick() -> impl Strategy<Value = LeasePick> {
    let grant = grant_pick();
    let forge = prop_oneof![
        8 => Just(Forgery::AsGranted),
        1 => Just(Forgery::OtherOwner),
        1 => Just(Forgery::EpochBelow),
        1 => Just(Forgery::EpochAbove),
        1 => (0..RUNS.len()).prop_map(Forgery::OtherRun),
    ];
    (grant, forge).prop_map(|(grant, forge)| LeasePick { grant, forge })
}

fn maybe_lease() -> impl Strategy<Value = Option<LeasePick>> {
    prop_oneof![1 => Just(None), 2 => lease_pick().prop_map(Some)]
}

fn seq_pick() -> impl Strategy<Value = SeqPick> {
    prop_oneof![
        10 => Just(SeqPick::Next),
        2 => Just(SeqPick::Repeat),
        1 => Just(SeqPick::Below),
        2 => (2..1000u64).prop_map(SeqPick::Jump),
        1 => Just(SeqPick::Limit),
        1 => Just(SeqPick::OverLimit),
    ]
}

/// Any finite float (NaN and the infinities are not JSON).
fn finite_f64() -> impl Strategy<Value = f64> {
    prop_oneof![
        any::<f64>().prop_filter("finite", |f| f.is_finite()),
        Just(0.1 + 0.2),
        Just(-0.0),
        Just(f64::MAX),
        Just(f64::MIN_POSITIVE),
        Just(9_007_199_254_740_993.0),
    ]
}

/// JSON values with the shapes A4 names: key order, exact floats, large integers, unicode,
/// nested arrays and objects, nulls.
fn json_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        any::<u64>().prop_map(Value::from),
        finite_f64().prop_map(Value::from),
        "\\PC{0,8}".prop_map(Value::String),
    ];
    leaf.prop_recursive(3, 24, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::Array),
            prop::collection::vec(("[a-zA-Z]{1,3}|\\PC{1,3}", inner), 0..4).prop_map(|kv| {
                let mut m = Map::new();
                for (k, v) in kv {
                    m.insert(k, v);
                }
                Value::Object(m)
            }),
        ]
    })
}

fn entry_body() -> impl Strategy<Value = EntryBody> {
    (
        prop_oneof![Just("agent".to_string()), Just("wormhole.v9".to_string()), "\\PC{0,6}"],
        prop_oneof![Just("ok".to_string()), Just("running".to_string()), "\\PC{0,4}"],
        "\\PC{0,6}",
        prop::option::weighted(0.2, any::<u64>().prop_map(|s| s % (SEQ_LIMIT + 1))),
        json_value(),
        prop::collection::vec((0..ENTRY_EXTRA_KEYS.len(), json_value()), 0..3),
    )
        .prop_map(|(kind, status, key, ref_seq, value, extra)| EntryBody {
            kind,
            status,
            key,
            ref_seq,
            value,
            extra,
        })
}

fn status() -> impl Strategy<Value = RunStatus> {
    prop::sample::select(RunStatus::ALL.to_vec())
}

fn meta_body() -> impl Strategy<Value = MetaBody> {
    (
        status(),
        prop::option::weighted(0.3, "\\PC{0,6}"),
        prop::option::weighted(0.3, any::<u64>()),
        prop::option::weighted(0.2, "[a-f0-9]{0,8}"),
        prop::option::weighted(0.5, 0..NAMES.len()),
        prop::option::weighted(0.5, prop::collection::vec(0..TAGS.len(), 0..3)),
        prop::option::weighted(0.2, "\\PC{0,6}"),
        prop::collection::vec((0..META_EXTRA_KEYS.len(), json_value()), 0..3),
    )
        .prop_map(|(status, updated_at, segments, genesis, name, tags, workflow_name, extra)| MetaBody {
            status,
            updated_at,
            segments,
            genesis,
            name,
            tags,
            workflow_name,
            extra,
        })
}

fn filter_pick() -> impl Strategy<Value = FilterPick> {
    (
        prop::option::weighted(0.3, status()),
        prop::option::weighted(0.3, prop::collection::vec(status(), 0..3)),
        prop::option::weighted(0.3, 0..NAMES.len()),
        prop::option::weighted(0.3, prop::collection::vec(0..TAGS.len(), 0..3)),
    )
        .prop_map(|(status, statuses, name, tags)| FilterPick { status, statuses, name, tags })
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        3 => (0..=2 * TTL_MS).prop_map(Op::Advance),
        3 => (grant_pick(), -1..=1i64).prop_map(|(grant, delta)| Op::ToExpiry { grant, delta }),
        3 => Just(Op::SwitchInstance),
        6 => (run_pick(), 0..OWNERS.len()).prop_map(|(run, owner)| Op::Acquire { run, owner }),
        3 => lease_pick().prop_map(|lease| Op::Renew { lease }),
        2 => lease_pick().prop_map(|lease| Op::Release { lease }),
        8 => (run_pick(), seq_pick(), entry_body(), maybe_lease())
            .prop_map(|(run, seq, body, lease)| Op::Append { run, seq, body, lease }),
        3 => run_pick().prop_map(|run| Op::Load { run }),
        5 => (run_pick(), meta_body(), maybe_lease()).prop_map(|(run, body, lease)| Op::PutMeta { run, body, lease }),
        2 => run_pick().prop_map(|run| Op::GetMeta { run }),
        3 => filter_pick().prop_map(|filter| Op::ListRuns { filter }),
        2 => (run_pick(), maybe_lease()).prop_map(|(run, lease)| Op::Delete { run, lease }),
        4 => (ref_pick(), prop::collection::vec(any::<u8>(), 0..40), maybe_lease())
            .prop_map(|(blob, bytes, lease)| Op::BlobPut { blob, bytes, lease }),
        2 => ref_pick().prop_map(|blob| Op::BlobGet { blob }),
        2 => run_pick().prop_map(|run| Op::BlobList { run }),
        2 => (ref_pick(), maybe_lease()).prop_map(|(blob, lease)| Op::BlobDelete { blob, lease }),
    ]
}

fn ops() -> impl Strategy<Value = Vec<Op>> {
    prop::collection::vec(op(), 1..48)
}

/// One of the first two run ids: journal sequences stay on a run long enough for its order
/// rule (A5) to meet a journal of several entries.
fn two_runs() -> impl Strategy<Value = RunPick> {
    (0..2usize).prop_map(RunPick::Valid)
}

/// A journal-heavy call: appends (every seq pick, leased or not) and loads on two runs, with
/// the acquires, releases and deletes that change what an append may do.
fn journal_op() -> impl Strategy<Value = Op> {
    prop_oneof![
        2 => (two_runs(), 0..OWNERS.len()).prop_map(|(run, owner)| Op::Acquire { run, owner }),
        1 => lease_pick().prop_map(|lease| Op::Release { lease }),
        10 => (two_runs(), seq_pick(), entry_body(), maybe_lease())
            .prop_map(|(run, seq, body, lease)| Op::Append { run, seq, body, lease }),
        2 => two_runs().prop_map(|run| Op::Load { run }),
        1 => (two_runs(), maybe_lease()).prop_map(|(run, lease)| Op::Delete { run, lease }),
    ]
}

fn journal_ops() -> impl Strategy<Value = Vec<Op>> {
    prop::collection::vec(journal_op(), 1..24)
}

// ---------------------------------------------------------------------------------------
// Resolving an op into a call, against what the sequence did so far.

fn run_id(p: &RunPick) -> String {
    match p {
        RunPick::Valid(i) => RUNS[*i].to_string(),
        RunPick::Bad(i) => BAD_RUNS[*i].to_string(),
    }
}

fn blob_ref(p: &RefPick) -> String {
    match p {
        RefPick::Valid { run, tail } => format!("{}{}", RUNS[*run], TAILS[*tail]),
        RefPick::Bad(i) => BAD_REFS[*i].to_string(),
    }
}

/// What a sequence did so far: the leases granted, in order.
#[derive(Default)]
struct Ctx {
    grants: Vec<Lease>,
}

impl Ctx {
    fn grant(&self, p: &GrantPick) -> Lease {
        match (p, self.grants.len()) {
            // Nothing granted yet: a lease nobody was granted.
            (_, 0) => Lease { run_id: RUNS[0].into(), owner: OWNERS[0].into(), epoch: Epoch(1) },
            (GrantPick::Newest, n) => self.grants[n - 1].clone(),
            (GrantPick::Index(i), n) => self.grants[i % n].clone(),
        }
    }

    fn lease(&self, p: &LeasePick) -> Lease {
        let base = self.grant(&p.grant);
        match p.forge {
            Forgery::AsGranted => base,
            Forgery::OtherOwner => Lease { owner: format!("{}-not", base.owner), ..base },
            Forgery::EpochBelow => Lease { epoch: Epoch(base.epoch.0.saturating_sub(1)), ..base },
            Forgery::EpochAbove => Lease { epoch: Epoch(base.epoch.0 + 1), ..base },
            Forgery::OtherRun(i) => Lease { run_id: RUNS[i].into(), ..base },
        }
    }
}

fn entry(seq: u64, b: &EntryBody) -> JournalEntry {
    let mut extra = Map::new();
    for (k, v) in &b.extra {
        extra.insert(ENTRY_EXTRA_KEYS[*k].to_string(), v.clone());
    }
    JournalEntry {
        seq: Seq(seq),
        kind: b.kind.clone(),
        status: b.status.clone(),
        key: b.key.clone(),
        ref_seq: b.ref_seq.map(Seq),
        value: b.value.clone(),
        extra,
    }
}

fn meta(run_id: String, b: &MetaBody) -> RunMeta {
    let mut extra = Map::new();
    for (k, v) in &b.extra {
        extra.insert(META_EXTRA_KEYS[*k].to_string(), v.clone());
    }
    RunMeta {
        run_id,
        status: b.status,
        updated_at: b.updated_at.clone(),
        segments: b.segments,
        genesis: b.genesis.clone(),
        name: b.name.map(|i| NAMES[i].to_string()),
        tags: b.tags.as_ref().map(|t| t.iter().map(|&i| TAGS[i].to_string()).collect()),
        workflow_name: b.workflow_name.clone(),
        workflow_hash: None,
        workflow_source_ref: None,
        extra,
    }
}

fn filter(f: &FilterPick) -> RunFilter {
    RunFilter {
        status: f.status,
        statuses: f.statuses.clone(),
        name: f.name.map(|i| NAMES[i].to_string()),
        tags: f.tags.as_ref().map(|t| t.iter().map(|&i| TAGS[i].to_string()).collect()),
    }
}

fn seq(p: &SeqPick, model: &Reference, run: &str) -> u64 {
    let max = model.state().journals.get(run).and_then(|j| j.iter().map(|e| e.seq.0).max());
    match (p, max) {
        (SeqPick::Next, m) => m.map_or(0, |m| m + 1),
        (SeqPick::Repeat, m) => m.unwrap_or(0),
        (SeqPick::Below, m) => m.unwrap_or(1).saturating_sub(1),
        (SeqPick::Jump(k), m) => m.map_or(*k, |m| m + k),
        (SeqPick::Limit, _) => SEQ_LIMIT,
        (SeqPick::OverLimit, _) => SEQ_LIMIT + 1,
    }
}

/// The call an op makes now; `None` for a clock move or a switch of connection (done here).
fn resolve(op: &Op, ctx: &Ctx, model: &Reference, subject: &dyn Subject) -> Option<Call> {
    let clock = subject.clock();
    let lease = |p: &Option<LeasePick>| p.as_ref().map(|p| ctx.lease(p));
    Some(match op {
        Op::Advance(ms) => {
            clock.advance(*ms);
            return None;
        }
        Op::SwitchInstance => {
            subject.switch_instance();
            return None;
        }
        Op::ToExpiry { grant, delta } => {
            if let Some(row) = model.lease_row(&ctx.grant(grant).run_id) {
                let target = row.expires_at_ms + delta;
                if target > clock.now_ms() {
                    clock.set(target);
                }
            }
            return None;
        }
        Op::Acquire { run, owner } => Call::Acquire { run_id: run_id(run), owner: OWNERS[*owner].into() },
        Op::Renew { lease } => Call::Renew { lease: ctx.lease(lease) },
        Op::Release { lease } => Call::Release { lease: ctx.lease(lease) },
        Op::Append { run, seq: s, body, lease: l } => {
            let run_id = run_id(run);
            Call::Append { entry: entry(seq(s, model, &run_id), body), run_id, lease: lease(l) }
        }
        Op::Load { run } => Call::Load { run_id: run_id(run) },
        Op::PutMeta { run, body, lease: l } => {
            Call::PutMeta { meta: meta(run_id(run), body), lease: lease(l) }
        }
        Op::GetMeta { run } => Call::GetMeta { run_id: run_id(run) },
        Op::ListRuns { filter: f } => Call::ListRuns { filter: filter(f) },
        Op::Delete { run, lease: l } => Call::Delete { run_id: run_id(run), lease: lease(l) },
        Op::BlobPut { blob, bytes, lease: l } => {
            Call::BlobPut { blob_ref: blob_ref(blob), bytes: bytes.clone(), lease: lease(l) }
        }
        Op::BlobGet { blob } => Call::BlobGet { blob_ref: blob_ref(blob) },
        Op::BlobList { run } => Call::BlobList { run_id: run_id(run) },
        Op::BlobDelete { blob, lease: l } => Call::BlobDelete { blob_ref: blob_ref(blob), lease: lease(l) },
    })
}

// ---------------------------------------------------------------------------------------
// The stores under test, driven through the SPI.

/// Run one call on a journal store and a transcript store.
fn on_store<J, T>(j: &J, t: &T, call: &Call) -> Result<Answer, StoreError>
where
    J: JournalStore + MetaLookup + LeasableStore,
    T: TranscriptStore,
{
    block_on(async {
        Ok(match call {
            Call::Acquire { run_id, owner } => Answer::Granted(j.acquire(run_id, owner).await?),
            Call::Renew { lease } => j.renew(lease).await.map(|()| Answer::Done)?,
            Call::Release { lease } => j.release(lease).await.map(|()| Answer::Done)?,
            Call::Append { run_id, entry, lease } => {
                j.append(run_id, entry, lease.as_ref()).await.map(|()| Answer::Done)?
            }
            Call::Load { run_id } => Answer::Entries(j.load(run_id).await?),
            Call::PutMeta { meta, lease } => j.put_meta(meta, lease.as_ref()).await.map(|()| Answer::Done)?,
            Call::GetMeta { run_id } => Answer::Meta(j.get_meta(run_id).await?.map(Box::new)),
            Call::ListRuns { filter } => Answer::Runs(j.list_runs(filter).await?),
            Call::Delete { run_id, lease } => {
                JournalStore::delete(j, run_id, lease.as_ref()).await.map(|()| Answer::Done)?
            }
            Call::BlobPut { blob_ref, bytes, lease } => {
                t.put(blob_ref, bytes, lease.as_ref()).await.map(|()| Answer::Done)?
            }
            Call::BlobGet { blob_ref } => Answer::Bytes(t.get(blob_ref).await?),
            Call::BlobList { run_id } => Answer::Refs(t.list(run_id).await?),
            Call::BlobDelete { blob_ref, lease } => {
                TranscriptStore::delete(t, blob_ref, lease.as_ref()).await.map(|()| Answer::Done)?
            }
        })
    })
}

/// A store under test, fresh for one sequence, on its own manual clock.
trait Subject {
    fn clock(&self) -> &ManualClock;
    /// Route later calls through the store's other connection, if it has one.
    fn switch_instance(&self);
    fn call(&self, call: &Call) -> Result<Answer, StoreError>;
    /// The model of this store's contract.
    fn model(&self) -> Reference;
    /// Compare the store's whole stored state with the model's, beyond what the API shows.
    fn stored_state_agrees(&self, model: &Reference) -> Result<(), String>;
}

struct Sqlite {
    _dir: tempfile::TempDir,
    path: PathBuf,
    clock: ManualClock,
    store: SqliteStore,
    blobs: SqliteTranscripts,
    /// A second store instance over the same file, on the same clock.
    other: SqliteStore,
    other_blobs: SqliteTranscripts,
    use_other: std::cell::Cell<bool>,
}

/// A temp dir on /dev/shm when there is one (as the simulator's database files).
fn temp_dir() -> tempfile::TempDir {
    let shm = Path::new("/dev/shm");
    if shm.is_dir() {
        if let Ok(d) = tempfile::tempdir_in(shm) {
            return d;
        }
    }
    tempfile::tempdir().expect("a temp dir")
}

impl Sqlite {
    fn open() -> Sqlite {
        let dir = temp_dir();
        let path = dir.path().join("store.db");
        let clock = ManualClock::starting_at(T0);
        let env = Rc::new(ManualEnv::new(clock.clone()));
        let options = SqliteOptions::new(&path).ttl_ms(TTL_MS).synchronous(Synchronous::Off);
        let store = block_on(SqliteStore::open(options.clone(), env.clone())).expect("open the store");
        let other = block_on(SqliteStore::open(options, env)).expect("open a second instance");
        let blobs = store.transcripts();
        let other_blobs = other.transcripts();
        Sqlite { _dir: dir, path, clock, store, blobs, other, other_blobs, use_other: Default::default() }
    }
}

/// The rows of one table through a raw connection, each as text.
fn rows(conn: &rusqlite::Connection, sql: &str) -> Vec<Vec<String>> {
    let mut stmt = conn.prepare(sql).expect("prepare");
    let width = stmt.column_count();
    stmt.query_map([], |r| {
        (0..width)
            .map(|i| {
                Ok(match r.get::<_, rusqlite::types::Value>(i)? {
                    rusqlite::types::Value::Text(t) => t,
                    rusqlite::types::Value::Integer(n) => n.to_string(),
                    rusqlite::types::Value::Blob(b) => format!("{b:?}"),
                    other => format!("{other:?}"),
                })
            })
            .collect::<rusqlite::Result<Vec<String>>>()
    })
    .expect("query")
    .collect::<rusqlite::Result<Vec<_>>>()
    .expect("rows")
}

impl Subject for Sqlite {
    fn clock(&self) -> &ManualClock {
        &self.clock
    }
    fn switch_instance(&self) {
        self.use_other.set(!self.use_other.get());
    }
    fn call(&self, call: &Call) -> Result<Answer, StoreError> {
        if self.use_other.get() {
            on_store(&self.other, &self.other_blobs, call)
        } else {
            on_store(&self.store, &self.blobs, call)
        }
    }
    fn model(&self) -> Reference {
        Reference::new(TTL_MS, Surfaces::SQLITE_CURRENT)
    }
    fn stored_state_agrees(&self, model: &Reference) -> Result<(), String> {
        let conn = rusqlite::Connection::open(&self.path).map_err(|e| e.to_string())?;
        let st = model.state();
        let mut want_entries = Vec::new();
        for (run, journal) in &st.journals {
            for e in journal {
                want_entries.push(vec![run.clone(), e.to_json()]);
            }
        }
        let checks = [
            ("entries", "SELECT run_id, payload FROM entries ORDER BY run_id, id", want_entries),
            (
                "meta",
                "SELECT run_id, payload FROM meta ORDER BY run_id",
                st.meta.iter().map(|(r, m)| vec![r.clone(), m.to_json()]).collect(),
            ),
            (
                "leases",
                "SELECT run_id, owner, epoch, expires_at FROM leases ORDER BY run_id",
                st.leases
                    .iter()
                    .map(|(r, l)| {
                        vec![r.clone(), l.owner.clone(), l.epoch.to_string(), l.expires_at_ms.to_string()]
                    })
                    .collect(),
            ),
            (
                "epochs",
                "SELECT run_id, epoch FROM epochs ORDER BY run_id",
                st.epochs.iter().map(|(r, e)| vec![r.clone(), e.to_string()]).collect(),
            ),
            ("blobs", "SELECT ref, run_id, data FROM blobs ORDER BY ref", {
                let mut b: Vec<Vec<String>> = st
                    .blobs
                    .iter()
                    .map(|(r, d)| {
                        vec![r.clone(), sim::oracle::contract::run_of_ref(r).to_string(), format!("{d:?}")]
                    })
                    .collect();
                b.sort();
                b
            }),
        ];
        for (table, sql, want) in checks {
            let got = rows(&conn, sql);
            if got != want {
                return Err(format!("table {table}: the store holds\n  {got:?}\nthe model\n  {want:?}"));
            }
        }
        Ok(())
    }
}

struct Memory {
    clock: ManualClock,
    store: InMemoryStore,
    blobs: InMemoryTranscriptStore,
}

impl Memory {
    fn open() -> Memory {
        let clock = ManualClock::starting_at(T0);
        let env = Rc::new(ManualEnv::new(clock.clone()));
        let store = InMemoryStore::new(env, TTL_MS).expect("a valid ttl");
        Memory { clock, store, blobs: InMemoryTranscriptStore::new() }
    }
}

impl Subject for Memory {
    fn clock(&self) -> &ManualClock {
        &self.clock
    }
    fn switch_instance(&self) {}
    fn call(&self, call: &Call) -> Result<Answer, StoreError> {
        on_store(&self.store, &self.blobs, call)
    }
    fn model(&self) -> Reference {
        Reference::new(TTL_MS, Surfaces::IN_MEMORY)
    }
    fn stored_state_agrees(&self, _model: &Reference) -> Result<(), String> {
        // Nothing beyond the API to read: the final reads in `run_sequence` are the state.
        Ok(())
    }
}

// ---------------------------------------------------------------------------------------
// Comparing answers.

/// The model's name for a store error; `None` for an error the model never predicts (Busy,
/// Corrupt, Storage, Config, Crashed in a sequential, fault-free, well-formed run).
fn refusal(e: &StoreError) -> Option<Refusal> {
    Some(match e {
        StoreError::LeaseHeld { run_id, reason } => {
            Refusal::LeaseHeld { run_id: run_id.clone(), reason: *reason }
        }
        StoreError::JournalOrderViolation { run_id, seq } => {
            Refusal::OrderViolation { run_id: run_id.clone(), seq: *seq }
        }
        StoreError::InvalidInput { what, .. } => Refusal::InvalidInput { what },
        _ => return None,
    })
}

/// The stored text of entries and records: equal values must also be equal text (key order
/// and float spelling included; `PartialEq` on JSON objects ignores key order).
fn text_of(a: &Answer) -> Vec<String> {
    match a {
        Answer::Entries(es) => es.iter().map(JournalEntry::to_json).collect(),
        Answer::Meta(m) => m.iter().map(|m| m.to_json()).collect(),
        Answer::Runs(ms) => ms.iter().map(RunMeta::to_json).collect(),
        _ => Vec::new(),
    }
}

/// Does the store's answer agree with the model's?
fn agrees(
    call: &Call,
    model: &Reference,
    want: &Result<Answer, Refusal>,
    got: &Result<Answer, StoreError>,
) -> bool {
    match (want, got) {
        (Err(w), Err(g)) => refusal(g).as_ref() == Some(w),
        (Ok(Answer::Runs(exact)), Ok(Answer::Runs(listed))) => {
            // Each run has one row: compare by run id, in any order; a `statuses` filter may
            // add rows the contract lets it over-match.
            let Call::ListRuns { filter } = call else { return false };
            let may_add = model.runs_a_store_may_add(filter);
            let mut sorted = listed.clone();
            sorted.sort_by(|a, b| a.run_id.cmp(&b.run_id));
            let extra: Vec<&RunMeta> =
                sorted.iter().filter(|m| !exact.iter().any(|e| e.run_id == m.run_id)).collect();
            let kept: Vec<RunMeta> =
                sorted.iter().filter(|m| exact.iter().any(|e| e.run_id == m.run_id)).cloned().collect();
            kept == *exact
                && text_of(&Answer::Runs(kept)) == text_of(&Answer::Runs(exact.clone()))
                && extra.iter().all(|m| may_add.iter().any(|a| a == *m))
                && sorted.windows(2).all(|w| w[0].run_id != w[1].run_id)
        }
        (Ok(w), Ok(g)) => w == g && text_of(w) == text_of(g),
        _ => false,
    }
}

/// One call on the store and the model at the store's clock; `Err` describes the
/// disagreement with the calls that led to it (`log`, to which the call is added).
fn step(
    subject: &dyn Subject,
    model: &mut Reference,
    call: &Call,
    log: &mut Vec<String>,
) -> Result<Result<Answer, StoreError>, String> {
    let now = subject.clock().now_ms();
    let want = model.apply(now, call);
    let got = subject.call(call);
    log.push(format!("t0+{}: {} -> {}", now - T0, show_call(call), show(&got)));
    if agrees(call, model, &want, &got) {
        Ok(got)
    } else {
        Err(format!(
            "the store and the model disagree at call {}:\n  store: {}\n  model: {}\ncalls:\n  {}",
            log.len(),
            show(&got),
            show_expected(&want),
            log.join("\n  ")
        ))
    }
}

/// As [`step`], when the answer itself is not needed further.
fn check(
    subject: &dyn Subject,
    model: &mut Reference,
    call: &Call,
    log: &mut Vec<String>,
) -> Result<(), String> {
    step(subject, model, call, log).map(drop)
}

/// The final state, through the API: the journal, meta row and listing of every run in
/// `runs`, every blob of `refs`, and the whole catalog; then the stored state.
fn final_state_agrees(
    subject: &dyn Subject,
    model: &mut Reference,
    runs: &[String],
    refs: &[String],
    log: &mut Vec<String>,
) -> Result<(), String> {
    log.push("final reads (only a disagreeing one is shown):".into());
    let mut finals: Vec<Call> = Vec::new();
    for run in runs {
        finals.push(Call::Load { run_id: run.clone() });
        finals.push(Call::GetMeta { run_id: run.clone() });
        finals.push(Call::BlobList { run_id: run.clone() });
    }
    for blob_ref in refs {
        finals.push(Call::BlobGet { blob_ref: blob_ref.clone() });
    }
    finals.push(Call::ListRuns { filter: RunFilter::default() });
    // Through each connection in turn (a store instance must not answer from a stale view).
    for _ in 0..2 {
        for call in &finals {
            check(subject, model, call, &mut log.clone())?;
        }
        subject.switch_instance();
    }
    subject
        .stored_state_agrees(model)
        .map_err(|e| format!("final stored state: {e}\ncalls:\n  {}", log.join("\n  ")))
}

/// Run one generated sequence against a fresh store and the model.
fn run_sequence(subject: &dyn Subject, ops: &[Op]) -> Result<(), String> {
    let mut model = subject.model();
    let mut ctx = Ctx::default();
    let mut log: Vec<String> = Vec::new();
    for op in ops {
        let Some(call) = resolve(op, &ctx, &model, subject) else {
            log.push(match op {
                Op::SwitchInstance => "switch to the other connection".into(),
                _ => format!("clock -> t0+{}", subject.clock().now_ms() - T0),
            });
            continue;
        };
        if let Ok(Answer::Granted(l)) = step(subject, &mut model, &call, &mut log)? {
            ctx.grants.push(l);
        }
    }
    let runs: Vec<String> = RUNS.iter().map(|r| r.to_string()).collect();
    let refs: Vec<String> = RUNS.iter().flat_map(|r| TAILS.iter().map(move |t| format!("{r}{t}"))).collect();
    final_state_agrees(subject, &mut model, &runs, &refs, &mut log)
}

fn show_lease(l: &Option<Lease>) -> String {
    match l {
        None => String::new(),
        Some(l) => format!(" under {}/{}/e{}", l.run_id, l.owner, l.epoch),
    }
}

/// A call in one short line (payloads elided to their seq or size).
fn show_call(c: &Call) -> String {
    match c {
        Call::Acquire { run_id, owner } => format!("acquire {run_id:?} by {owner}"),
        Call::Renew { lease } => format!("renew{}", show_lease(&Some(lease.clone()))),
        Call::Release { lease } => format!("release{}", show_lease(&Some(lease.clone()))),
        Call::Append { run_id, entry, lease } => {
            format!("append {run_id:?} seq {}{}", entry.seq, show_lease(lease))
        }
        Call::Load { run_id } => format!("load {run_id:?}"),
        Call::PutMeta { meta, lease } => format!(
            "put_meta {:?} {} name={:?} tags={:?}{}",
            meta.run_id,
            meta.status,
            meta.name,
            meta.tags,
            show_lease(lease)
        ),
        Call::GetMeta { run_id } => format!("get_meta {run_id:?}"),
        Call::ListRuns { filter } => format!(
            "list_runs status={:?} statuses={:?} name={:?} tags={:?}",
            filter.status, filter.statuses, filter.name, filter.tags
        ),
        Call::Delete { run_id, lease } => format!("delete {run_id:?}{}", show_lease(lease)),
        Call::BlobPut { blob_ref, bytes, lease } => {
            format!("blob put {blob_ref:?} ({} bytes){}", bytes.len(), show_lease(lease))
        }
        Call::BlobGet { blob_ref } => format!("blob get {blob_ref:?}"),
        Call::BlobList { run_id } => format!("blob list {run_id:?}"),
        Call::BlobDelete { blob_ref, lease } => format!("blob delete {blob_ref:?}{}", show_lease(lease)),
    }
}

/// The model's answer in the words of [`show`].
fn show_expected(r: &Result<Answer, Refusal>) -> String {
    match r {
        Ok(a) => show(&Ok(a.clone())),
        Err(e) => format!("Err({e:?})"),
    }
}

fn show(r: &Result<Answer, StoreError>) -> String {
    match r {
        Err(e) => format!("Err({e})"),
        Ok(Answer::Done) => "ok".into(),
        Ok(Answer::Granted(l)) => format!("lease e{}", l.epoch),
        Ok(Answer::Entries(es)) => format!("entries {:?}", es.iter().map(|e| e.seq.0).collect::<Vec<_>>()),
        Ok(Answer::Meta(m)) => format!("meta {:?}", m.as_ref().map(|m| (&m.run_id, m.status))),
        Ok(Answer::Runs(ms)) => {
            format!("runs {:?}", ms.iter().map(|m| m.run_id.as_str()).collect::<Vec<_>>())
        }
        Ok(Answer::Bytes(b)) => format!("bytes {:?}", b.as_ref().map(Vec::len)),
        Ok(Answer::Refs(r)) => format!("refs {r:?}"),
    }
}

/// proptest's configuration for these tests: `DEFAULT_CASES` from a fixed seed unless
/// `PROPTEST_CASES` / `PROPTEST_RNG_SEED` say otherwise, failures persisted to the committed
/// regressions file.
fn config() -> Config {
    suite::config(
        DEFAULT_CASES,
        concat!(env!("CARGO_MANIFEST_DIR"), "/proptest-regressions/store_vs_model.txt"),
    )
}

proptest! {
    #![proptest_config(config())]

    /// SqliteStore (current profile, a database file) answers every call as the model does
    /// and ends in the model's state, table by table.
    #[test]
    fn sqlite_store_agrees_with_the_reference_model(ops in ops()) {
        let subject = Sqlite::open();
        if let Err(e) = run_sequence(&subject, &ops) {
            return Err(TestCaseError::fail(e));
        }
    }

    /// The in-memory store and transcript store answer as the model does under their
    /// declared surfaces (no fenced meta, delete or blobs; blobs listed in first-put order).
    #[test]
    fn in_memory_store_agrees_with_the_reference_model(ops in ops()) {
        let subject = Memory::open();
        if let Err(e) = run_sequence(&subject, &ops) {
            return Err(TestCaseError::fail(e));
        }
    }

    /// Journal-heavy sequences on two runs (the order rule over journals of several entries):
    /// SqliteStore answers as the model does.
    #[test]
    fn sqlite_store_journals_agree_with_the_reference_model(ops in journal_ops()) {
        let subject = Sqlite::open();
        if let Err(e) = run_sequence(&subject, &ops) {
            return Err(TestCaseError::fail(e));
        }
    }

    /// And the in-memory store.
    #[test]
    fn in_memory_store_journals_agree_with_the_reference_model(ops in journal_ops()) {
        let subject = Memory::open();
        if let Err(e) = run_sequence(&subject, &ops) {
            return Err(TestCaseError::fail(e));
        }
    }

    /// The store crate's shared predicate (`RunFilter::matches`, rulvar's `metaMatchesFilter`,
    /// which callers filter with after a store's `statuses` superset) answers exactly as the
    /// contract's own reading of it does (docs/store-contract.md 1.3: `statuses: []` alone
    /// matches nothing): a listing may over-match, the predicate may not.
    #[test]
    fn the_shared_filter_predicate_agrees_with_the_contract(f in filter_pick(), b in meta_body()) {
        let (f, m) = (filter(&f), meta("run-1".into(), &b));
        let text = serde_json::to_string(&m).map_err(|e| TestCaseError::fail(e.to_string()))?;
        let view = MetaView::parse(&text).ok_or_else(|| TestCaseError::fail(format!("unreadable meta {text}")))?;
        prop_assert_eq!(f.matches(&m), filter_matches(&f, &view), "filter {:?} over meta {}", f, text);
    }
}

// ---------------------------------------------------------------------------------------
// Input-space properties.

/// Run ids with the shapes that break naive matching: the pools above, ids built around a
/// LIKE wildcard (`%`, `_`), a dot or a slash, unicode, the empty id, very long ids.
fn adversarial_id() -> impl Strategy<Value = String> {
    let known: Vec<String> = RUNS.iter().chain(BAD_RUNS).map(|s| s.to_string()).collect();
    prop_oneof![
        3 => prop::sample::select(known),
        2 => "[rR_%.x1/-]{0,4}",
        2 => ("[a-z]{1,2}", "[_%./-]", "[a-z0-9]{0,2}").prop_map(|(a, b, c)| format!("{a}{b}{c}")),
        1 => "\\PC{0,3}",
        1 => (250..400usize, "[a-z_]").prop_map(|(n, c)| c.repeat(n)),
    ]
}

/// Two ids' data stay apart: what is written under `a` is never read, listed, fenced or
/// deleted through `b` (unless `a == b`), and an id a store must refuse is refused typed
/// with nothing changed, exactly as the model says.
fn ids_stay_apart(subject: &dyn Subject, a: &str, b: &str) -> Result<(), String> {
    let mut model = subject.model();
    let mut log = Vec::new();
    let body = EntryBody {
        kind: "k".into(),
        status: "ok".into(),
        key: String::new(),
        ref_seq: None,
        value: Value::from(a),
        extra: Vec::new(),
    };
    let tagged = MetaBody {
        status: RunStatus::Running,
        updated_at: None,
        segments: Some(1),
        genesis: None,
        name: Some(0),
        tags: Some(vec![2]),
        workflow_name: None,
        extra: Vec::new(),
    };
    let granted =
        step(subject, &mut model, &Call::Acquire { run_id: a.into(), owner: "w1".into() }, &mut log)?;
    let la = match granted {
        Ok(Answer::Granted(l)) => Some(l),
        _ => None,
    };
    for call in [
        Call::Append { run_id: a.into(), entry: entry(0, &body), lease: la.clone() },
        Call::PutMeta { meta: meta(a.into(), &tagged), lease: la.clone() },
        Call::BlobPut { blob_ref: format!("{a}/x"), bytes: a.as_bytes().to_vec(), lease: la.clone() },
        Call::BlobPut { blob_ref: a.into(), bytes: vec![1], lease: la.clone() },
        Call::Load { run_id: b.into() },
        Call::GetMeta { run_id: b.into() },
        Call::BlobList { run_id: b.into() },
        Call::BlobGet { blob_ref: format!("{b}/x") },
        Call::ListRuns { filter: RunFilter { name: Some(NAMES[0].into()), ..RunFilter::default() } },
        Call::ListRuns { filter: RunFilter { tags: Some(vec![TAGS[2].into()]), ..RunFilter::default() } },
        Call::Acquire { run_id: b.into(), owner: "w2".into() },
    ] {
        check(subject, &mut model, &call, &mut log)?;
    }
    // `a`'s lease guards nothing of `b`; then `b` goes away, unleased.
    if let Some(la) = &la {
        for call in [
            Call::Append { run_id: b.into(), entry: entry(1, &body), lease: Some(la.clone()) },
            Call::BlobPut { blob_ref: format!("{b}/y"), bytes: vec![2], lease: Some(la.clone()) },
            Call::Delete { run_id: b.into(), lease: Some(la.clone()) },
        ] {
            check(subject, &mut model, &call, &mut log)?;
        }
    }
    check(subject, &mut model, &Call::Delete { run_id: b.into(), lease: None }, &mut log)?;
    let runs = [a.to_string(), b.to_string()];
    let refs = [format!("{a}/x"), a.to_string(), format!("{b}/x"), format!("{b}/y"), b.to_string()];
    final_state_agrees(subject, &mut model, &runs, &refs, &mut log)
}

/// Entries, meta records and blobs written and read back: the same values and the same
/// bytes (key order, float spelling, large integers, nested arrays, unicode), last write wins.
fn payloads_round_trip(
    subject: &dyn Subject,
    entries: &[EntryBody],
    metas: &[MetaBody],
    blobs: &[Vec<u8>],
) -> Result<(), String> {
    let mut model = subject.model();
    let mut log = Vec::new();
    for (i, body) in entries.iter().enumerate() {
        let call = Call::Append { run_id: "r".into(), entry: entry(2 * i as u64, body), lease: None };
        check(subject, &mut model, &call, &mut log)?;
        check(subject, &mut model, &Call::Load { run_id: "r".into() }, &mut log)?;
    }
    for body in metas {
        check(subject, &mut model, &Call::PutMeta { meta: meta("r".into(), body), lease: None }, &mut log)?;
        check(subject, &mut model, &Call::GetMeta { run_id: "r".into() }, &mut log)?;
    }
    for (i, bytes) in blobs.iter().enumerate() {
        let blob_ref = format!("r/b{}", i % 2);
        check(
            subject,
            &mut model,
            &Call::BlobPut { blob_ref: blob_ref.clone(), bytes: bytes.clone(), lease: None },
            &mut log,
        )?;
        check(subject, &mut model, &Call::BlobGet { blob_ref }, &mut log)?;
    }
    final_state_agrees(subject, &mut model, &["r".into()], &["r/b0".into(), "r/b1".into()], &mut log)
}

/// A JSON value that is not a journal entry (store-contract 1.1 envelope; the Rust port's
/// seq bound): not an object, or an object with `seq`, `kind`, `status`, `key` or `ref`
/// missing or of the wrong type.
fn not_an_entry() -> impl Strategy<Value = Value> {
    let bad_seq = prop_oneof![
        Just(Value::Null),
        Just(Value::from(-1)),
        Just(Value::from(1.5)),
        Just(Value::from(SEQ_LIMIT + 1)),
        "\\PC{0,4}".prop_map(Value::String),
        Just(Value::Array(vec![])),
    ];
    let base =
        |seq: Option<Value>, kind: Option<Value>, status: Option<Value>, extra: Vec<(String, Value)>| {
            let mut m = Map::new();
            for (k, v) in [("seq", seq), ("kind", kind), ("status", status)] {
                if let Some(v) = v {
                    m.insert(k.to_string(), v);
                }
            }
            for (k, v) in extra {
                m.insert(k, v);
            }
            Value::Object(m)
        };
    let extra = || {
        prop::collection::vec(
            (
                "[a-z]{1,3}".prop_filter("not envelope", |k| {
                    !matches!(k.as_str(), "seq" | "kind" | "status" | "key" | "ref" | "value")
                }),
                json_value(),
            ),
            0..3,
        )
    };
    prop_oneof![
        json_value().prop_filter("not an object", |v| !v.is_object()),
        (bad_seq, extra()).prop_map(move |(s, x)| base(Some(s), Some("k".into()), Some("ok".into()), x)),
        extra().prop_map(move |x| base(None, Some("k".into()), Some("ok".into()), x)),
        (json_value().prop_filter("not text", |v| !v.is_string()), extra()).prop_map(move |(k, x)| base(
            Some(0.into()),
            Some(k),
            Some("ok".into()),
            x
        )),
        extra().prop_map(move |x| base(Some(0.into()), Some("k".into()), None, x)),
        json_value().prop_filter("not text or null", |v| !v.is_string() && !v.is_null()).prop_map(move |k| {
            let mut v = base(Some(0.into()), Some("k".into()), Some("ok".into()), vec![]);
            v["key"] = k;
            v
        }),
        Just(Value::Null).prop_map(move |_| {
            let mut v = base(Some(0.into()), Some("k".into()), Some("ok".into()), vec![]);
            v["ref"] = Value::from("seven");
            v
        }),
    ]
}

/// A JSON value that is not a meta record of run `r`: not an object, or `status` missing or
/// not a status word, or `runId` missing or not text, or a named field of the wrong type.
fn not_a_meta() -> impl Strategy<Value = Value> {
    let record = |field: &'static str, v: Option<Value>| {
        let mut m = Map::new();
        m.insert("runId".into(), Value::from("r"));
        m.insert("status".into(), Value::from("running"));
        match v {
            Some(v) => m.insert(field.to_string(), v),
            None => m.remove(field),
        };
        Value::Object(m)
    };
    prop_oneof![
        json_value().prop_filter("not an object", |v| !v.is_object()),
        Just(record("status", None)),
        Just(record("runId", None)),
        "[a-z]{0,8}"
            .prop_filter("not a status word", |w| RunStatus::parse(w).is_none())
            .prop_map(move |w| record("status", Some(Value::from(w)))),
        json_value().prop_filter("not text", |v| !v.is_string()).prop_map(move |v| record("runId", Some(v))),
        prop_oneof![Just(Value::from(-1)), Just(Value::from(0.5)), Just(Value::from("2"))]
            .prop_map(move |v| record("segments", Some(v))),
        prop_oneof![Just(Value::from("a")), Just(serde_json::json!(["a", 1]))]
            .prop_map(move |v| record("tags", Some(v))),
        prop_oneof![Just(Value::from(1)), Just(Value::Bool(true))].prop_map(move |v| record("name", Some(v))),
        Just(Value::from(5)).prop_map(move |v| record("updatedAt", Some(v))),
    ]
}

/// Every table's rows, to show a read changed nothing.
fn dump(path: &Path) -> Vec<Vec<Vec<String>>> {
    let conn = rusqlite::Connection::open(path).expect("raw connection");
    [
        "SELECT id, run_id, payload FROM entries ORDER BY id",
        "SELECT run_id, payload FROM meta ORDER BY run_id",
        "SELECT run_id, owner, epoch, expires_at FROM leases ORDER BY run_id",
        "SELECT run_id, epoch FROM epochs ORDER BY run_id",
        "SELECT ref, run_id, data FROM blobs ORDER BY ref",
    ]
    .iter()
    .map(|sql| rows(&conn, sql))
    .collect()
}

fn is_corrupt(r: &Result<impl std::fmt::Debug, StoreError>, key: &str) -> bool {
    matches!(r, Err(StoreError::Corrupt { key: k, .. }) if k == key)
}

/// A stored entry or meta payload that does not decode is a typed `Corrupt` naming the run,
/// on every read that decodes it, never a panic; the reads change nothing; other runs read on.
fn malformed_payloads_are_corrupt(bad_entry: &Value, bad_meta: &Value) -> Result<(), String> {
    // The generators agree with the oracle's own reading of the contract.
    let entry_text = bad_entry.to_string();
    let meta_text = bad_meta.to_string();
    if sim::oracle::contract::EntryView::parse(&entry_text).is_some() {
        return Err(format!("the generator made a decodable entry: {entry_text}"));
    }
    if sim::oracle::contract::MetaView::parse(&meta_text).is_some() {
        return Err(format!("the generator made a decodable meta record: {meta_text}"));
    }
    let s = Sqlite::open();
    let good = JournalEntry::new(0, "k", "ok", Value::Null);
    let ok_meta = RunMeta::new("r1", RunStatus::Running);
    block_on(async {
        s.store.append("r1", &good, None).await.map_err(|e| e.to_string())?;
        s.store.put_meta(&ok_meta, None).await.map_err(|e| e.to_string())
    })?;
    {
        let conn = rusqlite::Connection::open(&s.path).map_err(|e| e.to_string())?;
        conn.execute("INSERT INTO entries(run_id, payload) VALUES ('r', ?1)", [&entry_text])
            .map_err(|e| e.to_string())?;
        conn.execute("INSERT INTO meta(run_id, payload) VALUES ('r', ?1)", [&meta_text])
            .map_err(|e| e.to_string())?;
    }
    let before = dump(&s.path);
    let (load, get, list, load_other, get_other) = block_on(async {
        (
            s.store.load("r").await,
            s.store.get_meta("r").await,
            s.store.list_runs(&RunFilter::default()).await,
            s.store.load("r1").await,
            s.store.get_meta("r1").await,
        )
    });
    let mut wrong = Vec::new();
    if !is_corrupt(&load, "r") {
        wrong.push(format!("load r: {load:?}"));
    }
    if !is_corrupt(&get, "r") {
        wrong.push(format!("get_meta r: {get:?}"));
    }
    if !is_corrupt(&list, "r") {
        wrong.push(format!("list_runs: {list:?}"));
    }
    if load_other.as_ref().map(Vec::len) != Ok(1) {
        wrong.push(format!("load r1: {load_other:?}"));
    }
    if get_other != Ok(Some(ok_meta)) {
        wrong.push(format!("get_meta r1: {get_other:?}"));
    }
    // A filtered listing may skip the row in SQL or decode it: either a typed answer.
    for f in [
        RunFilter { status: Some(RunStatus::Running), ..RunFilter::default() },
        RunFilter { name: Some("n".into()), ..RunFilter::default() },
        RunFilter::resumable(),
    ] {
        let r = block_on(s.store.list_runs(&f));
        if !(r.is_ok() || is_corrupt(&r, "r")) {
            wrong.push(format!("list_runs {f:?}: {r:?}"));
        }
    }
    if dump(&s.path) != before {
        wrong.push("a read changed the stored state".into());
    }
    if wrong.is_empty() {
        Ok(())
    } else {
        Err(format!("entry {entry_text}, meta {meta_text}:\n  {}", wrong.join("\n  ")))
    }
}

proptest! {
    #![proptest_config(config())]

    /// Adversarial run ids on SqliteStore: exact matching everywhere, typed refusals of
    /// unsafe ids that change nothing.
    #[test]
    fn sqlite_store_keeps_adversarial_ids_apart(a in adversarial_id(), b in adversarial_id()) {
        if let Err(e) = ids_stay_apart(&Sqlite::open(), &a, &b) {
            return Err(TestCaseError::fail(e));
        }
    }

    /// The same on the in-memory stores.
    #[test]
    fn in_memory_store_keeps_adversarial_ids_apart(a in adversarial_id(), b in adversarial_id()) {
        if let Err(e) = ids_stay_apart(&Memory::open(), &a, &b) {
            return Err(TestCaseError::fail(e));
        }
    }

    /// Payloads round-trip byte for byte on SqliteStore.
    #[test]
    fn sqlite_store_round_trips_payloads_byte_for_byte(
        entries in prop::collection::vec(entry_body(), 1..5),
        metas in prop::collection::vec(meta_body(), 1..4),
        blobs in prop::collection::vec(prop::collection::vec(any::<u8>(), 0..300), 1..4),
    ) {
        if let Err(e) = payloads_round_trip(&Sqlite::open(), &entries, &metas, &blobs) {
            return Err(TestCaseError::fail(e));
        }
    }

    /// And on the in-memory stores.
    #[test]
    fn in_memory_store_round_trips_payloads_byte_for_byte(
        entries in prop::collection::vec(entry_body(), 1..5),
        metas in prop::collection::vec(meta_body(), 1..4),
        blobs in prop::collection::vec(prop::collection::vec(any::<u8>(), 0..300), 1..4),
    ) {
        if let Err(e) = payloads_round_trip(&Memory::open(), &entries, &metas, &blobs) {
            return Err(TestCaseError::fail(e));
        }
    }

    /// Malformed stored payloads surface as typed `Corrupt` on SqliteStore.
    #[test]
    fn sqlite_store_reports_malformed_stored_payloads_as_corrupt(e in not_an_entry(), m in not_a_meta()) {
        if let Err(e) = malformed_payloads_are_corrupt(&e, &m) {
            return Err(TestCaseError::fail(e));
        }
    }
}

/// The generator is not vacuous: over the default sequences, run against the model alone,
/// every kind of answer the differential tests compare occurs, and the clock lands exactly
/// on a lease's expiry instant.
/// `SqliteOptions::page_size`'s domain is SQLite's (a power of two in 512..=65536): a size in
/// it opens a new file with exactly that page size (read back through a plain connection), a
/// size outside it is refused with `Config` before the file exists.
#[test]
fn page_sizes_in_sqlites_domain_open_and_others_are_refused() {
    let sizes = [0u32, 256, 511, 512, 768, 1024, 1000, 4096, 32768, 65535, 65536, 131072];
    for size in sizes {
        let dir = temp_dir();
        let path = dir.path().join("store.db");
        let env = Rc::new(ManualEnv::new(ManualClock::starting_at(T0)));
        let options = SqliteOptions::new(&path).ttl_ms(TTL_MS).synchronous(Synchronous::Off).page_size(size);
        let opened = block_on(SqliteStore::open(options, env));
        let in_domain = (512..=65536).contains(&size) && size.is_power_of_two();
        match opened {
            Ok(_) => {
                assert!(in_domain, "page size {size} outside SQLite's domain was accepted");
                let conn = rusqlite::Connection::open(&path).expect("open the file");
                let got: u32 = conn.query_row("PRAGMA page_size", [], |r| r.get(0)).expect("page size");
                assert_eq!(got, size, "a new file opened with page size {size} has {got}-byte pages");
            }
            Err(e) => {
                assert!(!in_domain, "page size {size} in SQLite's domain was refused: {e}");
                assert!(
                    matches!(e, StoreError::Config(_)),
                    "page size {size}: refused with {e:?}, not Config"
                );
                assert!(!path.exists(), "page size {size}: refused, yet the file exists");
            }
        }
    }
}

#[test]
fn generated_sequences_reach_every_kind_of_answer() {
    use proptest::strategy::ValueTree;
    use std::collections::BTreeMap;
    let mut runner =
        proptest::test_runner::TestRunner::new(Config { rng_seed: RngSeed::Fixed(17), ..Config::default() });
    let mut seen: BTreeMap<String, u32> = BTreeMap::new();
    for _ in 0..DEFAULT_CASES {
        let ops = ops().new_tree(&mut runner).expect("a sequence").current();
        let subject = Memory::open();
        let clock = subject.clock();
        let mut model = Reference::new(TTL_MS, Surfaces::SQLITE_CURRENT);
        let mut ctx = Ctx::default();
        for op in &ops {
            let Some(call) = resolve(op, &ctx, &model, &subject) else { continue };
            let now = clock.now_ms();
            let on_expiry = match &call {
                Call::Renew { lease } | Call::Release { lease } => {
                    model.lease_row(&lease.run_id).is_some_and(|r| r.expires_at_ms == now)
                }
                Call::Acquire { run_id, .. } => {
                    model.lease_row(run_id).is_some_and(|r| r.expires_at_ms == now)
                }
                _ => false,
            };
            if on_expiry {
                *seen.entry("a lease call at the expiry instant".into()).or_default() += 1;
            }
            if let Call::Append { lease: Some(l), .. }
            | Call::PutMeta { lease: Some(l), .. }
            | Call::BlobPut { lease: Some(l), .. } = &call
            {
                if model.lease_row(&l.run_id).is_some_and(|r| r.expires_at_ms == now && r.epoch == l.epoch.0)
                {
                    *seen.entry("a fenced write at its lease's expiry instant".into()).or_default() += 1;
                }
            }
            let kind = match model.apply(now, &call) {
                Ok(Answer::Granted(l)) => {
                    ctx.grants.push(l);
                    "granted".to_string()
                }
                Ok(Answer::Entries(e)) if !e.is_empty() => "entries".into(),
                Ok(Answer::Meta(Some(_))) => "meta".into(),
                Ok(Answer::Runs(r)) if !r.is_empty() => "runs".into(),
                Ok(Answer::Bytes(Some(_))) => "bytes".into(),
                Ok(Answer::Refs(r)) if !r.is_empty() => "refs".into(),
                Ok(_) => format!("ok {}", show_call(&call).split(' ').next().unwrap_or("")),
                Err(Refusal::LeaseHeld { reason, .. }) => format!("lease_held {reason}"),
                Err(Refusal::OrderViolation { .. }) => "order violation".into(),
                Err(Refusal::InvalidInput { what }) => format!("invalid {what}"),
            };
            *seen.entry(kind).or_default() += 1;
        }
    }
    let must = [
        "a lease call at the expiry instant",
        "a fenced write at its lease's expiry instant",
        "granted",
        "entries",
        "meta",
        "runs",
        "bytes",
        "refs",
        "ok append",
        "ok renew",
        "ok release",
        "ok delete",
        "ok put_meta",
        "ok blob",
        "lease_held held_on_acquire",
        "lease_held stale_epoch",
        "lease_held foreign_owner",
        "lease_held expired",
        "lease_held not_held",
        "lease_held run_mismatch",
        "order violation",
        "invalid run id",
        "invalid blob ref",
        "invalid journal entry seq",
    ];
    let missing: Vec<&str> = must.iter().copied().filter(|k| !seen.contains_key(*k)).collect();
    assert!(missing.is_empty(), "never reached: {missing:?}; reached: {seen:?}");
}

// ---------------------------------------------------------------------------------------
// Fields that repeat a named one: outside what the sequences generate. This test file found
// that the store accepted such a write and then could not read the run back; the store now
// refuses it typed (`RunMeta::validate`, `JournalEntry::validate`), and these hold it to that.

/// A3 (read your writes): an append the store accepted is loadable. An entry whose `extra`
/// repeats an envelope field (`kind` here) was accepted, stored with a duplicate key, and every
/// later `load` of the run was `Corrupt`. The contract leaves two correct answers: refuse it
/// typed (nothing changed) or load it.
#[test]
fn an_append_whose_extra_repeats_an_envelope_field_is_refused_or_loadable() {
    let s = Sqlite::open();
    let mut e = JournalEntry::new(0, "k", "ok", Value::Null);
    e.extra.insert("kind".into(), Value::from("other"));
    let before = dump(&s.path);
    match block_on(s.store.append("r", &e, None)) {
        Err(StoreError::InvalidInput { .. }) => {
            assert_eq!(dump(&s.path), before, "a refusal changed nothing")
        }
        Err(other) => panic!("untyped refusal {other:?}"),
        Ok(()) => {
            let loaded = block_on(s.store.load("r"));
            assert!(loaded.as_ref().is_ok_and(|l| l.len() == 1), "accepted, then load gives {loaded:?}");
        }
    }
}

/// 1.2/1.3: a record `put_meta` accepted is returned by `get_meta` and `list_runs`. A record
/// whose `extra` repeats `status` was accepted and then `Corrupt` on `get_meta` and on every
/// unfiltered `list_runs`, so one write hid every other run's meta from the catalog.
#[test]
fn a_meta_record_whose_extra_repeats_a_named_field_is_refused_or_listable() {
    let s = Sqlite::open();
    block_on(s.store.put_meta(&RunMeta::new("a", RunStatus::Running), None)).expect("a plain record");
    let mut m = RunMeta::new("b", RunStatus::Running);
    m.extra.insert("status".into(), Value::from("ok"));
    let before = dump(&s.path);
    match block_on(s.store.put_meta(&m, None)) {
        Err(StoreError::InvalidInput { .. }) => {
            assert_eq!(dump(&s.path), before, "a refusal changed nothing")
        }
        Err(other) => panic!("untyped refusal {other:?}"),
        Ok(()) => {
            let got = block_on(s.store.get_meta("b"));
            assert!(matches!(got, Ok(Some(_))), "accepted, then get_meta gives {got:?}");
            let all = block_on(s.store.list_runs(&RunFilter::default()));
            assert!(all.as_ref().is_ok_and(|l| l.len() == 2), "accepted, then list_runs gives {all:?}");
        }
    }
}
