//! Ctrl-C (SIGINT) and SIGTERM: leave nothing behind.
//!
//! [`install`] starts one thread that waits for either signal (signal-hook's iterator: the
//! signal handler itself only writes to a pipe; everything below runs on that ordinary
//! thread). On a signal it:
//! 1. marks the process as exiting ([`requested`]): sweeps take no further seed, a run
//!    that has not registered its database yet refuses to start ([`track_db`]), and no
//!    child can be spawned any more (`crate::child::refuse_spawns`);
//! 2. SIGKILLs and reaps every live child process, foreign stores and real-mode children
//!    alike (`crate::child::kill_all_live`, the one registry of children);
//! 3. waits (at most [`SETTLE`] of wall time) for the runs in flight to end and remove
//!    their own database files: with their children dead, their calls fail at once;
//! 4. removes the database files of every run still registered, and
//! 5. exits with 128 + the signal's number: 130 for SIGINT, 143 for SIGTERM.
//!
//! A second signal while this runs is ignored; the cleanup is bounded by [`SETTLE`] plus
//! the reaping of killed children. Wall time is read here only to bound that wait: it
//! decides nothing a trace or a verdict shows.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::Duration;

/// How long the handler waits for the runs in flight to end on their own.
pub const SETTLE: Duration = Duration::from_secs(3);

static REQUESTED: AtomicBool = AtomicBool::new(false);
static INSTALLED: AtomicBool = AtomicBool::new(false);

struct Dbs {
    live: BTreeMap<u64, PathBuf>,
    next: u64,
}

static DBS: Mutex<Dbs> = Mutex::new(Dbs { live: BTreeMap::new(), next: 0 });

fn dbs() -> MutexGuard<'static, Dbs> {
    DBS.lock().unwrap_or_else(PoisonError::into_inner)
}

/// True once a SIGINT or SIGTERM arrived (the process is cleaning up to exit).
pub fn requested() -> bool {
    REQUESTED.load(Ordering::SeqCst)
}

/// Remove a database file and its SQLite companions (`-wal`, `-shm`, `-journal`).
pub fn remove_db_files(path: &Path) -> usize {
    let mut removed = 0;
    for suffix in ["", "-wal", "-shm", "-journal"] {
        let mut p = path.as_os_str().to_owned();
        p.push(suffix);
        if std::fs::remove_file(PathBuf::from(p)).is_ok() {
            removed += 1;
        }
    }
    removed
}

/// A run's database, registered for removal if the process is interrupted. Dropping it
/// removes the files and unregisters them.
pub struct DbGuard {
    token: u64,
    path: PathBuf,
}

impl Drop for DbGuard {
    fn drop(&mut self) {
        remove_db_files(&self.path);
        dbs().live.remove(&self.token);
    }
}

/// Register `path` (not created yet) as a run's database. Refused once the process is
/// exiting on a signal, so that no run creates a file the handler would not remove.
pub fn track_db(path: &Path) -> Result<DbGuard, String> {
    let mut d = dbs();
    if requested() {
        return Err("interrupted: fencesim is exiting on a signal".into());
    }
    d.next += 1;
    let token = d.next;
    d.live.insert(token, path.to_path_buf());
    Ok(DbGuard { token, path: path.to_path_buf() })
}

/// The command's exit code, unless a signal arrived: then the handler thread is cleaning
/// up and will exit the process with its own code, so this thread waits for it (a command
/// that ended because its children were killed must not exit first, with its own code,
/// before the files are gone).
pub fn exit_code(code: i32) -> i32 {
    if requested() {
        loop {
            std::thread::park();
        }
    }
    code
}

/// How many run databases are registered (runs in flight).
pub fn tracked_dbs() -> usize {
    dbs().live.len()
}

/// Install the SIGINT/SIGTERM handler thread (once per process; later calls do nothing).
pub fn install() -> Result<(), String> {
    use signal_hook::consts::{SIGINT, SIGTERM};
    if INSTALLED.swap(true, Ordering::SeqCst) {
        return Ok(());
    }
    let mut signals = signal_hook::iterator::Signals::new([SIGINT, SIGTERM])
        .map_err(|e| format!("cannot install the SIGINT/SIGTERM handler: {e}"))?;
    std::thread::Builder::new()
        .name("fencesim-signals".into())
        .spawn(move || {
            if let Some(sig) = signals.forever().next() {
                let code = cleanup(sig);
                std::process::exit(code);
            }
        })
        .map_err(|e| format!("cannot start the signal thread: {e}"))?;
    Ok(())
}

/// Everything the handler does before exiting; returns the exit code (128 + `sig`).
#[allow(clippy::disallowed_methods)] // the settle wait is bounded in wall time by definition
fn cleanup(sig: i32) -> i32 {
    {
        // Under the database registry's lock, so no run registers after this.
        let _d = dbs();
        REQUESTED.store(true, Ordering::SeqCst);
    }
    crate::child::refuse_spawns();
    let mut killed = crate::child::kill_all_live();
    let started = std::time::Instant::now();
    while tracked_dbs() > 0 && started.elapsed() < SETTLE {
        std::thread::sleep(Duration::from_millis(10));
    }
    // Whatever is left: children started in the meantime cannot exist (spawns are
    // refused), but a run that did not end within the wait still has its files.
    killed += crate::child::kill_all_live();
    let mut files = 0;
    let leftover: Vec<PathBuf> = std::mem::take(&mut dbs().live).into_values().collect();
    for path in &leftover {
        files += remove_db_files(path);
    }
    let name = if sig == signal_hook::consts::SIGINT { "SIGINT" } else { "SIGTERM" };
    eprintln!(
        "fencesim: {name}: killed {killed} child process(es), removed the database files of {} \
         unfinished run(s) ({files} file(s)); exiting {}",
        leftover.len(),
        128 + sig
    );
    128 + sig
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tracked_database_is_removed_with_its_companions_when_its_guard_drops() {
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("x.db");
        let guard = track_db(&db).unwrap();
        for suffix in ["", "-wal", "-shm"] {
            std::fs::write(format!("{}{suffix}", db.display()), b"x").unwrap();
        }
        assert!(tracked_dbs() >= 1);
        drop(guard);
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
    }
}
