"""Runner: drives one Session from the store, one committed step at a time.

A runner owns its session through a lease (one owner at a time; a dead owner's lease
expires and the session can be taken over). Every step, whether a queued event or a due
timer, is committed in one store transaction: journal entry, snapshot, and the queued
event it consumed. A crash before the commit leaves the event in the queue and the
previous snapshot in place, so the step is redone once, never applied twice. Actions'
effects outside the context (files, processes) are at-least-once across a crash.

The session runs the spec text it was created with (kept in the store), so editing the
spec file does not change a running session behind its back: resuming with a changed
file is refused unless the caller asks to migrate.

Faults (docs/sessions.md): a step whose guard or action raises is rolled back and
journaled as an ``error`` entry (with the traceback); if the active states accept
``error.execution`` the engine sends it and the session goes on, otherwise the event is
buried in the session's dead letters, the session becomes ``failed`` and ``run`` returns
a ``failed`` outcome. A cancel request (runtime/engine/lifecycle.py) is seen within
0.1 s: the runner stops its child processes, journals ``cancelled`` and returns.

Invokes (docs/invoke.md): after each committed step the runner reconciles the session's
invocations with its active states (an invoke starts on entry, is cancelled on exit); an
invoke's done/error event is taken as the engine's own when it answers the state's
current invocation (or one of its fan-out's children, or that fan-out's ``.all``), and
journaled as ``dropped`` otherwise. A cancelled session's agents
are stopped (journaled ``cancelled``); a failed one's are stopped (``interrupted``).
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import threading
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from interlock.machines import SpecError, compile, ir_of
from interlock.machines.backends.base import CompiledMachine
from interlock.machines.bindings import Bindings
from interlock.machines.ir import INVOKE_DONE_PREFIX, INVOKE_ERROR_PREFIX
from interlock.runtime.config.dispatch import PollingConfiguration
from interlock.runtime.engine.async_bindings import LoopRef, bridge
from interlock.runtime.engine.clock import Clock, SystemClock
from interlock.runtime.engine.faults import (
    ERROR_EXECUTION,
    Fault,
    StepFault,
    UnhandledFault,
    guard_bindings,
)
from interlock.runtime.engine.invoke import InvokeNote, Invoker
from interlock.runtime.engine.invoke_handler import InvokeHandlers, missing_handlers
from interlock.runtime.engine.invoke_machine import MachineResolver
from interlock.runtime.engine.lifecycle import LEASE_TTL
from interlock.runtime.engine.session import (
    MAX_TIMER_STEPS,
    Session,
    SessionError,
    Step,
    copied,
)
from interlock.runtime.engine.session_files import folder_of
from interlock.runtime.engine.snapshot import Snapshot
from interlock.runtime.host.owners import default_owner, owner_is_dead
from interlock.runtime.store.base import (
    CancelRequest,
    DeadLetter,
    InvocationRecord,
    JournalEntry,
    Lease,
    LeaseStore,
    SessionNotFound,
    SessionRow,
    SessionStore,
    SpecSource,
    StaleSession,
    Store,
    StoreError,
)
from interlock.runtime.store.wakeup import on_session_bell

POLLED = "polled"  # raised by the runtime when nothing more waits for the configuration
MAX_POLLED_STEPS = 1_000  # polled steps in one pump (a checkpoint loop without a mailbox)
_INVOKE_EVENTS = (INVOKE_DONE_PREFIX + ".", INVOKE_ERROR_PREFIX + ".")
INBOX_POLL = 0.1  # seconds between inbox (and cancel) checks of a store with no wake-ups
WATCHED_POLL = 1.0  # ... of a store that wakes the runner (a backstop: missed wake-ups)
CHILD_GRACE = 0.5  # seconds between SIGTERM and SIGKILL for a cancelled runner's children


class SessionBusy(SessionError):
    """Another live runner owns the session."""


class SpecChanged(SessionError):
    """The spec file differs from the one the session was started with."""


class SessionGone(SessionError):
    """The session was removed (``interlock rm --force``) while this runner held it."""


class SessionClosed(SessionError):
    """The session was cancelled or has failed; a runner takes no more events for it."""


OutcomeKind = Literal["finished", "stopped", "failed", "cancelled", "removed"]


@dataclass(frozen=True, slots=True)
class RunOutcome:
    """How :meth:`Runner.run` ended.

    ``finished``: a top-level final state; ``stopped``: the ``stop`` event was set (Ctrl-C),
    the session stays resumable; ``failed``: a step raised and nothing handled
    ``error.execution`` (``failure`` says what); ``cancelled``: a cancel request
    (``reason``); ``removed``: the session was deleted under the runner (``reason``).
    """

    kind: OutcomeKind
    failure: UnhandledFault | None = None
    reason: str | None = None


def spec_digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def new_session_id(machine: str) -> str:
    return f"{machine}-{uuid.uuid4().hex[:8]}"


@dataclass(frozen=True, slots=True)
class Opened:
    """How a runner came to hold its session."""

    created: bool
    resumed_from_seq: int


class Runner:
    def __init__(self, store: Store, row: SessionRow, session: Session, lease: Lease,
                 clock: Clock, ttl: float = LEASE_TTL, loop_ref: LoopRef | None = None) -> None:
        self.store = store
        self.loop_ref = loop_ref or LoopRef()
        self.session_id = row.id
        self.spec_path = row.spec_path
        self.session = session
        self.lease = lease
        self.clock = clock
        self.ttl = ttl
        self.seq = row.seq
        self.active: tuple[str, ...] = session.active  # as of the last committed step
        self._committed: tuple[tuple[str, ...], dict[str, Any]] = (
            session.active, copied(session.context))  # what accepts() reads
        # Set by a signal feed: whether the session's mailbox was scanned, with nothing
        # for the session in it, since the commit of this seq (None: no mailbox).
        self.mailbox_clear: Callable[[int], bool] | None = None
        # Told of each committed step on the runner's loop, like run's on_step (a signal
        # feed that serves a child machine's session, which no host runs).
        self.step_listeners: list[Callable[[Step], None]] = []
        self._polled_in: tuple[str, ...] | None = None  # polled raised, configuration kept
        self._polled_off = -1  # the seq at which polled would fire no transition
        self.outcome: RunOutcome | None = None  # set once failed, cancelled or removed
        self._revive: list[DeadLetter] = []  # dead letters to retry before the queue
        self._cancel: CancelRequest | None = None  # seen while a step was under way
        self._commit_lock = threading.Lock()
        self._wake: asyncio.Event | None = None
        self._changed: asyncio.Event | None = None  # the store changed (see run)
        self._wake_loop: asyncio.AbstractEventLoop | None = None
        self.invoker: Invoker | None = None  # set when the spec has invoke: states
        self._invoke_notes: list[InvokeNote] = []  # from a stop, not journaled yet
        # A child machine's runner (an invoke's session, in its parent runner's process)
        # never signals the process's other children: they are its parent's and siblings'.
        self.owns_processes = True
        self._asked: CancelRequest | None = None  # Runner.cancel, for a child session

    # -- opening ----------------------------------------------------------------------

    @classmethod
    def open(
        cls,
        store: Store,
        spec_text: str | None,
        spec_path: str,
        *,
        session_id: str | None = None,
        bindings: Bindings | None = None,
        clock: Clock | None = None,
        context: Mapping[str, Any] | None = None,
        owner: str | None = None,
        ttl: float = LEASE_TTL,
        migrate: bool = False,
        retry: bool = False,
        folder: Path | None = None,
        invokers: InvokeHandlers | None = None,
        invoke_config: PollingConfiguration | None = None,
        machines: MachineResolver | None = None,
        child: bool = False,
    ) -> tuple[Runner, Opened]:
        """Create the session (when new) or resume it, holding its lease.

        ``spec_text`` is the spec file's current text; None resumes with the stored one.
        A changed spec is refused unless ``migrate``: then the session's saved state is
        restored into the new spec (every active and remembered state must still exist)
        and the switch is journaled as a ``migrated`` step.

        A ``failed`` session resumes (it becomes active again). Its dead letters stay
        where they are (kept for inspection) unless ``retry``: then they are delivered
        again, in order, before anything in the event queue. A cancelled session cannot be
        resumed (SessionClosed). UnhandledFault if a new session's initial entry raises
        (nothing is stored: there is no earlier state to keep).

        Invokes (docs/invoke.md): ``folder`` is the session folder (default
        ``.interlock/sessions/<id>`` beside a SQLite store, else under the working
        folder) where agents' output is spooled; ``invokers`` makes the handlers of ``agent:`` and
        ``command:`` invokes (:func:`interlock.runtime.agents.invoke.process_handlers`; a spec
        with such an invoke and no handler for its kind is a SessionError);
        ``invoke_config`` is their dispatch settings; ``machines`` resolves ``machine:``
        invokes (docs/invoke.md, child machines). The active states' invokes start (or, on
        resume, are adopted, restarted or failed) before this returns. ``child``: this is a
        child machine's session, run in its parent runner's process (it never signals the
        process's other children).
        """
        runner, opened = cls._open(store, spec_text, spec_path, session_id=session_id,
                                   bindings=bindings, clock=clock, context=context,
                                   owner=owner, ttl=ttl, migrate=migrate, retry=retry)
        runner.owns_processes = not child
        if runner.session.ir.invokes:
            try:
                missing = missing_handlers(runner.session.ir.invokes, invokers or {})
                if missing:
                    raise SessionError(
                        f"session {runner.session_id!r}: its spec has {' and '.join(missing)} "
                        f"invokes, but no handler for {' or '.join(missing)} invokes was given "
                        "(Runner.open(invokers=...): agents.invoke.process_handlers)")
                runner._start_invoker(folder, invokers, invoke_config, machines,
                                      resumed=not opened.created)
            except BaseException:
                runner.close()
                raise
        return runner, opened

    @classmethod
    def _open(
        cls,
        store: Store,
        spec_text: str | None,
        spec_path: str,
        *,
        session_id: str | None,
        bindings: Bindings | None,
        clock: Clock | None,
        context: Mapping[str, Any] | None,
        owner: str | None,
        ttl: float,
        migrate: bool,
        retry: bool,
    ) -> tuple[Runner, Opened]:
        clock = clock or SystemClock()
        owner = owner or default_owner()
        ref = LoopRef()
        bindings = bridge(bindings, ref) if bindings is not None else None
        existing = _get(store, session_id) if session_id else None
        if existing is None:
            if spec_text is None:
                raise SessionNotFound(f"no session {session_id!r} in {store.url}")
            return cls._create(store, spec_text, spec_path, session_id, bindings, clock,
                               context, owner, ttl, ref)
        if existing.status == "cancelled":
            raise SessionClosed(f"session {existing.id!r} was cancelled; it cannot be "
                                "resumed (start a new one)")
        changed = spec_text is not None and spec_digest(spec_text) != existing.spec_hash
        if changed and not migrate:
            raise SpecChanged(
                f"{spec_path} changed since session {existing.id!r} started; it keeps "
                "running the spec it started with: resume it without the spec "
                f"(`interlock resume {existing.id}`), move it to the new spec with "
                "--migrate, or start a new session"
            )
        lease = _acquire(store, existing.id, owner, ttl, clock)
        source = (SpecSource(spec_path, spec_text, spec_digest(spec_text))
                  if changed and spec_text is not None else None)
        text, path = (source.text, source.path) if source else (existing.spec_text,
                                                                existing.spec_path)
        compiled = _compile(text, path, bindings)
        try:
            session = Session.restore(compiled, clock, Snapshot.from_json(existing.snapshot))
        except SessionError as exc:
            store.release(lease)
            raise SessionError(f"cannot migrate session {existing.id!r}: {exc}") from None
        runner = cls(store, existing, session, lease, clock, ttl, ref)
        if source is not None:
            runner._commit([], kind="migrated", spec=source,
                           note=f"spec {existing.spec_hash[:12]} -> {source.digest[:12]}")
        letters = store.dead_letters(existing.id)
        note = f"owner {owner}"
        if existing.status == "failed":
            note += "; after a failure"
        if letters and retry:
            runner._revive = letters
            note += f"; dead letters: retried {len(letters)}"
        elif letters:
            note += f"; dead letters: skipped {len(letters)} (kept; resume with retry to "
            note += "deliver them)"
        runner._commit([], kind="resumed", note=note)
        return runner, Opened(False, existing.seq)

    @classmethod
    def _create(cls, store: Store, spec_text: str, spec_path: str, session_id: str | None,
                bindings: Bindings | None, clock: Clock, context: Mapping[str, Any] | None,
                owner: str, ttl: float, ref: LoopRef) -> tuple[Runner, Opened]:
        compiled = _compile(spec_text, spec_path, bindings)
        session_id = session_id or new_session_id(compiled.ir.name)
        try:
            session = Session.start(compiled, clock, context)
        except StepFault as exc:
            raise UnhandledFault(session_id, exc.fault) from None
        now = clock.now()
        row = SessionRow(
            id=session_id, spec_name=compiled.ir.name, spec_path=spec_path,
            spec_hash=spec_digest(spec_text), spec_text=spec_text,
            status=_status(session), seq=0, snapshot=session.snapshot().to_json(),
            created_at=now, updated_at=now,
        )
        store.create(row, JournalEntry(0, now, "created", after=session.active,
                                       note=f"owner {owner}"))
        lease = _acquire(store, session_id, owner, ttl, clock)
        return cls(store, row, session, lease, clock, ttl, ref), Opened(True, 0)

    # -- stepping ---------------------------------------------------------------------

    def pump(self) -> list[Step]:
        """One pass: dead letters being retried first, then the event queue in order; before
        each event, the timers already due fire (they are older news than the event being
        taken now). Stops early once the session failed or a cancel was seen."""
        self._keep_lease()
        steps: list[Step] = []
        while self._revive and self.outcome is None and self._cancel is None:
            steps += self._retry(self._revive.pop(0))
        steps += self._fire_due()
        for item in self.store.queued_events(self.session_id):
            if self.session.is_final or self.outcome is not None or self._cancel is not None:
                break
            steps += self._deliver("event", item.event, item.data, consumed=[item.id])
            steps += self._fire_due()
        for _ in range(MAX_POLLED_STEPS):
            raised = self._raise_polled()
            if not raised:
                break
            steps += raised
        return steps

    def _raise_polled(self) -> list[Step]:
        """Checkpoints advance by themselves: once the event queue is drained and the mailbox
        (when the session has one) was scanned after the last step and holds nothing the
        configuration accepts, ``polled`` is raised, once per configuration, if it would
        fire a transition now."""
        if self.session.is_final or self.outcome is not None or self._cancel is not None:
            return []
        active = self.session.active
        clear = self.mailbox_clear
        if self._polled_in == active or (clear is not None and not clear(self.seq)):
            return []
        if self._polled_off == self.seq or not self.session.enabled(POLLED):
            self._polled_off = self.seq  # not until the next commit changes the context
            return []
        if self.store.queued_events(self.session_id):
            return []  # events came in meanwhile: they go first (next pump)
        self._polled_in = active  # reset by a step that changes the configuration
        return self._deliver("event", POLLED, {}) + self._fire_due()

    def _retry(self, letter: DeadLetter) -> list[Step]:
        if letter.kind == "timer":
            timer = self.session.rearm(letter.event)
            note = (f"dead letter #{letter.id} retried: timer {letter.event} due now"
                    if timer else f"dead letter #{letter.id} dropped: timer {letter.event}'s"
                    " state is no longer active")
            self._commit([], kind="retried", note=note, revived=[letter.id])
            return self._fire_due()
        return self._deliver("event", letter.event, letter.data, revived=[letter.id])

    def _deliver(self, kind: str, event: str, data: Mapping[str, Any], *,
                 consumed: list[int] | None = None, revived: list[int] | None = None,
                 internal: bool = False) -> list[Step]:
        """Send one event and commit its step; a fault is handled by :meth:`_fault`.

        An invoke's done/error event from the invoker (its data names the invocation)
        goes in as the engine's own when it answers its state's current invocation;
        otherwise (the state was left meanwhile) it is committed as a ``dropped`` step.
        Any other sender's reserved name is rejected as in :meth:`Session.send`."""
        if self.outcome is not None:
            return []
        invoke_id = _invoke_of(event) if self.invoker is not None else None
        invocation = data.get("invocation")
        if invoke_id is None or invocation is None:
            invoke_id = None  # not the invoker's: an ordinary (external or internal) send
        else:
            invoker = self.invoker
            if invoker is None or not invoker.answers(invoke_id, str(invocation)):
                active = self.session.active
                step = Step("dropped", event, dict(data), active, active, self.clock.now(),
                            note=f"invocation {invocation!r} of invoke {invoke_id!r} is not "
                                 "current: its state was left")
                self._commit([step], consumed=consumed, revived=revived)
                self._ended(event, data, taken=False)
                return [step]
            internal = True
        try:
            step = self.session.send(event, data, internal=internal)
        except StepFault as exc:
            steps = self._fault(exc.fault, kind, event, data, consumed, revived)
            if invoke_id is not None and self.outcome is None:
                self._ended(event, data, taken=True)  # handled by error.execution
            return steps
        self._commit([step], consumed=consumed, revived=revived)
        if invoke_id is not None:
            self._ended(event, data, taken=True)
        return [step]

    def _ended(self, event: str, data: Mapping[str, Any], *, taken: bool) -> None:
        """Journal how an invoke's event ended its invocation; a fan-out may start its
        next children now (journaled too)."""
        invoker = self.invoker
        if invoker is not None:
            context = self.session.context if self.outcome is None else None
            self._journal(invoker.ended(event, data, taken, context))

    def _fire_due(self) -> list[Step]:
        steps: list[Step] = []
        while self.outcome is None and self._cancel is None:
            timer = self.session.due()
            if timer is None:
                break
            if len(steps) >= MAX_TIMER_STEPS:
                raise SessionError(f"more than {MAX_TIMER_STEPS} timers fired at once; "
                                   "a zero-delay `after` loop?")
            try:
                step = self.session.fire_one()
            except StepFault as exc:
                self.session.drop_timer(timer.event)  # it fired; it will not fire again
                steps += self._fault(exc.fault, "timer", timer.event, {}, None, None)
                continue
            assert step is not None
            self._commit([step])
            steps.append(step)
        return steps

    def _fault(self, fault: Fault, kind: str, event: str, data: Mapping[str, Any],
               consumed: list[int] | None, revived: list[int] | None) -> list[Step]:
        """After a rolled-back step: raise ``error.execution`` if the active states take it,
        else bury the event and fail the session. Returns an ``error`` step (what failed,
        in one line in its note) and the ``error.execution`` step when there is one."""
        now = self.clock.now()
        active = self.session.active
        shown = Step("error", event, fault.event_data(), active, active, now,
                     note=fault.describe())
        error = _error_entry(self.seq + 1, now, event, fault, active)
        if self._cancel is not None:  # the step broke because its children were stopped
            self._commit([], first=[error], note="the event stays queued: the session is "
                         "being cancelled")
            return [shown]
        if self.session.accepts(ERROR_EXECUTION):
            try:
                step = self.session.send(ERROR_EXECUTION, fault.event_data(), internal=True)
            except StepFault as again:  # the handler raised too: the session fails
                fault = again.fault
                error2 = _error_entry(self.seq + 1, now, ERROR_EXECUTION, fault, active)
                return [shown, *self._fail(fault, kind, event, data, [error, error2],
                                           consumed, revived)]
            self._commit([step], first=[error], consumed=consumed, revived=revived)
            return [shown, step]
        return [shown, *self._fail(fault, kind, event, data, [error], consumed, revived)]

    def _fail(self, fault: Fault, kind: str, event: str, data: Mapping[str, Any],
              errors: list[JournalEntry], consumed: list[int] | None,
              revived: list[int] | None) -> list[Step]:
        """Bury the event, mark the session ``failed``, let the lease go."""
        letter = DeadLetter(0, self.session_id, kind, event, dict(data), self.clock.now(),
                            fault.describe())
        self._stop_invoker("interrupted")  # a failed session runs no agents
        self._commit([], first=errors + self._take_invoke_notes(), consumed=consumed,
                     revived=revived, buried=[letter], status="failed")
        self.outcome = RunOutcome("failed", failure=UnhandledFault(self.session_id, fault))
        self.store.release(self.lease)
        return []

    def send(self, event: str, data: Mapping[str, Any] | None = None, *,
             internal: bool = False) -> Step:
        """Deliver one event directly (a live runner's own API); ``internal`` lets the
        engine's reserved names through (``done.invoke.<id>``...). Returns the step, or
        the ``error.execution`` step when a fault was handled; UnhandledFault once the
        session has failed here, SessionClosed once it was cancelled or removed."""
        self._raise_if_ended()
        self._keep_lease()
        steps = self._deliver("event", event, data or {}, internal=internal)
        self._raise_if_ended()
        return steps[-1]

    def _raise_if_ended(self) -> None:
        outcome = self.outcome
        if outcome is not None and outcome.failure is not None:
            raise outcome.failure
        if outcome is not None:
            raise SessionClosed(f"session {self.session_id!r} is {outcome.kind}; "
                                "it takes no more events here")

    def cancel(self, reason: str | None = None) -> None:
        """Cancel the session from the runner's own side (thread-safe): ``run`` stops its
        agents, journals ``cancelled`` and returns, as for a request in the store. A parent
        cancels a child machine's session this way when it leaves the invoking state."""
        self._asked = CancelRequest(reason, self.clock.now())
        self.wake()

    def wake(self) -> None:
        """Look at the event queue now instead of at the next poll (thread-safe; for a signal
        consumer that has just queued an event)."""
        loop, wake = self._wake_loop, self._wake
        if loop is not None and wake is not None:
            loop.call_soon_threadsafe(wake.set)

    def accepts(self, event: str, data: Mapping[str, Any] | None = None) -> bool:
        """Whether ``event`` (with ``data``) would fire a transition as of the last
        committed step: an active state listens for it, unguarded or with a guard that
        holds. Thread-safe: guards run on a copy of the committed context, so they must
        be pure (see :meth:`Session.enabled`)."""
        active, context = self._committed
        return self.session.enabled(event, data, configuration=active, context=context)

    async def run(self, stop: asyncio.Event | None = None, poll: float | None = None,
                  on_step: Callable[[Step], None] | None = None) -> RunOutcome:
        """Pump until the session is final, failed, cancelled or ``stop`` is set;
        ``on_step`` sees each step. Returns how it ended.

        Steps run in a worker thread, so that while an action works (a sub-agent for
        minutes), this loop keeps the lease renewed, hears ``stop``, looks for a cancel
        request and serves async bindings. A stop lets the step under way finish and
        commit first; a cancel stops the runner's child processes first, so that a step
        waiting on one ends. Idle, the runner waits for a wake-up: a signal or an
        invocation's end (:meth:`wake`), its doorbell in the store (an event queued or a
        cancel requested, by any process: :mod:`interlock.runtime.store.wakeup`), the
        next timer's deadline; it looks at the store every ``poll`` seconds besides
        (default ``WATCHED_POLL`` when the store has doorbells, else ``INBOX_POLL``).
        """
        stop = stop or asyncio.Event()
        loop = asyncio.get_running_loop()
        self.loop_ref.attach(loop)
        self._wake = asyncio.Event()
        self._changed = asyncio.Event()
        self._wake_loop = loop
        unwatch = on_session_bell(self.store, self.session_id, self._store_changed)
        if poll is None:
            poll = INBOX_POLL if unwatch is None else WATCHED_POLL
        renewer = asyncio.create_task(self._renew_until_cancelled())
        try:
            return await self._loop(stop, poll, on_step, renewer)
        except (SessionGone, SessionNotFound):  # any read of a deleted session
            await asyncio.to_thread(self._stop_invoker, "cancelled")
            self._invoke_notes.clear()  # nowhere to journal them
            await asyncio.to_thread(self._stop_children)
            self.outcome = RunOutcome("removed", reason=str(self._gone()))
            return self.outcome
        finally:
            if unwatch is not None:
                unwatch()
            renewer.cancel()
            with contextlib.suppress(asyncio.CancelledError, SessionBusy, SessionGone):
                await renewer

    def _store_changed(self) -> None:
        """The store may hold an event or a cancel request for this session (a hint)."""
        loop, wake, changed = self._wake_loop, self._wake, self._changed
        if loop is not None and wake is not None and changed is not None:
            with contextlib.suppress(RuntimeError):  # the loop closed meanwhile
                loop.call_soon_threadsafe(_set_both, wake, changed)

    async def _renew_until_cancelled(self) -> None:
        while True:
            await asyncio.sleep(self.ttl / 3)
            await asyncio.to_thread(self._keep_lease)

    async def _loop(self, stop: asyncio.Event, poll: float,
                    on_step: Callable[[Step], None] | None,
                    renewer: asyncio.Task[None]) -> RunOutcome:
        while not stop.is_set():
            if renewer.done():
                renewer.result()  # the lease was lost: raise SessionBusy (or SessionGone)
            for step in await self._pump_watching(poll):
                if on_step is not None:
                    on_step(step)
                for listener in self.step_listeners:
                    listener(step)
            if self.outcome is not None:
                return self.outcome
            if self._cancel is not None:  # seen by the pass (or asked meanwhile)
                return await asyncio.to_thread(self._cancel_now, self._cancel)
            if self.session.is_final:
                return RunOutcome("finished")
            wait = poll
            deadline = self.session.next_deadline()
            if deadline is not None:
                wait = max(0.0, min(wait, deadline - self.clock.now()))
            await self._idle(stop, wait)
        return RunOutcome("stopped")

    async def _pump_watching(self, poll: float) -> list[Step]:
        """:meth:`_pass` in a worker thread; meanwhile a cancel request stops the runner's
        child processes, so that a step waiting on one of them ends."""
        pumping = asyncio.ensure_future(asyncio.to_thread(self._pass))
        pumping.add_done_callback(_retrieved)  # its error is raised here, or not needed
        changed = self._changed
        assert changed is not None
        while True:
            changing = asyncio.ensure_future(changed.wait())
            try:
                await asyncio.wait([pumping, changing], timeout=poll,
                                   return_when=asyncio.FIRST_COMPLETED)
            finally:
                changing.cancel()
            changed.clear()
            if pumping.done():
                return pumping.result()
            if self._cancel is None:
                request = await asyncio.to_thread(self._cancel_request)
                if request is not None:
                    self._cancel = request
                    await asyncio.to_thread(self._stop_invoker, "cancelled")
                    await asyncio.to_thread(self._stop_children)

    def _pass(self) -> list[Step]:
        """:meth:`pump`, then, unless the session failed, a look for a cancel request, in
        the same worker thread (a hand-off to a thread costs about 0.1 ms of CPU; the
        loop made one for each, after every pass)."""
        steps = self.pump()
        if self._cancel is None and self.outcome is None:
            self._cancel = self._cancel_request()
        return steps

    def _stop_children(self) -> list[int]:
        """Stop every child process of this process, unless this runner shares it (a
        child machine's runner)."""
        if not self.owns_processes:
            return []
        from interlock.runtime.engine.children import stop_descendants  # psutil: when needed

        return stop_descendants(CHILD_GRACE)

    def _cancel_request(self) -> CancelRequest | None:
        if self._asked is not None:
            return self._asked
        try:
            return self.store.cancel_request(self.session_id)
        except SessionNotFound:
            raise self._gone() from None

    def _cancel_now(self, request: CancelRequest) -> RunOutcome:
        """Stop the invoked agents and the children, disarm the timers, journal
        ``cancelled``, let the lease go."""
        self._stop_invoker("cancelled")
        stopped = self._stop_children()
        disarmed = [t.event for t in self.session.timers]
        for event in disarmed:
            self.session.drop_timer(event)
        parts = [f"reason: {request.reason}" if request.reason else "no reason given"]
        if stopped:
            parts.append(f"stopped processes {', '.join(map(str, stopped))}")
        if disarmed:
            parts.append(f"timers disarmed: {', '.join(disarmed)}")
        self._commit([], first=self._take_invoke_notes(), kind="cancelled",
                     note="; ".join(parts), status="cancelled")
        self.store.release(self.lease)
        self.outcome = RunOutcome("cancelled", reason=request.reason)
        return self.outcome

    async def _idle(self, stop: asyncio.Event, seconds: float) -> None:
        """Wait until ``stop``, a :meth:`wake`, or ``seconds`` have passed."""
        wake = self._wake
        assert wake is not None
        waiters = [asyncio.ensure_future(stop.wait()), asyncio.ensure_future(wake.wait())]
        try:
            await asyncio.wait(waiters, timeout=seconds, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for waiter in waiters:
                waiter.cancel()
            wake.clear()

    def close(self, *, detach: bool = False) -> None:
        """Stop the agents still running (journaled ``interrupted``), give up the lease.
        A runner that lost its lease leaves the agents to the runner that took over, and so
        does one closed with ``detach`` (a child machine's, whose parent lost its lease)."""
        if self.invoker is not None:
            invoker, self.invoker = self.invoker, None
            ours = self.outcome is None and not detach and self._holds_lease()
            notes = invoker.shutdown(interrupt=ours)
            if ours:
                with contextlib.suppress(SessionError, StoreError):
                    self._journal(notes)
        self.store.release(self.lease)

    def _holds_lease(self) -> bool:
        try:
            holder = self.store.holder(self.session_id)
        except StoreError:  # gone (SessionNotFound) or unreachable: nobody else will
            return True     # stop its agents
        return holder is not None and (holder.owner, holder.token) == (self.lease.owner,
                                                                       self.lease.token)

    # -- invokes ----------------------------------------------------------------------

    def invocations_in_flight(self) -> list[InvocationRecord]:
        """The invoked agents running now (thread-safe); whether the session is idle is
        :meth:`working`'s to say (a fan-out may be between two children)."""
        invoker = self.invoker
        return invoker.in_flight() if invoker is not None else []

    def working(self) -> bool:
        """Whether the session waits on its invoked agents (thread-safe): one runs, or a
        fan-out has children still to come. False: idle as far as agents go."""
        invoker = self.invoker
        return invoker is not None and invoker.busy()

    def _start_invoker(self, folder: Path | None, invokers: InvokeHandlers | None,
                       config: PollingConfiguration | None, machines: MachineResolver | None,
                       *, resumed: bool) -> None:
        self.invoker = Invoker(
            self.store, self.session_id, self.session.ir, spec_path=self.spec_path,
            folder=folder or folder_of(self.store, self.session_id), clock=self.clock,
            wake=self.wake, config=config, handlers=invokers, machines=machines,
            owner=self.lease.owner)
        active, context = self.session.active, self.session.context
        self._journal(self.invoker.recover(active, context) if resumed
                      else self.invoker.reconcile(active, context))

    def _reconcile(self, entered: set[str] | None = None) -> None:
        """After a committed step: cancel the invokes of states left, start those of
        states entered (``entered``: the invoking states entered, so one left and entered
        again in the step restarts its invoke)."""
        invoker = self.invoker
        if invoker is not None and self.outcome is None:
            self._journal(invoker.reconcile(self.session.active, self.session.context,
                                            entered=entered))

    def _stop_invoker(self, kind: str) -> None:
        """Stop every invoked agent (journaled ``kind`` with the next commit); nothing
        starts afterwards. Safe from the event loop's side while a step runs."""
        invoker = self.invoker
        if invoker is not None:
            self._invoke_notes += invoker.shutdown(kind=kind)

    def _take_invoke_notes(self) -> list[JournalEntry]:
        notes, self._invoke_notes = self._invoke_notes, []
        return self._note_entries(notes)

    def _note_entries(self, notes: list[InvokeNote]) -> list[JournalEntry]:
        now, active = self.clock.now(), self.session.active
        return [JournalEntry(0, now, n.kind, None, {"invoke": n.invoke, **n.data}, active,
                             active, n.note) for n in notes]

    def _journal(self, notes: list[InvokeNote]) -> None:
        if notes:
            self._commit([], first=self._note_entries(notes))

    # -- persistence ------------------------------------------------------------------

    def _commit(self, steps: list[Step], *, first: list[JournalEntry] | None = None,
                consumed: list[int] | None = None, revived: list[int] | None = None,
                buried: list[DeadLetter] | None = None, kind: str | None = None,
                note: str | None = None, spec: SpecSource | None = None,
                status: str | None = None) -> None:
        """One store transaction: ``first`` entries, the steps, a ``kind`` note entry."""
        with self._commit_lock:
            seq = self.seq + 1
            now = self.clock.now()
            entries = [JournalEntry(seq, e.at, e.kind, e.event, e.data, e.before, e.after,
                                    e.note) for e in first or []]
            entries += [JournalEntry(seq, step.at, step.kind, step.event, dict(step.data),
                                     step.before, step.after, step.note) for step in steps]
            if kind is not None:
                active = self.session.active
                entries.append(JournalEntry(seq, now, kind, before=active, after=active,
                                            note=note))
            elif note is not None and entries:
                last = entries[-1]
                entries[-1] = JournalEntry(seq, last.at, last.kind, last.event, last.data,
                                           last.before, last.after,
                                           f"{last.note}; {note}" if last.note else note)
            try:
                self.seq = self.store.commit_step(
                    self.session_id, expected_seq=self.seq, lease_token=self.lease.token,
                    entries=entries, snapshot=self.session.snapshot().to_json(),
                    status=status or _status(self.session), consumed=consumed or [],
                    now=now, spec=spec, buried=buried, revived=revived,
                )
            except SessionNotFound:
                raise self._gone() from None
            except StaleSession as exc:
                raise SessionBusy(f"session {self.session_id!r} was taken over by another "
                                  f"runner; this one stops ({exc})") from None
            if self.session.active != self.active:
                self._polled_in = None
            self.active = self.session.active
            self._committed = (self.active, copied(self.session.context))
        entered = {sid for step in steps for sid in step.entered}
        if entered or any(step.before != step.after for step in steps):
            self._reconcile(entered)  # outside the commit lock: it may journal (commit)

    def _gone(self) -> SessionGone:
        return SessionGone(f"session {self.session_id!r} was removed while this runner "
                           "held it; the runner stops")

    def _keep_lease(self) -> None:
        now = self.clock.now()
        if self.lease.expires_at - now > self.ttl / 2:
            return
        renewed = self.store.renew(self.lease, self.ttl, now)
        if renewed is None:
            try:
                self.store.get(self.session_id)
            except SessionNotFound:
                raise self._gone() from None
            raise SessionBusy(f"lost the lease on session {self.session_id!r}")
        self.lease = renewed


def _retrieved(future: asyncio.Future[Any]) -> None:
    """Mark a future's exception as seen (a step under way when the session went)."""
    if not future.cancelled():
        future.exception()


def _set_both(wake: asyncio.Event, changed: asyncio.Event) -> None:
    wake.set()
    changed.set()


def _error_entry(seq: int, at: float, event: str, fault: Fault,
                 active: tuple[str, ...]) -> JournalEntry:
    """The journal line of a fault: its one-line description, the traceback in data."""
    return JournalEntry(seq, at, "error", event, fault.journal_data(), active, active,
                        fault.describe())


def _get(store: SessionStore, session_id: str) -> SessionRow | None:
    try:
        return store.get(session_id)
    except SessionNotFound:
        return None


def _acquire(store: LeaseStore, session_id: str, owner: str, ttl: float, clock: Clock
             ) -> Lease:
    lease = store.acquire(session_id, owner, ttl, clock.now())
    if lease is None:
        # A runner killed on this host cannot renew; waiting out its lease would stall a
        # crash recovery for nothing. Take over from it (still fenced by the token).
        current = store.holder(session_id)
        if current is not None and owner_is_dead(current.owner):
            lease = store.acquire(session_id, owner, ttl, clock.now(), take_from=current.owner)
    if lease is None:
        raise SessionBusy(f"session {session_id!r} is being run by another runner; a "
                          "session has one runner at a time (its lease expires "
                          f"{ttl:g}s after that runner stops renewing it)")
    return lease


def _compile(spec_text: str, spec_path: str, bindings: Bindings | None) -> CompiledMachine:
    try:
        ir = ir_of(spec_text, spec_path)
        guarded = guard_bindings(bindings, ir) if bindings is not None else None
        return compile(ir, bindings=guarded)
    except SpecError:
        raise
    except ValueError as exc:
        raise SessionError(str(exc)) from None


def _invoke_of(event: str) -> str | None:
    """The invoke id of a ``done.invoke.<id>`` / ``error.invoke.<id>`` event (a child
    machine's done event adds its final state: ``done.invoke.<id>.<final>``)."""
    prefix = next((p for p in _INVOKE_EVENTS if event.startswith(p)), None)
    return event[len(prefix):].split(".", 1)[0] if prefix is not None else None


def _status(session: Session) -> str:
    """The stored status after a step that did not fail or cancel."""
    return "finished" if session.is_final else "active"
