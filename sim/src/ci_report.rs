//! Reports CI systems read: JUnit XML (`--junit FILE`) and a Markdown job summary
//! (`--summary-md FILE`, for `$GITHUB_STEP_SUMMARY`), rendered from the sweep and findings
//! reports that already exist.
//!
//! Shape: one `<testcase>` per scenario and profile (per finding row for `findings`), one
//! `<failure>` element per failing seed carrying the witness sentence and the reproduce
//! command (and one per coverage goal the sweep fell short of, `type="coverage_shortfall"`,
//! since that fails the sweep too). The counts agree: `tests` is the number of test cases, `failures` the number
//! of test cases with at least one failure element, on `<testsuite>` and `<testsuites>`
//! alike; `errors` and `skipped` are 0. No timings (a report derives from its inputs only).

use std::fmt::Write as _;

use crate::findings::FindingsReport;
use crate::sweep::SweepReport;

/// One failing seed (or one failed claim) of a test case.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CaseFailure {
    pub seed: Option<u64>,
    /// The properties that failed, comma-separated (the failure's `type`).
    pub kind: String,
    pub witness: String,
    pub reproduce: String,
}

impl CaseFailure {
    /// Whether this is a coverage shortfall rather than a failing seed or claim.
    pub fn is_shortfall(&self) -> bool {
        self.kind == "coverage_shortfall"
    }
}

/// One test case: a scenario under a profile over a seed range.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Case {
    pub scenario: String,
    pub profile: String,
    /// The test case's name (`soak profile=current seeds 0..100`).
    pub name: String,
    pub seeds: u64,
    /// Coverage goals the sweep never met.
    pub shortfalls: Vec<String>,
    pub failures: Vec<CaseFailure>,
    /// A line for `<system-out>` and the summary (a finding's verdict, ...).
    pub note: Option<String>,
    /// A sweep's abstract-state coverage for the summary: seen, of an estimated reachable
    /// (`richness`), e.g. `471 of ~519 (496-562)`.
    pub states: Option<String>,
}

/// The coverage goals a sweep fell short of (the report's `goals_unmet`), each with how
/// many seeds met it of how many its scenario requires.
pub fn shortfalls(r: &SweepReport) -> Vec<String> {
    r.goals_unmet
        .iter()
        .map(|name| match r.goals.get(name) {
            Some(g) => format!("{name} (met in {} of {} required seeds)", g.met_seeds, g.required),
            None => name.clone(),
        })
        .collect()
}

/// A sweep's states seen, of the estimated reachable and its interval (none for no runs).
fn states_cell(e: &crate::richness::Richness) -> Option<String> {
    (e.runs > 0).then(|| {
        format!("{} of ~{:.0} ({:.0}-{:.0})", e.observed, e.estimated, e.estimated_low, e.estimated_high)
    })
}

/// One case per sweep report (one scenario under one profile).
pub fn from_sweeps(reports: &[SweepReport]) -> Vec<Case> {
    reports
        .iter()
        .map(|r| {
            let mut failures: Vec<CaseFailure> = r
                .failures
                .iter()
                .map(|f| CaseFailure {
                    seed: Some(f.seed),
                    kind: f.properties.join(","),
                    witness: f.witness.clone(),
                    reproduce: f.reproduce.clone(),
                })
                .collect();
            // A coverage shortfall fails the sweep (exit 3), so it fails the test case too.
            failures.extend(shortfalls(r).into_iter().map(|goal| CaseFailure {
                seed: None,
                kind: "coverage_shortfall".into(),
                witness: format!("coverage shortfall: {goal}"),
                reproduce: format!(
                    "fencesim sweep --scenario {} --profile {} --seeds {}..{}",
                    r.scenario, r.profile, r.range.start, r.range.end
                ),
            }));
            failures.extend(r.nondeterministic.iter().map(|&seed| CaseFailure {
                seed: Some(seed),
                kind: "nondeterministic".into(),
                witness: format!("seed {seed} gave two different trace hashes in two runs"),
                reproduce: format!(
                    "fencesim sweep --scenario {} --profile {} --seeds {seed}..{} --check-determinism",
                    r.scenario,
                    r.profile,
                    seed + 1
                ),
            }));
            Case {
                scenario: r.scenario.clone(),
                profile: r.profile.clone(),
                name: format!(
                    "{} profile={} seeds {}..{}",
                    r.scenario, r.profile, r.range.start, r.range.end
                ),
                seeds: r.seeds_run,
                shortfalls: shortfalls(r),
                failures,
                note: None,
                states: states_cell(&r.states_estimate),
            }
        })
        .collect()
}

/// The findings table as cases: each finding row passes when its flaw was caught, and
/// each scenario swept under `current` passes when no seed failed, each guided search of
/// `current` when it found nothing. `witness` gives the
/// witness sentence of a failing `current` seed (the findings report keeps only its seed).
pub fn from_findings(r: &FindingsReport, witness: &dyn Fn(&str, u64) -> Option<String>) -> Vec<Case> {
    let mut cases = Vec::new();
    for f in &r.findings {
        let mut failures = Vec::new();
        if f.caught && !f.key_points_never_fired.is_empty() {
            failures.push(CaseFailure {
                seed: None,
                kind: "key_points_never_fired".into(),
                witness: format!(
                    "finding {}: key fault points of {} never fired in its current sweep: {}",
                    f.id,
                    f.scenario,
                    f.key_points_never_fired.join(", ")
                ),
                reproduce: format!("fencesim findings --rows {}", f.id),
            });
        }
        let note = match (f.caught, f.first_failing_seed) {
            (true, Some(seed)) => Some(format!(
                "caught by {} at seed {seed} ({} seed(s) needed); reproduce: fencesim run --scenario {} --profile {} --seed {seed}",
                f.property.as_deref().unwrap_or("?"),
                f.seeds_needed.unwrap_or(0),
                f.scenario,
                f.profile
            )),
            _ => {
                failures.push(CaseFailure {
                    seed: None,
                    kind: "not_caught".into(),
                    witness: format!(
                        "finding {} was not caught by {} under {}: {}",
                        f.id,
                        f.scenario,
                        f.profile,
                        f.reason.as_deref().unwrap_or("no failing seed in the searched range")
                    ),
                    reproduce: format!("fencesim findings --rows {}", f.id),
                });
                None
            }
        };
        cases.push(Case {
            scenario: f.scenario.clone(),
            profile: f.profile.clone(),
            name: format!("finding {} ({} profile={})", f.id, f.scenario, f.profile),
            seeds: f.seeds_needed.unwrap_or(0),
            shortfalls: f.key_points_never_fired.clone(),
            failures,
            note,
            states: None,
        });
    }
    for s in &r.current_clean.scenarios {
        let mut failures: Vec<CaseFailure> = s
            .failing_seeds
            .iter()
            .map(|&seed| CaseFailure {
                seed: Some(seed),
                kind: "failed".into(),
                witness: witness(&s.scenario, seed)
                    .unwrap_or_else(|| format!("seed {seed} failed under current")),
                reproduce: format!("fencesim run --scenario {} --profile current --seed {seed}", s.scenario),
            })
            .collect();
        failures.extend(s.nondeterministic.iter().map(|&seed| CaseFailure {
            seed: Some(seed),
            kind: "nondeterministic".into(),
            witness: format!("seed {seed} gave two different trace hashes in two runs"),
            reproduce: format!(
                "fencesim sweep --scenario {} --profile current --seeds {seed}..{} --check-determinism",
                s.scenario,
                seed + 1
            ),
        }));
        // What `findings` counts against a clean sweep besides failing seeds: goals short of
        // their share and key fault points that never fired.
        let mut shortfalls: Vec<String> = s
            .goals_unmet
            .iter()
            .map(|name| match s.goals.get(name) {
                Some(g) => format!("{name} (met in {} of {} required seeds)", g.met_seeds, g.required),
                None => name.clone(),
            })
            .collect();
        shortfalls
            .extend(s.key_points.iter().filter(|k| k.fired == 0).map(|k| format!("{} never fired", k.point)));
        failures.extend(shortfalls.iter().map(|goal| CaseFailure {
            seed: None,
            kind: "coverage_shortfall".into(),
            witness: format!("coverage shortfall: {goal}"),
            reproduce: format!(
                "fencesim sweep --scenario {} --profile current --seeds 0..{}",
                s.scenario, s.seeds
            ),
        }));
        cases.push(Case {
            scenario: s.scenario.clone(),
            profile: "current".into(),
            name: format!("{} profile=current seeds 0..{}", s.scenario, s.seeds),
            seeds: s.seeds,
            shortfalls,
            failures,
            note: None,
            states: None,
        });
    }
    for e in &r.current_clean.explore {
        cases.push(Case {
            scenario: e.scenario.clone(),
            profile: "current".into(),
            name: format!("explore {} profile=current search seed {} runs {}", e.scenario, e.seed, e.runs),
            seeds: e.runs,
            shortfalls: Vec::new(),
            failures: e
                .failures
                .iter()
                .map(|f| CaseFailure {
                    seed: Some(f.seed),
                    kind: "failed".into(),
                    witness: format!("run {} [{}]: {}", f.run, f.properties.join(", "), f.witness),
                    reproduce: f.reproduce.clone(),
                })
                .collect(),
            note: Some(format!(
                "{} abstract states (the seed sweep: {})",
                e.states_reached, e.sweep_states_reached
            )),
            states: None,
        });
    }
    cases
}

/// Escape for XML text and attributes (control characters other than tab and newline,
/// which XML 1.0 forbids, become spaces).
pub fn xml_esc(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for ch in s.chars() {
        match ch {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            c if (c as u32) < 0x20 && c != '\n' && c != '\t' => out.push(' '),
            c => out.push(c),
        }
    }
    out
}

/// The JUnit XML document: one `<testsuite>` named `suite`.
pub fn junit(suite: &str, cases: &[Case]) -> String {
    let tests = cases.len();
    let failures = cases.iter().filter(|c| !c.failures.is_empty()).count();
    let mut out = String::from("<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n");
    let _ = writeln!(
        out,
        "<testsuites name=\"fencesim\" tests=\"{tests}\" failures=\"{failures}\" errors=\"0\" skipped=\"0\">"
    );
    let _ = writeln!(
        out,
        "  <testsuite name=\"{}\" tests=\"{tests}\" failures=\"{failures}\" errors=\"0\" skipped=\"0\">",
        xml_esc(suite)
    );
    for c in cases {
        let _ = writeln!(
            out,
            "    <testcase classname=\"fencesim.{}\" name=\"{}\">",
            xml_esc(&c.scenario),
            xml_esc(&c.name)
        );
        let _ = writeln!(out, "      <properties>");
        let _ = writeln!(out, "        <property name=\"profile\" value=\"{}\" />", xml_esc(&c.profile));
        let _ = writeln!(out, "        <property name=\"seeds\" value=\"{}\" />", c.seeds);
        let failing = c.failures.iter().filter(|f| !f.is_shortfall()).count();
        let _ = writeln!(out, "        <property name=\"failing_seeds\" value=\"{failing}\" />");
        for s in &c.shortfalls {
            let _ =
                writeln!(out, "        <property name=\"coverage_shortfall\" value=\"{}\" />", xml_esc(s));
        }
        let _ = writeln!(out, "      </properties>");
        for f in &c.failures {
            let head = match f.seed {
                Some(seed) => format!("seed {seed}: {}", f.witness),
                None => f.witness.clone(),
            };
            let _ = writeln!(
                out,
                "      <failure type=\"{}\" message=\"{}\">{}\nreproduce: {}</failure>",
                xml_esc(&f.kind),
                xml_esc(&head),
                xml_esc(&head),
                xml_esc(&f.reproduce)
            );
        }
        if let Some(n) = &c.note {
            let _ = writeln!(out, "      <system-out>{}</system-out>", xml_esc(n));
        }
        let _ = writeln!(out, "    </testcase>");
    }
    let _ = writeln!(out, "  </testsuite>");
    let _ = writeln!(out, "</testsuites>");
    out
}

fn md_cell(s: &str) -> String {
    s.replace('|', "\\|").replace('\n', " ")
}

/// How many reproduce commands the summary lists per case, and failing seeds overall.
const REPRO_PER_CASE: usize = 3;
const DETAILS_MAX: usize = 20;

/// The Markdown job summary: a table of scenario, profile, seeds, failures, coverage
/// shortfalls and reproduce commands, then the first failing seeds' witness sentences.
pub fn summary_md(title: &str, cases: &[Case]) -> String {
    let mut out = String::new();
    let failing = cases.iter().filter(|c| !c.failures.is_empty()).count();
    let _ = writeln!(out, "## {}\n", md_cell(title));
    let _ = writeln!(
        out,
        "{} test case(s), {failing} failing, {} failing seed(s) in all.\n",
        cases.len(),
        cases.iter().flat_map(|c| &c.failures).filter(|f| !f.is_shortfall()).count()
    );
    let _ = writeln!(
        out,
        "| scenario | profile | seeds | failures | coverage shortfalls | abstract states (seen of ~reachable) | reproduce |"
    );
    let _ = writeln!(out, "|---|---|---:|---:|---|---|---|");
    for c in cases {
        let short = if c.shortfalls.is_empty() {
            "0".to_string()
        } else {
            format!("{} ({})", c.shortfalls.len(), c.shortfalls.join(", "))
        };
        let failed: Vec<&CaseFailure> = c.failures.iter().filter(|f| !f.is_shortfall()).collect();
        let mut repro: Vec<String> =
            failed.iter().take(REPRO_PER_CASE).map(|f| format!("`{}`", f.reproduce)).collect();
        if failed.len() > REPRO_PER_CASE {
            repro.push(format!("(+{} more)", failed.len() - REPRO_PER_CASE));
        }
        let _ = writeln!(
            out,
            "| {} | {} | {} | {} | {} | {} | {} |",
            md_cell(&c.scenario),
            md_cell(&c.profile),
            c.seeds,
            failed.len(),
            md_cell(&short),
            md_cell(c.states.as_deref().unwrap_or("-")),
            md_cell(&repro.join("<br>"))
        );
    }
    let all: Vec<(&Case, &CaseFailure)> = cases
        .iter()
        .flat_map(|c| c.failures.iter().filter(|f| !f.is_shortfall()).map(move |f| (c, f)))
        .collect();
    if !all.is_empty() {
        let _ = writeln!(out, "\n### Failing seeds\n");
        for (c, f) in all.iter().take(DETAILS_MAX) {
            let seed = f.seed.map(|s| format!(" seed {s}")).unwrap_or_default();
            let _ = writeln!(
                out,
                "- **{} {}{seed}** ({}): {}  \n  `{}`",
                md_cell(&c.scenario),
                md_cell(&c.profile),
                md_cell(&f.kind),
                md_cell(&f.witness),
                f.reproduce
            );
        }
        if all.len() > DETAILS_MAX {
            let _ = writeln!(out, "- ... and {} more", all.len() - DETAILS_MAX);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn case(failures: usize) -> Case {
        Case {
            scenario: "soak".into(),
            profile: "v1_44_0".into(),
            name: "soak profile=v1_44_0 seeds 0..10".into(),
            seeds: 10,
            shortfalls: vec!["busy_met".into()],
            failures: (0..failures)
                .map(|i| CaseFailure {
                    seed: Some(i as u64),
                    kind: "no_stale_accept".into(),
                    witness: format!("w{i} <&> \"q\" | pipe"),
                    reproduce: format!("fencesim run --scenario soak --profile v1_44_0 --seed {i}"),
                })
                .collect(),
            note: None,
            states: None,
        }
    }

    #[test]
    fn junit_counts_cases_and_failing_cases() {
        let x = junit("sweep", &[case(3), case(0)]);
        assert!(x.contains("<testsuites name=\"fencesim\" tests=\"2\" failures=\"1\""), "{x}");
        assert_eq!(x.matches("<failure ").count(), 3);
        assert!(x.contains("w0 &lt;&amp;&gt; &quot;q&quot;"), "{x}");
        assert!(!x.contains("<&>"));
    }

    #[test]
    fn summary_escapes_pipes_and_caps_reproduce_commands() {
        let s = summary_md("sweep", &[case(5)]);
        assert!(s.contains("| soak | v1_44_0 | 10 | 5 | 1 (busy_met) |"), "{s}");
        assert!(s.contains("(+2 more)"), "{s}");
        assert!(s.contains("\\| pipe"), "{s}");
        assert!(!s.contains(" | pipe"), "{s}");
    }

    #[test]
    fn a_sweeps_state_coverage_reaches_the_summary_and_a_case_without_it_shows_a_dash() {
        let est = crate::richness::Richness::from_counts([1, 1, 1, 2, 2, 9, 9], 5000);
        let cell = states_cell(&est).expect("runs were counted");
        assert_eq!(
            cell,
            format!("7 of ~{:.0} ({:.0}-{:.0})", est.estimated, est.estimated_low, est.estimated_high)
        );
        assert!(est.estimated > 7.0 && est.estimated_high > est.estimated, "{est:?}");
        assert_eq!(states_cell(&crate::richness::Richness::default()), None);
        let mut c = case(0);
        c.states = Some(cell.clone());
        assert!(summary_md("sweep", &[c]).contains(&format!("| 1 (busy_met) | {cell} |")));
        assert!(summary_md("sweep", &[case(0)]).contains("| 1 (busy_met) | - |"));
    }
}
