//! Bad input gets a typed error and changes nothing: unsafe run ids and refs on every
//! method that takes them, out-of-range ttls (refused before the database file exists),
//! leases for another run (`RunMismatch`), stored payloads that do not decode (`Corrupt`),
//! and seqs that are not finite integers (`InvalidInput`). "Nothing changed" is verified by
//! dumping every table through a raw connection before and after.

use std::path::{Path, PathBuf};
use std::rc::Rc;

use futures::executor::block_on;
use serde_json::json;
use store::{
    Epoch, InMemoryStore, JournalEntry, JournalStore, LeasableStore, Lease, LeaseRefusal, ManualClock,
    ManualEnv, MetaLookup, RunFilter, RunMeta, RunStatus, SqliteOptions, SqliteStore, SqliteTranscripts,
    StoreError, TranscriptStore,
};

const BAD_RUN_IDS: &[&str] = &["", ".", "..", "a/b", "../x"];
const BAD_REFS: &[&str] = &["run/../x", "run//x", "", "run/./x", "/run/x", "run/x/"];

struct Fixture {
    _dir: tempfile::TempDir,
    path: PathBuf,
    store: SqliteStore,
    blobs: SqliteTranscripts,
    /// The live lease of `run`.
    lease: Lease,
    /// A live lease of `other`.
    other: Lease,
}

fn entry(seq: u64) -> JournalEntry {
    JournalEntry::new(seq, "bad.input", "ok", json!({ "seq": seq }))
}

/// A store over a temp file with some state: `run` leased, with one entry, meta and a blob;
/// `other` leased.
fn fixture() -> Fixture {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("bad.db");
    block_on(async {
        let env = Rc::new(ManualEnv::new(ManualClock::starting_at(1_000_000)));
        let store = SqliteStore::open(SqliteOptions::new(&path).ttl_ms(600_000), env).await.expect("open");
        let blobs = store.transcripts();
        let lease = store.acquire("run", "worker").await.expect("acquire run");
        let other = store.acquire("other", "worker").await.expect("acquire other");
        store.append("run", &entry(0), Some(&lease)).await.expect("append");
        store.put_meta(&RunMeta::new("run", RunStatus::Running), Some(&lease)).await.expect("meta");
        blobs.put("run/ckpt/1", &[1, 2, 3], Some(&lease)).await.expect("blob");
        Fixture { _dir: dir, path, store, blobs, lease, other }
    })
}

/// Every row of every table, through a raw connection to the same file.
fn dump(path: &Path) -> String {
    let conn = rusqlite::Connection::open(path).expect("raw connection");
    let mut out = String::new();
    for sql in [
        "SELECT id, run_id, payload FROM entries ORDER BY id",
        "SELECT run_id, payload FROM meta ORDER BY run_id",
        "SELECT run_id, owner, epoch, expires_at FROM leases ORDER BY run_id",
        "SELECT run_id, epoch FROM epochs ORDER BY run_id",
        "SELECT ref, run_id, hex(data) FROM blobs ORDER BY ref",
    ] {
        let mut stmt = conn.prepare(sql).expect("prepare dump");
        let width = stmt.column_count();
        let rows = stmt
            .query_map([], |r| {
                (0..width).map(|i| r.get::<_, rusqlite::types::Value>(i)).collect::<Result<Vec<_>, _>>()
            })
            .expect("query dump");
        out.push_str(sql);
        out.push('\n');
        for row in rows {
            out.push_str(&format!("  {:?}\n", row.expect("row")));
        }
    }
    out
}

fn assert_invalid<T: std::fmt::Debug>(r: Result<T, StoreError>, what: &str) {
    assert!(matches!(r, Err(StoreError::InvalidInput { .. })), "{what}: expected InvalidInput, got {r:?}");
}

#[test]
fn unsafe_run_ids_are_refused_on_every_method_and_change_nothing() {
    let f = fixture();
    let before = dump(&f.path);
    block_on(async {
        for &id in BAD_RUN_IDS {
            let bad_lease = Lease { run_id: id.to_string(), owner: "worker".into(), epoch: Epoch(1) };
            assert_invalid(f.store.append(id, &entry(1), None).await, &format!("append({id:?})"));
            assert_invalid(
                f.store.append(id, &entry(1), Some(&bad_lease)).await,
                &format!("leased append({id:?})"),
            );
            assert_invalid(f.store.load(id).await, &format!("load({id:?})"));
            let meta = RunMeta::new(id, RunStatus::Running);
            assert_invalid(f.store.put_meta(&meta, None).await, &format!("put_meta({id:?})"));
            assert_invalid(
                f.store.put_meta(&meta, Some(&bad_lease)).await,
                &format!("leased put_meta({id:?})"),
            );
            assert_invalid(f.store.get_meta(id).await, &format!("get_meta({id:?})"));
            assert_invalid(f.store.delete(id, None).await, &format!("delete({id:?})"));
            assert_invalid(f.store.delete(id, Some(&bad_lease)).await, &format!("leased delete({id:?})"));
            assert_invalid(f.store.acquire(id, "worker").await, &format!("acquire({id:?})"));
            assert_invalid(f.store.renew(&bad_lease).await, &format!("renew({id:?})"));
            assert_invalid(f.store.release(&bad_lease).await, &format!("release({id:?})"));
            assert_invalid(f.blobs.list(id).await, &format!("list({id:?})"));
        }
        // The existing data is still readable and intact.
        assert_eq!(f.store.load("run").await.expect("load").len(), 1);
    });
    assert_eq!(dump(&f.path), before, "an invalid run id changed the database");
}

#[test]
fn unsafe_refs_are_refused_on_every_method_and_change_nothing() {
    let f = fixture();
    let before = dump(&f.path);
    block_on(async {
        for &r in BAD_REFS {
            assert_invalid(f.blobs.put(r, &[9], None).await, &format!("put({r:?})"));
            assert_invalid(f.blobs.put(r, &[9], Some(&f.lease)).await, &format!("leased put({r:?})"));
            assert_invalid(f.blobs.get(r).await, &format!("get({r:?})"));
            assert_invalid(f.blobs.delete(r, None).await, &format!("delete({r:?})"));
            assert_invalid(f.blobs.delete(r, Some(&f.lease)).await, &format!("leased delete({r:?})"));
        }
        assert_eq!(f.blobs.get("run/ckpt/1").await.expect("get"), Some(vec![1, 2, 3]));
    });
    assert_eq!(dump(&f.path), before, "an invalid ref changed the database");
}

#[test]
fn empty_owner_is_refused_and_changes_nothing() {
    let f = fixture();
    let before = dump(&f.path);
    assert_invalid(block_on(f.store.acquire("fresh", "")), "acquire with an empty owner");
    assert_eq!(dump(&f.path), before);
    // The in-memory store refuses it the same way (it granted the empty owner a lease).
    let env: std::rc::Rc<dyn store::Env> =
        std::rc::Rc::new(store::ManualEnv::new(ManualClock::starting_at(1_000)));
    let memory = InMemoryStore::new(env, 250).expect("a store");
    assert_invalid(block_on(memory.acquire("fresh", "")), "acquire with an empty owner (memory)");
    assert!(
        block_on(memory.acquire("fresh", "w")).is_ok_and(|l| l.epoch == Epoch(1)),
        "the refusal took no epoch"
    );
}

#[test]
fn a_field_that_repeats_a_named_one_is_refused_and_changes_nothing() {
    let f = fixture();
    let before = dump(&f.path);
    let mut e = entry(1);
    e.extra.insert("status".into(), serde_json::Value::from("ok"));
    assert_invalid(block_on(f.store.append("run", &e, None)), "append whose extra repeats status");
    let mut m = RunMeta::new("run", RunStatus::Running);
    m.extra.insert("runId".into(), serde_json::Value::from("other"));
    assert_invalid(block_on(f.store.put_meta(&m, None)), "put_meta whose extra repeats runId");
    assert_eq!(dump(&f.path), before);
}

#[test]
fn out_of_range_ttl_is_a_config_error_before_the_database_file_exists() {
    for ttl in [0, -1, 2_147_483_648, i64::MIN, i64::MAX] {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("ttl.db");
        let env = Rc::new(ManualEnv::new(ManualClock::starting_at(0)));
        let r = block_on(SqliteStore::open(SqliteOptions::new(&path).ttl_ms(ttl), env.clone()));
        assert!(matches!(r, Err(StoreError::Config(_))), "ttl {ttl}: expected Config, got {:?}", r.err());
        assert!(!path.exists(), "ttl {ttl}: the database file was created");
        let leftovers: Vec<_> = std::fs::read_dir(dir.path()).expect("read dir").collect();
        assert!(leftovers.is_empty(), "ttl {ttl}: files were created: {leftovers:?}");
        let r = InMemoryStore::new(env, ttl);
        assert!(matches!(r, Err(StoreError::Config(_))), "in-memory ttl {ttl}: expected Config");
    }
}

#[test]
fn a_page_size_sqlite_cannot_use_is_a_config_error_before_the_database_file_exists() {
    for bytes in [0, 256, 1000, 131_072, 4097] {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("pages.db");
        let env = Rc::new(ManualEnv::new(ManualClock::starting_at(0)));
        let r = block_on(SqliteStore::open(SqliteOptions::new(&path).page_size(bytes), env));
        assert!(
            matches!(r, Err(StoreError::Config(_))),
            "page size {bytes}: expected Config, got {:?}",
            r.err()
        );
        let leftovers: Vec<_> = std::fs::read_dir(dir.path()).expect("read dir").collect();
        assert!(leftovers.is_empty(), "page size {bytes}: files were created: {leftovers:?}");
    }
}

#[test]
fn the_page_size_applies_to_a_new_file_only() {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("pages.db");
    let env = Rc::new(ManualEnv::new(ManualClock::starting_at(0)));
    let page_size = |p: &Path| -> i64 {
        rusqlite::Connection::open(p)
            .expect("open")
            .query_row("PRAGMA page_size", [], |r| r.get(0))
            .expect("read")
    };
    let first =
        block_on(SqliteStore::open(SqliteOptions::new(&path).page_size(1024), env.clone())).expect("open");
    assert_eq!(page_size(&path), 1024);
    // A second store asking for another size over the same file changes nothing.
    let second =
        block_on(SqliteStore::open(SqliteOptions::new(&path).page_size(8192), env.clone())).expect("open");
    assert_eq!(page_size(&path), 1024);
    drop((first, second));
    let other = dir.path().join("default.db");
    let _default = block_on(SqliteStore::open(SqliteOptions::new(&other), env)).expect("open");
    assert_eq!(page_size(&other), 4096, "the default is SQLite's");
}

#[test]
fn boundary_ttls_are_accepted() {
    for ttl in [1, 2_147_483_647] {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("ttl.db");
        let env = Rc::new(ManualEnv::new(ManualClock::starting_at(0)));
        let store = block_on(SqliteStore::open(SqliteOptions::new(&path).ttl_ms(ttl), env)).expect("open");
        assert_eq!(store.ttl_ms(), ttl);
        assert!(path.exists());
    }
}

fn assert_run_mismatch<T: std::fmt::Debug>(r: Result<T, StoreError>, what: &str) {
    assert!(
        matches!(&r, Err(StoreError::LeaseHeld { reason: LeaseRefusal::RunMismatch, run_id }) if run_id == "run"),
        "{what}: expected LeaseHeld(RunMismatch) on run, got {r:?}"
    );
}

#[test]
fn a_lease_for_another_run_is_refused_with_run_mismatch_and_changes_nothing() {
    let f = fixture();
    let before = dump(&f.path);
    block_on(async {
        let o = Some(&f.other);
        assert_run_mismatch(f.store.append("run", &entry(1), o).await, "append");
        let meta = RunMeta::new("run", RunStatus::Cancelled);
        assert_run_mismatch(f.store.put_meta(&meta, o).await, "put_meta");
        assert_run_mismatch(f.store.delete("run", o).await, "delete");
        assert_run_mismatch(f.blobs.put("run/ckpt/1", &[7], o).await, "blob put");
        assert_run_mismatch(f.blobs.put("run/ckpt/2", &[7], o).await, "blob put of a new ref");
        assert_run_mismatch(f.blobs.delete("run/ckpt/1", o).await, "blob delete");
        assert_run_mismatch(f.blobs.delete("run/missing", o).await, "blob delete of a missing ref");
    });
    assert_eq!(dump(&f.path), before, "a cross-run lease changed the database");
}

fn assert_corrupt<T: std::fmt::Debug>(r: Result<T, StoreError>, what: &str) {
    assert!(matches!(r, Err(StoreError::Corrupt { .. })), "{what}: expected Corrupt, got {r:?}");
}

/// Payloads that are valid JSON (SQLite's expression indexes refuse malformed JSON) but do
/// not decode: the store must say Corrupt, not guess.
#[test]
fn undecodable_stored_payloads_are_corrupt_and_change_nothing() {
    let f = fixture();
    {
        let raw = rusqlite::Connection::open(&f.path).expect("raw connection");
        for (run, payload) in [
            ("e-array", "[1,2,3]"),
            ("e-seq-float", r#"{"seq":1.5,"kind":"k","status":"ok"}"#),
            ("e-seq-string", r#"{"seq":"3","kind":"k","status":"ok"}"#),
            ("e-no-kind", r#"{"seq":0,"status":"ok"}"#),
        ] {
            raw.execute("INSERT INTO entries(run_id, payload) VALUES (?1, ?2)", [run, payload])
                .expect("insert");
        }
        raw.execute(
            "INSERT INTO meta(run_id, payload) VALUES ('m-status', ?1)",
            [r#"{"runId":"m-status","status":"zombie"}"#],
        )
        .expect("insert");
    }
    let before = dump(&f.path);
    block_on(async {
        for run in ["e-array", "e-seq-float", "e-seq-string", "e-no-kind"] {
            assert_corrupt(f.store.load(run).await, &format!("load({run})"));
        }
        assert_corrupt(f.store.get_meta("m-status").await, "get_meta(m-status)");
        assert_corrupt(f.store.list_runs(&RunFilter::default()).await, "list_runs()");
        // Other runs stay readable.
        assert_eq!(f.store.load("run").await.expect("load run").len(), 1);
        assert!(f.store.get_meta("run").await.expect("get_meta run").is_some());
    });
    assert_eq!(dump(&f.path), before, "reading corrupt payloads changed the database");
}

/// Text that is not JSON at all, written by another tool that dropped the expression
/// indexes first: load, get_meta and list_runs say Corrupt.
#[test]
fn garbage_stored_payloads_are_corrupt_and_change_nothing() {
    let f = fixture();
    {
        let raw = rusqlite::Connection::open(&f.path).expect("raw connection");
        raw.execute_batch(
            "DROP INDEX entries_run_seq; DROP INDEX meta_by_status; DROP INDEX meta_by_name;
             INSERT INTO entries(run_id, payload) VALUES ('garbage', 'not json {');
             INSERT INTO meta(run_id, payload) VALUES ('garbage', '{\"runId\": \"garbage\", \"sta');",
        )
        .expect("write garbage");
    }
    let before = dump(&f.path);
    block_on(async {
        assert_corrupt(f.store.load("garbage").await, "load(garbage)");
        assert_corrupt(f.store.get_meta("garbage").await, "get_meta(garbage)");
        assert_corrupt(f.store.list_runs(&RunFilter::default()).await, "list_runs()");
        assert_eq!(f.store.load("run").await.expect("load run").len(), 1);
    });
    assert_eq!(dump(&f.path), before, "reading garbage changed the database");
}

#[test]
fn a_seq_that_is_not_a_finite_integer_is_invalid_input() {
    for seq in ["1.5", "-1", "\"3\"", "1e300", "null", "9007199254740992", "true", "[]"] {
        let text = format!(r#"{{"seq":{seq},"kind":"k","status":"ok","value":null}}"#);
        assert_invalid(JournalEntry::from_json(&text), &format!("seq {seq}"));
    }
    assert_invalid(JournalEntry::from_json(r#"{"kind":"k","status":"ok"}"#), "missing seq");
    assert_invalid(JournalEntry::from_json("not json"), "not JSON");
    // The boundary is accepted.
    let max =
        JournalEntry::from_json(r#"{"seq":9007199254740991,"kind":"k","status":"ok"}"#).expect("max seq");
    assert_eq!(max.seq.0, (1 << 53) - 1);
}

#[test]
fn an_entry_built_with_an_out_of_range_seq_is_refused_on_append_and_changes_nothing() {
    let f = fixture();
    let before = dump(&f.path);
    let huge = entry(1 << 53);
    assert_invalid(block_on(f.store.append("run", &huge, Some(&f.lease))), "leased append of seq 2^53");
    assert_invalid(block_on(f.store.append("run", &huge, None)), "append of seq 2^53");
    assert_eq!(dump(&f.path), before);
}

#[test]
fn in_memory_store_refuses_unsafe_run_ids_and_refs_and_changes_nothing() {
    let env = Rc::new(ManualEnv::new(ManualClock::starting_at(0)));
    let store = InMemoryStore::new(env, 600_000).expect("in-memory store");
    let blobs = store::InMemoryTranscriptStore::new();
    block_on(async {
        store.append("run", &entry(0), None).await.expect("append");
        store.put_meta(&RunMeta::new("run", RunStatus::Running), None).await.expect("meta");
        blobs.put("run/ckpt/1", &[1], None).await.expect("blob");
        for &id in BAD_RUN_IDS {
            let bad_lease = Lease { run_id: id.to_string(), owner: "w".into(), epoch: Epoch(1) };
            assert_invalid(store.append(id, &entry(1), None).await, "append");
            assert_invalid(store.load(id).await, "load");
            assert_invalid(store.put_meta(&RunMeta::new(id, RunStatus::Running), None).await, "put_meta");
            assert_invalid(store.get_meta(id).await, "get_meta");
            assert_invalid(store.delete(id, None).await, "delete");
            assert_invalid(store.acquire(id, "w").await, "acquire");
            assert_invalid(store.renew(&bad_lease).await, "renew");
            assert_invalid(store.release(&bad_lease).await, "release");
            assert_invalid(blobs.list(id).await, "list");
        }
        for &r in BAD_REFS {
            assert_invalid(blobs.put(r, &[9], None).await, "put");
            assert_invalid(blobs.get(r).await, "get");
            assert_invalid(blobs.delete(r, None).await, "delete");
        }
        assert_eq!(store.load("run").await.expect("load").len(), 1);
        assert_eq!(store.list_runs(&RunFilter::default()).await.expect("list").len(), 1);
        assert_eq!(blobs.list("run").await.expect("list"), vec!["run/ckpt/1".to_string()]);
        assert_eq!(blobs.get("run/ckpt/1").await.expect("get"), Some(vec![1]));
    });
}
