"""The embedded store: one SQLite file in WAL mode, shared safely by several processes.

Every write is one ``BEGIN IMMEDIATE`` transaction, so writers queue on SQLite's lock
(``busy_timeout``) instead of failing half-way; a lock held longer than that is retried
with backoff, then reported as StoreUnavailable naming the file.
"""

from __future__ import annotations

import builtins
import contextlib
import json
import os
import sqlite3
import threading
from collections.abc import Callable
from os import PathLike
from pathlib import Path
from typing import Any, TypeVar

from interlock.runtime.store._common import (
    agent_exists,
    agent_from,
    agent_params,
    check_entries,
    check_key,
    check_ttl,
    dead_from,
    dead_params,
    dumps,
    entry_from,
    fanout_exists,
    fanout_from,
    fanout_params,
    fence,
    invocation_exists,
    invocation_from,
    invocation_params,
    journal_params,
    lease_from,
    not_found,
    queued_from,
    session_from,
    session_params,
)
from interlock.runtime.store._retry import Backoff, OnRetry, retry
from interlock.runtime.store._sql import (
    AGENT_COLUMNS,
    FANOUT_COLUMNS,
    INVOCATION_COLUMNS,
    SESSION_COLUMNS,
)
from interlock.runtime.store._sql import SQLITE as SQL
from interlock.runtime.store.base import (
    AgentRecord,
    CancelRequest,
    DeadLetter,
    FanoutRecord,
    InvocationRecord,
    JournalEntry,
    Lease,
    QueuedEvent,
    SessionExists,
    SessionRow,
    SpecSource,
    StoreError,
    StoreUnavailable,
)

T = TypeVar("T")

# Schema migrations: step N (1-based) brings the schema from version N-1 to N. Append only.
MIGRATIONS: list[tuple[str, ...]] = [
    (
        """CREATE TABLE sessions (
            id TEXT PRIMARY KEY,
            spec_name TEXT NOT NULL,
            spec_path TEXT NOT NULL,
            spec_hash TEXT NOT NULL,
            spec_text TEXT NOT NULL,
            status TEXT NOT NULL,
            seq INTEGER NOT NULL,
            snapshot TEXT NOT NULL,
            created_at REAL NOT NULL,
            updated_at REAL NOT NULL,
            lease_owner TEXT,
            lease_token INTEGER NOT NULL DEFAULT 0,
            lease_expires_at REAL
        )""",
        """CREATE TABLE journal (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            session_id TEXT NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
            seq INTEGER NOT NULL,
            at REAL NOT NULL,
            kind TEXT NOT NULL,
            event TEXT,
            data TEXT NOT NULL,
            before_states TEXT NOT NULL,
            after_states TEXT NOT NULL,
            note TEXT
        )""",
        "CREATE INDEX journal_by_session ON journal (session_id, seq, id)",
        """CREATE TRIGGER journal_append_only BEFORE UPDATE ON journal
           BEGIN SELECT RAISE(ABORT, 'the journal is append-only'); END""",
        """CREATE TABLE inbox (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            session_id TEXT NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
            event TEXT NOT NULL,
            data TEXT NOT NULL,
            enqueued_at REAL NOT NULL
        )""",
        "CREATE INDEX inbox_by_session ON inbox (session_id, id)",
    ),
    (  # 2: agent process groups; no foreign key, a dispatch need not belong to a session
        """CREATE TABLE agents (
            id TEXT PRIMARY KEY,
            pgid INTEGER NOT NULL,
            pid INTEGER NOT NULL,
            owner TEXT NOT NULL,
            argv TEXT NOT NULL,
            started_at REAL NOT NULL,
            session_id TEXT
        )""",
    ),
    (  # 3: offer keys, kept after their queued event is consumed (no foreign key on inbox_id)
        """CREATE TABLE deliveries (
            session_id TEXT NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
            key TEXT NOT NULL,
            inbox_id INTEGER NOT NULL,
            at REAL NOT NULL,
            PRIMARY KEY (session_id, key)
        )""",
    ),
    (  # 4: lifecycle: stored statuses renamed, lease start, cancel requests, dead letters
        "UPDATE sessions SET status = 'active' WHERE status = 'running'",
        "UPDATE sessions SET status = 'finished' WHERE status = 'final'",
        "ALTER TABLE sessions ADD COLUMN lease_acquired_at REAL",
        "ALTER TABLE sessions ADD COLUMN cancel_reason TEXT",
        "ALTER TABLE sessions ADD COLUMN cancel_requested_at REAL",
        """CREATE TABLE dead_letters (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            session_id TEXT NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
            kind TEXT NOT NULL,
            event TEXT NOT NULL,
            data TEXT NOT NULL,
            failed_at REAL NOT NULL,
            error TEXT NOT NULL
        )""",
        "CREATE INDEX dead_letters_by_session ON dead_letters (session_id, id)",
    ),
    (  # 5: invoked agents of sessions (runtime/engine/invoke.py), kept with their session
        """CREATE TABLE invocations (
            id TEXT PRIMARY KEY,
            session_id TEXT NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
            invoke TEXT NOT NULL,
            state TEXT NOT NULL,
            argv TEXT NOT NULL,
            spool TEXT NOT NULL,
            started_at REAL NOT NULL,
            pid INTEGER,
            pgid INTEGER,
            start_ticks TEXT,
            outcome TEXT,
            reason TEXT,
            ended_at REAL
        )""",
        "CREATE INDEX invocations_by_session ON invocations (session_id, started_at, id)",
    ),
    (  # 6: staged configs, one per node (seed 000)
        """CREATE TABLE staged_configs (
            node TEXT PRIMARY KEY,
            config TEXT NOT NULL,
            staged_at REAL NOT NULL
        )""",
    ),
    (  # 7: the event queue is no inbox ("inbox" is the seed-002 inbox's word); the rename
       # carries its AUTOINCREMENT counter along (sqlite_sequence), so ids keep growing
        "ALTER TABLE inbox RENAME TO event_queue",
        "DROP INDEX inbox_by_session",
        "CREATE INDEX event_queue_by_session ON event_queue (session_id, id)",
        "ALTER TABLE deliveries RENAME COLUMN inbox_id TO event_id",
    ),
    (  # 8: fan-outs (invoke each:, runtime/engine/invoke_fanout.py): their runs, and on each
       # child invocation its fan-out, its item's index and the event it raised
        "ALTER TABLE invocations ADD COLUMN fanout TEXT",
        "ALTER TABLE invocations ADD COLUMN item_index INTEGER",
        "ALTER TABLE invocations ADD COLUMN result TEXT",
        """CREATE TABLE fanouts (
            id TEXT PRIMARY KEY,
            session_id TEXT NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
            invoke TEXT NOT NULL,
            state TEXT NOT NULL,
            items TEXT NOT NULL,
            concurrency INTEGER,
            started_at REAL NOT NULL,
            outcome TEXT,
            ended_at REAL
        )""",
        "CREATE INDEX fanouts_by_session ON fanouts (session_id, started_at, id)",
    ),
]


def _transient(error: Exception) -> bool:
    """SQLITE_BUSY / SQLITE_LOCKED and their extended codes: someone else holds a lock."""
    return isinstance(error, sqlite3.OperationalError) and (
        getattr(error, "sqlite_errorcode", 0) & 0xFF in (sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED)
    )


class SqliteStore:
    """The Store contract on one SQLite file (created with its folder, 0700, if missing)."""

    def __init__(
        self,
        path: str | PathLike[str],
        *,
        busy_timeout: float = 2.0,
        backoff: Backoff | None = None,
        on_retry: OnRetry | None = None,
    ) -> None:
        self.path = Path(path).absolute()
        self.url = f"sqlite://{self.path}"
        self.busy_timeout = busy_timeout
        self.backoff = backoff or Backoff()
        self.on_retry = on_retry
        self._lock = threading.RLock()
        self._make_folder()
        self._conn = self._retry(self._connect)
        try:
            self._retry(self._migrate)
        except BaseException:
            self._conn.close()
            raise

    # -- plumbing -------------------------------------------------------------------

    def _make_folder(self) -> None:
        folder = self.path.parent
        if folder.is_dir():
            return
        try:
            folder.mkdir(mode=0o700, parents=True)
        except FileExistsError:  # another process made it first: theirs is as good
            if folder.is_dir():
                return
            raise StoreUnavailable(f"cannot create the folder for {self.path}: a file is in "
                                   "the way") from None
        except NotADirectoryError:
            raise StoreUnavailable(f"cannot create the folder for {self.path}: a file is in "
                                   "the way") from None
        except OSError as error:
            raise StoreUnavailable(f"cannot create the folder for {self.path}: {error}") from error
        try:
            folder.chmod(0o700)  # mkdir's mode is masked by the umask
        except OSError as error:
            raise StoreUnavailable(f"cannot create the folder for {self.path}: {error}") from error

    def _connect(self) -> sqlite3.Connection:
        conn = sqlite3.connect(
            self.path, timeout=self.busy_timeout, isolation_level=None, check_same_thread=False
        )
        try:
            conn.execute(f"PRAGMA busy_timeout = {int(self.busy_timeout * 1000)}")
            conn.execute("PRAGMA foreign_keys = ON")
            mode = conn.execute("PRAGMA journal_mode = WAL").fetchone()[0]
            if mode != "wal":
                raise StoreError(f"{self.path}: SQLite refused WAL mode (journal_mode={mode})")
            conn.execute("PRAGMA synchronous = FULL")  # a committed step survives power loss
        except BaseException:
            conn.close()
            raise
        return conn

    def _migrate(self) -> None:
        def version(conn: sqlite3.Connection) -> int:
            exists = conn.execute(
                "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'schema_version'"
            ).fetchone()
            row = conn.execute("SELECT version FROM schema_version").fetchone() if exists else None
            return int(row[0]) if row else 0

        with self._lock:
            current = version(self._conn)
            if current == len(MIGRATIONS):
                return
            if current > len(MIGRATIONS):
                raise StoreError(
                    f"{self.path} has schema version {current}; this interlock knows only up"
                    f" to {len(MIGRATIONS)}: upgrade interlock"
                )

            def apply(conn: sqlite3.Connection) -> None:
                conn.execute("CREATE TABLE IF NOT EXISTS schema_version (version INTEGER NOT NULL)")
                start = version(conn)  # another process may have migrated meanwhile
                for steps in MIGRATIONS[start:]:
                    for sql in steps:
                        conn.execute(sql)
                conn.execute("DELETE FROM schema_version")
                conn.execute("INSERT INTO schema_version VALUES (?)", (len(MIGRATIONS),))

            self._transaction(apply, "IMMEDIATE")

    def _transaction(self, body: Callable[[sqlite3.Connection], T], mode: str) -> T:
        conn = self._conn
        conn.execute(f"BEGIN {mode}")
        try:
            result = body(conn)
            conn.execute("COMMIT")
            return result
        except BaseException:
            if conn.in_transaction:
                with contextlib.suppress(sqlite3.Error):
                    conn.execute("ROLLBACK")
            raise

    def _retry(self, op: Callable[[], T]) -> T:
        """``op`` retried while the file is locked; other SQLite errors become StoreError."""
        def give_up(error: Exception, attempts: int) -> str:
            waited = self.backoff.budget + attempts * self.busy_timeout
            return (
                f"the SQLite store {self.path} stayed locked ({error}) through {attempts}"
                f" attempts over about {waited:.1f} s; another process holds it: retry later"
            )

        try:
            return retry(op, backoff=self.backoff, transient=_transient, give_up=give_up,
                         on_retry=self.on_retry)
        except sqlite3.Error as error:
            raise StoreError(f"the SQLite store {self.path} failed: {error}") from error

    @property
    def bells(self) -> Path:
        """The folder of the sessions' doorbells (``<db>.bells/<session id>``): a write a
        session's runner must react to (an event queued or offered, a cancel request, the
        session deleted) closes its doorbell file, which its runner watches
        (:mod:`interlock.runtime.store.wakeup`)."""
        return self.path.with_name(f"{self.path.name}.bells")

    def ring(self, session_id: str) -> None:
        """Ring ``session_id``'s doorbell (a hint: a failure is not an error)."""
        try:
            fd = os.open(self.bells / session_id, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        except FileNotFoundError:
            try:
                self.bells.mkdir(mode=0o700, exist_ok=True)
                fd = os.open(self.bells / session_id, os.O_WRONLY | os.O_CREAT | os.O_TRUNC,
                             0o600)
            except OSError:
                return
        except OSError:
            return
        os.close(fd)

    def _write(self, body: Callable[[sqlite3.Connection], T]) -> T:
        """``body`` in one ``BEGIN IMMEDIATE`` transaction, retried while the file is locked."""
        def attempt() -> T:
            with self._lock:
                return self._transaction(body, "IMMEDIATE")

        return self._retry(attempt)

    def _read(self, body: Callable[[sqlite3.Connection], T]) -> T:
        """``body`` in one read transaction: a consistent view, no write lock."""
        def attempt() -> T:
            with self._lock:
                return self._transaction(body, "DEFERRED")

        return self._retry(attempt)

    @staticmethod
    def _require(conn: sqlite3.Connection, session_id: str) -> None:
        if conn.execute(SQL.session_exists, (session_id,)).fetchone() is None:
            raise not_found(session_id)

    # -- the contract -----------------------------------------------------------------

    def create(self, row: SessionRow, entry: JournalEntry) -> None:
        check_entries([entry], row.seq)
        values, journal = session_params(row), journal_params(row.id, entry)

        def body(conn: sqlite3.Connection) -> None:
            if conn.execute(SQL.session_exists, (row.id,)).fetchone():
                raise SessionExists(f"a session {row.id!r} already exists")
            conn.execute(SQL.insert_session, values)
            conn.execute(SQL.insert_entry, journal)

        self._write(body)

    def get(self, session_id: str) -> SessionRow:
        def body(conn: sqlite3.Connection) -> SessionRow:
            values = conn.execute(SQL.get_session, (session_id,)).fetchone()
            if values is None:
                raise not_found(session_id)
            return session_from(values, json.loads)

        return self._read(body)

    def list(self) -> builtins.list[SessionRow]:
        def body(conn: sqlite3.Connection) -> builtins.list[SessionRow]:
            rows = conn.execute(f"SELECT {SESSION_COLUMNS} FROM sessions"
                                " ORDER BY created_at, rowid").fetchall()
            return [session_from(values, json.loads) for values in rows]

        return self._read(body)

    def commit_step(
        self,
        session_id: str,
        *,
        expected_seq: int,
        lease_token: int,
        entries: builtins.list[JournalEntry],
        snapshot: dict[str, Any],
        status: str,
        consumed: builtins.list[int],
        now: float,
        spec: SpecSource | None = None,
        buried: builtins.list[DeadLetter] | None = None,
        revived: builtins.list[int] | None = None,
    ) -> int:
        seq = expected_seq + 1
        check_entries(entries, seq)
        journal = [journal_params(session_id, entry) for entry in entries]
        snapshot_text = dumps(snapshot)
        dead = [dead_params(session_id, letter) for letter in buried or []]

        def body(conn: sqlite3.Connection) -> int:
            stored = conn.execute(SQL.fence_session, (session_id,)).fetchone()
            fence(session_id, stored, expected_seq=expected_seq, lease_token=lease_token,
                  now=now)
            conn.executemany(SQL.insert_entry, journal)
            conn.executemany("DELETE FROM event_queue WHERE session_id = ? AND id = ?",
                             [(session_id, item) for item in consumed])
            conn.executemany("DELETE FROM dead_letters WHERE session_id = ? AND id = ?",
                             [(session_id, item) for item in revived or []])
            conn.executemany(SQL.bury, dead)
            conn.execute(SQL.step_session, (seq, snapshot_text, status, now, session_id))
            if spec is not None:
                conn.execute(SQL.migrate_spec, (spec.path, spec.text, spec.digest, session_id))
            return seq

        return self._write(body)

    def journal(self, session_id: str, after_seq: int = 0) -> builtins.list[JournalEntry]:
        def body(conn: sqlite3.Connection) -> builtins.list[JournalEntry]:
            self._require(conn, session_id)
            rows = conn.execute(SQL.journal, (session_id, after_seq)).fetchall()
            return [entry_from(values, json.loads) for values in rows]

        return self._read(body)

    def enqueue(self, session_id: str, event: str, data: dict[str, Any], at: float) -> int:
        data_text = dumps(data)

        def body(conn: sqlite3.Connection) -> int:
            self._require(conn, session_id)
            return _queue(conn, session_id, event, data_text, at)

        item = self._write(body)
        self.ring(session_id)
        return item

    def offer(self, session_id: str, event: str, data: dict[str, Any], at: float,
              key: str, *, wake: bool = True) -> int | None:
        check_key(key)
        data_text = dumps(data)

        def body(conn: sqlite3.Connection) -> int | None:
            # BEGIN IMMEDIATE: no other writer between the look-up and the inserts.
            self._require(conn, session_id)
            if conn.execute(SQL.key_offered, (session_id, key)).fetchone():
                return None
            item = _queue(conn, session_id, event, data_text, at)
            conn.execute("INSERT INTO deliveries (session_id, key, event_id, at)"
                         " VALUES (?, ?, ?, ?)", (session_id, key, item, at))
            return item

        offered = self._write(body)
        if offered is not None and wake:
            self.ring(session_id)
        return offered

    def delivered(self, session_id: str, key: str) -> bool:
        def body(conn: sqlite3.Connection) -> bool:
            self._require(conn, session_id)
            return conn.execute(SQL.key_offered, (session_id, key)).fetchone() is not None

        return self._read(body)

    def queued_events(self, session_id: str) -> builtins.list[QueuedEvent]:
        def body(conn: sqlite3.Connection) -> builtins.list[QueuedEvent]:
            self._require(conn, session_id)
            rows = conn.execute(SQL.queued_events, (session_id,)).fetchall()
            return [queued_from(values, json.loads) for values in rows]

        return self._read(body)

    def acquire(self, session_id: str, owner: str, ttl: float, now: float,
                take_from: str | None = None) -> Lease | None:
        check_ttl(ttl)

        def body(conn: sqlite3.Connection) -> Lease | None:
            values = conn.execute(
                SQL.acquire, (owner, now + ttl, now, session_id, now, owner, take_from),
            ).fetchone()
            if values is None:
                self._require(conn, session_id)
                return None
            return lease_from(session_id, owner, values)

        return self._write(body)

    def renew(self, lease: Lease, ttl: float, now: float) -> Lease | None:
        check_ttl(ttl)

        def body(conn: sqlite3.Connection) -> Lease | None:
            values = conn.execute(
                SQL.renew, (now + ttl, lease.session_id, lease.owner, lease.token),
            ).fetchone()
            return None if values is None else lease_from(lease.session_id, lease.owner, values)

        return self._write(body)

    def holder(self, session_id: str) -> Lease | None:
        def body(conn: sqlite3.Connection) -> Lease | None:
            row = conn.execute(SQL.holder, (session_id,)).fetchone()
            if row is None:
                raise not_found(session_id)
            return None if row[0] is None else lease_from(session_id, row[0], row[1:])

        return self._read(body)

    def release(self, lease: Lease) -> None:
        def body(conn: sqlite3.Connection) -> None:
            conn.execute(SQL.release, (lease.session_id, lease.owner, lease.token))

        self._write(body)

    def dead_letters(self, session_id: str) -> builtins.list[DeadLetter]:
        def body(conn: sqlite3.Connection) -> builtins.list[DeadLetter]:
            self._require(conn, session_id)
            rows = conn.execute(SQL.dead_letters, (session_id,)).fetchall()
            return [dead_from(values, json.loads) for values in rows]

        return self._read(body)

    def request_cancel(self, session_id: str, reason: str | None, at: float) -> None:
        def body(conn: sqlite3.Connection) -> None:
            self._require(conn, session_id)
            conn.execute(SQL.request_cancel, (reason, at, session_id))

        self._write(body)
        self.ring(session_id)

    def cancel_request(self, session_id: str) -> CancelRequest | None:
        def body(conn: sqlite3.Connection) -> CancelRequest | None:
            values = conn.execute(SQL.cancel_request, (session_id,)).fetchone()
            if values is None:
                raise not_found(session_id)
            return None if values[1] is None else CancelRequest(values[0], float(values[1]))

        return self._read(body)

    def delete(self, session_id: str) -> None:
        def body(conn: sqlite3.Connection) -> None:
            self._require(conn, session_id)
            conn.execute(SQL.delete_session, (session_id,))

        self._write(body)
        self.ring(session_id)
        with contextlib.suppress(OSError):
            (self.bells / session_id).unlink()

    def record_agent(self, record: AgentRecord) -> None:
        values = agent_params(record)

        def body(conn: sqlite3.Connection) -> None:
            if conn.execute("SELECT 1 FROM agents WHERE id = ?", (record.id,)).fetchone():
                raise agent_exists(record.id)
            conn.execute(SQL.insert_agent, values)

        self._write(body)

    def forget_agent(self, agent_id: str) -> None:
        def body(conn: sqlite3.Connection) -> None:
            conn.execute(SQL.forget_agent, (agent_id,))

        self._write(body)

    def agents(self) -> builtins.list[AgentRecord]:
        def body(conn: sqlite3.Connection) -> builtins.list[AgentRecord]:
            rows = conn.execute(f"SELECT {AGENT_COLUMNS} FROM agents"
                                " ORDER BY started_at, id").fetchall()
            return [agent_from(values) for values in rows]

        return self._read(body)

    def record_invocation(self, record: InvocationRecord) -> None:
        values = invocation_params(record)

        def body(conn: sqlite3.Connection) -> None:
            self._require(conn, record.session_id)
            if conn.execute("SELECT 1 FROM invocations WHERE id = ?", (record.id,)).fetchone():
                raise invocation_exists(record.id)
            conn.execute(SQL.insert_invocation, values)

        self._write(body)

    def invocation_started(self, invocation_id: str, pid: int, pgid: int,
                           start_ticks: str) -> None:
        def body(conn: sqlite3.Connection) -> None:
            conn.execute(SQL.invocation_started, (pid, pgid, start_ticks, invocation_id))

        self._write(body)

    def end_invocation(self, invocation_id: str, outcome: str, reason: str | None,
                       at: float) -> bool:
        def body(conn: sqlite3.Connection) -> bool:
            cursor = conn.execute(SQL.end_invocation, (outcome, reason, at, invocation_id))
            return cursor.rowcount == 1

        return self._write(body)

    def invocations(self, session_id: str, *,
                    in_flight: bool = False) -> builtins.list[InvocationRecord]:
        def body(conn: sqlite3.Connection) -> builtins.list[InvocationRecord]:
            self._require(conn, session_id)
            rows = conn.execute(
                f"SELECT {INVOCATION_COLUMNS} FROM invocations WHERE session_id = ?"
                + (" AND outcome IS NULL" if in_flight else "")
                + " ORDER BY started_at, id", (session_id,),
            ).fetchall()
            return [invocation_from(values) for values in rows]

        return self._read(body)

    def invocation_result(self, invocation_id: str, result: dict[str, Any]) -> None:
        text = dumps(result)

        def body(conn: sqlite3.Connection) -> None:
            conn.execute(SQL.invocation_result, (text, invocation_id))

        self._write(body)

    def record_fanout(self, record: FanoutRecord) -> None:
        values = fanout_params(record)

        def body(conn: sqlite3.Connection) -> None:
            self._require(conn, record.session_id)
            if conn.execute("SELECT 1 FROM fanouts WHERE id = ?", (record.id,)).fetchone():
                raise fanout_exists(record.id)
            conn.execute(SQL.insert_fanout, values)

        self._write(body)

    def end_fanout(self, fanout_id: str, outcome: str, at: float) -> bool:
        def body(conn: sqlite3.Connection) -> bool:
            return conn.execute(SQL.end_fanout, (outcome, at, fanout_id)).rowcount == 1

        return self._write(body)

    def fanouts(self, session_id: str, *,
                in_flight: bool = False) -> builtins.list[FanoutRecord]:
        def body(conn: sqlite3.Connection) -> builtins.list[FanoutRecord]:
            self._require(conn, session_id)
            rows = conn.execute(
                f"SELECT {FANOUT_COLUMNS} FROM fanouts WHERE session_id = ?"
                + (" AND outcome IS NULL" if in_flight else "")
                + " ORDER BY started_at, id", (session_id,),
            ).fetchall()
            return [fanout_from(values) for values in rows]

        return self._read(body)

    def stage_config(self, node: str, config: dict[str, Any], at: float) -> None:
        text = json.dumps(config, sort_keys=True)

        def body(conn: sqlite3.Connection) -> None:
            conn.execute(SQL.stage_config, (node, text, at))

        self._write(body)

    def staged_config(self, node: str) -> dict[str, Any] | None:
        def body(conn: sqlite3.Connection) -> dict[str, Any] | None:
            found = conn.execute(SQL.staged_config, (node,)).fetchone()
            return None if found is None else dict(json.loads(found[0]))

        return self._read(body)

    def consume_staged_config(self, node: str) -> dict[str, Any] | None:
        def body(conn: sqlite3.Connection) -> dict[str, Any] | None:
            found = conn.execute(SQL.consume_staged_config, (node,)).fetchone()
            return None if found is None else dict(json.loads(found[0]))

        return self._write(body)

    def close(self) -> None:
        with self._lock:
            self._conn.close()

    def __repr__(self) -> str:
        return f"SqliteStore({str(self.path)!r})"


def _queue(conn: sqlite3.Connection, session_id: str, event: str, data_text: str,
           at: float) -> int:
    """Queue one event; its id."""
    values = conn.execute(SQL.enqueue, (session_id, event, data_text, at)).fetchone()
    assert values is not None
    return int(values[0])
