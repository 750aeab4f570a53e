"""The embedded inbox: one SQLite file (WAL), safe across processes.

Every write is one ``BEGIN IMMEDIATE`` transaction, so claims and updates from several
processes are serialized by SQLite's write lock; a claim re-checks that the message is
still fetchable inside it, so two workers never both get a lease.
"""

from __future__ import annotations

import builtins
import json
import sqlite3
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from pathlib import Path
from typing import Any

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
    REAPER,
    Claim,
    InboxUnavailable,
    Message,
    MessageLease,
    Status,
    StatusChange,
    UnknownMessage,
    check_id,
    check_post,
    fetchable,
    move_for,
)

SCHEMA = (
    """CREATE TABLE IF NOT EXISTS inbox_messages (
        id TEXT PRIMARY KEY,
        type TEXT NOT NULL,
        sender TEXT NOT NULL,
        status TEXT NOT NULL,
        body TEXT NOT NULL,
        correlation_id TEXT,
        payload_ref TEXT,
        lease_until REAL,
        lease_token TEXT,
        owner TEXT,
        created_at REAL NOT NULL,
        updated_at REAL NOT NULL
    )""",
    "CREATE INDEX IF NOT EXISTS inbox_messages_queue ON inbox_messages (status, created_at, id)",
    """CREATE TABLE IF NOT EXISTS inbox_journal (
        n INTEGER PRIMARY KEY AUTOINCREMENT,
        message_id TEXT NOT NULL,
        at REAL NOT NULL,
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
BUSY_TIMEOUT = 30.0


class SqliteInbox:
    """An inbox in the SQLite file at ``path`` (created with its folder)."""

    def __init__(self, path: str | Path, clock: Clock | None = None) -> None:
        self.path = Path(path)
        self.clock = clock or SystemClock()
        self._lock = threading.Lock()
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            self._conn = sqlite3.connect(self.path, timeout=BUSY_TIMEOUT,
                                         isolation_level=None, check_same_thread=False)
            self._conn.execute("PRAGMA journal_mode=WAL")
            self._conn.execute("PRAGMA synchronous=NORMAL")
            with self._write() as conn:
                for statement in SCHEMA:
                    conn.execute(statement)
        except (sqlite3.Error, OSError) as exc:
            raise InboxUnavailable(f"cannot open the inbox {self.path}: {exc}") from None

    def __repr__(self) -> str:
        return f"SqliteInbox({str(self.path)!r})"

    @contextmanager
    def _write(self) -> Iterator[sqlite3.Connection]:
        with self._lock:
            conn = self._conn
            try:
                conn.execute("BEGIN IMMEDIATE")
            except sqlite3.Error as exc:
                raise InboxUnavailable(f"inbox {self.path}: {exc}") from None
            try:
                yield conn
            except BaseException:
                conn.execute("ROLLBACK")
                raise
            conn.execute("COMMIT")

    def _read(self, sql: str, params: tuple[Any, ...] = ()) -> list[Any]:
        with self._lock:
            try:
                return self._conn.execute(sql, params).fetchall()
            except sqlite3.Error as exc:
                raise InboxUnavailable(f"inbox {self.path}: {exc}") from None

    # -- messages ---------------------------------------------------------------------

    def post(self, type: str, sender: str, body: str = "", *,
             correlation_id: str | None = None, payload_ref: str | None = None) -> str:
        check_post(type, sender)
        message_id = new_id()
        now = self.clock.now()
        with self._write() as conn:
            conn.execute(
                "INSERT INTO inbox_messages (id, type, sender, status, body, correlation_id,"
                " payload_ref, created_at, updated_at) VALUES (?, ?, ?, 'queued', ?, ?, ?, ?, ?)",
                (message_id, type, sender, body, correlation_id, payload_ref, now, now))
        return message_id

    def post_many(self, messages: list[tuple[str, str, str]]) -> list[str]:
        """Queue (type, sender, body) triples in one transaction (for tests and benches)."""
        ids = [new_id() for _ in messages]
        now = self.clock.now()
        with self._write() as conn:
            conn.executemany(
                "INSERT INTO inbox_messages (id, type, sender, status, body, created_at,"
                " updated_at) VALUES (?, ?, ?, 'queued', ?, ?, ?)",
                queue_rows(ids, messages, now))
        return ids

    def get(self, message_id: str) -> Message:
        rows = self._read(f"SELECT {COLUMNS} FROM inbox_messages WHERE id = ?",
                          (check_id(message_id),))
        if not rows:
            raise UnknownMessage(f"no message {message_id}")
        return message_from(rows[0])

    def list(self, status: Status | None = None, limit: int = 1000) -> builtins.list[Message]:
        check_limit(limit)
        if status is None:
            rows = self._read(f"SELECT {COLUMNS} FROM inbox_messages ORDER BY created_at, id "
                              "LIMIT ?", (limit,))
        else:
            rows = self._read(f"SELECT {COLUMNS} FROM inbox_messages WHERE status = ? "
                              "ORDER BY created_at, id LIMIT ?", (str(status), limit))
        return [message_from(r) for r in rows]

    def fetch_queued(self, limit: int = 100) -> builtins.list[Message]:
        check_limit(limit)
        rows = self._read(
            f"SELECT {COLUMNS} FROM inbox_messages WHERE status = 'queued' OR "
            "(status IN (?, ?) AND lease_until <= ?) ORDER BY created_at, id LIMIT ?",
            (*LEASED_NAMES, self.clock.now(), limit))
        return [message_from(r) for r in rows]

    def claim(self, message_id: str, owner: str,
              lease_seconds: float = DEFAULT_LEASE) -> MessageLease | None:
        check_id(message_id)
        seconds = check_lease(lease_seconds)
        with self._write() as conn:
            now = self.clock.now()
            row = conn.execute(f"SELECT {COLUMNS} FROM inbox_messages WHERE id = ?",
                               (message_id,)).fetchone()
            if row is None:
                raise UnknownMessage(f"no message {message_id}")
            if not fetchable(message_from(row), now):
                return None
            lease = MessageLease(new_token(), now + seconds)
            conn.execute(
                "UPDATE inbox_messages SET status = 'in_progress', lease_token = ?, "
                "lease_until = ?, owner = ?, updated_at = ? WHERE id = ?",
                (lease.token, lease.lease_until, owner, now, message_id))
        return lease

    def claim_next(self, owner: str, lease_seconds: float = DEFAULT_LEASE,
                   limit: int = 1) -> builtins.list[Claim]:
        check_limit(limit)
        seconds = check_lease(lease_seconds)
        claims = []
        with self._write() as conn:
            now = self.clock.now()
            rows = conn.execute(
                f"SELECT {COLUMNS} FROM inbox_messages WHERE status = 'queued' OR "
                "(status IN (?, ?) AND lease_until <= ?) "
                "ORDER BY status = 'queued', created_at, id LIMIT ?",
                (*LEASED_NAMES, now, limit)).fetchall()
            for row in rows:
                lease = MessageLease(new_token(), now + seconds)
                conn.execute(
                    "UPDATE inbox_messages SET status = 'in_progress', lease_token = ?, "
                    "lease_until = ?, owner = ?, updated_at = ? WHERE id = ?",
                    (lease.token, lease.lease_until, owner, now, row[0]))
                message = replace(message_from(row), status=Status.IN_PROGRESS,
                                  lease_until=lease.lease_until, owner=owner, updated_at=now)
                claims.append(Claim(message, lease))
        return claims

    def update_status(self, message_id: str, status: Status, token: str | None = None, *,
                      reason: str | None = None) -> Message:
        check_id(message_id)
        move = move_for(status, token)
        with self._write() as conn:
            now = self.clock.now()
            row = conn.execute(f"SELECT {COLUMNS}, lease_token FROM inbox_messages "
                               "WHERE id = ?", (message_id,)).fetchone()
            if row is None:
                raise UnknownMessage(f"no message {message_id}")
            before = message_from(row)
            after = move.apply(before, token, row[11], now)  # raises why it may not
            conn.execute("UPDATE inbox_messages SET status = ?, updated_at = ?, "
                         "lease_until = ? WHERE id = ?",
                         (str(after.status), now, after.lease_until, message_id))
            conn.execute(f"INSERT INTO inbox_journal ({JOURNAL_COLUMNS}) VALUES "
                         "(?, ?, ?, ?, ?, ?)",
                         (message_id, now, str(before.status), str(after.status),
                          move.actor(before.owner), reason))
        return after

    def reclaim_expired(self) -> int:
        with self._write() as conn:
            now = self.clock.now()
            rows = conn.execute(
                "SELECT id, status FROM inbox_messages WHERE status IN (?, ?) "
                "AND lease_until <= ?", (*LEASED_NAMES, now)).fetchall()
            for message_id, before in rows:
                conn.execute("UPDATE inbox_messages SET status = 'queued', lease_token = NULL,"
                             " lease_until = NULL, owner = NULL, updated_at = ? WHERE id = ?",
                             (now, message_id))
                conn.execute(f"INSERT INTO inbox_journal ({JOURNAL_COLUMNS}) VALUES "
                             "(?, ?, ?, 'queued', ?, 'lease expired')",
                             (message_id, now, before, REAPER))
        return len(rows)

    def journal(self, message_id: str) -> builtins.list[StatusChange]:
        self.get(message_id)
        rows = self._read(f"SELECT {JOURNAL_COLUMNS} FROM inbox_journal WHERE message_id = ?"
                          " ORDER BY n", (message_id,))
        return [entry_from(r) for r in rows]

    # -- settings ---------------------------------------------------------------------

    def settings(self) -> dict[str, Any]:
        rows = self._read("SELECT key, value FROM inbox_settings")
        return {key: json.loads(value) for key, value in rows}

    def set_setting(self, key: str, value: Any) -> None:
        check_setting(key, value)
        with self._write() as conn:
            conn.execute("INSERT INTO inbox_settings (key, value) VALUES (?, ?) "
                         "ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                         (key, json.dumps(value)))

    def close(self) -> None:
        with self._lock:
            self._conn.close()
