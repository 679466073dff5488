//! `fencesim conformance [--store CMD]`: rulvar's conformance checks (store/src/conformance,
//! the same ids) over a foreign store, each check on a fresh database file with as many
//! child processes as it opens instances; or, without `--store`, over the Rust store.
//!
//! The checks run on one thread with a manual clock (no madsim runtime): the clock each
//! check sets reaches the child as `now_ms`, and the interleave checks' hook (a takeover by
//! instance B inside instance A's call) fires when A's child writes its `after_check` hook
//! line. Exit codes: 0 every check passed, 1 a check failed, 2 a harness error (a child
//! fault, an unknown check id). Every database file and child is gone when it returns.

use std::cell::Cell;
use std::path::{Path, PathBuf};
use std::rc::Rc;
use std::sync::Arc;

use store::conformance::{self, Instance, Opener, SqliteOpener, ALL_CHECKS};
use store::{Env, Profile, ProfileName, StoreError};

use super::{ForeignOptions, ForeignSpec, ForeignStore, ForeignTranscripts};

/// Foreign instances over one database file: each `open` starts one more child.
pub struct ForeignOpener {
    pub spec: Arc<ForeignSpec>,
    pub db: PathBuf,
    opened: Cell<u32>,
}

impl ForeignOpener {
    pub fn new(spec: Arc<ForeignSpec>, db: PathBuf) -> ForeignOpener {
        ForeignOpener { spec, db, opened: Cell::new(0) }
    }
}

impl Opener for ForeignOpener {
    type Store = ForeignStore;
    type Blobs = ForeignTranscripts;
    async fn open(
        &self,
        ttl_ms: i64,
        env: Rc<dyn Env>,
    ) -> Result<Instance<ForeignStore, ForeignTranscripts>, StoreError> {
        let n = self.opened.get();
        self.opened.set(n + 1);
        let opts = ForeignOptions {
            spec: self.spec.clone(),
            db: self.db.clone(),
            ttl_ms,
            page_size: None,
            synchronous: "off",
            label: format!("instance {}", (b'A' + (n % 26) as u8) as char),
        };
        let store = ForeignStore::open(opts, env).await?;
        let blobs = store.transcripts();
        Ok(Instance { store, blobs })
    }
}

/// One check's result.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Verdict {
    Pass,
    Fail(String),
    Harness(String),
}

fn fresh_db(dir: &Path, n: usize) -> PathBuf {
    dir.join(format!("fencesim-conformance-{}-{n}.db", std::process::id()))
}

/// Run the checks (`ids` empty: all) over `spec`, or the Rust store when `spec` is `None`.
pub fn run_checks(spec: Option<Arc<ForeignSpec>>, ids: &[String]) -> Result<Vec<(String, Verdict)>, String> {
    let wanted: Vec<&str> = if ids.is_empty() {
        ALL_CHECKS.to_vec()
    } else {
        let mut v = Vec::new();
        for id in ids {
            let known = ALL_CHECKS
                .iter()
                .find(|c| **c == id.as_str())
                .ok_or_else(|| format!("unknown check id {id:?}; known ids: {}", ALL_CHECKS.join(", ")))?;
            v.push(*known);
        }
        v
    };
    let dir = if Path::new("/dev/shm").is_dir() { PathBuf::from("/dev/shm") } else { std::env::temp_dir() };
    let mut out = Vec::new();
    for (n, id) in wanted.iter().enumerate() {
        let db = fresh_db(&dir, n);
        // Removed after the check, or by the Ctrl-C / SIGTERM handler if it does not end.
        let db_guard = crate::interrupt::track_db(&db)?;
        crate::interrupt::remove_db_files(&db);
        let _ = super::take_fault();
        let result = match &spec {
            Some(spec) => {
                let opener = ForeignOpener::new(spec.clone(), db.clone());
                futures::executor::block_on(conformance::run(id, &opener))
            }
            None => {
                let opener = SqliteOpener::new(db.clone(), Profile::of(ProfileName::Current));
                futures::executor::block_on(conformance::run(id, &opener))
            }
        };
        // Every instance (and its child) was dropped with the check's future.
        drop(db_guard);
        let verdict = match (super::take_fault(), result) {
            (Some(fault), _) => Verdict::Harness(fault),
            (None, Ok(())) => Verdict::Pass,
            (None, Err(f)) => Verdict::Fail(f.message),
        };
        out.push((id.to_string(), verdict));
    }
    Ok(out)
}

/// The subcommand: print one line per check and return the exit code.
pub fn main(spec: Option<Arc<ForeignSpec>>, ids: &[String]) -> i32 {
    let results = match run_checks(spec.clone(), ids) {
        _ if crate::interrupt::requested() => return 130, // the signal handler exits
        Ok(r) => r,
        Err(e) => {
            eprintln!("error: {e}");
            return 2;
        }
    };
    match &spec {
        Some(s) => println!("store: {}", super::describe(s)),
        None => println!("store: the Rust SqliteStore (profile current)"),
    }
    let (mut failed, mut harness) = (0, 0);
    for (id, v) in &results {
        match v {
            Verdict::Pass => println!("  ok    {id}"),
            Verdict::Fail(m) => {
                failed += 1;
                println!("  FAIL  {id}: {m}");
            }
            Verdict::Harness(m) => {
                harness += 1;
                println!("  ERROR {id}: harness error: {m}");
            }
        }
    }
    println!(
        "{} checks: {} passed, {failed} failed, {harness} harness errors",
        results.len(),
        results.len() - failed - harness
    );
    if harness > 0 {
        2
    } else {
        i32::from(failed > 0)
    }
}
