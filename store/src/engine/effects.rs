//! The engine's effects on the outside world (the provider and tool ledger): paid model
//! calls, tool side effects, and the generation-id mint. The simulator implements it with a ledger (every call it sees is a
//! payment or a side effect that really happened); tests implement it with counters.
//!
//! Promise: the engine calls `provider_call` exactly once per paid model turn and
//! `tool_execute` exactly once per tool side effect it performs, and never anything else of
//! the world; so counting these calls counts what the run cost.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::env::LocalFuture;
use crate::types::Seq;

/// One paid model call: turn `turn` (0-based, counted across segments of one attempt) of
/// the dispatch whose `running` entry has seq `dispatch`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PaidCall {
    pub run_id: String,
    /// The op's name (the agent or step name in the workflow).
    pub op: String,
    pub dispatch: Seq,
    pub turn: u32,
    /// The conversation the provider is sent with the call: one message per earlier turn of
    /// the dispatch (its reply and its tool's result), in turn order; a resumed dispatch has
    /// it from its checkpoint.
    pub messages: Vec<Value>,
}

/// One tool side effect, executed at turn `turn` of dispatch `dispatch`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ToolCall {
    pub run_id: String,
    pub op: String,
    pub dispatch: Seq,
    pub turn: u32,
}

/// What the engine calls outside itself.
pub trait Effects {
    /// One paid model call; the reply. For an agent, the reply of its final turn is the
    /// agent's value (whether a turn asks for a tool is the workflow's data, not the reply's).
    fn provider_call(&self, call: &PaidCall) -> LocalFuture<'static, serde_json::Value>;
    /// One tool side effect; its result (kept in the agent's messages, or a step's value).
    fn tool_execute(&self, call: &ToolCall) -> LocalFuture<'static, serde_json::Value>;
    /// A deterministic generation id for a fresh run (rulvar's `mintRunId()` ULID).
    fn mint_genesis(&self, run_id: &str) -> String;
}

impl<W: Effects + ?Sized> Effects for std::rc::Rc<W> {
    fn provider_call(&self, call: &PaidCall) -> LocalFuture<'static, serde_json::Value> {
        (**self).provider_call(call)
    }
    fn tool_execute(&self, call: &ToolCall) -> LocalFuture<'static, serde_json::Value> {
        (**self).tool_execute(call)
    }
    fn mint_genesis(&self, run_id: &str) -> String {
        (**self).mint_genesis(run_id)
    }
}
