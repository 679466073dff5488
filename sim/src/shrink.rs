//! Shrinking a failing plan: fewer nodes and a smaller workload where the scenario allows
//! (its `smaller_knobs`), then delta debugging (ddmin) over the plan's fault decisions, to
//! a plan that still fails the SAME property (and, when asked, the same operation). Every
//! candidate is a full deterministic run, so the result depends only on (scenario,
//! profile, plan, target): shrinking twice gives the same plan.
//!
//! Also the stable text form of a witness run (verdict, decisions, timeline) that `fencesim
//! shrink` prints and the regression snapshots store.

use std::fmt::Write as _;

use store::ProfileName;

use crate::history::History;
use crate::oracle::Violation;
use crate::plan::{Decision, Knobs, Plan};
use crate::report::{fmt_time, timeline_folded};
use crate::runner::{execute, Outcome};
use crate::world::Scenario;

/// What the shrunk plan must keep failing.
pub trait Target {
    fn holds(&self, violations: &[Violation]) -> bool;
    fn describe(&self) -> String;
    /// The timeline position (event index) by which the run has shown the target: the
    /// latest, over the target's patterns, of the first matching violation's call (`None`
    /// if a matching violation names no call).
    fn witnessed_by(&self, history: &History, violations: &[Violation]) -> Option<usize>;
}

/// The index of the last timeline event of `call`.
fn event_of(history: &History, call: usize) -> Option<usize> {
    history.events.iter().rposition(|e| e.call == Some(call))
}

fn first_at(history: &History, violations: &[Violation], pred: impl Fn(&Violation) -> bool) -> Option<usize> {
    let mut first: Option<usize> = None;
    for v in violations.iter().filter(|v| pred(v)) {
        let at = event_of(history, v.call?)?;
        first = Some(first.map_or(at, |f| f.min(at)));
    }
    first
}

/// A property, optionally narrowed to the offending call's operation.
#[derive(Clone, Debug)]
pub struct SameProperty {
    pub property: String,
    pub op: Option<String>,
}

impl Target for SameProperty {
    fn holds(&self, violations: &[Violation]) -> bool {
        violations
            .iter()
            .any(|v| v.property == self.property && self.op.as_deref().is_none_or(|op| v.op == Some(op)))
    }
    fn describe(&self) -> String {
        match &self.op {
            Some(op) => format!("{}@{op}", self.property),
            None => self.property.clone(),
        }
    }
    fn witnessed_by(&self, history: &History, violations: &[Violation]) -> Option<usize> {
        first_at(history, violations, |v| {
            v.property == self.property && self.op.as_deref().is_none_or(|op| v.op == Some(op))
        })
    }
}

impl Target for crate::findings::Finding {
    fn holds(&self, violations: &[Violation]) -> bool {
        self.caught_by(violations).is_some()
    }
    fn describe(&self) -> String {
        format!("finding {} ({})", self.id, self.matcher())
    }
    fn witnessed_by(&self, history: &History, violations: &[Violation]) -> Option<usize> {
        let mut latest = 0;
        for group in self.requires {
            latest = latest.max(first_at(history, violations, |v| group.iter().any(|p| p.matches(v)))?);
        }
        Some(latest)
    }
}

/// The result.
pub struct Shrunk {
    pub original: Plan,
    pub minimal: Plan,
    /// Candidate runs made.
    pub runs: u64,
    /// Whether the run budget ran out before ddmin finished (the plan is still failing,
    /// just possibly not 1-minimal).
    pub budget_exhausted: bool,
}

/// A plan with other knobs: decisions and clocks of removed nodes dropped.
pub fn with_knobs(plan: &Plan, knobs: Knobs) -> Plan {
    let mut p = plan.clone();
    p.decisions.retain(|d| d.node < knobs.nodes);
    p.clocks.truncate(knobs.nodes as usize);
    p.knobs = knobs;
    p
}

struct Tester<'a> {
    scenario: &'static dyn Scenario,
    profile: ProfileName,
    target: &'a dyn Target,
    runs: u64,
    max_runs: u64,
}

impl Tester<'_> {
    fn fails(&mut self, plan: &Plan) -> bool {
        if self.runs >= self.max_runs {
            return false;
        }
        self.runs += 1;
        match execute(self.scenario, self.profile, plan.seed, Some(plan.clone()), None) {
            Ok(out) => self.target.holds(&out.violations),
            Err(_) => false,
        }
    }
}

/// Shrink `plan` (which must fail `target`) with at most `max_runs` candidate runs.
pub fn shrink(
    scenario: &'static dyn Scenario,
    profile: ProfileName,
    plan: Plan,
    target: &dyn Target,
    max_runs: u64,
) -> Result<Shrunk, String> {
    let mut t = Tester { scenario, profile, target, runs: 0, max_runs: max_runs.max(1) };
    if !t.fails(&plan) {
        return Err(format!(
            "the plan of {} under {} seed {} does not fail {}; nothing to shrink",
            plan.scenario,
            profile,
            plan.seed,
            target.describe()
        ));
    }
    let original = plan.clone();
    let mut cur = plan;
    cur = shrink_knobs(&mut t, cur);
    cur.decisions = ddmin(&mut t, &cur, cur.decisions.clone());
    // Fewer decisions may let a smaller world fail too.
    cur = shrink_knobs(&mut t, cur);
    let budget_exhausted = t.runs >= t.max_runs;
    Ok(Shrunk { original, minimal: cur, runs: t.runs, budget_exhausted })
}

fn shrink_knobs(t: &mut Tester<'_>, mut cur: Plan) -> Plan {
    loop {
        let mut improved = false;
        for k in t.scenario.smaller_knobs(&cur.knobs) {
            let cand = with_knobs(&cur, k);
            if t.fails(&cand) {
                cur = cand;
                improved = true;
                break;
            }
        }
        if !improved {
            return cur;
        }
    }
}

/// Zeller's ddmin over the decisions: the result still fails and removing any single
/// decision from it would not (unless the budget ran out).
fn ddmin(t: &mut Tester<'_>, base: &Plan, mut items: Vec<Decision>) -> Vec<Decision> {
    let test = |t: &mut Tester<'_>, ds: &[Decision]| {
        let mut p = base.clone();
        p.decisions = ds.to_vec();
        t.fails(&p)
    };
    if test(t, &[]) {
        return Vec::new();
    }
    let mut n = 2usize;
    while items.len() >= 2 {
        let chunks = split(&items, n);
        let mut reduced = false;
        for c in &chunks {
            if test(t, c) {
                items = c.clone();
                n = 2;
                reduced = true;
                break;
            }
        }
        if !reduced && n > 2 {
            for i in 0..chunks.len() {
                let complement: Vec<Decision> =
                    chunks.iter().enumerate().filter(|(j, _)| *j != i).flat_map(|(_, c)| c.clone()).collect();
                if test(t, &complement) {
                    items = complement;
                    n = (n - 1).max(2);
                    reduced = true;
                    break;
                }
            }
        }
        if !reduced {
            if n >= items.len() {
                break;
            }
            n = (n * 2).min(items.len());
        }
        if t.runs >= t.max_runs {
            break;
        }
    }
    items
}

fn split(items: &[Decision], n: usize) -> Vec<Vec<Decision>> {
    let n = n.clamp(1, items.len().max(1));
    let mut out = Vec::with_capacity(n);
    let mut start = 0;
    for i in 0..n {
        let end = start + (items.len() - start) / (n - i);
        out.push(items[start..end].to_vec());
        start = end;
    }
    out
}

/// "n1 sqlite.append.after_check #3: stall 130ms".
pub fn decision_line(d: &Decision) -> String {
    format!("n{} {} #{}: {}", d.node, d.point, d.occurrence, d.action.describe())
}

/// The stable text of a witness run: scenario, profile, seed and knobs, the plan's
/// decisions, the violations (property, operation, witness), and the timeline up to the
/// instant the target was shown (the whole timeline when there is no target or no
/// instant). No paths, no wall times.
pub fn witness_text(out: &Outcome, target: Option<&dyn Target>) -> String {
    let mut s = String::new();
    let p = &out.plan;
    let cut = target.and_then(|t| t.witnessed_by(&out.history, &out.violations));
    let _ = writeln!(
        s,
        "{} profile={} seed={}: {} nodes, ttl {}ms, size {}",
        p.scenario, out.report.profile, p.seed, p.knobs.nodes, p.knobs.ttl_ms, p.knobs.size
    );
    let _ = writeln!(s, "decisions ({}):", p.decisions.len());
    for d in &p.decisions {
        let _ = writeln!(s, "  {}", decision_line(d));
    }
    let shown: Vec<&Violation> = out
        .violations
        .iter()
        .filter(|v| {
            cut.is_none_or(|c| v.call.and_then(|id| event_of(&out.history, id)).is_none_or(|at| at <= c))
        })
        .collect();
    let _ = writeln!(s, "violations ({}):", out.violations.len());
    for v in &shown {
        match v.op {
            Some(op) => {
                let _ = writeln!(s, "  {}@{op}: {}", v.property, v.witness);
            }
            None => {
                let _ = writeln!(s, "  {}: {}", v.property, v.witness);
            }
        }
    }
    if shown.len() < out.violations.len() {
        let _ = writeln!(s, "  ... and {} later", out.violations.len() - shown.len());
    }
    match cut {
        None => {
            let _ = writeln!(s, "timeline:");
        }
        Some(c) => {
            let at = out.history.events.get(c).map_or(0, |e| e.at_ns);
            let _ = writeln!(s, "timeline (up to the witness at {}):", fmt_time(at).trim_start());
        }
    }
    let kept = cut.map_or(out.history.events.len(), |c| c + 1);
    s.push_str(&timeline_folded(&out.history.events[..kept.min(out.history.events.len())]));
    let rest = out.history.events.len().saturating_sub(kept);
    if rest > 0 {
        let _ = writeln!(s, "  ... {rest} more events");
    }
    s
}
