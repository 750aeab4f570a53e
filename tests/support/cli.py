"""Driving the installed CLI from tests."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

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
