//! Minimal histories for the oracle's unit tests: one call builder every property module
//! shares (a call that returned ok and took effect at apply position `id`, at `id` ms, then
//! each test sets the fields its case is about), and [`engine`]'s history builder over it
//! for the engine-level properties.

use store::{Epoch, Lease};

use crate::history::FinalState;
use crate::history::{Applied, Args, Call, History, OpKind, Outcome};
use crate::oracle::model::Judged;
use crate::oracle::{Expect, Witness};

pub const MS: u64 = 1_000_000;

/// A call of run `r` by node 0 that returned ok at `id` ms and took effect at apply position
/// `id`, with no lease and no arguments.
pub fn call(id: usize, op: OpKind) -> Call {
    let at = id as u64 * MS;
    Call {
        id,
        node: 0,
        incarnation: 0,
        op,
        run_id: "r".into(),
        lease: None,
        args: Args::default(),
        invoked_ns: at,
        returned_ns: Some(at),
        outcome: Outcome::Ok { detail: String::new() },
        granted: None,
        checked_now_ms: None,
        applied: Some(Applied { order: id, at_ns: at, store_now_ms: 0, lease_row: None, site_epoch: None }),
        seen_at: None,
        read: None,
        store_clock: crate::history::StoreClock::NotObserved,
        lease_grant: None,
    }
}

/// A lease of run `r`.
pub fn lease(owner: &str, epoch: u64) -> Lease {
    Lease { run_id: "r".into(), owner: owner.into(), epoch: Epoch(epoch) }
}

/// An engine-moment mark of run `r` by node 0 (first life) under epoch `epoch`, after the
/// first `before` calls (and as many applied mutations).
pub fn mark(point: &'static str, epoch: u64, before: usize) -> crate::history::Mark {
    crate::history::Mark {
        point,
        node: 0,
        incarnation: 0,
        run_id: "r".into(),
        epoch: Some(epoch),
        applied_before: before,
        invoked_before: before,
    }
}

/// The same call, carrying `payload` (serialized JSON).
pub fn with_payload(mut c: Call, payload: serde_json::Value) -> Call {
    c.args.payload = Some(payload.to_string());
    c
}

/// A minimal meta record (run id and status), spelled out field by field: the oracle may not
/// call `RunMeta::new`, a function of the system under test.
pub fn meta_record(run_id: &str, status: store::RunStatus) -> store::RunMeta {
    crate::record_text::bare_meta(run_id, status)
}

/// A listing filter that admits every run, spelled out field by field (the oracle may not
/// call `RunFilter::default`, a function of the system under test).
pub fn no_filter() -> store::RunFilter {
    store::RunFilter { status: None, statuses: None, name: None, tags: None }
}

/// A history of these calls, every one applied.
pub fn history(calls: Vec<Call>) -> History {
    History { applied_count: calls.len(), calls, ..History::default() }
}

/// Run one property check over `h` with an empty final state.
pub fn judge(h: &History, check: fn(&Judged, &mut Vec<Witness>)) -> Vec<Witness> {
    let fin = FinalState::default();
    let j = Judged::build(h, &fin, Expect::default());
    let mut out = Vec::new();
    check(&j, &mut out);
    out
}

pub mod engine {
    //! The engine properties' histories: a builder whose every mutation applies 1 ms after
    //! the previous one, with engine facts (submissions, payments, tool turns), and the
    //! journal entries of an agent op, a settle and a workflow's ops.

    use serde_json::{json, Value};
    use store::{Epoch, Lease, RunStatus};

    use crate::history::{Applied, Args, Fact, FactKind, FinalState, History, LeaseRow, OpKind};
    use crate::oracle::contract::Status;
    use crate::oracle::model::Judged;
    use crate::oracle::{Expect, Violation};

    pub const TTL: i64 = 300;

    /// A history under construction: every mutation applies 1 ms after the previous one.
    #[derive(Default)]
    pub struct HistoryBuilder {
        pub h: History,
        pub fin: FinalState,
        pub now_ms: i64,
        /// The scenario's options the history is judged under.
        pub expect: Expect,
    }

    pub fn lease(run: &str, owner: &str, epoch: u64) -> Lease {
        Lease { run_id: run.into(), owner: owner.into(), epoch: Epoch(epoch) }
    }

    impl HistoryBuilder {
        /// A history in which an engine host started run `r`.
        pub fn engine_run() -> HistoryBuilder {
            let mut h = HistoryBuilder::default();
            h.fact(0, "host", FactKind::Submitted { run_id: "r".into(), workflow: "happy".into() });
            h
        }
        pub fn push(
            &mut self,
            node: u32,
            op: OpKind,
            run: &str,
            lease: Option<Lease>,
            args: Args,
            granted: Option<Lease>,
        ) {
            self.now_ms += 1;
            let id = self.h.calls.len();
            let order = self.h.applied_count;
            self.h.applied_count += 1;
            let ns = self.now_ms as u64 * 1_000_000;
            let row = granted.as_ref().map(|g| LeaseRow {
                owner: g.owner.clone(),
                epoch: g.epoch.0,
                expires_at: self.now_ms + TTL,
            });
            let mut c = super::call(id, op);
            c.node = node;
            c.run_id = run.into();
            c.lease = lease;
            c.args = args;
            c.invoked_ns = ns;
            c.returned_ns = Some(ns);
            c.granted = granted;
            c.checked_now_ms = Some(self.now_ms);
            c.applied = Some(Applied {
                order,
                at_ns: ns,
                store_now_ms: self.now_ms,
                lease_row: row,
                site_epoch: None,
            });
            c.seen_at = Some(order + 1);
            self.h.calls.push(c);
        }
        /// A successful meta read of `run` by `actor` (not a mutation: it sees every mutation
        /// so far).
        pub fn read_meta(&mut self, node: u32, actor: &str, run: &str) {
            self.now_ms += 1;
            let mut c = super::call(self.h.calls.len(), OpKind::GetMeta);
            c.node = node;
            c.run_id = run.into();
            c.args.actor = Some(actor.into());
            c.invoked_ns = self.now_ms as u64 * 1_000_000;
            c.returned_ns = Some(c.invoked_ns);
            c.seen_at = Some(self.h.applied_count);
            self.h.calls.push(c);
        }
        /// A meta read by `actor` that found no meta (the run gone).
        pub fn read_meta_gone(&mut self, node: u32, actor: &str, run: &str) {
            self.read_meta(node, actor, run);
            if let Some(c) = self.h.calls.last_mut() {
                c.read = Some(crate::history::Read::Meta(None));
            }
        }
        pub fn acquire(&mut self, node: u32, owner: &str, run: &str, epoch: u64) -> Lease {
            let l = lease(run, owner, epoch);
            let args = Args { owner: Some(owner.into()), ..Args::default() };
            self.push(node, OpKind::Acquire, run, None, args, Some(l.clone()));
            l
        }
        pub fn meta(&mut self, node: u32, l: Option<&Lease>, run: &str, status: RunStatus, segments: u64) {
            let m =
                json!({"runId": run, "status": Status::of(status).word(), "segments": segments}).to_string();
            let args = Args { payload: Some(m.clone()), ..Args::default() };
            self.push(node, OpKind::PutMeta, run, l.cloned(), args, None);
            self.fin.meta.insert(run.into(), m);
        }
        /// A meta write with more fields (`more`'s, merged over the ones [`Self::meta`] writes).
        pub fn meta_with(
            &mut self,
            node: u32,
            l: Option<&Lease>,
            run: &str,
            status: RunStatus,
            segments: u64,
            more: Value,
        ) {
            let mut m = json!({"runId": run, "status": Status::of(status).word(), "segments": segments});
            if let (Some(o), Some(more)) = (m.as_object_mut(), more.as_object()) {
                o.extend(more.clone());
            }
            let m = m.to_string();
            let args = Args { payload: Some(m.clone()), ..Args::default() };
            self.push(node, OpKind::PutMeta, run, l.cloned(), args, None);
            self.fin.meta.insert(run.into(), m);
        }
        pub fn append(&mut self, node: u32, l: &Lease, run: &str, e: Value) {
            let args = Args { seq: e["seq"].as_u64(), payload: Some(e.to_string()), ..Args::default() };
            self.push(node, OpKind::Append, run, Some(l.clone()), args, None);
            self.fin.entries.entry(run.into()).or_default().push(e.to_string());
        }
        /// An append the store refused with `code`: nothing applied, nothing in the journal.
        pub fn append_lost(&mut self, node: u32, l: &Lease, run: &str, e: Value, code: &str) {
            let args = Args { seq: e["seq"].as_u64(), payload: Some(e.to_string()), ..Args::default() };
            self.push(node, OpKind::Append, run, Some(l.clone()), args, None);
            self.refuse_last(code);
        }
        /// Turn the last call pushed into a refusal with `code`: nothing applied. (The final
        /// state is the caller's: an append or meta write refused leaves it as it was.)
        pub fn refuse_last(&mut self, code: &str) {
            self.h.applied_count -= 1;
            let c = self.h.calls.last_mut().expect("a call was pushed");
            c.applied = None;
            c.outcome = crate::history::Outcome::Err { code: code.into(), message: code.into() };
        }
        pub fn ckpt(&mut self, node: u32, l: &Lease, run: &str, dispatch: u64, turns: u32) {
            // The checkpoint blob format of docs/engine-model.md 4.2: 0x01, then the state's JSON.
            let mut bytes = vec![0x01];
            let state = json!({"v": 1, "turns": turns, "toolCallsUsed": turns, "messages": []});
            bytes.extend(state.to_string().into_bytes());
            let r = format!("{run}/ckpt/{dispatch}");
            let args = Args { blob_ref: Some(r), bytes: Some(bytes), ..Args::default() };
            self.push(node, OpKind::BlobPut, run, Some(l.clone()), args, None);
        }
        /// A put of run `run`'s deletion record (the bare ref `<run>`) holding `bytes`.
        pub fn deletion_record(&mut self, node: u32, l: Option<&Lease>, run: &str, bytes: &[u8]) {
            let args = Args { blob_ref: Some(run.into()), bytes: Some(bytes.to_vec()), ..Args::default() };
            self.push(node, OpKind::BlobPut, run, l.cloned(), args, None);
        }
        /// A blob delete of `blob_ref` (of run `run`) that applied.
        pub fn blob_delete(&mut self, node: u32, l: Option<&Lease>, run: &str, blob_ref: &str) {
            let args = Args { blob_ref: Some(blob_ref.into()), ..Args::default() };
            self.push(node, OpKind::BlobDelete, run, l.cloned(), args, None);
        }
        pub fn delete(&mut self, node: u32, l: Option<&Lease>, run: &str) {
            self.push(node, OpKind::Delete, run, l.cloned(), Args::default(), None);
            self.fin.entries.remove(run);
            self.fin.meta.remove(run);
        }
        pub fn fact(&mut self, node: u32, owner: &str, kind: FactKind) {
            self.h.facts.push(Fact {
                at_ns: self.now_ms as u64 * 1_000_000,
                applied_before: self.h.applied_count,
                invoked_before: self.h.calls.len(),
                node,
                incarnation: 0,
                owner: owner.into(),
                kind,
            });
        }
        pub fn pay(&mut self, node: u32, owner: &str, run: &str, dispatch: u64, turn: u32) {
            self.fact(
                node,
                owner,
                FactKind::Paid {
                    run_id: run.into(),
                    op: "a".into(),
                    dispatch,
                    turn,
                    conversation: String::new(),
                },
            );
        }
        /// Node `node` (incarnation 0) reached engine fault point `point` on run `run` under
        /// `epoch`, after every call so far.
        pub fn mark(&mut self, node: u32, point: &'static str, run: &str, epoch: Option<u64>) {
            self.h.marks.push(crate::history::Mark {
                point,
                node,
                incarnation: 0,
                run_id: run.into(),
                epoch,
                applied_before: self.h.applied_count,
                invoked_before: self.h.calls.len(),
            });
        }
        /// Whether the history meets coverage goal `goal`.
        pub fn meets(&self, goal: &str) -> bool {
            crate::oracle::goals::met(&Judged::build(&self.h, &self.fin, self.expect)).contains(&goal)
        }

        pub fn judge(&self, property: &str) -> Vec<Violation> {
            let j = Judged::build(&self.h, &self.fin, self.expect);
            let p = crate::oracle::all_properties().find(|p| p.name == property).expect("a known property");
            p.judge(&j)
        }
    }

    pub fn running(seq: u64) -> Value {
        json!({"seq": seq, "kind": "agent", "status": "running", "key": "op:0:a", "value": {"op": "a"}})
    }

    pub fn terminal(seq: u64, of: u64, status: &str) -> Value {
        json!({"seq": seq, "kind": "agent", "status": status, "key": "op:0:a", "ref": of, "value": "v"})
    }

    pub fn settle(seq: u64, status: &str) -> Value {
        json!({
            "seq": seq,
            "kind": "decision",
            "status": "ok",
            "key": "run-settle",
            "value": {"decisionType": "run_settle", "runStatus": status}
        })
    }

    /// A journal entry of op `key` (kind, status), referencing `of` when given.
    pub fn op_entry(seq: u64, kind: &str, key: &str, status: &str, of: Option<u64>) -> Value {
        json!({"seq": seq, "kind": kind, "status": status, "key": key, "ref": of, "value": "v"})
    }

    /// Run `r` of workflow `workflow` ending ok with `entries` as its final journal.
    pub fn ended_ok(workflow: &str, entries: &[Value]) -> HistoryBuilder {
        let mut h = HistoryBuilder::default();
        h.fact(0, "host", FactKind::Submitted { run_id: "r".into(), workflow: workflow.into() });
        h.fin.entries.insert("r".into(), entries.iter().map(Value::to_string).collect());
        h.fin.meta.insert("r".into(), json!({"runId": "r", "status": "ok"}).to_string());
        h
    }

    pub fn paid(h: &mut HistoryBuilder, op: &str, dispatch: u64, turn: u32) {
        h.fact(
            0,
            "a",
            FactKind::Paid { run_id: "r".into(), op: op.into(), dispatch, turn, conversation: String::new() },
        );
    }

    pub fn tool(h: &mut HistoryBuilder, op: &str, dispatch: u64, turn: u32) {
        h.fact(0, "a", FactKind::Tool { run_id: "r".into(), op: op.into(), dispatch, turn });
    }
}
