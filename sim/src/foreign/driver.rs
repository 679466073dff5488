//! The foreign-store proxy: one more implementation of the store SPI, backed by a child
//! process that speaks the store-driver protocol (see `protocol.rs`).
//!
//! Fault model, as the Rust store's (store/src/fault.rs), with the child's own points:
//! every hook line the child writes is handed to the environment's fault hook as the same
//! named `FaultPoint`, with its run and epoch. The plan decides exactly as it does for the
//! Rust store: a yield or a stall is awaited (in virtual time) before `continue` is
//! written, with the clock reading after it; a crash report (`Err(Crash)`) or a node kill
//! (the simulator's crash: the call's future is dropped, then the store) SIGKILLs the
//! child where it stands, mid-transaction if it is inside one, and reaps it before anything
//! else runs. The supervisor's restart builds a new child.
//!
//! Determinism: each exchange is one line written then lines read until the call's reply,
//! blocking, inside the single-threaded runtime: nothing else runs while the child works,
//! and a child that waits at a hook holds only what it holds (its SQLite locks, which the
//! other children meet as a real SQLITE_BUSY). The child's behaviour is the only new source
//! of nondeterminism. Its clock is the `now_ms` the proxy sends on every line.
//!
//! Faults of the child (a malformed line, a reply to another call, an unknown error code,
//! another protocol version, exit, silence past the wall-clock guard) are harness errors:
//! recorded with the process, the call and the child's stderr (see `super::record_fault`),
//! the child is killed, and the call returns `Storage` so the caller stops; the run is then
//! reported as a harness error, never as a verdict on the store.

use std::cell::{Cell, RefCell};
use std::path::PathBuf;
use std::process::Command;
use std::rc::Rc;
use std::sync::Arc;
use std::time::Duration;

use serde_json::{json, Map, Value};
use store::sync::FifoLock;
use store::{
    Env, FaultSite, JournalEntry, JournalStore, LeasableStore, Lease, MetaLookup, RunFilter, RunMeta,
    StoreError, TranscriptStore,
};

use super::protocol::{lease_value, parse_line, request, resume, Hello, Incoming};
use super::ForeignSpec;
use crate::child::{ChildProc, ReadError};
use crate::record_text::{entry_text, meta_text};

/// How to open one store process.
#[derive(Clone, Debug)]
pub struct ForeignOptions {
    pub spec: Arc<ForeignSpec>,
    pub db: PathBuf,
    pub ttl_ms: i64,
    pub page_size: Option<u32>,
    /// `off`, `normal` or `full`.
    pub synchronous: &'static str,
    /// Which process this is, for error messages (`node 2 incarnation 1`).
    pub label: String,
}

impl ForeignOptions {
    /// The options of a simulated process's store: the world's database and the options the
    /// Rust store would be built with.
    pub fn for_world(
        spec: Arc<ForeignSpec>,
        db: &std::path::Path,
        options: &store::SqliteOptions,
        label: String,
    ) -> ForeignOptions {
        ForeignOptions {
            spec,
            db: db.to_path_buf(),
            ttl_ms: options.ttl_ms,
            page_size: options.page_size,
            synchronous: match options.synchronous {
                store::Synchronous::Off => "off",
                store::Synchronous::Normal => "normal",
                store::Synchronous::Full => "full",
            },
            label,
        }
    }
}

struct Inner {
    proc: RefCell<Option<ChildProc>>,
    env: Rc<dyn Env>,
    lock: FifoLock,
    next_id: Cell<u64>,
    hello: RefCell<Option<Hello>>,
    ttl_ms: Cell<i64>,
    opts: ForeignOptions,
    /// Set once the child is gone (a crash or a fault): every later call fails at once.
    broken: RefCell<Option<String>>,
}

/// A store in a child process. Clones share the child.
#[derive(Clone)]
pub struct ForeignStore {
    inner: Rc<Inner>,
}

/// The transcript side of the same child.
#[derive(Clone)]
pub struct ForeignTranscripts {
    inner: Rc<Inner>,
}

fn args(pairs: Vec<(&str, Value)>) -> Map<String, Value> {
    pairs.into_iter().map(|(k, v)| (k.to_string(), v)).collect()
}

impl ForeignStore {
    /// Spawn the child, check its `hello`, and `open` the database (the boot: its hooks are
    /// the `sqlite.boot.*` points; a typed error such as `busy` is the boot's own result).
    pub async fn open(opts: ForeignOptions, env: Rc<dyn Env>) -> Result<ForeignStore, StoreError> {
        let store = ForeignStore {
            inner: Rc::new(Inner {
                proc: RefCell::new(None),
                env,
                lock: FifoLock::new(),
                next_id: Cell::new(0),
                hello: RefCell::new(None),
                ttl_ms: Cell::new(opts.ttl_ms),
                opts,
                broken: RefCell::new(None),
            }),
        };
        let i = &store.inner;
        let argv = &i.opts.spec.argv;
        let mut cmd = Command::new(&argv[0]);
        cmd.args(&argv[1..]);
        match ChildProc::spawn_group(cmd) {
            Ok(p) => *i.proc.borrow_mut() = Some(p),
            Err(e) => return Err(i.fault("spawn", &format!("cannot start {:?}: {e}", argv[0]))),
        }
        let hello = i.call("hello", Map::new()).await?;
        match Hello::from_value(&hello) {
            Ok(h) => {
                super::note_hello(&i.opts.spec.command, h.clone());
                *i.hello.borrow_mut() = Some(h);
            }
            Err(e) => return Err(i.fault("hello", &e)),
        }
        let mut open = args(vec![
            ("db", json!(i.opts.db.display().to_string())),
            ("ttl_ms", json!(i.opts.ttl_ms)),
            ("synchronous", json!(i.opts.synchronous)),
        ]);
        if let Some(p) = i.opts.page_size {
            open.insert("page_size".into(), json!(p));
        }
        let reply = i.call("open", open).await?;
        match reply.get("ttl_ms").and_then(Value::as_i64) {
            Some(ttl) if ttl > 0 => i.ttl_ms.set(ttl),
            _ => return Err(i.fault("open", &format!("open replied without a positive ttl_ms: {reply}"))),
        }
        Ok(store)
    }

    /// What the child said about itself.
    pub fn hello(&self) -> Option<Hello> {
        self.inner.hello.borrow().clone()
    }

    pub fn transcripts(&self) -> ForeignTranscripts {
        ForeignTranscripts { inner: self.inner.clone() }
    }
}

impl Inner {
    /// Record a harness fault for `call`, kill the child, and return the error the caller gets.
    fn fault(&self, call: &str, what: &str) -> StoreError {
        let tail = self.proc.borrow().as_ref().map(|p| p.stderr_tail(2000)).unwrap_or_default();
        if let Some(mut p) = self.proc.borrow_mut().take() {
            p.kill();
        }
        let mut msg =
            format!("foreign store `{}`, {}, call {call}: {what}", self.opts.spec.command, self.opts.label);
        if !tail.is_empty() {
            msg.push_str(&format!("\n  its stderr: {}", tail.replace('\n', "\n  ")));
        }
        super::record_fault(msg.clone());
        *self.broken.borrow_mut() = Some(msg.clone());
        StoreError::Storage { during: "a foreign store call", message: msg }
    }

    fn send(&self, line: &str, call: &str) -> Result<(), StoreError> {
        let r = match self.proc.borrow_mut().as_mut() {
            Some(p) => p.write_line(line).map_err(|e| e.to_string()),
            None => Err("the process is gone".to_string()),
        };
        r.map_err(|e| self.fault(call, &format!("cannot write to it ({e})")))
    }

    fn receive(&self, call: &str) -> Result<String, StoreError> {
        let guard = self.opts.spec.guard;
        let r = match self.proc.borrow_mut().as_mut() {
            Some(p) => p.read_line(Some(guard)),
            None => Err(ReadError::Eof),
        };
        r.map_err(|e| {
            let status = self.proc.borrow_mut().as_mut().and_then(|p| p.try_wait());
            let exit = status.map(|s| format!(" (exit status {s})")).unwrap_or_default();
            self.fault(call, &format!("it {e}{exit}"))
        })
    }

    /// One request and its reply, serving the child's hook and sleep lines in between.
    async fn call(&self, op: &str, a: Map<String, Value>) -> Result<Value, StoreError> {
        let _guard = self.lock.lock().await;
        if let Some(msg) = self.broken.borrow().clone() {
            return Err(StoreError::Storage { during: "a foreign store call", message: msg });
        }
        let id = self.next_id.get() + 1;
        self.next_id.set(id);
        let call = format!("{id} {op}");
        self.send(&request(id, op, self.env.now_ms(), a), &call)?;
        // Dropped before the reply (the simulated process was killed at a hook, or the
        // caller gave up): the child dies where it stands, whoever else holds this store.
        let mut in_flight = KillOnDrop { inner: self, armed: true };
        let r = self.exchange(id, &call).await;
        in_flight.armed = false;
        r
    }

    /// Serve the child's lines for request `id` until its reply.
    async fn exchange(&self, id: u64, call: &str) -> Result<Value, StoreError> {
        loop {
            let line = self.receive(call)?;
            match parse_line(&line, id) {
                Err(e) => return Err(self.fault(call, &format!("it {e}"))),
                Ok(Incoming::Ok(v)) => return Ok(v),
                Ok(Incoming::Err(e)) => return Err(e),
                Ok(Incoming::Sleep { ms }) => {
                    self.env.sleep(Duration::from_millis(ms)).await;
                    self.send(&resume(id, self.env.now_ms()), call)?;
                }
                Ok(Incoming::Hook { point, run_id, epoch }) => {
                    let declared =
                        self.hello.borrow().as_ref().map(|h| h.hooks.iter().any(|n| n == point.name()));
                    if declared == Some(false) {
                        let what =
                            format!("it stopped at hook {} that its hello did not declare", point.name());
                        return Err(self.fault(call, &what));
                    }
                    let site = FaultSite { point, run_id: run_id.as_deref(), epoch };
                    if let Some(f) = self.env.fault(&site) {
                        if f.await.is_err() {
                            // A crash here: the process dies at this point.
                            if let Some(mut p) = self.proc.borrow_mut().take() {
                                p.kill();
                            }
                            *self.broken.borrow_mut() = Some(format!("crashed at {}", point.name()));
                            return Err(StoreError::Crashed { point: point.name() });
                        }
                    }
                    self.send(&resume(id, self.env.now_ms()), call)?;
                }
            }
        }
    }

    fn expect_null(&self, v: Value, op: &str) -> Result<(), StoreError> {
        match v {
            Value::Null => Ok(()),
            other => Err(self.fault(op, &format!("{op} replied {other} instead of null"))),
        }
    }

    fn decode<T: serde::de::DeserializeOwned>(
        &self,
        v: Value,
        op: &str,
        what: &str,
    ) -> Result<T, StoreError> {
        serde_json::from_value(v.clone())
            .map_err(|e| self.fault(op, &format!("{op} replied {v}, not {what}: {e}")))
    }

    /// Stored JSON text back from the child, decoded as the Rust store decodes it.
    fn text(&self, v: Value, op: &str) -> Result<String, StoreError> {
        match v {
            Value::String(s) => Ok(s),
            other => {
                Err(self.fault(op, &format!("{op} replied {other} where stored JSON text was expected")))
            }
        }
    }

    async fn mutate(&self, op: &str, a: Vec<(&str, Value)>) -> Result<(), StoreError> {
        let v = self.call(op, args(a)).await?;
        self.expect_null(v, op)
    }
}

/// Kills the child if a call is abandoned mid-exchange.
struct KillOnDrop<'a> {
    inner: &'a Inner,
    armed: bool,
}

impl Drop for KillOnDrop<'_> {
    fn drop(&mut self) {
        if self.armed {
            if let Ok(mut proc) = self.inner.proc.try_borrow_mut() {
                if let Some(mut p) = proc.take() {
                    p.kill();
                }
            }
            if let Ok(mut b) = self.inner.broken.try_borrow_mut() {
                b.get_or_insert_with(|| "killed in the middle of a call".to_string());
            }
        }
    }
}

fn corrupt(what: &'static str, key: &str, e: StoreError) -> StoreError {
    StoreError::Corrupt { what, key: key.to_string(), reason: e.to_string() }
}

impl JournalStore for ForeignStore {
    async fn append(
        &self,
        run_id: &str,
        entry: &JournalEntry,
        lease: Option<&Lease>,
    ) -> Result<(), StoreError> {
        let a = vec![
            ("run_id", json!(run_id)),
            ("entry", json!(entry_text(entry))),
            ("lease", lease_value(lease)),
        ];
        self.inner.mutate("append", a).await
    }

    async fn load(&self, run_id: &str) -> Result<Vec<JournalEntry>, StoreError> {
        let v = self.inner.call("load", args(vec![("run_id", json!(run_id))])).await?;
        let texts: Vec<String> = self.inner.decode(v, "load", "a list of stored entries")?;
        texts
            .iter()
            .map(|t| JournalEntry::from_json(t).map_err(|e| corrupt("journal entry", run_id, e)))
            .collect()
    }

    async fn put_meta(&self, meta: &RunMeta, lease: Option<&Lease>) -> Result<(), StoreError> {
        let a = vec![("meta", json!(meta_text(meta))), ("lease", lease_value(lease))];
        self.inner.mutate("put_meta", a).await
    }

    async fn list_runs(&self, filter: &RunFilter) -> Result<Vec<RunMeta>, StoreError> {
        let f = serde_json::to_value(filter).unwrap_or(Value::Null);
        let v = self.inner.call("list_runs", args(vec![("filter", f)])).await?;
        let texts: Vec<String> = self.inner.decode(v, "list_runs", "a list of stored meta")?;
        let mut out = Vec::with_capacity(texts.len());
        for t in texts {
            let meta = RunMeta::from_json(&t).map_err(|e| corrupt("meta payload", "list_runs", e))?;
            if filter.matches(&meta) {
                out.push(meta);
            }
        }
        Ok(out)
    }

    async fn delete(&self, run_id: &str, lease: Option<&Lease>) -> Result<(), StoreError> {
        self.inner.mutate("delete", vec![("run_id", json!(run_id)), ("lease", lease_value(lease))]).await
    }

    fn fenced_writes(&self) -> bool {
        self.inner.hello.borrow().as_ref().is_some_and(|h| h.fenced_writes)
    }
}

impl MetaLookup for ForeignStore {
    async fn get_meta(&self, run_id: &str) -> Result<Option<RunMeta>, StoreError> {
        let v = self.inner.call("get_meta", args(vec![("run_id", json!(run_id))])).await?;
        if v.is_null() {
            return Ok(None);
        }
        let t = self.inner.text(v, "get_meta")?;
        RunMeta::from_json(&t).map(Some).map_err(|e| corrupt("meta payload", run_id, e))
    }
}

impl LeasableStore for ForeignStore {
    async fn acquire(&self, run_id: &str, owner: &str) -> Result<Lease, StoreError> {
        let v = self
            .inner
            .call("acquire", args(vec![("run_id", json!(run_id)), ("owner", json!(owner))]))
            .await?;
        let l: Lease = self.inner.decode(v, "acquire", "a lease {run_id, owner, epoch}")?;
        if l.run_id != run_id || l.owner != owner {
            return Err(self
                .inner
                .fault("acquire", &format!("granted a lease for another run or owner: {l:?}")));
        }
        Ok(l)
    }

    async fn renew(&self, lease: &Lease) -> Result<(), StoreError> {
        self.inner.mutate("renew", vec![("lease", lease_value(Some(lease)))]).await
    }

    async fn release(&self, lease: &Lease) -> Result<(), StoreError> {
        self.inner.mutate("release", vec![("lease", lease_value(Some(lease)))]).await
    }

    fn lease_ttl(&self) -> Option<Duration> {
        Some(Duration::from_millis(self.inner.ttl_ms.get().max(0) as u64))
    }
}

impl TranscriptStore for ForeignTranscripts {
    async fn put(&self, blob_ref: &str, bytes: &[u8], lease: Option<&Lease>) -> Result<(), StoreError> {
        let a = vec![
            ("ref", json!(blob_ref)),
            ("data", json!(b64::encode(bytes))),
            ("lease", lease_value(lease)),
        ];
        self.inner.mutate("blob_put", a).await
    }

    async fn get(&self, blob_ref: &str) -> Result<Option<Vec<u8>>, StoreError> {
        let v = self.inner.call("blob_get", args(vec![("ref", json!(blob_ref))])).await?;
        if v.is_null() {
            return Ok(None);
        }
        let t = self.inner.text(v, "blob_get")?;
        match b64::decode(&t) {
            Some(b) => Ok(Some(b)),
            None => Err(self.inner.fault("blob_get", "replied with bytes that are not base64")),
        }
    }

    async fn list(&self, run_id: &str) -> Result<Vec<String>, StoreError> {
        let v = self.inner.call("blob_list", args(vec![("run_id", json!(run_id))])).await?;
        self.inner.decode(v, "blob_list", "a list of refs")
    }

    async fn delete(&self, blob_ref: &str, lease: Option<&Lease>) -> Result<(), StoreError> {
        self.inner.mutate("blob_delete", vec![("ref", json!(blob_ref)), ("lease", lease_value(lease))]).await
    }

    fn fenced_writes(&self) -> bool {
        self.inner.hello.borrow().as_ref().is_some_and(|h| h.transcripts_fenced)
    }
}

/// Standard base64 (RFC 4648, with padding), for blob bytes on the wire.
pub mod b64 {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

    pub fn encode(bytes: &[u8]) -> String {
        let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
        for chunk in bytes.chunks(3) {
            let b = [chunk[0], *chunk.get(1).unwrap_or(&0), *chunk.get(2).unwrap_or(&0)];
            let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
            for i in 0..4 {
                if i <= chunk.len() {
                    out.push(ALPHABET[((n >> (18 - 6 * i)) & 63) as usize] as char);
                } else {
                    out.push('=');
                }
            }
        }
        out
    }

    pub fn decode(text: &str) -> Option<Vec<u8>> {
        let t = text.as_bytes();
        if t.len() % 4 != 0 {
            return None;
        }
        let mut out = Vec::with_capacity(t.len() / 4 * 3);
        for chunk in t.chunks(4) {
            let pad = chunk.iter().rev().take_while(|c| **c == b'=').count();
            if pad > 2 {
                return None;
            }
            let mut n: u32 = 0;
            for (i, c) in chunk.iter().enumerate() {
                let v = if i >= 4 - pad { 0 } else { ALPHABET.iter().position(|a| a == c)? as u32 };
                n = (n << 6) | v;
            }
            let bytes = [(n >> 16) as u8, (n >> 8) as u8, n as u8];
            out.extend_from_slice(&bytes[..3 - pad]);
        }
        Some(out)
    }

    #[cfg(test)]
    mod tests {
        #[test]
        fn round_trips_every_length() {
            for len in 0..40u8 {
                let bytes: Vec<u8> = (0..len).map(|i| i.wrapping_mul(37).wrapping_add(200)).collect();
                assert_eq!(super::decode(&super::encode(&bytes)), Some(bytes));
            }
            assert_eq!(super::encode(b"foobar"), "Zm9vYmFy");
            assert_eq!(super::encode(b"fo"), "Zm8=");
            assert_eq!(super::decode("Zm8"), None);
            assert_eq!(super::decode("Z!8="), None);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use store::{Crash, LocalFuture, ManualClock, ManualEnv};

    const PY: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../foreign/python/sqlite_store.py");

    fn opts(db: &std::path::Path, label: &str) -> ForeignOptions {
        ForeignOptions {
            spec: Arc::new(ForeignSpec::parse(&format!("python3 {PY}"), Duration::from_secs(10)).unwrap()),
            db: db.to_path_buf(),
            ttl_ms: 60_000,
            page_size: None,
            synchronous: "off",
            label: label.into(),
        }
    }

    #[test]
    fn a_call_dropped_at_a_hook_kills_its_child_and_frees_the_write_lock() {
        if std::process::Command::new("python3").arg("--version").output().is_err() {
            eprintln!("python3 is not installed: skipped");
            return;
        }
        let dir = tempfile::tempdir().unwrap();
        let db = dir.path().join("t.db");
        let clock = ManualClock::starting_at(1_000_000);
        // A's hook never returns at before_commit: A's child waits there inside BEGIN IMMEDIATE.
        let hook: Rc<store::env::HookFn> = Rc::new(|site: &FaultSite<'_>| {
            (site.point == store::FaultPoint::SqliteAppendBeforeCommit)
                .then(|| Box::pin(std::future::pending()) as LocalFuture<'static, Result<(), Crash>>)
        });
        futures::executor::block_on(async {
            let a = ForeignStore::open(opts(&db, "A"), Rc::new(ManualEnv::with_hook(clock.clone(), hook)))
                .await
                .unwrap();
            let b = ForeignStore::open(opts(&db, "B"), Rc::new(ManualEnv::new(clock.clone()))).await.unwrap();
            let lease = a.acquire("r", "a").await.unwrap();
            let entry = JournalEntry::new(1, "k", "ok", Value::Null);
            {
                let mut append = Box::pin(a.append("r", &entry, Some(&lease)));
                assert!(futures::poll!(append.as_mut()).is_pending());
                // B meets A's write lock: a real SQLITE_BUSY.
                assert!(matches!(b.acquire("other", "b").await, Err(StoreError::Busy { .. })));
            }
            // The append was dropped at its hook: A's child is dead, its transaction gone.
            assert!(b.acquire("other", "b").await.is_ok());
            assert!(b.load("r").await.unwrap().is_empty());
            assert!(matches!(a.load("r").await, Err(StoreError::Storage { .. })));
        });
        assert_eq!(super::super::take_fault(), None);
    }
}
