"""What only the PostgreSQL adapter promises: each status update finds its row by the
primary key whatever the statistics say, and tables of earlier versions get the new
indexes."""

from __future__ import annotations

import json
from typing import Any

import psycopg

from interlock.runtime.inbox.model import MOVES, Status
from interlock.runtime.inbox.postgres import _UPDATES, PostgresInbox, _take

from support.inbox_helpers import empty_pg


def _scans(plan: dict[str, Any]) -> list[tuple[str, str | None]]:
    """(node type, index name) of every scan in an EXPLAIN (FORMAT JSON) plan."""
    found = [(plan["Node Type"], plan.get("Index Name"))] if "Scan" in plan["Node Type"] else []
    for child in plan.get("Plans", []):
        found += _scans(child)
    return found


def _explain(conn: psycopg.Connection[Any], sql: str, params: dict[str, Any]
             ) -> list[tuple[str, str | None]]:
    """The scans of ``sql``'s plan (EXPLAIN without ANALYZE runs nothing)."""
    text = psycopg.ClientCursor(conn).mogrify(sql, params)
    row = conn.execute(f"EXPLAIN (FORMAT JSON) {text}").fetchone()
    assert row is not None
    plan = row[0] if isinstance(row[0], list) else json.loads(row[0])
    return _scans(plan[0]["Plan"])


def test_updates_use_the_primary_key_when_statistics_show_no_leases(
        inbox_pg_url: str) -> None:
    empty_pg(inbox_pg_url)
    inbox = PostgresInbox(inbox_pg_url)
    try:
        inbox.post_many([("t", "s", str(n)) for n in range(2000)])
        with psycopg.connect(inbox_pg_url, autocommit=True) as conn:
            conn.execute("VACUUM ANALYZE inbox_messages")  # all queued: no leases
            (claim,) = inbox.claim_next("w1", 60)
            params = {"id": claim.message.id, "token": claim.lease.token, "now": 0.0,
                      "reason": None}
            for move in MOVES.values():
                if move in _UPDATES:
                    scans = _explain(conn, _UPDATES[move], params)
                    assert scans and all(name == "inbox_messages_pkey" for _, name in scans
                                         if name is not None), (move, scans)
                    assert {kind for kind, _ in scans} <= {"Index Scan", "CTE Scan"}, scans
            taken = _explain(conn, _take(False, 1), {"until": 1.0, "owner": "w", "now": 0.0})
            assert ("Index Scan", "inbox_messages_queued") in taken, taken
            expired = _explain(conn, _take(True, 4), {"until": 1.0, "owner": "w", "now": 0.0})
            assert ("Index Scan", "inbox_messages_lease_until") in expired, expired
    finally:
        inbox.close()


def test_indexes_of_earlier_versions_are_replaced(inbox_pg_url: str) -> None:
    empty_pg(inbox_pg_url)
    with psycopg.connect(inbox_pg_url, autocommit=True) as conn:
        conn.execute("DROP TABLE IF EXISTS inbox_messages")
        conn.execute("""CREATE TABLE inbox_messages (
            id TEXT PRIMARY KEY, type TEXT NOT NULL, sender TEXT NOT NULL,
            status TEXT NOT NULL, body TEXT NOT NULL, correlation_id TEXT,
            payload_ref TEXT, lease_until DOUBLE PRECISION, lease_token TEXT, owner TEXT,
            prev_status TEXT, created_at DOUBLE PRECISION NOT NULL,
            updated_at DOUBLE PRECISION NOT NULL)""")
        conn.execute("CREATE INDEX inbox_messages_queue ON inbox_messages "
                      "(status, created_at, id)")
        conn.execute("CREATE INDEX inbox_messages_leases ON inbox_messages (lease_until) "
                      "WHERE status IN ('in_progress', 'acked')")
    inbox = PostgresInbox(inbox_pg_url)
    try:
        message_id = inbox.post("t", "s")
        (claim,) = inbox.claim_next("w1", 60)
        assert inbox.update_status(message_id, Status.DONE, claim.lease.token).status \
            is Status.DONE
        with psycopg.connect(inbox_pg_url, autocommit=True) as conn:
            names = {r[0] for r in conn.execute(
                "SELECT indexname FROM pg_indexes WHERE tablename = 'inbox_messages' "
                "AND schemaname = current_schema()").fetchall()}
        assert names == {"inbox_messages_pkey", "inbox_messages_queued",
                         "inbox_messages_lease_until"}
    finally:
        inbox.close()

