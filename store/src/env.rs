//! The one small environment a store runs in: a clock, a sleep, and the fault hook.
//!
//! The store never calls a runtime itself. The same store code runs inside madsim (the
//! simulator's `Env` reads the node's virtual clock, sleeps in virtual time and consults the
//! fault plan) and in a real OS process ([`SystemEnv`]: the wall clock, a blocking sleep and
//! no faults), and in-process tests drive interleavings through a hook of their own.
//!
//! The fault hook is called at every named [`FaultPoint`]. Returning `None` (the default,
//! and the only answer of a normal build) costs nothing; returning a future makes the store
//! await it at exactly that point: a yield, a stall, a takeover by another store, or a
//! crash report (`Err(Crash)`), after which the store rolls back and returns
//! `StoreError::Crashed`.

use std::future::Future;
use std::pin::Pin;
use std::time::Duration;

use crate::fault::FaultPoint;

/// A boxed, single-threaded future.
pub type LocalFuture<'a, T> = Pin<Box<dyn Future<Output = T> + 'a>>;

/// The hook's crash report: the process dies at this point.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Crash;

/// What the store tells the hook at a fault point.
#[derive(Clone, Copy, Debug)]
pub struct FaultSite<'a> {
    pub point: FaultPoint,
    /// The run the operation touches (for a blob, the ref's run), if any.
    pub run_id: Option<&'a str>,
    /// The epoch of the lease the operation carries, if any.
    pub epoch: Option<u64>,
}

/// Clock, sleep and fault hook.
pub trait Env {
    /// The store's clock in milliseconds (lease expiry is judged by it). rulvar's `now`.
    fn now_ms(&self) -> i64;
    /// A monotonic reading for deadlines (the boot retry), never affected by skew.
    fn monotonic(&self) -> Duration;
    /// Sleep in this environment's time.
    fn sleep(&self, duration: Duration) -> LocalFuture<'static, ()>;
    /// The fault hook; `None` means "carry on" and is the default.
    fn fault(&self, site: &FaultSite<'_>) -> Option<LocalFuture<'static, Result<(), Crash>>> {
        let _ = site;
        None
    }
}

/// The environment of a real process: wall clock, blocking sleep, no faults.
///
/// The sleep blocks the thread: real-mode callers are sequential single-task processes
/// (the real soak writer), so blocking is the honest translation of rulvar's
/// `Atomics.wait`.
#[derive(Clone, Debug)]
pub struct SystemEnv {
    start: std::time::Instant,
}

impl SystemEnv {
    #[allow(clippy::disallowed_methods)] // the real-process environment reads the real clock
    pub fn new() -> SystemEnv {
        SystemEnv { start: std::time::Instant::now() }
    }
}

impl Default for SystemEnv {
    fn default() -> SystemEnv {
        SystemEnv::new()
    }
}

impl Env for SystemEnv {
    #[allow(clippy::disallowed_methods)] // the real-process environment reads the real clock
    fn now_ms(&self) -> i64 {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_millis() as i64)
            .unwrap_or(0)
    }

    fn monotonic(&self) -> Duration {
        self.start.elapsed()
    }

    fn sleep(&self, duration: Duration) -> LocalFuture<'static, ()> {
        std::thread::sleep(duration);
        Box::pin(std::future::ready(()))
    }
}

/// A manual clock for in-process tests: time moves only when the test says so, and
/// `sleep` advances it instead of waiting. Clones share one clock.
#[derive(Clone, Debug, Default)]
pub struct ManualClock {
    now: std::rc::Rc<std::cell::Cell<i64>>,
}

impl ManualClock {
    pub fn starting_at(now_ms: i64) -> ManualClock {
        ManualClock { now: std::rc::Rc::new(std::cell::Cell::new(now_ms)) }
    }
    pub fn now_ms(&self) -> i64 {
        self.now.get()
    }
    pub fn advance(&self, ms: i64) {
        self.now.set(self.now.get() + ms);
    }
    pub fn set(&self, now_ms: i64) {
        self.now.set(now_ms);
    }
}

/// A test hook: called at every fault point with the site; may return a future to await.
pub type HookFn = dyn Fn(&FaultSite<'_>) -> Option<LocalFuture<'static, Result<(), Crash>>>;

/// An environment over a [`ManualClock`] with an optional fault hook: deterministic, no
/// runtime, no sleeps. Used by the conformance suite to drive interleavings in one process.
#[derive(Clone)]
pub struct ManualEnv {
    pub clock: ManualClock,
    hook: Option<std::rc::Rc<HookFn>>,
}

impl ManualEnv {
    pub fn new(clock: ManualClock) -> ManualEnv {
        ManualEnv { clock, hook: None }
    }
    pub fn with_hook(clock: ManualClock, hook: std::rc::Rc<HookFn>) -> ManualEnv {
        ManualEnv { clock, hook: Some(hook) }
    }
}

impl Env for ManualEnv {
    fn now_ms(&self) -> i64 {
        self.clock.now_ms()
    }
    fn monotonic(&self) -> Duration {
        Duration::from_millis(self.clock.now_ms().max(0) as u64)
    }
    fn sleep(&self, duration: Duration) -> LocalFuture<'static, ()> {
        self.clock.advance(duration.as_millis() as i64);
        Box::pin(std::future::ready(()))
    }
    fn fault(&self, site: &FaultSite<'_>) -> Option<LocalFuture<'static, Result<(), Crash>>> {
        self.hook.as_ref().and_then(|h| h(site))
    }
}
