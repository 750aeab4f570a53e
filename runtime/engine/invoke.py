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

A fan-out (``each:``, :mod:`~interlock.runtime.engine.invoke_fanout`) is the manager's too:
its state's invoke owns several flights, one per item, each started by the invoke's
handler with its :class:`~interlock.runtime.engine.invoke_handler.Item`, at most
``concurrency`` at once; the next ones start as the runner takes the events of those that
ended (:meth:`Invoker.ended`) and after every step. When the last has ended, the manager
offers ``done.invoke.<id>.all`` keyed by the fan-out's id.
"""


from __future__ import annotations

import asyncio
import threading
import uuid
from collections.abc import Callable, Collection, Mapping, Sequence
from pathlib import Path
from typing import Any

from interlock.machines.ir import ALL_SUFFIX, INVOKE_DONE_PREFIX, InvokeIR, MachineIR, OnResume
from interlock.runtime.config.dispatch import PollingConfiguration
from interlock.runtime.engine.clock import Clock
from interlock.runtime.engine.invoke_fanout import (
    Fanout,
    FanoutError,
    all_data,
    child_data,
    child_suffix,
    each_error_data,
    evaluate,
    spool_order,
)
from interlock.runtime.engine.invoke_handler import (
    Flight,
    InvokeHandler,
    InvokeHandlers,
    InvokeKind,
    InvokeNote,
    Item,
    kind_of,
    lost_data,
    spawn_error_data,
)
from interlock.runtime.engine.invoke_machine import ChildSetup, MachineHandler, MachineResolver
from interlock.runtime.engine.invoke_offline import stop_leftover
from interlock.runtime.host.owners import default_owner
from interlock.runtime.store.base import FanoutRecord, InvocationRecord, Store

__all__ = ["InvokeHandlers", "InvokeNote", "Invoker"]


class Invoker:
    """The invocations of one session (see the module docstring). Thread-safe entry
    points: :meth:`reconcile`, :meth:`recover`, :meth:`ended`, :meth:`answers`,
    :meth:`in_flight`, :meth:`shutdown`."""

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
        self._fanouts: dict[str, Fanout] = {}  # invoke id -> its current fan-out (each:)
        self._lock = threading.RLock()  # reconcile/recover/ended/shutdown, one at a time
        self._settling = threading.Lock()  # a flight's finished flag, a fan-out's results
        self._closed = False  # set by shutdown(): nothing starts any more
        self._opened: int | None = None  # how many invocations the session has opened
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
        """Invocations whose agent still runs (for "is the session idle?"), a fan-out's
        children included."""
        with self._lock:
            flights = [*self._flights.values(),
                       *(f for fanout in self._fanouts.values()
                         for f in fanout.children.values())]
            return [f.record for f in flights if not f.finished]

    def busy(self) -> bool:
        """Whether an agent runs or a fan-out has more to come (a child to start, or its
        ``.all`` to offer): between one child's end and the next one's start no agent
        runs, yet the session is not idle."""
        with self._lock:
            return (any(not f.finished for f in self._flights.values())
                    or any(not fanout.finished for fanout in self._fanouts.values()))

    def answers(self, invoke_id: str, invocation: str) -> bool:
        """Whether the session takes an event of ``invoke_id`` from ``invocation``: the
        invoke's current invocation, one of its current fan-out's children, or that
        fan-out itself (its ``.all``)."""
        with self._lock:
            flight = self._flights.get(invoke_id)
            if flight is not None:
                return flight.record.id == invocation
            fanout = self._fanouts.get(invoke_id)
            return fanout is not None and (invocation == fanout.record.id
                                           or invocation in fanout.invocations)

    # -- reconciling ------------------------------------------------------------------

    def reconcile(self, active: Sequence[str], context: Mapping[str, Any], *,
                  entered: Collection[str] | None = None) -> list[InvokeNote]:
        """Cancel the invocations of states left, then start those of states entered, and
        the children a fan-out has room for. ``entered``: invoking states the step
        entered. One active before and after whose invocation has answered (a fan-out:
        whose children have all ended) was left and entered again (an ``always`` loop back
        into it): it invokes anew. One whose agent still works keeps it (an external
        self-transition such as ``after: {1m: working}``: docs/invoke.md)."""
        wanted = {inv.id: inv for sid in active
                  if (inv := self.ir.states[sid].invoke) is not None}
        notes: list[InvokeNote] = []
        with self._lock:
            if self._closed:
                return []
            again = {inv.id for sid in entered or ()
                     if (inv := self.ir.states[sid].invoke) is not None
                     and (self._answered(inv.id))}
            for invoke_id in [i for i in self._flights if i not in wanted or i in again]:
                notes += self._cancel(self._flights.pop(invoke_id), "cancelled",
                                      deferred=True)
            for invoke_id in [i for i in self._fanouts if i not in wanted or i in again]:
                notes += self._cancel_fanout(self._fanouts.pop(invoke_id), "cancelled",
                                             deferred=True)
            for invoke_id, invoke in wanted.items():
                if invoke_id in self._flights or invoke_id in self._fanouts:
                    continue
                if invoke.fans_out:
                    notes += self._start_fanout(invoke, context)
                else:
                    notes.append(self._start(invoke, context))
            for fanout in list(self._fanouts.values()):
                notes += self._top_up(fanout, context)
        return notes

    def _answered(self, invoke_id: str) -> bool:
        flight = self._flights.get(invoke_id)
        if flight is not None:
            return flight.finished
        fanout = self._fanouts.get(invoke_id)
        return fanout is not None and fanout.finished

    def recover(self, active: Sequence[str], context: Mapping[str, Any]) -> list[InvokeNote]:
        """On resume: settle what a dead runner left in flight (per ``on_resume``; a
        fan-out goes on where it was: its children that ended are not run again), then
        reconcile. Invocations of states no longer active are stopped."""
        notes: list[InvokeNote] = []
        active_set = set(active)
        with self._lock:
            if self._closed:
                return []
            rows = self.store.invocations(self.session_id)
            # newest first: only an invoke's latest invocation can still be its current one
            for record in reversed([r for r in rows if r.outcome is None and r.fanout is None]):
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
                    notes.append(self._left_behind(record))
                    continue
                notes += self._resume(Flight(record, invoke), context)
            running = self.store.fanouts(self.session_id, in_flight=True)
            for fanout_record in reversed(running):
                children = [r for r in rows if r.fanout == fanout_record.id]
                notes += self._recover_fanout(fanout_record, children, active_set, context)
            ended = {f.id for f in running}
            for record in rows:  # children of fan-outs over before the crash
                if record.outcome is None and record.fanout is not None \
                        and record.fanout not in ended:
                    notes.append(self._left_behind(record))
        return notes + self.reconcile(active, context)

    def _left_behind(self, record: InvocationRecord) -> InvokeNote:
        """Stop what a dead runner left of an invocation of a state no longer active."""
        self._stop_left(record, "its state was left")
        self.store.end_invocation(record.id, "cancelled", None, self.clock.now())
        return self._note("cancelled", record, "its state was left")

    def _recover_fanout(self, record: FanoutRecord, children: list[InvocationRecord],
                        active: set[str], context: Mapping[str, Any]) -> list[InvokeNote]:
        """Take over a fan-out a dead runner left running: the children that ended keep
        their events (one kept but never offered is offered now), those in flight are
        settled by ``on_resume``, the ones not started (or interrupted) start as the
        concurrency allows (by :meth:`reconcile`)."""
        invoke = self._invoke(record.invoke)
        now = self.clock.now()
        if self.store.delivered(self.session_id, record.id):  # its .all was offered
            self.store.end_fanout(record.id, "delivered", now)
            if invoke is not None and record.state in active and invoke.fans_out:
                self._fanouts[invoke.id] = Fanout(record, invoke, finished=True)
            return [self._left_behind(r) for r in children if r.outcome is None]
        if invoke is None or not invoke.fans_out or record.state not in active \
                or record.invoke in self._fanouts:
            self.store.end_fanout(record.id, "cancelled", now)
            return [self._left_behind(r) for r in children if r.outcome is None]
        fanout = Fanout(record, invoke)
        self._fanouts[invoke.id] = fanout
        latest: dict[int, InvocationRecord] = {}
        notes: list[InvokeNote] = []
        for row in sorted(children, key=spool_order):
            fanout.invocations.add(row.id)
            if row.index is None or not 0 <= row.index < fanout.size:
                continue
            earlier = latest.get(row.index)
            if earlier is not None and earlier.outcome is None:  # superseded, yet running
                notes.append(self._left_behind(earlier))
            latest[row.index] = row
        for index, row in sorted(latest.items()):
            item = fanout.item(index)
            if row.result is not None:  # it ended; its event was kept before it was offered
                fanout.children[index] = Flight(row, invoke, finished=True, item=item)
                fanout.results[index] = row.result
                if row.outcome is None:
                    if self.store.delivered(self.session_id, row.id):
                        self.store.end_invocation(row.id, "delivered", None, now)
                    else:
                        self._offer(row.id, str(row.result.get("event")),
                                    dict(row.result.get("data") or {}))
            elif row.outcome is None:
                notes += self._resume(Flight(row, invoke, item=item), context)
            # else it ended without an event (interrupted, lost): it starts anew
        if fanout.complete:
            self._offer_all(fanout)
        return notes

    def _resume(self, flight: Flight, context: Mapping[str, Any]) -> list[InvokeNote]:
        """Settle, by its invoke's ``on_resume``, an invocation a dead runner left."""
        record, invoke = flight.record, flight.invoke
        mode = invoke.on_resume
        now = self.clock.now()
        if mode is OnResume.ADOPT:
            self._follow(flight)
            adopted = self._handler(invoke).adopt(flight, context)
            if adopted is not None:
                return [self._note("adopted", flight.record, adopted)]
            self._unfollow(flight)  # nothing left to adopt: on_resume's fallback
        self._stop_left(record, "its runner died (on_resume: "
                        f"{'fail' if mode is OnResume.FAIL else 'restart'})")
        self.store.end_invocation(record.id, "lost", "runner_lost", now)
        if mode is OnResume.FAIL:
            flight.finished = True
            self._follow(flight)
            self.deliver(flight, lost_data(record), "runner_lost")
            return [self._note("lost", record, "on_resume: fail")]
        return [self._note("lost", record, "on_resume: restart"),
                self._start(invoke, context, kind="restarted", item=flight.item)]

    def _follow(self, flight: Flight) -> None:
        """Make ``flight`` its invoke's current invocation (or its fan-out's child)."""
        item = flight.item
        if item is None:
            self._flights[flight.invoke.id] = flight
            return
        fanout = self._fanouts[flight.invoke.id]
        fanout.children[item.index] = flight
        fanout.invocations.add(flight.record.id)

    def _unfollow(self, flight: Flight) -> None:
        item = flight.item
        if item is None:
            self._flights.pop(flight.invoke.id, None)
        else:
            self._fanouts[flight.invoke.id].children.pop(item.index, None)

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
               kind: str = "invoked", item: Item | None = None) -> InvokeNote:
        flight, note = self._handler(invoke).start(invoke, context, item)
        return self._note(kind, flight.record, note)

    def _start_fanout(self, invoke: InvokeIR, context: Mapping[str, Any]) -> list[InvokeNote]:
        """A fan-out's state was entered: evaluate its list and concurrency, write its row,
        start the first children (an empty list raises ``.all`` at once; a list that
        cannot be evaluated, ``error.invoke.<id>``)."""
        now = self.clock.now()
        try:
            items, limit = evaluate(invoke, context)
            error = None
        except FanoutError as exc:
            items, limit, error = [], None, str(exc)
        record = FanoutRecord(uuid.uuid4().hex, self.session_id, invoke.id, invoke.state,
                              tuple(items), limit, now)
        self.store.record_fanout(record)
        fanout = Fanout(record, invoke)
        self._fanouts[invoke.id] = fanout
        if error is not None:
            fanout.finished = True
            self.store.end_fanout(record.id, "error", now)
            self._offer(record.id, invoke.error_event, each_error_data(record.id, error))
            self.wake()
            return [self._fanout_note(fanout, f"spawn_error: {error}")]
        at_once = "all at once" if limit is None else f"at most {limit} at once"
        notes = [self._fanout_note(fanout, f"{len(items)} item(s), {at_once}")]
        return notes + self._top_up(fanout, context)

    def _top_up(self, fanout: Fanout, context: Mapping[str, Any]) -> list[InvokeNote]:
        """Start the fan-out's children it has room for; with none left to run and every
        one ended (an empty list), offer its ``.all``."""
        notes = [self._start(fanout.invoke, context, item=item)
                 for item in fanout.to_start()]
        if fanout.complete:
            self._offer_all(fanout)
        return notes

    def open_flight(self, invoke: InvokeIR, argv: tuple[str, ...],
                    item: Item | None = None) -> Flight:
        """Write a new invocation's row (numbered, with its spool folder; a fan-out's
        child with its fan-out and index) and follow it as the invoke's current one (or
        its fan-out's child)."""
        if self._opened is None:  # this invoker writes the session's rows from now on
            self._opened = len(self.store.invocations(self.session_id))
        self._opened += 1
        seq = self._opened
        record = InvocationRecord(
            id=uuid.uuid4().hex, session_id=self.session_id, invoke=invoke.id,
            state=invoke.state, argv=argv, spool=str(self.folder / f"{seq:04d}-{invoke.id}"),
            started_at=self.clock.now(), fanout=item.fanout if item is not None else None,
            index=item.index if item is not None else None)
        self.store.record_invocation(record)
        flight = Flight(record, invoke, item=item)
        self._follow(flight)
        return flight

    def spawn_failed(self, flight: Flight, message: str) -> None:
        """The invocation could not start: its row ends, ``error.invoke`` (spawn_error)."""
        flight.finished = True
        self.store.end_invocation(flight.record.id, "error", "spawn_error", self.clock.now())
        self.deliver(flight, spawn_error_data(flight.record, message), "spawn_error")

    # -- finishing --------------------------------------------------------------------

    def ended(self, event: str, data: Mapping[str, Any], taken: bool,
              context: Mapping[str, Any] | None = None) -> list[InvokeNote]:
        """The runner took (or dropped) an invoke's done/error event: journal the outcome
        in the invocations (or fan-outs) table (the first outcome stands), then start the
        fan-out children there is room for now (over ``context``); the journal notes of
        those started."""
        invocation = data.get("invocation")
        if not isinstance(invocation, str):
            return []
        reason = data.get("reason")
        kind = ("error" if event.startswith("error.") else "done") if taken else "dropped"
        now = self.clock.now()
        with self._lock:
            if _all_event(event) and self.store.end_fanout(invocation, kind, now):
                return []  # a fan-out's .all (not a child machine's final state `all`)
            self.store.end_invocation(invocation, kind,
                                      reason if isinstance(reason, str) else None, now)
            if self._closed or context is None:
                return []
            notes: list[InvokeNote] = []
            for running in list(self._fanouts.values()):
                notes += self._top_up(running, context)
            return notes

    def settle(self, flight: Flight) -> bool:
        """Mark the flight finished; False if it already was (its cancel or its outcome
        won). The lock is never held while waiting for anything."""
        with self._settling:
            if flight.finished:
                return False
            flight.finished = True
            return True

    def deliver(self, flight: Flight, data: dict[str, Any], reason: str | None,
                suffix: str | None = None) -> None:
        """Offer the flight's done (``reason`` None) or error event to the session, keyed
        by the invocation (a re-delivery never applies twice), and wake the runner. A
        fan-out's child adds its ``item`` and ``index``; its event is kept on its row
        first, and the last child's is followed by the fan-out's ``.all``."""
        invoke, record, item = flight.invoke, flight.record, flight.item
        event = invoke.done_event if reason is None else invoke.error_event
        if item is not None:
            suffix = child_suffix(suffix)
        if suffix:  # a child machine's final state: done.invoke.<id>.<final>
            event = f"{event}.{suffix}"
        if item is None:
            self._offer(record.id, event, data)
            self.wake()
            return
        data = child_data(item, data)
        result = {"event": event, "data": data}
        self.store.invocation_result(record.id, result)  # before the offer: see recover()
        self._offer(record.id, event, data)
        fanout = self._fanouts.get(invoke.id)
        if fanout is not None and fanout.record.id == item.fanout:
            with self._settling:
                fanout.results[item.index] = result
            if fanout.complete:
                self._offer_all(fanout)
        self.wake()

    def _offer(self, key: str, event: str, data: dict[str, Any]) -> None:
        """Queue ``event`` for the session (its runner is woken by the caller)."""
        self.store.offer(self.session_id, event, data, self.clock.now(), key=key, wake=False)

    def _offer_all(self, fanout: Fanout) -> None:
        """Offer the fan-out's ``done.invoke.<id>.all`` once: keyed by the fan-out's id,
        so a second offer (two children ending at once, a resumed runner) is nothing."""
        with self._settling:
            if fanout.finished:
                return
            fanout.finished = True
        self._offer(fanout.record.id, fanout.invoke.all_event, all_data(fanout))
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

    def _cancel_fanout(self, fanout: Fanout, outcome_kind: str, *,
                       deferred: bool = False) -> list[InvokeNote]:
        """Stop every child of the fan-out still running (none not yet started will
        start). ``cancelled`` ends the fan-out; ``interrupted`` and ``detached`` leave it
        running in the store, for a resumed runner to go on with."""
        with self._settling:
            fanout.finished = True
        notes: list[InvokeNote] = []
        for flight in list(fanout.children.values()):
            notes += self._cancel(flight, outcome_kind, deferred=deferred)
        if outcome_kind == "cancelled" and not fanout.complete:  # else its .all ends it
            fanout_id, now = fanout.record.id, self.clock.now()
            if deferred:
                self._loop.call_soon_threadsafe(self.store.end_fanout, fanout_id,
                                                "cancelled", now)
            else:
                self.store.end_fanout(fanout_id, "cancelled", now)
        return notes

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
            for fanout in list(self._fanouts.values()):
                notes += self._cancel_fanout(fanout, kind if interrupt else "detached")
            self._flights.clear()
            self._fanouts.clear()
        if self._loop.is_running():
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(timeout=10)
        if not self._loop.is_running():
            self._loop.close()
        return notes

    def _note(self, kind: str, record: InvocationRecord, note: str | None = None) -> InvokeNote:
        data: dict[str, Any] = {
            "invocation": record.id, "state": record.state, "argv": list(record.argv),
            "pid": record.pid, "startTicks": record.start_ticks, "spool": record.spool,
        }
        if record.fanout is not None:
            data.update(fanout=record.fanout, index=record.index)
        return InvokeNote(kind, record.invoke, data, note)

    def _fanout_note(self, fanout: Fanout, note: str) -> InvokeNote:
        record = fanout.record
        return InvokeNote("fanout", record.invoke, {
            "fanout": record.id, "state": record.state, "items": len(record.items),
            "concurrency": record.concurrency}, note)


def _all_event(event: str) -> bool:
    """Whether ``event`` is a fan-out's ``done.invoke.<id>.all``."""
    parts = event.split(".")
    return len(parts) == 4 and event.startswith(INVOKE_DONE_PREFIX + ".") \
        and parts[-1] == ALL_SUFFIX
