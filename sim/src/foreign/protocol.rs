//! The store-driver wire protocol, version 1 (docs/foreign-stores.md is the guide; this
//! file is the definition the driver enforces).
//!
//! JSON Lines over the child's stdin (driver to store) and stdout (store to driver). One
//! child is one simulated process; it opens the database path the driver gives it.
//!
//! Driver to store, one line each:
//! - a request `{"id":N,"op":OP,"now_ms":T,...args}`; ids increase by one per request;
//!   `OP` is `hello`, `open`, a store call (`append`, `load`, `put_meta`, `get_meta`,
//!   `list_runs`, `delete`, `acquire`, `renew`, `release`, `blob_put`, `blob_get`,
//!   `blob_list`, `blob_delete`) or `close`;
//! - `{"id":N,"continue":true,"now_ms":T}` to resume the store after its hook or sleep
//!   line for request N.
//!
//! Store to driver, for request N, any number of environment lines and then one reply:
//! - `{"id":N,"hook":POINT,"run_id":R|null,"epoch":E|null}`: the store stopped at the named
//!   fault point and waits for `continue` (or for SIGKILL: a crash);
//! - `{"id":N,"sleep_ms":MS}`: the store wants to sleep MS ms in the driver's time (the
//!   boot retry); answered with `continue` once that much virtual time has passed;
//! - `{"id":N,"ok":VALUE}` or `{"id":N,"err":{"code":C,"message":M,...}}` ends the call.
//!
//! The store's clock is the `now_ms` of the last line it received. Payloads cross as the
//! exact JSON text the harness built (`entry`, `meta`) and come back as stored text, so
//! the database holds the same bytes as under the Rust store; blob bytes are base64.
//! Anything else on stdout is a protocol error, reported as a harness error naming the
//! process and the call.

use serde_json::{json, Map, Value};
use store::{Lease, LeaseRefusal, StoreError};

/// The protocol version this driver speaks.
pub const PROTOCOL_VERSION: u64 = 1;

/// What the store says about itself in its `hello` reply.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Hello {
    pub store: String,
    pub version: String,
    pub fenced_writes: bool,
    pub transcripts_fenced: bool,
    pub hooks: Vec<String>,
}

impl Hello {
    /// Decode and check a `hello` reply's value.
    pub fn from_value(v: &Value) -> Result<Hello, String> {
        let protocol = v.get("protocol").and_then(Value::as_u64);
        if protocol != Some(PROTOCOL_VERSION) {
            return Err(format!(
                "speaks protocol version {}, this driver speaks {PROTOCOL_VERSION}",
                v.get("protocol").map_or("(none)".to_string(), |p| p.to_string())
            ));
        }
        let text = |k: &str| {
            v.get(k).and_then(Value::as_str).map(str::to_string).ok_or(format!("hello without a {k} string"))
        };
        let caps = v.get("capabilities").cloned().unwrap_or(Value::Null);
        let flag = |k: &str| caps.get(k).and_then(Value::as_bool).unwrap_or(false);
        let hooks = match v.get("hooks") {
            Some(Value::Array(items)) => items
                .iter()
                .map(|h| {
                    let name = h.as_str().ok_or("a hook name that is not a string")?;
                    store::FaultPoint::from_name(name)
                        .map(|p| p.name().to_string())
                        .ok_or(format!("unknown hook point {name:?}"))
                })
                .collect::<Result<Vec<_>, String>>()?,
            _ => Vec::new(),
        };
        Ok(Hello {
            store: text("store")?,
            version: text("version")?,
            fenced_writes: flag("fenced_writes"),
            transcripts_fenced: flag("transcripts_fenced"),
            hooks,
        })
    }
}

/// One line from the store, classified.
#[derive(Debug, PartialEq)]
pub enum Incoming {
    Hook { point: store::FaultPoint, run_id: Option<String>, epoch: Option<u64> },
    Sleep { ms: u64 },
    Ok(Value),
    Err(StoreError),
}

/// Parse one stdout line as a message for call `id`; `Err` says what is wrong with it.
pub fn parse_line(line: &str, id: u64) -> Result<Incoming, String> {
    let v: Value =
        serde_json::from_str(line).map_err(|e| format!("wrote a line that is not JSON ({e}): {line:?}"))?;
    let Value::Object(m) = v else { return Err(format!("wrote a line that is not a JSON object: {line:?}")) };
    match m.get("id").and_then(Value::as_u64) {
        Some(got) if got == id => {}
        Some(got) => return Err(format!("answered call {got}, but call {id} was asked")),
        None => return Err(format!("wrote a line without an id: {line:?}")),
    }
    if let Some(h) = m.get("hook") {
        let name = h.as_str().ok_or("a hook name that is not a string")?;
        let point = store::FaultPoint::from_name(name).ok_or(format!("a hook at unknown point {name:?}"))?;
        let run_id = m.get("run_id").and_then(Value::as_str).map(str::to_string);
        let epoch = m.get("epoch").and_then(Value::as_u64);
        return Ok(Incoming::Hook { point, run_id, epoch });
    }
    if let Some(s) = m.get("sleep_ms") {
        let ms =
            s.as_u64().filter(|ms| *ms <= 60_000).ok_or(format!("a sleep that is not 0..=60000 ms: {s}"))?;
        return Ok(Incoming::Sleep { ms });
    }
    if let Some(v) = m.get("ok") {
        return Ok(Incoming::Ok(v.clone()));
    }
    if let Some(e) = m.get("err") {
        return decode_error(e).map(Incoming::Err);
    }
    Err(format!("wrote a line that is neither hook, sleep, ok nor err: {line:?}"))
}

/// The closed list of error codes, mapped onto the store's typed errors.
pub fn decode_error(e: &Value) -> Result<StoreError, String> {
    let code = e.get("code").and_then(Value::as_str).ok_or("an error without a code")?;
    let s = |k: &str| e.get(k).and_then(Value::as_str).unwrap_or("").to_string();
    let message = s("message");
    Ok(match code {
        "lease_held" => {
            let reason = s("reason");
            let reason = match reason.as_str() {
                "held_on_acquire" => LeaseRefusal::HeldOnAcquire,
                "stale_epoch" => LeaseRefusal::StaleEpoch,
                "foreign_owner" => LeaseRefusal::ForeignOwner,
                "expired" => LeaseRefusal::Expired,
                "not_held" => LeaseRefusal::NotHeld,
                "run_mismatch" => LeaseRefusal::RunMismatch,
                other => return Err(format!("lease_held with an unknown reason {other:?}")),
            };
            StoreError::LeaseHeld { run_id: s("run_id"), reason }
        }
        "journal_order_violation" => StoreError::JournalOrderViolation {
            run_id: s("run_id"),
            seq: e.get("seq").and_then(Value::as_u64).unwrap_or(0),
        },
        "busy" => StoreError::Busy {
            code: e.get("sqlite_code").and_then(Value::as_i64).map_or(5, |c| c as i32),
            during: static_during(&s("during")),
        },
        "invalid_input" => StoreError::InvalidInput { what: static_what(&s("what")), reason: message },
        "corrupt" => StoreError::Corrupt { what: static_what(&s("what")), key: s("key"), reason: message },
        "config" => StoreError::Config(message),
        "storage" => StoreError::Storage { during: static_during(&s("during")), message },
        other => return Err(format!("an unknown error code {other:?}")),
    })
}

/// The store's `during` labels are static strings; a foreign label maps onto the same set.
fn static_during(label: &str) -> &'static str {
    const KNOWN: &[&str] = &[
        "open",
        "schema bootstrap",
        "fence check",
        "append",
        "load",
        "put_meta",
        "get_meta",
        "list_runs",
        "delete",
        "acquire",
        "renew",
        "release",
        "blob put",
        "blob get",
        "blob list",
        "blob delete",
    ];
    KNOWN.iter().copied().find(|k| *k == label).unwrap_or("a foreign store call")
}

fn static_what(label: &str) -> &'static str {
    const KNOWN: &[&str] = &[
        "run id",
        "blob ref",
        "lease owner",
        "lease",
        "journal entry",
        "journal entry seq",
        "run meta",
        "meta payload",
        "run filter",
        "blob bytes",
        "request",
    ];
    KNOWN.iter().copied().find(|k| *k == label).unwrap_or("foreign input")
}

/// A request line.
pub fn request(id: u64, op: &str, now_ms: i64, args: Map<String, Value>) -> String {
    let mut m = Map::new();
    m.insert("id".into(), json!(id));
    m.insert("op".into(), json!(op));
    m.insert("now_ms".into(), json!(now_ms));
    m.extend(args);
    Value::Object(m).to_string()
}

/// A `continue` line.
pub fn resume(id: u64, now_ms: i64) -> String {
    json!({ "id": id, "continue": true, "now_ms": now_ms }).to_string()
}

/// A lease as it crosses the wire.
pub fn lease_value(lease: Option<&Lease>) -> Value {
    match lease {
        Some(l) => json!({ "run_id": l.run_id, "owner": l.owner, "epoch": l.epoch.0 }),
        None => Value::Null,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_are_classified_and_bad_ones_named() {
        let hook = parse_line(r#"{"id":3,"hook":"sqlite.append.after_check","run_id":"r","epoch":2}"#, 3);
        assert_eq!(
            hook,
            Ok(Incoming::Hook {
                point: store::FaultPoint::SqliteAppendAfterCheck,
                run_id: Some("r".into()),
                epoch: Some(2)
            })
        );
        assert_eq!(parse_line(r#"{"id":3,"ok":null}"#, 3), Ok(Incoming::Ok(Value::Null)));
        assert!(parse_line(r#"{"id":2,"ok":null}"#, 3).unwrap_err().contains("call 3 was asked"));
        assert!(parse_line("hello", 3).unwrap_err().contains("not JSON"));
        assert!(parse_line(r#"{"id":3,"hook":"sqlite.nope"}"#, 3).unwrap_err().contains("unknown point"));
        assert!(parse_line(r#"{"id":3,"err":{"code":"weird"}}"#, 3)
            .unwrap_err()
            .contains("unknown error code"));
        let held = parse_line(r#"{"id":3,"err":{"code":"lease_held","reason":"expired","run_id":"r"}}"#, 3);
        assert_eq!(
            held,
            Ok(Incoming::Err(StoreError::LeaseHeld { run_id: "r".into(), reason: LeaseRefusal::Expired }))
        );
    }

    #[test]
    fn a_hello_of_another_version_is_refused() {
        let v = json!({"protocol": 2, "store": "x", "version": "1"});
        assert!(Hello::from_value(&v).unwrap_err().contains("protocol version 2"));
        let v = json!({"protocol": 1, "store": "x", "version": "1", "capabilities": {"fenced_writes": true},
                       "hooks": ["sqlite.append.after_check"]});
        let h = Hello::from_value(&v).unwrap();
        assert!(h.fenced_writes && !h.transcripts_fenced);
        assert_eq!(h.hooks, vec!["sqlite.append.after_check".to_string()]);
    }
}
