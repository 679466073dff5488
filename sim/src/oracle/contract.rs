//! The oracle's own reading of the store and engine contracts (docs/store-contract.md,
//! docs/engine-model.md), written from those documents and not from the store crate:
//! payload views decoded from plain JSON, `metaMatchesFilter`, terminal statuses, the run of
//! a blob ref, the last `run_settle`, the reconciler's audit table (docs/engine-model.md
//! 7.1), the checkpoint blob format (4.2, 4.4) and the journal keys of a workflow's ops.
//!
//! Promise: nothing here calls the system under test. From `store` it reads only plain data
//! (`RunFilter` and `RunStatus` values, `Op`/`Workflow` as data, the settle's decision-type
//! constant). Every decoder is total: a malformed payload is simply not decodable (`None`),
//! never a panic.

use std::collections::BTreeSet;
use std::fmt;

use serde_json::Value;
use store::engine::{Op, PROVIDER_CALL_DECISION_TYPE, RUN_SETTLE_DECISION_TYPE};
use store::{RunFilter, RunStatus};

use crate::history::{Args, Call, OpKind};
use crate::record_text::entry_shape;

/// A run status as meta records it (docs/engine-model.md 3.1): `running` and `suspended` are
/// resumable, the other four terminal.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Status {
    Running,
    Suspended,
    Ok,
    Error,
    Cancelled,
    Exhausted,
}

impl Status {
    const ALL: [Status; 6] =
        [Status::Running, Status::Suspended, Status::Ok, Status::Error, Status::Cancelled, Status::Exhausted];

    /// The word a payload carries.
    pub fn word(self) -> &'static str {
        match self {
            Status::Running => "running",
            Status::Suspended => "suspended",
            Status::Ok => "ok",
            Status::Error => "error",
            Status::Cancelled => "cancelled",
            Status::Exhausted => "exhausted",
        }
    }

    /// The status a payload word names; `None` for any other text.
    pub fn from_word(word: &str) -> Option<Status> {
        Status::ALL.into_iter().find(|s| s.word() == word)
    }

    /// `ok`, `error`, `cancelled`, `exhausted` (the reconciler's TERMINAL set).
    pub fn is_terminal(self) -> bool {
        !matches!(self, Status::Running | Status::Suspended)
    }

    /// The oracle's status for a filter's or a read's status value (a plain match over the
    /// value's variants).
    pub fn of(s: RunStatus) -> Status {
        match s {
            RunStatus::Running => Status::Running,
            RunStatus::Suspended => Status::Suspended,
            RunStatus::Ok => Status::Ok,
            RunStatus::Error => Status::Error,
            RunStatus::Cancelled => Status::Cancelled,
            RunStatus::Exhausted => Status::Exhausted,
        }
    }
}

impl fmt::Display for Status {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.word())
    }
}

/// The largest integer rulvar's engine represents exactly (`Number.MAX_SAFE_INTEGER`).
const SAFE_INTEGER_MAX: u64 = (1 << 53) - 1;

/// The largest seq a store accepts: the same bound (the Rust port's `SEQ_MAX`).
pub const SEQ_LIMIT: u64 = SAFE_INTEGER_MAX;

/// The lease ttls (ms) a store may be constructed with (L6: an integer in 1 to 2147483647,
/// or a configuration error before the database opens).
pub const TTL_MS_DOMAIN: std::ops::RangeInclusive<i64> = 1..=2_147_483_647;

/// Whether a call is a store construction given a lease ttl outside [`TTL_MS_DOMAIN`].
pub fn boot_outside_the_ttl_domain(c: &Call) -> bool {
    c.op == OpKind::Boot && c.args.ttl_ms.is_some_and(|ttl| !TTL_MS_DOMAIN.contains(&ttl))
}

/// A run id (and each blob-ref segment) is one safe path segment: `[A-Za-z0-9._-]+`, not
/// `.` or `..` (docs/store-contract.md 1.5, T5).
pub fn safe_segment(s: &str) -> bool {
    !s.is_empty()
        && s != "."
        && s != ".."
        && s.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
}

/// An optional field: absent or null is `Some(None)`; present with the wrong type is `None`.
fn optional<'v, T>(
    o: &'v serde_json::Map<String, Value>,
    k: &str,
    f: impl Fn(&'v Value) -> Option<T>,
) -> Option<Option<T>> {
    match o.get(k) {
        None | Some(Value::Null) => Some(None),
        Some(v) => f(v).map(Some),
    }
}

fn text(v: &Value) -> Option<String> {
    v.as_str().map(str::to_string)
}

/// The oracle's view of a meta record (`RunMeta`, docs/store-contract.md 1.1): an opaque JSON
/// record keyed by `runId` with a `status`, plus the optional fields the properties read.
#[derive(Clone, Debug, PartialEq)]
pub struct MetaView {
    pub run_id: String,
    pub status: Status,
    pub segments: Option<u64>,
    pub genesis: Option<String>,
    pub name: Option<String>,
    pub tags: Option<Vec<String>>,
    pub workflow_name: Option<String>,
    /// The whole record as written.
    pub raw: Value,
}

impl MetaView {
    /// Decode a meta payload; `None` when it is not a meta record (not an object, no safe
    /// `runId`, no known `status`, or a known field of the wrong type).
    pub fn parse(payload: &str) -> Option<MetaView> {
        MetaView::of_value(serde_json::from_str(payload).ok()?)
    }

    /// As [`MetaView::parse`], from a JSON value.
    pub fn of_value(raw: Value) -> Option<MetaView> {
        let o = raw.as_object()?;
        let run_id = o.get("runId")?.as_str()?.to_string();
        if !safe_segment(&run_id) {
            return None;
        }
        let status = Status::from_word(o.get("status")?.as_str()?)?;
        let segments = optional(o, "segments", Value::as_u64)?;
        let genesis = optional(o, "genesis", text)?;
        let name = optional(o, "name", text)?;
        let tags = optional(o, "tags", |v| v.as_array()?.iter().map(text).collect::<Option<Vec<_>>>())?;
        let workflow_name = optional(o, "workflowName", text)?;
        for k in ["updatedAt", "workflowHash", "workflowSourceRef"] {
            optional(o, k, text)?;
        }
        Some(MetaView { run_id, status, segments, genesis, name, tags, workflow_name, raw })
    }
}

/// The oracle's view of a journal entry (docs/engine-model.md 8.1): the envelope fields the
/// properties read, and the whole entry as written.
#[derive(Clone, Debug, PartialEq)]
pub struct EntryView {
    pub seq: u64,
    pub kind: String,
    pub status: String,
    /// The content key (empty when the entry has none).
    pub key: String,
    /// For a terminal, the seq of its running entry; for a ref-entry, its target's.
    pub ref_seq: Option<u64>,
    pub value: Value,
    pub raw: Value,
}

impl EntryView {
    /// Decode an entry payload; `None` when it is not an entry (not an object; no integer
    /// `seq` within the safe range; no `kind` or `status` text; a `key` or `ref` of the wrong
    /// type).
    pub fn parse(payload: &str) -> Option<EntryView> {
        EntryView::of_value(serde_json::from_str(payload).ok()?)
    }

    /// As [`EntryView::parse`], from a JSON value.
    pub fn of_value(raw: Value) -> Option<EntryView> {
        let o = raw.as_object()?;
        let seq = o.get("seq")?.as_u64().filter(|&s| s <= SAFE_INTEGER_MAX)?;
        let kind = o.get("kind")?.as_str()?.to_string();
        let status = o.get("status")?.as_str()?.to_string();
        let key = optional(o, "key", text)?.unwrap_or_default();
        let ref_seq = optional(o, "ref", |v| v.as_u64().filter(|&s| s <= SAFE_INTEGER_MAX))?;
        let value = o.get("value").cloned().unwrap_or(Value::Null);
        Some(EntryView { seq, kind, status, key, ref_seq, value, raw })
    }
}

/// What a call's arguments make malformed by the contract, if anything: `run id`, `blob
/// ref`, `lease owner`, `journal entry seq` or a record that names a field twice (`journal
/// entry`, `run meta`), checked in that order (a store refuses bad input before it looks at a
/// lease). `None` for a well-formed call, and for the operations whose only argument is a
/// lease or a filter.
pub fn malformed_input(op: OpKind, run_id: &str, args: &Args) -> Option<&'static str> {
    match op {
        OpKind::Acquire if !safe_segment(run_id) => Some("run id"),
        OpKind::Acquire if args.owner.as_deref().is_some_and(str::is_empty) => Some("lease owner"),
        OpKind::Append
        | OpKind::Load
        | OpKind::PutMeta
        | OpKind::GetMeta
        | OpKind::Delete
        | OpKind::BlobList
            if !safe_segment(run_id) =>
        {
            Some("run id")
        }
        OpKind::Append if args.seq.is_some_and(|s| s > SEQ_LIMIT) => Some("journal entry seq"),
        OpKind::Append if args.payload.as_deref().is_some_and(names_a_field_twice) => Some("journal entry"),
        OpKind::PutMeta if args.payload.as_deref().is_some_and(names_a_field_twice) => Some("run meta"),
        OpKind::BlobPut | OpKind::BlobGet | OpKind::BlobDelete
            if args.blob_ref.as_deref().is_some_and(|r| !r.split('/').all(safe_segment)) =>
        {
            Some("blob ref")
        }
        _ => None,
    }
}

/// Whether a record's JSON text names one of its top-level fields twice (docs/store-contract.md
/// 1.1: a record names each field once; a JSON text with a repeated name has no one
/// reading). `false` for text that is not a JSON object.
pub fn names_a_field_twice(text: &str) -> bool {
    struct Repeats(bool);
    struct Names;
    impl<'de> serde::de::Visitor<'de> for Names {
        type Value = Repeats;
        fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
            f.write_str("a JSON value")
        }
        fn visit_map<A: serde::de::MapAccess<'de>>(self, mut map: A) -> Result<Repeats, A::Error> {
            let mut seen = BTreeSet::new();
            let mut twice = false;
            while let Some(name) = map.next_key::<std::borrow::Cow<'de, str>>()? {
                map.next_value::<serde::de::IgnoredAny>()?;
                twice |= !seen.insert(name);
            }
            Ok(Repeats(twice))
        }
    }
    impl<'de> serde::Deserialize<'de> for Repeats {
        fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Repeats, D::Error> {
            d.deserialize_map(Names)
        }
    }
    serde_json::from_str::<Repeats>(text).is_ok_and(|r| r.0)
}

/// `metaMatchesFilter` (docs/store-contract.md 1.3): `status` and `statuses` combine as
/// either-matches (`statuses: []` alone matches nothing), `name` is equality, `tags` is
/// all-of, and an empty filter matches everything.
pub fn filter_matches(filter: &RunFilter, meta: &MetaView) -> bool {
    if filter.status.is_some() || filter.statuses.is_some() {
        let single = filter.status.map(Status::of) == Some(meta.status);
        let multi = filter.statuses.iter().flatten().any(|&s| Status::of(s) == meta.status);
        if !single && !multi {
            return false;
        }
    }
    honours_name_and_tags(filter, meta)
}

/// What a `listRuns` result must honour exactly (docs/store-contract.md 1.2, meta separation):
/// `status` (when no `statuses` widens it), `name` and `tags`. A `statuses` filter may
/// return a superset, so it is not part of the strict test.
pub fn filter_excludes_strictly(filter: &RunFilter, meta: &MetaView) -> bool {
    if filter.statuses.is_none() {
        if let Some(s) = filter.status {
            if Status::of(s) != meta.status {
                return true;
            }
        }
    }
    !honours_name_and_tags(filter, meta)
}

fn honours_name_and_tags(filter: &RunFilter, meta: &MetaView) -> bool {
    if let Some(name) = &filter.name {
        if meta.name.as_deref() != Some(name.as_str()) {
            return false;
        }
    }
    if let Some(wanted) = &filter.tags {
        let have: &[String] = meta.tags.as_deref().unwrap_or(&[]);
        if wanted.iter().any(|t| !have.contains(t)) {
            return false;
        }
    }
    true
}

/// The run a blob ref belongs to: its first `/`-separated segment (docs/engine-model.md M1).
pub fn run_of_ref(blob_ref: &str) -> &str {
    match blob_ref.find('/') {
        Some(i) => &blob_ref[..i],
        None => blob_ref,
    }
}

/// Whether a call puts a run's deletion record: the bare ref `<runId>`, holding the generation
/// (the meta's `genesis`) a deletion cascade began on (docs/engine-model.md 6.1).
pub fn is_deletion_record_put(c: &Call) -> bool {
    c.op == OpKind::BlobPut && c.args.blob_ref.as_deref() == Some(c.run_id.as_str())
}

/// Whether a deletion record put names the generation `genesis` (the empty string names a meta
/// without one).
pub fn record_names(record: &Call, genesis: Option<&str>) -> bool {
    names_generation(record.args.bytes.as_deref().unwrap_or_default(), genesis)
}

/// Whether deletion-record bytes (as put, or as a read returned them) name the generation
/// `genesis` (the empty string names a meta without one).
pub fn names_generation(record: &[u8], genesis: Option<&str>) -> bool {
    record == genesis.unwrap_or_default().as_bytes()
}

/// The running seq of a checkpoint ref `<runId>/ckpt/<runningSeq>` (docs/engine-model.md 4.1).
pub fn checkpoint_seq(blob_ref: &str) -> Option<u64> {
    let mut parts = blob_ref.splitn(3, '/');
    let _run = parts.next()?;
    if parts.next()? != "ckpt" {
        return None;
    }
    parts.next()?.parse().ok()
}

/// The status a `run_settle` decision records (docs/engine-model.md 3.3): a `decision` whose
/// value has `decisionType: run_settle` and a status word in `runStatus`.
pub fn settle_status(e: &EntryView) -> Option<Status> {
    if !is_decision(e, RUN_SETTLE_DECISION_TYPE) {
        return None;
    }
    Status::from_word(e.value.get("runStatus")?.as_str()?)
}

/// Whether an entry is a `decision` of the given `decisionType`.
pub fn is_decision(e: &EntryView, decision_type: &str) -> bool {
    e.kind == "decision" && e.value.get("decisionType").and_then(Value::as_str) == Some(decision_type)
}

/// A billing receipt's (dispatch, turn), from its key `pc:<dispatch>:<turn>` (docs/engine-model.md
/// M3 step 4): `None` when the entry is no `provider-call` decision, `Some(None)` when it is
/// one with a malformed key.
pub fn receipt_of(e: &EntryView) -> Option<Option<(u64, u32)>> {
    if !is_decision(e, PROVIDER_CALL_DECISION_TYPE) {
        return None;
    }
    let mut parts = e.key.strip_prefix("pc:").map(|k| k.split(':'));
    let mut next = || parts.as_mut().and_then(|p| p.next());
    let dispatch = next().and_then(|d| d.parse().ok());
    let turn = next().and_then(|t| t.parse().ok());
    Some(dispatch.zip(turn).filter(|_| next().is_none()))
}

/// `lastRunSettle` (docs/engine-model.md 7.1): scanning backwards, the last settle whose
/// `runStatus` is a recognised outcome (3.1: ok, error, cancelled, exhausted, suspended;
/// `running` is never an outcome), with its seq.
pub fn last_run_settle(entries: &[EntryView]) -> Option<(u64, Status)> {
    entries.iter().rev().find_map(|e| settle_status(e).filter(|&s| s != Status::Running).map(|s| (e.seq, s)))
}

/// The reconciler's classification of a run (docs/engine-model.md 7.1).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    Consistent,
    MetaBehind,
    Stranded,
    Suspect,
}

impl Verdict {
    /// The reconciler's word for the verdict (as `runs audit` prints it).
    pub fn word(self) -> &'static str {
        match self {
            Verdict::Consistent => "consistent",
            Verdict::MetaBehind => "meta-behind",
            Verdict::Stranded => "stranded",
            Verdict::Suspect => "suspect",
        }
    }
}

/// One run's audit: the verdict and why, in words.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Audit {
    pub verdict: Verdict,
    pub reason: String,
    /// What a repair rewrites the meta status to (meta-behind and stranded only).
    pub repair_to: Option<Status>,
    /// What the report also counts: the last journaled settle's status, the entries after
    /// it, the dangling dispatches and the open suspensions (both over the whole journal).
    pub counts: AuditCounts,
}

/// The counts an audit report carries beside its verdict (docs/engine-model.md 7.1).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AuditCounts {
    pub entries: usize,
    pub settle: Option<Status>,
    pub after_settle: usize,
    pub dangling: usize,
    pub open: usize,
}

/// What a journal's entries reference, gathered once so each entry's test is a lookup.
pub struct JournalRefs {
    /// Every seq some entry's `ref` names.
    referenced: BTreeSet<u64>,
    /// Every seq a `resolution` or `abandon` entry's `ref` names.
    resolved: BTreeSet<u64>,
}

impl JournalRefs {
    pub fn of(all: &[EntryView]) -> JournalRefs {
        let mut refs = JournalRefs { referenced: BTreeSet::new(), resolved: BTreeSet::new() };
        for r in all {
            if let Some(seq) = r.ref_seq {
                refs.referenced.insert(seq);
                if matches!(r.kind.as_str(), "resolution" | "abandon") {
                    refs.resolved.insert(seq);
                }
            }
        }
        refs
    }

    /// A dispatch no entry references: a `running` entry whose seq no entry's `ref` names
    /// (docs/engine-model.md 7.1, 8.3).
    pub fn dangling(&self, e: &EntryView) -> bool {
        e.status == "running" && !self.referenced.contains(&e.seq)
    }

    /// An `external` or `approval` suspension no `resolution` or `abandon` ref-entry targets.
    pub fn open_suspension(&self, e: &EntryView) -> bool {
        matches!(e.kind.as_str(), "external" | "approval")
            && e.status == "suspended"
            && !self.resolved.contains(&e.seq)
    }
}

/// `auditRun`'s decision table (docs/engine-model.md 7.1), as a pure function of the meta status
/// (`None`: no row) and the whole journal.
pub fn audit(meta: Option<Status>, entries: &[EntryView]) -> Audit {
    let refs = JournalRefs::of(entries);
    let open = entries.iter().filter(|e| refs.open_suspension(e)).count();
    let dangling_all = entries.iter().filter(|e| refs.dangling(e)).count();
    let settle = last_run_settle(entries);
    let after_settle = settle.map_or(0, |(seq, _)| {
        entries.len() - entries.iter().position(|e| e.seq == seq).map_or(entries.len(), |i| i + 1)
    });
    let counts = AuditCounts {
        entries: entries.len(),
        settle: settle.map(|(_, s)| s),
        after_settle,
        dangling: dangling_all,
        open,
    };
    let done = |verdict: Verdict, reason: String| Audit { verdict, reason, repair_to: None, counts };
    let Some(meta) = meta else {
        return if entries.is_empty() {
            done(Verdict::Consistent, "no journal and no meta row".into())
        } else {
            done(
                Verdict::Suspect,
                "a journal without a meta row (a crash before the first meta write)".into(),
            )
        };
    };
    match settle {
        Some((seq, recorded)) => {
            // The tail: the entries after the settle.
            let after = entries.iter().position(|e| e.seq == seq).map_or(entries.len(), |i| i + 1);
            let tail = &entries[after..];
            let derived = if tail.iter().any(|e| refs.dangling(e)) {
                Status::Running
            } else if tail.is_empty() {
                recorded
            } else if open > 0 {
                Status::Suspended
            } else {
                Status::Running
            };
            if meta == derived {
                done(Verdict::Consistent, format!("meta {meta} matches the journal"))
            } else if meta.is_terminal() && !derived.is_terminal() {
                Audit {
                    repair_to: Some(derived),
                    ..done(
                        Verdict::Stranded,
                        format!("terminal meta {meta} over live journal work ({derived})"),
                    )
                }
            } else {
                Audit {
                    repair_to: Some(derived),
                    ..done(Verdict::MetaBehind, format!("meta {meta} behind the journal ({derived})"))
                }
            }
        }
        None if meta.is_terminal() && dangling_all > 0 => Audit {
            repair_to: Some(Status::Running),
            ..done(
                Verdict::Stranded,
                format!(
                    "terminal meta {meta} over {dangling_all} dangling dispatch(es) and no journaled settle"
                ),
            )
        },
        None if matches!(meta, Status::Ok | Status::Exhausted) && open > 0 => done(
            Verdict::Suspect,
            format!("meta {meta} with {open} open suspension(s) and no journaled settle"),
        ),
        None if meta.is_terminal() => {
            done(Verdict::Consistent, "terminal meta over a structurally quiet journal".into())
        }
        None => done(Verdict::Consistent, "meta is resumable".into()),
    }
}

/// The oracle's views of the entries a load returned; `None` when one is not readable as an
/// entry.
pub fn entry_views(entries: &[store::JournalEntry]) -> Option<Vec<EntryView>> {
    entries.iter().map(|e| EntryView::of_value(entry_shape(e))).collect()
}

/// A journal's shape in the terms the audit table (7.1) distinguishes, as a name: `empty`;
/// `unsettled` (no journaled settle); `settled_quiet` (nothing after the last settle) or
/// `settled_live` (entries after it); then the qualifiers that hold, in this order:
/// `dangling` (unsettled: any dangling dispatch), `dangling_before` (a dangling dispatch at or
/// before the settle), `dangling_tail` (one after it), `open` (an open suspension). Coverage
/// names states by it; the table's cells that differ only in these are what a misread of
/// the table gets wrong.
pub fn journal_shape(entries: &[EntryView]) -> String {
    if entries.is_empty() {
        return "empty".to_string();
    }
    let refs = JournalRefs::of(entries);
    let is_dangling = |e: &EntryView| refs.dangling(e);
    let open = entries.iter().any(|e| refs.open_suspension(e));
    let mut name = match last_run_settle(entries) {
        None => {
            let mut n = "unsettled".to_string();
            if entries.iter().any(is_dangling) {
                n.push_str(":dangling");
            }
            n
        }
        Some((seq, _)) => {
            let after = entries.iter().position(|e| e.seq == seq).map_or(entries.len(), |i| i + 1);
            let (head, tail) = entries.split_at(after);
            let mut n = if tail.is_empty() { "settled_quiet" } else { "settled_live" }.to_string();
            if head.iter().any(is_dangling) {
                n.push_str(":dangling_before");
            }
            if tail.iter().any(is_dangling) {
                n.push_str(":dangling_tail");
            }
            n
        }
    };
    if open {
        name.push_str(":open");
    }
    name
}

/// Every name [`journal_shape`] can return.
pub fn journal_shapes() -> Vec<String> {
    let mut v = vec!["empty".to_string()];
    let with_open = |v: &mut Vec<String>, base: String| {
        v.push(format!("{base}:open"));
        v.push(base);
    };
    with_open(&mut v, "unsettled".into());
    with_open(&mut v, "unsettled:dangling".into());
    for tail in ["settled_quiet", "settled_live"] {
        for before in ["", ":dangling_before"] {
            let dangling_tail: &[&str] = if tail == "settled_live" { &["", ":dangling_tail"] } else { &[""] };
            for t in dangling_tail {
                with_open(&mut v, format!("{tail}{before}{t}"));
            }
        }
    }
    v
}

/// The `turns` a checkpoint blob records (docs/engine-model.md 4.2, 4.4): byte 0 is the format
/// byte `0x01`, the rest UTF-8 JSON of the state, an object with `v: 1`, non-negative
/// integer counters `turns` and `toolCallsUsed`, and a `messages` array. Anything else is
/// not a checkpoint (`None`: a boot would start from turn 0).
pub fn checkpoint_turns(bytes: &[u8]) -> Option<u32> {
    let (&format, json) = bytes.split_first()?;
    if format != 0x01 {
        return None;
    }
    let state: Value = serde_json::from_slice(json).ok()?;
    let o = state.as_object()?;
    let counter = |k: &str| o.get(k)?.as_u64().and_then(|n| u32::try_from(n).ok());
    if counter("v")? != 1 {
        return None;
    }
    counter("toolCallsUsed")?;
    o.get("messages")?.as_array()?;
    counter("turns")
}

/// The journal key of the op at `index` of a workflow: a step's or an agent's is
/// `op:<index>:<name>`, an await's `await:<key>` (its suspension and its resolution share
/// it). Stable across segments, so a resumed segment matches the same entries.
pub fn op_key(op: &Op, index: usize) -> String {
    match op {
        Op::Step { name } | Op::Agent { name, .. } => format!("op:{index}:{name}"),
        Op::Await { key } => format!("await:{key}"),
    }
}

#[cfg(test)]
mod tests {
    //! The contract readings against hand-written payloads.

    use serde_json::json;

    use super::*;

    fn entry(v: Value) -> EntryView {
        EntryView::of_value(v).expect("an entry")
    }

    fn meta(v: Value) -> MetaView {
        MetaView::of_value(v).expect("a meta record")
    }

    #[test]
    fn malformed_payloads_are_not_decodable() {
        assert!(EntryView::parse("not json").is_none());
        assert!(EntryView::parse(r#"{"seq":-1,"kind":"a","status":"ok"}"#).is_none());
        assert!(EntryView::parse(r#"{"seq":1.5,"kind":"a","status":"ok"}"#).is_none());
        assert!(EntryView::parse(r#"{"seq":9007199254740992,"kind":"a","status":"ok"}"#).is_none());
        assert!(EntryView::parse(r#"{"seq":1,"kind":"a"}"#).is_none());
        assert!(EntryView::parse(r#"{"seq":1,"kind":"a","status":"ok","ref":"x"}"#).is_none());
        let e = EntryView::parse(r#"{"seq":3,"kind":"a","status":"ok","ref":null}"#).expect("an entry");
        assert_eq!((e.seq, e.key.as_str(), e.ref_seq, e.value.clone()), (3, "", None, Value::Null));
        assert!(MetaView::parse(r#"{"runId":"r","status":"paused"}"#).is_none());
        assert!(MetaView::parse(r#"{"runId":"..","status":"ok"}"#).is_none());
        assert!(MetaView::parse(r#"{"runId":"r","status":"ok","segments":"2"}"#).is_none());
        assert!(MetaView::parse(r#"{"runId":"r","status":"ok","tags":["a",1]}"#).is_none());
        let m = MetaView::parse(r#"{"runId":"r","status":"ok","tags":["a"],"x":1}"#).expect("a meta");
        assert_eq!((m.status, m.tags), (Status::Ok, Some(vec!["a".to_string()])));
    }

    #[test]
    fn filters_follow_meta_matches_filter() {
        let m = meta(json!({"runId": "r", "status": "running", "name": "n", "tags": ["a", "b"]}));
        use RunStatus::{Ok as OkS, Running as RunningS};
        let f = |status: Option<RunStatus>,
                 statuses: Option<Vec<RunStatus>>,
                 name: Option<&str>,
                 tags: Option<&[&str]>| RunFilter {
            status,
            statuses,
            name: name.map(str::to_string),
            tags: tags.map(|t| t.iter().map(|s| s.to_string()).collect()),
        };
        assert!(filter_matches(&f(None, None, None, None), &m));
        assert!(filter_matches(&f(Some(OkS), Some(vec![RunningS]), None, None), &m), "either-match");
        assert!(filter_matches(&f(Some(RunningS), Some(vec![]), None, None), &m));
        assert!(
            !filter_matches(&f(None, Some(vec![]), None, None), &m),
            "statuses: [] alone matches nothing"
        );
        assert!(filter_matches(&f(None, None, Some("n"), Some(&["b"])), &m));
        assert!(!filter_matches(&f(None, None, Some("other"), None), &m));
        assert!(!filter_matches(&f(None, None, None, Some(&["a", "c"])), &m), "tags are all-of");
        let untagged = meta(json!({"runId": "r", "status": "running"}));
        assert!(!filter_matches(&f(None, None, None, Some(&["a"])), &untagged));
        assert!(filter_matches(&f(None, None, None, Some(&[])), &untagged));
        // The strict test ignores a `statuses` widening but never name, tags or a lone status.
        assert!(!filter_excludes_strictly(&f(None, Some(vec![OkS]), None, None), &m));
        assert!(filter_excludes_strictly(&f(Some(OkS), None, None, None), &m));
        assert!(filter_excludes_strictly(&f(None, Some(vec![RunningS]), None, Some(&["z"])), &m));
    }

    #[test]
    fn refs_settles_and_keys() {
        assert_eq!(run_of_ref("run-1/ckpt/3"), "run-1");
        assert_eq!(run_of_ref("run-1"), "run-1");
        assert_eq!(checkpoint_seq("run-1/ckpt/3"), Some(3));
        assert_eq!(checkpoint_seq("run-1/t0"), None);
        let settle = |seq: u64, s: &str| {
            entry(
                json!({"seq": seq, "kind": "decision", "status": "ok", "value": {"decisionType": "run_settle", "runStatus": s}}),
            )
        };
        let other =
            entry(json!({"seq": 4, "kind": "decision", "status": "ok", "value": {"decisionType": "x"}}));
        let j = [settle(1, "error"), settle(2, "suspended"), settle(3, "running"), other];
        assert_eq!(last_run_settle(&j), Some((2, Status::Suspended)), "running is no outcome");
        assert_eq!(settle_status(&j[2]), Some(Status::Running));
        assert_eq!(last_run_settle(&[]), None);
        let agent = Op::Agent { name: "a".into(), tool_turns: 0, max_turns: 1, max_tool_calls: 0 };
        assert_eq!(op_key(&agent, 2), "op:2:a");
        assert_eq!(op_key(&Op::Await { key: "k".into() }, 0), "await:k");
    }

    #[test]
    fn journal_shapes_name_the_cells_of_the_audit_table() {
        let running = |seq: u64| entry(json!({"seq": seq, "kind": "agent", "status": "running"}));
        let terminal =
            |seq: u64, of: u64| entry(json!({"seq": seq, "kind": "agent", "status": "ok", "ref": of}));
        let settle = |seq: u64| {
            entry(
                json!({"seq": seq, "kind": "decision", "status": "ok", "value": {"decisionType": "run_settle", "runStatus": "suspended"}}),
            )
        };
        let wait = |seq: u64| entry(json!({"seq": seq, "kind": "external", "status": "suspended"}));
        let resolve =
            |seq: u64, of: u64| entry(json!({"seq": seq, "kind": "resolution", "status": "ok", "ref": of}));
        let shape = |j: &[EntryView]| journal_shape(j);
        assert_eq!(shape(&[]), "empty");
        assert_eq!(shape(&[running(1)]), "unsettled:dangling");
        assert_eq!(shape(&[running(1), terminal(2, 1)]), "unsettled");
        assert_eq!(shape(&[running(1), wait(2), settle(3)]), "settled_quiet:dangling_before:open");
        assert_eq!(shape(&[wait(1), settle(2), resolve(3, 1)]), "settled_live");
        assert_eq!(shape(&[wait(1), wait(2), settle(3), resolve(4, 1)]), "settled_live:open");
        assert_eq!(shape(&[running(1), settle(2), running(3)]), "settled_live:dangling_before:dangling_tail");
        // A terminal after the settle closes a dispatch before it.
        assert_eq!(shape(&[running(1), settle(2), terminal(3, 1)]), "settled_live");
        // Every shape named is in the list, and the list names each once.
        let all = journal_shapes();
        let mut sorted = all.clone();
        sorted.sort();
        sorted.dedup();
        assert_eq!(sorted.len(), all.len());
        assert_eq!(all.len(), 17);
        for j in [
            vec![],
            vec![running(1)],
            vec![running(1), wait(2), settle(3)],
            vec![running(1), settle(2), running(3), wait(4)],
        ] {
            assert!(all.contains(&shape(&j)), "{}", shape(&j));
        }
    }

    #[test]
    fn the_audit_table() {
        let running = |seq: u64| entry(json!({"seq": seq, "kind": "agent", "status": "running"}));
        let terminal =
            |seq: u64, of: u64| entry(json!({"seq": seq, "kind": "agent", "status": "ok", "ref": of}));
        let settle = |seq: u64, s: &str| {
            entry(
                json!({"seq": seq, "kind": "decision", "status": "ok", "value": {"decisionType": "run_settle", "runStatus": s}}),
            )
        };
        let suspension = |seq: u64| entry(json!({"seq": seq, "kind": "approval", "status": "suspended"}));
        let v = |m: Option<Status>, e: &[EntryView]| audit(m, e).verdict;
        assert_eq!(v(None, &[]), Verdict::Consistent);
        assert_eq!(v(None, &[running(1)]), Verdict::Suspect);
        let settled = [running(1), terminal(2, 1), settle(3, "ok")];
        assert_eq!(v(Some(Status::Ok), &settled), Verdict::Consistent);
        assert_eq!(v(Some(Status::Running), &settled), Verdict::MetaBehind);
        let live = [running(1), terminal(2, 1), settle(3, "ok"), running(4)];
        assert_eq!(v(Some(Status::Ok), &live), Verdict::Stranded);
        assert_eq!(v(Some(Status::Running), &live), Verdict::Consistent);
        let parked = [suspension(1), settle(2, "suspended"), running(3), terminal(4, 3)];
        assert_eq!(v(Some(Status::Suspended), &parked), Verdict::Consistent, "open work in the tail parks");
        assert_eq!(v(Some(Status::Error), &parked), Verdict::Stranded);
        assert_eq!(v(Some(Status::Error), &[running(1)]), Verdict::Stranded, "no settle, dangling");
        assert_eq!(v(Some(Status::Ok), &[suspension(1)]), Verdict::Suspect);
        assert_eq!(v(Some(Status::Error), &[suspension(1)]), Verdict::Consistent);
        assert_eq!(v(Some(Status::Running), &[running(1)]), Verdict::Consistent);
    }

    #[test]
    fn checkpoints_decode_by_the_format() {
        let good = |turns: Value| {
            let mut b = vec![0x01];
            b.extend(
                json!({"v": 1, "turns": turns, "toolCallsUsed": 0, "messages": []}).to_string().into_bytes(),
            );
            b
        };
        assert_eq!(checkpoint_turns(&good(json!(3))), Some(3));
        assert_eq!(checkpoint_turns(&good(json!(-1))), None);
        assert_eq!(checkpoint_turns(&good(json!(1.5))), None);
        assert_eq!(checkpoint_turns(b""), None);
        assert_eq!(checkpoint_turns(b"\x02{}"), None);
        assert_eq!(checkpoint_turns(b"\x01not json"), None);
        assert_eq!(checkpoint_turns(b"\x01{\"v\":2,\"turns\":1,\"toolCallsUsed\":0,\"messages\":[]}"), None);
    }
}
