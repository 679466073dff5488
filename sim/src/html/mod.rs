//! The HTML timeline of a run (`fencesim run --html`, `shrink --html`, `sweep --html-dir`):
//! one self-contained page (inline SVG, CSS and a small script; no network, no external
//! font or library) drawing lease tenures against accepted mutations on one virtual-time
//! axis, with the violation on top in words.
//!
//! Promises: the page is rendered from the run's recorded history, the same events
//! `--trace` writes (see [`model`]), and from the run report; it depends on nothing else
//! (no clock, no absolute path, no hash-map order), so a seed's page is the same bytes in
//! every process. The markup is well-formed XML apart from the doctype (every element
//! closed, every attribute quoted and escaped), so it can be checked without a browser.
//!
//! Shape: the header (verdict, witness sentences, reproduce command, controls, legend) and
//! the SVG's skeleton (one `<g class="lane" data-node>` per process, one row per run) are
//! markup; the calls, tenures, stalls, crashes and facts travel as packed rows in
//! `<script type="application/json" id="data">` (see [`data`]) and the page's script
//! (`page.js`) draws the part in view: a soak storm has tens of thousands of calls, and one
//! element per call written out in full would make its page several megabytes. Drawn, each
//! call is a `<g class="mark CLASS" data-call>`, the lead witness's culprit has the class
//! `culprit`, and `<body>` gets `data-ok="1"` (or `data-error`) when the script is done.

pub mod data;
pub mod dir;
pub mod model;

use std::fmt::Write as _;

use crate::history::History;
use crate::report::{fmt_time, RunReport};
use model::Timeline;

const CSS: &str = include_str!("page.css");
const JS: &str = include_str!("page.js");

/// Drawing width (SVG user units), the label gutter and the plot's right edge.
const WIDTH: f64 = 1200.0;
const X0: f64 = 120.0;
const X1: f64 = 1180.0;
const AXIS_H: f64 = 20.0;
const RUN_H: f64 = 18.0;
const LANE_H: f64 = 46.0;

/// Escape text for an element body or a quoted attribute (the same escaping as the JUnit
/// report's: `&apos;` is valid in HTML5 as in XML).
pub fn esc(s: &str) -> String {
    crate::ci_report::xml_esc(s)
}

/// The page of one run. `note` says what the run is ("shrunk witness", ...), if anything.
pub fn page(history: &History, report: &RunReport, note: Option<&str>) -> String {
    page_leading(history, report, note, None)
}

/// As [`page`], leading with the violation whose culprit is call `lead` (when it has one).
pub fn page_leading(
    history: &History,
    report: &RunReport,
    note: Option<&str>,
    lead: Option<usize>,
) -> String {
    let t = model::build(history, report, lead);
    let runs = run_order(&t);
    let mut out = String::with_capacity(64 * 1024 + t.marks.len() * 80);
    let verdict = if report.passed { "PASS" } else { "FAIL" };
    let title = format!("{verdict} {} profile={} seed={}", report.scenario, report.profile, report.seed);
    let _ = write!(
        out,
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\" />\n\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\" />\n\
         <title>{}</title>\n<style>\n{CSS}</style>\n</head>\n<body>\n",
        esc(&title)
    );
    header(&mut out, &t, &runs, report, note);
    svg(&mut out, &t, &runs);
    let _ = write!(out, "<script>\n{JS}</script>\n</body>\n</html>\n");
    out
}

fn header(out: &mut String, t: &Timeline, runs: &[String], report: &RunReport, note: Option<&str>) {
    let cls = if report.passed { "pass" } else { "fail" };
    let verdict = if report.passed { "PASS" } else { "FAIL" };
    let _ = writeln!(
        out,
        "<h1><span class=\"{cls}\">{verdict}</span> {} profile={} seed={}{}</h1>",
        esc(&report.scenario),
        esc(&report.profile),
        report.seed,
        note.map(|n| format!(" ({})", esc(n))).unwrap_or_default()
    );
    let lead = t.lead();
    if let Some(w) = lead {
        let _ = writeln!(
            out,
            "<div class=\"witness\" id=\"witness\"><span class=\"prop\">{}</span>: {}{}</div>",
            esc(&w.property),
            esc(&w.sentence),
            outside_sentence(t, w).map(|s| format!("<br />{}", esc(&s))).unwrap_or_default()
        );
    }
    let rest: Vec<_> = t.witnesses.iter().filter(|w| !lead.is_some_and(|l| std::ptr::eq(*w, l))).collect();
    if !rest.is_empty() {
        let _ = writeln!(out, "<details><summary>{} more violation(s)</summary>", rest.len());
        for w in rest.iter().take(50) {
            let _ = writeln!(
                out,
                "<div class=\"witness more\"><span class=\"prop\">{}</span>: {}</div>",
                esc(&w.property),
                esc(&w.sentence)
            );
        }
        let _ = writeln!(out, "</details>");
    }
    let _ = writeln!(
        out,
        "<div>reproduce: <code class=\"repro\" id=\"reproduce\">{}</code></div>",
        esc(&report.reproduce)
    );
    let _ = writeln!(
        out,
        "<div class=\"meta\">plan: {} | {} calls, {} events, {} virtual ms | trace hash {}</div>",
        esc(&report.plan_summary),
        report.calls,
        report.events,
        report.virtual_ms,
        esc(&report.trace_hash)
    );
    let _ = writeln!(
        out,
        "<div class=\"controls\"><label>run <select id=\"run-filter\"><option value=\"\">all runs</option>"
    );
    for r in runs {
        let _ = writeln!(out, "<option value=\"{0}\">{0}</option>", esc(r));
    }
    let _ = writeln!(
        out,
        "</select></label>\
         <button id=\"zoom-in\" type=\"button\">zoom in (+)</button>\
         <button id=\"zoom-out\" type=\"button\">zoom out (-)</button>\
         <button id=\"pan-left\" type=\"button\">&#8592;</button>\
         <button id=\"pan-right\" type=\"button\">&#8594;</button>\
         <button id=\"whole\" type=\"button\">whole run (0)</button>\
         <button id=\"to-witness\" type=\"button\">witness (w)</button>\
         <span class=\"meta\">view <span id=\"view\">0.000s .. {}</span>; ctrl+wheel zooms, shift+wheel pans</span></div>",
        fmt_time(t.end_ns).trim()
    );
    let _ = writeln!(
        out,
        "<div class=\"legend\">\
         <span><svg width=\"12\" height=\"12\"><circle cx=\"6\" cy=\"6\" r=\"4.5\" fill=\"#1b7f3b\" /></svg> applied</span>\
         <span><svg width=\"12\" height=\"12\"><circle cx=\"6\" cy=\"6\" r=\"4.5\" fill=\"#fff\" stroke=\"#1b7f3b\" /></svg> ok, nothing applied</span>\
         <span><svg width=\"12\" height=\"12\"><circle cx=\"6\" cy=\"6\" r=\"4.5\" fill=\"#fff\" stroke=\"#b3261e\" /></svg> refused (typed)</span>\
         <span><svg width=\"12\" height=\"12\"><circle cx=\"6\" cy=\"6\" r=\"4.5\" fill=\"#f0a020\" /></svg> busy</span>\
         <span><svg width=\"12\" height=\"12\"><circle cx=\"6\" cy=\"6\" r=\"4.5\" fill=\"#9aa0a6\" /></svg> unknown (died in flight)</span>\
         <span><svg width=\"12\" height=\"12\"><rect x=\"1\" y=\"1\" width=\"10\" height=\"10\" fill=\"#6a3fb5\" transform=\"rotate(45 6 6)\" /></svg> PAY</span>\
         <span><svg width=\"12\" height=\"12\"><rect x=\"1\" y=\"1\" width=\"10\" height=\"10\" fill=\"#1f6fb2\" transform=\"rotate(45 6 6)\" /></svg> TOOL</span>\
         <span>tenure bar: grant to release/takeover/deletion, coloured by epoch; black tick = expiry by the store clock; faded = expired while its row stayed; hatched lane span = stall</span>\
         </div>"
    );
    let _ = writeln!(out, "<div id=\"details\">hover or focus a mark for its details</div>");
}

/// "On the picture: call #99 (put_meta soak-run) lies 105 ms outside the tenure of epoch 1
/// (soak-w1), which stopped being live at t=0.244s (takeover by epoch 2)."
fn outside_sentence(t: &Timeline, w: &model::Witness) -> Option<String> {
    let m = t.marks.iter().find(|m| Some(m.call) == w.culprit)?;
    let ten = t.tenures.get(w.tenure?)?;
    let who = format!("the tenure of epoch {} ({})", ten.epoch, ten.owner);
    Some(match w.outside {
        Some(o) if o.to > o.from && o.from < m.at_ns => {
            let why = if o.from < ten.end_ns { "expired".to_string() } else { ten.end_reason.clone() };
            format!(
                "On the picture: call #{} ({}) lies {} ms outside {who}, which stopped being live at t={} ({why}).",
                m.call,
                m.describe,
                (o.to - o.from + 500_000) / 1_000_000,
                fmt_time(o.from).trim()
            )
        }
        Some(_) => format!(
            "On the picture: call #{} ({}) lies outside {who}, before its grant at t={}.",
            m.call,
            m.describe,
            fmt_time(ten.start_ns).trim()
        ),
        None => format!(
            "On the picture: call #{} ({}) lies inside {who}, granted at t={}.",
            m.call,
            m.describe,
            fmt_time(ten.start_ns).trim()
        ),
    })
}

/// The runs in row order: the run of the tenure the witness contradicts first, then the
/// others by name.
fn run_order(t: &Timeline) -> Vec<String> {
    let first = t.lead().and_then(|w| w.tenure).and_then(|i| t.tenures.get(i)).map(|x| x.run_id.clone());
    let mut runs: Vec<String> = first.iter().cloned().collect();
    runs.extend(t.runs.iter().filter(|r| Some(*r) != first.as_ref()).cloned());
    runs
}

/// The view on open: the culprit and the tenure it contradicts, with a margin.
fn focus(t: &Timeline) -> Option<(u64, u64)> {
    let lead = t.lead()?;
    let m = t.marks.iter().find(|m| Some(m.call) == lead.culprit)?;
    let (mut a, mut b) = (m.at_ns, m.at_ns);
    if let Some(ten) = lead.tenure.and_then(|i| t.tenures.get(i)) {
        a = a.min(ten.start_ns);
    }
    if let Some(o) = lead.outside {
        a = a.min(o.from);
        b = b.max(o.to);
    }
    let pad = ((b - a) / 4).max(20_000_000);
    Some((a.saturating_sub(pad), b.saturating_add(pad)))
}

/// The SVG skeleton (patterns, row and lane backgrounds and labels) and the drawing data;
/// the script draws the axis, tenures, stalls, crashes and marks into `#content`.
fn svg(out: &mut String, t: &Timeline, runs: &[String]) {
    // The first run's row (the one the witness contradicts) sits right above the process
    // lanes; the other runs' rows follow below them.
    let run_top = AXIS_H + 16.0;
    let lane_top = run_top + RUN_H + 3.0 + 24.0;
    let other_top = lane_top + t.lanes.len() as f64 * LANE_H + 18.0;
    let row_y = |i: usize| if i == 0 { run_top } else { other_top + (i - 1) as f64 * (RUN_H + 3.0) };
    let height = other_top + runs.len().saturating_sub(1) as f64 * (RUN_H + 3.0) + 8.0;
    let _ = writeln!(
        out,
        "<svg id=\"timeline\" viewBox=\"0 0 {WIDTH} {height:.0}\" width=\"{WIDTH}\" height=\"{height:.0}\" \
         data-x0=\"{X0}\" data-x1=\"{X1}\" data-h=\"{height:.0}\" data-run-top=\"{run_top:.0}\" data-run-h=\"{RUN_H}\" \
         data-lane-top=\"{lane_top:.0}\" data-other-top=\"{other_top:.0}\" data-lane-h=\"{LANE_H}\" data-lanes=\"{}\" data-calls=\"{}\" \
         role=\"img\" aria-label=\"lease tenures and store calls over virtual time\">",
        t.lanes.len(),
        t.marks.len()
    );
    let _ = writeln!(
        out,
        "<defs>\
         <pattern id=\"hatch\" width=\"6\" height=\"6\" patternUnits=\"userSpaceOnUse\" patternTransform=\"rotate(45)\">\
         <rect width=\"6\" height=\"6\" fill=\"#fff4d6\" /><line x1=\"0\" y1=\"0\" x2=\"0\" y2=\"6\" stroke=\"#c08a00\" stroke-width=\"2\" /></pattern>\
         <pattern id=\"expired\" width=\"5\" height=\"5\" patternUnits=\"userSpaceOnUse\" patternTransform=\"rotate(-45)\">\
         <rect width=\"5\" height=\"5\" fill=\"#f4f4f4\" /><line x1=\"0\" y1=\"0\" x2=\"0\" y2=\"5\" stroke=\"#bbb\" stroke-width=\"1.5\" /></pattern>\
         <pattern id=\"gap\" width=\"6\" height=\"6\" patternUnits=\"userSpaceOnUse\" patternTransform=\"rotate(45)\">\
         <rect width=\"6\" height=\"6\" fill=\"#fde2df\" /><line x1=\"0\" y1=\"0\" x2=\"0\" y2=\"6\" stroke=\"#b3261e\" stroke-width=\"1.5\" /></pattern>\
         <clipPath id=\"plot\"><rect x=\"{X0}\" y=\"0\" width=\"{w:.0}\" height=\"{height:.0}\" /></clipPath>\
         </defs>",
        w = X1 - X0
    );
    let _ = writeln!(
        out,
        "<text class=\"row-label\" x=\"4\" y=\"{:.0}\" font-weight=\"bold\">lease tenures</text>",
        run_top - 4.0
    );
    for (i, r) in runs.iter().enumerate() {
        let y = row_y(i);
        if i == 1 {
            let _ = writeln!(
                out,
                "<text class=\"row-label\" x=\"4\" y=\"{:.0}\" font-weight=\"bold\">other runs</text>",
                y - 4.0
            );
        }
        let _ = writeln!(
            out,
            "<g class=\"run-row\" data-run=\"{0}\"><rect class=\"lane-bg\" x=\"{X0}\" y=\"{y:.0}\" width=\"{w:.0}\" height=\"{RUN_H}\" />\
             <text class=\"row-label\" x=\"4\" y=\"{ty:.0}\">{0}</text></g>",
            esc(r),
            w = X1 - X0,
            ty = y + RUN_H - 4.0
        );
    }
    let _ = writeln!(
        out,
        "<text class=\"row-label\" x=\"4\" y=\"{:.0}\" font-weight=\"bold\">processes</text>",
        lane_top - 4.0
    );
    for (i, lane) in t.lanes.iter().enumerate() {
        let y = lane_top + i as f64 * LANE_H;
        let odd = if i % 2 == 1 { " odd" } else { "" };
        let _ = writeln!(
            out,
            "<g class=\"lane\" data-node=\"{n}\"><rect class=\"lane-bg{odd}\" x=\"0\" y=\"{y:.0}\" width=\"{WIDTH}\" height=\"{LANE_H}\" />\
             <text class=\"lane-label\" x=\"4\" y=\"{ty:.0}\">n{n}</text></g>",
            n = lane.node,
            ty = y + 18.0
        );
    }
    let _ = writeln!(
        out,
        "<g id=\"axis\" class=\"axis\"></g>\n<g id=\"content\" clip-path=\"url(#plot)\"></g>\n</svg>"
    );
    let _ = writeln!(
        out,
        "<script type=\"application/json\" id=\"data\">{}</script>",
        data::pack(t, runs, focus(t))
    );
}

/// One failing seed's line in a sweep's index page.
pub struct IndexEntry {
    pub scenario: String,
    pub profile: String,
    pub seed: u64,
    /// The page's file name, relative to the index.
    pub file: String,
    pub properties: Vec<String>,
    pub witness: String,
    pub reproduce: String,
}

/// The file name of a failing seed's page in a sweep's directory.
pub fn page_name(scenario: &str, profile: &str, seed: u64) -> String {
    let safe = |s: &str| -> String {
        s.chars().map(|c| if c.is_ascii_alphanumeric() || c == '-' || c == '_' { c } else { '_' }).collect()
    };
    format!("{}-{}-{seed}.html", safe(scenario), safe(profile))
}

/// The index of a sweep's pages: one row per failing seed with its witness sentence.
pub fn index_page(title: &str, entries: &[IndexEntry], omitted: usize) -> String {
    let mut out = String::new();
    let _ = write!(
        out,
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\" />\n<title>{t}</title>\n<style>\n{CSS}</style>\n</head>\n<body>\n<h1>{t}</h1>\n",
        t = esc(title)
    );
    let _ = writeln!(out, "<p class=\"meta\">{} failing seed(s) with a page.</p>", entries.len());
    let _ = writeln!(
        out,
        "<table class=\"index\"><tr><th>scenario</th><th>profile</th><th>seed</th><th>properties</th><th>witness</th><th>reproduce</th></tr>"
    );
    for e in entries {
        let _ = writeln!(
            out,
            "<tr><td>{}</td><td>{}</td><td><a href=\"{}\">{}</a></td><td>{}</td><td>{}</td><td><code>{}</code></td></tr>",
            esc(&e.scenario),
            esc(&e.profile),
            esc(&e.file),
            e.seed,
            esc(&e.properties.join(", ")),
            esc(&e.witness),
            esc(&e.reproduce)
        );
    }
    let _ = writeln!(out, "</table>");
    if omitted > 0 {
        let _ = writeln!(
            out,
            "<p class=\"meta\">{omitted} more failing seed(s) without a page (over the page limit).</p>"
        );
    }
    let _ = writeln!(out, "</body>\n</html>");
    out
}
