"""Times on the CLI: local ISO 8601 with a relative part, from a fixed clock and zone."""

from __future__ import annotations

import time
from collections.abc import Iterator
from datetime import UTC, datetime

import pytest

from interlock.runtime.cli.output import relative, timestamp, when

NOW = datetime(2026, 11, 25, 15, 0, 0, tzinfo=UTC).timestamp()


@pytest.fixture
def berlin(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """The process's local zone is Europe/Berlin (UTC+1 in November)."""
    monkeypatch.setenv("TZ", "Europe/Berlin")
    time.tzset()
    yield
    monkeypatch.undo()
    time.tzset()


@pytest.mark.parametrize(("offset", "expected"), [
    (178, "in 2m58s"), (178.6, "in 2m59s"), (-3, "3s ago"), (0, "now"), (0.25, "in 250ms"),
    (-3600 * 26, "1d2h ago"), (59.9, "in 1m"),
])
def test_relative(offset: float, expected: str) -> None:
    assert relative(offset) == expected


def test_when_is_local_iso_8601_with_a_relative_part(berlin: None) -> None:
    assert when(NOW + 178, NOW) == "2026-11-25T16:02:58+01:00 (in 2m58s)"
    assert when(NOW - 3, NOW) == "2026-11-25T15:59:57+01:00 (3s ago)"
    assert timestamp(NOW) == "2026-11-25T16:00:00+01:00"


def test_an_explicit_zone_wins(berlin: None) -> None:
    assert when(NOW, NOW, UTC) == "2026-11-25T15:00:00+00:00 (now)"
