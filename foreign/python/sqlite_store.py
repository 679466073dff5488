#!/usr/bin/env python3
"""A reference foreign store for fencesim: rulvar's SqliteStore shape in Python (stdlib only).

This file is a test fixture and a worked example of the fencesim store-driver protocol
(docs/foreign-stores.md), not a product. One process is one simulated process: it opens
one sqlite3 connection to the database path the driver gives it and answers one request
at a time on stdin/stdout, JSON Lines, protocol version 1.

Protocol, as this file speaks it:
- Every request is one line `{"id": N, "op": "...", "now_ms": T, ...}`. The store's clock
  is the last `now_ms` received (from a request or a `continue`); it never reads its own.
- Every reply is one line: `{"id": N, "ok": VALUE}` or `{"id": N, "err": {...}}` with a
  code from the closed list (lease_held + reason, journal_order_violation, busy,
  invalid_input, corrupt, config, storage).
- Inside a call the store may write `{"id": N, "hook": POINT, "run_id": R, "epoch": E}`
  and then waits for `{"id": N, "continue": true, "now_ms": T}`; the driver may instead
  SIGKILL the process there (a crash, mid-transaction if one is open). `{"id": N,
  "sleep_ms": MS}` asks the driver to sleep in its time (the boot retry), answered the
  same way.
- Nothing else is written to stdout; diagnostics go to stderr.

Semantics (store-contract.md): WAL, busy timeout 0 (SQLITE_BUSY surfaces as `busy`),
`BEGIN IMMEDIATE` around the fence check and the mutation, owner and epoch pinned in
renew and release, the run-match rule, fenced meta/delete/blobs, the epoch tombstone, a
bounded boot retry. `--flaw v1_44_0` runs rulvar v1.44.0 instead: the fence check is one
autocommit SELECT and the mutation a second autocommit statement, with the
`*.after_check` hook between them (F3), renew/release match the run only, and meta,
delete and blobs ignore the lease.
"""

import argparse
import base64
import json
import re
import signal
import sqlite3
import sys

PROTOCOL = 1
NAME = "python-sqlite-reference"
VERSION = "0.1.0"
SEQ_MAX = (1 << 53) - 1
TTL_MAX = 2147483647
BOOT_DEADLINE_MS = 5000

TABLES = [
    "CREATE TABLE IF NOT EXISTS entries (id INTEGER PRIMARY KEY AUTOINCREMENT, run_id TEXT NOT NULL, payload TEXT NOT NULL)",
    "CREATE TABLE IF NOT EXISTS meta (run_id TEXT PRIMARY KEY, payload TEXT NOT NULL)",
    "CREATE TABLE IF NOT EXISTS leases (run_id TEXT PRIMARY KEY, owner TEXT NOT NULL, epoch INTEGER NOT NULL, expires_at INTEGER NOT NULL)",
    "CREATE TABLE IF NOT EXISTS epochs (run_id TEXT PRIMARY KEY, epoch INTEGER NOT NULL)",
    "CREATE TABLE IF NOT EXISTS blobs (ref TEXT PRIMARY KEY, run_id TEXT NOT NULL, data BLOB NOT NULL)",
]
INDEXES = [
    "CREATE INDEX IF NOT EXISTS entries_by_run ON entries(run_id, id)",
    "CREATE INDEX IF NOT EXISTS entries_run_seq ON entries(run_id, CAST(json_extract(payload,'$.seq') AS INTEGER))",
    "CREATE INDEX IF NOT EXISTS meta_by_status ON meta(json_extract(payload,'$.status'))",
    "CREATE INDEX IF NOT EXISTS meta_by_name ON meta(json_extract(payload,'$.name'))",
    "CREATE INDEX IF NOT EXISTS blobs_by_run ON blobs(run_id)",
]
INSERT_ENTRY_A5 = (
    "INSERT INTO entries(run_id, payload) SELECT ?1, ?2 WHERE NOT EXISTS "
    "(SELECT 1 FROM entries WHERE run_id = ?1 AND CAST(json_extract(payload,'$.seq') AS INTEGER) >= ?3)"
)
UPSERT_META = (
    "INSERT INTO meta(run_id, payload) VALUES (?1, ?2) "
    "ON CONFLICT(run_id) DO UPDATE SET payload = excluded.payload"
)
UPSERT_BLOB = (
    "INSERT INTO blobs(ref, run_id, data) VALUES (?1, ?2, ?3) "
    "ON CONFLICT(ref) DO UPDATE SET run_id = excluded.run_id, data = excluded.data"
)
STATUSES = ["running", "suspended", "ok", "error", "cancelled", "exhausted"]
SAFE = re.compile(r"^[A-Za-z0-9._-]+$")

HOOKS = [
    "sqlite.boot.open", "sqlite.boot.after_wal", "sqlite.boot.schema", "sqlite.boot.before_commit",
    "sqlite.acquire.before_begin", "sqlite.acquire.after_check", "sqlite.acquire.after_epoch",
    "sqlite.acquire.before_commit", "sqlite.acquire.after_commit",
    "sqlite.renew.before_begin", "sqlite.renew.after_check", "sqlite.renew.before_commit",
    "sqlite.renew.after_commit",
    "sqlite.release.before_begin", "sqlite.release.after_check", "sqlite.release.before_commit",
    "sqlite.release.after_commit",
    "sqlite.append.before_begin", "sqlite.append.after_check", "sqlite.append.before_commit",
    "sqlite.append.after_commit",
    "sqlite.put_meta.before_begin", "sqlite.put_meta.after_check", "sqlite.put_meta.before_commit",
    "sqlite.put_meta.after_commit",
    "sqlite.delete.before_begin", "sqlite.delete.after_check", "sqlite.delete.after_entries",
    "sqlite.delete.after_meta", "sqlite.delete.before_commit", "sqlite.delete.after_commit",
    "sqlite.blob_put.before_begin", "sqlite.blob_put.after_check", "sqlite.blob_put.before_commit",
    "sqlite.blob_put.after_commit",
    "sqlite.blob_delete.before_begin", "sqlite.blob_delete.after_check",
    "sqlite.blob_delete.before_commit", "sqlite.blob_delete.after_commit",
    "sqlite.load.before_read", "sqlite.get_meta.before_read", "sqlite.list_runs.before_read",
    "sqlite.blob_get.before_read", "sqlite.blob_list.before_read",
]


class StoreError(Exception):
    """A typed refusal: becomes `{"err": ...}` on the wire."""

    def __init__(self, code, message, **fields):
        super().__init__(message)
        self.body = {"code": code, "message": message}
        self.body.update(fields)


def lease_held(run_id, reason):
    return StoreError("lease_held", "lease held: %s (run %s)" % (reason, run_id), run_id=run_id, reason=reason)


def invalid(what, reason):
    return StoreError("invalid_input", "invalid %s: %s" % (what, reason), what=what)


def sql_error(e, during):
    code = getattr(e, "sqlite_errorcode", None)
    if code is not None and code & 0xFF == 5:
        return StoreError("busy", "database busy (sqlite code %d) during %s" % (code, during), sqlite_code=code, during=during)
    if code is None and "locked" in str(e):
        return StoreError("busy", "database busy during %s" % during, sqlite_code=5, during=during)
    return StoreError("storage", "storage error during %s: %s" % (during, e), during=during)


def safe_segment(s):
    return isinstance(s, str) and s not in (".", "..") and SAFE.match(s) is not None


def check_run_id(run_id):
    if not safe_segment(run_id):
        raise invalid("run id", "%r is not one safe segment ([A-Za-z0-9._-]+, not . or ..)" % (run_id,))


def check_ref(ref):
    if not isinstance(ref, str) or not all(safe_segment(p) for p in ref.split("/")):
        raise invalid("blob ref", "%r has an empty, '.', '..' or unsafe segment" % (ref,))


def run_of_ref(ref):
    return ref.split("/", 1)[0]


class Wire:
    """stdin/stdout JSON Lines; the clock is the last now_ms received."""

    def __init__(self):
        self.now_ms = 0
        self.call_id = None

    def send(self, obj):
        sys.stdout.write(json.dumps(obj, separators=(",", ":")) + "\n")
        sys.stdout.flush()

    def read(self):
        line = sys.stdin.readline()
        if not line:
            sys.exit(0)  # the driver is gone: nothing to answer
        msg = json.loads(line)
        if isinstance(msg, dict) and isinstance(msg.get("now_ms"), int):
            self.now_ms = msg["now_ms"]
        return msg

    def wait_continue(self):
        msg = self.read()
        if not (isinstance(msg, dict) and msg.get("id") == self.call_id and msg.get("continue") is True):
            print("expected continue for call %r, got %r" % (self.call_id, msg), file=sys.stderr)
            sys.exit(3)

    def hook(self, point, run_id=None, epoch=None):
        self.send({"id": self.call_id, "hook": point, "run_id": run_id, "epoch": epoch})
        self.wait_continue()

    def sleep(self, ms):
        self.send({"id": self.call_id, "sleep_ms": ms})
        self.wait_continue()


class Store:
    def __init__(self, wire, flaw):
        self.w = wire
        self.split = flaw == "v1_44_0"
        self.conn = None
        self.ttl_ms = 60000

    # --- construction -------------------------------------------------------------------

    def open(self, req):
        ttl = req.get("ttl_ms", 60000)
        if not isinstance(ttl, int) or isinstance(ttl, bool) or not 1 <= ttl <= TTL_MAX:
            raise StoreError("config", "configuration error: lease ttl must be an integer in 1..=%d ms, got %r" % (TTL_MAX, ttl))
        page = req.get("page_size")
        if page is not None and (not isinstance(page, int) or not 512 <= page <= 65536 or page & (page - 1)):
            raise StoreError("config", "configuration error: page size %r is not a power of two in 512..=65536" % (page,))
        sync = req.get("synchronous", "full")
        if sync not in ("off", "normal", "full"):
            raise StoreError("config", "configuration error: synchronous must be off, normal or full")
        db = req.get("db")
        if not isinstance(db, str) or not db:
            raise StoreError("config", "configuration error: open needs a database path")
        self.ttl_ms = ttl
        self.w.hook("sqlite.boot.open")
        try:
            self.conn = sqlite3.connect(db, timeout=0, isolation_level=None, check_same_thread=False)
        except sqlite3.Error as e:
            raise sql_error(e, "open")
        started = self.w.now_ms
        attempt = 0
        while True:
            try:
                self.bootstrap(page, sync)
                break
            except StoreError as e:
                self.rollback()
                if e.body["code"] != "busy" or self.split:
                    raise  # v1.44.0 had no boot retry
                if self.w.now_ms - started >= BOOT_DEADLINE_MS:
                    raise
                self.w.sleep(2 + attempt % 7)
                attempt += 1
        return {"ttl_ms": self.ttl_ms}

    def bootstrap(self, page, sync):
        during = "schema bootstrap"
        try:
            if page is not None:
                self.conn.execute("PRAGMA page_size=%d" % page)
            self.conn.execute("PRAGMA journal_mode=WAL").fetchall()
            self.conn.execute("PRAGMA synchronous=%s" % sync.upper())
        except sqlite3.Error as e:
            raise sql_error(e, during)
        self.w.hook("sqlite.boot.after_wal")
        self.begin(during)
        self.exec_all(TABLES, during)
        self.w.hook("sqlite.boot.schema")
        self.exec_all(INDEXES, during)
        self.w.hook("sqlite.boot.before_commit")
        self.commit(during)

    # --- plumbing -----------------------------------------------------------------------

    def exec_all(self, sqls, during):
        for sql in sqls:
            self.x(sql, (), during)

    def x(self, sql, params, during):
        try:
            return self.conn.execute(sql, params)
        except sqlite3.Error as e:
            raise sql_error(e, during)

    def begin(self, during):
        self.x("BEGIN IMMEDIATE", (), during)

    def commit(self, during):
        self.x("COMMIT", (), during)

    def rollback(self):
        if self.conn is not None and self.conn.in_transaction:
            try:
                self.conn.execute("ROLLBACK")
            except sqlite3.Error:
                pass

    def now(self):
        return self.w.now_ms

    def check_fence(self, lease):
        row = self.x("SELECT owner, epoch, expires_at FROM leases WHERE run_id = ?1", (lease["run_id"],), "fence check").fetchone()
        if row is None:
            raise lease_held(lease["run_id"], "not_held")
        owner, epoch, expires_at = row
        if epoch != lease["epoch"]:
            raise lease_held(lease["run_id"], "stale_epoch")
        if owner != lease["owner"]:
            raise lease_held(lease["run_id"], "foreign_owner")
        if expires_at <= self.now():
            raise lease_held(lease["run_id"], "expired")

    def guard(self, surface_fenced, lease, run_id):
        """The lease to enforce, after the run-match rule (absent in v1.44.0)."""
        if lease is None or not surface_fenced:
            return None
        if not self.split and lease["run_id"] != run_id:
            raise lease_held(run_id, "run_mismatch")
        return lease

    def mutate(self, op, run_id, fence, carried, steps, during):
        """steps: list of (sql, params-or-callable, then_hook, expect_a5_seq)."""
        p = "sqlite.%s." % op
        self.w.hook(p + "before_begin", run_id, carried)
        if fence is not None and not self.split:
            self.begin(during)
            self.check_fence(fence)
            self.w.hook(p + "after_check", run_id, carried)
            self.run_steps(steps, run_id, carried, during)
            self.w.hook(p + "before_commit", run_id, carried)
            self.commit(during)
        elif fence is not None:
            # v1.44.0 (F3): the check commits on its own, the mutation follows separately.
            self.check_fence(fence)
            self.w.hook(p + "after_check", run_id, carried)
            self.unfenced(p, steps, run_id, carried, during)
        else:
            self.unfenced(p, steps, run_id, carried, during)
        self.w.hook(p + "after_commit", run_id, carried)

    def unfenced(self, p, steps, run_id, carried, during):
        if len(steps) == 1:
            self.run_steps(steps, run_id, carried, during)
            return
        self.begin(during)
        self.run_steps(steps, run_id, carried, during)
        self.w.hook(p + "before_commit", run_id, carried)
        self.commit(during)

    def run_steps(self, steps, run_id, carried, during):
        for sql, params, then, a5 in steps:
            if callable(params):
                params = params()
            cur = self.x(sql, params, during)
            if a5 is not None and cur.rowcount == 0:
                raise StoreError(
                    "journal_order_violation",
                    "journal order violation on run %s: seq %d is not above the stored tail" % (run_id, a5),
                    run_id=run_id,
                    seq=a5,
                )
            if then is not None:
                self.w.hook(then, run_id, carried)

    # --- the SPI ------------------------------------------------------------------------

    def append(self, req):
        run_id = req.get("run_id")
        check_run_id(run_id)
        text = req.get("entry")
        try:
            entry = json.loads(text, object_pairs_hook=record) if isinstance(text, str) else None
        except ValueError as e:
            raise invalid("journal entry", str(e))
        named_once(entry, "journal entry")
        if not isinstance(entry, dict):
            raise invalid("journal entry", "not a JSON object")
        seq = entry.get("seq")
        if not isinstance(seq, int) or isinstance(seq, bool) or not 0 <= seq <= SEQ_MAX:
            raise invalid("journal entry seq", "seq must be a finite integer in 0..=%d, got %r" % (SEQ_MAX, seq))
        lease = req.get("lease")
        fence = self.guard(True, lease, run_id)
        step = (INSERT_ENTRY_A5, (run_id, text, seq), None, seq)
        self.mutate("append", run_id, fence, epoch_of(lease), [step], "append")

    def load(self, req):
        run_id = req.get("run_id")
        check_run_id(run_id)
        self.w.hook("sqlite.load.before_read", run_id)
        rows = self.x("SELECT payload FROM entries WHERE run_id = ?1 ORDER BY id", (run_id,), "load").fetchall()
        return [r[0] for r in rows]

    def put_meta(self, req):
        text = req.get("meta")
        meta = parse_meta_arg(text)
        run_id = meta["runId"]
        lease = req.get("lease")
        fence = self.guard(not self.split, lease, run_id)
        step = (UPSERT_META, (run_id, text), None, None)
        self.mutate("put_meta", run_id, fence, epoch_of(lease), [step], "put_meta")

    def get_meta(self, req):
        run_id = req.get("run_id")
        check_run_id(run_id)
        self.w.hook("sqlite.get_meta.before_read", run_id)
        row = self.x("SELECT payload FROM meta WHERE run_id = ?1", (run_id,), "get_meta").fetchone()
        return None if row is None else row[0]

    def list_runs(self, req):
        f = req.get("filter") or {}
        if not isinstance(f, dict):
            raise invalid("run filter", "not an object")
        self.w.hook("sqlite.list_runs.before_read", "")
        sql = "SELECT run_id, payload FROM meta"
        clauses, params = [], []
        if f.get("status") is not None or f.get("statuses") is not None:
            wanted = ([f["status"]] if f.get("status") is not None else []) + list(f.get("statuses") or [])
            if not wanted:
                clauses.append("1 = 0")
            else:
                marks = []
                for s in wanted:
                    params.append(s)
                    marks.append("?%d" % len(params))
                clauses.append("json_extract(payload,'$.status') IN (%s)" % ", ".join(marks))
        if f.get("name") is not None:
            params.append(f["name"])
            clauses.append("json_extract(payload,'$.name') = ?%d" % len(params))
        if clauses:
            sql += " WHERE " + " AND ".join(clauses)
        sql += " ORDER BY run_id"
        out = []
        for run_id, payload in self.x(sql, params, "list_runs").fetchall():
            try:
                meta = json.loads(payload)
            except ValueError as e:
                raise StoreError("corrupt", "corrupt stored meta payload for %s: %s" % (run_id, e), what="meta payload", key=run_id)
            tags = f.get("tags")
            if tags is not None and not all(t in (meta.get("tags") or []) for t in tags):
                continue
            out.append(payload)
        return out

    def delete(self, req):
        run_id = req.get("run_id")
        check_run_id(run_id)
        lease = req.get("lease")
        fence = self.guard(not self.split, lease, run_id)
        steps = [
            ("DELETE FROM entries WHERE run_id = ?1", (run_id,), "sqlite.delete.after_entries", None),
            ("DELETE FROM meta WHERE run_id = ?1", (run_id,), "sqlite.delete.after_meta", None),
            ("DELETE FROM leases WHERE run_id = ?1", (run_id,), None, None),
        ]
        if self.split:
            # Before v1.63.0 the epoch high-water mark went with the run.
            steps.append(("DELETE FROM epochs WHERE run_id = ?1", (run_id,), None, None))
        # Deletion is always one transaction: force the transactional path for one step too.
        self.mutate("delete", run_id, fence, epoch_of(lease), steps, "delete")

    def acquire(self, req):
        run_id = req.get("run_id")
        check_run_id(run_id)
        owner = req.get("owner")
        if not isinstance(owner, str) or not owner:
            raise invalid("lease owner", "owner must not be empty")
        during = "acquire"
        self.w.hook("sqlite.acquire.before_begin", run_id)
        self.begin(during)
        row = self.x("SELECT expires_at FROM leases WHERE run_id = ?1", (run_id,), during).fetchone()
        if row is not None and row[0] > self.now():
            raise lease_held(run_id, "held_on_acquire")
        self.w.hook("sqlite.acquire.after_check", run_id)
        row = self.x("SELECT epoch FROM epochs WHERE run_id = ?1", (run_id,), during).fetchone()
        epoch = max(row[0] if row else 0, 0) + 1
        self.x(
            "INSERT INTO epochs(run_id, epoch) VALUES (?1, ?2) ON CONFLICT(run_id) DO UPDATE SET epoch = excluded.epoch",
            (run_id, epoch),
            during,
        )
        self.w.hook("sqlite.acquire.after_epoch", run_id, epoch)
        self.x(
            "INSERT INTO leases(run_id, owner, epoch, expires_at) VALUES (?1, ?2, ?3, ?4) "
            "ON CONFLICT(run_id) DO UPDATE SET owner = excluded.owner, epoch = excluded.epoch, expires_at = excluded.expires_at",
            (run_id, owner, epoch, self.now() + self.ttl_ms),
            during,
        )
        self.w.hook("sqlite.acquire.before_commit", run_id, epoch)
        self.commit(during)
        self.w.hook("sqlite.acquire.after_commit", run_id, epoch)
        return {"run_id": run_id, "owner": owner, "epoch": epoch}

    def renew(self, req):
        lease = parse_lease(req.get("lease"))
        if self.split:
            step = ("UPDATE leases SET expires_at = ?2 WHERE run_id = ?1", lambda: (lease["run_id"], self.now() + self.ttl_ms), None, None)
        else:
            step = (
                "UPDATE leases SET expires_at = ?2 WHERE run_id = ?1 AND owner = ?3 AND epoch = ?4",
                lambda: (lease["run_id"], self.now() + self.ttl_ms, lease["owner"], lease["epoch"]),
                None,
                None,
            )
        self.mutate("renew", lease["run_id"], lease, lease["epoch"], [step], "renew")

    def release(self, req):
        lease = parse_lease(req.get("lease"))
        if self.split:
            step = ("DELETE FROM leases WHERE run_id = ?1", (lease["run_id"],), None, None)
        else:
            step = (
                "DELETE FROM leases WHERE run_id = ?1 AND owner = ?2 AND epoch = ?3",
                (lease["run_id"], lease["owner"], lease["epoch"]),
                None,
                None,
            )
        self.mutate("release", lease["run_id"], lease, lease["epoch"], [step], "release")

    def blob_put(self, req):
        ref = req.get("ref")
        check_ref(ref)
        try:
            data = base64.b64decode(req.get("data") or "", validate=True)
        except ValueError as e:
            raise invalid("blob bytes", "not base64: %s" % e)
        run_id = run_of_ref(ref)
        lease = req.get("lease")
        fence = self.guard(not self.split, lease, run_id)
        step = (UPSERT_BLOB, (ref, run_id, data), None, None)
        self.mutate("blob_put", run_id, fence, epoch_of(lease), [step], "blob put")

    def blob_get(self, req):
        ref = req.get("ref")
        check_ref(ref)
        self.w.hook("sqlite.blob_get.before_read", run_of_ref(ref))
        row = self.x("SELECT data FROM blobs WHERE ref = ?1", (ref,), "blob get").fetchone()
        return None if row is None else base64.b64encode(bytes(row[0])).decode("ascii")

    def blob_list(self, req):
        run_id = req.get("run_id")
        check_run_id(run_id)
        self.w.hook("sqlite.blob_list.before_read", run_id)
        rows = self.x("SELECT ref FROM blobs WHERE run_id = ?1 AND ref <> run_id ORDER BY ref", (run_id,), "blob list")
        return [r[0] for r in rows.fetchall()]

    def blob_delete(self, req):
        ref = req.get("ref")
        check_ref(ref)
        run_id = run_of_ref(ref)
        lease = req.get("lease")
        fence = self.guard(not self.split, lease, run_id)
        step = ("DELETE FROM blobs WHERE ref = ?1", (ref,), None, None)
        self.mutate("blob_delete", run_id, fence, epoch_of(lease), [step], "blob delete")


def epoch_of(lease):
    return lease["epoch"] if isinstance(lease, dict) else None


def parse_lease(lease):
    if not (
        isinstance(lease, dict)
        and isinstance(lease.get("owner"), str)
        and isinstance(lease.get("epoch"), int)
        and not isinstance(lease.get("epoch"), bool)
    ):
        raise invalid("lease", "expected {run_id, owner, epoch}")
    check_run_id(lease.get("run_id"))
    return lease


class Record(dict):
    """A decoded JSON object that remembers whether its text named a field twice."""
    repeats = False


def record(pairs):
    out = Record(pairs)
    out.repeats = len(out) != len(pairs)
    return out


def named_once(obj, what):
    """A record names each of its fields once (store contract 1.1): a text naming one
    twice has no one reading, so it is malformed."""
    if getattr(obj, "repeats", False):
        raise invalid(what, "a field is named twice")
    return obj


def parse_meta_arg(text):
    try:
        meta = json.loads(text, object_pairs_hook=record) if isinstance(text, str) else None
    except ValueError as e:
        raise invalid("run meta", str(e))
    named_once(meta, "run meta")
    if not isinstance(meta, dict) or meta.get("status") not in STATUSES:
        raise invalid("run meta", "expected an object with runId and a known status")
    check_run_id(meta.get("runId"))
    return meta


CALLS = ["append", "load", "put_meta", "get_meta", "list_runs", "delete", "acquire", "renew",
         "release", "blob_put", "blob_get", "blob_list", "blob_delete"]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--flaw", choices=["v1_44_0"], help="run rulvar v1.44.0's split check-then-mutate (F3)")
    args = ap.parse_args()
    # Ctrl-C reaches the whole process group: die quietly, the driver reaps us.
    signal.signal(signal.SIGINT, lambda *_: sys.exit(130))
    wire = Wire()
    store = Store(wire, args.flaw)
    while True:
        req = wire.read()
        if not isinstance(req, dict) or not isinstance(req.get("id"), int):
            print("not a request: %r" % (req,), file=sys.stderr)
            sys.exit(3)
        wire.call_id = req["id"]
        op = req.get("op")
        try:
            if op == "hello":
                value = {
                    "protocol": PROTOCOL,
                    "store": NAME,
                    "version": VERSION + ("+flaw.v1_44_0" if store.split else ""),
                    "capabilities": {"fenced_writes": not store.split, "transcripts": True,
                                     "transcripts_fenced": not store.split},
                    "hooks": HOOKS,
                }
            elif op == "open":
                value = store.open(req)
            elif op == "close":
                wire.send({"id": req["id"], "ok": None})
                return
            elif op in CALLS:
                if store.conn is None:
                    raise StoreError("config", "configuration error: the store is not open")
                value = getattr(store, op)(req)
            else:
                raise invalid("request", "unknown op %r" % (op,))
            wire.send({"id": req["id"], "ok": value})
        except StoreError as e:
            store.rollback()
            wire.send({"id": req["id"], "err": e.body})


if __name__ == "__main__":
    main()
