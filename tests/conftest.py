"""Shared fixtures: run the real CLI in a subprocess, find the repo's folders."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SPECS = ROOT / "specs"
DIAGRAMS = ROOT / "diagrams"
IN_CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")

Cli = Callable[..., subprocess.CompletedProcess[str]]


def builtin_spec_paths() -> list[Path]:
    return sorted(SPECS.glob("*.yaml"))


@pytest.fixture
def cli() -> Cli:
    """Run `interlock ARGS...` as a real process; returns the completed process."""

    def run(
        *args: str, cwd: Path | None = None, timeout: float = 60
    ) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "interlock.runtime.cli", *args],
            capture_output=True, text=True, cwd=cwd, timeout=timeout,
        )

    return run


def require_dot() -> None:
    """Skip without Graphviz locally; in CI its absence is a failure, not a skip."""
    if shutil.which("dot") is None:
        if IN_CI:
            pytest.fail("Graphviz `dot` is required in CI (scripts/bootstrap.sh installs it)")
        pytest.skip("Graphviz `dot` is not installed")
