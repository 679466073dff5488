//! `sim` is built in layers: a module may name (`crate::x`) only modules below it, so no two
//! top-level modules of `sim/src/` import each other, directly or through others. This
//! test reads every `.rs` file under `sim/src/`, takes each `crate::<module>` path in code
//! (comments skipped), and fails on any circle, printing it with the line behind each edge.
//!
//! The layers today, bottom up (a module names only modules on lines above its own):
//! `seed` `ledger` `machine` `audit` `record_text` / `plan` `child` / `time` `foreign` / `history` /
//! `verdict` `recorded` `world_state` / `env` `oracle` / `actors` `report` / `world` /
//! `runner` `catalog` / `sweep` `real` / `findings` / `shrink` `ci_report` / `explore`
//! `html` / `cli`.

use std::collections::{BTreeMap, BTreeSet};
mod support;

use std::fs;
use std::path::Path;

use support::rust_files;

/// The top-level module a file under `src` belongs to (`None` for lib.rs).
fn module_of(src: &Path, file: &Path) -> Option<String> {
    let rel = file.strip_prefix(src).ok()?;
    let first = rel.components().next()?.as_os_str().to_string_lossy().into_owned();
    let name = first.strip_suffix(".rs").unwrap_or(&first).to_string();
    (name != "lib").then_some(name)
}

/// The code of a line: everything before a `//` that is not inside a string literal.
fn code_of(line: &str) -> &str {
    let bytes = line.as_bytes();
    let mut in_str = false;
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'\\' if in_str => i += 1,
            b'"' => in_str = !in_str,
            b'/' if !in_str && bytes.get(i + 1) == Some(&b'/') => return &line[..i],
            _ => {}
        }
        i += 1;
    }
    line
}

/// Every `crate::<ident>` in `code`.
fn crate_paths(code: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut rest = code;
    while let Some(at) = rest.find("crate::") {
        let before = rest[..at].chars().next_back();
        let tail = &rest[at + "crate::".len()..];
        let ident: String = tail.chars().take_while(|c| c.is_ascii_alphanumeric() || *c == '_').collect();
        // `$crate::` and `my_crate::` are not this crate.
        if !before.is_some_and(|c| c.is_ascii_alphanumeric() || c == '_' || c == '$') && !ident.is_empty() {
            out.push(ident);
        }
        rest = tail;
    }
    out
}

/// (from, to) -> the first `file:line` that makes the edge.
fn edges(src: &Path) -> BTreeMap<(String, String), String> {
    let mut out = BTreeMap::new();
    for file in rust_files(src) {
        let Some(from) = module_of(src, &file) else { continue };
        let text =
            fs::read_to_string(&file).unwrap_or_else(|e| panic!("cannot read {}: {e}", file.display()));
        for (n, line) in text.lines().enumerate() {
            for to in crate_paths(code_of(line)) {
                if to != from {
                    let at = format!("{}:{}", file.strip_prefix(src).unwrap_or(&file).display(), n + 1);
                    out.entry((from.clone(), to)).or_insert(at);
                }
            }
        }
    }
    out
}

/// One circle of the graph, if it has any: the modules in order, the first repeated last.
fn find_circle(graph: &BTreeMap<String, BTreeSet<String>>) -> Option<Vec<String>> {
    // 0 unvisited, 1 on the current path, 2 done.
    fn visit(
        node: &str,
        graph: &BTreeMap<String, BTreeSet<String>>,
        state: &mut BTreeMap<String, u8>,
        path: &mut Vec<String>,
    ) -> Option<Vec<String>> {
        state.insert(node.to_string(), 1);
        path.push(node.to_string());
        for next in graph.get(node).into_iter().flatten() {
            match state.get(next.as_str()).copied().unwrap_or(0) {
                1 => {
                    let start = path.iter().position(|m| m == next).unwrap_or(0);
                    let mut circle = path[start..].to_vec();
                    circle.push(next.clone());
                    return Some(circle);
                }
                0 => {
                    if let Some(c) = visit(next, graph, state, path) {
                        return Some(c);
                    }
                }
                _ => {}
            }
        }
        path.pop();
        state.insert(node.to_string(), 2);
        None
    }
    let mut state = BTreeMap::new();
    for node in graph.keys() {
        if state.get(node.as_str()).copied().unwrap_or(0) == 0 {
            if let Some(c) = visit(node, graph, &mut state, &mut Vec::new()) {
                return Some(c);
            }
        }
    }
    None
}

fn graph_of(edges: &BTreeMap<(String, String), String>) -> BTreeMap<String, BTreeSet<String>> {
    let mut graph: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (from, to) in edges.keys() {
        graph.entry(from.clone()).or_default().insert(to.clone());
    }
    graph
}

#[test]
fn no_module_of_sim_imports_one_that_imports_it() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let edges = edges(&src);
    assert!(edges.len() > 40, "the scan found only {} edges: is it reading sim/src?", edges.len());
    if let Some(circle) = find_circle(&graph_of(&edges)) {
        let steps: Vec<String> = circle
            .windows(2)
            .map(|w| format!("  {} -> {}   ({})", w[0], w[1], edges[&(w[0].clone(), w[1].clone())]))
            .collect();
        panic!("an import circle in sim/src:\n{}", steps.join("\n"));
    }
}

#[test]
fn the_scan_sees_paths_in_code_and_skips_comments_and_strings() {
    assert_eq!(crate_paths("use crate::history::{Call, OpKind};"), ["history"]);
    assert_eq!(crate_paths("let x = crate::time::now_ns() + $crate::y + other_crate::z;"), ["time"]);
    assert_eq!(code_of("let a = 1; // crate::world is mentioned here"), "let a = 1; ");
    assert_eq!(crate_paths(code_of(r#"let s = "http://x"; crate::plan::Plan::read(p)"#)), ["plan"]);
    let mut graph = BTreeMap::new();
    graph.insert("a".to_string(), BTreeSet::from(["b".to_string()]));
    graph.insert("b".to_string(), BTreeSet::from(["c".to_string()]));
    assert_eq!(find_circle(&graph), None);
    graph.insert("c".to_string(), BTreeSet::from(["a".to_string()]));
    assert_eq!(find_circle(&graph), Some(vec!["a".into(), "b".into(), "c".into(), "a".into()]));
}
