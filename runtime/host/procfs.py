"""What Linux's /proc says about a process (its stat fields, when it started), and the
process groups of agents: which of their members carry our ``INTERLOCK_DISPATCH_ID``,
and stopping what a dead runner left of one."""

from __future__ import annotations

import contextlib
import os
import signal
import time
from collections.abc import Callable, Iterator
from pathlib import Path

DISPATCH_ID_VAR = "INTERLOCK_DISPATCH_ID"


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


def group_members(pgid: int) -> Iterator[int]:
    """Live (non-zombie) processes whose process group is ``pgid``."""
    try:
        entries = [entry.name for entry in Path("/proc").iterdir()]
    except OSError:
        return
    for name in entries:
        if not name.isdigit():
            continue
        fields = stat_fields(int(name))
        if fields is None or len(fields) < 3:
            continue
        if fields[0] not in ("Z", "X") and fields[2] == str(pgid):
            yield int(name)


def is_exiting(pid: int) -> bool:
    """Whether ``pid`` is a live (not yet zombie) process whose memory is already gone: it
    is exiting, and its environment reads empty. Such a member of an agent's group cannot
    be told ours by its environment, yet it is not gone."""
    try:
        return Path(f"/proc/{pid}/environ").read_bytes() == b""
    except OSError:
        return False


def carries_dispatch_id(pid: int, dispatch_id: str) -> bool:
    """Whether process ``pid`` has ``INTERLOCK_DISPATCH_ID=dispatch_id`` in its environment."""
    try:
        environ = Path(f"/proc/{pid}/environ").read_bytes()
    except OSError:
        return False
    return f"{DISPATCH_ID_VAR}={dispatch_id}".encode() in environ.split(b"\0")


def stop_group(pid: int | None, ticks: str | None, dispatch_id: str, grace: float,
               sleep: Callable[[float], None]) -> bool:
    """Stop what is left of an agent a dead runner started (TERM, KILL after ``grace``),
    if it is still ours; True when something was signalled."""

    def ours() -> list[int]:
        if pid is None:  # never noted: find it by its dispatch id
            return [p for p in _all_pids() if carries_dispatch_id(p, dispatch_id)]
        return [p for p in group_members(pid) if carries_dispatch_id(p, dispatch_id)]

    members = ours()
    if not members:
        return False
    groups = {pid} if pid is not None else {os.getpgid(p) for p in members if _exists(p)}
    for signum, wait in ((signal.SIGTERM, grace), (signal.SIGKILL, 5.0)):
        for group in groups:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(group, signum)
        deadline = time.monotonic() + wait
        while ours() and time.monotonic() < deadline:
            sleep(0.005)
        if not ours():
            break
    return True


def find_unnoted(dispatch_id: str) -> tuple[int, str] | None:
    """The (pid, start ticks) of the live shim a runner started for ``dispatch_id`` but
    died before noting (its row has no pid): the process that leads its own group and
    carries the id. None when no such process runs."""
    for pid in _all_pids():
        with contextlib.suppress(OSError):
            if os.getpgid(pid) == pid and carries_dispatch_id(pid, dispatch_id):
                ticks = start_ticks(pid)
                if ticks is not None:
                    return pid, ticks
    return None


def _exists(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except OSError:
        return False
    return True


def _all_pids() -> list[int]:
    return [int(entry.name) for entry in Path("/proc").iterdir() if entry.name.isdigit()]
