"""Stress sizes: a reduced size by default, and the full size under INTERLOCK_STRESS=full.

A test marked ``stress`` repeats checks other tests make, at a size that takes minutes:
``make test`` leaves it out; ``make stress`` (and .ci/run, after ``make test``) runs it at
full size. ``pytest -m stress`` alone runs the reduced size, for a quick try.
"""

from __future__ import annotations

import os

FULL = os.environ.get("INTERLOCK_STRESS", "").lower() == "full"


def scaled(default: int, full: int) -> int:
    """``full`` under INTERLOCK_STRESS=full, else ``default``."""
    return full if FULL else default
