//! One seed over the Rust store and over a foreign store, side by side: the verdicts must
//! agree (both correct stores), and where the histories differ the line says where first and
//! why (timing inside a call is the only expected difference: a store that emits other hook
//! points, or meets SQLITE_BUSY at another moment, shifts the fault decisions and the
//! schedule after it).

use crate::runner::Outcome;

/// One line comparing the two runs of a seed.
pub fn compare_line(rust: &Outcome, foreign: &Outcome) -> String {
    let verdict = |o: &Outcome| if o.report.passed { "PASS" } else { "FAIL" };
    let same = rust.report.passed == foreign.report.passed;
    let head = format!(
        "same seed over the Rust store: {} ({}), here {}",
        verdict(rust),
        if same { "same verdict" } else { "VERDICT DIFFERS" },
        verdict(foreign)
    );
    if rust.report.trace_hash == foreign.report.trace_hash {
        return format!("{head}; histories identical (trace {})", rust.report.trace_hash);
    }
    let a = crate::report::trace_jsonl(&rust.history);
    let b = crate::report::trace_jsonl(&foreign.history);
    let (la, lb): (Vec<&str>, Vec<&str>) = (a.lines().collect(), b.lines().collect());
    let first = la.iter().zip(lb.iter()).position(|(x, y)| x != y).unwrap_or(la.len().min(lb.len()));
    let cut = |s: Option<&&str>| {
        let s = s.copied().unwrap_or("(end of trace)");
        if s.len() > 160 {
            format!("{}...", &s[..s.char_indices().nth(160).map_or(s.len(), |(i, _)| i)])
        } else {
            s.to_string()
        }
    };
    format!(
        "{head}; histories differ from trace line {} (timing inside a call: hook points reached or \
         busy met at another moment): rust {} | foreign {}",
        first + 1,
        cut(la.get(first)),
        cut(lb.get(first))
    )
}
