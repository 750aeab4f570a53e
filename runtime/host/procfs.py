"""What Linux's /proc says about a process: its stat fields, and when it started."""

from __future__ import annotations

from pathlib import Path


def stat_fields(pid: int) -> list[str] | None:
    """The fields of ``/proc/PID/stat`` after the command name (state, ppid, pgrp, ...),
    or None when the process is gone. The name may hold spaces and parentheses, so the
    fields start after its last ``)``."""
    try:
        raw = Path(f"/proc/{pid}/stat").read_bytes()
    except OSError:
        return None
    return raw[raw.rfind(b")") + 2:].decode("ascii", "replace").split()


def start_ticks(pid: int) -> str | None:
    """When process ``pid`` started (clock ticks since boot), or None when it is gone or a
    zombie. With the pid it names one process for good: pids are reused, this pair is not."""
    fields = stat_fields(pid)
    if fields is None or len(fields) < 20 or fields[0] in ("Z", "X"):
        return None
    return fields[19]
