"""The shared store: PostgreSQL through psycopg 3, one connection per store object.

Commits lock the session row (``SELECT ... FOR UPDATE``) and are fenced by seq and lease
token; a lease is taken by one atomic ``UPDATE ... RETURNING``. Lost connections, lock
timeouts and deadlocks are retried with backoff on a fresh connection, then reported as
StoreUnavailable naming host and port (never the password). A connection lost during
COMMIT leaves the outcome unknown: every call but enqueue finds out and goes on; enqueue
says so (StoreUnavailable) rather than risk queueing an event twice (offer, keyed, finds
its own item and returns its id).
"""

from __future__ import annotations

import builtins
import json
import os
import threading
from collections.abc import Callable
from typing import Any, TypeVar

import psycopg
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from interlock.runtime.config.urls import redact_url
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
from interlock.runtime.store._sql import POSTGRES as SQL
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
Conn = psycopg.Connection[tuple[Any, ...]]
# After a COMMIT whose outcome is unknown: the result if it was applied, None if not.
Resolve = Callable[[Conn], T | None]

_MIGRATION_LOCK = 0x1A7E_4C0C  # pg_advisory_xact_lock key: one migrator at a time

# Schema migrations: step N (1-based) brings the schema from version N-1 to N. Append only.
# Tables go to the first schema of the search_path (the URL may set it with options=).
MIGRATIONS: list[tuple[str, ...]] = [
    (
        """CREATE TABLE sessions (
            id TEXT PRIMARY KEY,
            spec_name TEXT NOT NULL,
            spec_path TEXT NOT NULL,
            spec_hash TEXT NOT NULL,
            spec_text TEXT NOT NULL,
            status TEXT NOT NULL,
            seq BIGINT NOT NULL,
            snapshot JSONB NOT NULL,
            created_at DOUBLE PRECISION NOT NULL,
            updated_at DOUBLE PRECISION NOT NULL,
            lease_owner TEXT,
            lease_token BIGINT NOT NULL DEFAULT 0,
            lease_expires_at DOUBLE PRECISION
        )""",
        """CREATE TABLE journal (
            id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
            session_id TEXT NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
            seq BIGINT NOT NULL,
            at DOUBLE PRECISION NOT NULL,
            kind TEXT NOT NULL,
            event TEXT,
            data JSONB NOT NULL,
            before_states JSONB NOT NULL,
            after_states JSONB NOT NULL,
            note TEXT
        )""",
        "CREATE INDEX journal_by_session ON journal (session_id, seq, id)",
        """CREATE FUNCTION journal_append_only() RETURNS trigger LANGUAGE plpgsql AS
           $$ BEGIN RAISE EXCEPTION 'the journal is append-only'; END $$""",
        """CREATE TRIGGER journal_append_only BEFORE UPDATE ON journal
           FOR EACH ROW EXECUTE FUNCTION journal_append_only()""",
        """CREATE TABLE inbox (
            id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
            session_id TEXT NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
            event TEXT NOT NULL,
            data JSONB NOT NULL,
            enqueued_at DOUBLE PRECISION NOT NULL
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
            started_at DOUBLE PRECISION NOT NULL,
            session_id TEXT
        )""",
    ),
    (  # 3: offer keys, kept after their queued event is consumed (no foreign key on inbox_id)
        """CREATE TABLE deliveries (
            session_id TEXT NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
            key TEXT NOT NULL,
            inbox_id BIGINT NOT NULL,
            at DOUBLE PRECISION NOT NULL,
            PRIMARY KEY (session_id, key)
        )""",
    ),
    (  # 4: lifecycle: stored statuses renamed, lease start, cancel requests, dead letters
        "UPDATE sessions SET status = 'active' WHERE status = 'running'",
        "UPDATE sessions SET status = 'finished' WHERE status = 'final'",
        "ALTER TABLE sessions ADD COLUMN lease_acquired_at DOUBLE PRECISION",
        "ALTER TABLE sessions ADD COLUMN cancel_reason TEXT",
        "ALTER TABLE sessions ADD COLUMN cancel_requested_at DOUBLE PRECISION",
        """CREATE TABLE dead_letters (
            id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
            session_id TEXT NOT NULL REFERENCES sessions (id) ON DELETE CASCADE,
            kind TEXT NOT NULL,
            event TEXT NOT NULL,
            data JSONB NOT NULL,
            failed_at DOUBLE PRECISION NOT NULL,
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
            started_at DOUBLE PRECISION NOT NULL,
            pid INTEGER,
            pgid INTEGER,
            start_ticks TEXT,
            outcome TEXT,
            reason TEXT,
            ended_at DOUBLE PRECISION
        )""",
        "CREATE INDEX invocations_by_session ON invocations (session_id, started_at, id)",
    ),
    (  # 6: staged configs, one per node (seed 000)
        """CREATE TABLE staged_configs (
            node TEXT PRIMARY KEY,
            config JSONB NOT NULL,
            staged_at DOUBLE PRECISION NOT NULL
        )""",
    ),
    (  # 7: the event queue is no inbox ("inbox" is the seed-002 inbox's word, whose own
       # tables may share this database); its identity sequence goes along with it
        "ALTER TABLE inbox RENAME TO event_queue",
        "ALTER INDEX IF EXISTS inbox_pkey RENAME TO event_queue_pkey",
        "ALTER INDEX IF EXISTS inbox_by_session RENAME TO event_queue_by_session",
        """DO $$ BEGIN
           EXECUTE format('ALTER SEQUENCE %s RENAME TO event_queue_id_seq',
                          pg_get_serial_sequence('event_queue', 'id'));
           END $$""",
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
            started_at DOUBLE PRECISION NOT NULL,
            outcome TEXT,
            ended_at DOUBLE PRECISION
        )""",
        "CREATE INDEX fanouts_by_session ON fanouts (session_id, started_at, id)",
    ),
]


def _transient(error: Exception) -> bool:
    """Worth another try: refused or lost connections, lock timeouts, deadlocks,
    serialization failures, a server starting or shutting down. Not a refusal that will
    not change: bad credentials, a missing database (SQLSTATE classes 28 and 3D, which
    libpq reports at connection time only as text)."""
    if not isinstance(error, psycopg.OperationalError):
        return False
    if (error.sqlstate or "").startswith(("28", "3D")):
        return False
    return not any(marker in str(error) for marker in _PERMANENT)


_PERMANENT = ("authentication failed", "does not exist", "pg_hba.conf", "no password supplied",
              "permission denied")


def _json_dict(value: Any) -> dict[str, Any]:
    return dict(value if isinstance(value, dict) else json.loads(value))


def _rerun(conn: Conn) -> None:
    """Resolve for calls that are safe to run again."""
    return None


class PostgresStore:
    """The Store contract on a PostgreSQL database named by a ``postgresql://`` URL."""

    def __init__(
        self,
        url: str,
        *,
        connect_timeout: int = 5,
        lock_timeout: float = 5.0,
        backoff: Backoff | None = None,
        on_retry: OnRetry | None = None,
    ) -> None:
        self.url = redact_url(url)  # fit for messages; the password stays in _conninfo
        try:
            params = conninfo_to_dict(url)
        except psycopg.Error as error:
            raise StoreError(f"invalid PostgreSQL URL {self.url}: {error}") from None
        extra: dict[str, Any] = {"application_name": "interlock"}
        if "connect_timeout" not in params:
            extra["connect_timeout"] = connect_timeout
        self._conninfo = make_conninfo(url, **{k: v for k, v in extra.items()
                                              if k not in params})
        host = str(params.get("host") or os.environ.get("PGHOST") or "localhost")
        port = str(params.get("port") or os.environ.get("PGPORT") or 5432)
        self.where = f"{host}:{port}/{params.get('dbname') or params.get('user') or ''}"
        self.lock_timeout = lock_timeout
        self.backoff = backoff or Backoff()
        self.on_retry = on_retry
        self._lock = threading.RLock()
        self._conn: Conn | None = None
        try:
            self._run(self._migrate, _rerun)
        except BaseException:
            self._drop()
            raise

    # -- plumbing -------------------------------------------------------------------

    def _connection(self) -> Conn:
        if self._conn is not None and not (self._conn.closed or self._conn.broken):
            return self._conn
        self._drop()
        conn: Conn = psycopg.connect(self._conninfo, autocommit=True)
        try:
            conn.execute(f"SET lock_timeout = {int(self.lock_timeout * 1000)}")
        except BaseException:
            conn.close()
            raise
        self._conn = conn
        return conn

    def _drop(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    def _run(self, body: Callable[[Conn], T], resolve: Resolve[T] | None) -> T:
        """``body`` in one transaction, retried on transient failures. If a retry follows
        a COMMIT whose outcome is unknown, ``resolve`` decides first (None: say so)."""
        unknown = False

        def attempt() -> T:
            nonlocal unknown
            with self._lock:
                conn = self._connection()
                if unknown:
                    if resolve is None:
                        raise StoreUnavailable(
                            f"the connection to PostgreSQL at {self.where} was lost while"
                            " committing: the change may or may not have been applied"
                        )
                    with conn.transaction():
                        done = resolve(conn)
                    unknown = False
                    if done is not None:
                        return done
                committing = False
                try:
                    with conn.transaction():
                        result = body(conn)
                        committing = True
                    return result
                except psycopg.Error:
                    if conn.closed or conn.broken:
                        unknown = committing
                        self._drop()
                    raise

        def give_up(error: Exception, attempts: int) -> str:
            reason = redact_url(str(error).strip().splitlines()[0] if str(error) else repr(error))
            return (
                f"cannot use PostgreSQL at {self.where} after {attempts} attempts over about"
                f" {self.backoff.budget:.1f} s: {reason}"
            )

        try:
            return retry(attempt, backoff=self.backoff, transient=_transient, give_up=give_up,
                         on_retry=self.on_retry)
        except psycopg.OperationalError as error:  # not transient: bad password, no database
            raise StoreUnavailable(
                f"cannot use PostgreSQL at {self.where}: {redact_url(str(error).strip())}"
            ) from None
        except psycopg.Error as error:
            raise StoreError(f"PostgreSQL at {self.where} failed: {error}") from error

    @staticmethod
    def _migrate(conn: Conn) -> None:
        conn.execute("SELECT pg_advisory_xact_lock(%s)", (_MIGRATION_LOCK,))
        current = 0
        if conn.execute("SELECT to_regclass('schema_version')").fetchone() != (None,):
            row = conn.execute("SELECT version FROM schema_version").fetchone()
            current = int(row[0]) if row else 0
        else:
            conn.execute("CREATE TABLE schema_version (version INTEGER NOT NULL)")
        if current > len(MIGRATIONS):
            raise StoreError(
                f"the database has schema version {current}; this interlock knows only up to"
                f" {len(MIGRATIONS)}: upgrade interlock"
            )
        if current == len(MIGRATIONS):
            return
        for steps in MIGRATIONS[current:]:
            for sql in steps:
                conn.execute(sql)
        conn.execute("DELETE FROM schema_version")
        conn.execute("INSERT INTO schema_version VALUES (%s)", (len(MIGRATIONS),))

    @staticmethod
    def _lock_session(conn: Conn, session_id: str) -> None:
        """Lock the session row against commits and other enqueues (SessionNotFound)."""
        if conn.execute(SQL.session_exists + " FOR NO KEY UPDATE",
                        (session_id,)).fetchone() is None:
            raise not_found(session_id)

    @staticmethod
    def _require(conn: Conn, session_id: str) -> None:
        if conn.execute(SQL.session_exists, (session_id,)).fetchone() is None:
            raise not_found(session_id)

    # -- the contract -----------------------------------------------------------------

    def create(self, row: SessionRow, entry: JournalEntry) -> None:
        check_entries([entry], row.seq)
        values, journal = session_params(row), journal_params(row.id, entry)

        def body(conn: Conn) -> bool:
            inserted = conn.execute(
                SQL.insert_session + " ON CONFLICT (id) DO NOTHING RETURNING 1", values,
            ).fetchone()
            if inserted is None:
                raise SessionExists(f"a session {row.id!r} already exists")
            conn.execute(SQL.insert_entry, journal)
            return True

        def resolve(conn: Conn) -> bool | None:
            stored = conn.execute("SELECT spec_hash, created_at, seq FROM sessions WHERE id = %s",
                                  (row.id,)).fetchone()
            if stored is None:
                return None  # not applied: create again
            if stored == (row.spec_hash, row.created_at, row.seq):
                return True
            raise SessionExists(f"a session {row.id!r} already exists")

        self._run(body, resolve)

    def get(self, session_id: str) -> SessionRow:
        def body(conn: Conn) -> SessionRow:
            values = conn.execute(SQL.get_session, (session_id,)).fetchone()
            if values is None:
                raise not_found(session_id)
            return session_from(values, _same)

        return self._run(body, _rerun)

    def list(self) -> builtins.list[SessionRow]:
        def body(conn: Conn) -> builtins.list[SessionRow]:
            rows = conn.execute(
                f"SELECT {SESSION_COLUMNS} FROM sessions ORDER BY created_at, id"
            ).fetchall()
            return [session_from(values, _same) for values in rows]

        return self._run(body, _rerun)

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

        def body(conn: Conn) -> int:
            stored = conn.execute(SQL.fence_session + " FOR UPDATE", (session_id,)).fetchone()
            fence(session_id, stored, expected_seq=expected_seq, lease_token=lease_token,
                  now=now)
            with conn.cursor() as cursor:
                cursor.executemany(SQL.insert_entry, journal)
            if consumed:
                conn.execute("DELETE FROM event_queue WHERE session_id = %s AND id = ANY(%s)",
                             (session_id, consumed))
            if revived:
                conn.execute("DELETE FROM dead_letters WHERE session_id = %s AND id = ANY(%s)",
                             (session_id, revived))
            if dead:
                with conn.cursor() as cursor:
                    cursor.executemany(SQL.bury, dead)
            conn.execute(SQL.step_session, (seq, snapshot_text, status, now, session_id))
            if spec is not None:
                conn.execute(SQL.migrate_spec, (spec.path, spec.text, spec.digest, session_id))
            return seq

        def resolve(conn: Conn) -> int | None:
            # Only the holder of this token can have moved the session to this seq: us.
            stored = conn.execute("SELECT seq, lease_token FROM sessions WHERE id = %s",
                                  (session_id,)).fetchone()
            return seq if stored == (seq, lease_token) else None

        return self._run(body, resolve)

    def journal(self, session_id: str, after_seq: int = 0) -> builtins.list[JournalEntry]:
        def body(conn: Conn) -> builtins.list[JournalEntry]:
            self._require(conn, session_id)
            rows = conn.execute(SQL.journal, (session_id, after_seq)).fetchall()
            return [entry_from(values, _same) for values in rows]

        return self._run(body, _rerun)

    def enqueue(self, session_id: str, event: str, data: dict[str, Any], at: float) -> int:
        data_text = dumps(data)

        def body(conn: Conn) -> int:
            # Enqueues of one session take turns, so ids grow in commit order: a runner
            # never sees a later item before an earlier one.
            self._lock_session(conn, session_id)
            values = conn.execute(SQL.enqueue, (session_id, event, data_text, at)).fetchone()
            assert values is not None
            return int(values[0])

        return self._run(body, None)

    def offer(self, session_id: str, event: str, data: dict[str, Any], at: float,
              key: str, *, wake: bool = True) -> int | None:  # no wake-ups: see wakeup.py
        check_key(key)
        data_text = dumps(data)
        drawn: int | None = None  # the item id the latest attempt wrote, if it wrote one

        def body(conn: Conn) -> int | None:
            nonlocal drawn
            drawn = None
            self._lock_session(conn, session_id)  # ids grow in commit order, as for enqueue
            # The key first, with the item's id drawn from the queue's own sequence: on a
            # taken key (committed, or in flight elsewhere: then this waits for it) nothing
            # is written and nothing raises; a drawn id is burnt, a gap like a rollback's.
            values = conn.execute(
                "INSERT INTO deliveries (session_id, key, event_id, at)"
                " VALUES (%s, %s, nextval(pg_get_serial_sequence('event_queue', 'id')), %s)"
                " ON CONFLICT (session_id, key) DO NOTHING RETURNING event_id",
                (session_id, key, at),
            ).fetchone()
            if values is None:
                return None
            item = int(values[0])
            conn.execute(
                "INSERT INTO event_queue (id, session_id, event, data, enqueued_at)"
                " OVERRIDING SYSTEM VALUE VALUES (%s, %s, %s, %s::jsonb, %s)",
                (item, session_id, event, data_text, at),
            )
            drawn = item
            return item

        def resolve(conn: Conn) -> int | None:
            # A sequence never hands an id out twice, so a delivery carrying the id our
            # lost attempt drew is that attempt, landed: its item is ours. Otherwise run
            # again: that queues the item, or finds the key taken (by another) and says None.
            if drawn is None:
                return None
            stored = conn.execute(
                "SELECT event_id FROM deliveries WHERE session_id = %s AND key = %s",
                (session_id, key),
            ).fetchone()
            return drawn if stored == (drawn,) else None

        return self._run(body, resolve)

    def delivered(self, session_id: str, key: str) -> bool:
        def body(conn: Conn) -> bool:
            self._require(conn, session_id)
            return conn.execute(SQL.key_offered, (session_id, key)).fetchone() is not None

        return self._run(body, _rerun)

    def queued_events(self, session_id: str) -> builtins.list[QueuedEvent]:
        def body(conn: Conn) -> builtins.list[QueuedEvent]:
            self._require(conn, session_id)
            rows = conn.execute(SQL.queued_events, (session_id,)).fetchall()
            return [queued_from(values, _same) for values in rows]

        return self._run(body, _rerun)

    def acquire(self, session_id: str, owner: str, ttl: float, now: float,
                take_from: str | None = None) -> Lease | None:
        check_ttl(ttl)

        def body(conn: Conn) -> Lease | None:
            values = conn.execute(
                SQL.acquire, (owner, now + ttl, now, session_id, now, owner, take_from),
            ).fetchone()
            if values is None:
                self._require(conn, session_id)
                return None
            return lease_from(session_id, owner, values)

        return self._run(body, _rerun)  # again as the same owner: a fresh token

    def holder(self, session_id: str) -> Lease | None:
        def body(conn: Conn) -> Lease | None:
            row = conn.execute(SQL.holder, (session_id,)).fetchone()
            if row is None:
                raise not_found(session_id)
            return None if row[0] is None else lease_from(session_id, row[0], row[1:])

        return self._run(body, _rerun)

    def renew(self, lease: Lease, ttl: float, now: float) -> Lease | None:
        check_ttl(ttl)

        def body(conn: Conn) -> Lease | None:
            values = conn.execute(
                SQL.renew, (now + ttl, lease.session_id, lease.owner, lease.token),
            ).fetchone()
            return None if values is None else lease_from(lease.session_id, lease.owner, values)

        return self._run(body, _rerun)

    def release(self, lease: Lease) -> None:
        def body(conn: Conn) -> None:
            conn.execute(SQL.release, (lease.session_id, lease.owner, lease.token))

        self._run(body, _rerun)

    def dead_letters(self, session_id: str) -> builtins.list[DeadLetter]:
        def body(conn: Conn) -> builtins.list[DeadLetter]:
            self._require(conn, session_id)
            rows = conn.execute(SQL.dead_letters, (session_id,)).fetchall()
            return [dead_from(values, _same) for values in rows]

        return self._run(body, _rerun)

    def request_cancel(self, session_id: str, reason: str | None, at: float) -> None:
        def body(conn: Conn) -> None:
            updated = conn.execute(SQL.request_cancel + " RETURNING 1",
                                   (reason, at, session_id)).fetchone()
            if updated is None:
                raise not_found(session_id)

        self._run(body, _rerun)

    def cancel_request(self, session_id: str) -> CancelRequest | None:
        def body(conn: Conn) -> CancelRequest | None:
            values = conn.execute(SQL.cancel_request, (session_id,)).fetchone()
            if values is None:
                raise not_found(session_id)
            return None if values[1] is None else CancelRequest(values[0], float(values[1]))

        return self._run(body, _rerun)

    def delete(self, session_id: str) -> None:
        def body(conn: Conn) -> bool:
            deleted = conn.execute(SQL.delete_session + " RETURNING 1",
                                   (session_id,)).fetchone()
            if deleted is None:
                raise not_found(session_id)
            return True

        def resolve(conn: Conn) -> bool | None:
            gone = conn.execute(SQL.session_exists, (session_id,)).fetchone() is None
            return True if gone else None

        self._run(body, resolve)

    def record_agent(self, record: AgentRecord) -> None:
        values = agent_params(record)

        def body(conn: Conn) -> bool:
            inserted = conn.execute(
                SQL.insert_agent + " ON CONFLICT (id) DO NOTHING RETURNING 1", values,
            ).fetchone()
            if inserted is None:
                raise agent_exists(record.id)
            return True

        def resolve(conn: Conn) -> bool | None:
            stored = conn.execute(f"SELECT {AGENT_COLUMNS} FROM agents WHERE id = %s",
                                  (record.id,)).fetchone()
            if stored is None:
                return None  # not applied: record again
            if agent_from(stored) == record:
                return True
            raise agent_exists(record.id)

        self._run(body, resolve)

    def forget_agent(self, agent_id: str) -> None:
        def body(conn: Conn) -> None:
            conn.execute(SQL.forget_agent, (agent_id,))

        self._run(body, _rerun)

    def agents(self) -> builtins.list[AgentRecord]:
        def body(conn: Conn) -> builtins.list[AgentRecord]:
            rows = conn.execute(  # COLLATE "C": ids in byte order, as SQLite sorts them
                f'SELECT {AGENT_COLUMNS} FROM agents ORDER BY started_at, id COLLATE "C"'
            ).fetchall()
            return [agent_from(values) for values in rows]

        return self._run(body, _rerun)

    def record_invocation(self, record: InvocationRecord) -> None:
        values = invocation_params(record)

        def body(conn: Conn) -> bool:
            self._require(conn, record.session_id)
            inserted = conn.execute(
                SQL.insert_invocation + " ON CONFLICT (id) DO NOTHING RETURNING 1", values,
            ).fetchone()
            if inserted is None:
                raise invocation_exists(record.id)
            return True

        def resolve(conn: Conn) -> bool | None:
            stored = conn.execute(f"SELECT {INVOCATION_COLUMNS} FROM invocations WHERE id = %s",
                                  (record.id,)).fetchone()
            if stored is None:
                return None  # not applied: record again
            if invocation_from(stored) == record:
                return True
            raise invocation_exists(record.id)

        self._run(body, resolve)

    def invocation_started(self, invocation_id: str, pid: int, pgid: int,
                           start_ticks: str) -> None:
        def body(conn: Conn) -> None:
            conn.execute(SQL.invocation_started, (pid, pgid, start_ticks, invocation_id))

        self._run(body, _rerun)

    def end_invocation(self, invocation_id: str, outcome: str, reason: str | None,
                       at: float) -> bool:
        def body(conn: Conn) -> bool:
            ended = conn.execute(SQL.end_invocation + " RETURNING 1",
                                 (outcome, reason, at, invocation_id)).fetchone()
            return ended is not None

        def resolve(conn: Conn) -> bool | None:
            stored = conn.execute("SELECT outcome, reason, ended_at FROM invocations"
                                  " WHERE id = %s", (invocation_id,)).fetchone()
            if stored is None or stored[0] is None:
                return None  # not applied: end it again
            return bool(tuple(stored) == (outcome, reason, at))

        return self._run(body, resolve)

    def invocations(self, session_id: str, *,
                    in_flight: bool = False) -> builtins.list[InvocationRecord]:
        def body(conn: Conn) -> builtins.list[InvocationRecord]:
            self._require(conn, session_id)
            rows = conn.execute(  # COLLATE "C": ids in byte order, as SQLite sorts them
                f"SELECT {INVOCATION_COLUMNS} FROM invocations WHERE session_id = %s"
                + (" AND outcome IS NULL" if in_flight else "")
                + ' ORDER BY started_at, id COLLATE "C"', (session_id,),
            ).fetchall()
            return [invocation_from(values) for values in rows]

        return self._run(body, _rerun)

    def invocation_result(self, invocation_id: str, result: dict[str, Any]) -> None:
        text = dumps(result)

        def body(conn: Conn) -> None:
            conn.execute(SQL.invocation_result, (text, invocation_id))

        self._run(body, _rerun)  # the same value again: safe to run again

    def record_fanout(self, record: FanoutRecord) -> None:
        values = fanout_params(record)

        def body(conn: Conn) -> bool:
            self._require(conn, record.session_id)
            inserted = conn.execute(
                SQL.insert_fanout + " ON CONFLICT (id) DO NOTHING RETURNING 1", values,
            ).fetchone()
            if inserted is None:
                raise fanout_exists(record.id)
            return True

        def resolve(conn: Conn) -> bool | None:
            stored = conn.execute(f"SELECT {FANOUT_COLUMNS} FROM fanouts WHERE id = %s",
                                  (record.id,)).fetchone()
            if stored is None:
                return None  # not applied: record again
            if fanout_from(stored) == record:
                return True
            raise fanout_exists(record.id)

        self._run(body, resolve)

    def end_fanout(self, fanout_id: str, outcome: str, at: float) -> bool:
        def body(conn: Conn) -> bool:
            ended = conn.execute(SQL.end_fanout + " RETURNING 1",
                                 (outcome, at, fanout_id)).fetchone()
            return ended is not None

        def resolve(conn: Conn) -> bool | None:
            stored = conn.execute("SELECT outcome, ended_at FROM fanouts WHERE id = %s",
                                  (fanout_id,)).fetchone()
            if stored is None or stored[0] is None:
                return None  # not applied: end it again
            return bool(tuple(stored) == (outcome, at))

        return self._run(body, resolve)

    def fanouts(self, session_id: str, *,
                in_flight: bool = False) -> builtins.list[FanoutRecord]:
        def body(conn: Conn) -> builtins.list[FanoutRecord]:
            self._require(conn, session_id)
            rows = conn.execute(  # COLLATE "C": ids in byte order, as SQLite sorts them
                f"SELECT {FANOUT_COLUMNS} FROM fanouts WHERE session_id = %s"
                + (" AND outcome IS NULL" if in_flight else "")
                + ' ORDER BY started_at, id COLLATE "C"', (session_id,),
            ).fetchall()
            return [fanout_from(values) for values in rows]

        return self._run(body, _rerun)

    def stage_config(self, node: str, config: dict[str, Any], at: float) -> None:
        text = dumps(config)

        def body(conn: Conn) -> None:
            conn.execute(SQL.stage_config, (node, text, at))

        self._run(body, _rerun)  # an upsert of the same value: safe to run again

    def staged_config(self, node: str) -> dict[str, Any] | None:
        def body(conn: Conn) -> dict[str, Any] | None:
            found = conn.execute(SQL.staged_config, (node,)).fetchone()
            return None if found is None else _json_dict(found[0])

        return self._run(body, _rerun)

    def consume_staged_config(self, node: str) -> dict[str, Any] | None:
        def body(conn: Conn) -> dict[str, Any] | None:
            found = conn.execute(SQL.consume_staged_config, (node,)).fetchone()
            return None if found is None else _json_dict(found[0])

        return self._run(body, None)  # a lost COMMIT: say so, never hand it out twice

    def close(self) -> None:
        with self._lock:
            self._drop()

    def __repr__(self) -> str:
        return f"PostgresStore({self.url!r})"


def _same(value: Any) -> Any:
    """psycopg already decodes JSONB."""
    return value
