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
        created_at DOUBLE PRECISION NOT NULL,
        updated_at DOUBLE PRECISION NOT NULL
    )""",
    "CREATE INDEX IF NOT EXISTS inbox_messages_by_status ON inbox_messages (status, created_at)",
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

_CLAIM_NEXT = f"""
WITH picked AS (
    SELECT id FROM inbox_messages WHERE {_FETCHABLE}
     ORDER BY created_at, id LIMIT %(limit)s FOR UPDATE SKIP LOCKED
)
UPDATE inbox_messages m SET status = 'in_progress',
       lease_token = replace(gen_random_uuid()::text, '-', ''),
       lease_until = %(until)s, owner = %(owner)s, updated_at = %(now)s
  FROM picked WHERE m.id = picked.id
RETURNING {", ".join("m." + c.strip() for c in COLUMNS.split(","))}, m.lease_token"""

# One round trip on the happy path: lock, check token and move, update, journal.
_UPDATE = f"""
WITH cur AS (
    SELECT id, status, owner FROM inbox_messages
     WHERE id = %(id)s AND lease_token IS NOT DISTINCT FROM COALESCE(%(token)s, lease_token)
       AND status = ANY(%(from)s)
       FOR UPDATE
), upd AS (
    UPDATE inbox_messages m SET status = %(new)s, updated_at = %(now)s,
           lease_until = CASE WHEN %(keep)s THEN m.lease_until END
      FROM cur WHERE m.id = cur.id
    RETURNING {", ".join("m." + c.strip() for c in COLUMNS.split(","))}, cur.status AS before,
              cur.owner AS holder
), j AS (
    INSERT INTO inbox_journal ({JOURNAL_COLUMNS})
    SELECT id, %(now)s, before, %(new)s,
           CASE WHEN %(token)s::text IS NULL OR holder IS NULL THEN %(operator)s ELSE holder END,
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
        check_limit(limit)
        now = self.clock.now()
        until = now + check_lease(lease_seconds)
        params = {"limit": limit, "until": until, "owner": owner, "now": now,
                  "l1": LEASED_NAMES[0], "l2": LEASED_NAMES[1]}
        rows = self._run(lambda conn: conn.execute(_CLAIM_NEXT, params).fetchall())
        claims = [Claim(message_from(r), Lease(r[11], until)) for r in rows]
        return sorted(claims, key=lambda c: (c.message.created_at, c.message.id))

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
