"""Fixtures of the engine tests: a SQLite store in the test's folder."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from interlock.runtime.store.sqlite import SqliteStore


@pytest.fixture
def store(tmp_path: Path) -> Iterator[SqliteStore]:
    """A SQLite store in ``tmp_path/state.db``, closed after the test (a test module may
    define its own ``store``)."""
    s = SqliteStore(tmp_path / "state.db")
    yield s
    s.close()
