//! The engine's outside world and the engine-level actors of a simulated process.
//!
//! `LedgerEffects` is the provider and the tools: every paid model call and every tool side
//! effect is written to the history as a fact (with the node, its incarnation, the virtual
//! instant and how many store mutations had been applied), then answered after a latency
//! drawn from the node's own stream. Replies are a pure function of (op, turn) from the
//! shared [`crate::ledger`], so the value a workflow must settle with is known in advance.
//!
//! The actors: a host that starts its share of the runs (`engine.run`, the run's own
//! process owns it from genesis) and now and then explicitly resumes one of its terminal
//! runs (a user's retry); a queue worker that sweeps, drives and applies retention; and a
//! resolver that answers open suspensions offline. All of them record what their segments
//! settled as facts, so the oracle can judge values and settles.

use std::time::Duration;

use rand_chacha::ChaCha8Rng;
use serde_json::Value;
use store::engine::{Effects, EngineError, Outcome, PaidCall, ToolCall, Workflow};
use store::LocalFuture;

use crate::history::{FactKind, Recorder};
use crate::ledger::{reply, tool_result};
use crate::seed::{rng, Draw};
use crate::time::now_ns;

/// The provider and tool world of one node incarnation, writing the ledger.
pub struct LedgerEffects {
    rec: Recorder,
    node: u32,
    incarnation: u32,
    /// The engine's owner identity (who pays).
    owner: String,
    /// Latency bounds in ms (inclusive); `(0, 0)` answers at once.
    latency_ms: (u64, u64),
    rng: std::cell::RefCell<ChaCha8Rng>,
    /// Geneses minted so far: each fresh run gets its own, as rulvar's ULID is unique.
    minted: std::cell::Cell<u64>,
}

impl LedgerEffects {
    pub fn new(sink: &FactSink, seed: u64, latency_ms: (u64, u64)) -> LedgerEffects {
        let stream = fnv_owner(&sink.owner) ^ (u64::from(sink.node) << 32 | u64::from(sink.incarnation));
        LedgerEffects {
            rec: sink.rec.clone(),
            node: sink.node,
            incarnation: sink.incarnation,
            owner: sink.owner.clone(),
            latency_ms,
            rng: std::cell::RefCell::new(rng(seed, "latency", stream)),
            minted: std::cell::Cell::new(0),
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

impl Effects for LedgerEffects {
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
                conversation: Value::Array(call.messages.clone()).to_string(),
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

    /// Unique per fresh start (docs/engine-model.md 5.3: a ULID), so a run deleted and
    /// recreated by the same process is told from the original. (Before stop 38 this was
    /// `gen-<run>-n<node>i<incarnation>`, the same for every creation by one process: a
    /// worker's skip cache then took a recreated run that reached the parked length for the
    /// parked one, and skipped it with its suspension answered; `sweeps_skip_only_blocked_runs`
    /// caught it in queue seed 8772.)
    fn mint_genesis(&self, run_id: &str) -> String {
        let k = self.minted.get() + 1;
        self.minted.set(k);
        format!("gen-{run_id}-{}-{k}", self.owner)
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
