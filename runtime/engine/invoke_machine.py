"""Child machines: an invoke that runs another spec as a session of its own.

``invoke: {id: step, machine: ralph_subagent, input: {...}}`` starts, when its state is
entered, a session of the child spec in the same store, with the rendered ``input`` as its
context: id ``<parent id>.<NNNN>-<invoke id>`` (NNNN: the invocation's number in the
parent), folder ``<parent folder>/invocations/<NNNN>-<invoke id>/``. Its runner runs in
the parent runner's process, on the invoker's loop; the child's own invokes (agents,
deeper machines) work as anywhere else, with the parent's invoke handlers and machine resolver.

* The child reaching a top-level final state raises ``done.invoke.<id>.<final state>`` in
  the parent (SCXML's prefix match lets a transition listen for ``done.invoke.<id>`` and
  hear every ending), with ``output`` (the child's context), ``state`` (the final state),
  ``session`` (the child's id) and ``invocation``.
* A child that fails (a fault no ``error.execution`` handled) raises
  ``error.invoke.<id>`` with reason ``machine_failed``; one cancelled or removed from
  outside, ``machine_cancelled``; one past the invoke's ``timeout:`` is cancelled and
  raises reason ``timeout``.
* Leaving the invoking state cancels the child session (its agents are stopped, it ends
  ``cancelled``), inside the step that left it.
* In a fan-out (``each:``), one child session per item: ``input:`` sees ``item`` and
  ``index``, and each child's event adds them to its data (docs/invoke.md).
* Stopping the parent runner (Ctrl-C) stops the child's runner too, resumable; the
  invocation stays in flight. Resuming the parent settles it by ``on_resume``: ``adopt``
  (the default) resumes the same child session (which adopts its own agents in turn),
  ``restart`` cancels it and starts a new one, ``fail`` cancels it and raises
  ``error.invoke.<id>`` with reason ``runner_lost``. A child that had finished while no
  runner ran is reported at once.

Which spec a ``machine:`` name means, with which bindings, is the caller's business: a
:data:`MachineResolver` given to ``Runner.open(machines=...)``; without one a machine
invoke fails with ``spawn_error``.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from interlock.machines.bindings import Bindings
from interlock.machines.ir import InvokeIR
from interlock.runtime.engine.clock import Clock
from interlock.runtime.engine.invoke_handler import (
    START_WAIT,
    Flight,
    InvokeHandlers,
    InvokeHost,
    Item,
    Stopped,
    names_of,
    spawn_error_data,
    time_left,
)
from interlock.runtime.engine.machine_ids import MACHINE_ARGV, child_session_id
from interlock.runtime.store.base import InvocationRecord, SessionNotFound, Store

if TYPE_CHECKING:
    from interlock.runtime.config.dispatch import PollingConfiguration
    from interlock.runtime.engine.runner import Runner

CHILD_WAIT = 60.0  # longest wait for a child machine's runner to stop after a cancel
#: How a child that ended on its own is reported: its outcome kind -> error reason.
_ERROR_REASONS = {"failed": "machine_failed", "cancelled": "machine_cancelled",
                  "removed": "machine_cancelled", "timeout": "timeout"}


class MachineError(Exception):
    """A ``machine:`` name cannot be resolved to a spec (the message says why)."""


@dataclass(frozen=True, slots=True)
class ChildMachine:
    """What a ``machine:`` invoke runs: the child spec's text and path, the bindings of its
    session, and ``attach``, called with the child's runner once it is open (to give it a
    signal feed, say); what ``attach`` returns is called when the runner closes."""

    spec_text: str
    spec_path: str
    bindings: Bindings | None = None
    attach: Callable[[Runner], Callable[[], None] | None] | None = None


@dataclass(frozen=True, slots=True)
class MachineRequest:
    """What a machine resolver is asked: the invoke's ``machine:`` name, the parent's spec
    path (a spec file is relative to its folder), the child session's id and folder, and,
    for a fan-out's child, its ``item`` (fan-out id, index, value)."""

    name: str
    parent_spec: str
    session_id: str
    folder: Path
    item: Item | None = None


MachineResolver = Callable[[MachineRequest], ChildMachine]


@dataclass(frozen=True, slots=True)
class ChildEnd:
    """How a child run ended: ``kind`` is the runner's outcome (finished, failed,
    cancelled, removed, stopped); ``state`` the final state, ``output`` the context."""

    kind: str
    session: str
    state: str | None = None
    output: Mapping[str, Any] | None = None
    message: str | None = None

    def event_data(self, invocation: str) -> tuple[str | None, dict[str, Any]]:
        """The error reason (None: done) and the parent's event data."""
        data: dict[str, Any] = {"output": dict(self.output or {}), "state": self.state,
                                "session": self.session, "invocation": invocation}
        if self.kind == "finished":
            return None, data
        reason = _ERROR_REASONS.get(self.kind, "machine_failed")
        message = self.message or f"child session {self.session} ended {self.kind}"
        return reason, {**data, "reason": reason, "message": message}


def final_state(runner: Runner) -> str | None:
    """The top-level final state a finished session is in."""
    states = runner.session.ir.states
    return next((s for s in runner.session.active
                 if states[s].is_final and states[s].parent is None), None)


@dataclass(slots=True)
class ChildSetup:
    """What every child of one invoker shares: the store, the clock, the invoke handlers,
    the machine resolver and
    dispatch settings its own invokes need, and the owner id of its lease."""

    store: Store
    clock: Clock
    owner: str
    invokers: InvokeHandlers | None
    machines: MachineResolver | None
    config: PollingConfiguration | None


class ChildRun:
    """One child session, run on the invoker's loop (see the module docstring). ``context``
    None resumes the existing session; otherwise it is created (or, found already, resumed:
    a crash between creating it and noting the process)."""

    def __init__(self, setup: ChildSetup, machine: ChildMachine, session_id: str,
                 folder: Path, context: Mapping[str, Any] | None,
                 timeout: float | None = None,
                 on_open: Callable[[], None] | None = None) -> None:
        self.setup = setup
        self.machine = machine
        self.session_id = session_id
        self.folder = folder
        self.context = context
        self.timeout = timeout
        self.on_open = on_open or (lambda: None)
        self.runner: Runner | None = None
        self._stop: asyncio.Event | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._cancel_reason: str | None = None
        self._cancelled = False
        self._detach = False  # on stop: leave the child's agents running (see stop)

    async def run(self) -> ChildEnd:
        """Open the child (created or resumed), run it to its end; the runner is closed."""
        self._loop = asyncio.get_running_loop()
        self._stop = asyncio.Event()
        setup = self.setup
        try:
            existing = setup.store.get(self.session_id)
        except SessionNotFound:
            existing = None
        if existing is not None and existing.status in ("finished", "failed", "cancelled"):
            return self._settled(existing.status)
        try:
            runner = await self._open(existing is None)
        finally:
            self.on_open()
        if self._cancelled:
            runner.cancel(self._cancel_reason)
        detach = self.machine.attach(runner) if self.machine.attach is not None else None
        return await self._run_opened(runner, detach)

    async def _open(self, create: bool) -> Runner:
        from interlock.runtime.engine.runner import Runner

        setup = self.setup
        runner, _ = await asyncio.to_thread(
            Runner.open, setup.store,
            self.machine.spec_text if create else None, self.machine.spec_path,
            session_id=self.session_id, bindings=self.machine.bindings, clock=setup.clock,
            context=self.context if create else None, owner=setup.owner,
            folder=self.folder, invokers=setup.invokers, invoke_config=setup.config,
            machines=setup.machines, child=True)
        self.runner = runner
        return runner

    async def _run_opened(self, runner: Runner,
                          detach: Callable[[], None] | None) -> ChildEnd:
        try:
            run = asyncio.ensure_future(runner.run(self._stop))
            done, _ = await asyncio.wait([run], timeout=self.timeout)
            if not done:  # past the invoke's timeout: the child is cancelled
                runner.cancel("invoke timeout")
                await run
                return ChildEnd("timeout", self.session_id, None,
                                dict(runner.session.context),
                                f"child session {self.session_id} ran past the invoke's "
                                f"timeout ({self.timeout:g}s) and was cancelled")
            outcome = run.result()
            if outcome.kind == "finished":
                return ChildEnd("finished", self.session_id, final_state(runner),
                                dict(runner.session.context))
            message = (str(outcome.failure) if outcome.failure is not None
                       else outcome.reason)
            return ChildEnd(outcome.kind, self.session_id, None,
                            dict(runner.session.context), message)
        finally:
            if detach is not None:
                detach()
            await asyncio.to_thread(runner.close, detach=self._detach)

    def _settled(self, status: str) -> ChildEnd:
        """A child that ended while no runner ran (its end was not reported yet)."""
        from interlock.machines import ir_of
        from interlock.runtime.engine.snapshot import Snapshot

        row = self.setup.store.get(self.session_id)
        snapshot = Snapshot.from_json(row.snapshot)
        kind = {"finished": "finished", "failed": "failed"}.get(status, "cancelled")
        state = None
        if kind == "finished":
            states = ir_of(row.spec_text, row.spec_path).states
            state = next((s for s in snapshot.configuration
                          if s in states and states[s].is_final and states[s].parent is None),
                         None)
        return ChildEnd(kind, self.session_id, state, dict(snapshot.context),
                        f"child session {self.session_id} is {status}")

    def cancel(self, reason: str) -> None:
        """End the child session ``cancelled`` (thread-safe)."""
        self._cancelled, self._cancel_reason = True, reason
        runner = self.runner
        if runner is not None:
            runner.cancel(reason)

    def stop(self, *, detach: bool = False) -> None:
        """Stop the child's runner, leaving the session resumable (thread-safe); with
        ``detach``, its agents are left running too (the parent lost its lease: the runner
        that took the parent over adopts them)."""
        self._detach = detach
        loop, stop = self._loop, self._stop
        if loop is not None and stop is not None:
            with contextlib.suppress(RuntimeError):  # the loop is already closed
                loop.call_soon_threadsafe(stop.set)


class MachineHandler:
    """The :class:`~interlock.runtime.engine.invoke_handler.InvokeHandler` of ``machine:``
    invokes: the work is a child session (:class:`ChildRun`) on the invoker's loop."""

    def __init__(self, host: InvokeHost, setup: ChildSetup) -> None:
        self.host = host
        self.setup = setup

    def start(self, invoke: InvokeIR, context: Mapping[str, Any],
              item: Item | None = None) -> tuple[Flight, str | None]:
        assert invoke.machine is not None
        flight = self.host.open_flight(invoke, (MACHINE_ARGV, invoke.machine), item)
        error = self._launch(flight, context)
        if error is not None:
            return flight, f"spawn_error: {error}"
        flight.started.wait(START_WAIT)
        return flight, f"child session {self._child_id(flight.record)}"

    def adopt(self, flight: Flight, context: Mapping[str, Any]) -> str | None:
        """Resume the same child session (which adopts its own invocations in turn)."""
        self._launch(flight, context)
        return f"child session {self._child_id(flight.record)}"

    def stop(self, flight: Flight, outcome_kind: str) -> Stopped:
        """``cancelled`` cancels the child session; ``interrupted`` and ``detached`` only
        stop its runner, leaving the session and the invocation in flight for a resumed
        parent to adopt."""
        child = flight.work
        assert isinstance(child, ChildRun)
        flight.started.wait(START_WAIT)
        if outcome_kind == "cancelled":
            child.cancel(f"the parent session {self.host.session_id} left state "
                         f"{flight.record.state!r}")
        else:
            child.stop(detach=outcome_kind == "detached")

        async def wait() -> None:
            task = flight.task
            if task is not None:
                await asyncio.wait([task])

        with contextlib.suppress(TimeoutError, RuntimeError):
            asyncio.run_coroutine_threadsafe(wait(), self.host.loop).result(timeout=CHILD_WAIT)
        if outcome_kind == "cancelled":
            return Stopped(ends_row=True, note=f"child session {child.session_id}")
        return Stopped(ends_row=False,
                       note=f"child session {child.session_id} stopped; resumable")

    def _child_id(self, record: InvocationRecord) -> str:
        return child_session_id(self.host.session_id, record.spool)

    def _launch(self, flight: Flight, context: Mapping[str, Any]) -> str | None:
        """Run (create, or resume) the flight's child session on the invoker's loop; the
        error when it cannot start (delivered as ``spawn_error``)."""
        from interlock.runtime.engine.prompts import PromptError, render_input  # Jinja2

        host, record, invoke = self.host, flight.record, flight.invoke
        resolver = self.setup.machines
        try:
            if resolver is None:
                raise MachineError(f"no machine resolver for machine {invoke.machine!r}")
            child = resolver(MachineRequest(
                str(invoke.machine), host.spec_path, self._child_id(record),
                Path(record.spool), flight.item))
            input_context = render_input(invoke.input, context=context,
                                         scope=names_of(flight.item))
        except (MachineError, PromptError) as exc:
            message = f"invoke {invoke.id!r}: machine {invoke.machine!r}: {exc}"
            host.spawn_failed(flight, message)
            return message
        timeout = time_left(invoke, context, record, host.clock)
        run = ChildRun(self.setup, child, self._child_id(record), Path(record.spool),
                       input_context, timeout, on_open=flight.started.set)
        flight.work = run

        def schedule() -> None:
            task = host.loop.create_task(run.run())
            flight.task = task
            task.add_done_callback(lambda t: self._finished(flight, t))

        host.loop.call_soon_threadsafe(schedule)
        return None

    def _finished(self, flight: Flight, task: asyncio.Future[ChildEnd]) -> None:
        """On the invoker's loop: report how the child ended, unless a cancel came first."""
        flight.started.set()
        if task.cancelled() or not self.host.settle(flight):
            return
        error = task.exception()
        record = flight.record
        if error is not None:
            message = f"child machine {flight.invoke.machine!r}: {type(error).__name__}: {error}"
            data = spawn_error_data(record, message)
            data.update(reason="machine_failed")
            self.host.deliver(flight, data, "machine_failed")
            return
        end = task.result()
        if end.kind == "stopped":  # stopped from outside this invoker: resumable
            return
        reason, data = end.event_data(record.id)
        self.host.deliver(flight, data, reason, suffix=end.state if reason is None else None)
