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

``agent:`` invokes go through an :data:`AgentResolver` the caller passes in (the seam to
``runtime/agents``); ``command:`` invokes need none. ``machine:`` invokes run a child
session through a :data:`~interlock.runtime.engine.invoke_machine.MachineResolver`
(:mod:`interlock.runtime.engine.invoke_machine`).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import threading
import time
import uuid
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from interlock.machines.durations import parse_duration
from interlock.machines.ir import InvokeIR, MachineIR, OnResume
from interlock.runtime.agents.base import FAILURE_REASONS, AgentLaunch, AgentOutput, Usage
from interlock.runtime.agents.prompts import PromptError, render_input, render_prompt
from interlock.runtime.dispatch.config import PollingConfiguration
from interlock.runtime.dispatch.polling import Dispatch
from interlock.runtime.dispatch.process import SpawnOptions
from interlock.runtime.dispatch.result import DispatchResult
from interlock.runtime.dispatch.types import AgentCommand
from interlock.runtime.engine.clock import Clock
from interlock.runtime.engine.invoke_machine import (
    MACHINE_ARGV,
    ChildEnd,
    ChildRun,
    ChildSetup,
    MachineError,
    MachineRequest,
    MachineResolver,
    child_session_id,
    is_machine,
)
from interlock.runtime.engine.invoke_process import (
    Spool,
    SpooledAgent,
    SpooledDriver,
    find_unnoted,
    spooled_dispatch,
    stop_group,
)
from interlock.runtime.host.owners import default_owner
from interlock.runtime.store.base import (
    InvocationRecord,
    JournalEntry,
    SessionNotFound,
    StaleSession,
    Store,
)

REASONS = ("spawn_error", "exit_nonzero", "timeout", "invalid_answer", "runner_lost",
           "machine_failed", "machine_cancelled", "agent_error", *FAILURE_REASONS)
CHILD_WAIT = 60.0  # longest wait for a child machine's runner to stop after a cancel
START_WAIT = 10.0  # longest wait for an agent's process to be started and recorded


# An adapter's read: (stdout, stderr) -> the answer, usage and the CLI's reported error.
Reader = Callable[[str, str], AgentOutput]


@dataclass(frozen=True, slots=True)
class ResolvedAgent:
    """What an ``agent:`` invoke runs: the launch, how to read its stdout into the
    answer text and usage (an adapter's ``read``; None: stdout is the answer), the
    agent's own dispatch settings (None: the invoker's), and how to continue one of its
    CLI's conversations instead (``resume(session, text)``; None: it cannot)."""

    launch: AgentLaunch
    read: Reader | None = None
    config: PollingConfiguration | None = None
    resume: Callable[[str, str], AgentLaunch | None] | None = None


# (agent name from interlock.yaml, rendered prompt) -> what to run. Connected to
# runtime/agents as: config = resolve_agent(name, load_agents(path)); adapter =
# adapter_for(config); ResolvedAgent(adapter.launch(config, prompt), adapter.read,
# polling_for(config, base)).
AgentResolver = Callable[[str, str], ResolvedAgent]


class InvokeError(Exception):
    """An invoke cannot be started as written (a template error, an unknown agent)."""


@dataclass(frozen=True, slots=True)
class InvokeNote:
    """A journal line the runner writes for the invoker: ``kind`` is one of invoked,
    adopted, restarted, cancelled, interrupted, dropped, lost."""

    kind: str
    invoke: str
    data: Mapping[str, Any]
    note: str | None = None


@dataclass
class _Flight:
    record: InvocationRecord
    invoke: InvokeIR
    task: asyncio.Future[Any] | None = None  # DispatchResult, or a child's ChildEnd
    dispatch: Dispatch | None = None
    driver: SpooledDriver | None = None
    child: ChildRun | None = None  # a machine invoke's child session
    finished: bool = False
    started: threading.Event = field(default_factory=threading.Event)


class Invoker:
    """The invocations of one session (see the module docstring). Thread-safe entry
    points: :meth:`reconcile`, :meth:`recover`, :meth:`current`, :meth:`in_flight`,
    :meth:`shutdown`."""

    def __init__(self, store: Store, session_id: str, ir: MachineIR, *, spec_path: str,
                 folder: Path, clock: Clock, wake: Callable[[], None],
                 config: PollingConfiguration | None = None,
                 resolver: AgentResolver | None = None,
                 machines: MachineResolver | None = None,
                 owner: str | None = None) -> None:
        self.store = store
        self.session_id = session_id
        self.ir = ir
        self.spec_dir = Path(spec_path).parent
        self.folder = folder / "invocations"
        self.clock = clock
        self.wake = wake
        self.config = config or PollingConfiguration()
        self.resolver = resolver
        self.machines = machines
        self.spec_path = spec_path
        self._children = ChildSetup(store, clock, owner or default_owner(), resolver,
                                    machines, config)
        self._flights: dict[str, _Flight] = {}  # invoke id -> the current invocation
        self._lock = threading.RLock()  # reconcile/recover/shutdown, one at a time
        self._settling = threading.Lock()  # a flight's finished flag
        self._closed = False  # set by shutdown(): nothing starts any more
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever,
                                        name=f"invoke-{session_id}", daemon=True)
        self._thread.start()

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
                        self._flights[record.invoke] = _Flight(record, invoke, finished=True)
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
        if mode is OnResume.ADOPT and is_machine(record):
            flight = _Flight(record, invoke)
            self._flights[invoke.id] = flight
            self._launch_child(flight, context)
            return [self._note("adopted", record,
                               f"child session {child_session_id(self.session_id, record.spool)}")]
        if mode is OnResume.ADOPT and not is_machine(record) and record.pid is None \
                and (found := find_unnoted(record.id)) is not None:
            # the runner died between starting the agent and noting its pid: note it now
            self.store.invocation_started(record.id, found[0], found[0], found[1])
            record = dataclasses.replace(record, pid=found[0], pgid=found[0],
                                         start_ticks=found[1])
        if mode is OnResume.ADOPT and record.pid is not None and record.start_ticks:
            flight = _Flight(record, invoke)
            self._flights[invoke.id] = flight
            try:
                _, read, config = self._command(invoke, context)
            except InvokeError:
                read, config = None, None
            self._launch(flight, None, context, read=read, config=config,
                         adopt=(record.pid, record.start_ticks))
            return [self._note("adopted", record, f"pid {record.pid}")]
        self._stop_left(record, "its runner died (on_resume: "
                        f"{'fail' if mode is OnResume.FAIL else 'restart'})")
        if mode is OnResume.FAIL:
            self.store.end_invocation(record.id, "lost", "runner_lost", now)
            self._flights[invoke.id] = _Flight(record, invoke, finished=True)
            self._deliver(record, invoke, _lost_data(record), "runner_lost")
            return [self._note("lost", record, "on_resume: fail")]
        self.store.end_invocation(record.id, "lost", "runner_lost", now)
        return [self._note("lost", record, "on_resume: restart"),
                self._start(invoke, context, kind="restarted")]

    def _stop_left(self, record: InvocationRecord, why: str) -> None:
        """Stop what a dead runner left of an invocation: its agent's process group, or
        its child machine's session (cancelled, with that session's own invocations)."""
        if is_machine(record):
            _cancel_child(self.store, child_session_id(self.session_id, record.spool),
                          why, self.clock.now(), self.config.terminate_grace)
            return
        stop_group(record.pid, record.start_ticks, record.id, self.config.terminate_grace,
                   time.sleep)

    def _invoke(self, invoke_id: str) -> InvokeIR | None:
        return next((i for i in self.ir.invokes if i.id == invoke_id), None)

    # -- starting ---------------------------------------------------------------------

    def _start(self, invoke: InvokeIR, context: Mapping[str, Any],
               kind: str = "invoked") -> InvokeNote:
        invocation_id = uuid.uuid4().hex
        seq = len(self.store.invocations(self.session_id)) + 1
        spool = self.folder / f"{seq:04d}-{invoke.id}"
        if invoke.machine is not None:
            return self._start_machine(invoke, context, kind, invocation_id, spool)
        try:
            command, read, config = self._command(invoke, context)
            argv = command.argv
            error = None
        except InvokeError as exc:
            command, read, config, argv, error = None, None, None, (), str(exc)
        record = InvocationRecord(
            id=invocation_id, session_id=self.session_id, invoke=invoke.id, state=invoke.state,
            argv=argv, spool=str(spool), started_at=self.clock.now())
        self.store.record_invocation(record)
        flight = _Flight(record, invoke)
        self._flights[invoke.id] = flight
        if command is None:
            self._spawn_failed(flight, error or "")
            return self._note(kind, record, f"spawn_error: {error}")
        self._launch(flight, command, context, read=read, config=config)
        flight.started.wait(START_WAIT)
        return self._note(kind, flight.record)

    # -- child machines ---------------------------------------------------------------

    def _start_machine(self, invoke: InvokeIR, context: Mapping[str, Any], kind: str,
                       invocation_id: str, spool: Path) -> InvokeNote:
        assert invoke.machine is not None
        record = InvocationRecord(
            id=invocation_id, session_id=self.session_id, invoke=invoke.id,
            state=invoke.state, argv=(MACHINE_ARGV, invoke.machine), spool=str(spool),
            started_at=self.clock.now())
        self.store.record_invocation(record)
        flight = _Flight(record, invoke)
        self._flights[invoke.id] = flight
        error = self._launch_child(flight, context)
        if error is not None:
            return self._note(kind, record, f"spawn_error: {error}")
        flight.started.wait(START_WAIT)
        return self._note(kind, record,
                          f"child session {child_session_id(self.session_id, str(spool))}")

    def _launch_child(self, flight: _Flight, context: Mapping[str, Any]) -> str | None:
        """Run (create, or resume) the flight's child session on the invoker's loop; the
        error when it cannot start (delivered as ``spawn_error``)."""
        record, invoke = flight.record, flight.invoke
        try:
            if self.machines is None:
                raise MachineError(f"no machine resolver for machine {invoke.machine!r}")
            child = self.machines(MachineRequest(
                str(invoke.machine), self.spec_path,
                child_session_id(self.session_id, record.spool), Path(record.spool)))
            input_context = render_input(invoke.input, context=context)
        except (MachineError, PromptError) as exc:
            message = f"invoke {invoke.id!r}: machine {invoke.machine!r}: {exc}"
            self._spawn_failed(flight, message)
            return message
        timeout = self._timeout(invoke, context)
        if timeout is not None:
            timeout -= max(0.0, self.clock.now() - record.started_at)
        run = ChildRun(self._children, child, child_session_id(self.session_id, record.spool),
                       Path(record.spool), input_context, timeout,
                       on_open=flight.started.set)
        flight.child = run

        def schedule() -> None:
            task = self._loop.create_task(run.run())
            flight.task = task
            task.add_done_callback(lambda t: self._child_finished(flight, t))

        self._loop.call_soon_threadsafe(schedule)
        return None

    def _spawn_failed(self, flight: _Flight, message: str) -> None:
        """The invocation could not start: its row ends, ``error.invoke`` (spawn_error)."""
        flight.finished = True
        self.store.end_invocation(flight.record.id, "error", "spawn_error", self.clock.now())
        self._deliver(flight.record, flight.invoke, _spawn_error_data(flight.record, message),
                      "spawn_error")

    def _child_finished(self, flight: _Flight, task: asyncio.Future[ChildEnd]) -> None:
        """On the invoker's loop: report how the child ended, unless a cancel came first."""
        flight.started.set()
        if task.cancelled() or not self._settle(flight):
            return
        error = task.exception()
        record = flight.record
        if error is not None:
            message = f"child machine {flight.invoke.machine!r}: {type(error).__name__}: {error}"
            data = _spawn_error_data(record, message)
            data.update(reason="machine_failed")
            self._deliver(record, flight.invoke, data, "machine_failed")
            return
        end = task.result()
        if end.kind == "stopped":  # stopped from outside this invoker: resumable
            return
        reason, data = end.event_data(record.id)
        self._deliver(record, flight.invoke, data, reason,
                      suffix=end.state if reason is None else None)

    def _command(self, invoke: InvokeIR, context: Mapping[str, Any]
                 ) -> tuple[AgentCommand, Reader | None,
                            PollingConfiguration | None]:
        template: str | Path | None = invoke.prompt
        if template is None and invoke.prompt_file is not None:
            template = self.spec_dir / invoke.prompt_file
        try:
            prompt = None if template is None else render_prompt(
                template, context=context, input=invoke.input)
        except PromptError as exc:
            raise InvokeError(f"invoke {invoke.id!r} prompt: {exc}") from None
        if invoke.command is not None:
            argv = tuple(_templated(item, context, f"invoke {invoke.id!r} command")
                         for item in invoke.command)
            return AgentCommand(argv, prompt, invoke.id), None, None
        if self.resolver is None or invoke.agent is None:
            raise InvokeError(f"invoke {invoke.id!r}: no agent resolver for agent "
                              f"{invoke.agent!r}")
        name = _templated(invoke.agent, context, f"invoke {invoke.id!r} agent")
        try:
            resolved = self.resolver(name, prompt or "")
        except Exception as exc:
            raise InvokeError(f"invoke {invoke.id!r}: agent {name!r}: {exc}") from None
        launch = resolved.launch
        if invoke.continue_ is not None and resolved.resume is not None:
            text = _templated(invoke.continue_, context, f"invoke {invoke.id!r} continue")
            session = self._conversation(invoke.id, resolved.read) if text.strip() else None
            if session is not None:
                launch = resolved.resume(session, text) or launch
        options = SpawnOptions(cwd=Path(launch.cwd) if launch.cwd else None,
                               env=dict(launch.env) or None)
        return (AgentCommand(launch.argv, launch.stdin, invoke.id, options), resolved.read,
                resolved.config)

    def _conversation(self, invoke_id: str, read: Reader | None) -> str | None:
        """The CLI conversation the invoke's previous call in this session ran in (its
        spooled output read by the agent's adapter), or None."""
        earlier = [r for r in self.store.invocations(self.session_id) if r.invoke == invoke_id]
        if not earlier or read is None:
            return None
        spool = Spool(Path(earlier[-1].spool))
        try:
            stdout = spool.stdout.read_text(encoding="utf-8", errors="replace")
            stderr = spool.stderr.read_text(encoding="utf-8", errors="replace")
        except OSError:
            return None
        return read(stdout, stderr).session

    def _timeout(self, invoke: InvokeIR, context: Mapping[str, Any]) -> float | None:
        delay = invoke.timeout
        if delay is None:
            return None
        if delay.seconds is not None:
            return delay.seconds
        value = context.get(delay.context_key or "")
        if value is None or isinstance(value, bool):
            return None  # the dispatch settings decide
        try:
            return parse_duration(value)
        except (ValueError, TypeError):
            return None

    def _launch(self, flight: _Flight, command: AgentCommand | None,
                context: Mapping[str, Any], *,
                read: Reader | None = None,
                config: PollingConfiguration | None = None,
                adopt: tuple[int, str] | None = None) -> None:
        record = flight.record
        timeout = self._timeout(flight.invoke, context)
        if timeout is not None:
            timeout -= max(0.0, self.clock.now() - record.started_at)
        command = command or AgentCommand(record.argv, None, record.invoke)

        def started(agent: SpooledAgent) -> None:
            if adopt is None and agent.ticks is not None:
                self.store.invocation_started(record.id, agent.pid, agent.pgid, agent.ticks)
                flight.record = _with_process(record, agent)
            flight.started.set()

        dispatch, flight.driver = spooled_dispatch(
            command, config or self.config, spool=Spool(Path(record.spool)),
            invocation_id=record.id,
            adopt=adopt, timeout=timeout, on_started=started,
            read=(lambda text: read(text, "").answer) if read is not None else None)
        flight.dispatch = dispatch

        def schedule() -> None:
            task = self._loop.create_task(dispatch.run())
            flight.task = task
            task.add_done_callback(lambda t: self._finished(flight, t, read))

        self._loop.call_soon_threadsafe(schedule)

    # -- finishing --------------------------------------------------------------------

    def _finished(self, flight: _Flight, task: asyncio.Future[DispatchResult],
                  read: Reader | None) -> None:
        """On the invoker's loop: deliver the outcome, unless a cancel came first."""
        flight.started.set()
        if task.cancelled() or not self._settle(flight):
            return
        # The outcome is written to the invocations table by the runner as it takes the
        # event (Runner.pump -> ended), so this thread does not compete with it for the
        # store between the offer and the step; recover() settles one taken by nobody.
        error = task.exception()
        if error is not None:
            data = _spawn_error_data(flight.record, f"{type(error).__name__}: {error}")
            self._deliver(flight.record, flight.invoke, data, "spawn_error")
            return
        assert flight.dispatch is not None
        data, reason = outcome(task.result(), flight.dispatch, read, flight.record.id)
        self._deliver(flight.record, flight.invoke, data, reason)

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

    def _settle(self, flight: _Flight) -> bool:
        """Mark the flight finished; False if it already was (its cancel or its outcome
        won). The lock is never held while waiting for anything."""
        with self._settling:
            if flight.finished:
                return False
            flight.finished = True
            return True

    def _deliver(self, record: InvocationRecord, invoke: InvokeIR, data: dict[str, Any],
                 reason: str | None, suffix: str | None = None) -> None:
        event = invoke.done_event if reason is None else invoke.error_event
        if suffix:  # a child machine's final state: done.invoke.<id>.<final>
            event = f"{event}.{suffix}"
        self.store.offer(self.session_id, event, data, self.clock.now(), key=record.id)
        self.wake()

    # -- stopping ---------------------------------------------------------------------

    def _cancel(self, flight: _Flight, outcome_kind: str, *,
                deferred: bool = False) -> list[InvokeNote]:
        """Stop the flight's agent (TERM -> KILL, waiting until its group is gone); with
        ``outcome_kind`` "detached", only stop following it (nothing is written).
        ``deferred``: write the outcome off the caller's path (a step's reconcile)."""
        if not self._settle(flight):
            return []
        if flight.child is not None:
            return self._cancel_child(flight, outcome_kind, deferred=deferred)
        if outcome_kind == "detached" and flight.driver is not None:
            flight.driver.detached = True

        async def stop() -> None:
            task = flight.task
            if task is None:
                return
            task.cancel()
            with contextlib.suppress(BaseException):
                await task

        def submit() -> None:
            asyncio.run_coroutine_threadsafe(stop(), self._loop).result(timeout=30)

        flight.started.wait(START_WAIT)
        submit()
        record_id, now = flight.record.id, self.clock.now()
        if outcome_kind == "detached":
            return []
        if deferred:
            # Off the step's path: if this is lost in a crash, recover() finds the row of a
            # state no longer active and writes the same outcome.
            self._loop.call_soon_threadsafe(self.store.end_invocation, record_id,
                                            outcome_kind, None, now)
        else:
            self.store.end_invocation(record_id, outcome_kind, None, now)
        return [self._note(outcome_kind, flight.record)]

    def _cancel_child(self, flight: _Flight, outcome_kind: str, *,
                      deferred: bool) -> list[InvokeNote]:
        """End a child machine's flight: ``cancelled`` cancels its session; ``interrupted``
        and ``detached`` only stop its runner, leaving the session and the invocation in
        flight for a resumed parent to adopt."""
        child = flight.child
        assert child is not None
        flight.started.wait(START_WAIT)
        if outcome_kind == "cancelled":
            child.cancel(f"the parent session {self.session_id} left state "
                         f"{flight.record.state!r}")
        else:
            child.stop(detach=outcome_kind == "detached")

        async def wait() -> None:
            task = flight.task
            if task is not None:
                await asyncio.wait([task])

        with contextlib.suppress(TimeoutError, RuntimeError):
            asyncio.run_coroutine_threadsafe(wait(), self._loop).result(timeout=CHILD_WAIT)
        if outcome_kind == "detached":
            return []
        if outcome_kind != "cancelled":
            return [self._note(outcome_kind, flight.record,
                               f"child session {child.session_id} stopped; resumable")]
        record_id, now = flight.record.id, self.clock.now()
        if deferred:
            self._loop.call_soon_threadsafe(self.store.end_invocation, record_id,
                                            outcome_kind, None, now)
        else:
            self.store.end_invocation(record_id, outcome_kind, None, now)
        return [self._note(outcome_kind, flight.record, f"child session {child.session_id}")]

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


def _templated(text: str, context: Mapping[str, Any], what: str) -> str:
    """An agent name or an argv item: a Jinja2 template over ``context`` when it holds
    ``{{``, else the text itself. Raises :class:`InvokeError`."""
    if "{{" not in text and "{%" not in text:
        return text
    try:
        return str(render_input({"value": text}, context=context)["value"])
    except PromptError as exc:
        raise InvokeError(f"{what}: {exc}") from None


def stop_invocations(store: Store, session_id: str, *, at: float, grace: float = 5.0,
                     outcome_kind: str = "cancelled") -> list[InvocationRecord]:
    """Stop every agent a session's dead runner left in flight (pid + start time or
    INTERLOCK_DISPATCH_ID checked first; TERM, KILL after ``grace``) and end its row with
    ``outcome_kind``: for cancelling or removing a session that no runner holds. Returns
    the rows it ended. Never call it while a live runner holds the session."""
    ended: list[InvocationRecord] = []
    for record in store.invocations(session_id, in_flight=True):
        if is_machine(record):
            _cancel_child(store, child_session_id(session_id, record.spool),
                          f"its parent session {session_id} was stopped", at, grace)
        else:
            stop_group(record.pid, record.start_ticks, record.id, grace, time.sleep)
        if store.end_invocation(record.id, outcome_kind, None, at):
            ended.append(record)
    return ended


def cancel_offline(store: Store, session_id: str, reason: str | None, at: float, *,
                   ttl: float = 30.0, grace: float = 5.0, was: str | None = None) -> bool:
    """Cancel a session no live runner holds (its dead runner's lease is taken over): its
    invocations are stopped first (:func:`stop_invocations`, child machines included),
    then ``cancelled`` is journaled with the reason (and the status it ``was``). False when
    a live runner holds it or it is over already (nothing is done); StaleSession when it
    changed meanwhile."""
    from interlock.runtime.host.owners import owner_is_dead

    holder = store.holder(session_id)
    dead = holder.owner if holder is not None and owner_is_dead(holder.owner) else None
    lease = store.acquire(session_id, default_owner("cancel"), ttl, at, take_from=dead)
    if lease is None:
        return False
    try:
        row = store.get(session_id)
        if row.status in ("finished", "cancelled"):
            return False
        active = tuple(row.snapshot.get("configuration") or ())
        note = f"reason: {reason}" if reason else "no reason given"
        stopped = stop_invocations(store, session_id, at=at, grace=grace)
        if stopped:
            note += f"; invocations stopped: {', '.join(r.id for r in stopped)}"
        if was is not None:
            note += f"; was {was}"
        store.commit_step(
            session_id, expected_seq=row.seq, lease_token=lease.token,
            entries=[JournalEntry(row.seq + 1, at, "cancelled", before=active, after=active,
                                  note=note)],
            snapshot=row.snapshot, status="cancelled", consumed=[], now=at)
        return True
    finally:
        store.release(lease)


def _cancel_child(store: Store, session_id: str, reason: str, at: float,
                  grace: float) -> None:
    """Cancel a child machine's session that its parent's dead runner left (nothing when
    it is gone, over, or held by a live runner)."""
    with contextlib.suppress(SessionNotFound, StaleSession):
        cancel_offline(store, session_id, reason, at, grace=grace)


def child_sessions(store: Store, session_id: str) -> list[str]:
    """The ids of the child machine sessions a session invoked (that still exist)."""
    found = []
    for record in store.invocations(session_id):
        if is_machine(record):
            child = child_session_id(session_id, record.spool)
            try:
                store.get(child)
            except SessionNotFound:
                continue
            found.append(child)
    return found


def _with_process(record: InvocationRecord, agent: SpooledAgent) -> InvocationRecord:
    return dataclasses.replace(record, pid=agent.pid, pgid=agent.pgid, start_ticks=agent.ticks)


def _base_data(record: InvocationRecord, result: dict[str, Any],
               answer: Any = None, verdict: Any = None, usage: Usage | None = None
               ) -> dict[str, Any]:
    return {"result": result, "answer": answer, "verdict": verdict,
            "usage": (usage or Usage()).to_json(), "invocation": record.id}


def _empty_result(status: str, method: str | None, stderr: str) -> dict[str, Any]:
    return {"success": False, "stdout": "", "stderr": stderr, "exitCode": None,
            "elapsedTime": 0.0, "pollCount": 0, "status": status,
            "completionMethod": method, "verdict": None}


def _spawn_error_data(record: InvocationRecord, message: str) -> dict[str, Any]:
    data = _base_data(record, _empty_result("error", "spawn", f"interlock: {message}\n"))
    return {**data, "reason": "spawn_error", "message": message}


def _lost_data(record: InvocationRecord) -> dict[str, Any]:
    message = "the runner died while the agent ran (on_resume: fail)"
    data = _base_data(record, _empty_result("error", None, f"interlock: {message}\n"))
    return {**data, "reason": "runner_lost", "message": message}


def outcome(result: DispatchResult, dispatch: Dispatch, read: Reader | None,
            invocation_id: str) -> tuple[dict[str, Any], str | None]:
    """The event data of a finished dispatch and its failure reason (None: done). Where
    the CLI said what went wrong (its adapter's reading), its words are the message and
    its reason (``auth``, ``rate_limited``, ...) the reason; tool calls it refused are
    listed as ``denials``."""
    polling = result.polling
    json = polling.to_json()
    check = dispatch.check()
    output = read(polling.stdout, polling.stderr) if read is not None else None
    usage = output.usage if output is not None else Usage()
    answer = check.document if check.complete else None
    data: dict[str, Any] = {"result": json, "answer": answer, "verdict": json["verdict"],
                            "usage": usage.to_json(), "invocation": invocation_id}
    if output is not None and output.denials:
        data["denials"] = list(output.denials)
    said = output.error if output is not None else None
    reason: str | None = None
    message: str | None = None
    if polling.status == "timeout":
        reason, message = "timeout", f"no answer within the timeout ({polling.completion_method})"
    elif polling.status == "error":
        if polling.completion_method == "spawn":
            reason, message = "spawn_error", result.error or "the agent could not be started"
        else:
            reason = (output.reason if output is not None else None) or "exit_nonzero"
            message = said or _exit_message(polling.exit_code, polling.stderr)
    elif said is not None:  # the CLI reported a failure, yet exited 0
        reason = (output.reason if output is not None else None) or "agent_error"
        message = said
    elif answer is None and dispatch.answer_text().strip():
        reason, message = "invalid_answer", f"the answer is not a complete document: {check.reason}"
    if reason is not None:
        data["result"] = {**json, "success": False}
        data["reason"] = reason
        data["message"] = message
    return data, reason


def _exit_message(code: int | None, stderr: str) -> str:
    """``the agent exited with N``, and the last line it wrote on stderr."""
    tail = [line.strip() for line in stderr.splitlines() if line.strip()]
    return f"the agent exited with {code}" + (f": {tail[-1]}" if tail else "")
