//! The engine's outside world and the engine-level actors of a simulated process.
//!
//! `LedgerWorld` is the provider and the tools: every paid model call and every tool side
//! effect is written to the history as a fact (with the node, its incarnation, the virtual
//! instant and how many store mutations had been applied), then answered after a latency
//! drawn from the node's own stream. Replies are a pure function of (op, turn), so the value
//! a workflow must settle with is known in advance ([`expected_value`]).
//!
//! The actors: a host that starts its share of the runs (`engine.run`, the run's own
//! process owns it from genesis) and now and then explicitly resumes one of its terminal
//! runs (a user's retry); a queue worker that sweeps, drives and applies retention; and a
//! resolver that answers open suspensions offline. All of them record what their segments
//! settled as facts, so the oracle can judge values and settles.

use std::collections::BTreeMap;
use std::time::Duration;

use rand_chacha::ChaCha8Rng;
use serde_json::{json, Value};
use store::engine::{EngineError, Op, Outcome, PaidCall, ToolCall, Workflow, World};
use store::LocalFuture;

use crate::env::now_ns;
use crate::history::{FactKind, Recorder};
use crate::seed::{rng, Draw};

/// The provider's reply to turn `turn` of op `op`.
pub fn reply(op: &str, turn: u32) -> Value {
    match op {
        "one" => json!("alpha"),
        "two" => json!("beta"),
        op => json!(format!("{op}:{turn}")),
    }
}

/// The tool's result for turn `turn` of op `op`.
pub fn tool_result(op: &str, turn: u32) -> Value {
    json!(format!("tool:{op}:{turn}"))
}

/// The value every resolver answers a suspension with.
pub fn resolution_value(key: &str) -> Value {
    json!({ "approved": key })
}

/// The value a workflow settles `ok` with in this world: the engine's agent semantics
/// (a final reply, or `"limit"`), a step's tool result, an await's resolution.
pub fn expected_value(wf: &Workflow) -> Value {
    let mut out = serde_json::Map::new();
    for op in &wf.ops {
        let v = match op {
            Op::Step { name } => tool_result(name, 0),
            Op::Agent { name, tool_turns, max_turns, max_tool_calls } => {
                let (mut turns, mut tools) = (0u32, 0u32);
                loop {
                    if turns >= *max_turns {
                        break json!("limit");
                    }
                    let turn = turns;
                    turns += 1;
                    if turn >= *tool_turns {
                        break reply(name, turn);
                    }
                    if tools >= *max_tool_calls {
                        break json!("limit");
                    }
                    tools += 1;
                }
            }
            Op::Await { key } => resolution_value(key),
        };
        out.insert(op.field().to_string(), v);
    }
    Value::Object(out)
}

/// The provider and tool world of one node incarnation, writing the ledger.
pub struct LedgerWorld {
    rec: Recorder,
    node: u32,
    incarnation: u32,
    /// The engine's owner identity (who pays).
    owner: String,
    /// Latency bounds in ms (inclusive); `(0, 0)` answers at once.
    latency_ms: (u64, u64),
    rng: std::cell::RefCell<ChaCha8Rng>,
}

impl LedgerWorld {
    pub fn new(sink: &FactSink, seed: u64, latency_ms: (u64, u64)) -> LedgerWorld {
        let stream = fnv_owner(&sink.owner) ^ (u64::from(sink.node) << 32 | u64::from(sink.incarnation));
        LedgerWorld {
            rec: sink.rec.clone(),
            node: sink.node,
            incarnation: sink.incarnation,
            owner: sink.owner.clone(),
            latency_ms,
            rng: std::cell::RefCell::new(rng(seed, "latency", stream)),
        }
    }

    fn answer(&self, value: Value) -> LocalFuture<'static, Value> {
        let ms = if self.latency_ms.1 == 0 {
            0
        } else {
            self.rng.borrow_mut().between(self.latency_ms.0, self.latency_ms.1)
        };
        Box::pin(async move {
            if ms > 0 {
                madsim::time::sleep(Duration::from_millis(ms)).await;
            }
            value
        })
    }
}

impl World for LedgerWorld {
    fn provider_call(&self, call: &PaidCall) -> LocalFuture<'static, Value> {
        self.rec.fact(
            self.node,
            self.incarnation,
            &self.owner,
            now_ns(),
            FactKind::Paid {
                run_id: call.run_id.clone(),
                op: call.op.clone(),
                dispatch: call.dispatch.0,
                turn: call.turn,
            },
        );
        self.answer(reply(&call.op, call.turn))
    }

    fn tool_execute(&self, call: &ToolCall) -> LocalFuture<'static, Value> {
        self.rec.fact(
            self.node,
            self.incarnation,
            &self.owner,
            now_ns(),
            FactKind::Tool {
                run_id: call.run_id.clone(),
                op: call.op.clone(),
                dispatch: call.dispatch.0,
                turn: call.turn,
            },
        );
        self.answer(tool_result(&call.op, call.turn))
    }

    fn mint_genesis(&self, run_id: &str) -> String {
        format!("gen-{run_id}-n{}i{}", self.node, self.incarnation)
    }
}

/// Who records facts for one node incarnation.
#[derive(Clone)]
pub struct FactSink {
    pub rec: Recorder,
    pub node: u32,
    pub incarnation: u32,
    /// The acting engine's owner identity.
    pub owner: String,
}

impl FactSink {
    pub fn fact(&self, kind: FactKind) {
        self.rec.fact(self.node, self.incarnation, &self.owner, now_ns(), kind);
    }

    pub fn submitted(&self, run_id: &str, wf: &Workflow) {
        self.fact(FactKind::Submitted { run_id: run_id.to_string(), workflow: wf.name.clone() });
    }

    /// Record a segment's result. Returns `false` when the process died (stop at once).
    pub fn settled(&self, run_id: &str, what: &str, r: &Result<Outcome, EngineError>) -> bool {
        match r {
            Ok(o) => {
                self.fact(FactKind::Settled {
                    run_id: run_id.to_string(),
                    status: o.status.to_string(),
                    value: o.value.as_ref().map(|v| v.to_string()),
                    segment: o.segment,
                });
                true
            }
            Err(e) if e.is_crash() => false,
            Err(e) => {
                self.fact(FactKind::Failed {
                    run_id: run_id.to_string(),
                    what: what.to_string(),
                    error: e.to_string(),
                });
                true
            }
        }
    }
}

fn fnv_owner(owner: &str) -> u64 {
    crate::seed::fnv1a(owner.as_bytes())
}

/// The workflows the engine scenarios use, by name (a worker's registry).
pub fn catalog_workflows() -> BTreeMap<String, Workflow> {
    let mut m = BTreeMap::new();
    for wf in
        [Workflow::happy(), Workflow::limit(), Workflow::approval("sign-off"), pipeline(), two_approvals()]
    {
        m.insert(wf.name.clone(), wf);
    }
    m
}

/// A step, a tool-using agent with four tool turns (checkpoints at every turn), a step.
pub fn pipeline() -> Workflow {
    Workflow {
        name: "pipeline".into(),
        ops: vec![
            Op::Step { name: "fetch".into() },
            Op::Agent { name: "research".into(), tool_turns: 4, max_turns: 7, max_tool_calls: 6 },
            Op::Step { name: "publish".into() },
        ],
    }
}

/// An agent, an await, an agent, a second await, an agent: the run suspends twice, and the
/// segment between the two suspensions does new work yet settles `suspended` again (the
/// write-on-change rule must still journal that settle).
pub fn two_approvals() -> Workflow {
    let agent = |name: &str| Op::Agent { name: name.into(), tool_turns: 0, max_turns: 4, max_tool_calls: 0 };
    Workflow {
        name: "two-approvals".into(),
        ops: vec![
            agent("draft"),
            Op::Await { key: "legal".into() },
            agent("revise"),
            Op::Await { key: "final".into() },
            agent("publish"),
        ],
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn expected_values_follow_the_kill_point_table() {
        assert_eq!(expected_value(&Workflow::happy()), json!({"one": "alpha", "two": "beta"}));
        assert_eq!(expected_value(&Workflow::limit()), json!({"agentStatus": "limit"}));
        assert_eq!(
            expected_value(&pipeline()),
            json!({"fetch": "tool:fetch:0", "research": "research:4", "publish": "tool:publish:0"})
        );
        assert_eq!(
            expected_value(&Workflow::approval("k")),
            json!({"draft": "draft:0", "k": {"approved": "k"}, "publish": "publish:0"})
        );
    }
}
