"""A session's lifecycle: its status, cancelling it, removing it, listing them.

The store keeps ``active | failed | finished | cancelled``; whether an active session is
``running`` or ``stopped`` depends on its lease. It is ``running`` only while a lease is
held, unexpired, by an owner not known to be dead. A runner on this host that was killed
(even by SIGKILL) is known dead at once (its pid is gone), so its session reads
``stopped`` immediately; a runner on another host cannot be checked and is presumed
alive until its lease lapses: at most ``LEASE_TTL`` (30 s) after its last renewal.

Functions here take the store and the time (``now``) and are what the façade
(``interlock.runtime``) re-exports for ``interlock status | cancel | rm | sessions``.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Literal

from interlock.runtime.engine.errors import SessionError
from interlock.runtime.engine.invoke_offline import (
    cancel_offline,
    child_sessions,
    stop_invocations,
)
from interlock.runtime.engine.snapshot import Snapshot, SnapshotError
from interlock.runtime.host.owners import owner_is_dead, parse_owner
from interlock.runtime.store.base import (
    JournalEntry,
    LeaseStore,
    SessionNotFound,
    SessionRow,
    StaleSession,
    Store,
)
from interlock.runtime.store.wakeup import StoreChanges

SessionStatus = Literal["running", "stopped", "failed", "finished", "cancelled"]
STATUSES: tuple[SessionStatus, ...] = ("running", "stopped", "failed", "finished", "cancelled")
LEASE_TTL = 30.0  # how long a runner's lease lasts between its renewals
LEASE_LAPSE = LEASE_TTL  # how long another host's killed runner still reads "running"


class SessionRunning(SessionError):
    """The session has a live runner (remove it with force, or cancel it first)."""


class SessionOver(SessionError):
    """The session has finished or was cancelled: there is nothing left to cancel."""


@dataclass(frozen=True, slots=True)
class StatusInfo:
    """A session's status; for ``running``, who runs it: ``pid`` and ``host`` of its
    runner (from the lease owner ``host:pid:tag``) and ``since`` (lease taken, seconds
    since the epoch)."""

    status: SessionStatus
    owner: str | None = None
    pid: int | None = None
    host: str | None = None
    since: float | None = None


@dataclass(frozen=True, slots=True)
class SessionListing:
    """One line of ``interlock sessions``."""

    row: SessionRow
    info: StatusInfo
    active: tuple[str, ...]  # active states, as of the last committed step


@dataclass(frozen=True, slots=True)
class CancelOutcome:
    """What :func:`cancel` did: ``requested`` (a live runner was asked; it stops within
    a second: :func:`wait_until_not_running`) or ``cancelled`` (a stopped or failed
    session was marked cancelled here)."""

    session_id: str
    action: Literal["requested", "cancelled"]
    was: SessionStatus
    runner: StatusInfo | None = None  # the live runner asked, for ``requested``


def status_of(store: LeaseStore, row: SessionRow, now: float) -> StatusInfo:
    """The status of ``row``'s session at ``now``."""
    if row.status in ("failed", "finished", "cancelled"):
        return StatusInfo(row.status)  # type: ignore[arg-type]
    lease = store.holder(row.id)
    if lease is None or lease.expires_at <= now or owner_is_dead(lease.owner):
        return StatusInfo("stopped")
    parsed = parse_owner(lease.owner)
    return StatusInfo("running", owner=lease.owner,
                      host=parsed.host if parsed else lease.owner.partition(":")[0],
                      pid=parsed.pid if parsed else None, since=lease.acquired_at)


def active_states(row: SessionRow) -> tuple[str, ...]:
    """The active states a row's snapshot records (empty if it cannot be read)."""
    try:
        return Snapshot.from_json(row.snapshot).configuration
    except SnapshotError:
        return ()


def list_sessions(store: Store, now: float) -> list[SessionListing]:
    """Every session, oldest first, with its status and active states."""
    return [SessionListing(row, status_of(store, row, now), active_states(row))
            for row in store.list()]


def cancel(store: Store, session_id: str, reason: str | None, now: float) -> CancelOutcome:
    """Cancel a session. A running one is asked to (its runner stops its timers and child
    processes, journals ``cancelled`` and exits within a second); a stopped or failed one
    is marked cancelled here, with a journal entry, and the invoked agents its dead runner
    left are stopped (their invocations end ``cancelled``). SessionOver for a finished or
    cancelled one; SessionNotFound for none."""
    row = store.get(session_id)
    info = status_of(store, row, now)
    if info.status in ("finished", "cancelled"):
        raise SessionOver(f"session {session_id!r} is {info.status}; there is nothing to "
                          "cancel")
    if info.status == "running":
        store.request_cancel(session_id, reason, now)
        return CancelOutcome(session_id, "requested", "running", info)
    try:
        cancelled = cancel_offline(store, session_id, reason, now, ttl=LEASE_TTL,
                                   was=info.status)
    except StaleSession as exc:
        raise SessionError(f"session {session_id!r} changed while being cancelled ({exc}); "
                           "try again") from None
    if not cancelled:  # a runner took it meanwhile: ask it
        store.request_cancel(session_id, reason, now)
        return CancelOutcome(session_id, "requested", info.status,
                             status_of(store, store.get(session_id), now))
    return CancelOutcome(session_id, "cancelled", info.status)


def wait_until_not_running(store: Store, session_id: str, timeout: float = 3.0, *,
                           now: Callable[[], float] = time.time,
                           poll: float = 0.05) -> StatusInfo:
    """Wait (at most ``timeout`` seconds, real time) until the session is not running;
    its status then (still ``running`` if the wait ran out). A removed session reads
    as SessionNotFound. The store's wake-ups end each wait (``poll``: without them)."""
    deadline = time.monotonic() + timeout
    with StoreChanges(store, poll=poll) as changes:
        while True:
            changes.clear()
            info = status_of(store, store.get(session_id), now())
            left = deadline - time.monotonic()
            if info.status != "running" or left <= 0:
                return info
            changes.wait(left)


def wait_taken(store: Store, session_id: str, item: int, timeout: float) -> bool:
    """Wait (at most ``timeout`` seconds) until the session's runner has taken the queued
    event ``item``; whether it did."""
    deadline = time.monotonic() + timeout
    with StoreChanges(store, poll=0.01) as changes:
        while True:
            changes.clear()
            if all(queued.id != item for queued in store.queued_events(session_id)):
                return True
            left = deadline - time.monotonic()
            if left <= 0:
                return False
            changes.wait(left)


async def follow_journal(store: Store, session_id: str, *, poll: float = 0.2,
                         backstop: float = 1.0) -> AsyncIterator[JournalEntry]:
    """The session's journal, then each new entry as it is committed, until the session
    ends (finished, failed or cancelled). Woken by the store's changes (``poll``: the
    interval without them; ``backstop``: the longest wait for one)."""
    seen = -1
    with StoreChanges(store, poll=poll, backstop=backstop) as changes:
        while True:
            changes.clear()
            row = await asyncio.to_thread(store.get, session_id)  # before the journal:
            for entry in await asyncio.to_thread(store.journal, session_id, seen):
                seen = max(seen, entry.seq)  # an end read here has its last steps read next
                yield entry
            if row.status in ("finished", "failed", "cancelled"):
                return
            await asyncio.to_thread(changes.wait, backstop)


def remove(store: Store, session_id: str, now: float, *, force: bool = False) -> StatusInfo:
    """Delete the session with its journal, inbox, dead letters, delivery keys and lease;
    the status it had. A running one is refused (SessionRunning) unless ``force``: its
    runner then finds the session gone, stops its child processes and ends with a
    ``removed`` outcome. A session no runner holds has the invoked agents its dead runner
    left stopped first. The child machine sessions it invoked are removed with it."""
    info = status_of(store, store.get(session_id), now)
    if info.status == "running" and not force:
        where = f"pid {info.pid} on {info.host}" if info.host != socket.gethostname() \
            else f"pid {info.pid}"
        raise SessionRunning(f"session {session_id!r} is running ({where}); cancel it "
                             "first, or remove it with --force (force=True from Python)")
    if info.status != "running":
        stop_invocations(store, session_id, at=now)
    for child in child_sessions(store, session_id):
        with contextlib.suppress(SessionNotFound):
            remove(store, child, now, force=True)  # its runner, if any, is its parent's
    store.delete(session_id)
    return info
