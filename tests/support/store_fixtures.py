"""Store fixtures (a pytest plugin: ``pytest_plugins = ["store_fixtures"]``).

PostgreSQL comes from INTERLOCK_TEST_PG_URL (scripts/with_pg.sh sets it); each test module
gets a schema of its own, emptied between tests. Without the URL the PostgreSQL cases skip,
except in CI, where they fail.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest

from interlock.runtime.store import Store, open_store

from support.paths import IN_CI
from support.store_helpers import with_params

PG_URL = os.environ.get("INTERLOCK_TEST_PG_URL", "")
BACKENDS = ["sqlite", "postgres"]


def require_pg() -> str:
    if not PG_URL:
        reason = ("INTERLOCK_TEST_PG_URL is not set: run the tests through"
                  " `bash scripts/with_pg.sh .venv/bin/pytest ...` (or `make test`)")
        if IN_CI:
            pytest.fail(f"the PostgreSQL tests must run in CI; {reason}")
        pytest.skip(reason)
    return PG_URL


@pytest.fixture(scope="module")
def pg_url() -> Iterator[str]:
    """A URL whose search_path is a fresh schema, dropped after the module."""
    base = require_pg()
    schema = f"test_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(base, autocommit=True) as conn:
        conn.execute(f"CREATE SCHEMA {schema}")
    url = with_params(base, options=f"-c search_path={schema}")
    open_store(url, Path.cwd()).close()  # creates the tables
    yield url
    with psycopg.connect(base, autocommit=True) as conn:
        conn.execute(f"DROP SCHEMA {schema} CASCADE")


@pytest.fixture(params=BACKENDS)
def target(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """Where a store lives, as open_store takes it: a fresh SQLite file or an emptied schema."""
    if request.param == "sqlite":
        return f"sqlite://{tmp_path / 'state.db'}"
    url: str = request.getfixturevalue("pg_url")
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("TRUNCATE sessions, journal, event_queue, agents, deliveries, dead_letters,"
                     " invocations, fanouts, staged_configs RESTART IDENTITY")
    return url


@pytest.fixture
def store(target: str) -> Iterator[Store]:
    opened = open_store(target, Path.cwd())
    yield opened
    opened.close()




# -- workers for real processes (spawned: they import this module by name) ----------------


def offer_worker(url: str, session_id: str, worker: int, keys: list[str], barrier: Any,
                 results: Any) -> None:
    """Offer every key; report [(key, id or None), ...]. Workers pair up on an order (so
    two race for each key at once), pairs start at different places."""
    store = open_store(url, Path.cwd())
    try:
        shift = (worker // 2 * 17) % len(keys)
        order = keys[shift:] + keys[:shift]
        barrier.wait(timeout=30)
        got = [(key, store.offer(session_id, "signal", {"key": key, "worker": worker},
                                 float(n), key=key)) for n, key in enumerate(order)]
        results.put((worker, got))
    finally:
        store.close()
