"""Who owns a lease, an agent record or a signal claim, and whether that owner is dead.

One id for every owner on a host: ``HOST:PID-START:TAG``. ``START`` is when the process
started (clock ticks since boot, from ``/proc``), so a pid the system has since given to
another process is not taken for the owner; ``HOST:PID:TAG`` (no start time) is written
where ``/proc`` is missing and read as "whatever process has that pid". ``TAG`` tells
owners of one process apart (``dispatch``, a random hex word). The id is also a safe file
name (signal consumers name their claims folders with it).

Only an owner on this host can be known dead (its process is gone, a zombie, or another
process under the same pid); one elsewhere, or an id that does not parse, is always
presumed alive, so its lease runs out by time instead.

Older ids are still read: signal consumers used to name their claims folders
``PID[-START].TAG.HOST`` (see :func:`parse_owner`), so claims they left behind are adopted
like any other dead owner's. Nothing rewrites them; new claims use the one format.

>>> parse_owner("box:4242-8812:dispatch")
Owner(host='box', pid=4242, start='8812', tag='dispatch')
>>> str(parse_owner("4242.a1b2c3.box"))  # a consumer's claims folder, older format
'box:4242:a1b2c3'
>>> parse_owner("not an owner") is None
True
"""

from __future__ import annotations

import os
import re
import socket
import uuid
from dataclasses import dataclass
from pathlib import Path

from interlock.runtime.host.procfs import start_ticks

__all__ = ["Owner", "default_owner", "is_owner_name", "owner_is_dead", "parse_owner"]

_PART = r"[A-Za-z0-9][A-Za-z0-9_.\-]*"
_OWNER = re.compile(rf"(?P<host>{_PART}):(?P<pid>\d+)(?:-(?P<start>\d+))?:(?P<tag>[^:/\0]+)")
_LEGACY = re.compile(
    rf"(?P<pid>\d+)(?:-(?P<start>\d+))?\.(?P<tag>[A-Za-z0-9_\-]+)\.(?P<host>{_PART})")
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.:\-]{0,199}")


@dataclass(frozen=True, slots=True)
class Owner:
    """A parsed owner id; ``start`` is None when the id does not carry it."""

    host: str
    pid: int
    start: str | None
    tag: str

    def __str__(self) -> str:
        pid = self.pid if self.start is None else f"{self.pid}-{self.start}"
        return f"{self.host}:{pid}:{self.tag}"


def default_owner(tag: str | None = None) -> str:
    """This process as an owner: ``host:pid-start:tag`` (a random tag when none is given)."""
    pid = os.getpid()
    return str(Owner(socket.gethostname(), pid, start_ticks(pid), tag or uuid.uuid4().hex[:6]))


def parse_owner(owner: str) -> Owner | None:
    """The parts of an owner id (the one format, or a consumer's older claims-folder
    name ``PID[-START].TAG.HOST``); None when it is neither."""
    m = _OWNER.fullmatch(owner) or _LEGACY.fullmatch(owner)
    if m is None:
        return None
    return Owner(m["host"], int(m["pid"]), m["start"], m["tag"])


def is_owner_name(owner: str) -> bool:
    """Whether ``owner`` is safe as a folder name: letters, digits, ``_ . : -``, starting
    with a letter or digit, no ``..``, at most 200 characters."""
    return _NAME.fullmatch(owner) is not None and ".." not in owner


def _procfs() -> bool:
    return Path("/proc/self/stat").exists()


def _pid_exists(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def owner_is_dead(owner: str) -> bool:
    """Whether ``owner`` is a process of this host that is gone: no such pid, a zombie, or
    (when the id has a start time) another process that got the same pid since."""
    parsed = parse_owner(owner)
    if parsed is None or parsed.host != socket.gethostname():
        return False
    if not _procfs():
        return not _pid_exists(parsed.pid)
    started = start_ticks(parsed.pid)  # None: gone, or a zombie
    return started is None or (parsed.start is not None and started != parsed.start)
