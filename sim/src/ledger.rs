//! The simulated world's ledger: what the provider replies, what a tool returns, what a
//! resolver answers, the workflows the engine scenarios run, and the value each of them
//! must settle `ok` with in this world.
//!
//! Shared by the actors (which answer the engine with these replies) and the oracle (which
//! judges settled values against them); neither owns it, so the oracle never reaches into
//! the actors. Every function is pure and total.

use std::collections::BTreeMap;

use serde_json::{json, Value};
use store::engine::{Op, Workflow};

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

/// An op's field in the workflow value: an agent's or step's name, an await's key.
pub fn field(op: &Op) -> &str {
    match op {
        Op::Step { name } | Op::Agent { name, .. } => name,
        Op::Await { key } => key,
    }
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
        out.insert(field(op).to_string(), v);
    }
    Value::Object(out)
}

/// The workflows the engine scenarios use, by name (a worker's registry).
pub fn catalog_workflows() -> BTreeMap<String, Workflow> {
    let mut m = BTreeMap::new();
    for wf in [
        Workflow::happy(),
        Workflow::limit(),
        Workflow::approval("sign-off"),
        pipeline(),
        two_approvals(),
        survey(),
    ] {
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

/// A step, then two tool-using agents, both ending `ok` with a checkpoint: a run whose prune
/// has two spent checkpoints to delete. `scan` runs seventeen paid turns (sixteen with a
/// tool), so in a run that completes in one segment its running entry is seq 2 and `sift`'s
/// is seq 21: one checkpoint ref (`<run>/ckpt/2`) is a prefix of the other (`<run>/ckpt/21`),
/// and only an exact reading of a mention tells them apart.
pub fn survey() -> Workflow {
    Workflow {
        name: "survey".into(),
        ops: vec![
            Op::Step { name: "gather".into() },
            Op::Agent { name: "scan".into(), tool_turns: 16, max_turns: 18, max_tool_calls: 17 },
            Op::Agent { name: "sift".into(), tool_turns: 2, max_turns: 4, max_tool_calls: 3 },
        ],
    }
}

/// An agent, an await, an agent, a second await, an agent: the run suspends twice, and the
/// segment between the two suspensions does new work yet settles `suspended` again (the
/// write-on-change rule must still journal that settle). The middle agent, `revise`, asks
/// for a tool every turn and has tool calls to spare: it ends on `max_turns` (3 paid turns,
/// 3 tools, 3 checkpoints, value `"limit"`), the one limit no other workflow reaches.
pub fn two_approvals() -> Workflow {
    let agent = |name: &str| Op::Agent { name: name.into(), tool_turns: 0, max_turns: 4, max_tool_calls: 0 };
    Workflow {
        name: "two-approvals".into(),
        ops: vec![
            agent("draft"),
            Op::Await { key: "legal".into() },
            Op::Agent { name: "revise".into(), tool_turns: u32::MAX, max_turns: 3, max_tool_calls: 5 },
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
        assert_eq!(
            expected_value(&two_approvals()),
            json!({"draft": "draft:0", "legal": {"approved": "legal"}, "revise": "limit", "final": {"approved": "final"}, "publish": "publish:0"})
        );
        assert_eq!(
            expected_value(&survey()),
            json!({"gather": "tool:gather:0", "scan": "scan:16", "sift": "sift:2"})
        );
    }
}
