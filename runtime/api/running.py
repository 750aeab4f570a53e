"""Running sessions through the façade: start, create, resume.

A run opens the session's host (store, lease, invoker, timers, child machines) with its
plugins (the live-signal feed, the inbox poller, a built-in's watchers) and drives it
until a final state or until it is asked to stop. Reading and steering a session (status,
log, send, cancel, remove) is :mod:`.sessions`, which needs none of this.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from interlock.machines import check_context, ir_of, load_checked
from interlock.machines.bindings import Bindings, Call
from interlock.machines.context import context_message
from interlock.runtime.api.common import opened_store, root_of, translated
from interlock.runtime.api.errors import Conflict, UsageError
from interlock.runtime.api.sessions import SessionInfo, check_session_id, status
from interlock.runtime.builtin.machines import Watchers, builtin_for, builtin_names, is_builtin_spec
from interlock.runtime.engine.bindings_loader import load_bindings
from interlock.runtime.engine.builtin import Builtin, BuiltinSetup, OpenHost, SessionPort
from interlock.runtime.engine.context import SessionContext as SessionContext
from interlock.runtime.engine.context import with_session
from interlock.runtime.engine.host import SessionHost
from interlock.runtime.engine.runner import new_session_id
from interlock.runtime.engine.session import Step
from interlock.runtime.inbox.session import attach_inbox
from interlock.runtime.signals.mailbox import Mailbox
from interlock.runtime.signals.model import check_identifier

Outcome = Literal["finished", "stopped", "failed", "cancelled", "removed"]
StepCallback = Callable[[Step], None]
NoteCallback = Callable[[str], None]
BindingsArg = str | Mapping[str, Callable[[Call], Any]] | None


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
