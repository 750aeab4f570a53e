"""Sessions through the façade: start, resume, send, status, log, cancel, remove, list.

Every function is a coroutine; blocking store and process work runs in worker threads so
the caller's event loop stays free. ``store`` is a store URL (default: SQLite in
``ROOT/.interlock/state.db``) and ``root`` the folder sessions keep their files under
(default: the working directory).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator, Callable, Collection, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Literal

from interlock.machines import check_context, ir_of, load_checked
from interlock.machines.bindings import Bindings, Call
from interlock.machines.context import context_message
from interlock.machines.events import reserved_reason
from interlock.machines.ir import MachineIR, TransitionKind
from interlock.runtime.api.common import opened_store, root_of, translated
from interlock.runtime.api.errors import Conflict, NotFound, UsageError
from interlock.runtime.builtin.machines import Watchers, builtin_for, builtin_names, is_builtin_spec
from interlock.runtime.engine import lifecycle
from interlock.runtime.engine.bindings_loader import load_bindings
from interlock.runtime.engine.builtin import Builtin, BuiltinSetup, OpenHost, SessionPort
from interlock.runtime.engine.context import SessionContext as SessionContext
from interlock.runtime.engine.context import with_session
from interlock.runtime.engine.host import SessionHost
from interlock.runtime.engine.lifecycle import StatusInfo, list_sessions, status_of
from interlock.runtime.engine.machine_ids import parent_id
from interlock.runtime.engine.runner import new_session_id
from interlock.runtime.engine.session import Step
from interlock.runtime.engine.snapshot import Snapshot
from interlock.runtime.inbox.deliveries import InboxCount, inbox_count
from interlock.runtime.inbox.session import attach_inbox
from interlock.runtime.signals.mailbox import Mailbox
from interlock.runtime.signals.model import SignalError, check_identifier
from interlock.runtime.store import JournalEntry as JournalEntry
from interlock.runtime.store import SessionRow, Store

SessionStatus = Literal["running", "stopped", "failed", "finished", "cancelled"]
Outcome = Literal["finished", "stopped", "failed", "cancelled", "removed"]
StepCallback = Callable[[Step], None]
NoteCallback = Callable[[str], None]
BindingsArg = str | Mapping[str, Callable[[Call], Any]] | None


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
class RunResult:
    """How a run ended: ``finished`` (a final state), ``stopped`` (asked to stop; the
    session is resumable), ``failed`` (``message`` is the one line naming the binding,
    its place in the spec and the error), ``cancelled`` (``message``: the reason) or
    ``removed`` (deleted under the runner)."""

    session_id: str
    outcome: Outcome
    active: tuple[str, ...]
    created: bool
    message: str | None = None


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


# -- running ----------------------------------------------------------------------------


def _noop(call: Call) -> None:
    return None


def _false(call: Call) -> bool:
    return False


def resolve_bindings(bindings: BindingsArg, spec_text: str, spec_path: str,
                     allow_unbound: bool, on_note: NoteCallback | None = None) -> Bindings:
    """A bindings mapping from a ``MODULE[:ATTR]``/``FILE.py`` reference or a mapping; with
    ``allow_unbound``, unbound actions do nothing and unbound guards are false."""
    with translated():
        bound: dict[str, Any] = dict(load_bindings(bindings) if isinstance(bindings, str)
                                     else bindings or {})
    if allow_unbound:
        ir = ir_of(spec_text, spec_path)
        missing_guards = [g for g in ir.guards if g not in bound]
        missing_actions = [a for a in ir.actions if a not in bound]
        bound.update(dict.fromkeys(missing_actions, _noop))
        bound.update(dict.fromkeys(missing_guards, _false))
        if (missing_guards or missing_actions) and on_note is not None:
            on_note(f"unbound: {len(missing_actions)} action(s) do nothing, "
                    f"{len(missing_guards)} guard(s) are false (allow_unbound)")
    return bound


def _in_session(bindings: Bindings, session_id: str, root: Path) -> Bindings:
    from interlock.runtime.signals.addressing import session_dir

    return with_session(bindings, SessionContext.of(session_id, session_dir(root, session_id)))


def _read_spec(spec: str | Path) -> tuple[str, str]:
    from interlock.runtime.api.specs import existing_spec

    path = existing_spec(spec)
    try:
        return path.read_text(encoding="utf-8"), str(path)
    except (OSError, UnicodeDecodeError) as exc:
        raise UsageError(f"cannot read spec {path}: {exc}") from None


async def start(
    spec: str | Path, *, session_id: str | None = None,
    context: Mapping[str, Any] | None = None, bindings: BindingsArg = None,
    allow_unbound: bool = False, migrate: bool = False, signals: bool = True,
    signals_as: str = "ALL", store: str | None = None, root: Path | str | None = None,
    stop: asyncio.Event | None = None, on_step: StepCallback | None = None,
    on_note: NoteCallback | None = None, demo: bool = False,
) -> RunResult:
    """Start a session of ``spec`` (a file or a built-in spec's name), or continue the one
    named ``session_id``, and run it until a final state or until ``stop`` is set.

    ``on_step`` sees every committed step; ``on_note`` gets one-line notes for people
    (started, where its signals go, orphans stopped). A built-in spec runs with its own
    bindings unless ``bindings`` are given; ``demo`` runs it offline and unattended: demo
    agents, and scripted stand-ins for what it waits for from the outside world.
    """
    base = root_of(root)
    if session_id is not None:
        check_session_id(session_id)
    with translated():
        check_identifier(signals_as, "signals_as")
    text, path = _read_spec(spec)
    ir = load_checked(text, file=path)
    machine = ir.name
    problems = check_context(ir, context or {})
    if problems:
        raise UsageError(context_message(problems))
    builtin = builtin_for(machine) if is_builtin_spec(Path(path)) else None
    if demo and (builtin is None or builtin.demo is None):
        why = f"{path} is not one of them" if builtin is None else f"{machine} has no demo"
        raise UsageError(f"--demo runs the built-in specs offline "
                         f"({', '.join(builtin_names())}); {why}")
    session_id = session_id or new_session_id(machine)
    if demo and builtin is not None:
        context = {**builtin.demo_context, **(context or {})}
    port = SessionPort()
    open_host = _assembler(builtin, bindings)
    raw = None if open_host else _bindings_for(builtin, bindings, text, path, allow_unbound,
                                               demo, session_id, base, on_note, port, store)
    with opened_store(store, base) as opened, translated():
        if open_host is not None:
            host = await open_host(_setup(session_id, base, demo, port, store), opened,
                                   context=context, stop=stop, on_step=on_step,
                                   on_note=on_note)
        else:
            assert raw is not None
            host = await SessionHost.open(
                opened, text, path, session_id=session_id,
                bindings=_in_session(raw, session_id, base), context=context,
                migrate=migrate, stop=stop, on_step=on_step, on_note=on_note,
                **_invokes(base, session_id, raw, demo))
        verb = "started" if host.created else "resumed"
        if on_note is not None:
            on_note(f"session {session_id} {verb} [{', '.join(host.runner.session.active)}] "
                    f"(store: {opened.url})")
        return await _run(host, builtin, port, store, base, signals, signals_as, demo,
                          open_host is not None)


async def _run(host: SessionHost, builtin: Builtin | None, port: SessionPort,
               store: str | None, root: Path, signals: bool, signals_as: str,
               demo: bool, assembled: bool) -> RunResult:
    """Run an opened session with its plugins: the inbox poller (when interlock.yaml has
    ``inbox:``), the live-signal feed, a built-in's watchers; a host a built-in
    ``assembled`` (``open_host``, a Ralph session) came with its own signal feed, and
    takes the inbox's messages through its mailbox."""
    from interlock.runtime.signals.session_feed import SignalFeed  # watchdog: when run

    runner = host.runner
    try:
        feed = SignalFeed(store, root, signals_as) if signals and not assembled else None
        # an assembled (Ralph) session takes inbox messages through its mailbox, as INFO
        inbox = attach_inbox(runner, store, root, host.note,
                             mailbox=session_mailbox(root, runner.session_id) if assembled
                             else None)
    except BaseException:
        runner.close()
        raise
    host.add(inbox, feed,
             Watchers(builtin, port, store, root, demo) if builtin is not None else None)
    ended = await host.run()
    message = str(ended.failure) if ended.failure is not None else ended.reason
    return RunResult(runner.session_id, ended.kind, runner.session.active, host.created,
                     message)


def _invokes(root: Path, session_id: str, bindings: Bindings,
             demo: bool = False) -> dict[str, Any]:
    """What ``invoke:`` states need (docs/invoke.md): the session folder their agents spool
    into, the handlers of ``agent:`` and ``command:`` invokes with the resolver of ``agent:``
    names (``interlock.yaml``, else the demo roles), and
    that of ``machine:`` names (built-in specs, spec files run with ``bindings``)."""
    from interlock.runtime.agents.invoke import agent_resolver, process_handlers
    from interlock.runtime.api.machines import machine_resolver
    from interlock.runtime.signals.addressing import session_dir

    return {"folder": session_dir(root, session_id),
            "invokers": process_handlers(agent_resolver(root)),
            "machines": machine_resolver(root, bindings, demo=demo)}


def session_mailbox(root: Path, session_id: str) -> Mailbox:
    """The mailbox of session ``session_id`` (the one rule of signals/addressing)."""
    from interlock.runtime.signals.addressing import session_mailbox_dir

    return Mailbox(session_mailbox_dir(root, session_id))


def _assembler(builtin: Builtin | None, bindings: BindingsArg) -> OpenHost | None:
    """The built-in's own assembly of its session's host (a Ralph session's), unless the
    caller gave bindings of its own."""
    return builtin.open_host if builtin is not None and bindings is None else None


def _setup(session_id: str, root: Path, demo: bool, port: SessionPort,
           store: str | None) -> BuiltinSetup:
    from interlock.runtime.signals.addressing import session_dir

    return BuiltinSetup(session_id, root, session_dir(root, session_id), demo, port=port,
                        store_url=store)


def _bindings_for(builtin: Builtin | None, bindings: BindingsArg, text: str, path: str,
                  allow_unbound: bool, demo: bool, session_id: str, root: Path,
                  on_note: NoteCallback | None, port: SessionPort,
                  store: str | None) -> Bindings:
    """The caller's bindings, else a built-in spec's own (``port`` connects their event
    sources to the session once its runner is open)."""
    if bindings is None and builtin is not None:
        setup = _setup(session_id, root, demo, port, store)
        return resolve_bindings(builtin.bindings(setup), text, path, allow_unbound, on_note)
    return resolve_bindings(bindings, text, path, allow_unbound, on_note)


async def create(
    spec: str | Path, *, session_id: str | None = None,
    context: Mapping[str, Any] | None = None, bindings: BindingsArg = None,
    allow_unbound: bool = False, store: str | None = None, root: Path | str | None = None,
    on_note: NoteCallback | None = None,
) -> SessionInfo:
    """Create a session (its initial entry actions run, its timers are armed) and leave it
    stopped: ``resume`` runs it, ``send`` queues events for it."""
    stop = asyncio.Event()
    stop.set()
    made = await start(spec, session_id=session_id, context=context, bindings=bindings,
                       allow_unbound=allow_unbound, signals=False, store=store, root=root,
                       stop=stop, on_note=on_note)
    if not made.created:
        raise Conflict(f"session {made.session_id} exists already; resume it")
    return await status(made.session_id, store=store, root=root)


async def resume(
    session_id: str, *, bindings: BindingsArg = None, allow_unbound: bool = False,
    retry: bool = False, signals: bool = True, signals_as: str = "ALL",
    store: str | None = None,
    root: Path | str | None = None, stop: asyncio.Event | None = None,
    on_step: StepCallback | None = None, on_note: NoteCallback | None = None,
) -> RunResult:
    """Continue a stopped, crashed or failed session where its last committed step left
    it. A failed session goes on without the event that failed (it stays in the session's
    dead letters); with ``retry`` its dead letters are delivered again first, in order."""
    base = root_of(root)
    check_session_id(session_id)
    with translated():
        check_identifier(signals_as, "signals_as")
    with opened_store(store, base) as opened:
        with translated():
            row = await asyncio.to_thread(opened.get, session_id)
        if row.status in ("finished", "cancelled"):
            raise Conflict(f"session {session_id!r} is {row.status}; nothing to resume")
        builtin = builtin_for(row.spec_name) if is_builtin_spec(Path(row.spec_path)) else None
        port = SessionPort()
        with translated():
            open_host = _assembler(builtin, bindings)
            if open_host is not None:
                host = await open_host(_setup(session_id, base, False, port, store), opened,
                                       context=None, stop=stop, on_step=on_step,
                                       on_note=on_note)
            else:
                raw = _bindings_for(builtin, bindings, row.spec_text, row.spec_path,
                                    allow_unbound, False, session_id, base, on_note, port,
                                    store)
                host = await SessionHost.open(
                    opened, None, row.spec_path, session_id=session_id,
                    bindings=_in_session(raw, session_id, base), retry=retry, stop=stop,
                    on_step=on_step, on_note=on_note, **_invokes(base, session_id, raw))
            if on_note is not None:
                on_note(f"session {session_id} resumed "
                        f"[{', '.join(host.runner.session.active)}]")
            return await _run(host, builtin, port, store, base, signals, signals_as, False,
                              open_host is not None)


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
