"""Inbox fixtures: one adapter per backend (SQLite, PostgreSQL, HTTP over the real
server, and the FAKE ArangoDB of support.fake_arango), all on one ManualClock."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

from interlock.runtime.engine.clock import ManualClock
from interlock.runtime.inbox.arango import ArangoInbox
from interlock.runtime.inbox.base import InboxAdapter
from interlock.runtime.inbox.http import HttpInbox
from interlock.runtime.inbox.postgres import PostgresInbox
from interlock.runtime.inbox.sqlite import SqliteInbox

from support.fake_arango import FakeArangoDatabase
from support.inbox_helpers import Backend, empty_pg, server_thread
from support.store_fixtures import require_pg
from support.store_helpers import with_params

BACKENDS = ["sqlite", "postgres", "http", "arango-fake"]


@pytest.fixture(scope="module")
def inbox_pg_url() -> Iterator[str]:
    """A URL whose search_path is a fresh schema, dropped after the module."""
    base = require_pg()
    schema = f"inbox_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(base, autocommit=True) as conn:
        conn.execute(f"CREATE SCHEMA {schema}")
    yield with_params(base, options=f"-c search_path={schema}")
    with psycopg.connect(base, autocommit=True) as conn:
        conn.execute(f"DROP SCHEMA {schema} CASCADE")


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Backend]:
    clock = ManualClock()
    name = request.param
    if name == "sqlite":
        inbox: InboxAdapter = SqliteInbox(tmp_path / "inbox.db", clock)
    elif name == "postgres":
        url: str = request.getfixturevalue("inbox_pg_url")
        empty_pg(url)
        inbox = PostgresInbox(url, clock=clock)
    elif name == "arango-fake":
        inbox = ArangoInbox(FakeArangoDatabase(), "messages", clock=clock)
    else:
        store = SqliteInbox(tmp_path / "served.db", clock)
        with server_thread(store) as base_url:
            client = HttpInbox(base_url, timeout=5.0)
            yield Backend(name, client, clock)
            client.close()
        store.close()
        return
    yield Backend(name, inbox, clock)
    inbox.close()
