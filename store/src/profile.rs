//! Flaw profiles: the historical store and engine behaviours, as data passed at
//! construction (never a cargo feature, never a global).
//!
//! Each profile restores the switches of rulvar's release it is named after (the table of
//! docs/store-contract.md 9), plus fencesim's own `retention_rechecks`, `drive_rechecks`,
//! `settle_heals_unsettled_tail`, `delete_marks_generation` and `resolve_rechecks`, on only
//! in `current` (docs/engine-model.md P). The flawed and the fixed path sit side by side in
//! the store code behind these switches, so a reader sees both. The harness must catch every
//! flawed profile with its generic oracle and find nothing under `current`.

use std::fmt;
use std::str::FromStr;
use std::time::Duration;

use crate::error::StoreError;

/// How a lease-carrying mutation checks its fence.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FenceTxn {
    /// The check is one autocommit SELECT and the mutation a second autocommit statement:
    /// another process can commit between them (F3).
    Split,
    /// Check and mutation run inside one `BEGIN IMMEDIATE`; a competing writer gets Busy.
    Atomic,
}

/// The constructor's schema bootstrap under concurrent boots.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum BootRetry {
    /// The first Busy in the bootstrap fails the constructor (the boot race, B).
    None,
    /// Retry the whole idempotent bootstrap through the busy family, sleeping
    /// `2 + attempt % 7` ms, until `deadline` has passed (rulvar's BOOT_BUSY_TIMEOUT_MS).
    Bounded { deadline: Duration },
}

/// Which engine writes carry the segment's lease.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum EngineThreading {
    /// Only journal appends (rulvar through v1.44.1).
    AppendOnly,
    /// Every meta write, blob write and deletion of a leased segment (v1.45.0+).
    All,
}

/// What the engine's settle does when a settlement write fails.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SettleFailurePolicy {
    /// Swallow every failure of the terminal meta write (through v1.62).
    SwallowAll,
    /// Swallow only `LeaseHeld` on the meta write; a failed settle append skips the meta
    /// write (v1.63.0+; `Superseded` since v1.136.0).
    LeaseHeldOnly,
}

/// The named profiles.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ProfileName {
    /// rulvar v1.44.0 (tag `c3ca49f3`, store code from `101795b8`), the audit baseline.
    ///
    /// F3: the fence check is one autocommit SELECT and the mutation another, so a takeover
    /// that commits between them lets a stale append become visible under the successor's
    /// tenure, a stale release delete the successor's lease row (a third owner then
    /// acquires), and a stale renew rewrite the successor's expiry (renew and release match
    /// on `run_id` only). Also every later flaw: no run-match, meta, delete and blobs
    /// unfenced, delete erases the epoch, no boot retry, engine threads the lease into
    /// appends only.
    V1_44_0,
    /// rulvar v1.44.1 (`248a19f1`): F3 fixed (one `BEGIN IMMEDIATE`, owner and epoch pinned).
    ///
    /// F1: `put_meta` ignores the lease, so a superseded segment's terminal meta write
    /// overwrites the successor's `running` row with a terminal status and a `segments`
    /// counter one behind; the run leaves the worker's sweep and is stranded if the
    /// successor dies before its own settle. F4: `delete` ignores the lease, so a stale
    /// retention sweep erases a live run, its lease row and its epoch.
    V1_44_1,
    /// rulvar v1.45.0 (`b96305de`): meta and delete fenced, run-match on.
    ///
    /// F2: the transcript store ignores the lease, so a stale segment's late checkpoint
    /// save overwrites the successor's checkpoint at `<run>/ckpt/<seq>` while the same
    /// lease's journal append is refused; a later boot restores an older turn and pays
    /// turns again. Also the blob half of F4 (the delete cascade removes blobs before its
    /// refused journal delete).
    V1_45_0,
    /// rulvar v1.47.0 (store code from `865e7bfd`): everything fenced, no boot retry.
    ///
    /// B: N processes constructing the store over one fresh file collide in the schema
    /// bootstrap, and the losers die with a raw SQLITE_BUSY.
    BootRace,
    /// rulvar v1.48.0 to v1.62.x: boot retry on, but `delete` erases the epoch row.
    ///
    /// T: after delete and recreate, acquire restarts at epoch 1, so a zombie lease from
    /// the deleted incarnation with a stable owner identity matches the new incarnation's
    /// lease row and its append, renew, meta, delete and blob writes are accepted.
    PreTombstone,
    /// rulvar HEAD (`54c04dc7`): every surface fenced atomically, the epoch tombstone kept,
    /// the boot retried. The harness must find nothing here.
    Current,
}

impl ProfileName {
    pub const ALL: [ProfileName; 6] = [
        ProfileName::V1_44_0,
        ProfileName::V1_44_1,
        ProfileName::V1_45_0,
        ProfileName::BootRace,
        ProfileName::PreTombstone,
        ProfileName::Current,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            ProfileName::V1_44_0 => "v1_44_0",
            ProfileName::V1_44_1 => "v1_44_1",
            ProfileName::V1_45_0 => "v1_45_0",
            ProfileName::BootRace => "boot_race",
            ProfileName::PreTombstone => "pre_tombstone",
            ProfileName::Current => "current",
        }
    }
}

impl fmt::Display for ProfileName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for ProfileName {
    type Err = StoreError;
    fn from_str(s: &str) -> Result<ProfileName, StoreError> {
        ProfileName::ALL.into_iter().find(|p| p.as_str() == s).ok_or_else(|| {
            StoreError::Config(format!(
                "unknown profile {s:?}; known profiles: {}",
                ProfileName::ALL.map(|p| p.as_str()).join(", ")
            ))
        })
    }
}

/// Every behaviour switch of one profile.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Profile {
    pub name: ProfileName,
    pub fence_txn: FenceTxn,
    /// `renew`/`release` include owner and epoch in their WHERE.
    pub pin_owner_epoch: bool,
    /// A lease whose run differs from the mutated run is refused before any check.
    pub run_match: bool,
    /// `put_meta` honours its lease (and the journal side declares `fenced_writes`).
    pub fence_meta: bool,
    /// `delete` honours its lease.
    pub fence_journal_delete: bool,
    /// The transcript twin honours its lease and declares `fenced_writes`.
    pub fence_blobs: bool,
    /// `delete` keeps the `epochs` row (the tombstone).
    pub epoch_tombstone: bool,
    pub boot_retry: BootRetry,
    pub engine_threading: EngineThreading,
    pub settle_failure_policy: SettleFailurePolicy,
    /// The engine appends a `run_settle` decision before the terminal meta write (v1.47.0+).
    pub settle_journaled: bool,
    /// Retention re-reads the run's meta under its brief lease and deletes only a run that is
    /// still terminal (this model's `current`; rulvar's `applyRetention` decides from the
    /// sweep's listing, so a run resumed since can be deleted while running).
    pub retention_rechecks: bool,
    /// The worker's sweep re-reads the run's meta under the lease it acquired and resumes only
    /// a run still `running` or `suspended` (this model's `current`; rulvar's sweep decides
    /// from its listing, so a run that settled terminal since, a cancelled one for example, is
    /// resumed and its cancel undone).
    pub drive_rechecks: bool,
    /// The write-on-change rule's third arm also fires when the journal's last entry is not
    /// a `run_settle` (an earlier segment journaled work, then its settle append failed or
    /// it died), not only when the journal holds no settle at all (this model's `current`;
    /// rulvar's arm (c) checks for a missing settle only, so a segment that appends nothing
    /// and ends with the status of an older settle writes terminal meta over the unsettled
    /// work, and the reconciler calls the run stranded).
    pub settle_heals_unsettled_tail: bool,
    /// An engine deletion cascade marks the generation it deletes before it deletes a blob:
    /// it writes the run's deletion record (the bare ref `<run>`, holding the meta's genesis)
    /// and a resume refuses a run whose record names its genesis, so a cascade cut by a crash
    /// or a busy write leaves a run only a deletion finishes (this model's `current`; rulvar
    /// deletes the blobs, then the journal, with no mark, so a retry of a half-deleted run
    /// boots without the checkpoints its journal depends on and pays checkpointed turns
    /// again: docs/engine-model.md 6.1). A resume that finds no meta (it recreates the run)
    /// mints the generation's genesis, so no record names two generations.
    pub delete_marks_generation: bool,
    /// The offline resolution re-reads the run's meta under its brief lease and answers only
    /// a run that has not ended (this model's `current`; rulvar's resolution loads the journal
    /// and appends, so an answer to a run that settled terminal with a suspension still open
    /// lands after its settle, where no worker resumes it and the reconciler calls the run
    /// stranded: docs/engine-model.md 5.5).
    pub resolve_rechecks: bool,
}

/// rulvar's BOOT_BUSY_TIMEOUT_MS.
pub const BOOT_BUSY_TIMEOUT: Duration = Duration::from_millis(5000);

impl Profile {
    /// The switches of a named profile, as docs/store-contract.md 9 sets them, plus
    /// `retention_rechecks`, `drive_rechecks`, `settle_heals_unsettled_tail`,
    /// `delete_marks_generation` and `resolve_rechecks` (fencesim's;
    /// docs/engine-model.md P).
    pub const fn of(name: ProfileName) -> Profile {
        let bounded = BootRetry::Bounded { deadline: BOOT_BUSY_TIMEOUT };
        match name {
            ProfileName::V1_44_0 => Profile {
                name,
                fence_txn: FenceTxn::Split,
                pin_owner_epoch: false,
                run_match: false,
                fence_meta: false,
                fence_journal_delete: false,
                fence_blobs: false,
                epoch_tombstone: false,
                boot_retry: BootRetry::None,
                engine_threading: EngineThreading::AppendOnly,
                settle_failure_policy: SettleFailurePolicy::SwallowAll,
                settle_journaled: false,
                retention_rechecks: false,
                drive_rechecks: false,
                settle_heals_unsettled_tail: false,
                delete_marks_generation: false,
                resolve_rechecks: false,
            },
            ProfileName::V1_44_1 => Profile {
                fence_txn: FenceTxn::Atomic,
                pin_owner_epoch: true,
                ..Profile::of(ProfileName::V1_44_0)
            }
            .named(name),
            ProfileName::V1_45_0 => Profile {
                run_match: true,
                fence_meta: true,
                fence_journal_delete: true,
                engine_threading: EngineThreading::All,
                ..Profile::of(ProfileName::V1_44_1)
            }
            .named(name),
            ProfileName::BootRace => {
                Profile { fence_blobs: true, settle_journaled: true, ..Profile::of(ProfileName::V1_45_0) }
                    .named(name)
            }
            ProfileName::PreTombstone => {
                Profile { boot_retry: bounded, ..Profile::of(ProfileName::BootRace) }.named(name)
            }
            ProfileName::Current => Profile {
                epoch_tombstone: true,
                settle_failure_policy: SettleFailurePolicy::LeaseHeldOnly,
                retention_rechecks: true,
                drive_rechecks: true,
                settle_heals_unsettled_tail: true,
                delete_marks_generation: true,
                resolve_rechecks: true,
                ..Profile::of(ProfileName::PreTombstone)
            }
            .named(name),
        }
    }

    const fn named(self, name: ProfileName) -> Profile {
        Profile { name, ..self }
    }

    /// The fixed behaviour.
    pub const fn current() -> Profile {
        Profile::of(ProfileName::Current)
    }

    /// Every profile, flawed ones first.
    pub fn all() -> [Profile; 6] {
        ProfileName::ALL.map(Profile::of)
    }
}

impl FromStr for Profile {
    type Err = StoreError;
    fn from_str(s: &str) -> Result<Profile, StoreError> {
        Ok(Profile::of(s.parse()?))
    }
}
