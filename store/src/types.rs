//! The value types of the store SPI: leases, journal entries, run metadata, filters, and the
//! validation rules for run ids and blob refs.
//!
//! Promise: every type round-trips through its JSON form byte-stable. `RunMeta` and
//! `JournalEntry` keep every field they do not know in `extra`, in the order it arrived
//! (serde_json's `preserve_order`), and floats round-trip exactly (`float_roundtrip`).

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use std::fmt;

use crate::error::{Result, StoreError};

/// A lease's fencing epoch. Strictly increasing per run id, across delete and recreate.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Epoch(pub u64);

impl fmt::Display for Epoch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

/// A journal entry's sequence number: the per-run total order.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Seq(pub u64);

impl fmt::Display for Seq {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

/// The largest seq the store accepts: JavaScript's `Number.MAX_SAFE_INTEGER`, the largest
/// integer rulvar's TypeScript engine can represent exactly.
pub const SEQ_MAX: u64 = (1 << 53) - 1;

/// `{run_id, owner, epoch}`; the epoch is the fencing token.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct Lease {
    pub run_id: String,
    pub owner: String,
    pub epoch: Epoch,
}

/// A run's status as written to meta. `running` and `suspended` are resumable; the other
/// four are terminal.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RunStatus {
    Running,
    Suspended,
    Ok,
    Error,
    Cancelled,
    Exhausted,
}

impl RunStatus {
    pub const ALL: [RunStatus; 6] = [
        RunStatus::Running,
        RunStatus::Suspended,
        RunStatus::Ok,
        RunStatus::Error,
        RunStatus::Cancelled,
        RunStatus::Exhausted,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            RunStatus::Running => "running",
            RunStatus::Suspended => "suspended",
            RunStatus::Ok => "ok",
            RunStatus::Error => "error",
            RunStatus::Cancelled => "cancelled",
            RunStatus::Exhausted => "exhausted",
        }
    }

    /// `ok`, `error`, `cancelled`, `exhausted`.
    pub fn is_terminal(self) -> bool {
        !matches!(self, RunStatus::Running | RunStatus::Suspended)
    }

    pub fn parse(text: &str) -> Option<RunStatus> {
        RunStatus::ALL.into_iter().find(|s| s.as_str() == text)
    }
}

impl fmt::Display for RunStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The run's catalog row. Written whole on every `put_meta` (no merge).
///
/// The named fields are the ones rulvar's engine and worker read; everything else a writer
/// put in the record is kept in `extra` and written back unchanged.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct RunMeta {
    pub run_id: String,
    pub status: RunStatus,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub updated_at: Option<String>,
    /// Segments started so far (a fresh run writes 1, a resume prior + 1).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub segments: Option<u64>,
    /// The generation identity minted at a fresh start and copied by every resume.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub genesis: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tags: Option<Vec<String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workflow_name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workflow_hash: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workflow_source_ref: Option<String>,
    /// Every other field, kept in arrival order.
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

impl RunMeta {
    /// A minimal record: run id and status, nothing else.
    pub fn new(run_id: impl Into<String>, status: RunStatus) -> RunMeta {
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

    /// The stored JSON text.
    pub fn to_json(&self) -> String {
        serde_json::to_string(self).unwrap_or_else(unreachable_json)
    }

    /// The JSON names of the named fields: `extra` may not carry any of them (the stored
    /// record would hold the name twice and no longer decode).
    pub const NAMED: [&'static str; 10] = [
        "runId",
        "status",
        "updatedAt",
        "segments",
        "genesis",
        "name",
        "tags",
        "workflowName",
        "workflowHash",
        "workflowSourceRef",
    ];

    /// Refuse a record that could not be read back: a bad run id, or an `extra` field that
    /// repeats a named one (`InvalidInput`, nothing written).
    pub fn validate(&self) -> Result<()> {
        validate_run_id(&self.run_id)?;
        if let Some(name) = RunMeta::NAMED.iter().find(|n| self.extra.contains_key(**n)) {
            return Err(StoreError::InvalidInput {
                what: "run meta",
                reason: format!("extra field {name:?} repeats a named field"),
            });
        }
        Ok(())
    }

    /// Decode a stored or user-supplied record.
    pub fn from_json(text: &str) -> Result<RunMeta> {
        let meta: RunMeta = serde_json::from_str(text)
            .map_err(|e| StoreError::InvalidInput { what: "run meta", reason: e.to_string() })?;
        validate_run_id(&meta.run_id)?;
        Ok(meta)
    }
}

/// One journal entry: the envelope fields the store and the engine model read, plus every
/// other field in `extra`. `seq` is the only field a store may interpret.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct JournalEntry {
    pub seq: Seq,
    pub kind: String,
    pub status: String,
    #[serde(default)]
    pub key: String,
    /// For a terminal: the seq of its running entry.
    #[serde(default, rename = "ref", skip_serializing_if = "Option::is_none")]
    pub ref_seq: Option<Seq>,
    #[serde(default)]
    pub value: Value,
    #[serde(flatten)]
    pub extra: Map<String, Value>,
}

impl JournalEntry {
    /// An entry with the given seq, kind, status and value; empty key, no ref.
    pub fn new(seq: u64, kind: &str, status: &str, value: Value) -> JournalEntry {
        JournalEntry {
            seq: Seq(seq),
            kind: kind.to_string(),
            status: status.to_string(),
            key: String::new(),
            ref_seq: None,
            value,
            extra: Map::new(),
        }
    }

    /// The stored JSON text.
    pub fn to_json(&self) -> String {
        serde_json::to_string(self).unwrap_or_else(unreachable_json)
    }

    /// Decode an entry, refusing a seq that is not a finite non-negative integer within
    /// [`SEQ_MAX`] with `InvalidInput`. One pass over the text: the journal is decoded on
    /// every load, so this does not build an intermediate `Value`.
    pub fn from_json(text: &str) -> Result<JournalEntry> {
        serde_json::from_str(text)
            .map_err(|e| StoreError::InvalidInput { what: "journal entry", reason: e.to_string() })
    }

    /// As [`JournalEntry::from_json`], from an already parsed value.
    pub fn from_value(raw: Value) -> Result<JournalEntry> {
        serde_json::from_value(raw)
            .map_err(|e| StoreError::InvalidInput { what: "journal entry", reason: e.to_string() })
    }

    /// The JSON names of the envelope fields: `extra` may not carry any of them.
    pub const ENVELOPE: [&'static str; 6] = ["seq", "kind", "status", "key", "ref", "value"];

    /// Refuse an entry that could not be read back: a seq over [`SEQ_MAX`], or an `extra`
    /// field that repeats an envelope one (`InvalidInput`, nothing written).
    pub(crate) fn validate(&self) -> Result<()> {
        if self.seq.0 > SEQ_MAX {
            return Err(StoreError::InvalidInput {
                what: "journal entry seq",
                reason: format!("seq {} exceeds {SEQ_MAX}", self.seq.0),
            });
        }
        if let Some(name) = JournalEntry::ENVELOPE.iter().find(|n| self.extra.contains_key(**n)) {
            return Err(StoreError::InvalidInput {
                what: "journal entry",
                reason: format!("extra field {name:?} repeats an envelope field"),
            });
        }
        Ok(())
    }
}

/// The entry decoder: the envelope fields by name, every other field into `extra` in
/// arrival order. A repeated envelope field is refused, as serde's derive refuses it.
impl<'de> Deserialize<'de> for JournalEntry {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        d.deserialize_map(EntryVisitor)
    }
}

struct EntryVisitor;

impl<'de> serde::de::Visitor<'de> for EntryVisitor {
    type Value = JournalEntry;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a journal entry object")
    }

    fn visit_map<A: serde::de::MapAccess<'de>>(
        self,
        mut map: A,
    ) -> std::result::Result<JournalEntry, A::Error> {
        use serde::de::Error;
        fn once<T, E: Error>(slot: &mut Option<T>, name: &'static str, v: T) -> std::result::Result<(), E> {
            match slot.replace(v) {
                Some(_) => Err(E::duplicate_field(name)),
                None => Ok(()),
            }
        }
        let (mut seq, mut kind, mut status, mut key, mut ref_seq, mut value) =
            (None, None, None, None, None, None);
        let mut extra = Map::new();
        while let Some(field) = map.next_key::<EntryField>()? {
            match field {
                EntryField::Seq => once(&mut seq, "seq", map.next_value::<SeqField>()?.0)?,
                EntryField::Kind => once(&mut kind, "kind", map.next_value::<String>()?)?,
                EntryField::Status => once(&mut status, "status", map.next_value::<String>()?)?,
                EntryField::Key => once(&mut key, "key", map.next_value::<String>()?)?,
                EntryField::Ref => once(&mut ref_seq, "ref", map.next_value::<Option<Seq>>()?)?,
                EntryField::Value => once(&mut value, "value", map.next_value::<Value>()?)?,
                EntryField::Other(name) => {
                    let v = map.next_value::<Value>()?;
                    extra.insert(name, v);
                }
            }
        }
        Ok(JournalEntry {
            seq: seq.ok_or_else(|| A::Error::missing_field("seq"))?,
            kind: kind.ok_or_else(|| A::Error::missing_field("kind"))?,
            status: status.ok_or_else(|| A::Error::missing_field("status"))?,
            key: key.unwrap_or_default(),
            ref_seq: ref_seq.flatten(),
            value: value.unwrap_or_default(),
            extra,
        })
    }
}

/// An entry's field name: the envelope fields without an allocation, any other by name.
enum EntryField {
    Seq,
    Kind,
    Status,
    Key,
    Ref,
    Value,
    Other(String),
}

impl<'de> Deserialize<'de> for EntryField {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        struct V;
        impl serde::de::Visitor<'_> for V {
            type Value = EntryField;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a field name")
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> std::result::Result<EntryField, E> {
                Ok(match v {
                    "seq" => EntryField::Seq,
                    "kind" => EntryField::Kind,
                    "status" => EntryField::Status,
                    "key" => EntryField::Key,
                    "ref" => EntryField::Ref,
                    "value" => EntryField::Value,
                    other => EntryField::Other(other.to_string()),
                })
            }
        }
        d.deserialize_identifier(V)
    }
}

/// A seq as decoded from stored or user text: an integer in `0..=SEQ_MAX`, nothing else.
struct SeqField(Seq);

impl<'de> Deserialize<'de> for SeqField {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        struct V;
        fn refuse<E: serde::de::Error>(got: impl fmt::Display) -> E {
            E::custom(format_args!("seq must be a finite integer in 0..={SEQ_MAX}, got {got}"))
        }
        impl serde::de::Visitor<'_> for V {
            type Value = SeqField;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                write!(f, "an integer seq in 0..={SEQ_MAX}")
            }
            fn visit_u64<E: serde::de::Error>(self, v: u64) -> std::result::Result<SeqField, E> {
                if v <= SEQ_MAX {
                    Ok(SeqField(Seq(v)))
                } else {
                    Err(refuse(v))
                }
            }
            fn visit_i64<E: serde::de::Error>(self, v: i64) -> std::result::Result<SeqField, E> {
                match u64::try_from(v) {
                    Ok(v) => self.visit_u64(v),
                    Err(_) => Err(refuse(v)),
                }
            }
            fn visit_f64<E: serde::de::Error>(self, v: f64) -> std::result::Result<SeqField, E> {
                Err(refuse(v))
            }
            fn visit_bool<E: serde::de::Error>(self, v: bool) -> std::result::Result<SeqField, E> {
                Err(refuse(v))
            }
            fn visit_str<E: serde::de::Error>(self, v: &str) -> std::result::Result<SeqField, E> {
                Err(refuse(format_args!("{v:?}")))
            }
            fn visit_unit<E: serde::de::Error>(self) -> std::result::Result<SeqField, E> {
                Err(refuse("null"))
            }
        }
        d.deserialize_any(V)
    }
}

/// serde_json cannot fail to serialize these types (string keys, no non-finite floats can
/// be built from `Value`); this keeps that reasoning in one place.
fn unreachable_json(e: serde_json::Error) -> String {
    format!("{{\"serialization_error\":{:?}}}", e.to_string())
}

/// rulvar's `RunFilter`. `status` and `statuses` combine as either-matches; `statuses`
/// empty on its own matches nothing; `name` is equality; `tags` is all-of. The default
/// (all `None`) matches everything.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunFilter {
    pub status: Option<RunStatus>,
    pub statuses: Option<Vec<RunStatus>>,
    pub name: Option<String>,
    pub tags: Option<Vec<String>>,
}

impl RunFilter {
    /// The worker's sweep filter: `statuses: [running, suspended]`.
    pub fn resumable() -> RunFilter {
        RunFilter { statuses: Some(vec![RunStatus::Running, RunStatus::Suspended]), ..RunFilter::default() }
    }

    /// rulvar's `metaMatchesFilter`.
    pub fn matches(&self, meta: &RunMeta) -> bool {
        if self.status.is_some() || self.statuses.is_some() {
            let single = self.status == Some(meta.status);
            let multi = self.statuses.as_ref().is_some_and(|s| s.contains(&meta.status));
            if !single && !multi {
                return false;
            }
        }
        if let Some(name) = &self.name {
            if meta.name.as_ref() != Some(name) {
                return false;
            }
        }
        if let Some(tags) = &self.tags {
            let have = meta.tags.as_deref().unwrap_or(&[]);
            if !tags.iter().all(|t| have.contains(t)) {
                return false;
            }
        }
        true
    }
}

fn safe_segment(segment: &str) -> bool {
    !segment.is_empty()
        && segment != "."
        && segment != ".."
        && segment.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'.' || b == b'_' || b == b'-')
}

/// A run id must be one safe path segment: `[A-Za-z0-9._-]+`, not `.` or `..`.
/// A lease owner must name someone: the empty owner is `InvalidInput`.
pub fn validate_owner(owner: &str) -> Result<()> {
    if owner.is_empty() {
        return Err(StoreError::InvalidInput {
            what: "lease owner",
            reason: "owner must not be empty".into(),
        });
    }
    Ok(())
}

pub fn validate_run_id(run_id: &str) -> Result<()> {
    if safe_segment(run_id) {
        Ok(())
    } else {
        Err(StoreError::InvalidInput {
            what: "run id",
            reason: format!("{run_id:?} is not one safe segment ([A-Za-z0-9._-]+, not . or ..)"),
        })
    }
}

/// A blob ref is `/`-separated safe segments (`<runId>/...`); a ref without a slash is
/// legal to store but belongs to no run's listing.
pub fn validate_ref(blob_ref: &str) -> Result<()> {
    if blob_ref.split('/').all(safe_segment) {
        Ok(())
    } else {
        Err(StoreError::InvalidInput {
            what: "blob ref",
            reason: format!("{blob_ref:?} has an empty, '.', '..' or unsafe segment"),
        })
    }
}

/// The run a blob ref belongs to: the text before the first `/`, or the whole ref.
pub fn run_of_ref(blob_ref: &str) -> &str {
    blob_ref.split('/').next().unwrap_or(blob_ref)
}

/// The run's deletion record under `delete_marks_generation`: the bare ref `<runId>`, which
/// no `list` returns (T3), so no cascade deletes it and it outlives the journal delete, as
/// the epoch tombstone does. It holds the genesis of the generation a cascade began to
/// delete; a recreated run has a new genesis, so an old record never refuses it.
pub fn deletion_record_ref(run_id: &str) -> String {
    run_id.to_string()
}

/// rulvar's checkpoint ref: `<runId>/ckpt/<runningSeq>`.
pub fn checkpoint_ref(run_id: &str, running_seq: Seq) -> String {
    format!("{run_id}/ckpt/{}", running_seq.0)
}
