"""Stopping the agent process groups a dead dispatcher or runner left (the registry that
records them is :mod:`interlock.runtime.dispatch.registry`).

A dispatcher records each agent's process group before reading a byte from it and forgets
it once the group is gone. If the dispatcher is SIGKILLed in between, the record stays;
the next dispatcher or runner on this host finds it, sees that its owner is dead, and
stops the group: SIGTERM, SIGKILL after the grace. A group is signalled only when one of
its live members carries the record's ``INTERLOCK_DISPATCH_ID``, so a process-group id
the system has since given to someone else is never hit.
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
from collections.abc import Callable
from dataclasses import dataclass

from interlock.runtime.host.owners import owner_is_dead
from interlock.runtime.host.procfs import carries_dispatch_id, group_members
from interlock.runtime.store.base import AgentProcessStore, AgentRecord


@dataclass(frozen=True, slots=True)
class Reaped:
    """What was done about one orphaned record: ``stopped`` (signalled, now gone),
    ``survived`` (still alive after SIGKILL: not ours to touch further), or ``gone``
    (nothing of it was left)."""

    record: AgentRecord
    outcome: str

    def describe(self) -> str:
        argv = " ".join(self.record.argv)
        return (f"agent group {self.record.pgid} ({argv}) left by a dead dispatcher: "
                f"{self.outcome}")


def _marked_members(record: AgentRecord) -> list[int]:
    return [pid for pid in group_members(record.pgid) if carries_dispatch_id(pid, record.id)]


def _wait_gone(record: AgentRecord, seconds: float, sleep: Callable[[float], None]) -> bool:
    deadline = time.monotonic() + seconds
    while _marked_members(record):
        if time.monotonic() >= deadline:
            return False
        sleep(0.01)
    return True


def _signal(pgid: int, signum: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signum)


def reap_orphans(store: AgentProcessStore, *, grace: float = 5.0,
                 sleep: Callable[[float], None] = time.sleep) -> list[Reaped]:
    """Stop the agent groups of dead dispatchers on this host and forget their records.

    Records of live dispatchers, and of other hosts, are left alone.
    """
    reaped: list[Reaped] = []
    for record in store.agents():
        if not owner_is_dead(record.owner):  # live, or of another host
            continue
        if not _marked_members(record):
            outcome = "gone"
        else:
            _signal(record.pgid, signal.SIGTERM)
            if _wait_gone(record, grace, sleep):
                outcome = "stopped"
            else:
                _signal(record.pgid, signal.SIGKILL)
                outcome = "stopped" if _wait_gone(record, 5.0, sleep) else "survived"
        store.forget_agent(record.id)
        reaped.append(Reaped(record, outcome))
    return reaped
