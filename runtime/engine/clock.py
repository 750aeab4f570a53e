"""Clocks: the one place the runtime reads the time.

Timers hold absolute deadlines in wall-clock seconds (``time.time()``), so that a
deadline written into a snapshot means the same thing after a restart. ``SystemClock``
reads ``time.time()`` at call time, which is what freezegun patches; ``ManualClock`` is
moved by hand. Neither sleeps: the runner waits on its own loop, and tests move time.
"""

from __future__ import annotations

import time
from typing import Protocol


class Clock(Protocol):
    def now(self) -> float:
        """Seconds since the epoch."""


class SystemClock:
    """The real time (patched by freezegun in tests)."""

    def now(self) -> float:
        return time.time()


class ManualClock:
    """A clock that only moves when told to."""

    def __init__(self, start: float = 1_700_000_000.0) -> None:
        self._now = start

    def now(self) -> float:
        return self._now

    def advance(self, seconds: float) -> float:
        if seconds < 0:
            raise ValueError("a clock does not go back")
        self._now += seconds
        return self._now
