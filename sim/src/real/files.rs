//! The files of one real soak in its directory, and their JSON Lines formats.
//!
//! - `soak.db` (+ `-wal`, `-shm`): the shared database every writer process opens.
//! - `soak-report-<w>.jsonl`: writer w's report events (rulvar's kinds), one object per
//!   line, each with `at_ns` from the machine-wide monotonic clock; written and flushed one
//!   line at a time so the parent can poll it during the storm.
//! - `soak-calls-<w>.jsonl`: writer w's store calls (the simulator's `Call` records: op,
//!   lease, arguments, invocation and return instants, outcome, and what the store checked
//!   and applied), one line per call as it returns.
//! - `soak-stop`: created by the parent when the storm is over (rulvar's stop file).
//!
//! Readers tolerate a torn last line (a writer may be mid-write while the parent polls).

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::actors::soak::SoakEvent;
use crate::history::Call;

pub fn db_path(dir: &Path) -> PathBuf {
    dir.join("soak.db")
}
pub fn report_path(dir: &Path, w: u32) -> PathBuf {
    dir.join(format!("soak-report-{w}.jsonl"))
}
pub fn calls_path(dir: &Path, w: u32) -> PathBuf {
    dir.join(format!("soak-calls-{w}.jsonl"))
}
pub fn stop_path(dir: &Path) -> PathBuf {
    dir.join("soak-stop")
}

/// Remove the files a previous soak left in `dir` (only these names).
pub fn clear(dir: &Path, writers: u32) {
    let db = db_path(dir);
    for suffix in ["", "-wal", "-shm", "-journal"] {
        let mut p = db.as_os_str().to_owned();
        p.push(suffix);
        let _ = std::fs::remove_file(PathBuf::from(p));
    }
    let _ = std::fs::remove_file(stop_path(dir));
    for w in 0..writers.max(64) {
        let _ = std::fs::remove_file(report_path(dir, w));
        let _ = std::fs::remove_file(calls_path(dir, w));
    }
}

/// One report line as written.
#[derive(Serialize)]
pub struct EventOut<'a> {
    pub at_ns: u64,
    #[serde(flatten)]
    pub event: &'a SoakEvent,
}

/// One report line as read back.
#[derive(Deserialize)]
struct EventIn {
    at_ns: u64,
    w: u32,
    kind: String,
    surface: Option<String>,
    epoch: Option<u64>,
    nonce: Option<String>,
    message: Option<String>,
}

/// Every event kind and surface name a writer logs (the report's vocabulary).
const NAMES: &[&str] = &[
    "grant",
    "accept",
    "victim",
    "stale-reject",
    "stale-accept",
    "live-cross-reject",
    "order-reject",
    "order-accept",
    "fence-kick",
    "busy",
    "renewed",
    "released",
    "stall",
    "victim-abandoned",
    "error",
    "fatal",
    "done",
    "marker",
    "append",
    "meta",
    "blob-put",
    "blob-delete",
    "run-delete",
    "renew",
    "release",
    "cross-run",
    "cross-run-append",
    "cross-run-meta",
    "cross-run-delete",
    "cross-run-blob-delete",
    "order-probe",
    "load",
    "acquire",
    "slashless-put",
    "listed",
    "blob-list",
];

fn intern(s: &str) -> Option<&'static str> {
    NAMES.iter().copied().find(|n| *n == s)
}

/// Parse a report file's text into `(at_ns, event)`, in file order. A torn last line is
/// skipped; any other unreadable line, or a kind outside the vocabulary, becomes an
/// `error` event (the referee reports it).
pub fn parse_events(text: &str, w: u32) -> Vec<(u64, SoakEvent)> {
    let mut out = Vec::new();
    let lines: Vec<&str> = text.split('\n').collect();
    let last = lines.len().saturating_sub(1);
    for (i, line) in lines.iter().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        match serde_json::from_str::<EventIn>(line) {
            Ok(e) => {
                let kind = intern(&e.kind);
                let surface = e.surface.as_deref().map(intern);
                let event = match (kind, surface) {
                    (Some(kind), None | Some(Some(_))) => SoakEvent {
                        w: e.w,
                        kind,
                        surface: surface.flatten(),
                        epoch: e.epoch,
                        nonce: e.nonce,
                        message: e.message,
                    },
                    _ => unreadable(w, format!("unknown event kind or surface in {line:?}")),
                };
                out.push((e.at_ns, event));
            }
            // A line still being written when the parent read the file.
            Err(_) if i == last => {}
            Err(err) => out.push((0, unreadable(w, format!("unreadable report line {line:?}: {err}")))),
        }
    }
    out
}

fn unreadable(w: u32, message: String) -> SoakEvent {
    SoakEvent { w, kind: "error", surface: None, epoch: None, nonce: None, message: Some(message) }
}

/// Parse a calls file: every complete line (a torn last line is skipped).
pub fn parse_calls(text: &str) -> Result<Vec<Call>, String> {
    let lines: Vec<&str> = text.split('\n').collect();
    let last = lines.len().saturating_sub(1);
    let mut out = Vec::new();
    for (i, line) in lines.iter().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        match serde_json::from_str::<Call>(line) {
            Ok(c) => out.push(c),
            Err(_) if i == last => {}
            Err(e) => return Err(format!("unreadable call record {line:?}: {e}")),
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_round_trip_and_a_torn_last_line_is_skipped() {
        let e = SoakEvent {
            w: 2,
            kind: "accept",
            surface: Some("blob-put"),
            epoch: Some(7),
            nonce: Some("w2-e7-c1".into()),
            message: None,
        };
        let line = serde_json::to_string(&EventOut { at_ns: 42, event: &e }).unwrap();
        let text = format!("{line}\n{}", &line[..line.len() / 2]);
        let back = parse_events(&text, 2);
        assert_eq!(back.len(), 1);
        assert_eq!(back[0].0, 42);
        assert_eq!(back[0].1.kind, "accept");
        assert_eq!(back[0].1.surface, Some("blob-put"));
        assert_eq!(back[0].1.nonce.as_deref(), Some("w2-e7-c1"));
    }

    #[test]
    fn a_foreign_kind_or_a_bad_middle_line_becomes_an_error_event() {
        let text = "{\"at_ns\":1,\"w\":0,\"kind\":\"teleport\"}\nnot json\n{\"at_ns\":2,\"w\":0,\"kind\":\"done\"}\n";
        let back = parse_events(text, 0);
        let kinds: Vec<&str> = back.iter().map(|(_, e)| e.kind).collect();
        assert_eq!(kinds, ["error", "error", "done"]);
    }

    /// Every kind and surface the soak writer logs (read from its source, so a new event
    /// cannot be logged without the report reader knowing it) parses as itself.
    #[test]
    fn every_event_the_soak_writer_logs_is_in_the_vocabulary() {
        let source = include_str!("../actors/soak.rs");
        let mut names = std::collections::BTreeSet::new();
        for call in ["self.log(\"", "self.log_msg(\"", "self.attempt(\""] {
            for piece in source.split(call).skip(1) {
                let kind = piece.split('"').next().unwrap_or_default();
                names.insert(kind.to_string());
                // The surface, when the call names one literally: `, Some("surface")`.
                let rest = &piece[kind.len() + 1..];
                if let Some(surface) = rest.trim_start_matches([',', ' ']).strip_prefix("Some(\"") {
                    names.insert(surface.split('"').next().unwrap_or_default().to_string());
                }
            }
        }
        assert!(names.len() > 20, "the source scan found too few names: {names:?}");
        for name in ["slashless-put", "listed", "blob-list", "accept", "fence-kick"] {
            assert!(names.contains(name), "the scan missed {name}: {names:?}");
        }
        for name in &names {
            let line = format!("{{\"at_ns\":1,\"w\":0,\"kind\":\"{name}\",\"surface\":\"{name}\"}}\n");
            let back = parse_events(&line, 0);
            assert_eq!(back[0].1.kind, name.as_str(), "{name} is not in the reader's vocabulary");
        }
    }
}
