//! rulvar's kill-point table (docs/engine-model.md 9, `packages/store-conformance/src/
//! kill-points.ts`), as data: the write matchers and the ten rows with the paid calls and
//! tool runs each pins. Every harness that plays the table uses these: the in-process
//! engine tests, the simulator's `kill-points` scenario, and the real-process table.
//!
//! Promise: a row names a workflow (`happy` or `limit`), which matching write kills the
//! owning process (1-based occurrence) and whether before or after it is durable, the child's
//! and the resume's (paid calls, tool runs), and the `limit` terminals in the final journal.

use serde_json::{json, Value};

use crate::engine::{Workflow, RUN_SETTLE_DECISION_TYPE};
use crate::types::{JournalEntry, RunMeta, RunStatus};

/// Which write kills the process (rulvar's matchers).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Matcher {
    /// An `agent` running entry.
    Running,
    /// An `agent` terminal (with `ref`) with status `ok`.
    OkTerminal,
    /// An `agent` terminal with status `limit`.
    LimitTerminal,
    /// The `run_settle` decision.
    Settle,
    /// A `put_meta` with a status other than `running`.
    Meta,
}

impl Matcher {
    pub fn name(self) -> &'static str {
        match self {
            Matcher::Running => "running",
            Matcher::OkTerminal => "ok-terminal",
            Matcher::LimitTerminal => "limit-terminal",
            Matcher::Settle => "settle",
            Matcher::Meta => "meta",
        }
    }

    /// Whether an append of `e` is a matching write.
    pub fn entry(self, e: &JournalEntry) -> bool {
        let agent = e.kind == "agent";
        match self {
            Matcher::Running => agent && e.status == "running",
            Matcher::OkTerminal => agent && e.ref_seq.is_some() && e.status == "ok",
            Matcher::LimitTerminal => agent && e.ref_seq.is_some() && e.status == "limit",
            Matcher::Settle => is_run_settle(e),
            Matcher::Meta => false,
        }
    }

    /// Whether a `put_meta` of `m` is a matching write.
    pub fn meta(self, m: &RunMeta) -> bool {
        self == Matcher::Meta && m.status != RunStatus::Running
    }
}

/// A kill switch's count: note one write (`matches`: it is a matching write) against a kill
/// at the `occurrence`-th matching write, and answer `Some(before)` when this write is the
/// fatal one (`before`: the process dies before the write is durable, else right after).
/// Every harness that plays the table counts through this.
pub fn fatal_write(
    seen: &std::cell::Cell<u32>,
    matches: bool,
    occurrence: u32,
    before: bool,
) -> Option<bool> {
    if !matches {
        return None;
    }
    seen.set(seen.get() + 1);
    (seen.get() == occurrence).then_some(before)
}

/// Whether `e` is a `run_settle` decision.
pub fn is_run_settle(e: &JournalEntry) -> bool {
    e.kind == "decision"
        && e.value.get("decisionType").and_then(Value::as_str) == Some(RUN_SETTLE_DECISION_TYPE)
}

/// One row of the table and what it pins.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct KillRow {
    /// `happy-running-before`, ...
    pub name: &'static str,
    /// The `limit` workflow (else `happy`).
    pub limit: bool,
    pub matcher: Matcher,
    /// Which matching write (1-based).
    pub occurrence: u32,
    /// Die before the write (else right after it is durable).
    pub before: bool,
    /// (paid calls, tool runs) of the child before it died.
    pub child: (u32, u32),
    /// (paid calls, tool runs) the resume pays.
    pub resume: (u32, u32),
    /// `limit` terminals in the final journal.
    pub limits: usize,
}

const fn happy(
    name: &'static str,
    matcher: Matcher,
    occurrence: u32,
    before: bool,
    child: (u32, u32),
    resume: (u32, u32),
) -> KillRow {
    KillRow { name, limit: false, matcher, occurrence, before, child, resume, limits: 0 }
}

const fn limit(name: &'static str, before: bool, resume: (u32, u32), limits: usize) -> KillRow {
    KillRow {
        name,
        limit: true,
        matcher: Matcher::LimitTerminal,
        occurrence: 1,
        before,
        child: (3, 2),
        resume,
        limits,
    }
}

/// rulvar's ten rows (docs/engine-model.md 9.2).
pub const ROWS: [KillRow; 10] = [
    happy("happy-running-before", Matcher::Running, 2, true, (1, 0), (1, 0)),
    happy("happy-running-after", Matcher::Running, 2, false, (1, 0), (1, 0)),
    happy("happy-ok-terminal-before", Matcher::OkTerminal, 2, true, (2, 0), (1, 0)),
    happy("happy-ok-terminal-after", Matcher::OkTerminal, 2, false, (2, 0), (0, 0)),
    happy("happy-settle-before", Matcher::Settle, 1, true, (2, 0), (0, 0)),
    happy("happy-settle-after", Matcher::Settle, 1, false, (2, 0), (0, 0)),
    happy("happy-meta-before", Matcher::Meta, 1, true, (2, 0), (0, 0)),
    happy("happy-meta-after", Matcher::Meta, 1, false, (2, 0), (0, 0)),
    limit("limit-limit-terminal-before", true, (1, 0), 1),
    limit("limit-limit-terminal-after", false, (3, 2), 2),
];

impl KillRow {
    /// The row called `name`.
    pub fn find(name: &str) -> Option<KillRow> {
        ROWS.iter().copied().find(|r| r.name == name)
    }

    /// The row's workflow.
    pub fn workflow(&self) -> Workflow {
        if self.limit {
            Workflow::limit()
        } else {
            Workflow::happy()
        }
    }

    /// The value the resumed run must settle `ok` with (a world replying "alpha" to `one`,
    /// "beta" to `two`).
    pub fn value(&self) -> Value {
        if self.limit {
            json!({"agentStatus": "limit"})
        } else {
            json!({"one": "alpha", "two": "beta"})
        }
    }
}
