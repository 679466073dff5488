//! `fencesim audit --db FILE [--repair] [--json]`: rulvar's `runs audit` over a real
//! database file, outside the simulator (a real process, the real clock).
//!
//! Promise: without `--repair` nothing is written. With it, each run the reconciler can
//! repair (`meta-behind`, `stranded`) is repaired under a brief lease of its own: acquire
//! (a live owner is skipped and reported), re-audit and rewrite only the meta status,
//! release. The catalog is then audited again. Exit 0 only when every run ends consistent;
//! 1 when something is left; 2 for bad input (a missing file, a file that is not a store).
//! A missing file is never created.

use std::path::Path;
use std::rc::Rc;

use serde::Serialize;
use store::engine::{audit_runs, repair_run, RepairAction, RunAudit, Verdict};
use store::{Env, SqliteOptions, SqliteStore, StoreError, SystemEnv};

/// The identity the audit's brief leases carry.
pub const AUDIT_OWNER: &str = "fencesim-audit";

/// What happened to one run.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "kebab-case")]
pub enum Action {
    /// Nothing to do (or no `--repair`).
    None,
    /// The meta status was rewritten.
    Repaired,
    /// A live owner holds the run: left alone.
    SkippedLiveOwner,
    /// The repair failed (the error, in words).
    Failed(String),
}

/// One run's line of the report.
#[derive(Clone, Debug, Serialize)]
pub struct AuditLine {
    pub before: RunAudit,
    pub action: Action,
    pub after: RunAudit,
}

/// The whole report.
#[derive(Clone, Debug, Serialize)]
pub struct AuditReport {
    pub db: String,
    pub repair: bool,
    pub runs: Vec<AuditLine>,
    /// Every run ends consistent.
    pub consistent: bool,
}

/// Audit (and optionally repair) the store at `db`.
pub fn audit(db: &Path, repair: bool) -> Result<AuditReport, StoreError> {
    if !db.is_file() {
        return Err(StoreError::Config(format!("no database file at {}", db.display())));
    }
    check_is_store(db)?;
    let env: Rc<dyn Env> = Rc::new(SystemEnv::default());
    futures::executor::block_on(async {
        let store = SqliteStore::open(SqliteOptions::new(db), env.clone()).await?;
        let before = audit_runs(&store).await?;
        let mut actions = Vec::with_capacity(before.len());
        for a in &before {
            let action = if repair && a.repair_to.is_some() {
                repair_one(&store, &env, &a.run_id).await?
            } else {
                Action::None
            };
            actions.push(action);
        }
        let after = audit_runs(&store).await?;
        let runs: Vec<AuditLine> = before
            .into_iter()
            .zip(actions)
            .map(|(b, action)| {
                let after = after.iter().find(|x| x.run_id == b.run_id).cloned().unwrap_or_else(|| b.clone());
                AuditLine { before: b, action, after }
            })
            .collect();
        let consistent = runs.iter().all(|l| l.after.verdict == Verdict::Consistent);
        Ok(AuditReport { db: db.display().to_string(), repair, runs, consistent })
    })
}

/// Refuse a file that is not a store (without writing to it).
fn check_is_store(db: &Path) -> Result<(), StoreError> {
    let not_a_store = |why: String| StoreError::Config(format!("{} is not a store: {why}", db.display()));
    let conn = rusqlite::Connection::open_with_flags(db, rusqlite::OpenFlags::SQLITE_OPEN_READ_ONLY)
        .map_err(|e| not_a_store(e.to_string()))?;
    let tables: i64 = conn
        .query_row(
            "SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name IN ('entries', 'meta', 'leases')",
            [],
            |r| r.get(0),
        )
        .map_err(|e| not_a_store(e.to_string()))?;
    if tables != 3 {
        return Err(not_a_store("it lacks the entries, meta and leases tables".into()));
    }
    Ok(())
}

async fn repair_one(store: &SqliteStore, env: &Rc<dyn Env>, run_id: &str) -> Result<Action, StoreError> {
    Ok(match repair_run(store, env, run_id, AUDIT_OWNER).await {
        Ok(RepairAction::Repaired) => Action::Repaired,
        Ok(RepairAction::None) => Action::None,
        Ok(RepairAction::SkippedLiveOwner) => Action::SkippedLiveOwner,
        Ok(RepairAction::Failed(e)) => Action::Failed(e),
        Err(e) => Action::Failed(e.to_string()),
    })
}

/// The human-readable table.
pub fn text(r: &AuditReport) -> String {
    use std::fmt::Write as _;
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{:<24} {:<11} {:<10} {:<10} {:<18} {:<11}  reason",
        "run", "verdict", "meta", "settle", "action", "after"
    );
    for l in &r.runs {
        let b = &l.before;
        let action = match &l.action {
            Action::None => "-".to_string(),
            Action::Repaired => format!("repaired -> {}", b.repair_to.map_or("-".into(), |s| s.to_string())),
            Action::SkippedLiveOwner => "skipped: live owner".to_string(),
            Action::Failed(e) => format!("failed: {e}"),
        };
        let _ = writeln!(
            out,
            "{:<24} {:<11} {:<10} {:<10} {:<18} {:<11}  {}",
            b.run_id,
            verdict(b.verdict),
            b.meta_status.map_or("-".into(), |s| s.to_string()),
            b.journal_settle.map_or("-".into(), |s| s.to_string()),
            action,
            verdict(l.after.verdict),
            b.reason
        );
    }
    let left = r.runs.iter().filter(|l| l.after.verdict != Verdict::Consistent).count();
    let _ = writeln!(
        out,
        "{} runs, {} repaired, {} not consistent{}",
        r.runs.len(),
        r.runs.iter().filter(|l| l.action == Action::Repaired).count(),
        left,
        if r.repair || left == 0 { "" } else { " (run with --repair to fix what can be fixed)" }
    );
    out
}

fn verdict(v: Verdict) -> &'static str {
    match v {
        Verdict::Consistent => "consistent",
        Verdict::MetaBehind => "meta-behind",
        Verdict::Stranded => "stranded",
        Verdict::Suspect => "suspect",
    }
}
