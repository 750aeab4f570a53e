"""The SQL both backends run, written once.

Statements are written with ``?`` for a value and ``?j`` for a JSON value (a JSON text);
:func:`render` turns them into SQLite's (``?``) or PostgreSQL's (``%s``, ``%s::jsonb``)
form. A statement that differs between the dialects by more than that (locking, ordering,
conflict handling, ids) stays in its backend's module; a backend may append a clause of
its own to a shared one (PostgreSQL's ``FOR UPDATE``, ``ON CONFLICT ... RETURNING``).
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass
from typing import Literal

Dialect = Literal["sqlite", "postgres"]

SESSION_COLUMNS = (
    "id, spec_name, spec_path, spec_hash, spec_text, status, seq, snapshot,"
    " created_at, updated_at"
)
JOURNAL_COLUMNS = "seq, at, kind, event, data, before_states, after_states, note"
QUEUE_COLUMNS = "id, session_id, event, data, enqueued_at"
AGENT_COLUMNS = "id, pgid, pid, owner, argv, started_at, session_id"
INVOCATION_COLUMNS = ("id, session_id, invoke, state, argv, spool, started_at, pid, pgid,"
                      " start_ticks, outcome, reason, ended_at, fanout, item_index, result")
FANOUT_COLUMNS = ("id, session_id, invoke, state, items, concurrency, started_at, outcome,"
                  " ended_at")
DEAD_COLUMNS = "id, session_id, kind, event, data, failed_at, error"


@dataclass(frozen=True, slots=True)
class Statements:
    """The shared statements, in one dialect's placeholders."""

    # sessions and their journal
    session_exists: str = "SELECT 1 FROM sessions WHERE id = ?"
    insert_session: str = (f"INSERT INTO sessions ({SESSION_COLUMNS})"
                           " VALUES (?, ?, ?, ?, ?, ?, ?, ?j, ?, ?)")
    get_session: str = f"SELECT {SESSION_COLUMNS} FROM sessions WHERE id = ?"
    fence_session: str = ("SELECT seq, lease_owner, lease_token, lease_expires_at FROM sessions"
                          " WHERE id = ?")
    insert_entry: str = (f"INSERT INTO journal (session_id, {JOURNAL_COLUMNS})"
                         " VALUES (?, ?, ?, ?, ?, ?j, ?j, ?j, ?)")
    step_session: str = ("UPDATE sessions SET seq = ?, snapshot = ?j, status = ?, updated_at = ?"
                         " WHERE id = ?")
    migrate_spec: str = ("UPDATE sessions SET spec_path = ?, spec_text = ?, spec_hash = ?"
                         " WHERE id = ?")
    journal: str = (f"SELECT {JOURNAL_COLUMNS} FROM journal WHERE session_id = ? AND seq > ?"
                    " ORDER BY seq, id")
    delete_session: str = "DELETE FROM sessions WHERE id = ?"  # cascades
    request_cancel: str = ("UPDATE sessions SET cancel_reason = ?, cancel_requested_at = ?"
                           " WHERE id = ?")
    cancel_request: str = "SELECT cancel_reason, cancel_requested_at FROM sessions WHERE id = ?"

    # the event queue, delivery keys, dead letters
    enqueue: str = ("INSERT INTO event_queue (session_id, event, data, enqueued_at)"
                    " VALUES (?, ?, ?j, ?) RETURNING id")
    key_offered: str = "SELECT 1 FROM deliveries WHERE session_id = ? AND key = ?"
    queued_events: str = (f"SELECT {QUEUE_COLUMNS} FROM event_queue WHERE session_id = ?"
                          " ORDER BY id")
    bury: str = ("INSERT INTO dead_letters (session_id, kind, event, data, failed_at, error)"
                 " VALUES (?, ?, ?, ?j, ?, ?)")
    dead_letters: str = (f"SELECT {DEAD_COLUMNS} FROM dead_letters WHERE session_id = ?"
                         " ORDER BY id")

    # leases: (owner, expires_at, now, id, now, owner, take_from) for acquire
    acquire: str = ("UPDATE sessions SET lease_owner = ?, lease_token = lease_token + 1,"
                    " lease_expires_at = ?, lease_acquired_at = ?"
                    " WHERE id = ? AND (lease_owner IS NULL OR lease_expires_at <= ?"
                    " OR lease_owner = ? OR lease_owner = ?)"
                    " RETURNING lease_token, lease_expires_at, lease_acquired_at")
    holder: str = ("SELECT lease_owner, lease_token, lease_expires_at, lease_acquired_at"
                   " FROM sessions WHERE id = ?")
    renew: str = ("UPDATE sessions SET lease_expires_at = ?"
                  " WHERE id = ? AND lease_owner = ? AND lease_token = ?"
                  " RETURNING lease_token, lease_expires_at, lease_acquired_at")
    release: str = ("UPDATE sessions SET lease_owner = NULL, lease_expires_at = NULL,"
                    " lease_acquired_at = NULL"
                    " WHERE id = ? AND lease_owner = ? AND lease_token = ?")

    # agent process groups
    insert_agent: str = f"INSERT INTO agents ({AGENT_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?)"
    forget_agent: str = "DELETE FROM agents WHERE id = ?"

    # invocations
    insert_invocation: str = (f"INSERT INTO invocations ({INVOCATION_COLUMNS})"
                              " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)")
    invocation_started: str = ("UPDATE invocations SET pid = ?, pgid = ?, start_ticks = ?"
                               " WHERE id = ?")
    end_invocation: str = ("UPDATE invocations SET outcome = ?, reason = ?, ended_at = ?"
                           " WHERE id = ? AND outcome IS NULL")
    invocation_result: str = "UPDATE invocations SET result = ? WHERE id = ?"

    # fan-outs
    insert_fanout: str = (f"INSERT INTO fanouts ({FANOUT_COLUMNS})"
                          " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)")
    end_fanout: str = ("UPDATE fanouts SET outcome = ?, ended_at = ?"
                       " WHERE id = ? AND outcome IS NULL")

    # staged configs
    stage_config: str = ("INSERT INTO staged_configs (node, config, staged_at) VALUES (?, ?j, ?)"
                         " ON CONFLICT (node) DO UPDATE SET config = excluded.config,"
                         " staged_at = excluded.staged_at")
    staged_config: str = "SELECT config FROM staged_configs WHERE node = ?"
    consume_staged_config: str = "DELETE FROM staged_configs WHERE node = ? RETURNING config"


_JSON = re.compile(r"\?j\b")


def render(template: str, dialect: Dialect) -> str:
    """``template`` in ``dialect``'s placeholders: ``?``/``?j`` for SQLite, ``%s``/
    ``%s::jsonb`` for PostgreSQL (psycopg), where a literal ``%`` would need escaping."""
    if dialect == "sqlite":
        return _JSON.sub("?", template)
    if "%" in template:
        raise ValueError(f"a shared statement holds a literal '%': {template!r}")
    return _JSON.sub("%s::jsonb", template).replace("?", "%s")


def statements(dialect: Dialect) -> Statements:
    """Every shared statement, rendered for ``dialect``."""
    written = Statements()
    return Statements(**{field.name: render(getattr(written, field.name), dialect)
                         for field in dataclasses.fields(Statements)})


SQLITE = statements("sqlite")
POSTGRES = statements("postgres")
