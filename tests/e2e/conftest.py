"""End-to-end tests: no process a test started in its folder outlives the test."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from support.ralph_e2e import kill_leftovers


@pytest.fixture(autouse=True)
def _no_leftovers(tmp_path: Path) -> Iterator[None]:
    yield
    kill_leftovers(tmp_path)
