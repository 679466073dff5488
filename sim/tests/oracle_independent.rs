//! The oracle borrows nothing from the system under test: every `.rs` file under
//! `sim/src/oracle/` may name from the `store` crate only types (`CamelCase`) and constants
//! (`SCREAMING_CASE`), never a function or method (a lowercase final path segment), and
//! none may import the actors (`crate::actors`, `sim::actors`, `super::super::actors`).
//! Decoding a payload with the store's own decoder, or judging with its filter or classifier,
//! would make a bug in that code invisible to the oracle.

mod support;

use std::fs;
use std::path::Path;

use support::rust_files;

fn ident_at(s: &[u8], mut i: usize) -> (String, usize) {
    let start = i;
    while i < s.len() && (s[i].is_ascii_alphanumeric() || s[i] == b'_') {
        i += 1;
    }
    (String::from_utf8_lossy(&s[start..i]).into_owned(), i)
}

fn skip_ws(s: &[u8], mut i: usize) -> usize {
    while i < s.len() && s[i].is_ascii_whitespace() {
        i += 1;
    }
    i
}

/// The final segments of the path (or `use` tree) starting at `s[i]`, right after a
/// `store::`: `engine::{Op, classify}` gives `Op` and `classify`.
fn final_segments(s: &[u8], i: usize, out: &mut Vec<String>) -> usize {
    let i = skip_ws(s, i);
    if i < s.len() && s[i] == b'{' {
        let mut j = i + 1;
        loop {
            j = skip_ws(s, j);
            if j >= s.len() {
                return j;
            }
            match s[j] {
                b'}' => return j + 1,
                b',' => j += 1,
                _ => {
                    let next = final_segments(s, j, out);
                    if next == j {
                        j += 1;
                    } else {
                        j = next;
                    }
                }
            }
        }
    }
    let (name, j) = ident_at(s, i);
    if name.is_empty() {
        return i;
    }
    if s[j..].starts_with(b"::") {
        return final_segments(s, j + 2, out);
    }
    // `X as Y`: the imported item is X.
    out.push(name);
    let k = skip_ws(s, j);
    if s[k..].starts_with(b"as ") {
        let (_, m) = ident_at(s, skip_ws(s, k + 3));
        return m;
    }
    j
}

/// What the file borrows from the system under test, one line each.
fn borrowings(text: &str) -> Vec<String> {
    let s = text.as_bytes();
    let mut out = Vec::new();
    let mut from = 0;
    while let Some(at) = text[from..].find("store::") {
        let at = from + at;
        from = at + "store::".len();
        // `store::` as its own path root (not `xstore::`).
        if at > 0 && (s[at - 1].is_ascii_alphanumeric() || s[at - 1] == b'_') {
            continue;
        }
        let mut names = Vec::new();
        final_segments(s, from, &mut names);
        for n in names {
            let first = n.chars().next().unwrap_or('A');
            let screaming = n.chars().all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_');
            if n != "self" && (first.is_ascii_lowercase() || (first == '_' && !screaming)) {
                let line = text[..at].lines().count().max(1);
                out.push(format!("line {line}: store::…{n} is a function of the system under test"));
            }
        }
    }
    for banned in ["crate::actors", "sim::actors", "super::super::actors", ".to_json(", "::from_json("] {
        for (n, line) in text.lines().enumerate() {
            if line.contains(banned) {
                out.push(format!("line {}: {banned}", n + 1));
            }
        }
    }
    out
}

#[test]
fn the_checker_flags_functions_and_actor_imports_and_passes_types_and_constants() {
    let bad = [
        "use store::engine::{classify, decode_checkpoint, Verdict};",
        "let r = store::types::run_of_ref(x);",
        "use store::{JournalEntry, engine::{Op, last_run_settle}};",
        "store::RunMeta::from_json(p)",
        "use crate::actors::engine::expected_value;",
        "e.to_json()",
    ];
    for b in bad {
        assert!(!borrowings(b).is_empty(), "not flagged: {b}");
    }
    let good = [
        "use store::engine::{Op, RUN_SETTLE_DECISION_TYPE};",
        "use store::{Epoch, Lease, RunFilter, RunStatus as S};",
        "let s = store::Seq(3);",
        "use restore::thing; // not the store crate",
    ];
    for g in good {
        assert!(borrowings(g).is_empty(), "flagged: {g}: {:?}", borrowings(g));
    }
}

#[test]
fn the_oracle_names_only_types_and_constants_of_the_store_and_never_the_actors() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/oracle");
    let files = rust_files(&dir);
    let names: Vec<String> = files
        .iter()
        .filter_map(|p| p.strip_prefix(&dir).ok().map(|n| n.to_string_lossy().into_owned()))
        .collect();
    // Not vacuous: the oracle's files are found and read, in subdirectories too.
    for must in [
        "mod.rs",
        "contract.rs",
        "properties.rs",
        "engine/mod.rs",
        "engine/payments.rs",
        "model.rs",
        "goals.rs",
    ] {
        assert!(
            names.iter().any(|n| n == must),
            "{must} not found under {} (found {names:?})",
            dir.display()
        );
    }
    let mut found = Vec::new();
    let mut store_paths = 0;
    for f in &files {
        let text = fs::read_to_string(f).unwrap_or_else(|e| panic!("cannot read {}: {e}", f.display()));
        assert!(!text.trim().is_empty(), "{} is empty", f.display());
        store_paths += text.matches("store::").count();
        for b in borrowings(&text) {
            found.push(format!("{}: {b}", f.display()));
        }
    }
    assert!(store_paths > 0, "no store:: path at all: the scan read nothing it could judge");
    assert!(found.is_empty(), "the oracle borrows from the system under test:\n{}", found.join("\n"));
}
