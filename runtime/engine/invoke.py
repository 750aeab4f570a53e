"""Invoke: agents started when their state is entered and cancelled when it is left.

The runner owns one :class:`Invoker` per session whose spec has ``invoke:`` states. After
every committed step the runner calls :meth:`Invoker.reconcile` with the new
configuration: invocations of states no longer active are cancelled first (process group
TERM -> KILL, journaled ``cancelled``), then the invokes of active states without one
start (journaled ``invoked``: argv, pid, start time, spool folder). The agents run on
the invoker's own event loop (a thread), so the session keeps taking events, timers and
signals meanwhile. A finished agent becomes ``done.invoke.<id>`` or
``error.invoke.<id>``, offered to the session's inbox keyed by the invocation id (a
re-delivery after a crash never applies twice), and the runner is woken at once.

Every invocation is a row of the store's ``invocations`` table, written before its
process starts. A runner that resumes a session after a crash applies each in-flight
invocation's ``on_resume``: ``adopt`` reattaches to the same process (same pid and start
time) and reads its spooled output from the start, ``restart`` stops what is left and
starts exactly one new one, ``fail`` stops it and raises ``error.invoke.<id>`` with
reason ``runner_lost``. See docs/invoke.md.

The :class:`Invoker` is the manager (after python-statemachine's ``InvokeManager``): rows,
journal notes, reconciling, recovering, delivering. The work of each kind is its handler's
(:class:`~interlock.runtime.engine.invoke_handler.InvokeHandler`: start, adopt, stop),
made for this invoker by the factories the caller passes in
(:data:`~interlock.runtime.engine.invoke_handler.InvokeHandlers`): ``agent:`` and
``command:`` invokes run a spooled process (:mod:`~interlock.runtime.agents.invoke`,
:mod:`~interlock.runtime.dispatch.invoke_command` over
:mod:`~interlock.runtime.dispatch.invoke_process`; all of them:
:func:`~interlock.runtime.agents.invoke.process_handlers`). ``machine:`` invokes run a child
session through a :data:`~interlock.runtime.engine.invoke_machine.MachineResolver`
(:mod:`~interlock.runtime.engine.invoke_machine`). What a dead runner left is stopped
without an invoker by :mod:`~interlock.runtime.engine.invoke_offline`.
"""


from __future__ import annotations

import asyncio
import threading
import uuid
from collections.abc import Callable, Collection, Mapping, Sequence
from pathlib import Path
from typing import Any

from interlock.machines.ir import InvokeIR, MachineIR, OnResume
from interlock.runtime.config.dispatch import PollingConfiguration
from interlock.runtime.engine.clock import Clock
from interlock.runtime.engine.invoke_handler import (
    Flight,
    InvokeHandler,
    InvokeHandlers,
    InvokeKind,
    InvokeNote,
    kind_of,
    lost_data,
    spawn_error_data,
)
from interlock.runtime.engine.invoke_machine import ChildSetup, MachineHandler, MachineResolver
from interlock.runtime.engine.invoke_offline import stop_leftover
from interlock.runtime.host.owners import default_owner
from interlock.runtime.store.base import InvocationRecord, Store

__all__ = ["InvokeHandlers", "InvokeNote", "Invoker"]


class Invoker:
    """The invocations of one session (see the module docstring). Thread-safe entry
    points: :meth:`reconcile`, :meth:`recover`, :meth:`current`, :meth:`in_flight`,
    :meth:`shutdown`."""

    def __init__(self, store: Store, session_id: str, ir: MachineIR, *, spec_path: str,
                 folder: Path, clock: Clock, wake: Callable[[], None],
                 config: PollingConfiguration | None = None,
                 handlers: InvokeHandlers | None = None,
                 machines: MachineResolver | None = None,
                 owner: str | None = None) -> None:
        self.store = store
        self.session_id = session_id
        self.ir = ir
        self.folder = folder / "invocations"
        self.clock = clock
        self.wake = wake
        self.config = config or PollingConfiguration()
        self.spec_path = spec_path
        children = ChildSetup(store, clock, owner or default_owner(), handlers, machines,
                              config)
        self._handlers: dict[InvokeKind, InvokeHandler] = {
            kind: make(self) for kind, make in (handlers or {}).items() if kind != "machine"}
        self._handlers["machine"] = MachineHandler(self, children)
        self._flights: dict[str, Flight] = {}  # invoke id -> the current invocation
        self._lock = threading.RLock()  # reconcile/recover/shutdown, one at a time
        self._settling = threading.Lock()  # a flight's finished flag
        self._closed = False  # set by shutdown(): nothing starts any more
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever,
                                        name=f"invoke-{session_id}", daemon=True)
        self._thread.start()

    @property
    def loop(self) -> asyncio.AbstractEventLoop:
        """The invoker's own event loop (a thread), where every invocation's work runs."""
        return self._loop

    # -- queries ----------------------------------------------------------------------

    def in_flight(self) -> list[InvocationRecord]:
        """Invocations whose agent still runs (for "is the session idle?")."""
        with self._lock:
            return [f.record for f in self._flights.values() if not f.finished]

    def current(self, invoke_id: str) -> str | None:
        """The invocation id whose completion the session takes for ``invoke_id``."""
        with self._lock:
            flight = self._flights.get(invoke_id)
            return flight.record.id if flight is not None else None

    # -- reconciling ------------------------------------------------------------------

    def reconcile(self, active: Sequence[str], context: Mapping[str, Any], *,
                  entered: Collection[str] | None = None) -> list[InvokeNote]:
        """Cancel the invocations of states left, then start those of states entered.
        ``entered``: invoking states the step entered. One active before and after whose
        invocation has answered was left and entered again (an ``always`` loop back into
        it): it invokes anew. One whose agent still works keeps it (an external
        self-transition such as ``after: {1m: working}``: docs/invoke.md)."""
        wanted = {inv.id: inv for sid in active
                  if (inv := self.ir.states[sid].invoke) is not None}
        notes: list[InvokeNote] = []
        with self._lock:
            if self._closed:
                return []
            again = {inv.id for sid in entered or ()
                     if (inv := self.ir.states[sid].invoke) is not None
                     and (flight := self._flights.get(inv.id)) is not None and flight.finished}
            for invoke_id in [i for i in self._flights if i not in wanted or i in again]:
                notes += self._cancel(self._flights.pop(invoke_id), "cancelled",
                                      deferred=True)
            for invoke_id, invoke in wanted.items():
                if invoke_id not in self._flights:
                    notes.append(self._start(invoke, context))
        return notes

    def recover(self, active: Sequence[str], context: Mapping[str, Any]) -> list[InvokeNote]:
        """On resume: settle what a dead runner left in flight (per ``on_resume``), then
        reconcile. Invocations of states no longer active are stopped."""
        notes: list[InvokeNote] = []
        active_set = set(active)
        with self._lock:
            if self._closed:
                return []
            # newest first: only an invoke's latest invocation can still be its current one
            for record in reversed(self.store.invocations(self.session_id, in_flight=True)):
                invoke = self._invoke(record.invoke)
                now = self.clock.now()
                if self.store.delivered(self.session_id, record.id):
                    self.store.end_invocation(record.id, "delivered", None, now)
                    # the event is queued or consumed; a consumed one left the state, or the
                    # state ignored it: either way this entry's invoke has answered
                    if invoke is not None and record.state in active_set:
                        self._flights[record.invoke] = Flight(record, invoke, finished=True)
                    continue
                if invoke is None or record.state not in active_set \
                        or record.invoke in self._flights:
                    self._stop_left(record, "its state was left")
                    self.store.end_invocation(record.id, "cancelled", None, now)
                    notes.append(self._note("cancelled", record, "its state was left"))
                    continue
                notes += self._resume(record, invoke, context)
        return notes + self.reconcile(active, context)

    def _resume(self, record: InvocationRecord, invoke: InvokeIR,
                context: Mapping[str, Any]) -> list[InvokeNote]:
        mode = invoke.on_resume
        now = self.clock.now()
        if mode is OnResume.ADOPT:
            flight = Flight(record, invoke)
            self._flights[invoke.id] = flight
            adopted = self._handler(invoke).adopt(flight, context)
            if adopted is not None:
                return [self._note("adopted", flight.record, adopted)]
            del self._flights[invoke.id]  # nothing left to adopt: on_resume's fallback
        self._stop_left(record, "its runner died (on_resume: "
                        f"{'fail' if mode is OnResume.FAIL else 'restart'})")
        if mode is OnResume.FAIL:
            self.store.end_invocation(record.id, "lost", "runner_lost", now)
            self._flights[invoke.id] = Flight(record, invoke, finished=True)
            self.deliver(record, invoke, lost_data(record), "runner_lost")
            return [self._note("lost", record, "on_resume: fail")]
        self.store.end_invocation(record.id, "lost", "runner_lost", now)
        return [self._note("lost", record, "on_resume: restart"),
                self._start(invoke, context, kind="restarted")]

    def _stop_left(self, record: InvocationRecord, why: str) -> None:
        """Stop what a dead runner left of an invocation (its kind's way)."""
        stop_leftover(self.store, self.session_id, record, why, self.clock.now(),
                      self.config.terminate_grace)

    def _invoke(self, invoke_id: str) -> InvokeIR | None:
        return next((i for i in self.ir.invokes if i.id == invoke_id), None)

    def _handler(self, invoke: InvokeIR) -> InvokeHandler:
        return self._handlers[kind_of(invoke)]

    # -- starting ---------------------------------------------------------------------

    def _start(self, invoke: InvokeIR, context: Mapping[str, Any],
               kind: str = "invoked") -> InvokeNote:
        flight, note = self._handler(invoke).start(invoke, context)
        return self._note(kind, flight.record, note)

    def open_flight(self, invoke: InvokeIR, argv: tuple[str, ...]) -> Flight:
        """Write a new invocation's row (numbered, with its spool folder) and follow it as
        the invoke's current one."""
        seq = len(self.store.invocations(self.session_id)) + 1
        record = InvocationRecord(
            id=uuid.uuid4().hex, session_id=self.session_id, invoke=invoke.id,
            state=invoke.state, argv=argv, spool=str(self.folder / f"{seq:04d}-{invoke.id}"),
            started_at=self.clock.now())
        self.store.record_invocation(record)
        flight = Flight(record, invoke)
        self._flights[invoke.id] = flight
        return flight

    def spawn_failed(self, flight: Flight, message: str) -> None:
        """The invocation could not start: its row ends, ``error.invoke`` (spawn_error)."""
        flight.finished = True
        self.store.end_invocation(flight.record.id, "error", "spawn_error", self.clock.now())
        self.deliver(flight.record, flight.invoke, spawn_error_data(flight.record, message),
                     "spawn_error")

    # -- finishing --------------------------------------------------------------------

    def ended(self, event: str, data: Mapping[str, Any], taken: bool) -> None:
        """The runner took (or dropped) an invoke's done/error event: journal the outcome
        in the invocations table (the first outcome stands)."""
        invocation = data.get("invocation")
        if not isinstance(invocation, str):
            return
        reason = data.get("reason")
        kind = ("error" if event.startswith("error.") else "done") if taken else "dropped"
        self.store.end_invocation(invocation, kind, reason if isinstance(reason, str) else None,
                                  self.clock.now())

    def settle(self, flight: Flight) -> bool:
        """Mark the flight finished; False if it already was (its cancel or its outcome
        won). The lock is never held while waiting for anything."""
        with self._settling:
            if flight.finished:
                return False
            flight.finished = True
            return True

    def deliver(self, record: InvocationRecord, invoke: InvokeIR, data: dict[str, Any],
                reason: str | None, suffix: str | None = None) -> None:
        """Offer the invoke's done (``reason`` None) or error event to the session, keyed
        by the invocation (a re-delivery never applies twice), and wake the runner."""
        event = invoke.done_event if reason is None else invoke.error_event
        if suffix:  # a child machine's final state: done.invoke.<id>.<final>
            event = f"{event}.{suffix}"
        self.store.offer(self.session_id, event, data, self.clock.now(), key=record.id)
        self.wake()

    # -- stopping ---------------------------------------------------------------------

    def _cancel(self, flight: Flight, outcome_kind: str, *,
                deferred: bool = False) -> list[InvokeNote]:
        """Stop the flight's work (its handler waits until it is gone) and journal
        ``outcome_kind``; with "detached", only stop following it (nothing is written).
        ``deferred``: write the outcome off the caller's path (a step's reconcile)."""
        if not self.settle(flight):
            return []
        stopped = self._handler(flight.invoke).stop(flight, outcome_kind)
        if outcome_kind == "detached":
            return []
        if stopped.ends_row:
            record_id, now = flight.record.id, self.clock.now()
            if deferred:
                # Off the step's path: if this is lost in a crash, recover() finds the row
                # of a state no longer active and writes the same outcome.
                self._loop.call_soon_threadsafe(self.store.end_invocation, record_id,
                                                outcome_kind, None, now)
            else:
                self.store.end_invocation(record_id, outcome_kind, None, now)
        return [self._note(outcome_kind, flight.record, stopped.note)]

    def shutdown(self, interrupt: bool = True, *,
                 kind: str = "interrupted") -> list[InvokeNote]:
        """Stop every agent still running (journaled ``kind``: ``interrupted``, or
        ``cancelled`` for a cancelled session) and the loop; with ``interrupt`` False,
        leave the agents running (another runner owns them now). Nothing starts after
        this; calling it again does nothing."""
        notes: list[InvokeNote] = []
        with self._lock:
            self._closed = True
            for flight in list(self._flights.values()):
                notes += self._cancel(flight, kind if interrupt else "detached")
            self._flights.clear()
        if self._loop.is_running():
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(timeout=10)
        if not self._loop.is_running():
            self._loop.close()
        return notes

    def _note(self, kind: str, record: InvocationRecord, note: str | None = None) -> InvokeNote:
        return InvokeNote(kind, record.invoke, {
            "invocation": record.id, "state": record.state, "argv": list(record.argv),
            "pid": record.pid, "startTicks": record.start_ticks, "spool": record.spool,
        }, note)
