//! Named fault points: every place where a real process could be preempted, stalled or
//! killed in a way that matters to the fencing and durability contracts.
//!
//! Fault model (what the simulator may do at a point, and why the store must survive it):
//! - **yield**: another process runs. Between the fence check and the mutation this is the
//!   F3 window; the fix (one `BEGIN IMMEDIATE` around both) makes competing writers get
//!   `Busy` instead of landing inside it.
//! - **stall**: the process stops for a while, possibly past the lease ttl, holding
//!   whatever SQLite lock it holds (a stalled writer inside a transaction blocks every
//!   other writer, which then sees `Busy`).
//! - **crash**: the process dies at the point. Its connection is dropped, so an open
//!   transaction rolls back; everything committed stays. A crash at `*.after_commit` is the
//!   "durable but never acknowledged" case (the caller's outcome is unknown).
//!
//! The engine model's points (moment `Engine`, named `engine.*` and `worker.*`) sit between
//! two durable writes of one engine step, never inside a store call. A crash there is a
//! kill point: what was written stays, the rest of the step never happens, and a later
//! segment must recover from exactly that prefix (docs/engine-model.md 9). A stall there lets
//! the lease lapse while the engine holds work in memory: a successor takes over, and the
//! stalled segment's next write must be refused. The engine never catches a crash; it
//! returns `Crashed` with no further store call.
//!
//! Not modelled: power loss, torn pages, lost fsyncs (the simulator runs SQLite with
//! `synchronous=OFF` and models process crashes only), and crashes *inside* one SQLite
//! call (a call is atomic: nothing preempts synchronous code).
//!
//! Names are `<component>.<operation>.<moment>` and stable: they appear in fault plans,
//! reports and snapshots. Add new points at the end of their group; never rename one.

use std::fmt;

macro_rules! fault_points {
    ($( $(#[$doc:meta])* $variant:ident => $name:literal, $moment:ident; )*) => {
        /// A named place where the environment's fault hook is consulted.
        #[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
        pub enum FaultPoint {
            $( $(#[$doc])* $variant, )*
        }

        impl FaultPoint {
            /// Every point, in declaration order.
            pub const ALL: &'static [FaultPoint] = &[ $( FaultPoint::$variant, )* ];

            /// The stable name, e.g. `sqlite.append.after_check`.
            pub fn name(self) -> &'static str {
                match self { $( FaultPoint::$variant => $name, )* }
            }

            /// The point's position in [`FaultPoint::ALL`] (for dense per-point tables).
            pub fn index(self) -> usize {
                self as usize
            }

            /// What kind of moment the point is.
            pub fn moment(self) -> Moment {
                match self { $( FaultPoint::$variant => Moment::$moment, )* }
            }
        }
    };
}

/// The kind of moment a fault point sits at.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Moment {
    /// Before the operation touches the database.
    Before,
    /// Between the fence (or liveness) check and the mutation.
    AfterCheck,
    /// Between two statements of one multi-statement operation.
    BetweenStatements,
    /// All statements ran; the transaction is not committed yet.
    BeforeCommit,
    /// The mutation is durable; the call has not returned yet.
    AfterCommit,
    /// Inside the constructor's schema bootstrap.
    Boot,
    /// An engine or worker step between two durable writes.
    Engine,
}

fault_points! {
    // Construction: open, the WAL switch, and the DDL transaction (which holds the write
    // lock across its steps, so a concurrent boot sees Busy).
    /// Before the connection is opened.
    SqliteBootOpen => "sqlite.boot.open", Boot;
    /// After `PRAGMA journal_mode=WAL`, before the DDL transaction.
    SqliteBootAfterWal => "sqlite.boot.after_wal", Boot;
    /// Inside the DDL transaction, between the table and the index statements.
    SqliteBootSchema => "sqlite.boot.schema", Boot;
    /// DDL done, before its COMMIT.
    SqliteBootBeforeCommit => "sqlite.boot.before_commit", Boot;

    SqliteAcquireBeforeBegin => "sqlite.acquire.before_begin", Before;
    /// The live-lease check passed; epochs and leases not yet written.
    SqliteAcquireAfterCheck => "sqlite.acquire.after_check", AfterCheck;
    /// The epoch high-water mark is written; the lease row is not.
    SqliteAcquireAfterEpoch => "sqlite.acquire.after_epoch", BetweenStatements;
    SqliteAcquireBeforeCommit => "sqlite.acquire.before_commit", BeforeCommit;
    SqliteAcquireAfterCommit => "sqlite.acquire.after_commit", AfterCommit;

    SqliteRenewBeforeBegin => "sqlite.renew.before_begin", Before;
    SqliteRenewAfterCheck => "sqlite.renew.after_check", AfterCheck;
    SqliteRenewBeforeCommit => "sqlite.renew.before_commit", BeforeCommit;
    SqliteRenewAfterCommit => "sqlite.renew.after_commit", AfterCommit;

    SqliteReleaseBeforeBegin => "sqlite.release.before_begin", Before;
    SqliteReleaseAfterCheck => "sqlite.release.after_check", AfterCheck;
    SqliteReleaseBeforeCommit => "sqlite.release.before_commit", BeforeCommit;
    SqliteReleaseAfterCommit => "sqlite.release.after_commit", AfterCommit;

    SqliteAppendBeforeBegin => "sqlite.append.before_begin", Before;
    SqliteAppendAfterCheck => "sqlite.append.after_check", AfterCheck;
    SqliteAppendBeforeCommit => "sqlite.append.before_commit", BeforeCommit;
    SqliteAppendAfterCommit => "sqlite.append.after_commit", AfterCommit;

    SqlitePutMetaBeforeBegin => "sqlite.put_meta.before_begin", Before;
    SqlitePutMetaAfterCheck => "sqlite.put_meta.after_check", AfterCheck;
    SqlitePutMetaBeforeCommit => "sqlite.put_meta.before_commit", BeforeCommit;
    SqlitePutMetaAfterCommit => "sqlite.put_meta.after_commit", AfterCommit;

    SqliteDeleteBeforeBegin => "sqlite.delete.before_begin", Before;
    SqliteDeleteAfterCheck => "sqlite.delete.after_check", AfterCheck;
    /// The entries are deleted; meta, lease (and, pre-tombstone, epochs) are not.
    SqliteDeleteAfterEntries => "sqlite.delete.after_entries", BetweenStatements;
    /// Entries and meta are deleted; the lease row is not.
    SqliteDeleteAfterMeta => "sqlite.delete.after_meta", BetweenStatements;
    SqliteDeleteBeforeCommit => "sqlite.delete.before_commit", BeforeCommit;
    SqliteDeleteAfterCommit => "sqlite.delete.after_commit", AfterCommit;

    SqliteBlobPutBeforeBegin => "sqlite.blob_put.before_begin", Before;
    SqliteBlobPutAfterCheck => "sqlite.blob_put.after_check", AfterCheck;
    SqliteBlobPutBeforeCommit => "sqlite.blob_put.before_commit", BeforeCommit;
    SqliteBlobPutAfterCommit => "sqlite.blob_put.after_commit", AfterCommit;

    SqliteBlobDeleteBeforeBegin => "sqlite.blob_delete.before_begin", Before;
    SqliteBlobDeleteAfterCheck => "sqlite.blob_delete.after_check", AfterCheck;
    SqliteBlobDeleteBeforeCommit => "sqlite.blob_delete.before_commit", BeforeCommit;
    SqliteBlobDeleteAfterCommit => "sqlite.blob_delete.after_commit", AfterCommit;

    // Reads are single statements (atomic); the point lets another process run first.
    SqliteLoadBeforeRead => "sqlite.load.before_read", Before;
    SqliteGetMetaBeforeRead => "sqlite.get_meta.before_read", Before;
    SqliteListRunsBeforeRead => "sqlite.list_runs.before_read", Before;
    SqliteBlobGetBeforeRead => "sqlite.blob_get.before_read", Before;
    SqliteBlobListBeforeRead => "sqlite.blob_list.before_read", Before;

    // The engine model and its host actors (moment `Engine`): between two durable writes
    // (see the engine paragraph of the fault model above).
    /// Boot: the lease is held (or handed in); the boot `put_meta(running)` is not written.
    EngineBootBeforeMeta => "engine.boot.before_meta", Engine;
    /// A dispatch's `running` entry is durable; no paid call yet.
    EngineDispatchAfterRunning => "engine.dispatch.after_running", Engine;
    /// One paid provider call returned; nothing about it is durable yet.
    EngineDispatchAfterProvider => "engine.dispatch.after_provider", Engine;
    /// One tool side effect ran; its checkpoint is not saved yet.
    EngineDispatchAfterTool => "engine.dispatch.after_tool", Engine;
    /// The dispatch is done; its terminal entry is not appended yet.
    EngineDispatchBeforeTerminal => "engine.dispatch.before_terminal", Engine;
    /// A turn-boundary checkpoint is about to be saved.
    EngineCheckpointBeforePut => "engine.checkpoint.before_put", Engine;
    /// The checkpoint blob is saved.
    EngineCheckpointAfterPut => "engine.checkpoint.after_put", Engine;
    /// Settle: status computed; the `run_settle` append (if any) is not made yet.
    EngineSettleBeforeRunSettle => "engine.settle.before_run_settle", Engine;
    /// Settle: the `run_settle` append is durable; the terminal meta write is not.
    EngineSettleAfterRunSettle => "engine.settle.after_run_settle", Engine;
    /// Settle: the terminal meta write is done; the lease is not released.
    EngineSettleAfterMeta => "engine.settle.after_meta", Engine;
    /// A renew tick is due; `renew` is not called yet.
    EngineRenewBeforeRenew => "engine.renew.before_renew", Engine;
    /// Offline resolution: the brief lease is held; the resolution entry is not appended.
    EngineResolveAfterAcquire => "engine.resolve.after_acquire", Engine;
    /// Audit repair (the operator probe): the brief lease is held; the run is not re-audited
    /// and its meta not rewritten yet.
    EngineRepairAfterAcquire => "engine.repair.after_acquire", Engine;
    /// A host `delete_run`: every blob is deleted; the journal delete is not made.
    EngineDeleteAfterBlobs => "engine.delete.after_blobs", Engine;
    /// Worker sweep: the candidate's lease is acquired; nothing loaded yet.
    WorkerSweepAfterAcquire => "worker.sweep.after_acquire", Engine;
    /// Worker retention: the brief lease is acquired; nothing deleted yet.
    WorkerRetentionAfterAcquire => "worker.retention.after_acquire", Engine;
    /// A worker's deletion cascade (retention, or a drive finishing a deletion the run's
    /// generation is marked for): the run's blobs are deleted; the journal delete is not made.
    WorkerRetentionAfterBlobs => "worker.retention.after_blobs", Engine;
    /// Worker drive: a renew tick of the worker's lease is due; `renew` is not called yet.
    WorkerDriveBeforeRenew => "worker.drive.before_renew", Engine;
    /// `prune_run`: the journal is loaded and the candidates chosen; no checkpoint deleted.
    EnginePruneBeforeDelete => "engine.prune.before_delete", Engine;
    /// A cancel stopped the segment's body; the cut dispatch's `cancelled` terminal and the
    /// settle are not written yet.
    EngineCancelBeforeDrain => "engine.cancel.before_drain", Engine;
    /// A host `delete_run`: the run's blobs are listed; none is deleted yet (the mark that
    /// says the blob deletes that follow under this lease are a deletion's, not a prune's).
    EngineDeleteBeforeBlobs => "engine.delete.before_blobs", Engine;
    /// Worker sweep: the candidate is skipped as parked (its journal has the length and its
    /// meta the genesis this worker parked it at); its lease is not released yet.
    WorkerSweepSkipParked => "worker.sweep.skip_parked", Engine;
    /// A resume that acquires its own lease: its reads (meta and journal) are prepared, its
    /// acquire not begun. rulvar keeps this window open (docs/engine-model.md 1.2: a resume
    /// loads before it acquires); whatever another tenure does inside it is what the re-read
    /// under the lease must see.
    EngineResumeBeforeAcquire => "engine.resume.before_acquire", Engine;
}

impl FaultPoint {
    /// Look a point up by its stable name.
    pub fn from_name(name: &str) -> Option<FaultPoint> {
        // Plans name hundreds of decisions per run: a sorted index, built once.
        static BY_NAME: std::sync::OnceLock<Vec<(&'static str, FaultPoint)>> = std::sync::OnceLock::new();
        let index = BY_NAME.get_or_init(|| {
            let mut v: Vec<_> = FaultPoint::ALL.iter().map(|p| (p.name(), *p)).collect();
            v.sort_unstable();
            v
        });
        index.binary_search_by(|(n, _)| (*n).cmp(name)).ok().map(|i| index[i].1)
    }
}

impl fmt::Display for FaultPoint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}
