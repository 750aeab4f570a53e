"""Sessions through the façade: status, list, log, follow, send, cancel, remove. Starting
and resuming them (the session host and its plugins) is :mod:`.running`: reading and
steering a session loads none of that.

Every function is a coroutine; blocking store and process work runs in worker threads so
the caller's event loop stays free. ``store`` is a store URL (default: SQLite in
``ROOT/.interlock/state.db``) and ``root`` the folder sessions keep their files under
(default: the working directory).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Collection, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Literal

from interlock.machines import ir_of
from interlock.machines.events import reserved_reason
from interlock.machines.ir import MachineIR, TransitionKind
from interlock.runtime.api.common import opened_store, root_of, translated
from interlock.runtime.api.errors import Conflict, NotFound, UsageError
from interlock.runtime.engine import lifecycle
from interlock.runtime.engine.lifecycle import StatusInfo, list_sessions, status_of
from interlock.runtime.engine.machine_ids import parent_id
from interlock.runtime.engine.snapshot import Snapshot
from interlock.runtime.inbox.deliveries import InboxCount, inbox_count
from interlock.runtime.signals.model import SignalError, check_identifier
from interlock.runtime.store import JournalEntry as JournalEntry
from interlock.runtime.store import SessionRow, Store

SessionStatus = Literal["running", "stopped", "failed", "finished", "cancelled"]


@dataclass(frozen=True, slots=True)
class TimerInfo:
    event: str
    state: str
    deadline: float  # wall-clock seconds


@dataclass(frozen=True, slots=True)
class RunnerInfo:
    """The live runner holding a session: its process, and since when (lease taken)."""

    owner: str
    host: str | None
    pid: int | None
    since: float | None


@dataclass(frozen=True, slots=True)
class SessionInfo:
    """A session as it stands: ``status`` is one of running, stopped, failed, finished,
    cancelled; ``running`` only while a live runner holds the session's lease."""

    id: str
    machine: str
    spec_path: str
    status: SessionStatus
    active: tuple[str, ...]
    seq: int
    created_at: float
    updated_at: float
    timers: tuple[TimerInfo, ...]
    queued: int
    context: Mapping[str, Any]
    runner: RunnerInfo | None = None
    inbox: InboxCount | None = None  # inbox messages delivered to it (None: never any)
    parent: str | None = None  # the session that invoked this one (a child machine's)
    children: int = 0  # child machine sessions it invoked (in a listing)
    failure: str | None = None  # its last invocation's failure, in the agent's own words

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.id, "machine": self.machine, "spec": self.spec_path,
            "parent": self.parent, "children": self.children, "failure": self.failure,
            "status": self.status, "active": list(self.active), "seq": self.seq,
            "created_at": self.created_at, "updated_at": self.updated_at,
            "timers": [{"event": t.event, "state": t.state, "deadline": t.deadline}
                       for t in self.timers],
            "queued": self.queued, "context": dict(self.context),
            "runner": None if self.runner is None else {
                "owner": self.runner.owner, "host": self.runner.host, "pid": self.runner.pid,
                "since": self.runner.since},
            "inbox": None if self.inbox is None else self.inbox.to_json(),
        }


@dataclass(frozen=True, slots=True)
class SendReceipt:
    """What became of a sent event: ``taken`` by the live runner (``active`` is the
    configuration after it), ``queued`` for the next run, or ``rejected`` by the live
    runner (``accepts`` lists the events the configuration takes)."""

    session_id: str
    event: str
    outcome: Literal["taken", "queued", "rejected"]
    active: tuple[str, ...]
    accepts: tuple[str, ...] = field(default=())
    note: str | None = None


# -- errors -----------------------------------------------------------------------------


def check_session_id(session_id: str) -> str:
    """Session ids name folders (the session's mailbox): no '/', no '..'."""
    try:
        return check_identifier(session_id, "session id")
    except SignalError as exc:
        raise UsageError(str(exc)) from None


# -- views ------------------------------------------------------------------------------


def _info(store: Store, row: SessionRow, now: float, state: StatusInfo | None = None
          ) -> SessionInfo:
    snapshot = Snapshot.from_json(row.snapshot)
    state = state or status_of(store, row, now)
    runner = (RunnerInfo(state.owner, state.host, state.pid, state.since)
              if state.status == "running" and state.owner is not None else None)
    queued = store.queued_events(row.id)
    return SessionInfo(
        id=row.id, machine=row.spec_name, spec_path=row.spec_path,
        status=state.status, active=tuple(snapshot.configuration), seq=row.seq,
        created_at=row.created_at, updated_at=row.updated_at,
        timers=tuple(TimerInfo(t.event, t.state, t.deadline) for t in snapshot.timers),
        queued=len(queued), context=dict(snapshot.context), runner=runner,
        inbox=inbox_count(store, row.id, queued, row.spec_text),
    )


def accepted_events(ir: MachineIR, configuration: tuple[str, ...]) -> tuple[str, ...]:
    """The event descriptors the active states listen for (timers excluded), sorted."""
    return tuple(sorted({t.event for sid in configuration if sid in ir.states
                         for t in ir.states[sid].transitions
                         if t.kind is TransitionKind.EVENT and t.event is not None}))


# -- events -----------------------------------------------------------------------------


def _send(store: Store, session_id: str, event: str, data: dict[str, Any],
          wait: float) -> SendReceipt:
    row = store.get(session_id)
    info = _info(store, row, time.time())
    if info.status in ("finished", "cancelled"):
        raise Conflict(f"session {session_id} is {info.status}; it takes no events")
    if info.status != "running":
        _check_event_of(row, event)
    item = store.enqueue(session_id, event, data, time.time())
    if info.status != "running":
        return SendReceipt(session_id, event, "queued", info.active,
                           note=f"session {session_id} is {info.status}; it takes the event "
                           "when it is resumed")
    if not lifecycle.wait_taken(store, session_id, item, wait):
        return SendReceipt(session_id, event, "queued", info.active,
                           note=f"the live runner has not taken it within {wait:g}s")
    for entry in store.journal(session_id, after_seq=row.seq):
        if entry.event != event or entry.kind not in ("event", "rejected"):
            continue
        if entry.kind == "rejected":
            ir = ir_of(row.spec_text, row.spec_path)
            return SendReceipt(session_id, event, "rejected", entry.before,
                               accepted_events(ir, entry.before), entry.note)
        return SendReceipt(session_id, event, "taken", entry.after)
    return SendReceipt(session_id, event, "taken", _info(store, store.get(session_id),
                                                         time.time()).active)


def _check_event_of(row: SessionRow, event: str) -> None:
    """Refuse an event no state of the session's machine ever takes (queued for a stopped
    session it would only be rejected later, far from the typo)."""
    from interlock.machines.diagnostics import did_you_mean
    from interlock.machines.events import descriptor_matches

    ir = ir_of(row.spec_text, row.spec_path)
    if any(descriptor_matches(d, event) for d in ir.events):
        return
    hint = did_you_mean(event, ir.events)
    raise Conflict(f"event {event!r} is not an event of machine {row.spec_name!r}"
                   + (f" ({hint})" if hint else "")
                   + f"; it takes: {', '.join(ir.events) or 'none'}")


async def send(session_id: str, event: str, data: Mapping[str, Any] | None = None, *,
               wait: float = 2.0, store: str | None = None,
               root: Path | str | None = None) -> SendReceipt:
    """Deliver ``event``: a live runner takes it within milliseconds (the receipt says
    whether it was taken or rejected, waiting up to ``wait`` seconds); a stopped session
    keeps it queued for its next run."""
    check_session_id(session_id)
    reason = reserved_reason(event)
    if reason is not None:
        raise UsageError(f"{event!r} is reserved for the engine: {reason}")
    with opened_store(store, root_of(root)) as opened, translated():
        return await asyncio.to_thread(_send, opened, session_id, event, dict(data or {}),
                                       wait)


# -- reading ----------------------------------------------------------------------------


async def status(session_id: str, *, store: str | None = None,
                 root: Path | str | None = None) -> SessionInfo:
    """One session as it stands."""
    check_session_id(session_id)
    with opened_store(store, root_of(root), create=False, session_id=session_id) as opened, \
            translated():
        row = await asyncio.to_thread(opened.get, session_id)
        info = await asyncio.to_thread(_info, opened, row, time.time())
        failure = await asyncio.to_thread(last_failure, opened, session_id)
        return replace(info, failure=failure)


def last_failure(store: Store, session_id: str) -> str | None:
    """``error.invoke.<id> (reason): message`` of the session's last invocation that
    failed, when its last invocation failed (the message is the CLI's own words where it
    said what went wrong); None otherwise."""
    for entry in reversed(store.journal(session_id)):
        event = entry.event or ""
        if event.startswith("done.invoke."):
            return None
        if event.startswith("error.invoke.") and isinstance(entry.data, Mapping):
            reason = entry.data.get("reason") or "failed"
            return f"{event} ({reason}): {entry.data.get('message') or reason}"
    return None


async def sessions(*, store: str | None = None, root: Path | str | None = None,
                   children: bool = False) -> list[SessionInfo]:
    """The sessions in the store, oldest first; the child machine sessions an invoke
    started (``parent`` set) only with ``children``, else counted in their parent's
    ``children``."""
    def listed(opened: Store) -> list[SessionInfo]:
        now = time.time()
        infos = [_info(opened, item.row, now, item.info)
                 for item in list_sessions(opened, now)]
        ids = {i.id for i in infos}
        infos = [replace(i, parent=parent_session(i.id, ids)) for i in infos]
        counts: dict[str, int] = {}
        for info in infos:
            top = info.parent
            while top is not None and (up := parent_session(top, ids)) is not None:
                top = up
            if top is not None:
                counts[top] = counts.get(top, 0) + 1
        return [replace(i, children=counts.get(i.id, 0)) for i in infos
                if children or i.parent is None]

    try:
        with opened_store(store, root_of(root), create=False) as opened, translated():
            return await asyncio.to_thread(listed, opened)
    except NotFound:  # no store here: nothing has run, so there are no sessions
        return []


def parent_session(session_id: str, known: Collection[str]) -> str | None:
    """The session that invoked ``session_id`` (a child machine's id is
    ``<parent>.<NNNN>-<invoke id>``), when it is among ``known``."""
    parent = parent_id(session_id)
    return parent if parent in known else None


async def log(session_id: str, *, after_seq: int = -1, store: str | None = None,
              root: Path | str | None = None) -> list[JournalEntry]:
    """The session's journal entries with seq > ``after_seq`` (all by default), in order."""
    check_session_id(session_id)
    with opened_store(store, root_of(root), create=False, session_id=session_id) as opened, \
            translated():
        await asyncio.to_thread(opened.get, session_id)
        return await asyncio.to_thread(opened.journal, session_id, after_seq)


async def follow(session_id: str, *, poll: float = 0.2, backstop: float = 1.0,
                 store: str | None = None, root: Path | str | None = None
                 ) -> AsyncIterator[JournalEntry]:
    """The journal, then each new entry as it is committed, until the session ends. It
    waits on the store's wake-ups; ``poll``: how often it looks where the store gives none
    (PostgreSQL), ``backstop``: where it does, the longest wait between looks."""
    check_session_id(session_id)
    with opened_store(store, root_of(root), create=False, session_id=session_id) as opened, \
            translated():
        await asyncio.to_thread(opened.get, session_id)
        async for entry in lifecycle.follow_journal(opened, session_id, poll=poll,
                                                    backstop=backstop):
            yield entry


# -- lifecycle --------------------------------------------------------------------------


async def cancel(session_id: str, *, reason: str | None = None, wait: float = 3.0,
                 store: str | None = None, root: Path | str | None = None) -> SessionInfo:
    """Cancel a session: a live runner stops within a second (its timers cancelled, its
    child processes stopped: TERM, then KILL), journals ``cancelled`` and exits; a stopped
    or failed session is marked cancelled. Waits up to ``wait`` seconds for the runner;
    returns the session as it then stands. Conflict for a finished or cancelled one."""
    check_session_id(session_id)

    def run(opened: Store) -> SessionInfo:
        done = lifecycle.cancel(opened, session_id, reason, time.time())
        if done.action == "requested":
            lifecycle.wait_until_not_running(opened, session_id, wait)
        return _info(opened, opened.get(session_id), time.time())

    with opened_store(store, root_of(root)) as opened, translated():
        return await asyncio.to_thread(run, opened)


async def remove(session_id: str, *, force: bool = False, store: str | None = None,
                 root: Path | str | None = None) -> None:
    """Delete a session with its journal, queue, dead letters and lease. A running one is
    refused (Conflict) unless ``force``: its runner then stops, and its children too."""
    check_session_id(session_id)
    with opened_store(store, root_of(root)) as opened, translated():
        await asyncio.to_thread(lifecycle.remove, opened, session_id, time.time(),
                                force=force)
