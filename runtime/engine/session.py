"""Session: one running instance of a compiled spec, with its context and armed timers.

The core is synchronous and deterministic: ``send`` runs one event to completion,
``fire_due`` sends the timer events whose deadlines have passed on the session's clock,
and ``snapshot``/``restore`` round-trip everything a restart needs. Restoring never runs
an entry action; timers come back with their absolute deadlines, so one that fell due
while nothing ran fires once, on the first ``fire_due``. Persisting steps and waiting
for events and deadlines is the runner's job (``runtime/engine/runner.py``).
"""

from __future__ import annotations

import copy
import pickle
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, cast

from interlock.machines.backends.base import CompiledMachine, DurableInstance, MachineState
from interlock.machines.bindings import Call
from interlock.machines.durations import parse_duration
from interlock.machines.events import descriptor_matches, reserved_reason
from interlock.machines.ir import TransitionIR, TransitionKind
from interlock.runtime.engine.clock import Clock
from interlock.runtime.engine.errors import SessionError
from interlock.runtime.engine.faults import StepFault, fault_of
from interlock.runtime.engine.snapshot import Snapshot, Timer

__all__ = ["MAX_TIMER_STEPS", "Session", "SessionError", "Step", "StepFault"]

# Timers firing within one fire_due call; more means a zero-delay timer loop.
MAX_TIMER_STEPS = 10_000


def copied(context: Mapping[str, Any]) -> dict[str, Any]:
    """A deep copy of a session context, by pickle's round trip: like ``copy.deepcopy``
    for the JSON data a context holds, several times faster (a step copies its context
    two or three times: to roll back, for guards, as committed).

    >>> context = {"tasks": [{"id": "T1"}], "pair": (1, 2)}
    >>> twin = copied(context)
    >>> twin == context and twin["tasks"][0] is not context["tasks"][0]
    True
    """
    try:
        return cast(dict[str, Any], pickle.loads(pickle.dumps(dict(context), protocol=5)))
    except (pickle.PicklingError, TypeError, AttributeError):  # not JSON data after all:
        return copy.deepcopy(dict(context))  # the commit will say which field


@dataclass(frozen=True, slots=True)
class Step:
    """What one event did: ``kind`` is "event", "timer", "rejected" (no active state
    listens for the event; nothing changed), "dropped" (an invoke's completion that came
    after its state was left; nothing changed) or, from a runner, "error" (a guard or
    action raised; the step was rolled back; ``note`` says what in one line)."""

    kind: str
    event: str
    data: Mapping[str, Any]
    before: tuple[str, ...]
    after: tuple[str, ...]
    at: float
    armed: tuple[Timer, ...] = field(default=())
    cancelled: tuple[str, ...] = field(default=())
    note: str | None = None
    entered: tuple[str, ...] = field(default=())  # invoking states entered (re-entered too)

    @property
    def accepted(self) -> bool:
        return self.kind not in ("rejected", "dropped")


class Session:
    def __init__(self, compiled: CompiledMachine, instance: DurableInstance, clock: Clock,
                 timers: Mapping[str, Timer] | None = None) -> None:
        self.compiled = compiled
        self.ir = compiled.ir
        self.instance = instance
        self.clock = clock
        self._timers: dict[str, Timer] = dict(timers or {})
        self.entered_invokes: tuple[str, ...] = ()  # invoking states the last step entered
        self._order = {sid: i for i, sid in enumerate(self.ir.states)}
        self._after: dict[str, list[TransitionIR]] = {}
        for t in self.ir.transitions():
            if t.kind is TransitionKind.AFTER and t.event is not None:
                self._after.setdefault(t.source, []).append(t)

    # -- creating ---------------------------------------------------------------------

    @classmethod
    def start(cls, compiled: CompiledMachine, clock: Clock,
              context: Mapping[str, Any] | None = None) -> Session:
        """A new session in the initial configuration (entry actions run, timers armed).

        StepFault if an entry action raises: there is no state before the first one to
        roll back to, so no session exists.
        """
        try:
            instance = cast(DurableInstance, compiled.new(copied(context or {})))
            session = cls(compiled, instance, clock)
            session._apply_timer_changes()
        except Exception as exc:
            raise StepFault(fault_of(exc, None, ())) from exc
        return session

    @classmethod
    def restore(cls, compiled: CompiledMachine, clock: Clock, snapshot: Snapshot) -> Session:
        """The session a snapshot describes; no entry action runs."""
        if snapshot.machine != compiled.ir.name:
            raise SessionError(f"snapshot is of machine {snapshot.machine!r}, "
                               f"not {compiled.ir.name!r}")
        try:
            instance = compiled.restore(
                dict(snapshot.context),
                MachineState(snapshot.configuration, snapshot.history),
            )
        except ValueError as exc:
            raise SessionError(str(exc)) from None
        return cls(compiled, instance, clock, {t.event: t for t in snapshot.timers})

    # -- state ------------------------------------------------------------------------

    @property
    def active(self) -> tuple[str, ...]:
        """Active states in document order."""
        return tuple(sorted(self.instance.configuration, key=self._order.__getitem__))

    @property
    def context(self) -> dict[str, Any]:
        return self.instance.context

    @property
    def is_final(self) -> bool:
        """A top-level final state is active. Read from the configuration, not the engine:
        an engine restored into a final state never entered it, so it does not know."""
        states = self.ir.states
        return any(states[s].is_final and states[s].parent is None
                   for s in self.instance.configuration)

    @property
    def timers(self) -> tuple[Timer, ...]:
        """Armed timers, soonest first."""
        return tuple(sorted(self._timers.values(), key=lambda t: (t.deadline, t.event)))

    def next_deadline(self) -> float | None:
        timers = self.timers
        return timers[0].deadline if timers else None

    def accepts(self, event: str, configuration: Iterable[str] | None = None) -> bool:
        """Whether some active state (of ``configuration``, default the current one) has a
        transition listening for ``event``."""
        config = self.instance.configuration if configuration is None else configuration
        return any(
            t.event is not None and t.kind is not TransitionKind.ALWAYS
            and descriptor_matches(t.event, event)
            for sid in config for t in self.ir.states[sid].transitions
        )

    def enabled(self, event: str, data: Mapping[str, Any] | None = None, *,
                configuration: Iterable[str] | None = None,
                context: Mapping[str, Any] | None = None) -> bool:
        """Whether ``event`` would fire a transition now: some active state (of
        ``configuration``) listens for it with no guard, or with a guard that holds.

        Guards run outside any step, on a deep copy of ``context`` (default: the
        session's), so they must be pure: read the call, never change anything. A guard
        that raises or is not bound counts as false here (the step would report it).
        """
        config = self.instance.configuration if configuration is None else configuration
        base = self.context if context is None else context
        scratch: dict[str, Any] | None = None
        payload = dict(data or {})
        for sid in config:
            for t in self.ir.states[sid].transitions:
                if (t.event is None or t.kind is TransitionKind.ALWAYS
                        or not descriptor_matches(t.event, event)):
                    continue
                if t.guard is None:
                    return True
                fn = self.compiled.bindings.get(t.guard.name)
                if fn is None:
                    continue
                scratch = copied(base) if scratch is None else scratch
                call = Call(t.guard.name, event, payload, scratch, t.source, t.target)
                try:
                    holds = bool(fn(call))
                except Exception:
                    continue
                if holds != t.guard.negated:
                    return True
        return False

    def snapshot(self) -> Snapshot:
        saved = self.instance.save()
        return Snapshot(
            machine=self.ir.name,
            configuration=saved.configuration,
            history=saved.history,
            context=self.context,
            timers=self.timers,
            terminated=self.is_final,
        )

    # -- stepping ---------------------------------------------------------------------

    def send(self, event: str, data: Mapping[str, Any] | None = None, *,
             internal: bool = False) -> Step:
        """Run one event to completion; a rejected event changes nothing.

        External events (the default) may not use the engine's reserved names;
        ``internal=True`` is the engine's own send (``error.execution``,
        ``done.invoke.<id>``, ``error.invoke.<id>``). StepFault if a guard or action
        raises: the step is rolled back (configuration, history, context, timers).
        """
        payload = dict(data or {})
        before = self.active
        now = self.clock.now()
        reason = None if internal else reserved_reason(event)
        if reason is not None:
            return Step("rejected", event, payload, before, before, now,
                        note=f"{event!r} is reserved: {reason}")
        if self.is_final:
            return Step("rejected", event, payload, before, before, now,
                        note="the session has finished")
        if not self.accepts(event):
            failure = payload.get("message") if event.startswith("error.invoke.") else None
            return Step("rejected", event, payload, before, before, now,
                        note="no active state accepts it" + (
                            f"; the invocation failed: {failure}" if failure else ""))
        armed, cancelled = self._guarded(event, lambda: self.instance.send(event, **payload))
        return Step("event", event, payload, before, self.active, now, armed, cancelled,
                    entered=self.entered_invokes)

    def due(self) -> Timer | None:
        """The soonest timer due by now, if any (none once the session is final)."""
        if self.is_final:
            return None
        timers = self.timers
        return timers[0] if timers and timers[0].deadline <= self.clock.now() else None

    def fire_one(self) -> Step | None:
        """Send the soonest timer event due by now (None if none is). StepFault if the
        step raises: it is rolled back and the timer is still armed."""
        timer = self.due()
        if timer is None:
            return None
        now = self.clock.now()
        before = self.active

        def fire() -> None:
            del self._timers[timer.event]
            self.instance.send(timer.event)

        armed, cancelled = self._guarded(timer.event, fire)
        return Step("timer", timer.event, {}, before, self.active, now, armed, cancelled,
                    entered=self.entered_invokes)

    def fire_due(self) -> list[Step]:
        """Send every timer event due by now, soonest first (each armed timer once)."""
        steps: list[Step] = []
        while self.due() is not None:
            if len(steps) >= MAX_TIMER_STEPS:
                raise SessionError(f"more than {MAX_TIMER_STEPS} timers fired at once; "
                                   "a zero-delay `after` loop?")
            step = self.fire_one()
            assert step is not None
            steps.append(step)
        return steps

    def drop_timer(self, event: str) -> Timer | None:
        """Disarm a timer (one whose step failed); the timer, or None if not armed."""
        return self._timers.pop(event, None)

    def rearm(self, event: str) -> Timer | None:
        """Arm ``event``'s timer again, due now, if its state is active (a retried timer
        dead letter); the timer, or None when its state was left meanwhile."""
        state = next((t.source for ts in self._after.values() for t in ts
                      if t.event == event), None)
        if state is None or state not in self.instance.configuration:
            return None
        timer = Timer(event, state, self.clock.now())
        self._timers[event] = timer
        return timer

    # -- rollback ---------------------------------------------------------------------

    def _guarded(self, event: str, body: Callable[[], None],
                 ) -> tuple[tuple[Timer, ...], tuple[str, ...]]:
        """Run ``body`` (one step) and apply its timer changes; on an exception, put the
        session back as it was before and raise StepFault."""
        saved = self.instance.save()
        context = copied(self.context)
        timers = dict(self._timers)
        active = self.active
        try:
            body()
            return self._apply_timer_changes()
        except Exception as exc:
            fault = fault_of(exc, event, active)
            self.instance = self.compiled.restore(context, saved)
            self._timers = timers
            raise StepFault(fault) from exc

    # -- timers -----------------------------------------------------------------------

    def _delay(self, transition: TransitionIR) -> float:
        delay = transition.delay
        assert delay is not None
        if delay.seconds is not None:
            return delay.seconds
        key = delay.context_key or ""
        value = self.context.get(key)
        try:
            if value is None or isinstance(value, bool):
                raise ValueError("it is not set")
            return parse_duration(value)
        except ValueError as exc:
            raise SessionError(
                f"{transition.mark}: cannot arm `after: {key}` in state "
                f"{transition.source!r}: context field {key!r} = {value!r}: {exc}"
            ) from None

    def _apply_timer_changes(self) -> tuple[tuple[Timer, ...], tuple[str, ...]]:
        """Arm the timers of the states entered, cancel those of the states left, and note
        the invoking states entered (:attr:`entered_invokes`)."""
        armed: list[Timer] = []
        cancelled: list[str] = []
        changes = self.instance.take_timer_changes()
        self.entered_invokes = tuple(dict.fromkeys(
            state for entered, state in changes
            if entered and self.ir.states[state].invoke is not None))
        for entered, state in changes:
            events = dict.fromkeys(t.event for t in self._after.get(state, ()) if t.event)
            if entered:
                now = self.clock.now()
                for event in events:
                    transition = next(t for t in self._after[state] if t.event == event)
                    timer = Timer(event, state, now + self._delay(transition))
                    self._timers[event] = timer
                    armed.append(timer)
            else:
                for event in events:
                    if self._timers.pop(event, None) is not None:
                        cancelled.append(event)
        return tuple(armed), tuple(cancelled)
