//! A first end-to-end check of SqliteStore over a real file: grant, fenced append, takeover
//! after expiry, the stale append refused.

use std::rc::Rc;

use futures::executor::block_on;
use store::{
    JournalEntry, JournalStore, LeasableStore, ManualClock, ManualEnv, SqliteOptions, SqliteStore, StoreError,
};

#[test]
fn stale_holder_append_rejected_after_takeover() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("smoke.db");
    let clock = ManualClock::starting_at(1_000_000);
    block_on(async {
        let a =
            SqliteStore::open(SqliteOptions::new(&path).ttl_ms(100), Rc::new(ManualEnv::new(clock.clone())))
                .await
                .unwrap();
        let b =
            SqliteStore::open(SqliteOptions::new(&path).ttl_ms(100), Rc::new(ManualEnv::new(clock.clone())))
                .await
                .unwrap();
        let la = a.acquire("RUN", "a").await.unwrap();
        a.append("RUN", &JournalEntry::new(0, "step", "ok", serde_json::json!(0)), Some(&la)).await.unwrap();
        clock.advance(150);
        let lb = b.acquire("RUN", "b").await.unwrap();
        assert!(lb.epoch > la.epoch);
        let err = a
            .append("RUN", &JournalEntry::new(1, "step", "ok", serde_json::json!(1)), Some(&la))
            .await
            .unwrap_err();
        assert!(matches!(err, StoreError::LeaseHeld { .. }), "{err:?}");
        assert_eq!(b.load("RUN").await.unwrap().len(), 1);
    });
}
