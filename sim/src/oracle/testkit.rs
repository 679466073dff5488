//! Minimal histories for the oracle's unit tests: one call builder the property modules
//! share (a call that returned ok and took effect at apply position `id`, at `id` ms), then
//! each test sets the fields its case is about.

use store::{Epoch, Lease};

use crate::history::FinalState;
use crate::history::{Applied, Args, Call, History, OpKind, Outcome};
use crate::oracle::model::Judged;
use crate::oracle::{Expect, Violation};

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
        lease_grant: None,
    }
}

/// A lease of run `r`.
pub fn lease(owner: &str, epoch: u64) -> Lease {
    Lease { run_id: "r".into(), owner: owner.into(), epoch: Epoch(epoch) }
}

/// The same call, carrying `payload` (serialized JSON).
pub fn with_payload(mut c: Call, payload: serde_json::Value) -> Call {
    c.args.payload = Some(payload.to_string());
    c
}

/// A history of these calls, every one applied.
pub fn history(calls: Vec<Call>) -> History {
    History { applied_count: calls.len(), calls, ..History::default() }
}

/// Run one property check over `h` with an empty final state.
pub fn judge(h: &History, check: fn(&Judged, &mut Vec<Violation>)) -> Vec<Violation> {
    let fin = FinalState::default();
    let j = Judged::build(h, &fin, Expect::default());
    let mut out = Vec::new();
    check(&j, &mut out);
    out
}
