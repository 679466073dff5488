//! The oracle borrows nothing from the system under test: every `.rs` file under
//! `sim/src/oracle/` may name from the `store` crate only types (`CamelCase`) and constants
//! (`SCREAMING_CASE`), never a function or method, and none may import the actors
//! (`crate::actors`, `sim::actors`, `super::super::actors`). Decoding a payload with the
//! store's own decoder, or judging with its filter or classifier, would make a bug in that
//! code invisible to the oracle.
//!
//! Three scans, all syntactic (no type information):
//! - a `store::` path whose final segment is lowercase (`store::types::run_of_ref`);
//! - an associated call `Type::method(` where the file imports `Type` from the store (or
//!   spells the `store::` path) and the store defines `method` in an `impl` of `Type`
//!   (`RunStatus::parse(s)`, `S::parse(s)` after `use store::RunStatus as S`);
//! - a method call `.method(` whose name only the store defines: no `fn` of that name in
//!   `sim/src` and not a standard-library method the oracle uses (`m.journal_key()`).
//!
//! What the scans cannot see: a method call whose name the simulator or the standard library
//! also defines (`status.as_str()`, `s.is_terminal()`), since telling those apart needs the
//! receiver's type; and formatting a store type through its `Display`. The fault point's
//! labels (`name`, `index`, `moment`, `ALL`) are allowed: they name the simulator's own
//! injection points, which the store only hosts, and the coverage counter reads them.

mod support;

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};

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
    // `X as Y`: the imported item is X, and the file names it Y.
    out.push(name);
    let k = skip_ws(s, j);
    if s[k..].starts_with(b"as ") {
        let (alias, m) = ident_at(s, skip_ws(s, k + 3));
        out.push(alias);
        return m;
    }
    j
}

/// Where each `store::` path root starts in `text` (not `xstore::`): the byte offset of the
/// `store::` and the offset just past it.
fn store_roots(text: &str) -> Vec<(usize, usize)> {
    let s = text.as_bytes();
    let mut out = Vec::new();
    let mut from = 0;
    while let Some(at) = text[from..].find("store::") {
        let at = from + at;
        from = at + "store::".len();
        if at == 0 || !(s[at - 1].is_ascii_alphanumeric() || s[at - 1] == b'_') {
            out.push((at, from));
        }
    }
    out
}

/// What the file borrows from the system under test, one line each.
fn borrowings(text: &str) -> Vec<String> {
    let s = text.as_bytes();
    let mut out = Vec::new();
    for (at, from) in store_roots(text) {
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

/// The methods the store defines, per type: every `fn` directly inside an `impl Type {..}`
/// or `impl Trait for Type {..}` block, macro bodies included.
fn store_methods(text: &str, out: &mut BTreeMap<String, BTreeSet<String>>) {
    let s = text.as_bytes();
    let mut from = 0;
    while let Some(at) = text[from..].find("impl") {
        let at = from + at;
        from = at + 4;
        let word = at > 0 && (s[at - 1].is_ascii_alphanumeric() || s[at - 1] == b'_');
        if word || s.get(at + 4).is_some_and(|&c| c.is_ascii_alphanumeric() || c == b'_') {
            continue;
        }
        let Some(open) = text[from..].find('{').map(|o| from + o) else { break };
        let head = &text[from..open];
        if head.contains(';') || head.contains('(') || head.contains('=') {
            continue;
        }
        // The implementing type: the last path after `for`, or the head's own path, past the
        // impl's own generics (`impl<'a> Op<'a>`).
        let head = head.trim_start();
        let head = if head.starts_with('<') {
            let mut depth = 0usize;
            let end = head
                .char_indices()
                .find(|&(_, c)| {
                    depth = match c {
                        '<' => depth + 1,
                        '>' => depth - 1,
                        _ => depth,
                    };
                    c == '>' && depth == 0
                })
                .map_or(head.len(), |(i, _)| i + 1);
            &head[end..]
        } else {
            head
        };
        let ty_part = head.rsplit(" for ").next().unwrap_or(head);
        let ty_part = ty_part.split(" where ").next().unwrap_or(ty_part);
        let ty_part = ty_part.split('<').next().unwrap_or(ty_part).trim();
        let Some(ty) = ty_part.rsplit("::").next().map(str::trim).filter(|t| !t.is_empty()) else {
            continue;
        };
        let mut depth = 0usize;
        let mut i = open;
        while i < s.len() {
            match s[i] {
                b'{' => depth += 1,
                b'}' => {
                    depth -= 1;
                    if depth == 0 {
                        break;
                    }
                }
                b'f' if depth == 1
                    && s[i..].starts_with(b"fn ")
                    && !(s[i - 1].is_ascii_alphanumeric() || s[i - 1] == b'_') =>
                {
                    let (name, _) = ident_at(s, skip_ws(s, i + 3));
                    if !name.is_empty() {
                        out.entry(ty.to_string()).or_default().insert(name);
                    }
                }
                _ => {}
            }
            i += 1;
        }
        from = open + 1;
    }
}

/// Every `fn` name defined in `text`.
fn fn_names(text: &str, out: &mut BTreeSet<String>) {
    let s = text.as_bytes();
    let mut from = 0;
    while let Some(at) = text[from..].find("fn ") {
        let at = from + at;
        from = at + 3;
        if at > 0 && (s[at - 1].is_ascii_alphanumeric() || s[at - 1] == b'_') {
            continue;
        }
        let (name, _) = ident_at(s, skip_ws(s, from));
        if !name.is_empty() {
            out.insert(name);
        }
    }
}

/// Standard-library methods the oracle calls whose names some store `impl` also defines.
const STD_METHODS: &[&str] =
    &["all", "find", "then", "eq", "index", "lock", "set", "from_str", "deserialize"];

/// The fault point's labels: the simulator's injection points, which the store only hosts.
const FAULT_POINT_LABELS: &[&str] = &["name", "index", "moment"];

/// The store's methods that `text` calls, one line each (see the module header).
fn method_borrowings(
    text: &str,
    store: &BTreeMap<String, BTreeSet<String>>,
    sim_fns: &BTreeSet<String>,
) -> Vec<String> {
    let s = text.as_bytes();
    let mut out = Vec::new();
    // The store types this file can name: every `CamelCase` item imported from `store::`.
    let mut imported = BTreeSet::new();
    for (_, from) in store_roots(text) {
        let mut names = Vec::new();
        final_segments(s, from, &mut names);
        // `store::types::RunMeta::from_json(..)` reaches here as `from_json`: its type is the
        // segment before it, so read the path's segments as written too.
        let path: String =
            text[from..].chars().take_while(|c| c.is_alphanumeric() || *c == '_' || *c == ':').collect();
        names.extend(path.split("::").map(str::to_string));
        imported
            .extend(names.into_iter().filter(|n| n.chars().next().is_some_and(|c| c.is_ascii_uppercase())));
    }
    // `use store::RunStatus as S`: `S::parse` is `RunStatus::parse`.
    let mut type_of: BTreeMap<String, String> = imported.iter().map(|n| (n.clone(), n.clone())).collect();
    for n in &imported {
        let mut at = 0;
        while let Some(k) = text[at..].find(&format!("{n} as ")) {
            let k = at + k;
            at = k + n.len() + 4;
            let (alias, _) = ident_at(s, skip_ws(s, at));
            if !alias.is_empty() && store.contains_key(n) {
                type_of.insert(alias, n.clone());
            }
        }
    }
    let only_store: BTreeSet<&String> = store
        .values()
        .flatten()
        .filter(|m| {
            !sim_fns.contains(*m)
                && !STD_METHODS.contains(&m.as_str())
                && !FAULT_POINT_LABELS.contains(&m.as_str())
        })
        .collect();
    let line_of = |at: usize| text[..at].lines().count().max(1);
    let mut i = 0;
    while i < s.len() {
        let starts_ident = (s[i].is_ascii_alphabetic() || s[i] == b'_')
            && (i == 0 || !(s[i - 1].is_ascii_alphanumeric() || s[i - 1] == b'_'));
        if !starts_ident {
            i += 1;
            continue;
        }
        let (ident, j) = ident_at(s, i);
        let after_dot = i > 0 && s[i - 1] == b'.';
        let called = s[skip_ws(s, j)..].starts_with(b"(");
        if after_dot && called && only_store.contains(&ident) {
            out.push(format!("line {}: .{ident}(..) is a method only the store defines", line_of(i)));
        }
        if let Some(ty) = type_of.get(&ident).filter(|_| !after_dot && s[j..].starts_with(b"::")) {
            let (method, k) = ident_at(s, j + 2);
            let of_type = store.get(ty).is_some_and(|ms| ms.contains(&method));
            let label = ty == "FaultPoint" && FAULT_POINT_LABELS.contains(&method.as_str());
            if of_type && !label && s[skip_ws(s, k)..].starts_with(b"(") {
                out.push(format!(
                    "line {}: {ident}::{method}(..) is a function of the system under test",
                    line_of(i)
                ));
            }
        }
        i = j;
    }
    out
}

fn store_sources() -> BTreeMap<String, BTreeSet<String>> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../store/src");
    let mut out = BTreeMap::new();
    for f in rust_files(&root) {
        store_methods(
            &fs::read_to_string(&f).unwrap_or_else(|e| panic!("cannot read {}: {e}", f.display())),
            &mut out,
        );
    }
    out
}

fn sim_fn_names() -> BTreeSet<String> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut out = BTreeSet::new();
    for f in rust_files(&root) {
        fn_names(
            &fs::read_to_string(&f).unwrap_or_else(|e| panic!("cannot read {}: {e}", f.display())),
            &mut out,
        );
    }
    out
}

/// The files held to the oracle's rules: the oracle's own, and the harness's record text
/// (the recorder writes payloads with it and the oracle shapes reads with it, so it judges
/// too).
fn judged_files() -> Vec<PathBuf> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = rust_files(&src.join("oracle"));
    files.push(src.join("oracle/../record_text.rs"));
    files
}

/// Where `text`, before its test module, serializes through serde (`serde_json::to_value`,
/// `to_string`, `to_vec`, `to_writer`): on a store type that runs the store's serde derive,
/// so a serialization bug in the store would shape both sides of a comparison.
fn serde_renderings(text: &str) -> Vec<String> {
    let code = text.split("#[cfg(test)]").next().unwrap_or("");
    let mut out = Vec::new();
    for (n, line) in code.lines().enumerate() {
        let line = line.split("//").next().unwrap_or("");
        for banned in
            ["serde_json::to_value", "serde_json::to_string", "serde_json::to_vec", "serde_json::to_writer"]
        {
            if line.contains(banned) {
                out.push(format!("line {}: {banned}", n + 1));
            }
        }
    }
    out
}

#[test]
fn the_oracle_renders_what_it_compares_with_its_own_text() {
    assert_eq!(serde_renderings("let v = serde_json::to_value(&meta);").len(), 1);
    assert_eq!(serde_renderings("let v = x; // not serde_json::to_value here").len(), 0);
    assert_eq!(serde_renderings("fn a() {}\n#[cfg(test)]\nmod tests { serde_json::to_string(&m) }").len(), 0);
    let mut found = Vec::new();
    let mut read = 0;
    for f in judged_files() {
        let text = fs::read_to_string(&f).unwrap_or_else(|e| panic!("cannot read {}: {e}", f.display()));
        read += usize::from(text.contains("fn "));
        for b in serde_renderings(&text) {
            found.push(format!("{}: {b}", f.display()));
        }
    }
    assert!(read > 10, "only {read} files read");
    assert!(found.is_empty(), "the oracle renders through serde's derive:\n{}", found.join("\n"));
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
    let files = judged_files();
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
        "../record_text.rs",
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

#[test]
fn the_method_scan_flags_store_methods_and_passes_the_oracles_own_and_std() {
    let mut store = BTreeMap::new();
    store_methods(
        "impl RunStatus {\n    pub fn parse(s: &str) -> Option<Self> { None }\n    pub fn as_str(self) -> &'static str { \"x\" }\n}\n\
         impl fmt::Display for RunMeta { fn fmt(&self) {} }\n\
         impl RunMeta {\n    pub fn validate(&self) -> bool { if true { true } else { false } }\n}\n\
         impl<'a> Op<'a> { pub fn journal_key(&self) -> u8 { 0 } }\n",
        &mut store,
    );
    let parsed: Vec<_> = store
        .iter()
        .map(|(t, ms)| format!("{t}: {}", ms.iter().cloned().collect::<Vec<_>>().join(" ")))
        .collect();
    assert_eq!(parsed, ["Op: journal_key", "RunMeta: fmt validate", "RunStatus: as_str parse"]);
    let sim_fns: BTreeSet<String> = ["as_str".to_string()].into();
    let bad = [
        "use store::RunStatus;\nlet s = RunStatus::parse(w);",
        "use store::{Lease, RunStatus as S};\nlet s = S::parse(w);",
        "let ok = store::types::RunMeta::validate(&m);",
        "let k = op.journal_key();",
        "let ok = m\n    .validate ();",
    ];
    for b in bad {
        assert!(!method_borrowings(b, &store, &sim_fns).is_empty(), "not flagged: {b}");
    }
    let good = [
        // No import of the store's `RunStatus`: the oracle's own type of that name.
        "let s = RunStatus::parse(w);",
        // A name the simulator defines too: not decidable without types, so not flagged.
        "let w = status.as_str();",
        "use store::RunMeta;\nlet m: RunMeta = serde_json::from_str(p)?;",
        "use store::RunStatus;\nlet s = RunStatus::Running;",
        "let v = xs.iter().find(|x| x.parse_ok());",
    ];
    for g in good {
        assert!(
            method_borrowings(g, &store, &sim_fns).is_empty(),
            "flagged: {g}: {:?}",
            method_borrowings(g, &store, &sim_fns)
        );
    }
}

#[test]
fn the_oracle_calls_no_method_of_the_store() {
    let store = store_sources();
    // Not vacuous: the scan reads the store's real impls, macro-generated ones included.
    for (ty, method) in [
        ("RunStatus", "parse"),
        ("RunMeta", "from_json"),
        ("JournalEntry", "validate"),
        ("RunFilter", "matches"),
        ("Op", "journal_key"),
        ("FaultPoint", "moment"),
    ] {
        assert!(
            store.get(ty).is_some_and(|ms| ms.contains(method)),
            "the scan did not find {ty}::{method} in store/src: {store:?}"
        );
    }
    let sim_fns = sim_fn_names();
    assert!(sim_fns.contains("of") && sim_fns.contains("word"), "the simulator's own fns were not read");
    let mut found = Vec::new();
    for f in judged_files() {
        let text = fs::read_to_string(&f).unwrap_or_else(|e| panic!("cannot read {}: {e}", f.display()));
        for b in method_borrowings(&text, &store, &sim_fns) {
            found.push(format!("{}: {b}", f.display()));
        }
    }
    assert!(found.is_empty(), "the oracle calls the system under test:\n{}", found.join("\n"));
}
