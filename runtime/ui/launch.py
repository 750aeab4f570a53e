"""Resuming a session that no runner holds, from a page: the server starts the runner
the command line would (``interlock resume ID``, ``interlock ralph run ID``) as a process
of its own, in a session of its own, so it outlives the page and the server, and says
whether it took the session."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import tempfile
import threading
import time
from typing import TYPE_CHECKING, Any, Literal

from interlock import runtime

if TYPE_CHECKING:
    from interlock.runtime.ui.server import UiConfig

__all__ = ["START_WAIT", "Outcome", "Said", "start_runner"]

START_WAIT = 5.0  # seconds a new runner has to take the session (or to fail)
Outcome = Literal["taken", "queued", "rejected"]
Said = tuple[Outcome, str, dict[str, Any]]  # what an action did, why, and more to say


def _last_line(log: Any) -> str:
    log.seek(0)
    lines = [ln for ln in log.read().decode("utf-8", "replace").splitlines() if ln.strip()]
    return lines[-1].strip() if lines else "(it said nothing)"


async def start_runner(config: UiConfig, session_id: str, args: list[str]) -> Said:
    """Start ``interlock ARGS`` in the project; ``taken`` once the session reads running
    (or the run ended well), ``rejected`` with its last line if it failed, ``queued``
    when it is still starting after :data:`START_WAIT` seconds."""
    argv = [sys.executable, "-m", "interlock.runtime.cli", *args,
            *(["--store", config.store] if config.store else [])]
    with tempfile.TemporaryFile() as log:
        proc = subprocess.Popen(argv, cwd=config.root, stdin=subprocess.DEVNULL, stdout=log,
                                stderr=log, start_new_session=True)
        threading.Thread(target=proc.wait, daemon=True, name=f"reap {proc.pid}").start()
        command = "interlock " + " ".join(args)
        deadline = time.monotonic() + START_WAIT
        while time.monotonic() < deadline:
            code = proc.poll()
            if code is not None:
                if code == 0:
                    return "taken", f"`{command}` ran the session to its end", {}
                return "rejected", f"`{command}` exited {code}: {_last_line(log)}", {}
            info = await runtime.status(session_id, store=config.store, root=config.root)
            if info.status == "running":
                return "taken", f"`{command}` runs it (pid {proc.pid})", {"pid": proc.pid}
            await asyncio.sleep(0.1)
        return "queued", f"`{command}` is starting (pid {proc.pid})", {"pid": proc.pid}
