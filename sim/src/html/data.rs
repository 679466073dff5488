//! The page's drawing data: the [`Timeline`] packed as one JSON object (rows of numbers and
//! indexes into one string table) that the page's script draws. A soak storm records tens
//! of thousands of calls; one SVG element per call written out in full would make its page
//! several megabytes, the packed rows keep it near one.
//!
//! Row layouts (the script in `page.js` reads the same positions):
//! - `calls`: `[t, node, incarnation, t - invoked, describe, seq, run, epoch, class,
//!   applied, order, store_ms, outcome, call id]`, strings as string-table indexes, absent
//!   values as `null`, `run` as an index into `runs` (or -1);
//! - `tenures`: `[run, epoch, owner, node, start, live spans [[from, to]], end, reason,
//!   expiries, renewals, grant call, foreign expiry moves]`;
//! - `gap`: `[from, to]`, where the lead witness's culprit lies outside its tenure, or null;
//! - `facts`: `[t, node, kind, text, run]`;
//! - `lanes`: `{node, crashes: [[t, words]], restarts: [[t, incarnation]], stalls: [[t0, t1, what]]}`.

use std::collections::BTreeMap;

use serde::Serialize;
use serde_json::{json, Value};

use super::model::{CallClass, Timeline};

/// Strings interned in first-use order.
#[derive(Default)]
struct Strings {
    list: Vec<String>,
    index: BTreeMap<String, usize>,
}

impl Strings {
    fn id(&mut self, s: &str) -> usize {
        if let Some(&i) = self.index.get(s) {
            return i;
        }
        let i = self.list.len();
        self.list.push(s.to_string());
        self.index.insert(s.to_string(), i);
        i
    }
}

#[derive(Serialize)]
struct Lane {
    node: u32,
    crashes: Vec<(u64, usize)>,
    restarts: Vec<(u64, u32)>,
    stalls: Vec<(u64, u64, usize)>,
}

pub const CLASSES: [CallClass; 5] =
    [CallClass::Applied, CallClass::Ok, CallClass::Refused, CallClass::Busy, CallClass::Unknown];

/// The drawing data of `t`, as the JSON text embedded in the page (with `</` escaped so
/// it cannot close its script element).
pub fn pack(t: &Timeline, runs: &[String], focus: Option<(u64, u64)>) -> String {
    let mut strings = Strings::default();
    let run_index = |r: &str| -> i64 { runs.iter().position(|x| x == r).map_or(-1, |i| i as i64) };
    let lanes: Vec<Lane> = t
        .lanes
        .iter()
        .map(|l| Lane {
            node: l.node,
            crashes: l.crashes.iter().map(|(at, w)| (*at, strings.id(w))).collect(),
            restarts: l.restarts.clone(),
            stalls: l.stalls.iter().map(|s| (s.start_ns, s.end_ns, strings.id(&s.what))).collect(),
        })
        .collect();
    let lead = t.lead();
    let culprit = lead.and_then(|w| w.culprit);
    let contradicted = lead.and_then(|w| w.tenure);
    let mut culprit_row = Value::Null;
    let calls: Vec<Value> = t
        .marks
        .iter()
        .enumerate()
        .map(|(i, m)| {
            if Some(m.call) == culprit {
                culprit_row = json!(i);
            }
            // The seq is its own field: one describe string serves every append of a run.
            let seq_suffix = m.describe.find(" seq=").map(|p| {
                let rest = &m.describe[p + 5..];
                let len = rest.find(' ').unwrap_or(rest.len());
                (p, len)
            });
            let (describe, seq) = match seq_suffix {
                Some((p, len)) => {
                    let seq: Option<u64> = m.describe[p + 5..p + 5 + len].parse().ok();
                    (format!("{}{}", &m.describe[..p], &m.describe[p + 5 + len..]), seq)
                }
                None => (m.describe.clone(), None),
            };
            json!([
                m.at_ns,
                m.node,
                m.incarnation,
                m.at_ns.saturating_sub(m.invoked_ns),
                strings.id(&describe),
                seq,
                run_index(&m.run_id),
                m.epoch,
                CLASSES.iter().position(|c| *c == m.class).unwrap_or(0),
                u8::from(m.applied),
                m.applied_order,
                m.store_ms,
                strings.id(&m.outcome),
                m.call
            ])
        })
        .collect();
    let tenures: Vec<Value> = t
        .tenures
        .iter()
        .map(|x| {
            json!([
                run_index(&x.run_id),
                x.epoch,
                strings.id(&x.owner),
                x.node.map_or(-1, i64::from),
                x.start_ns,
                x.spans().iter().map(|sp| [sp.0, sp.2]).collect::<Vec<_>>(),
                x.end_ns,
                strings.id(&x.end_reason),
                x.expiries,
                x.renewals,
                x.grant_call,
                x.foreign
            ])
        })
        .collect();
    let facts: Vec<Value> = t
        .facts
        .iter()
        .map(|f| json!([f.at_ns, f.node, strings.id(f.kind), strings.id(&f.text), run_index(&f.run_id)]))
        .collect();
    let violators: Vec<usize> = {
        let set: std::collections::BTreeSet<usize> = t.witnesses.iter().filter_map(|w| w.culprit).collect();
        set.into_iter().collect()
    };
    let data = json!({
        "end": t.end_ns,
        "runs": runs,
        "classes": CLASSES.iter().map(|c| c.as_str()).collect::<Vec<_>>(),
        "lanes": lanes,
        "calls": calls,
        "tenures": tenures,
        "facts": facts,
        "heal": t.heal_ns,
        "culprit": culprit_row,
        "contradicted": contradicted,
        "gap": lead.and_then(|w| w.outside).map(|o| [o.from, o.to]),
        "violators": violators,
        "focus": focus.map(|(a, b)| vec![a, b]),
        "strings": strings.list,
    });
    serde_json::to_string(&data).unwrap_or_else(|_| "{}".into()).replace("</", "<\\/")
}
