"""Stress sizes: what the default run can afford, and the full size under INTERLOCK_STRESS=full.

A test marked ``stress`` runs at its default size in ``make test`` and again at full size
in .ci/run, after ``make test`` (``INTERLOCK_STRESS=full pytest -m stress``): the same
checks, more examples, kill points or bytes.
"""

from __future__ import annotations

import os

FULL = os.environ.get("INTERLOCK_STRESS", "").lower() == "full"


def scaled(default: int, full: int) -> int:
    """``full`` under INTERLOCK_STRESS=full, else ``default``."""
    return full if FULL else default
