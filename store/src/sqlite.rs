//! `SqliteStore`: rulvar's reference store over rusqlite (bundled SQLite), and its
//! transcript twin whose blobs live in the same database.
//!
//! Durability model:
//! - One connection per store instance; every process (simulated or real) builds its own
//!   store over the shared database file. WAL journal mode; `busy_timeout` is 0, so a
//!   write that meets another connection's write lock fails at once with `Busy` (rulvar's
//!   "fail fast (busy 0)"); only the constructor's bootstrap retries, and it sleeps through
//!   the injected environment (virtual time in the simulator).
//! - A call is durable when its COMMIT (or its single autocommit statement) returns. The
//!   `*.after_commit` fault point fires right then, before the call returns: a crash there
//!   leaves a durable mutation whose caller never heard back.
//! - A process that dies inside a transaction loses it: dropping the store's transaction
//!   guard (which is what killing a simulated node does) issues ROLLBACK.
//! - `synchronous` is a constructor option: the simulator uses OFF because it models
//!   process crashes, not power loss (see `sim`'s world); real processes keep FULL.
//!
//! Fencing model (profile switches, see `profile.rs`):
//! - `Atomic`: a lease-carrying mutation runs `BEGIN IMMEDIATE`, the fence check, the
//!   mutation, COMMIT, as one transaction. The write lock is taken before the check reads
//!   the lease row, so a competing acquire on another connection gets `Busy` instead of
//!   landing between check and mutation.
//! - `Split` (v1.44.0, F3): the check is one autocommit SELECT and the mutation another
//!   autocommit statement; the fault point between them is the window in which another
//!   process can take the lease over.
//! - The run-match rule, the lease on meta/delete/blobs, owner-and-epoch pinning in
//!   renew/release, and the epoch tombstone are each one switch.
//!
//! Every call on one instance is serialized by a FIFO lock (rulvar's calls are synchronous
//! per connection), so a transaction held across a fault point never overlaps another call
//! of the same process.

use std::path::{Path, PathBuf};
use std::rc::Rc;
use std::time::Duration;

use rusqlite::types::Value as SqlValue;
use rusqlite::{Connection, OpenFlags, OptionalExtension};

use crate::env::{Env, FaultSite};
use crate::error::{LeaseRefusal, Result, StoreError};
use crate::fault::FaultPoint;
use crate::profile::{BootRetry, FenceTxn, Profile};
use crate::spi::{JournalStore, LeasableStore, MetaLookup, TranscriptStore};
use crate::sync::FifoLock;
use crate::types::{
    run_of_ref, validate_owner, validate_ref, validate_run_id, Epoch, JournalEntry, Lease, RunFilter, RunMeta,
};

/// rulvar's default lease ttl.
pub const DEFAULT_TTL_MS: i64 = 60_000;
/// The largest ttl rulvar accepts (a 32-bit signed millisecond count).
pub const TTL_MS_MAX: i64 = 2_147_483_647;

/// SQLite's `synchronous` pragma, set on the store's connection.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Synchronous {
    Off,
    Normal,
    Full,
}

impl Synchronous {
    fn pragma(self) -> &'static str {
        match self {
            Synchronous::Off => "PRAGMA synchronous=OFF",
            Synchronous::Normal => "PRAGMA synchronous=NORMAL",
            Synchronous::Full => "PRAGMA synchronous=FULL",
        }
    }
}

/// Construction options.
#[derive(Clone, Debug)]
pub struct SqliteOptions {
    /// The database file, or `:memory:`.
    pub path: PathBuf,
    /// The lease ttl in milliseconds; must be in `1..=2147483647` (checked before the
    /// database is opened). Default 60000.
    pub ttl_ms: i64,
    /// Which historical behaviour to run. Default `current`.
    pub profile: Profile,
    /// Default FULL; the simulator uses OFF.
    pub synchronous: Synchronous,
    /// The page size a NEW database file is created with (SQLite ignores it for an existing
    /// one). Default `None`: SQLite's default, 4096, as rulvar. The simulator uses 1024.
    pub page_size: Option<u32>,
}

impl SqliteOptions {
    pub fn new(path: impl AsRef<Path>) -> SqliteOptions {
        SqliteOptions {
            path: path.as_ref().to_path_buf(),
            ttl_ms: DEFAULT_TTL_MS,
            profile: Profile::current(),
            synchronous: Synchronous::Full,
            page_size: None,
        }
    }
    pub fn ttl_ms(mut self, ttl_ms: i64) -> SqliteOptions {
        self.ttl_ms = ttl_ms;
        self
    }
    pub fn profile(mut self, profile: Profile) -> SqliteOptions {
        self.profile = profile;
        self
    }
    pub fn synchronous(mut self, synchronous: Synchronous) -> SqliteOptions {
        self.synchronous = synchronous;
        self
    }
    /// See [`SqliteOptions::page_size`]; a size SQLite does not accept (not a power of two
    /// in 512..=65536) is refused by `open` with `Config`, before the file exists.
    pub fn page_size(mut self, bytes: u32) -> SqliteOptions {
        self.page_size = Some(bytes);
        self
    }
}

/// Validate a ttl as rulvar does (L6): an integer in `1..=2147483647` ms.
pub fn validate_ttl_ms(ttl_ms: i64) -> Result<()> {
    if (1..=TTL_MS_MAX).contains(&ttl_ms) {
        Ok(())
    } else {
        Err(StoreError::Config(format!("lease ttl must be an integer in 1..={TTL_MS_MAX} ms, got {ttl_ms}")))
    }
}

/// The schema, statement by statement; every statement is idempotent.
const TABLES: &[&str] = &[
    "CREATE TABLE IF NOT EXISTS entries (id INTEGER PRIMARY KEY AUTOINCREMENT, run_id TEXT NOT NULL, payload TEXT NOT NULL)",
    "CREATE TABLE IF NOT EXISTS meta (run_id TEXT PRIMARY KEY, payload TEXT NOT NULL)",
    "CREATE TABLE IF NOT EXISTS leases (run_id TEXT PRIMARY KEY, owner TEXT NOT NULL, epoch INTEGER NOT NULL, expires_at INTEGER NOT NULL)",
    "CREATE TABLE IF NOT EXISTS epochs (run_id TEXT PRIMARY KEY, epoch INTEGER NOT NULL)",
    "CREATE TABLE IF NOT EXISTS blobs (ref TEXT PRIMARY KEY, run_id TEXT NOT NULL, data BLOB NOT NULL)",
];
const INDEXES: &[&str] = &[
    "CREATE INDEX IF NOT EXISTS entries_by_run ON entries(run_id, id)",
    "CREATE INDEX IF NOT EXISTS entries_run_seq ON entries(run_id, CAST(json_extract(payload,'$.seq') AS INTEGER))",
    "CREATE INDEX IF NOT EXISTS meta_by_status ON meta(json_extract(payload,'$.status'))",
    "CREATE INDEX IF NOT EXISTS meta_by_name ON meta(json_extract(payload,'$.name'))",
    "CREATE INDEX IF NOT EXISTS blobs_by_run ON blobs(run_id)",
];

/// The A5 conditional insert: the entry lands only if no stored entry of the run has a seq
/// at or above it.
const INSERT_ENTRY_A5: &str = "INSERT INTO entries(run_id, payload) SELECT ?1, ?2 WHERE NOT EXISTS \
     (SELECT 1 FROM entries WHERE run_id = ?1 AND CAST(json_extract(payload,'$.seq') AS INTEGER) >= ?3)";
const UPSERT_META: &str = "INSERT INTO meta(run_id, payload) VALUES (?1, ?2) \
     ON CONFLICT(run_id) DO UPDATE SET payload = excluded.payload";
const UPSERT_BLOB: &str = "INSERT INTO blobs(ref, run_id, data) VALUES (?1, ?2, ?3) \
     ON CONFLICT(ref) DO UPDATE SET run_id = excluded.run_id, data = excluded.data";

/// Is this rusqlite error in the SQLITE_BUSY family (`extended & 0xff == 5`)?
pub fn busy_code(e: &rusqlite::Error) -> Option<i32> {
    match e {
        rusqlite::Error::SqliteFailure(f, _) if f.extended_code & 0xff == 5 => Some(f.extended_code),
        _ => None,
    }
}

fn map_sql(during: &'static str) -> impl Fn(rusqlite::Error) -> StoreError {
    move |e| match busy_code(&e) {
        Some(code) => StoreError::Busy { code, during },
        None => StoreError::Storage { during, message: e.to_string() },
    }
}

/// The fault points of one mutating operation.
struct OpPoints {
    before_begin: FaultPoint,
    after_check: FaultPoint,
    before_commit: FaultPoint,
    after_commit: FaultPoint,
}

const APPEND: OpPoints = OpPoints {
    before_begin: FaultPoint::SqliteAppendBeforeBegin,
    after_check: FaultPoint::SqliteAppendAfterCheck,
    before_commit: FaultPoint::SqliteAppendBeforeCommit,
    after_commit: FaultPoint::SqliteAppendAfterCommit,
};
const PUT_META: OpPoints = OpPoints {
    before_begin: FaultPoint::SqlitePutMetaBeforeBegin,
    after_check: FaultPoint::SqlitePutMetaAfterCheck,
    before_commit: FaultPoint::SqlitePutMetaBeforeCommit,
    after_commit: FaultPoint::SqlitePutMetaAfterCommit,
};
const DELETE: OpPoints = OpPoints {
    before_begin: FaultPoint::SqliteDeleteBeforeBegin,
    after_check: FaultPoint::SqliteDeleteAfterCheck,
    before_commit: FaultPoint::SqliteDeleteBeforeCommit,
    after_commit: FaultPoint::SqliteDeleteAfterCommit,
};
const RENEW: OpPoints = OpPoints {
    before_begin: FaultPoint::SqliteRenewBeforeBegin,
    after_check: FaultPoint::SqliteRenewAfterCheck,
    before_commit: FaultPoint::SqliteRenewBeforeCommit,
    after_commit: FaultPoint::SqliteRenewAfterCommit,
};
const RELEASE: OpPoints = OpPoints {
    before_begin: FaultPoint::SqliteReleaseBeforeBegin,
    after_check: FaultPoint::SqliteReleaseAfterCheck,
    before_commit: FaultPoint::SqliteReleaseBeforeCommit,
    after_commit: FaultPoint::SqliteReleaseAfterCommit,
};
const BLOB_PUT: OpPoints = OpPoints {
    before_begin: FaultPoint::SqliteBlobPutBeforeBegin,
    after_check: FaultPoint::SqliteBlobPutAfterCheck,
    before_commit: FaultPoint::SqliteBlobPutBeforeCommit,
    after_commit: FaultPoint::SqliteBlobPutAfterCommit,
};
const BLOB_DELETE: OpPoints = OpPoints {
    before_begin: FaultPoint::SqliteBlobDeleteBeforeBegin,
    after_check: FaultPoint::SqliteBlobDeleteAfterCheck,
    before_commit: FaultPoint::SqliteBlobDeleteBeforeCommit,
    after_commit: FaultPoint::SqliteBlobDeleteAfterCommit,
};

/// What a statement's changed-row count must be.
#[derive(Clone, Copy)]
enum Expect {
    Any,
    /// Zero changed rows is the A5 guard refusing the append.
    A5 {
        seq: u64,
    },
}

/// A statement parameter: a value, or the store clock plus the ttl read when the statement
/// executes (a stall inside the call moves the clock).
enum Param {
    V(SqlValue),
    ExpiresAt,
}

/// One statement of a mutation, with the fault point that follows it (if any).
struct Step {
    sql: &'static str,
    params: Vec<Param>,
    expect: Expect,
    then: Option<FaultPoint>,
}

impl Step {
    fn new(sql: &'static str, params: Vec<Param>) -> Step {
        Step { sql, params, expect: Expect::Any, then: None }
    }
    fn then(mut self, point: FaultPoint) -> Step {
        self.then = Some(point);
        self
    }
}

fn text(s: &str) -> Param {
    Param::V(SqlValue::Text(s.to_string()))
}

fn int(i: i64) -> Param {
    Param::V(SqlValue::Integer(i))
}

/// An open `BEGIN IMMEDIATE`; rolled back when dropped uncommitted (a killed process).
struct Tx<'c> {
    conn: &'c Connection,
    open: bool,
}

/// Run one cached, parameterless control statement (`BEGIN IMMEDIATE`, `COMMIT`,
/// `ROLLBACK`): prepared once per connection instead of parsed at every transaction.
fn control(conn: &Connection, sql: &'static str) -> rusqlite::Result<()> {
    conn.prepare_cached(sql).and_then(|mut s| s.execute([])).map(|_| ())
}

impl<'c> Tx<'c> {
    fn begin(conn: &'c Connection, during: &'static str) -> Result<Tx<'c>> {
        control(conn, "BEGIN IMMEDIATE").map_err(map_sql(during))?;
        Ok(Tx { conn, open: true })
    }
    fn commit(mut self, during: &'static str) -> Result<()> {
        control(self.conn, "COMMIT").map_err(map_sql(during))?;
        self.open = false;
        Ok(())
    }
}

impl Drop for Tx<'_> {
    fn drop(&mut self) {
        if self.open {
            let _ = control(self.conn, "ROLLBACK");
        }
    }
}

struct Inner {
    conn: Connection,
    lock: FifoLock,
    env: Rc<dyn Env>,
    profile: Profile,
    ttl_ms: i64,
}

/// rulvar's `SqliteStore`: journal, meta, leases and (through [`SqliteStore::transcripts`])
/// blobs in one SQLite database.
#[derive(Clone)]
pub struct SqliteStore {
    inner: Rc<Inner>,
}

/// A handle on a [`SqliteStore`] that does not keep it (or its connection) alive: what an
/// observer holds when the store itself holds the observer.
#[derive(Clone)]
pub struct SqliteStoreRef {
    inner: std::rc::Weak<Inner>,
}

impl SqliteStoreRef {
    /// The store, while it is alive.
    pub fn upgrade(&self) -> Option<SqliteStore> {
        self.inner.upgrade().map(|inner| SqliteStore { inner })
    }
}

/// The transcript twin: blobs in the store's own database, fenced by the same lease rows.
#[derive(Clone)]
pub struct SqliteTranscripts {
    inner: Rc<Inner>,
}

impl SqliteStore {
    /// Construct the store: validate the ttl, open the connection, and run the idempotent
    /// schema bootstrap (retried through the busy family under the profile's policy).
    pub async fn open(options: SqliteOptions, env: Rc<dyn Env>) -> Result<SqliteStore> {
        validate_ttl_ms(options.ttl_ms)?;
        if let Some(bytes) = options.page_size {
            if !(512..=65536).contains(&bytes) || !bytes.is_power_of_two() {
                return Err(StoreError::Config(format!(
                    "page size {bytes} is not a power of two in 512..=65536"
                )));
            }
        }
        point(&env, FaultPoint::SqliteBootOpen, None, None).await?;
        let flags = OpenFlags::SQLITE_OPEN_READ_WRITE
            | OpenFlags::SQLITE_OPEN_CREATE
            | OpenFlags::SQLITE_OPEN_URI
            | OpenFlags::SQLITE_OPEN_NO_MUTEX;
        let conn = Connection::open_with_flags(&options.path, flags).map_err(map_sql("open"))?;
        conn.busy_timeout(Duration::ZERO).map_err(map_sql("open"))?;
        // Every statement the store runs stays prepared (rusqlite's default keeps 16, fewer
        // than the store's distinct statements, and re-parsing showed up in profiles).
        conn.set_prepared_statement_cache_capacity(64);
        let started = env.monotonic();
        let mut attempt: u64 = 0;
        loop {
            match bootstrap(&conn, &env, options.synchronous, options.page_size).await {
                Ok(()) => break,
                Err(e @ StoreError::Busy { .. }) => match options.profile.boot_retry {
                    BootRetry::None => return Err(e),
                    BootRetry::Bounded { deadline } => {
                        if env.monotonic().saturating_sub(started) >= deadline {
                            return Err(e);
                        }
                        env.sleep(Duration::from_millis(2 + attempt % 7)).await;
                        attempt += 1;
                    }
                },
                Err(e) => return Err(e),
            }
        }
        Ok(SqliteStore {
            inner: Rc::new(Inner {
                conn,
                lock: FifoLock::new(),
                env,
                profile: options.profile,
                ttl_ms: options.ttl_ms,
            }),
        })
    }

    /// The transcript twin sharing this store's connection and lease rows.
    pub fn transcripts(&self) -> SqliteTranscripts {
        SqliteTranscripts { inner: self.inner.clone() }
    }

    /// The profile this store runs.
    pub fn profile(&self) -> Profile {
        self.inner.profile
    }

    /// The lease ttl in milliseconds.
    pub fn ttl_ms(&self) -> i64 {
        self.inner.ttl_ms
    }

    /// A handle that does not keep this store alive (see [`SqliteStoreRef`]).
    pub fn downgrade(&self) -> SqliteStoreRef {
        SqliteStoreRef { inner: Rc::downgrade(&self.inner) }
    }

    /// Observation only: the run's lease row `(owner, epoch, expires_at)` as this store's
    /// own connection sees it right now, including the writes of a transaction it has
    /// open. A recorder calls it from the fault hook: the real-process recorder at the
    /// before-commit point, inside the transaction, so the row is exactly what the commit
    /// will publish; the simulator at the after-commit point, before anything else can run,
    /// where the connection's own page cache still holds what it just wrote. It takes no
    /// lock of the store and writes nothing; the store's operations never call it.
    pub fn peek_lease_row(&self, run_id: &str) -> Result<Option<(String, u64, i64)>> {
        self.inner
            .conn
            .prepare_cached("SELECT owner, epoch, expires_at FROM leases WHERE run_id = ?1")
            .and_then(|mut s| {
                s.query_row([run_id], |r| Ok((r.get(0)?, r.get::<_, i64>(1)?.max(0) as u64, r.get(2)?)))
                    .optional()
            })
            .map_err(map_sql("peek lease row"))
    }
}

/// Consult the fault hook at `p`.
async fn point(env: &Rc<dyn Env>, p: FaultPoint, run_id: Option<&str>, epoch: Option<Epoch>) -> Result<()> {
    let site = FaultSite { point: p, run_id, epoch: epoch.map(|e| e.0) };
    if let Some(f) = env.fault(&site) {
        f.await.map_err(|_| StoreError::Crashed { point: p.name() })?;
    }
    Ok(())
}

/// One bootstrap attempt: WAL, synchronous, then the DDL inside one write transaction
/// that holds the write lock across its steps.
async fn bootstrap(
    conn: &Connection,
    env: &Rc<dyn Env>,
    sync: Synchronous,
    page_size: Option<u32>,
) -> Result<()> {
    let during = "schema bootstrap";
    // Each statement stays prepared on the connection: a boot that meets the busy family is
    // retried, and the retry re-runs the same statements (the same SQL, the same locks).
    let run = |sql: &str| conn.prepare_cached(sql).and_then(|mut s| s.execute([])).map_err(map_sql(during));
    if let Some(bytes) = page_size {
        // Takes no lock and writes nothing: it only applies if this connection creates the file.
        run(&format!("PRAGMA page_size={bytes}"))?;
    }
    conn.prepare_cached("PRAGMA journal_mode=WAL")
        .and_then(|mut s| s.query_row([], |_| Ok(())))
        .map_err(map_sql(during))?;
    run(sync.pragma())?;
    point(env, FaultPoint::SqliteBootAfterWal, None, None).await?;
    let tx = Tx::begin(conn, during)?;
    for sql in TABLES {
        run(sql)?;
    }
    point(env, FaultPoint::SqliteBootSchema, None, None).await?;
    for sql in INDEXES {
        run(sql)?;
    }
    point(env, FaultPoint::SqliteBootBeforeCommit, None, None).await?;
    tx.commit(during)
}

impl Inner {
    fn now(&self) -> i64 {
        self.env.now_ms()
    }

    async fn point(&self, p: FaultPoint, run_id: &str, epoch: Option<Epoch>) -> Result<()> {
        point(&self.env, p, Some(run_id), epoch).await
    }

    /// rulvar's `assertFencing`: the lease must be the run's current live holder.
    fn check_fence(&self, lease: &Lease) -> Result<()> {
        let row: Option<(String, i64, i64)> = self
            .conn
            .prepare_cached("SELECT owner, epoch, expires_at FROM leases WHERE run_id = ?1")
            .and_then(|mut s| {
                s.query_row([&lease.run_id], |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?))).optional()
            })
            .map_err(map_sql("fence check"))?;
        let refusal = match row {
            None => Some(LeaseRefusal::NotHeld),
            Some((_, epoch, _)) if epoch != lease.epoch.0 as i64 => Some(LeaseRefusal::StaleEpoch),
            Some((owner, _, _)) if owner != lease.owner => Some(LeaseRefusal::ForeignOwner),
            Some((_, _, expires_at)) if expires_at <= self.now() => Some(LeaseRefusal::Expired),
            Some(_) => None,
        };
        match refusal {
            Some(reason) => Err(StoreError::lease(&lease.run_id, reason)),
            None => Ok(()),
        }
    }

    fn exec(&self, step: &Step, run_id: &str, during: &'static str) -> Result<()> {
        let params: Vec<SqlValue> = step
            .params
            .iter()
            .map(|p| match p {
                Param::V(v) => v.clone(),
                Param::ExpiresAt => SqlValue::Integer(self.now() + self.ttl_ms),
            })
            .collect();
        let changed = self
            .conn
            .prepare_cached(step.sql)
            .and_then(|mut s| s.execute(rusqlite::params_from_iter(params.iter())))
            .map_err(map_sql(during))?;
        match step.expect {
            Expect::A5 { seq } if changed == 0 => {
                Err(StoreError::JournalOrderViolation { run_id: run_id.to_string(), seq })
            }
            _ => Ok(()),
        }
    }

    async fn run_steps(
        &self,
        steps: &[Step],
        run_id: &str,
        epoch: Option<Epoch>,
        during: &'static str,
    ) -> Result<()> {
        for step in steps {
            self.exec(step, run_id, during)?;
            if let Some(p) = step.then {
                self.point(p, run_id, epoch).await?;
            }
        }
        Ok(())
    }

    /// Run a mutation. With `fence = Some(lease)` the lease is checked (atomically with the
    /// mutation under `Atomic`, as a separate statement under `Split`); with `None` the
    /// mutation is unfenced. `run_id` is the run the mutation touches.
    async fn mutate(
        &self,
        pts: &OpPoints,
        run_id: &str,
        fence: Option<&Lease>,
        carried: Option<Epoch>,
        steps: Vec<Step>,
        during: &'static str,
    ) -> Result<()> {
        let _guard = self.inner_lock().await;
        self.point(pts.before_begin, run_id, carried).await?;
        match (fence, self.profile.fence_txn) {
            (Some(lease), FenceTxn::Atomic) => {
                let tx = Tx::begin(&self.conn, during)?;
                self.check_fence(lease)?;
                self.point(pts.after_check, run_id, carried).await?;
                self.run_steps(&steps, run_id, carried, during).await?;
                self.point(pts.before_commit, run_id, carried).await?;
                tx.commit(during)?;
            }
            (Some(lease), FenceTxn::Split) => {
                // v1.44.0: the check commits on its own; the mutation follows as a second
                // autocommit unit. Another process may take the lease over in between.
                self.check_fence(lease)?;
                self.point(pts.after_check, run_id, carried).await?;
                self.unfenced(pts, steps, run_id, carried, during).await?;
            }
            (None, _) => self.unfenced(pts, steps, run_id, carried, during).await?,
        }
        self.point(pts.after_commit, run_id, carried).await
    }

    async fn unfenced(
        &self,
        pts: &OpPoints,
        steps: Vec<Step>,
        run_id: &str,
        carried: Option<Epoch>,
        during: &'static str,
    ) -> Result<()> {
        if steps.len() == 1 {
            return self.exec(&steps[0], run_id, during);
        }
        let tx = Tx::begin(&self.conn, during)?;
        self.run_steps(&steps, run_id, carried, during).await?;
        self.point(pts.before_commit, run_id, carried).await?;
        tx.commit(during)
    }

    fn inner_lock(&self) -> crate::sync::Acquire {
        self.lock.lock()
    }

    /// The lease to enforce for a surface, after the run-match rule.
    fn guard<'l>(
        &self,
        surface_fenced: bool,
        lease: Option<&'l Lease>,
        run_id: &str,
    ) -> Result<Option<&'l Lease>> {
        match lease {
            Some(l) if surface_fenced => {
                if self.profile.run_match && l.run_id != run_id {
                    return Err(StoreError::lease(run_id, LeaseRefusal::RunMismatch));
                }
                Ok(Some(l))
            }
            _ => Ok(None),
        }
    }

    async fn read_point(&self, p: FaultPoint, run_id: &str) -> Result<crate::sync::FifoGuard> {
        let guard = self.inner_lock().await;
        self.point(p, run_id, None).await?;
        Ok(guard)
    }

    fn parse_meta(run_id: &str, payload: &str) -> Result<RunMeta> {
        serde_json::from_str(payload).map_err(|e| StoreError::Corrupt {
            what: "meta payload",
            key: run_id.to_string(),
            reason: e.to_string(),
        })
    }
}

impl JournalStore for SqliteStore {
    async fn append(&self, run_id: &str, entry: &JournalEntry, lease: Option<&Lease>) -> Result<()> {
        validate_run_id(run_id)?;
        entry.validate()?;
        let i = &*self.inner;
        // Appends are fenced by every leasable store; the run-match rule is a profile switch.
        let fence = i.guard(true, lease, run_id)?;
        let step = Step {
            sql: INSERT_ENTRY_A5,
            params: vec![text(run_id), text(&entry.to_json()), int(entry.seq.0 as i64)],
            expect: Expect::A5 { seq: entry.seq.0 },
            then: None,
        };
        i.mutate(&APPEND, run_id, fence, lease.map(|l| l.epoch), vec![step], "append").await
    }

    async fn load(&self, run_id: &str) -> Result<Vec<JournalEntry>> {
        validate_run_id(run_id)?;
        let i = &*self.inner;
        let _g = i.read_point(FaultPoint::SqliteLoadBeforeRead, run_id).await?;
        let payloads: Vec<String> = i
            .conn
            .prepare_cached("SELECT payload FROM entries WHERE run_id = ?1 ORDER BY id")
            .and_then(|mut s| s.query_map([run_id], |r| r.get(0))?.collect())
            .map_err(map_sql("load"))?;
        payloads
            .iter()
            .map(|p| {
                JournalEntry::from_json(p).map_err(|e| StoreError::Corrupt {
                    what: "journal entry",
                    key: run_id.to_string(),
                    reason: e.to_string(),
                })
            })
            .collect()
    }

    async fn put_meta(&self, meta: &RunMeta, lease: Option<&Lease>) -> Result<()> {
        meta.validate()?;
        let i = &*self.inner;
        let fence = i.guard(i.profile.fence_meta, lease, &meta.run_id)?;
        let step = Step::new(UPSERT_META, vec![text(&meta.run_id), text(&meta.to_json())]);
        i.mutate(&PUT_META, &meta.run_id, fence, lease.map(|l| l.epoch), vec![step], "put_meta").await
    }

    async fn list_runs(&self, filter: &RunFilter) -> Result<Vec<RunMeta>> {
        let i = &*self.inner;
        let _g = i.read_point(FaultPoint::SqliteListRunsBeforeRead, "").await?;
        let mut sql = String::from("SELECT run_id, payload FROM meta");
        let mut clauses: Vec<String> = Vec::new();
        let mut params: Vec<String> = Vec::new();
        if filter.status.is_some() || filter.statuses.is_some() {
            let wanted: Vec<_> =
                filter.status.into_iter().chain(filter.statuses.iter().flatten().copied()).collect();
            if wanted.is_empty() {
                clauses.push("1 = 0".into());
            } else {
                let marks: Vec<String> = wanted
                    .iter()
                    .map(|s| {
                        params.push(s.as_str().to_string());
                        format!("?{}", params.len())
                    })
                    .collect();
                clauses.push(format!("json_extract(payload,'$.status') IN ({})", marks.join(", ")));
            }
        }
        if let Some(name) = &filter.name {
            params.push(name.clone());
            clauses.push(format!("json_extract(payload,'$.name') = ?{}", params.len()));
        }
        if !clauses.is_empty() {
            sql.push_str(" WHERE ");
            sql.push_str(&clauses.join(" AND "));
        }
        sql.push_str(" ORDER BY run_id");
        let rows: Vec<(String, String)> = i
            .conn
            .prepare_cached(&sql)
            .and_then(|mut s| {
                s.query_map(rusqlite::params_from_iter(params.iter()), |r| Ok((r.get(0)?, r.get(1)?)))?
                    .collect()
            })
            .map_err(map_sql("list_runs"))?;
        let mut out = Vec::with_capacity(rows.len());
        for (run_id, payload) in rows {
            let meta = Inner::parse_meta(&run_id, &payload)?;
            if filter.matches(&meta) {
                out.push(meta);
            }
        }
        Ok(out)
    }

    async fn delete(&self, run_id: &str, lease: Option<&Lease>) -> Result<()> {
        validate_run_id(run_id)?;
        let i = &*self.inner;
        let fence = i.guard(i.profile.fence_journal_delete, lease, run_id)?;
        let mut steps = vec![
            Step::new("DELETE FROM entries WHERE run_id = ?1", vec![text(run_id)])
                .then(FaultPoint::SqliteDeleteAfterEntries),
            Step::new("DELETE FROM meta WHERE run_id = ?1", vec![text(run_id)])
                .then(FaultPoint::SqliteDeleteAfterMeta),
            Step::new("DELETE FROM leases WHERE run_id = ?1", vec![text(run_id)]),
        ];
        if !i.profile.epoch_tombstone {
            // Before v1.63.0 the epoch high-water mark went with the run, so the next
            // acquire of the same run id restarted at epoch 1.
            steps.push(Step::new("DELETE FROM epochs WHERE run_id = ?1", vec![text(run_id)]));
        }
        // Deletion is always one transaction (rulvar's unleased delete runs BEGIN IMMEDIATE
        // too); under `Split` only the fence check sits outside it.
        i.mutate(&DELETE, run_id, fence, lease.map(|l| l.epoch), steps, "delete").await
    }

    fn fenced_writes(&self) -> bool {
        self.inner.profile.fence_meta && self.inner.profile.fence_journal_delete
    }
}

impl MetaLookup for SqliteStore {
    async fn get_meta(&self, run_id: &str) -> Result<Option<RunMeta>> {
        validate_run_id(run_id)?;
        let i = &*self.inner;
        let _g = i.read_point(FaultPoint::SqliteGetMetaBeforeRead, run_id).await?;
        let payload: Option<String> = i
            .conn
            .prepare_cached("SELECT payload FROM meta WHERE run_id = ?1")
            .and_then(|mut s| s.query_row([run_id], |r| r.get(0)).optional())
            .map_err(map_sql("get_meta"))?;
        payload.map(|p| Inner::parse_meta(run_id, &p)).transpose()
    }
}

impl LeasableStore for SqliteStore {
    async fn acquire(&self, run_id: &str, owner: &str) -> Result<Lease> {
        validate_run_id(run_id)?;
        validate_owner(owner)?;
        let i = &*self.inner;
        let during = "acquire";
        let _guard = i.inner_lock().await;
        i.point(FaultPoint::SqliteAcquireBeforeBegin, run_id, None).await?;
        let tx = Tx::begin(&i.conn, during)?;
        let live: Option<i64> = i
            .conn
            .prepare_cached("SELECT expires_at FROM leases WHERE run_id = ?1")
            .and_then(|mut s| s.query_row([run_id], |r| r.get(0)).optional())
            .map_err(map_sql(during))?;
        if live.is_some_and(|expires_at| expires_at > i.now()) {
            return Err(StoreError::lease(run_id, LeaseRefusal::HeldOnAcquire));
        }
        i.point(FaultPoint::SqliteAcquireAfterCheck, run_id, None).await?;
        let prior: Option<i64> = i
            .conn
            .prepare_cached("SELECT epoch FROM epochs WHERE run_id = ?1")
            .and_then(|mut s| s.query_row([run_id], |r| r.get(0)).optional())
            .map_err(map_sql(during))?;
        let epoch = Epoch(prior.unwrap_or(0).max(0) as u64 + 1);
        i.conn
            .prepare_cached("INSERT INTO epochs(run_id, epoch) VALUES (?1, ?2) ON CONFLICT(run_id) DO UPDATE SET epoch = excluded.epoch")
            .and_then(|mut s| s.execute(rusqlite::params![run_id, epoch.0 as i64]))
            .map_err(map_sql(during))?;
        i.point(FaultPoint::SqliteAcquireAfterEpoch, run_id, Some(epoch)).await?;
        i.conn
            .prepare_cached(
                "INSERT INTO leases(run_id, owner, epoch, expires_at) VALUES (?1, ?2, ?3, ?4) \
                 ON CONFLICT(run_id) DO UPDATE SET owner = excluded.owner, epoch = excluded.epoch, expires_at = excluded.expires_at",
            )
            .and_then(|mut s| s.execute(rusqlite::params![run_id, owner, epoch.0 as i64, i.now() + i.ttl_ms]))
            .map_err(map_sql(during))?;
        i.point(FaultPoint::SqliteAcquireBeforeCommit, run_id, Some(epoch)).await?;
        tx.commit(during)?;
        i.point(FaultPoint::SqliteAcquireAfterCommit, run_id, Some(epoch)).await?;
        Ok(Lease { run_id: run_id.to_string(), owner: owner.to_string(), epoch })
    }

    async fn renew(&self, lease: &Lease) -> Result<()> {
        validate_run_id(&lease.run_id)?;
        let i = &*self.inner;
        let step = if i.profile.pin_owner_epoch {
            Step::new(
                "UPDATE leases SET expires_at = ?2 WHERE run_id = ?1 AND owner = ?3 AND epoch = ?4",
                vec![text(&lease.run_id), Param::ExpiresAt, text(&lease.owner), int(lease.epoch.0 as i64)],
            )
        } else {
            // v1.44.0: the WHERE matched the run only, so a renew that passed its check
            // before a takeover rewrote the successor's expiry.
            Step::new(
                "UPDATE leases SET expires_at = ?2 WHERE run_id = ?1",
                vec![text(&lease.run_id), Param::ExpiresAt],
            )
        };
        i.mutate(&RENEW, &lease.run_id, Some(lease), Some(lease.epoch), vec![step], "renew").await
    }

    async fn release(&self, lease: &Lease) -> Result<()> {
        validate_run_id(&lease.run_id)?;
        let i = &*self.inner;
        let step = if i.profile.pin_owner_epoch {
            Step::new(
                "DELETE FROM leases WHERE run_id = ?1 AND owner = ?2 AND epoch = ?3",
                vec![text(&lease.run_id), text(&lease.owner), int(lease.epoch.0 as i64)],
            )
        } else {
            // v1.44.0: a release that passed its check before a takeover deleted the
            // successor's row.
            Step::new("DELETE FROM leases WHERE run_id = ?1", vec![text(&lease.run_id)])
        };
        i.mutate(&RELEASE, &lease.run_id, Some(lease), Some(lease.epoch), vec![step], "release").await
    }

    fn lease_ttl(&self) -> Option<Duration> {
        Some(Duration::from_millis(self.inner.ttl_ms as u64))
    }
}

impl TranscriptStore for SqliteTranscripts {
    async fn put(&self, blob_ref: &str, bytes: &[u8], lease: Option<&Lease>) -> Result<()> {
        validate_ref(blob_ref)?;
        let i = &*self.inner;
        let run_id = run_of_ref(blob_ref);
        let fence = i.guard(i.profile.fence_blobs, lease, run_id)?;
        let step = Step::new(
            UPSERT_BLOB,
            vec![text(blob_ref), text(run_id), Param::V(SqlValue::Blob(bytes.to_vec()))],
        );
        i.mutate(&BLOB_PUT, run_id, fence, lease.map(|l| l.epoch), vec![step], "blob put").await
    }

    async fn get(&self, blob_ref: &str) -> Result<Option<Vec<u8>>> {
        validate_ref(blob_ref)?;
        let i = &*self.inner;
        let _g = i.read_point(FaultPoint::SqliteBlobGetBeforeRead, run_of_ref(blob_ref)).await?;
        i.conn
            .prepare_cached("SELECT data FROM blobs WHERE ref = ?1")
            .and_then(|mut s| s.query_row([blob_ref], |r| r.get(0)).optional())
            .map_err(map_sql("blob get"))
    }

    async fn list(&self, run_id: &str) -> Result<Vec<String>> {
        validate_run_id(run_id)?;
        let i = &*self.inner;
        let _g = i.read_point(FaultPoint::SqliteBlobListBeforeRead, run_id).await?;
        i.conn
            .prepare_cached("SELECT ref FROM blobs WHERE run_id = ?1 AND ref <> run_id ORDER BY ref")
            .and_then(|mut s| s.query_map([run_id], |r| r.get(0))?.collect())
            .map_err(map_sql("blob list"))
    }

    async fn delete(&self, blob_ref: &str, lease: Option<&Lease>) -> Result<()> {
        validate_ref(blob_ref)?;
        let i = &*self.inner;
        let run_id = run_of_ref(blob_ref);
        let fence = i.guard(i.profile.fence_blobs, lease, run_id)?;
        let step = Step::new("DELETE FROM blobs WHERE ref = ?1", vec![text(blob_ref)]);
        i.mutate(&BLOB_DELETE, run_id, fence, lease.map(|l| l.epoch), vec![step], "blob delete").await
    }

    fn fenced_writes(&self) -> bool {
        self.inner.profile.fence_blobs
    }
}
