"""Shared fixtures: run the real CLI in a subprocess. Helpers live in tests/support/."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from support.cli import Cli


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
