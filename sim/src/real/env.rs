//! The environment of a real writer process: store::SystemEnv's wall clock and blocking
//! sleep, plus a fault hook that injects nothing and only RECORDS, for the oracle, what the
//! store checked and applied (the same facts the simulator's hook records).
//!
//! What it records and how exact it is:
//! - after-check points: the store clock when the fence (or acquire's liveness) check
//!   passed.
//! - before-commit points (every transactional mutation: the `Atomic` fence, acquire,
//!   multi-statement deletes): the machine-wide monotonic instant and the lease row read on
//!   the store's own connection inside the open transaction. The instant is taken while the
//!   process holds SQLite's write lock, so instants of different processes are in commit
//!   order, and the row is exactly what the commit publishes.
//! - after-commit points: the call is applied, at the before-commit instant when there was
//!   one. Autocommit mutations (the `Split` profile's second statement, unfenced single
//!   statements) have no before-commit point: their instant and row are read right after
//!   the commit, so another process's commit may land in between (apply order across
//!   processes is then approximated by these timestamps).

use std::cell::RefCell;
use std::time::Duration;

use store::{Crash, Env, FaultSite, LocalFuture, Moment, SqliteStore, SystemEnv};

use crate::history::{current_call, LeaseRow, Recorder};
use crate::machine::mono_ns;

/// A snapshot taken at a before-commit point, waiting for its after-commit point.
struct Pending {
    call: usize,
    at_ns: u64,
    now_ms: i64,
    row: Option<LeaseRow>,
}

/// Wall clock, real sleeps, no faults, and a recording hook.
pub struct RealEnv {
    sys: SystemEnv,
    rec: Recorder,
    /// The process's store, for reading lease rows on its own connection. Attached after
    /// the store is built (the store needs the env first); detach before dropping.
    store: RefCell<Option<SqliteStore>>,
    pending: RefCell<Option<Pending>>,
}

impl RealEnv {
    pub fn new(rec: Recorder) -> RealEnv {
        RealEnv { sys: SystemEnv::new(), rec, store: RefCell::new(None), pending: RefCell::new(None) }
    }

    /// Let the hook read lease rows through `store`'s connection.
    pub fn attach(&self, store: SqliteStore) {
        *self.store.borrow_mut() = Some(store);
    }

    /// Break the env <-> store cycle.
    pub fn detach(&self) {
        self.store.borrow_mut().take();
    }

    fn row(&self, run_id: Option<&str>) -> Option<LeaseRow> {
        let store = self.store.borrow();
        let (owner, epoch, expires_at) = store.as_ref()?.peek_lease_row(run_id?).ok()??;
        Some(LeaseRow { owner, epoch, expires_at })
    }
}

impl Env for RealEnv {
    fn now_ms(&self) -> i64 {
        self.sys.now_ms()
    }

    fn monotonic(&self) -> Duration {
        self.sys.monotonic()
    }

    fn sleep(&self, duration: Duration) -> LocalFuture<'static, ()> {
        self.sys.sleep(duration)
    }

    fn fault(&self, site: &FaultSite<'_>) -> Option<LocalFuture<'static, Result<(), Crash>>> {
        let call = current_call()?;
        match site.point.moment() {
            Moment::AfterCheck => self.rec.checked(call, self.now_ms()),
            Moment::BeforeCommit => {
                let snap =
                    Pending { call, at_ns: mono_ns(), now_ms: self.now_ms(), row: self.row(site.run_id) };
                *self.pending.borrow_mut() = Some(snap);
            }
            Moment::AfterCommit => {
                let pending = self.pending.borrow_mut().take().filter(|p| p.call == call);
                let p = pending.unwrap_or_else(|| Pending {
                    call,
                    at_ns: mono_ns(),
                    now_ms: self.now_ms(),
                    row: self.row(site.run_id),
                });
                self.rec.applied(call, p.at_ns, p.now_ms, p.row, site.epoch);
            }
            _ => {}
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use std::rc::Rc;

    use futures::executor::block_on;
    use serde_json::Value;
    use store::{Env, JournalEntry, JournalStore, LeasableStore, SqliteOptions, SqliteStore};

    use super::RealEnv;
    use crate::history::{OpKind, Recorder};
    use crate::machine::mono_ns;
    use crate::recorded::{Caller, RecordedStore};

    #[test]
    fn the_recording_env_notes_checks_and_commits_with_the_row_read_inside_the_transaction() {
        let dir = tempfile::tempdir().unwrap();
        let rec = Recorder::with_clock(mono_ns, None);
        let env = Rc::new(RealEnv::new(rec.clone()));
        block_on(async {
            let env_dyn: Rc<dyn Env> = env.clone();
            let options = SqliteOptions::new(dir.path().join("t.db")).ttl_ms(60_000);
            let store = SqliteStore::open(options, env_dyn).await.unwrap();
            env.attach(store.clone());
            let rs = RecordedStore {
                inner: store.into(),
                caller: Caller { rec: rec.clone(), node: 4, incarnation: 0 },
            };
            let lease = rs.acquire("r", "me").await.unwrap();
            rs.append("r", &JournalEntry::new(1, "k", "ok", Value::Null), Some(&lease)).await.unwrap();
            rs.release(&lease).await.unwrap();
            env.detach();
        });
        let h = rec.inner.borrow();
        let ops: Vec<OpKind> = h.calls.iter().map(|c| c.op).collect();
        assert_eq!(ops, [OpKind::Acquire, OpKind::Append, OpKind::Release]);
        let applied: Vec<_> =
            h.calls.iter().map(|c| c.applied.clone().expect("every call applied")).collect();
        // The acquire's row is the one its own transaction wrote.
        let row = applied[0].lease_row.as_ref().expect("the acquire's row");
        assert_eq!((row.owner.as_str(), row.epoch), ("me", 1));
        assert_eq!(applied[0].site_epoch, Some(1));
        // The append passed its fence check (noted with the store clock) under that row.
        assert!(h.calls[1].checked_now_ms.is_some_and(|ms| ms < row.expires_at));
        assert_eq!(applied[1].lease_row.as_ref(), Some(row));
        // The release's transaction removed the row.
        assert!(applied[2].lease_row.is_none());
        // Apply instants and orders follow the calls, and fall inside each call.
        for (i, (a, c)) in applied.iter().zip(h.calls.iter()).enumerate() {
            assert_eq!(a.order, i);
            assert!(c.invoked_ns <= a.at_ns && Some(a.at_ns) <= c.returned_ns);
        }
    }
}
