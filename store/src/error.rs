//! Typed store errors. Every refusal a caller can act on has its own variant; nothing in
//! the store panics on input.
//!
//! Mirrors rulvar's error classes: `LeaseHeld` (code `lease_held`, retryable) covers both
//! "acquire on a held lease" and "this lease is not the current holder or does not guard
//! this run"; `JournalOrderViolation` (not retryable) is the A5 guard; `Busy` is the
//! SQLITE_BUSY family surfaced fail-fast at runtime (retryable by the caller).

use std::fmt;

/// Why a lease was refused. Printed in witnesses, so the wording is stable.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LeaseRefusal {
    /// `acquire` found a live lease (whoever the caller is, the same owner included).
    HeldOnAcquire,
    /// The lease row carries another epoch: the caller's lease was superseded.
    StaleEpoch,
    /// The lease row carries the same epoch but another owner.
    ForeignOwner,
    /// The caller's lease row exists but its expiry has passed by the store's clock.
    Expired,
    /// There is no lease row for the run: released, deleted, or never granted.
    NotHeld,
    /// The lease names another run than the one mutated (the run-match rule).
    RunMismatch,
}

impl LeaseRefusal {
    /// Stable snake_case name, as used in traces and JSON.
    pub fn as_str(self) -> &'static str {
        match self {
            LeaseRefusal::HeldOnAcquire => "held_on_acquire",
            LeaseRefusal::StaleEpoch => "stale_epoch",
            LeaseRefusal::ForeignOwner => "foreign_owner",
            LeaseRefusal::Expired => "expired",
            LeaseRefusal::NotHeld => "not_held",
            LeaseRefusal::RunMismatch => "run_mismatch",
        }
    }
}

impl fmt::Display for LeaseRefusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Every error a store call can return.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum StoreError {
    /// The lease is held by someone else, or the presented lease does not guard this
    /// mutation. Retryable (another acquire may succeed later).
    #[error("lease held: {reason} (run {run_id})")]
    LeaseHeld { run_id: String, reason: LeaseRefusal },
    /// The A5 monotonic-seq guard refused an append whose seq is not above the stored
    /// maximum. The entry is not visible.
    #[error("journal order violation on run {run_id}: seq {seq} is not above the stored tail")]
    JournalOrderViolation { run_id: String, seq: u64 },
    /// The SQLITE_BUSY family (`extended_code & 0xff == 5`): another connection holds the
    /// write lock. The store fails fast; the caller may retry.
    #[error("database busy (sqlite code {code}) during {during}")]
    Busy { code: i32, during: &'static str },
    /// A configuration value is out of range. Raised before any database is opened.
    #[error("configuration error: {0}")]
    Config(String),
    /// An argument is malformed (an unsafe run id or ref, a seq that is not a finite
    /// integer). Nothing was changed.
    #[error("invalid {what}: {reason}")]
    InvalidInput { what: &'static str, reason: String },
    /// A stored payload could not be decoded. Nothing was changed.
    #[error("corrupt stored {what} for {key}: {reason}")]
    Corrupt { what: &'static str, key: String, reason: String },
    /// Any other storage failure reported by the database.
    #[error("storage error during {during}: {message}")]
    Storage { during: &'static str, message: String },
    /// The environment's fault hook reported a crash of this process at a named fault
    /// point. The call's transaction (if any) was rolled back; in the simulator the node
    /// is killed instead and this value is never observed.
    #[error("crashed at fault point {point}")]
    Crashed { point: &'static str },
}

impl StoreError {
    /// Whether the caller may retry the same call (rulvar's `retryable`).
    pub fn is_retryable(&self) -> bool {
        matches!(self, StoreError::LeaseHeld { .. } | StoreError::Busy { .. })
    }

    /// Stable short code, as rulvar's `.code` (used in traces and JSON).
    pub fn code(&self) -> &'static str {
        match self {
            StoreError::LeaseHeld { .. } => "lease_held",
            StoreError::JournalOrderViolation { .. } => "journal_order_violation",
            StoreError::Busy { .. } => "busy",
            StoreError::Config(_) => "config",
            StoreError::InvalidInput { .. } => "invalid_input",
            StoreError::Corrupt { .. } => "corrupt",
            StoreError::Storage { .. } => "storage",
            StoreError::Crashed { .. } => "crashed",
        }
    }

    pub(crate) fn lease(run_id: &str, reason: LeaseRefusal) -> StoreError {
        StoreError::LeaseHeld { run_id: run_id.to_string(), reason }
    }
}

/// Result alias used across the store.
pub type Result<T, E = StoreError> = std::result::Result<T, E>;
