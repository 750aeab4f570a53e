"""The shared inbox on PostgreSQL (psycopg 3), for workers on several machines.

A claim is one statement: ``UPDATE ... WHERE id = ANY(ARRAY(SELECT ... FOR UPDATE SKIP
LOCKED))``, so a worker never waits on a row another worker is claiming; it just does not
get it. A status update is one statement too: each kind of move (``model.Move``) has its
own, with the move's source statuses and the token check written in, that updates and
journals together; only when it changes nothing does a second read find out why (the
shared ``check_update``). psycopg prepares the statements on the connection after a few
uses, and one cursor serves every call. A lost connection is reported as
InboxUnavailable and reopened on the next call.
"""

from __future__ import annotations

import builtins
import functools
import json
import threading
from collections.abc import Callable, Iterable
from typing import Any, TypeVar

import psycopg
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from interlock.runtime.config.urls import redact_url
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
    queue_rows,
)
from interlock.runtime.inbox.base import DEFAULT_LEASE, check_setting
from interlock.runtime.inbox.model import (
    MOVES,
    OPERATOR,
    REAPER,
    BadRequest,
    Claim,
    InboxUnavailable,
    Message,
    MessageLease,
    Move,
    Status,
    StatusChange,
    UnknownMessage,
    check_id,
    check_post,
    check_update,
    move_for,
)

T = TypeVar("T")
Conn = psycopg.Connection[tuple[Any, ...]]
Cursor = psycopg.Cursor[tuple[Any, ...]]
_SCHEMA_LOCK = 0x1A7E_1B0C

# Both message indexes are partial, on the rows each search wants: queued messages in
# order, and leases by their end. So no index but the primary key can serve a status
# update's WHERE clause (id, token, source statuses), and the planner cannot pick one
# and scan it (which a full (status, ...) index invited when the statistics said few
# messages were in progress). The journal is keyed (message_id, n): one index, read by
# message in order. Tables made by earlier versions keep their journal keys; their old
# message indexes are replaced.
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
    "DROP INDEX IF EXISTS inbox_messages_queue",
    "DROP INDEX IF EXISTS inbox_messages_leases",
    """CREATE INDEX IF NOT EXISTS inbox_messages_queued ON inbox_messages (created_at, id)
       WHERE status = 'queued'""",
    """CREATE INDEX IF NOT EXISTS inbox_messages_lease_until ON inbox_messages (lease_until)
       WHERE lease_until IS NOT NULL""",
    """CREATE TABLE IF NOT EXISTS inbox_journal (
        n BIGINT GENERATED ALWAYS AS IDENTITY,
        message_id TEXT NOT NULL,
        at DOUBLE PRECISION NOT NULL,
        before_status TEXT NOT NULL,
        after_status TEXT NOT NULL,
        actor TEXT NOT NULL,
        reason TEXT,
        PRIMARY KEY (message_id, n)
    )""",
    """CREATE TABLE IF NOT EXISTS inbox_settings (
        key TEXT PRIMARY KEY,
        value TEXT NOT NULL
    )""",
)

def _names(statuses: Iterable[Status | str]) -> str:
    """Statuses as an SQL list of literals (their names are fixed lowercase words)."""
    return ", ".join(f"'{Status(s).value}'" for s in sorted(statuses))


_LEASED = _names(LEASED_NAMES)
_FETCHABLE = f"(status = 'queued' OR (status IN ({_LEASED}) AND lease_until <= %(now)s))"

_CLAIM = f"""
UPDATE inbox_messages SET status = 'in_progress', lease_token = %(token)s,
       lease_until = %(until)s, owner = %(owner)s, updated_at = %(now)s
 WHERE id = (SELECT id FROM inbox_messages WHERE id = %(id)s AND {_FETCHABLE}
             FOR UPDATE SKIP LOCKED)
RETURNING id"""


@functools.lru_cache(maxsize=32)
def _take(expired: bool, limit: int) -> str:
    """claim_next's statement: the oldest queued messages in index order, or messages
    whose lease ran out, each from its partial index; each skips rows another worker is
    locking right now. The locking subquery runs once, before the update (``= (...)``
    for one row, a plain primary key lookup; ``= ANY(ARRAY(...))`` for more). The LIMIT
    is written in: as a parameter, the server would plan the statement again on every
    call, not knowing how many rows it wants."""
    where, order = ((f"status IN ({_LEASED}) AND lease_until <= %(now)s", "lease_until")
                    if expired else ("status = 'queued'", "created_at, id"))
    rows = (f"SELECT id FROM inbox_messages WHERE {where} ORDER BY {order} "
            f"LIMIT {check_limit(limit):d} FOR UPDATE SKIP LOCKED")
    return f"""
UPDATE inbox_messages m SET status = 'in_progress',
       lease_token = replace(gen_random_uuid()::text, '-', ''),
       lease_until = %(until)s, owner = %(owner)s, updated_at = %(now)s
 WHERE m.id {f"= ({rows})" if limit == 1 else f"= ANY(ARRAY({rows}))"}
RETURNING {", ".join("m." + c.strip() for c in COLUMNS.split(","))}, m.lease_token"""


EXPIRED_CHECK = 1.0  # claim_next looks for expired leases first at most this often


def _update(move: Move) -> str:
    """The one statement of a status update of this kind (for a move some status
    allows). Its WHERE clause holds the move's source statuses and, for a worker, the
    lease token; after a wait on a row lock the server checks them again on the newest
    row version. prev_status keeps the old status for the journal entry the same
    statement writes."""
    token = " AND lease_token = %(token)s" if move.by_worker else ""
    lease = "lease_until" if move.keeps_lease else "NULL"
    actor = f"COALESCE(owner, '{OPERATOR}')" if move.by_worker else f"'{OPERATOR}'"
    return f"""
WITH upd AS (
    UPDATE inbox_messages SET prev_status = status, status = '{move.new.value}',
           updated_at = %(now)s, lease_until = {lease}
     WHERE id = %(id)s AND status IN ({_names(move.sources)}){token}
    RETURNING {COLUMNS}, prev_status
), j AS (
    INSERT INTO inbox_journal ({JOURNAL_COLUMNS})
    SELECT id, %(now)s, prev_status, '{move.new.value}', {actor}, %(reason)s FROM upd
)
SELECT {COLUMNS} FROM upd"""


_UPDATES = {move: _update(move) for move in MOVES.values() if move.sources}


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
        self._cur: Cursor | None = None
        self._expired_checked = float("-inf")
        self._run(self._create_schema)

    def __repr__(self) -> str:
        return f"PostgresInbox({self.url!r})"

    # -- plumbing ---------------------------------------------------------------------

    def _cursor(self) -> Cursor:
        """The one cursor of the live connection (connecting when there is none)."""
        conn = self._conn
        if conn is not None and self._cur is not None and not (conn.closed or conn.broken):
            return self._cur
        self._drop()
        conn = psycopg.connect(self._conninfo, autocommit=True)
        conn.execute(f"SET statement_timeout = {int(self.statement_timeout * 1000)}")
        self._conn, self._cur = conn, conn.cursor()
        return self._cur

    def _drop(self) -> None:
        if self._conn is not None:
            self._conn.close()
        self._conn = self._cur = None

    def _run(self, body: Callable[[Cursor], T]) -> T:
        with self._lock:
            try:
                return body(self._cursor())
            except psycopg.OperationalError as exc:
                self._drop()
                first = str(exc).strip().splitlines()[0] if str(exc).strip() else repr(exc)
                raise InboxUnavailable(
                    f"cannot use the inbox at {self.url}: {redact_url(first)}") from None

    @staticmethod
    def _create_schema(cur: Cursor) -> None:
        with cur.connection.transaction():
            cur.execute("SELECT pg_advisory_xact_lock(%s)", (_SCHEMA_LOCK,))
            for statement in SCHEMA:
                cur.execute(statement)

    @staticmethod
    def _get(cur: Cursor, message_id: str) -> tuple[Message, str | None]:
        row = cur.execute(f"SELECT {COLUMNS}, lease_token FROM inbox_messages WHERE id = %s",
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
        self._run(lambda cur: cur.execute(
            "INSERT INTO inbox_messages (id, type, sender, status, body, correlation_id,"
            " payload_ref, created_at, updated_at)"
            " VALUES (%s, %s, %s, 'queued', %s, %s, %s, %s, %s)",
            (message_id, type, sender, body, correlation_id, payload_ref, now, now)))
        return message_id

    def post_many(self, messages: builtins.list[tuple[str, str, str]]) -> builtins.list[str]:
        """Queue (type, sender, body) triples in one transaction (for tests and benches)."""
        ids = [new_id() for _ in messages]
        rows = queue_rows(ids, messages, self.clock.now())

        def body(cur: Cursor) -> None:
            with cur.connection.transaction():
                cur.executemany(
                    "INSERT INTO inbox_messages (id, type, sender, status, body, created_at,"
                    " updated_at) VALUES (%s, %s, %s, 'queued', %s, %s, %s)", rows)

        self._run(body)
        return ids

    def get(self, message_id: str) -> Message:
        check_id(message_id)
        return self._run(lambda cur: self._get(cur, message_id)[0])

    def list(self, status: Status | None = None, limit: int = 1000) -> builtins.list[Message]:
        check_limit(limit)
        where, params = ("", (limit,)) if status is None else (
            "WHERE status = %s ", (str(status), limit))
        rows = self._run(lambda cur: cur.execute(
            f"SELECT {COLUMNS} FROM inbox_messages {where}ORDER BY created_at, id LIMIT %s",
            params).fetchall())
        return [message_from(r) for r in rows]

    def fetch_queued(self, limit: int = 100) -> builtins.list[Message]:
        check_limit(limit)
        params = {"now": self.clock.now(), "limit": limit}
        rows = self._run(lambda cur: cur.execute(
            f"SELECT {COLUMNS} FROM inbox_messages WHERE {_FETCHABLE} "
            "ORDER BY created_at, id LIMIT %(limit)s", params).fetchall())
        return [message_from(r) for r in rows]

    def claim(self, message_id: str, owner: str,
              lease_seconds: float = DEFAULT_LEASE) -> MessageLease | None:
        check_id(message_id)
        seconds = check_lease(lease_seconds)
        now = self.clock.now()
        lease = MessageLease(new_token(), now + seconds)
        params = {"id": message_id, "token": lease.token, "until": lease.lease_until,
                  "owner": owner, "now": now}

        def body(cur: Cursor) -> MessageLease | None:
            if cur.execute(_CLAIM, params).fetchone() is not None:
                return lease
            if cur.execute("SELECT 1 FROM inbox_messages WHERE id = %s",
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
        params = {"until": until, "owner": owner, "now": now}
        order = (False, True)
        if now - self._expired_checked >= EXPIRED_CHECK:
            order = (True, False)

        def body(cur: Cursor) -> builtins.list[tuple[Any, ...]]:
            rows: builtins.list[tuple[Any, ...]] = []
            for expired in order:
                if expired:
                    self._expired_checked = now
                taken = cur.execute(_take(expired, limit - len(rows)), params).fetchall()
                if len(taken) > 1:
                    taken.sort(key=lambda r: (r[9], r[0]))  # RETURNING has no order
                rows += taken
                if len(rows) >= limit:
                    break
            return rows

        return [Claim(message_from(r), MessageLease(r[11], until)) for r in self._run(body)]

    def update_status(self, message_id: str, status: Status, token: str | None = None, *,
                      reason: str | None = None) -> Message:
        check_id(message_id)
        move = move_for(status, token)
        statement = _UPDATES.get(move)
        params = {"id": message_id, "token": token, "now": self.clock.now(),
                  "reason": reason}

        def body(cur: Cursor) -> Message:
            row = cur.execute(statement, params).fetchone() if statement else None
            if row is not None:
                return message_from(row)
            message, current = self._get(cur, message_id)
            check_update(message, move.new, token, current)  # raises the reason it failed
            raise InboxUnavailable(f"message {message_id} changed while it was updated; "
                                   "try again")

        return self._run(body)

    def reclaim_expired(self) -> int:
        params = {"now": self.clock.now(), "actor": REAPER}
        rows = self._run(lambda cur: cur.execute(
            f"""WITH old AS (SELECT id, status FROM inbox_messages
                              WHERE status IN ({_LEASED}) AND lease_until <= %(now)s
                              FOR UPDATE SKIP LOCKED),
                     upd AS (UPDATE inbox_messages m SET status = 'queued', lease_token = NULL,
                                    lease_until = NULL, owner = NULL, updated_at = %(now)s
                               FROM old WHERE m.id = old.id RETURNING m.id, old.status)
                INSERT INTO inbox_journal ({JOURNAL_COLUMNS})
                SELECT id, %(now)s, status, 'queued', %(actor)s, 'lease expired' FROM upd
                RETURNING 1""", params).fetchall())
        return len(rows)

    def journal(self, message_id: str) -> builtins.list[StatusChange]:
        check_id(message_id)

        def body(cur: Cursor) -> builtins.list[StatusChange]:
            self._get(cur, message_id)
            rows = cur.execute(f"SELECT {JOURNAL_COLUMNS} FROM inbox_journal "
                               "WHERE message_id = %s ORDER BY n", (message_id,)).fetchall()
            return [entry_from(r) for r in rows]

        return self._run(body)

    # -- settings ---------------------------------------------------------------------

    def settings(self) -> dict[str, Any]:
        rows = self._run(lambda cur: cur.execute(
            "SELECT key, value FROM inbox_settings").fetchall())
        return {key: json.loads(value) for key, value in rows}

    def set_setting(self, key: str, value: Any) -> None:
        check_setting(key, value)
        self._run(lambda cur: cur.execute(
            "INSERT INTO inbox_settings (key, value) VALUES (%s, %s) "
            "ON CONFLICT (key) DO UPDATE SET value = excluded.value", (key, json.dumps(value))))

    def close(self) -> None:
        with self._lock:
            self._drop()
