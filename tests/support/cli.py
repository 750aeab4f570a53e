"""Driving the installed CLI from tests."""

from __future__ import annotations

import json
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from interlock.runtime import InterlockError
from interlock.runtime import sync as runtime

Cli = Callable[..., subprocess.CompletedProcess[str]]


def wait_for_status(cwd: Path, predicate: Callable[[dict[str, Any]], bool],
                    runner: subprocess.Popen[str] | None = None, session: str = "s1",
                    timeout: float = 120.0) -> dict[str, Any]:
    """Poll the status of SESSION in the store under ``cwd`` (what `interlock status
    SESSION --json` prints there, read in this process) until ``predicate(view)`` holds.
    When ``runner`` is given and exits first, or ``timeout`` passes, fail with what the
    runner printed. The timeout is a safety net, never a pace."""
    view: dict[str, Any] = {}
    last = ""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if runner is not None and runner.poll() is not None:
            out, err = runner.communicate()
            raise AssertionError(f"the runner exited {runner.returncode}:\n{out}\n{err}")
        try:
            info = runtime.status(session, root=cwd)
        except InterlockError as exc:  # not created yet, or the store is being made
            last = str(exc)
        else:
            view = json.loads(json.dumps(info.to_json()))
            if predicate(view):
                return view
        time.sleep(0.02)
    detail = ""
    if runner is not None:
        runner.kill()
        out, err = runner.communicate()
        detail = f"\nrunner stdout:\n{out}\nrunner stderr:\n{err}"
    raise AssertionError(f"status never matched; last: {view} {last}{detail}")
