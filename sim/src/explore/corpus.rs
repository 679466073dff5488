//! The explorer's corpus and its checkpoint: the plans that reached abstract states no
//! earlier run had reached, each with the states it reached and the (node, point,
//! occurrence) triples it reached while faults were on (what mutations aim at), and the
//! search's whole state after each folded batch. On disk (`--corpus DIR`): one
//! `entry-NNNNNN.json` per corpus entry and `explore.json`, the checkpoint; a restarted
//! explore loads both and continues exactly where the saved one stopped. A malformed file
//! is a typed error (bad input), never a panic.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use store::FaultPoint;

use crate::oracle::states::universe;
use crate::plan::Plan;

/// How far one node got at one point while faults were on.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReachedPoint {
    pub node: u32,
    pub point: String,
    /// Occurrences 1..=this were reached.
    pub occurrences: u32,
    /// How many of them the caller reached acting under a lease (absent in corpora saved
    /// before it was counted: read as all of them).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub under_lease: Option<u32>,
}

/// One corpus entry as saved.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SavedEntry {
    /// The run (1-based, over the whole search) that found it.
    pub run: u64,
    /// The states it reached that no earlier run had.
    pub new_states: u32,
    pub plan: Plan,
    /// Every state it reached, by name.
    pub states: Vec<String>,
    pub reached: Vec<ReachedPoint>,
}

/// One corpus entry in memory.
#[derive(Clone, Debug)]
pub struct Entry {
    pub run: u64,
    pub new_states: u32,
    pub plan: Plan,
    pub states: Vec<u16>,
    pub reached: Vec<(u32, FaultPoint, u32)>,
    /// Per `reached` triple: how many of its occurrences came under a lease.
    pub leased: Vec<u32>,
}

/// The reached triples of a run from its per-slot counts (`runner::Outcome::reached`).
pub fn reached_of(counts: &[u32]) -> Vec<(u32, FaultPoint, u32)> {
    let n = FaultPoint::ALL.len();
    counts
        .iter()
        .enumerate()
        .filter(|(_, &c)| c > 0)
        .map(|(i, &c)| ((i / n) as u32, FaultPoint::ALL[i % n], c))
        .collect()
}

impl Entry {
    pub fn to_saved(&self) -> SavedEntry {
        let names = universe();
        SavedEntry {
            run: self.run,
            new_states: self.new_states,
            plan: self.plan.clone(),
            states: self.states.iter().map(|&s| names[usize::from(s)].clone()).collect(),
            reached: self
                .reached
                .iter()
                .zip(&self.leased)
                .map(|(&(node, p, occurrences), &leased)| ReachedPoint {
                    node,
                    point: p.name().to_string(),
                    occurrences,
                    under_lease: Some(leased),
                })
                .collect(),
        }
    }

    pub fn from_saved(s: SavedEntry, what: &str) -> Result<Entry, String> {
        let index = state_index();
        let mut states = Vec::with_capacity(s.states.len());
        for name in &s.states {
            states.push(
                *index
                    .get(name.as_str())
                    .ok_or_else(|| format!("{what}: unknown abstract state {name:?}"))?,
            );
        }
        let mut reached = Vec::with_capacity(s.reached.len());
        let mut leased = Vec::with_capacity(s.reached.len());
        for r in &s.reached {
            let p = FaultPoint::from_name(&r.point)
                .ok_or_else(|| format!("{what}: unknown fault point {:?}", r.point))?;
            reached.push((r.node, p, r.occurrences));
            leased.push(r.under_lease.unwrap_or(r.occurrences).min(r.occurrences));
        }
        s.plan.table().map_err(|e| format!("{what}: {e}"))?;
        Ok(Entry { run: s.run, new_states: s.new_states, plan: s.plan, states, reached, leased })
    }
}

/// State name -> index in the universe.
pub fn state_index() -> BTreeMap<&'static str, u16> {
    universe().iter().enumerate().map(|(i, n)| (n.as_str(), i as u16)).collect()
}

/// The search's state after a folded batch: with the entries, everything the next batch
/// depends on, and everything the report says.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Checkpoint {
    pub scenario: String,
    pub profile: String,
    pub seed: u64,
    pub batches: u64,
    pub runs: u64,
    /// Entries `entry-000001.json` ..= `entry-{entries}.json` belong to the search.
    pub entries: u64,
    /// Per state reached, by name: the runs that reached it and the first run that did.
    pub hits: BTreeMap<String, u64>,
    pub first_run: BTreeMap<String, u64>,
    pub first_detection: BTreeMap<String, u64>,
    #[serde(default)]
    pub first_finding: BTreeMap<String, u64>,
    pub failures: Vec<super::ExploreFailure>,
    pub last_new_state: Option<String>,
    /// Runs only a quorum guard failed.
    #[serde(default)]
    pub vacuous: u64,
    /// Per candidate kind: its runs and yield (see [`super::KindStats`]).
    #[serde(default)]
    pub kinds: BTreeMap<String, super::KindStats>,
}

pub fn entry_path(dir: &Path, n: u64) -> PathBuf {
    dir.join(format!("entry-{n:06}.json"))
}

pub fn checkpoint_path(dir: &Path) -> PathBuf {
    dir.join("explore.json")
}

/// Write `text` to `path` through a temporary file, so an interrupted write never leaves
/// a half-written checkpoint behind.
pub fn write_atomic(path: &Path, text: &str) -> Result<(), String> {
    let tmp = path.with_extension("json.tmp");
    std::fs::write(&tmp, text).map_err(|e| format!("cannot write {}: {e}", tmp.display()))?;
    std::fs::rename(&tmp, path).map_err(|e| format!("cannot write {}: {e}", path.display()))
}

pub fn save_entry(dir: &Path, n: u64, e: &Entry) -> Result<(), String> {
    let text = serde_json::to_string_pretty(&e.to_saved()).map_err(|e| e.to_string())?;
    write_atomic(&entry_path(dir, n), &(text + "\n"))
}

/// Load a saved search: its checkpoint (if any) and its entries.
pub fn load(dir: &Path) -> Result<Option<(Checkpoint, Vec<Entry>)>, String> {
    let cp = checkpoint_path(dir);
    if !cp.exists() {
        return Ok(None);
    }
    let text = std::fs::read_to_string(&cp).map_err(|e| format!("cannot read {}: {e}", cp.display()))?;
    let checkpoint: Checkpoint = serde_json::from_str(&text)
        .map_err(|e| format!("malformed corpus checkpoint {}: {e}", cp.display()))?;
    let mut entries = Vec::new();
    for n in 1..=checkpoint.entries {
        let p = entry_path(dir, n);
        let what = format!("corpus entry {}", p.display());
        let text = std::fs::read_to_string(&p).map_err(|e| format!("cannot read {what}: {e}"))?;
        let saved: SavedEntry = serde_json::from_str(&text).map_err(|e| format!("malformed {what}: {e}"))?;
        entries.push(Entry::from_saved(saved, &what)?);
    }
    Ok(Some((checkpoint, entries)))
}
