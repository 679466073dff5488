//! The harness's own JSON text of the records a caller hands the store: a `RunMeta` and a
//! `JournalEntry`, written field for field from their public fields, never through the
//! store's serializer (`to_json`, its serde derive).
//!
//! Promise: for a record the store's serializer renders correctly, the text here is the same
//! byte for byte (the contract's field order, unset optional fields left out, `extra` after
//! the named fields in its own order, a repeated name written twice), so recorded traces do
//! not move. A serialization bug in the store then shows as a difference between what the
//! recorder says was written and what a read returns, instead of sitting on both sides of
//! the comparison. The recorder renders payloads with it, the oracle shapes read results
//! with it, and the foreign driver sends records over the wire with it.

use serde_json::{Map, Value};
use store::{JournalEntry, RunMeta, RunStatus};

/// The word the contract writes for a status.
pub fn status_word(s: RunStatus) -> &'static str {
    match s {
        RunStatus::Running => "running",
        RunStatus::Suspended => "suspended",
        RunStatus::Ok => "ok",
        RunStatus::Error => "error",
        RunStatus::Cancelled => "cancelled",
        RunStatus::Exhausted => "exhausted",
    }
}

/// An object's text from its pairs, in order; a name given twice is written twice.
fn object(pairs: &[(&str, Value)], extra: &Map<String, Value>) -> String {
    let mut out = String::from("{");
    let all = pairs.iter().map(|(k, v)| (*k, v)).chain(extra.iter().map(|(k, v)| (k.as_str(), v)));
    for (i, (k, v)) in all.enumerate() {
        if i > 0 {
            out.push(',');
        }
        out.push_str(&Value::String(k.to_string()).to_string());
        out.push(':');
        out.push_str(&v.to_string());
    }
    out.push('}');
    out
}

/// A meta record's text: `runId`, `status`, then `updatedAt`, `segments`, `genesis`, `name`,
/// `tags`, `workflowName`, `workflowHash`, `workflowSourceRef` where set (an empty tag list
/// or name is set), then `extra`.
pub fn meta_text(m: &RunMeta) -> String {
    let mut pairs: Vec<(&str, Value)> = vec![
        ("runId", Value::String(m.run_id.clone())),
        ("status", Value::String(status_word(m.status).into())),
    ];
    let text = |v: &Option<String>| v.as_ref().map(|s| Value::String(s.clone()));
    let optional = [
        ("updatedAt", text(&m.updated_at)),
        ("segments", m.segments.map(Value::from)),
        ("genesis", text(&m.genesis)),
        ("name", text(&m.name)),
        ("tags", m.tags.as_ref().map(|t| Value::Array(t.iter().cloned().map(Value::String).collect()))),
        ("workflowName", text(&m.workflow_name)),
        ("workflowHash", text(&m.workflow_hash)),
        ("workflowSourceRef", text(&m.workflow_source_ref)),
    ];
    pairs.extend(optional.into_iter().filter_map(|(k, v)| Some((k, v?))));
    object(&pairs, &m.extra)
}

/// A journal entry's text: `seq`, `kind`, `status`, `key`, `ref` where set, `value`, then
/// `extra`.
pub fn entry_text(e: &JournalEntry) -> String {
    let mut pairs: Vec<(&str, Value)> = vec![
        ("seq", Value::from(e.seq.0)),
        ("kind", Value::String(e.kind.clone())),
        ("status", Value::String(e.status.clone())),
        ("key", Value::String(e.key.clone())),
    ];
    if let Some(r) = e.ref_seq {
        pairs.push(("ref", Value::from(r.0)));
    }
    pairs.push(("value", e.value.clone()));
    object(&pairs, &e.extra)
}

/// What a JSON reader makes of a record's text (a name written twice keeps its last value,
/// as when a stored payload is read): the shape a read result is compared by.
fn shape(text: &str) -> Value {
    serde_json::from_str(text).unwrap_or(Value::Null)
}

/// The shape of a meta record a read returned.
pub fn meta_shape(m: &RunMeta) -> Value {
    shape(&meta_text(m))
}

/// The shape of a journal entry a read returned.
pub fn entry_shape(e: &JournalEntry) -> Value {
    shape(&entry_text(e))
}

/// A bare meta record (run id and status), built from its fields: neither the oracle nor this
/// module may call `RunMeta::new`, a function of the system under test. For tests.
#[cfg(test)]
pub(crate) fn bare_meta(run_id: &str, status: RunStatus) -> RunMeta {
    RunMeta {
        run_id: run_id.into(),
        status,
        updated_at: None,
        segments: None,
        genesis: None,
        name: None,
        tags: None,
        workflow_name: None,
        workflow_hash: None,
        workflow_source_ref: None,
        extra: Map::new(),
    }
}

/// An entry as a store would return it (empty key, no ref, no extra fields), built from its
/// fields. For tests.
#[cfg(test)]
pub(crate) fn bare_entry(seq: u64, kind: &str, status: &str, value: Value) -> JournalEntry {
    JournalEntry {
        seq: store::Seq(seq),
        kind: kind.into(),
        status: status.into(),
        key: String::new(),
        ref_seq: None,
        value,
        extra: Map::new(),
    }
}

#[cfg(test)]
mod tests {
    //! Pinned texts (the contract's order), and agreement with the store's serializer on the
    //! records the store renders correctly: the traces recorded before this module existed
    //! replay byte for byte.
    use super::*;
    use serde_json::json;
    use store::Seq;

    fn full_meta() -> RunMeta {
        let mut m = bare_meta("r1", RunStatus::Suspended);
        m.updated_at = Some("2026-01-01T00:00:00.000Z".into());
        m.segments = Some(3);
        m.genesis = Some("g".into());
        m.name = Some("caf\u{e9} \"q\"".into());
        m.tags = Some(vec!["a".into(), "b".into()]);
        m.workflow_name = Some("w".into());
        m.workflow_hash = Some("h".into());
        m.workflow_source_ref = Some("s".into());
        m.extra.insert("nested".into(), json!({"deep": [1, 2.5, null, true]}));
        m.extra.insert("big".into(), json!(9007199254740991u64));
        m
    }

    #[test]
    fn a_meta_is_written_in_the_contracts_order() {
        assert_eq!(meta_text(&bare_meta("r", RunStatus::Cancelled)), r#"{"runId":"r","status":"cancelled"}"#);
        assert_eq!(
            meta_text(&full_meta()),
            r#"{"runId":"r1","status":"suspended","updatedAt":"2026-01-01T00:00:00.000Z","segments":3,"genesis":"g","name":"café \"q\"","tags":["a","b"],"workflowName":"w","workflowHash":"h","workflowSourceRef":"s","nested":{"deep":[1,2.5,null,true]},"big":9007199254740991}"#
        );
    }

    #[test]
    fn empty_values_are_written_not_dropped() {
        let mut m = bare_meta("r", RunStatus::Running);
        m.tags = Some(Vec::new());
        m.name = Some(String::new());
        assert_eq!(meta_text(&m), r#"{"runId":"r","status":"running","name":"","tags":[]}"#);
        assert_eq!(meta_shape(&m), json!({"runId": "r", "status": "running", "name": "", "tags": []}));
    }

    #[test]
    fn a_repeated_name_is_written_twice_and_read_last() {
        let mut m = bare_meta("r", RunStatus::Running);
        m.extra.insert("status".into(), json!("again"));
        assert_eq!(meta_text(&m), r#"{"runId":"r","status":"running","status":"again"}"#);
        assert_eq!(meta_shape(&m), json!({"runId": "r", "status": "again"}));
    }

    #[test]
    fn an_entry_is_written_in_the_contracts_order() {
        let mut e = bare_entry(7, "tool", "ok", json!({"x": 1}));
        assert_eq!(entry_text(&e), r#"{"seq":7,"kind":"tool","status":"ok","key":"","value":{"x":1}}"#);
        e.key = "k".into();
        e.ref_seq = Some(Seq(2));
        e.extra.insert("at".into(), json!("now"));
        assert_eq!(
            entry_text(&e),
            r#"{"seq":7,"kind":"tool","status":"ok","key":"k","ref":2,"value":{"x":1},"at":"now"}"#
        );
    }

    #[test]
    fn the_text_agrees_with_a_correct_serializer() {
        // The store's serializer is correct on these records (its own tests pin it); the
        // harness's text must be the same bytes, or every recorded trace would move.
        let mut bare = bare_meta("r", RunStatus::Ok);
        bare.tags = Some(vec!["t".into()]);
        for m in [full_meta(), bare, bare_meta("x", RunStatus::Exhausted)] {
            assert_eq!(meta_text(&m), serde_json::to_string(&m).unwrap());
        }
        let mut e = bare_entry(1, "run_settle", "ok", json!(null));
        e.ref_seq = Some(Seq(1));
        e.extra.insert("float".into(), json!(0.1));
        assert_eq!(entry_text(&e), serde_json::to_string(&e).unwrap());
        for s in RunStatus::ALL {
            assert_eq!(format!("\"{}\"", status_word(s)), serde_json::to_string(&s).unwrap());
        }
    }
}
