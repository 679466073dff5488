//! Workflows as data: a straight line of ops the engine dispatches in order.
//!
//! Promise: a workflow is plain serde data, so a simulator can generate, print and replay it.
//! Each op has a stable journal identity (its `key`), derived from its index and name, so a
//! resumed segment matches the same op to the same journal entries.
//!
//! The workflow's value is an object with one field per op: an agent's field holds its final
//! reply (or the string `"limit"` when it hit a limit), a step's field its tool result, an
//! await's field (named by its key) the resolution value.

use serde::{Deserialize, Serialize};

/// One op of a workflow.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "op")]
pub enum Op {
    /// A step: a two-phase dispatch around one tool side effect (no paid call).
    Step { name: String },
    /// An agent: per turn one paid call; the first `tool_turns` turns ask for a tool (one
    /// tool execution each, then a checkpoint save). Asking for a tool with
    /// `max_tool_calls` already used, or reaching `max_turns` turns, ends it with `limit`.
    Agent { name: String, tool_turns: u32, max_turns: u32, max_tool_calls: u32 },
    /// Wait for an external resolution of `key`: suspends the run until one is journaled.
    Await { key: String },
}

impl Op {
    /// The op's field name in the workflow value.
    pub fn field(&self) -> &str {
        match self {
            Op::Step { name } | Op::Agent { name, .. } => name,
            Op::Await { key } => key,
        }
    }

    /// The journal key of the op at `index`: stable across segments.
    pub fn journal_key(&self, index: usize) -> String {
        match self {
            Op::Step { name } | Op::Agent { name, .. } => format!("op:{index}:{name}"),
            Op::Await { key } => await_key(key),
        }
    }
}

/// The journal key of the suspension (and its resolution) of an await on `key`.
pub fn await_key(key: &str) -> String {
    format!("await:{key}")
}

/// A named list of ops.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Workflow {
    pub name: String,
    pub ops: Vec<Op>,
}

impl Workflow {
    /// rulvar's kill-point "happy" workflow: two sequential tool-less agents, `one` and
    /// `two`. With a world replying "alpha" to `one` and "beta" to `two` its value is
    /// `{one: "alpha", two: "beta"}`.
    pub fn happy() -> Workflow {
        let agent =
            |name: &str| Op::Agent { name: name.into(), tool_turns: 0, max_turns: 4, max_tool_calls: 0 };
        Workflow { name: "happy".into(), ops: vec![agent("one"), agent("two")] }
    }

    /// rulvar's kill-point "limit" workflow: one agent with a probe tool, `max_turns` 4 and
    /// `max_tool_calls` 2, whose model always asks for the tool: 3 paid calls, 2 tool runs,
    /// the agent ends `limit`, and the run still settles `ok` with value
    /// `{agentStatus: "limit"}` (the agent is named `agentStatus`).
    pub fn limit() -> Workflow {
        Workflow {
            name: "limit".into(),
            ops: vec![Op::Agent {
                name: "agentStatus".into(),
                tool_turns: u32::MAX,
                max_turns: 4,
                max_tool_calls: 2,
            }],
        }
    }

    /// An agent, then an await on `key`, then a second agent: suspends once.
    pub fn approval(key: &str) -> Workflow {
        let agent =
            |name: &str| Op::Agent { name: name.into(), tool_turns: 0, max_turns: 4, max_tool_calls: 0 };
        Workflow {
            name: "approval".into(),
            ops: vec![agent("draft"), Op::Await { key: key.into() }, agent("publish")],
        }
    }
}
