//! Reports: the human-readable timeline (one line per event, fixed columns), the JSON Lines
//! trace, the verdict with witnesses, the reproduce command, and a stable trace hash.
//!
//! No absolute paths, no wall times, no task ids: a report of a seed is the same in every
//! process, which is what `--check-determinism` and the snapshots rely on.

use std::fmt::Write as _;

use serde::Serialize;

use crate::history::{Event, History};
use crate::plan::Plan;
use crate::seed::Fnv1a;
use crate::verdict::Violation;

/// "   1.912s": [`crate::time::secs`] right-aligned in the timeline's time column.
pub fn fmt_time(ns: u64) -> String {
    format!("{:>9}", crate::time::secs(ns))
}

/// The timeline's column header.
fn timeline_header() -> String {
    format!("{:>9}  {:<4} {:>5}  {:<44} {:<28} fault", "time", "node", "epoch", "operation", "outcome")
}

/// The timeline: `time  node  epoch  operation  outcome  fault`, one line per event.
pub fn timeline(history: &History) -> String {
    let mut out = timeline_header();
    out.push('\n');
    for e in &history.events {
        let _ = writeln!(out, "{}", timeline_line(e));
    }
    out
}

/// The timeline of `events` as a person reads it: a run of consecutive events that differ
/// only in their time (a retry loop meeting the same refusal) is one line, its first,
/// ending `xN to <time of the last>`. Events with a fault are never folded.
pub fn timeline_folded(events: &[Event]) -> String {
    let header = timeline_header();
    // A folded line's count starts where the fault column does.
    let fault_column = header.len() - "fault".len();
    let mut out = header;
    out.push('\n');
    let same = |a: &Event, b: &Event| {
        a.fault.is_empty()
            && b.fault.is_empty()
            && (a.node, a.epoch, &a.op, &a.outcome) == (b.node, b.epoch, &b.op, &b.outcome)
    };
    let mut i = 0;
    while i < events.len() {
        let mut j = i + 1;
        while j < events.len() && same(&events[i], &events[j]) {
            j += 1;
        }
        let line = timeline_line(&events[i]);
        if j - i > 1 {
            let pad = format!("{line:<fault_column$}");
            let _ = writeln!(out, "{pad}x{} to {}", j - i, crate::time::secs(events[j - 1].at_ns));
        } else {
            let _ = writeln!(out, "{line}");
        }
        i = j;
    }
    out
}

pub fn timeline_line(e: &Event) -> String {
    let node = e.node.map_or("sup".to_string(), |n| format!("n{n}"));
    let epoch = e.epoch.map_or("-".to_string(), |x| format!("e{x}"));
    let line = format!(
        "{}  {:<4} {:>5}  {:<44} {:<28} {}",
        fmt_time(e.at_ns),
        node,
        epoch,
        printable(&e.op),
        printable(&e.outcome),
        printable(&e.fault)
    );
    line.trim_end().to_string()
}

/// `s` with its control characters escaped (`\u{0}`, `\n`), so that a report stays one line
/// per event and plain text to tools like `grep`: the `edges` scenario sends run ids with a
/// NUL byte. Printable characters, non-ASCII ones included, stay as they are.
pub fn printable(s: &str) -> std::borrow::Cow<'_, str> {
    if !s.chars().any(char::is_control) {
        return std::borrow::Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len() + 8);
    for c in s.chars() {
        if c.is_control() {
            out.extend(c.escape_default());
        } else {
            out.push(c);
        }
    }
    std::borrow::Cow::Owned(out)
}

/// The JSON Lines trace: one object per event.
pub fn trace_jsonl(history: &History) -> String {
    let mut out = String::new();
    for e in &history.events {
        out.push_str(&serde_json::to_string(e).unwrap_or_default());
        out.push('\n');
    }
    out
}

/// A stable hash of every event's fields (the determinism fingerprint): FNV-1a over the
/// fields in timeline order, without formatting the timeline.
pub fn trace_hash(history: &History) -> u64 {
    let mut h = Fnv1a::new();
    for e in &history.events {
        h.feed(&e.at_ns.to_le_bytes());
        h.feed(&e.node.map_or(u64::MAX, u64::from).to_le_bytes());
        h.feed(&e.epoch.unwrap_or(u64::MAX).to_le_bytes());
        for field in [&e.op, &e.outcome, &e.fault] {
            h.feed(field.as_bytes());
            h.feed(&[0xff]);
        }
    }
    h.finish()
}

/// The machine-readable result of one run.
#[derive(Clone, Debug, Serialize)]
pub struct RunReport {
    pub scenario: String,
    pub profile: String,
    /// The foreign store the run drove (`--store`), named by its handshake; absent for the
    /// built-in Rust store.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub store: Option<crate::foreign::StoreName>,
    pub seed: u64,
    pub passed: bool,
    pub violations: Vec<Violation>,
    pub reproduce: String,
    pub plan_summary: String,
    pub decisions: usize,
    pub calls: usize,
    pub events: usize,
    pub virtual_ms: u64,
    pub trace_hash: String,
    /// Per fault point: (reached, fired, crashed).
    pub fault_points: std::collections::BTreeMap<String, (u64, u64, u64)>,
    /// The scenario's own table (the kill-point rows), if it has one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub table: Option<String>,
    /// The coverage goals this run met.
    pub goals: Vec<String>,
    /// Superseded holders' at-least-once windows (work done before a refusal told them).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub windows: Vec<crate::oracle::lost_lease::Window>,
    /// The abstract states the run reached (indices into `oracle::states::universe`).
    #[serde(skip)]
    pub states: Vec<u16>,
}

/// The exact command that reproduces a run.
pub fn reproduce(plan: &Plan, plan_file: Option<&str>) -> String {
    let mut s =
        format!("fencesim run --scenario {} --profile {} --seed {}", plan.scenario, plan.profile, plan.seed);
    if let Some(f) = plan_file {
        s.push_str(&format!(" --plan {f}"));
    }
    if let Some(spec) = crate::foreign::active() {
        s.push_str(&format!(" --store {:?}", spec.command));
    }
    s
}

/// The failure report a developer reads.
pub fn failure_text(r: &RunReport) -> String {
    let mut out = String::new();
    let verdict = if r.passed { "PASS" } else { "FAIL" };
    let _ = writeln!(out, "{verdict} {} profile={} seed={}", r.scenario, r.profile, r.seed);
    if let Some(store) = &r.store {
        let _ = writeln!(out, "  store: {}", store.describe());
    }
    let mut seen = std::collections::BTreeMap::<&str, usize>::new();
    for v in &r.violations {
        let n = seen.entry(v.property).or_insert(0);
        *n += 1;
        if *n <= 3 {
            match v.op {
                Some(op) => {
                    let _ = writeln!(out, "  {}@{op}: {}", v.property, printable(&v.witness));
                }
                None => {
                    let _ = writeln!(out, "  {}: {}", v.property, printable(&v.witness));
                }
            }
        } else if *n == 4 {
            let more = r.violations.iter().filter(|x| x.property == v.property).count() - 3;
            let _ = writeln!(out, "  {}: ... and {more} more", v.property);
        }
    }
    if let Some(table) = &r.table {
        for line in table.lines() {
            let _ = writeln!(out, "  {line}");
        }
    }
    let _ = writeln!(out, "  plan: {}", r.plan_summary);
    let _ = writeln!(out, "  reproduce: {}", r.reproduce);
    let _ = writeln!(out, "  trace hash: {}", r.trace_hash);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn event(ms: u64, node: u32, op: &str, outcome: &str, fault: &str) -> Event {
        Event {
            at_ns: ms * 1_000_000,
            node: Some(node),
            epoch: None,
            op: op.into(),
            outcome: outcome.into(),
            fault: fault.into(),
            call: None,
        }
    }

    #[test]
    fn a_retry_loop_folds_into_one_line_and_everything_else_stays() {
        let events = vec![
            event(0, 0, "acquire r by a", "ok epoch=1", ""),
            event(1, 1, "acquire r by b", "err lease_held", ""),
            event(12, 1, "acquire r by b", "err lease_held", ""),
            event(25, 1, "acquire r by b", "err lease_held", ""),
            event(30, 0, "", "", "stall 300ms at sqlite.renew.after_check"),
            event(30, 0, "", "", "stall 300ms at sqlite.renew.after_check"),
            event(40, 1, "acquire r by b", "err lease_held", ""),
        ];
        let folded = timeline_folded(&events);
        let lines: Vec<&str> = folded.lines().collect();
        assert_eq!(lines.len(), 1 + 5, "{folded}");
        assert!(lines[2].contains("err lease_held") && lines[2].ends_with("x3 to 0.025s"), "{folded}");
        assert!(lines[2].starts_with("   0.001s  n1"), "the first of the run keeps its time: {folded}");
        assert_eq!(lines[3], lines[4], "events with a fault are never folded");
        assert!(lines[5].starts_with("   0.040s") && !lines[5].contains(" x"), "{folded}");
        assert_eq!(timeline(&History { events, ..History::default() }).lines().count(), 1 + 7);
    }

    #[test]
    fn control_characters_print_escaped_and_other_text_stays() {
        let line = timeline_line(&event(3, 0, "append r\0x/ü by a", "err invalid_input\nrun id", ""));
        assert!(line.contains("append r\\u{0}x/ü by a"), "{line}");
        assert!(line.contains("err invalid_input\\nrun id"), "{line}");
        assert!(!line.chars().any(char::is_control), "{line:?}");
        assert!(matches!(printable("plain ü"), std::borrow::Cow::Borrowed("plain ü")));
    }
}
