//! The HTML timeline and the CI reports, end to end through the `fencesim` program:
//! the page is well-formed, self-contained and drawn from the same events as the trace
//! (one lane per process, one mark per call the trace reports, the culprit marked); the
//! done-when run (a stale accept of F3 under v1_44_0: f3-check-then-mutate seed 10) shows its
//! stale renew outside its tenure (its tenure was taken over 151 ms before); a real
//! headless Chromium draws the page from file:// with the network off, without a script
//! error, and its screenshot is not blank; JUnit XML has the structure CI tools read.
//!
//! The browser tests need Debian's `chromium`. Without it they say so and pass, unless
//! FENCESIM_REQUIRE_BROWSER=1 (set by .ci/run, which installs it), where they fail.

#[path = "support/markup.rs"]
mod markup;
#[path = "support/png.rs"]
mod png;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;

use markup::Element;
use serde_json::Value;

fn fencesim(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_fencesim")).args(args).output().expect("spawn fencesim")
}

/// One run with its page, trace and JSON report.
struct Run {
    html: String,
    trace: Vec<Value>,
    report: Value,
    page_path: PathBuf,
}

fn run(dir: &Path, scenario: &str, profile: &str, seed: u64) -> Run {
    let page = dir.join(format!("{scenario}-{seed}.html"));
    let trace = dir.join(format!("{scenario}-{seed}.jsonl"));
    let seed = seed.to_string();
    let out = fencesim(&[
        "run",
        "--scenario",
        scenario,
        "--profile",
        profile,
        "--seed",
        &seed,
        "--json",
        "--html",
        page.to_str().unwrap(),
        "--trace",
        trace.to_str().unwrap(),
    ]);
    assert!(matches!(out.status.code(), Some(0 | 1)), "{}", String::from_utf8_lossy(&out.stderr));
    let report: Value = serde_json::from_slice(&out.stdout).expect("JSON report");
    let trace = std::fs::read_to_string(&trace)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).expect("trace line"))
        .collect();
    Run { html: std::fs::read_to_string(&page).unwrap(), trace, report, page_path: page }
}

/// The page's drawing data (the JSON in `<script id="data">`).
fn data_of(root: &Element) -> Value {
    let script =
        root.all().into_iter().find(|e| e.name == "script" && e.attr("id") == Some("data")).expect("data");
    serde_json::from_str(&script.text).expect("data is JSON")
}

/// Check what every page must satisfy, and return its tree.
fn check_page(r: &Run) -> Element {
    assert!(r.html.len() < 2 * 1024 * 1024, "page is {} bytes", r.html.len());
    let root = markup::parse(&r.html).unwrap_or_else(|e| panic!("page is not well-formed: {e}"));
    assert_eq!(root.name, "html");
    let all = root.all();
    // Self-contained: no URL in any src or href, no external stylesheet or script.
    for e in &all {
        for k in ["src", "href", "xlink:href"] {
            if let Some(v) = e.attr(k) {
                assert!(
                    !v.contains("http:") && !v.contains("https:") && !v.contains("//"),
                    "<{}> {k}={v}",
                    e.name
                );
            }
        }
        assert!(e.name != "link" && e.name != "iframe" && e.name != "img", "external resource <{}>", e.name);
        assert!(!(e.name == "script" && e.attr("src").is_some()));
    }
    assert!(!r.html.contains("http:") && !r.html.contains("https:"), "the page names a URL");
    assert!(!r.html.contains("/tmp/"), "the page holds an absolute path");
    // One lane per process of the trace.
    let nodes: BTreeSet<u64> = r.trace.iter().filter_map(|e| e["node"].as_u64()).collect();
    let lanes: BTreeSet<u64> = all
        .iter()
        .filter(|e| e.name == "g" && e.has_class("lane"))
        .map(|e| e.attr("data-node").unwrap().parse().unwrap())
        .collect();
    assert_eq!(lanes, nodes);
    assert_eq!(all.iter().filter(|e| e.name == "g" && e.has_class("lane")).count(), nodes.len());
    // One mark per call the trace reports, and the same calls.
    let data = data_of(&root);
    let trace_calls: BTreeSet<u64> = r.trace.iter().filter_map(|e| e["call"].as_u64()).collect();
    let calls = data["calls"].as_array().unwrap();
    let marked: BTreeSet<u64> = calls.iter().map(|c| c[13].as_u64().unwrap()).collect();
    assert_eq!(calls.len(), marked.len(), "a call is marked twice");
    assert_eq!(marked, trace_calls);
    // The culprit of the first violation that names a call is the one marked.
    let lead = r.report["violations"].as_array().unwrap().iter().find_map(|v| v["call"].as_u64());
    let culprit = data["culprit"].as_u64().map(|i| calls[i as usize][13].as_u64().unwrap());
    assert_eq!(culprit, lead);
    root
}

#[test]
fn f3_v1_44_0_seed_10_shows_the_stale_accept_outside_its_tenure() {
    let dir = tempfile::tempdir().unwrap();
    let r = run(dir.path(), "f3-check-then-mutate", "v1_44_0", 10);
    let root = check_page(&r);
    let data = data_of(&root);
    let v = r.report["violations"].as_array().unwrap().iter().find(|v| v["call"].is_u64()).unwrap().clone();
    assert_eq!(v["property"], "no_stale_accept");
    // The witness is on top in words with its reproduce command.
    let text = |id: &str| root.all().into_iter().find(|e| e.attr("id") == Some(id)).map(|e| e.text.clone());
    assert!(text("witness").unwrap_or_default().contains(v["witness"].as_str().unwrap()));
    assert_eq!(text("reproduce").as_deref(), r.report["reproduce"].as_str());
    // The culprit lies outside the tenure it claims: after every live span of it that
    // began before the culprit, and the page's gap spans exactly that stretch.
    let c = &data["calls"][data["culprit"].as_u64().unwrap() as usize];
    let ten = &data["tenures"][data["contradicted"].as_u64().expect("a contradicted tenure") as usize];
    assert_eq!(ten[1], c[7], "the tenure is the culprit's epoch");
    let at = c[0].as_u64().unwrap();
    let spans: Vec<(u64, u64)> = ten[5]
        .as_array()
        .unwrap()
        .iter()
        .map(|sp| (sp[0].as_u64().unwrap(), sp[1].as_u64().unwrap()))
        .collect();
    assert!(!spans.is_empty());
    assert!(spans.iter().filter(|sp| sp.0 < at).all(|sp| at > sp.1), "culprit at {at} inside {spans:?}");
    let gap = data["gap"].as_array().expect("a gap");
    let (from, to) = (gap[0].as_u64().unwrap(), gap[1].as_u64().unwrap());
    assert_eq!(to, at);
    assert_eq!(from, spans.iter().filter(|sp| sp.0 < at).map(|sp| sp.1).max().unwrap());
    assert!(text("witness").unwrap().contains("ms outside the tenure of epoch"));
    // The view opens on both.
    let focus = data["focus"].as_array().unwrap();
    let (a, b) = (focus[0].as_u64().unwrap(), focus[1].as_u64().unwrap());
    assert!(a <= ten[4].as_u64().unwrap() && a <= from && b >= at);
    // Same seed, same page, in another process.
    let again = run(dir.path(), "f3-check-then-mutate", "v1_44_0", 10);
    assert_eq!(r.html, again.html);
}

#[test]
fn engine_page_draws_pay_and_tool_facts_and_crashes_from_the_trace() {
    let dir = tempfile::tempdir().unwrap();
    let r = run(dir.path(), "f1-stale-settle", "v1_44_1", 2);
    let root = check_page(&r);
    let data = data_of(&root);
    let facts = data["facts"].as_array().unwrap();
    let strings = data["strings"].as_array().unwrap();
    let kind = |f: &Value| strings[f[2].as_u64().unwrap() as usize].as_str().unwrap().to_string();
    for (word, k) in [("PAY ", "pay"), ("TOOL ", "tool")] {
        let in_trace = r.trace.iter().filter(|e| e["op"].as_str().unwrap().starts_with(word)).count();
        assert!(in_trace > 0, "the run pays and calls tools");
        assert_eq!(facts.iter().filter(|f| kind(f) == k).count(), in_trace, "{word}");
    }
    let crashes = r.trace.iter().filter(|e| e["op"] == "CRASH").count();
    let drawn: usize =
        data["lanes"].as_array().unwrap().iter().map(|l| l["crashes"].as_array().unwrap().len()).sum();
    assert_eq!(drawn, crashes);
}

#[test]
fn sweep_writes_one_page_per_failing_seed_an_index_junit_and_a_summary() {
    let dir = tempfile::tempdir().unwrap();
    let p = |n: &str| dir.path().join(n).to_str().unwrap().to_string();
    let out = fencesim(&[
        "sweep",
        "--scenario",
        "f3-check-then-mutate",
        "--profile",
        "v1_44_0",
        "--seeds",
        "0..12",
        "--jobs",
        "2",
        "--json",
        &p("sweep.json"),
        "--junit",
        &p("junit.xml"),
        "--summary-md",
        &p("summary.md"),
        "--html-dir",
        &p("pages"),
    ]);
    assert_eq!(out.status.code(), Some(1), "{}", String::from_utf8_lossy(&out.stderr));
    let report: Value = serde_json::from_str(&std::fs::read_to_string(p("sweep.json")).unwrap()).unwrap();
    let failures = report["failures"].as_array().unwrap();
    assert!(!failures.is_empty());
    let index = std::fs::read_to_string(dir.path().join("pages/index.html")).unwrap();
    let index_root = markup::parse(&index).unwrap();
    let links: Vec<String> =
        index_root.all().iter().filter_map(|e| e.attr("href").map(str::to_string)).collect();
    assert_eq!(links.len(), failures.len());
    for f in failures {
        let seed = f["seed"].as_u64().unwrap();
        let name = format!("f3-check-then-mutate-v1_44_0-{seed}.html");
        assert!(links.contains(&name), "{name} not in the index");
        let page = std::fs::read_to_string(dir.path().join("pages").join(&name)).unwrap();
        markup::parse(&page).unwrap();
        assert!(index.contains(&markup_text(f["witness"].as_str().unwrap())));
    }
    // JUnit: one case, one failure element per failing seed, with witness and reproduce.
    let xml = std::fs::read_to_string(p("junit.xml")).unwrap();
    let cases = check_junit(&xml);
    assert_eq!(cases.len(), 1);
    let seeds: Vec<&(String, String)> = cases[0].1.iter().filter(|f| f.0.starts_with("seed ")).collect();
    assert_eq!(seeds.len(), failures.len());
    let shortfalls = report["goals_unmet"].as_array().unwrap();
    assert_eq!(cases[0].1.len() - seeds.len(), shortfalls.len());
    for (f, (msg, body)) in failures.iter().zip(seeds) {
        assert!(msg.contains(f["witness"].as_str().unwrap()), "{msg}");
        assert!(body.contains(&format!("reproduce: {}", f["reproduce"].as_str().unwrap())), "{body}");
    }
    let md = std::fs::read_to_string(p("summary.md")).unwrap();
    assert!(
        md.contains(
            "| scenario | profile | seeds | failures | coverage shortfalls | abstract states (seen of ~reachable) | reproduce |"
        ),
        "{md}"
    );
    // The sweep's state coverage: seen, of the estimated reachable, as the JSON has it.
    let est = &report["states_estimate"];
    assert_eq!(est["runs"].as_u64(), Some(12));
    assert!(
        md.contains(&format!(
            "| {} of ~{:.0} (",
            est["observed"].as_u64().unwrap(),
            est["estimated"].as_f64().unwrap()
        )),
        "{md}"
    );
    assert!(md.contains(&format!("| f3-check-then-mutate | v1_44_0 | 12 | {} |", failures.len())), "{md}");
    assert!(md.contains(failures[0]["reproduce"].as_str().unwrap()), "{md}");
}

#[test]
fn findings_junit_has_a_case_per_row_and_per_current_scenario() {
    let dir = tempfile::tempdir().unwrap();
    let xml_path = dir.path().join("f.xml");
    let md_path = dir.path().join("f.md");
    let out = fencesim(&[
        "findings",
        "--rows",
        "F3a",
        "--seeds",
        "3",
        "--junit",
        xml_path.to_str().unwrap(),
        "--summary-md",
        md_path.to_str().unwrap(),
    ]);
    // Three seeds are too few to catch F3a: the row fails, and says so in the XML.
    assert_eq!(out.status.code(), Some(1), "{}", String::from_utf8_lossy(&out.stderr));
    let cases = check_junit(&std::fs::read_to_string(&xml_path).unwrap());
    assert!(cases.len() >= 2, "{cases:?}");
    assert_eq!(cases[0].1.len(), 1);
    assert!(cases[0].1[0].0.contains("F3a was not caught"), "{:?}", cases[0]);
    let md = std::fs::read_to_string(&md_path).unwrap();
    assert!(md.contains("fencesim findings --rows F3a"), "{md}");
}

/// The text of `s` as the index writes it (escaped).
fn markup_text(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace('"', "&quot;")
        .replace('\'', "&#39;")
}

/// Validate a JUnit document's structure and counts; return per test case its failures
/// as (message, body).
fn check_junit(xml: &str) -> Vec<(String, Vec<(String, String)>)> {
    assert!(xml.starts_with("<?xml version=\"1.0\" encoding=\"UTF-8\"?>"));
    let root = markup::parse(xml).unwrap_or_else(|e| panic!("JUnit is not well-formed: {e}"));
    assert_eq!(root.name, "testsuites");
    let count =
        |e: &Element, k: &str| -> usize { e.attr(k).unwrap_or_else(|| panic!("{k}")).parse().unwrap() };
    let mut out = Vec::new();
    let (mut tests, mut failing) = (0, 0);
    for suite in &root.children {
        assert_eq!(suite.name, "testsuite");
        assert!(suite.attr("name").is_some_and(|n| !n.is_empty()));
        let cases: Vec<&Element> = suite.children.iter().collect();
        assert!(cases.iter().all(|c| c.name == "testcase"));
        let failed = cases.iter().filter(|c| c.children.iter().any(|x| x.name == "failure")).count();
        assert_eq!(count(suite, "tests"), cases.len());
        assert_eq!(count(suite, "failures"), failed);
        assert_eq!(count(suite, "errors"), 0);
        tests += cases.len();
        failing += failed;
        for c in cases {
            assert!(c.attr("name").is_some() && c.attr("classname").is_some());
            for x in &c.children {
                assert!(["properties", "failure", "system-out"].contains(&x.name.as_str()), "<{}>", x.name);
                if x.name == "failure" {
                    assert!(x.attr("type").is_some());
                    assert!(x.text.contains("reproduce: fencesim "), "{}", x.text);
                }
            }
            let failures = c
                .children
                .iter()
                .filter(|x| x.name == "failure")
                .map(|x| (x.attr("message").unwrap().to_string(), x.text.clone()))
                .collect();
            out.push((c.attr("name").unwrap().to_string(), failures));
        }
    }
    assert_eq!(count(&root, "tests"), tests);
    assert_eq!(count(&root, "failures"), failing);
    out
}

// ---------------------------------------------------------------------------------------
// A real browser.

/// Debian's `chromium` (or FENCESIM_CHROMIUM, or a Chrome already on PATH).
fn chromium() -> Option<PathBuf> {
    let named = std::env::var_os("FENCESIM_CHROMIUM").map(PathBuf::from).filter(|p| p.is_file());
    let found = named.or_else(|| {
        ["chromium", "chromium-browser", "google-chrome", "google-chrome-stable"].iter().find_map(|name| {
            std::env::var_os("PATH")?
                .to_str()?
                .split(':')
                .map(|d| Path::new(d).join(name))
                .find(|p| p.is_file())
        })
    });
    if found.is_none() {
        assert!(
            std::env::var("FENCESIM_REQUIRE_BROWSER").ok().as_deref() != Some("1"),
            "FENCESIM_REQUIRE_BROWSER=1 but no chromium on PATH (apt-get install chromium)"
        );
        eprintln!("note: no chromium on PATH; the browser check did not run");
    }
    found
}

/// Headless Chromium on a file:// page with the network off (every host name resolves to
/// nothing, and a dead proxy for good measure), a fresh profile each time.
fn browse(chromium: &Path, page: &Path, mode: &[&str]) -> std::process::Output {
    browse_url(chromium, &format!("file://{}", page.canonicalize().unwrap().display()), mode)
}

fn browse_url(chromium: &Path, url: &str, mode: &[&str]) -> std::process::Output {
    let profile = tempfile::tempdir().unwrap();
    let out = Command::new(chromium)
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--disable-extensions",
            "--host-resolver-rules=MAP * ~NOTFOUND",
            "--proxy-server=127.0.0.1:9",
            "--window-size=1400,900",
            // Let the page settle (script, layout, paint) before the DOM or the picture is taken.
            "--virtual-time-budget=3000",
        ])
        .arg(format!("--user-data-dir={}", profile.path().display()))
        .args(mode)
        .arg(url)
        .output()
        .expect("run chromium");
    assert!(out.status.success(), "chromium failed: {}", String::from_utf8_lossy(&out.stderr));
    out
}

#[test]
fn chromium_draws_the_done_when_page_without_a_script_error() {
    let Some(chromium) = chromium() else { return };
    let dir = tempfile::tempdir().unwrap();
    let r = run(dir.path(), "f3-check-then-mutate", "v1_44_0", 10);
    let out = browse(&chromium, &r.page_path, &["--dump-dom"]);
    let dom = String::from_utf8_lossy(&out.stdout).to_string();
    let body = dom.find("<body").map(|i| &dom[i..i + dom[i..].find('>').unwrap()]).expect("a body");
    assert!(!body.contains("data-error"), "the script failed: {body}");
    assert!(body.contains("data-ok=\"1\""), "the script did not finish: {body}");
    let drawn: usize =
        body.split("data-drawn=\"").nth(1).and_then(|s| s.split('"').next()).unwrap().parse().unwrap();
    // The drawn marks are SVG elements now, the culprit among them, ringed; the tenure the
    // culprit contradicts, the band outside it, and an axis.
    let mark_classes: Vec<&str> =
        dom.split("<g class=\"mark ").skip(1).map(|rest| &rest[..rest.find('"').unwrap()]).collect();
    assert!(drawn > 0);
    assert_eq!(mark_classes.len(), drawn);
    let culprits = mark_classes.iter().filter(|c| c.split_whitespace().any(|w| w == "culprit")).count();
    assert_eq!(culprits, 1, "one culprit mark");
    assert!(dom.contains("<circle class=\"ring\""));
    assert!(dom.contains("class=\"tenure contradicted"));
    assert!(dom.contains("id=\"gap\""), "the stale accept's distance from its tenure is drawn");
    assert!(dom.contains("class=\"culprit-line\""));
    let axis = &dom[dom.find("id=\"axis\"").unwrap()..];
    assert!(axis[..axis.find("</g>").unwrap()].matches("<line").count() >= 3, "no axis ticks");
    // The details panel shows the culprit call.
    assert!(dom.contains("the witness's culprit call"));
}

#[test]
fn chromium_drives_keyboard_zoom_pan_the_run_filter_and_hover() {
    let Some(chromium) = chromium() else { return };
    let dir = tempfile::tempdir().unwrap();
    let r = run(dir.path(), "f1-stale-settle", "v1_44_1", 2);
    let url = format!("file://{}#selftest", r.page_path.canonicalize().unwrap().display());
    let out = browse_url(&chromium, &url, &["--dump-dom"]);
    let dom = String::from_utf8_lossy(&out.stdout).to_string();
    let body = dom.find("<body").map(|i| &dom[i..i + dom[i..].find('>').unwrap()]).expect("a body");
    assert!(!body.contains("data-error"), "{body}");
    let st =
        body.split("data-selftest=\"").nth(1).and_then(|s| s.split('"').next()).expect("the self-test ran");
    for part in ["zoom=ok", "pan=ok", "whole=ok", "filter=ok", "hover=ok", "witness=ok"] {
        assert!(st.contains(part), "{part} in {st}");
    }
}

#[test]
fn chromium_screenshot_of_the_f3a_witness_is_not_blank() {
    let Some(chromium) = chromium() else { return };
    let dir = tempfile::tempdir().unwrap();
    let r = run(dir.path(), "f3-check-then-mutate", "v1_44_0", 10);
    check_page(&r);
    let shot = dir.path().join("shot.png");
    browse(&chromium, &r.page_path, &[&format!("--screenshot={}", shot.display())]);
    let img = png::decode(&std::fs::read(&shot).unwrap()).expect("a PNG");
    assert_eq!((img.width, img.height), (1400, 900));
    let total = img.pixels.len();
    let inked = img.pixels.iter().filter(|p| p.iter().any(|&c| c < 200)).count();
    let colours: BTreeSet<[u8; 3]> = img.pixels.iter().copied().collect();
    // The witness red (#b3261e) of the culprit ring, the band and the witness box.
    let red = img.pixels.iter().filter(|p| p[0] > 150 && p[1] < 80 && p[2] < 80).count();
    assert!(inked * 100 > total * 2, "only {inked} of {total} pixels inked");
    assert!(colours.len() > 30, "{} colours", colours.len());
    assert!(red > 100, "{red} red pixels");
}

#[test]
fn an_unwritable_page_or_report_is_bad_input() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("a-file");
    std::fs::write(&file, "x").unwrap();
    let under_file = file.join("page.html");
    let out = fencesim(&[
        "run",
        "--scenario",
        "f3-check-then-mutate",
        "--profile",
        "current",
        "--seed",
        "0",
        "--quiet",
        "--html",
        under_file.to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("cannot write page"));
    for flag in ["--junit", "--summary-md", "--html-dir"] {
        let out = fencesim(&[
            "sweep",
            "--scenario",
            "f3-check-then-mutate",
            "--profile",
            "current",
            "--seeds",
            "0..1",
            flag,
            under_file.to_str().unwrap(),
        ]);
        assert_eq!(out.status.code(), Some(2), "{flag}: {}", String::from_utf8_lossy(&out.stderr));
    }
}
