//! Foreign stores: a store written in another language, in its own processes, driven under
//! the same seeds, fault plans and oracle as the Rust store (docs/foreign-stores.md).
//!
//! - `protocol`: the versioned JSON Lines protocol (the definition the driver enforces).
//! - `driver`: `ForeignStore`, the store SPI over one child process per simulated process.
//! - `any`: `AnyStore`, the one store type the recorder wraps (Rust or foreign).
//! - `conformance`: rulvar's conformance checks over foreign instances.
//! - `compare`: one seed over the Rust store and the foreign store, in one line.
//!
//! Which store a run uses: `--store CMD` sets the process-wide choice ([`set_global`]); a
//! test may override it on its own thread ([`with_store`]). Only the store scenarios
//! ([`STORE_SCENARIOS`]) accept a foreign store; the engine scenarios drive the Rust engine
//! model over the Rust store and refuse it as bad input.
//!
//! A child's fault is recorded per thread ([`record_fault`]) and turns the run into a
//! harness error (exit 2), never a verdict.

use std::cell::RefCell;
use std::sync::{Arc, RwLock};
use std::time::Duration;

pub mod any;
pub mod conformance;
pub mod driver;
pub mod protocol;

pub use any::{AnyStore, AnyTranscripts};
pub use driver::{ForeignOptions, ForeignStore, ForeignTranscripts};

/// The scenarios that exercise the store itself and run over a foreign store.
pub const STORE_SCENARIOS: &[&str] = &["soak", "f3-check-then-mutate", "boot-race", "tombstone", "edges"];

/// The default wall-clock guard on one reply (a hung child becomes a harness error).
pub const DEFAULT_GUARD: Duration = Duration::from_secs(5);

/// How to start a foreign store process.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ForeignSpec {
    /// The command as the user wrote it (named in reports and errors).
    pub command: String,
    /// The command split on whitespace: the program and its arguments.
    pub argv: Vec<String>,
    /// The wall-clock guard on each line the driver waits for.
    pub guard: Duration,
}

impl ForeignSpec {
    /// Split `command` on whitespace (no shell quoting: a path with spaces needs a wrapper
    /// script). Refuses an empty command or a zero guard.
    pub fn parse(command: &str, guard: Duration) -> Result<ForeignSpec, String> {
        let argv: Vec<String> = command.split_whitespace().map(str::to_string).collect();
        if argv.is_empty() {
            return Err("--store needs a command, e.g. \"python3 foreign/python/sqlite_store.py\"".into());
        }
        if guard.is_zero() {
            return Err("the child guard must be at least 1 ms".into());
        }
        Ok(ForeignSpec { command: command.trim().to_string(), argv, guard })
    }
}

static GLOBAL: RwLock<Option<Arc<ForeignSpec>>> = RwLock::new(None);
/// `findings --flawed-store`: the store the rows' searches run over.
static FLAWED: RwLock<Option<Arc<ForeignSpec>>> = RwLock::new(None);

thread_local! {
    static OVERRIDE: RefCell<Option<Option<Arc<ForeignSpec>>>> = const { RefCell::new(None) };
    static FAULT: RefCell<Option<String>> = const { RefCell::new(None) };
}

/// The last handshake seen by any thread, and per store command the last handshake its
/// children gave (`findings --flawed-store` runs two commands in one process).
static LAST_HELLO: std::sync::Mutex<Option<protocol::Hello>> = std::sync::Mutex::new(None);
static HELLO_BY_COMMAND: std::sync::Mutex<std::collections::BTreeMap<String, protocol::Hello>> =
    std::sync::Mutex::new(std::collections::BTreeMap::new());

/// The store a report was made over, as its JSON names it: the command and what the
/// command's children said in their handshake (absent when none completed one). Reports
/// over the built-in Rust store carry no such field.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct StoreName {
    pub command: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
}

impl StoreName {
    /// One line: `python-sqlite-reference 0.1.0 (`python3 ...`)`.
    pub fn describe(&self) -> String {
        match (&self.name, &self.version) {
            (Some(n), Some(v)) => format!("{n} {v} (`{}`)", self.command),
            _ => format!("`{}` (no handshake completed)", self.command),
        }
    }
}

/// Set the process-wide store choice (`None`: the Rust store).
pub fn set_global(spec: Option<ForeignSpec>) {
    if let Ok(mut g) = GLOBAL.write() {
        *g = spec.map(Arc::new);
    }
}

/// Set the store `findings` searches its rows over (`--flawed-store`).
pub fn set_flawed_global(spec: Option<ForeignSpec>) {
    if let Ok(mut g) = FLAWED.write() {
        *g = spec.map(Arc::new);
    }
}

/// `findings`: its clean sweeps are done; if a flawed store was given, the rows' searches
/// (and their generic comparison runs) run over it from now on.
pub fn switch_to_flawed() {
    let flawed = FLAWED.read().ok().and_then(|f| f.clone());
    if let (Some(f), Ok(mut g)) = (flawed, GLOBAL.write()) {
        *g = Some(f);
    }
}

/// Run `f` on this thread with `spec` as the store choice (`None`: the Rust store).
pub fn with_store<T>(spec: Option<ForeignSpec>, f: impl FnOnce() -> T) -> T {
    with_store_arc(spec.map(Arc::new), f)
}

/// As [`with_store`] with a shared spec (a sweep hands its caller's choice to its workers).
pub fn with_store_arc<T>(spec: Option<Arc<ForeignSpec>>, f: impl FnOnce() -> T) -> T {
    let before = OVERRIDE.with(|o| o.borrow_mut().replace(spec));
    let out = f();
    OVERRIDE.with(|o| *o.borrow_mut() = before);
    out
}

/// The store choice for a run on this thread.
pub fn active() -> Option<Arc<ForeignSpec>> {
    if let Some(choice) = OVERRIDE.with(|o| o.borrow().clone()) {
        return choice;
    }
    GLOBAL.read().ok().and_then(|g| g.clone())
}

/// Refuse a scenario that does not run over a foreign store.
pub fn check_scenario(name: &str) -> Result<(), String> {
    if STORE_SCENARIOS.contains(&name) {
        Ok(())
    } else {
        Err(format!(
            "scenario {name:?} drives the Rust engine model and cannot run over a foreign store; \
             --store works with {}",
            STORE_SCENARIOS.join(", ")
        ))
    }
}

/// Note a child's fault on this thread (the first one is kept).
pub fn record_fault(msg: String) {
    FAULT.with(|f| {
        let mut f = f.borrow_mut();
        if f.is_none() {
            *f = Some(msg);
        }
    });
}

/// Take this thread's recorded fault, if any.
pub fn take_fault() -> Option<String> {
    FAULT.with(|f| f.borrow_mut().take())
}

/// Remember the last handshake of `command`'s children (the report names the store).
pub fn note_hello(command: &str, h: protocol::Hello) {
    if let Ok(mut by) = HELLO_BY_COMMAND.lock() {
        if by.get(command) != Some(&h) {
            by.insert(command.to_string(), h.clone());
        }
    }
    if let Ok(mut l) = LAST_HELLO.lock() {
        *l = Some(h);
    }
}

/// The last handshake seen.
pub fn last_hello() -> Option<protocol::Hello> {
    LAST_HELLO.lock().ok().and_then(|l| l.clone())
}

/// The `--store` and `--store-guard-ms` options as a spec (`None` without `--store`).
pub fn cli_spec(store: Option<&str>, guard_ms: u64) -> Result<Option<ForeignSpec>, String> {
    store.map(|cmd| ForeignSpec::parse(cmd, Duration::from_millis(guard_ms))).transpose()
}

/// The store `spec` starts, named by its children's last handshake.
pub fn store_name(spec: &ForeignSpec) -> StoreName {
    let hello = HELLO_BY_COMMAND.lock().ok().and_then(|by| by.get(&spec.command).cloned());
    StoreName {
        command: spec.command.clone(),
        name: hello.as_ref().map(|h| h.store.clone()),
        version: hello.map(|h| h.version),
    }
}

/// The store of a run on this thread (`None`: the built-in Rust store).
pub fn active_name() -> Option<StoreName> {
    active().map(|s| store_name(&s))
}

/// One line naming the store under test: `python-sqlite-reference 0.1.0 (`python3 ...`)`.
pub fn describe(spec: &ForeignSpec) -> String {
    store_name(spec).describe()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn specs_split_on_whitespace_and_refuse_nothing() {
        let s = ForeignSpec::parse("  python3  store.py --flaw v1_44_0 ", DEFAULT_GUARD).unwrap();
        assert_eq!(s.argv, vec!["python3", "store.py", "--flaw", "v1_44_0"]);
        assert_eq!(s.command, "python3  store.py --flaw v1_44_0");
        assert!(ForeignSpec::parse("   ", DEFAULT_GUARD).is_err());
        assert!(ForeignSpec::parse("x", Duration::ZERO).is_err());
        assert!(check_scenario("soak").is_ok());
        assert!(check_scenario("queue").unwrap_err().contains("engine model"));
    }

    #[test]
    fn the_thread_override_wins_and_is_restored() {
        let spec = ForeignSpec::parse("x", DEFAULT_GUARD).unwrap();
        assert_eq!(with_store(Some(spec.clone()), || active().map(|s| s.command.clone())), Some("x".into()));
        assert_eq!(with_store(None, active), None);
    }
}
