//! Shared test fixtures for the engine tests: a counting world, a kill-switch store wrapper
//! (rulvar's kill-point Proxy), and journal helpers.
#![allow(dead_code)]

use std::cell::{Cell, RefCell};
use std::rc::Rc;
use std::time::Duration;

use serde_json::{json, Value};
use store::engine::{Effects, PaidCall, ToolCall};
use store::{
    Crash, Env, FaultPoint, FaultSite, InMemoryStore, InMemoryTranscriptStore, JournalEntry, JournalStore,
    LeasableStore, Lease, LocalFuture, ManualClock, ManualEnv, MetaLookup, Result, RunFilter, RunMeta,
    RunStatus, StoreError,
};

pub const T0: i64 = 1_700_000_000_000;
pub const TTL: i64 = 1_000;

/// A clock at [`T0`], a plain env on it, an in-memory store and an in-memory blob store.
pub fn memory() -> (ManualClock, Rc<dyn Env>, InMemoryStore, InMemoryTranscriptStore) {
    let clock = ManualClock::starting_at(T0);
    let env: Rc<dyn Env> = Rc::new(ManualEnv::new(clock.clone()));
    let store = InMemoryStore::new(env.clone(), TTL).expect("a positive ttl");
    (clock, env, store, InMemoryTranscriptStore::new())
}

/// An env on `clock` whose fault hook crashes the process at `point`.
pub fn crashing_at(clock: &ManualClock, point: FaultPoint) -> Rc<dyn Env> {
    Rc::new(ManualEnv::with_hook(
        clock.clone(),
        Rc::new(
            move |site: &FaultSite<'_>| -> Option<LocalFuture<'static, std::result::Result<(), Crash>>> {
                (site.point == point).then(|| -> LocalFuture<'static, std::result::Result<(), Crash>> {
                    Box::pin(async { Err(Crash) })
                })
            },
        ),
    ))
}

/// A hook run inside a world call (an interleaving: another process acts meanwhile).
pub type CallHook = Box<dyn FnMut(u32) -> Option<LocalFuture<'static, ()>>>;

#[derive(Default)]
pub struct WorldState {
    pub paid: Cell<u32>,
    pub tools: Cell<u32>,
    pub calls: RefCell<Vec<PaidCall>>,
    pub tool_calls: RefCell<Vec<ToolCall>>,
    /// Called with the 1-based paid-call count, before the reply.
    pub on_paid: RefCell<Option<CallHook>>,
    /// Called with the 1-based tool-run count, before the result.
    pub on_tool: RefCell<Option<CallHook>>,
}

/// Counts paid calls and tool runs. Replies "alpha" to op `one`, "beta" to `two`, and
/// `"<op>:<turn>"` otherwise.
#[derive(Clone, Default)]
pub struct TestEffects(pub Rc<WorldState>);

impl TestEffects {
    pub fn new() -> TestEffects {
        TestEffects::default()
    }
    pub fn paid(&self) -> u32 {
        self.0.paid.get()
    }
    pub fn tools(&self) -> u32 {
        self.0.tools.get()
    }
    pub fn on_paid(&self, hook: CallHook) {
        *self.0.on_paid.borrow_mut() = Some(hook);
    }
    pub fn on_tool(&self, hook: CallHook) {
        *self.0.on_tool.borrow_mut() = Some(hook);
    }
}

impl Effects for TestEffects {
    fn provider_call(&self, call: &PaidCall) -> LocalFuture<'static, Value> {
        let s = &self.0;
        s.paid.set(s.paid.get() + 1);
        s.calls.borrow_mut().push(call.clone());
        let hook = s.on_paid.borrow_mut().as_mut().and_then(|h| h(s.paid.get()));
        let reply = match call.op.as_str() {
            "one" => json!("alpha"),
            "two" => json!("beta"),
            op => json!(format!("{op}:{}", call.turn)),
        };
        Box::pin(async move {
            if let Some(h) = hook {
                h.await;
            }
            reply
        })
    }
    fn tool_execute(&self, call: &ToolCall) -> LocalFuture<'static, Value> {
        let s = &self.0;
        s.tools.set(s.tools.get() + 1);
        s.tool_calls.borrow_mut().push(call.clone());
        let hook = s.on_tool.borrow_mut().as_mut().and_then(|h| h(s.tools.get()));
        let result = json!(format!("tool:{}:{}", call.op, call.turn));
        Box::pin(async move {
            if let Some(h) = hook {
                h.await;
            }
            result
        })
    }
    fn mint_genesis(&self, run_id: &str) -> String {
        format!("gen-{run_id}")
    }
}

pub use store::conformance::killpoints::{fatal_write, is_run_settle as is_settle, Matcher};

pub struct KillState {
    /// The kill write's matcher (`None`: a passthrough that never kills).
    pub matcher: Option<Matcher>,
    pub occurrence: u32,
    pub before: bool,
    pub seen: Cell<u32>,
    pub dead: Cell<bool>,
    /// Store calls made (all kinds), for "nothing after the crash" checks.
    pub calls: Cell<u32>,
    /// Make every `renew` fail with Busy (a transient renew failure).
    pub fail_renew: Cell<bool>,
    /// Refuse every `run_settle` append with this error (nothing is written).
    pub fail_settle: RefCell<Option<StoreError>>,
    /// Refuse the next billing receipt append with this error, once (nothing is written).
    pub fail_receipt: RefCell<Option<StoreError>>,
    /// Refuse every terminal `put_meta` with this error (nothing is written).
    pub fail_terminal_meta: RefCell<Option<StoreError>>,
    /// Every `put_meta`: (status, whether it carried a lease).
    pub metas: RefCell<Vec<(RunStatus, bool)>>,
    /// Every append: (kind, status, whether it carried a lease).
    pub appends: RefCell<Vec<(String, String, bool)>>,
}

/// Wraps a journal store; kills the "process" before or after the k-th matching write by
/// answering `StoreError::Crashed`. Any store call after the death panics.
#[derive(Clone)]
pub struct KillStore<S> {
    pub inner: S,
    pub state: Rc<KillState>,
}

pub const KILL_POINT: &str = "test.kill";

impl<S> KillStore<S> {
    pub fn new(inner: S, matcher: impl Into<Option<Matcher>>, occurrence: u32, before: bool) -> KillStore<S> {
        let matcher = matcher.into();
        KillStore {
            inner,
            state: Rc::new(KillState {
                matcher,
                occurrence,
                before,
                seen: Cell::new(0),
                dead: Cell::new(false),
                calls: Cell::new(0),
                fail_renew: Cell::new(false),
                fail_settle: RefCell::new(None),
                fail_receipt: RefCell::new(None),
                fail_terminal_meta: RefCell::new(None),
                metas: RefCell::new(Vec::new()),
                appends: RefCell::new(Vec::new()),
            }),
        }
    }
    pub fn passthrough(inner: S) -> KillStore<S> {
        KillStore::new(inner, None, 0, false)
    }
    pub fn dead(&self) -> bool {
        self.state.dead.get()
    }
    fn enter(&self) {
        assert!(!self.state.dead.get(), "a store call after the process died");
        self.state.calls.set(self.state.calls.get() + 1);
    }
    /// `Some(before)` when this matching write is the one that kills.
    fn hit(&self, matches: bool) -> Option<bool> {
        fatal_write(&self.state.seen, matches, self.state.occurrence, self.state.before)
    }
    fn die(&self) -> StoreError {
        self.state.dead.set(true);
        StoreError::Crashed { point: KILL_POINT }
    }
}

impl<S: JournalStore> JournalStore for KillStore<S> {
    async fn append(&self, run_id: &str, entry: &JournalEntry, lease: Option<&Lease>) -> Result<()> {
        self.enter();
        self.state.appends.borrow_mut().push((entry.kind.clone(), entry.status.clone(), lease.is_some()));
        if is_settle(entry) {
            if let Some(e) = self.state.fail_settle.borrow().clone() {
                return Err(e);
            }
        }
        if is_receipt(entry) {
            if let Some(e) = self.state.fail_receipt.borrow_mut().take() {
                return Err(e);
            }
        }
        let hit = self.hit(self.state.matcher.is_some_and(|m| m.entry(entry)));
        if hit == Some(true) {
            return Err(self.die());
        }
        self.inner.append(run_id, entry, lease).await?;
        if hit == Some(false) {
            return Err(self.die());
        }
        Ok(())
    }
    async fn load(&self, run_id: &str) -> Result<Vec<JournalEntry>> {
        self.enter();
        self.inner.load(run_id).await
    }
    async fn put_meta(&self, meta: &RunMeta, lease: Option<&Lease>) -> Result<()> {
        self.enter();
        self.state.metas.borrow_mut().push((meta.status, lease.is_some()));
        if meta.status != RunStatus::Running {
            if let Some(e) = self.state.fail_terminal_meta.borrow().clone() {
                return Err(e);
            }
        }
        let hit = self.hit(self.state.matcher.is_some_and(|m| m.meta(meta)));
        if hit == Some(true) {
            return Err(self.die());
        }
        self.inner.put_meta(meta, lease).await?;
        if hit == Some(false) {
            return Err(self.die());
        }
        Ok(())
    }
    async fn list_runs(&self, filter: &RunFilter) -> Result<Vec<RunMeta>> {
        self.enter();
        self.inner.list_runs(filter).await
    }
    async fn delete(&self, run_id: &str, lease: Option<&Lease>) -> Result<()> {
        self.enter();
        self.inner.delete(run_id, lease).await
    }
    fn fenced_writes(&self) -> bool {
        self.inner.fenced_writes()
    }
}

impl<S: MetaLookup> MetaLookup for KillStore<S> {
    async fn get_meta(&self, run_id: &str) -> Result<Option<RunMeta>> {
        self.enter();
        self.inner.get_meta(run_id).await
    }
}

impl<S: LeasableStore> LeasableStore for KillStore<S> {
    async fn acquire(&self, run_id: &str, owner: &str) -> Result<Lease> {
        self.enter();
        self.inner.acquire(run_id, owner).await
    }
    async fn renew(&self, lease: &Lease) -> Result<()> {
        self.enter();
        if self.state.fail_renew.get() {
            return Err(StoreError::Busy { code: 5, during: "renew" });
        }
        self.inner.renew(lease).await
    }
    async fn release(&self, lease: &Lease) -> Result<()> {
        self.enter();
        self.inner.release(lease).await
    }
    fn lease_ttl(&self) -> Option<Duration> {
        self.inner.lease_ttl()
    }
}

/// A billing receipt: a `provider-call` decision.
pub fn is_receipt(e: &JournalEntry) -> bool {
    e.kind == "decision"
        && e.value.get("decisionType").and_then(|v| v.as_str())
            == Some(store::engine::PROVIDER_CALL_DECISION_TYPE)
}

/// The keys of the billing receipts in `entries`, in order.
pub fn receipts(entries: &[JournalEntry]) -> Vec<String> {
    entries.iter().filter(|e| is_receipt(e)).map(|e| e.key.clone()).collect()
}

/// Seqs of `entries` are 0, 1, 2, ... in order.
pub fn contiguous(entries: &[JournalEntry]) -> bool {
    entries.iter().enumerate().all(|(i, e)| e.seq.0 == i as u64)
}

/// The `run_settle` entries as (runStatus, segment).
pub fn settles(entries: &[JournalEntry]) -> Vec<(String, u64)> {
    entries
        .iter()
        .filter(|e| is_settle(e))
        .map(|e| {
            (
                e.value["runStatus"].as_str().unwrap_or_default().to_string(),
                e.value["segment"].as_u64().unwrap_or_default(),
            )
        })
        .collect()
}

/// A yielding future: pending `n` times (waking itself), then ready. Lets a test make a
/// world call take "time" so that concurrent renew loops get polled.
pub struct Yield(pub u32);

impl std::future::Future for Yield {
    type Output = ();
    fn poll(mut self: std::pin::Pin<&mut Self>, cx: &mut std::task::Context<'_>) -> std::task::Poll<()> {
        if self.0 == 0 {
            std::task::Poll::Ready(())
        } else {
            self.0 -= 1;
            cx.waker().wake_by_ref();
            std::task::Poll::Pending
        }
    }
}

/// A transcript store wrapper recording whether each `put` carried a lease.
#[derive(Clone)]
pub struct RecordingBlobs<T> {
    pub inner: T,
    pub puts: Rc<RefCell<Vec<(String, bool)>>>,
    /// Refuse the k-th put (1-based) with Busy; 0 never.
    pub fail_put_at: Rc<Cell<usize>>,
}

impl<T> RecordingBlobs<T> {
    pub fn new(inner: T) -> RecordingBlobs<T> {
        RecordingBlobs { inner, puts: Rc::default(), fail_put_at: Rc::default() }
    }
}

impl<T: store::TranscriptStore> store::TranscriptStore for RecordingBlobs<T> {
    async fn put(&self, blob_ref: &str, bytes: &[u8], lease: Option<&Lease>) -> Result<()> {
        self.puts.borrow_mut().push((blob_ref.to_string(), lease.is_some()));
        if self.puts.borrow().len() == self.fail_put_at.get() {
            return Err(StoreError::Busy { code: 5, during: "blob_put" });
        }
        self.inner.put(blob_ref, bytes, lease).await
    }
    async fn get(&self, blob_ref: &str) -> Result<Option<Vec<u8>>> {
        self.inner.get(blob_ref).await
    }
    async fn list(&self, run_id: &str) -> Result<Vec<String>> {
        self.inner.list(run_id).await
    }
    async fn delete(&self, blob_ref: &str, lease: Option<&Lease>) -> Result<()> {
        self.inner.delete(blob_ref, lease).await
    }
    fn fenced_writes(&self) -> bool {
        self.inner.fenced_writes()
    }
}

/// Something another process does meanwhile (run once).
pub type Meanwhile = Box<dyn FnOnce() -> LocalFuture<'static, ()>>;

/// Wraps a store; the first `acquire` through it first lets `meanwhile` run to completion
/// (another process acting between a caller's reads and its acquire), then acquires.
#[derive(Clone)]
pub struct BeforeAcquire<S> {
    pub inner: S,
    pub meanwhile: Rc<RefCell<Option<Meanwhile>>>,
}

impl<S> BeforeAcquire<S> {
    pub fn new(inner: S, meanwhile: Meanwhile) -> BeforeAcquire<S> {
        BeforeAcquire { inner, meanwhile: Rc::new(RefCell::new(Some(meanwhile))) }
    }
    /// Whether the interleaving has run.
    pub fn ran(&self) -> bool {
        self.meanwhile.borrow().is_none()
    }
}

impl<S: JournalStore> JournalStore for BeforeAcquire<S> {
    async fn append(&self, run_id: &str, entry: &JournalEntry, lease: Option<&Lease>) -> Result<()> {
        self.inner.append(run_id, entry, lease).await
    }
    async fn load(&self, run_id: &str) -> Result<Vec<JournalEntry>> {
        self.inner.load(run_id).await
    }
    async fn put_meta(&self, meta: &RunMeta, lease: Option<&Lease>) -> Result<()> {
        self.inner.put_meta(meta, lease).await
    }
    async fn list_runs(&self, filter: &RunFilter) -> Result<Vec<RunMeta>> {
        self.inner.list_runs(filter).await
    }
    async fn delete(&self, run_id: &str, lease: Option<&Lease>) -> Result<()> {
        self.inner.delete(run_id, lease).await
    }
    fn fenced_writes(&self) -> bool {
        self.inner.fenced_writes()
    }
}

impl<S: MetaLookup> MetaLookup for BeforeAcquire<S> {
    async fn get_meta(&self, run_id: &str) -> Result<Option<RunMeta>> {
        self.inner.get_meta(run_id).await
    }
}

impl<S: LeasableStore> LeasableStore for BeforeAcquire<S> {
    async fn acquire(&self, run_id: &str, owner: &str) -> Result<Lease> {
        let meanwhile = self.meanwhile.borrow_mut().take();
        if let Some(m) = meanwhile {
            m().await;
        }
        self.inner.acquire(run_id, owner).await
    }
    async fn renew(&self, lease: &Lease) -> Result<()> {
        self.inner.renew(lease).await
    }
    async fn release(&self, lease: &Lease) -> Result<()> {
        self.inner.release(lease).await
    }
    fn lease_ttl(&self) -> Option<Duration> {
        self.inner.lease_ttl()
    }
}
