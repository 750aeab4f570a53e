"""Shared fixtures: run the real CLI in a subprocess, find the repo's folders."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parent.parent
SPECS = ROOT / "specs"
DIAGRAMS = ROOT / "diagrams"
IN_CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")

Cli = Callable[..., subprocess.CompletedProcess[str]]


def wait_for_status(cli: Cli, cwd: Path, predicate: Callable[[dict[str, Any]], bool],
                    runner: subprocess.Popen[str] | None = None, session: str = "s1",
                    tries: int = 300) -> dict[str, Any]:
    """Poll `interlock status SESSION --json` until ``predicate(view)`` holds (waiting on a
    process, not on time). When ``runner`` is given and exits first, or the tries run out,
    fail with what the runner printed."""
    view: dict[str, Any] = {}
    last = ""
    for _ in range(tries):
        if runner is not None and runner.poll() is not None:
            out, err = runner.communicate()
            raise AssertionError(f"the runner exited {runner.returncode}:\n{out}\n{err}")
        result = cli("status", session, "--json", cwd=cwd)
        last = result.stderr
        if result.returncode == 0:
            view = json.loads(result.stdout)
            if predicate(view):
                return view
    detail = ""
    if runner is not None:
        runner.kill()
        out, err = runner.communicate()
        detail = f"\nrunner stdout:\n{out}\nrunner stderr:\n{err}"
    raise AssertionError(f"status never matched; last: {view} {last}{detail}")


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
