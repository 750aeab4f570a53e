"""The shared inbox on PostgreSQL (psycopg 3), for workers on several machines.

A claim is one statement: ``UPDATE ... WHERE id = (SELECT ... FOR UPDATE SKIP LOCKED)``,
so a worker never waits on a row another worker is claiming; it just does not get it.
A status update is one statement too (a CTE that locks the row, checks the token and the
move, updates and journals); only when it changes nothing does a second read find out
why. A lost connection is reported as InboxUnavailable and reopened on the next call.
"""

from __future__ import annotations

import builtins
import json
import threading
from collections.abc import Callable
from typing import Any, TypeVar

import psycopg
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from interlock.runtime.engine.clock import Clock, SystemClock
from interlock.runtime.inbox._rows import (
    COLUMNS,
    JOURNAL_COLUMNS,
    LEASED_NAMES,
    check_lease,
    check_limit,
    entry_from,
    message_from,
    new_id,
    new_token,
)
from interlock.runtime.inbox.base import DEFAULT_LEASE, check_setting
from interlock.runtime.inbox.model import (
    OPERATOR,
    OPERATOR_MOVES,
    REAPER,
    WORKER_MOVES,
    BadRequest,
    Claim,
    InboxUnavailable,
    JournalEntry,
    Lease,
    Message,
    Status,
    UnknownMessage,
    check_id,
    check_post,
    check_update,
)
from interlock.runtime.store.base import redact_url

T = TypeVar("T")
Conn = psycopg.Connection[tuple[Any, ...]]
_SCHEMA_LOCK = 0x1A7E_1B0C

SCHEMA = (
    """CREATE TABLE IF NOT EXISTS inbox_messages (
        id TEXT PRIMARY KEY,
        type TEXT NOT NULL,
        sender TEXT NOT NULL,
        status TEXT NOT NULL,
        body TEXT NOT NULL,
        correlation_id TEXT,
        payload_ref TEXT,
        lease_until DOUBLE PRECISION,
        lease_token TEXT,
        owner TEXT,
        prev_status TEXT,
        created_at DOUBLE PRECISION NOT NULL,
        updated_at DOUBLE PRECISION NOT NULL
    )""",
    "CREATE INDEX IF NOT EXISTS inbox_messages_queue ON inbox_messages (status, created_at, id)",
    """CREATE INDEX IF NOT EXISTS inbox_messages_leases ON inbox_messages (lease_until)
       WHERE status IN ('in_progress', 'acked')""",
    """CREATE TABLE IF NOT EXISTS inbox_journal (
        n BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
        message_id TEXT NOT NULL,
        at DOUBLE PRECISION NOT NULL,
        before_status TEXT NOT NULL,
        after_status TEXT NOT NULL,
        actor TEXT NOT NULL,
        reason TEXT
    )""",
    "CREATE INDEX IF NOT EXISTS inbox_journal_by_message ON inbox_journal (message_id, n)",
    """CREATE TABLE IF NOT EXISTS inbox_settings (
        key TEXT PRIMARY KEY,
        value TEXT NOT NULL
    )""",
)

_FETCHABLE = ("(status = 'queued' OR (status IN (%(l1)s, %(l2)s) AND lease_until <= %(now)s))")

_CLAIM = f"""
UPDATE inbox_messages SET status = 'in_progress', lease_token = %(token)s,
       lease_until = %(until)s, owner = %(owner)s, updated_at = %(now)s
 WHERE id = (SELECT id FROM inbox_messages WHERE id = %(id)s AND {_FETCHABLE}
             FOR UPDATE SKIP LOCKED)
RETURNING id"""

# claim_next: the oldest queued messages in index order, or messages whose lease ran out
# (the partial index finds them); each skips rows another worker is locking right now.
_TAKE = f"""
UPDATE inbox_messages m SET status = 'in_progress',
       lease_token = replace(gen_random_uuid()::text, '-', ''),
       lease_until = %(until)s, owner = %(owner)s, updated_at = %(now)s
 WHERE m.id IN (SELECT id FROM inbox_messages WHERE {{where}}
                 ORDER BY {{order}} LIMIT %(limit)s FOR UPDATE SKIP LOCKED)
RETURNING {", ".join("m." + c.strip() for c in COLUMNS.split(","))}, m.lease_token"""
_TAKE_QUEUED = _TAKE.format(where="status = 'queued'", order="status, created_at, id")
_TAKE_EXPIRED = _TAKE.format(where="status IN (%(l1)s, %(l2)s) AND lease_until <= %(now)s",
                             order="lease_until")
EXPIRED_CHECK = 1.0  # claim_next looks for expired leases first at most this often

# One statement on the happy path: the WHERE clause checks the token and the move (and
# is re-checked on the newest row version after a wait), prev_status keeps the old
# status for the journal entry written alongside.
_UPDATE = f"""
WITH upd AS (
    UPDATE inbox_messages SET prev_status = status, status = %(new)s, updated_at = %(now)s,
           lease_until = CASE WHEN %(keep)s THEN lease_until END
     WHERE id = %(id)s AND status = ANY(%(from)s)
       AND lease_token IS NOT DISTINCT FROM COALESCE(%(token)s, lease_token)
    RETURNING {COLUMNS}, prev_status
), j AS (
    INSERT INTO inbox_journal ({JOURNAL_COLUMNS})
    SELECT id, %(now)s, prev_status, %(new)s,
           CASE WHEN %(token)s::text IS NULL OR owner IS NULL THEN %(operator)s ELSE owner END,
           %(reason)s
      FROM upd
)
SELECT {COLUMNS} FROM upd"""


class PostgresInbox:
    """An inbox in the PostgreSQL database a ``postgresql://`` URL names (tables go to
    the first schema of its search_path)."""

    def __init__(self, url: str, *, clock: Clock | None = None, connect_timeout: int = 5,
                 statement_timeout: float = 10.0) -> None:
        self.url = redact_url(url)
        try:
            params = conninfo_to_dict(url)
        except psycopg.Error as exc:
            raise BadRequest(f"invalid PostgreSQL URL {self.url}: {exc}") from None
        extra: dict[str, str | int] = {"application_name": "interlock-inbox",
                                       "connect_timeout": connect_timeout}
        self._conninfo = make_conninfo(url, **{k: v for k, v in extra.items()
                                              if k not in params})
        self.statement_timeout = statement_timeout
        self.clock = clock or SystemClock()
        self._lock = threading.RLock()
        self._conn: Conn | None = None
        self._expired_checked = float("-inf")
        self._run(self._create_schema)

    def __repr__(self) -> str:
        return f"PostgresInbox({self.url!r})"

    # -- plumbing ---------------------------------------------------------------------

    def _connection(self) -> Conn:
        if self._conn is not None and not (self._conn.closed or self._conn.broken):
            return self._conn
        self._drop()
        conn: Conn = psycopg.connect(self._conninfo, autocommit=True)
        conn.execute(f"SET statement_timeout = {int(self.statement_timeout * 1000)}")
        self._conn = conn
        return conn

    def _drop(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    def _run(self, body: Callable[[Conn], T]) -> T:
        with self._lock:
            try:
                return body(self._connection())
            except psycopg.OperationalError as exc:
                self._drop()
                first = str(exc).strip().splitlines()[0] if str(exc).strip() else repr(exc)
                raise InboxUnavailable(
                    f"cannot use the inbox at {self.url}: {redact_url(first)}") from None

    @staticmethod
    def _create_schema(conn: Conn) -> None:
        with conn.transaction():
            conn.execute("SELECT pg_advisory_xact_lock(%s)", (_SCHEMA_LOCK,))
            for statement in SCHEMA:
                conn.execute(statement)

    def _get(self, conn: Conn, message_id: str) -> tuple[Message, str | None]:
        row = conn.execute(f"SELECT {COLUMNS}, lease_token FROM inbox_messages WHERE id = %s",
                           (message_id,)).fetchone()
        if row is None:
            raise UnknownMessage(f"no message {message_id}")
        return message_from(row), row[11]

    # -- messages ---------------------------------------------------------------------

    def post(self, type: str, sender: str, body: str = "", *,
             correlation_id: str | None = None, payload_ref: str | None = None) -> str:
        check_post(type, sender)
        message_id = new_id()
        now = self.clock.now()
        self._run(lambda conn: conn.execute(
            "INSERT INTO inbox_messages (id, type, sender, status, body, correlation_id,"
            " payload_ref, created_at, updated_at)"
            " VALUES (%s, %s, %s, 'queued', %s, %s, %s, %s, %s)",
            (message_id, type, sender, body, correlation_id, payload_ref, now, now)))
        return message_id

    def post_many(self, messages: builtins.list[tuple[str, str, str]]) -> builtins.list[str]:
        """Queue (type, sender, body) triples in one transaction (for tests and benches)."""
        ids = [new_id() for _ in messages]
        now = self.clock.now()

        def body(conn: Conn) -> None:
            with conn.transaction(), conn.cursor() as cur:
                cur.executemany(
                    "INSERT INTO inbox_messages (id, type, sender, status, body, created_at,"
                    " updated_at) VALUES (%s, %s, %s, 'queued', %s, %s, %s)",
                    [(i, t, s, b, now + n * 1e-6, now) for n, (i, (t, s, b))
                     in enumerate(zip(ids, messages, strict=True))])

        self._run(body)
        return ids

    def get(self, message_id: str) -> Message:
        check_id(message_id)
        return self._run(lambda conn: self._get(conn, message_id)[0])

    def list(self, status: Status | None = None, limit: int = 1000) -> builtins.list[Message]:
        check_limit(limit)
        where, params = ("", (limit,)) if status is None else (
            "WHERE status = %s ", (str(status), limit))
        rows = self._run(lambda conn: conn.execute(
            f"SELECT {COLUMNS} FROM inbox_messages {where}ORDER BY created_at, id LIMIT %s",
            params).fetchall())
        return [message_from(r) for r in rows]

    def fetch_queued(self, limit: int = 100) -> builtins.list[Message]:
        check_limit(limit)
        params = {"l1": LEASED_NAMES[0], "l2": LEASED_NAMES[1], "now": self.clock.now(),
                  "limit": limit}
        rows = self._run(lambda conn: conn.execute(
            f"SELECT {COLUMNS} FROM inbox_messages WHERE {_FETCHABLE} "
            "ORDER BY created_at, id LIMIT %(limit)s", params).fetchall())
        return [message_from(r) for r in rows]

    def claim(self, message_id: str, owner: str,
              lease_seconds: float = DEFAULT_LEASE) -> Lease | None:
        check_id(message_id)
        seconds = check_lease(lease_seconds)
        now = self.clock.now()
        lease = Lease(new_token(), now + seconds)
        params = {"id": message_id, "token": lease.token, "until": lease.lease_until,
                  "owner": owner, "now": now, "l1": LEASED_NAMES[0], "l2": LEASED_NAMES[1]}

        def body(conn: Conn) -> Lease | None:
            if conn.execute(_CLAIM, params).fetchone() is not None:
                return lease
            if conn.execute("SELECT 1 FROM inbox_messages WHERE id = %s",
                            (message_id,)).fetchone() is None:
                raise UnknownMessage(f"no message {message_id}")
            return None

        return self._run(body)

    def claim_next(self, owner: str, lease_seconds: float = DEFAULT_LEASE,
                   limit: int = 1) -> builtins.list[Claim]:
        """Queued messages in one ``SKIP LOCKED`` statement, like a bare worker loop.
        Expired leases are taken first when they were last looked for over
        EXPIRED_CHECK seconds ago, and whenever too few messages are queued."""
        check_limit(limit)
        now = self.clock.now()
        until = now + check_lease(lease_seconds)
        params: dict[str, Any] = {"limit": limit, "until": until, "owner": owner, "now": now,
                                  "l1": LEASED_NAMES[0], "l2": LEASED_NAMES[1]}
        order = [_TAKE_QUEUED, _TAKE_EXPIRED]
        if now - self._expired_checked >= EXPIRED_CHECK:
            order.reverse()

        def body(conn: Conn) -> builtins.list[tuple[Any, ...]]:
            rows: builtins.list[tuple[Any, ...]] = []
            for statement in order:
                if statement is _TAKE_EXPIRED:
                    self._expired_checked = now
                taken = conn.execute(statement, {**params, "limit": limit - len(rows)}
                                     ).fetchall()
                rows += sorted(taken, key=lambda r: (r[9], r[0]))  # RETURNING has no order
                if len(rows) >= limit:
                    break
            return rows

        return [Claim(message_from(r), Lease(r[11], until)) for r in self._run(body)]

    def update_status(self, message_id: str, status: Status, token: str | None = None, *,
                      reason: str | None = None) -> Message:
        check_id(message_id)
        new = Status(status)
        moves = WORKER_MOVES if token is not None else OPERATOR_MOVES
        sources = [str(s) for s, targets in moves.items() if new in targets]
        params = {"id": message_id, "token": token, "from": sources, "new": str(new),
                  "now": self.clock.now(), "keep": new is Status.ACKED, "operator": OPERATOR,
                  "reason": reason}

        def body(conn: Conn) -> Message:
            row = conn.execute(_UPDATE, params).fetchone() if sources else None
            if row is not None:
                return message_from(row)
            message, current = self._get(conn, message_id)
            check_update(message, new, token, current)  # raises the reason it failed
            raise InboxUnavailable(f"message {message_id} changed while it was updated; "
                                   "try again")

        return self._run(body)

    def reclaim_expired(self) -> int:
        params = {"l1": LEASED_NAMES[0], "l2": LEASED_NAMES[1], "now": self.clock.now(),
                  "actor": REAPER}
        rows = self._run(lambda conn: conn.execute(
            f"""WITH old AS (SELECT id, status FROM inbox_messages
                              WHERE status IN (%(l1)s, %(l2)s) AND lease_until <= %(now)s
                              FOR UPDATE SKIP LOCKED),
                     upd AS (UPDATE inbox_messages m SET status = 'queued', lease_token = NULL,
                                    lease_until = NULL, owner = NULL, updated_at = %(now)s
                               FROM old WHERE m.id = old.id RETURNING m.id, old.status)
                INSERT INTO inbox_journal ({JOURNAL_COLUMNS})
                SELECT id, %(now)s, status, 'queued', %(actor)s, 'lease expired' FROM upd
                RETURNING 1""", params).fetchall())
        return len(rows)

    def journal(self, message_id: str) -> builtins.list[JournalEntry]:
        check_id(message_id)

        def body(conn: Conn) -> builtins.list[JournalEntry]:
            self._get(conn, message_id)
            rows = conn.execute(f"SELECT {JOURNAL_COLUMNS} FROM inbox_journal "
                                "WHERE message_id = %s ORDER BY n", (message_id,)).fetchall()
            return [entry_from(r) for r in rows]

        return self._run(body)

    # -- settings ---------------------------------------------------------------------

    def settings(self) -> dict[str, Any]:
        rows = self._run(lambda conn: conn.execute(
            "SELECT key, value FROM inbox_settings").fetchall())
        return {key: json.loads(value) for key, value in rows}

    def set_setting(self, key: str, value: Any) -> None:
        check_setting(key, value)
        self._run(lambda conn: conn.execute(
            "INSERT INTO inbox_settings (key, value) VALUES (%s, %s) "
            "ON CONFLICT (key) DO UPDATE SET value = excluded.value", (key, json.dumps(value))))

    def close(self) -> None:
        with self._lock:
            self._drop()
