"""Stopping every process a runner started: its descendants, by process group.

A cancelled (or removed) session's runner leaves no process behind: each descendant's
process group gets SIGTERM (a descendant in the runner's own group gets it alone, so the
runner never signals itself), then SIGKILL after ``grace``; it returns once all are gone
(direct children reaped) or after a bounded wait.
"""

from __future__ import annotations

import contextlib
import os
import signal

import psutil


def _descendants(root: psutil.Process) -> list[psutil.Process]:
    with contextlib.suppress(psutil.Error):
        return list(root.children(recursive=True))
    return []


def _signal(procs: list[psutil.Process], signum: int, own_group: int) -> None:
    groups: set[int] = set()
    for proc in procs:
        try:
            pgid = os.getpgid(proc.pid)
        except ProcessLookupError:
            continue
        if pgid == own_group:
            with contextlib.suppress(psutil.Error):
                proc.send_signal(signum)
        else:
            groups.add(pgid)
    for pgid in groups:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pgid, signum)


def stop_descendants(grace: float = 2.0, pid: int | None = None) -> list[int]:
    """TERM then KILL every descendant of ``pid`` (default: this process) and their
    process groups; the pids found. Waits at most ``grace`` after each signal."""
    root = psutil.Process(pid or os.getpid())
    own_group = os.getpgid(root.pid)
    procs = _descendants(root)
    if not procs:
        return []
    _signal(procs, signal.SIGTERM, own_group)
    # Children may have started children meanwhile: they go too.
    procs = list({p.pid: p for p in (*procs, *_descendants(root))}.values())
    _, alive = psutil.wait_procs(procs, timeout=grace)
    if alive:
        _signal(alive, signal.SIGKILL, own_group)
        psutil.wait_procs(alive, timeout=grace)
    return [p.pid for p in procs]
