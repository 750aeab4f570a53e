"""Where the repository's folders are, and skips for missing system tools."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SPECS = ROOT / "specs"
DIAGRAMS = ROOT / "diagrams"
TESTS = ROOT / "tests"
IN_CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")


def builtin_spec_paths() -> list[Path]:
    return sorted(SPECS.glob("*.yaml"))


def require_dot() -> None:
    """Skip without Graphviz locally; in CI its absence is a failure, not a skip."""
    if shutil.which("dot") is None:
        if IN_CI:
            pytest.fail("Graphviz `dot` is required in CI (scripts/bootstrap.sh installs it)")
        pytest.skip("Graphviz `dot` is not installed")
