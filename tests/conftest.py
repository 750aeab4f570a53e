"""Shared fixtures: run the real CLI in a subprocess. Helpers live in tests/support/."""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

import pytest

from support.cli import Cli

# The store fixtures (store, target, pg_url) for tests/runtime/store and inbox, registered
# here: pytest takes plugins from the root conftest only, before any test module imports
# them (so that their asserts are rewritten).
pytest_plugins = ["support.store_fixtures"]


def pytest_configure(config: pytest.Config) -> None:
    """Ctrl-C tests send SIGINT to the processes they start: a run started in the
    background (`make test &`, a CI job without a terminal) inherits SIGINT *ignored*, and
    so would every process it starts. A handler here is reset to the default in each child
    at exec, so they take SIGINT as a user's terminal would deliver it."""
    signal.signal(signal.SIGINT, signal.default_int_handler)


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
