//! A sweep's pages (`fencesim sweep --html-dir DIR`): one page per failing seed, named by
//! scenario, profile and seed, and an `index.html` listing them with their witness
//! sentences. Each failing seed is run again to draw it: a run is a function of its
//! (scenario, profile, seed), so the page shows exactly the run the sweep judged.

use std::path::Path;

use store::ProfileName;

use super::{index_page, page, page_name, IndexEntry};
use crate::runner::execute;
use crate::sweep::SweepReport;
use crate::world::Scenario;

/// What [`write`] wrote.
#[derive(Debug, Default)]
pub struct Written {
    pub pages: usize,
    pub omitted: usize,
}

/// Write up to `max_pages` pages for the failing seeds of `reports` (each with the
/// scenario it swept) and the index into `dir` (created if missing).
pub fn write(
    dir: &Path,
    reports: &[(&'static dyn Scenario, &SweepReport)],
    max_pages: usize,
) -> Result<Written, String> {
    std::fs::create_dir_all(dir).map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
    let mut entries = Vec::new();
    let mut omitted = 0;
    for (scenario, r) in reports {
        let profile: ProfileName = r.profile.parse().map_err(|e: store::StoreError| e.to_string())?;
        for f in &r.failures {
            if entries.len() >= max_pages {
                omitted += 1;
                continue;
            }
            let out = execute(*scenario, profile, f.seed, None, None)?;
            let file = page_name(&r.scenario, &r.profile, f.seed);
            let path = dir.join(&file);
            std::fs::write(&path, page(&out.history, &out.report, None))
                .map_err(|e| format!("cannot write {}: {e}", path.display()))?;
            entries.push(IndexEntry {
                scenario: r.scenario.clone(),
                profile: r.profile.clone(),
                seed: f.seed,
                file,
                properties: f.properties.clone(),
                witness: f.witness.clone(),
                reproduce: f.reproduce.clone(),
            });
        }
    }
    let title = match reports {
        [(_, r)] => format!(
            "fencesim sweep {} profile={} seeds {}..{}",
            r.scenario, r.profile, r.range.start, r.range.end
        ),
        _ => "fencesim sweep".to_string(),
    };
    let index = dir.join("index.html");
    std::fs::write(&index, index_page(&title, &entries, omitted))
        .map_err(|e| format!("cannot write {}: {e}", index.display()))?;
    Ok(Written { pages: entries.len(), omitted })
}
