"""Session: one running instance of a compiled spec, with its context and armed timers.

The core is synchronous and deterministic: ``send`` runs one event to completion,
``fire_due`` sends the timer events whose deadlines have passed on the session's clock,
and ``snapshot``/``restore`` round-trip everything a restart needs. Restoring never runs
an entry action; timers come back with their absolute deadlines, so one that fell due
while nothing ran fires once, on the first ``fire_due``. Persisting steps and waiting
for events and deadlines is the runner's job (``runtime/engine/runner.py``).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any, cast

from interlock.machines.backends.base import CompiledMachine, DurableInstance, MachineState
from interlock.machines.durations import parse_duration
from interlock.machines.events import descriptor_matches, reserved_reason
from interlock.machines.ir import TransitionIR, TransitionKind
from interlock.runtime.engine.clock import Clock
from interlock.runtime.engine.snapshot import Snapshot, Timer

# Timers firing within one fire_due call; more means a zero-delay timer loop.
MAX_TIMER_STEPS = 10_000


class SessionError(Exception):
    """A session cannot do what was asked; the message is fit for a user."""


@dataclass(frozen=True, slots=True)
class Step:
    """What one event did: ``kind`` is "event", "timer", "rejected" (no active state
    listens for the event; nothing changed) or "dropped" (an invoke's completion that
    came after its state was left; nothing changed)."""

    kind: str
    event: str
    data: Mapping[str, Any]
    before: tuple[str, ...]
    after: tuple[str, ...]
    at: float
    armed: tuple[Timer, ...] = field(default=())
    cancelled: tuple[str, ...] = field(default=())
    note: str | None = None

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
        self._order = {sid: i for i, sid in enumerate(self.ir.states)}
        self._after: dict[str, list[TransitionIR]] = {}
        for t in self.ir.transitions():
            if t.kind is TransitionKind.AFTER and t.event is not None:
                self._after.setdefault(t.source, []).append(t)

    # -- creating ---------------------------------------------------------------------

    @classmethod
    def start(cls, compiled: CompiledMachine, clock: Clock,
              context: Mapping[str, Any] | None = None) -> Session:
        """A new session in the initial configuration (entry actions run, timers armed)."""
        instance = cast(DurableInstance, compiled.new(context))
        session = cls(compiled, instance, clock)
        session._apply_timer_changes()
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
        """Run one event to completion; a rejected event changes nothing. ``internal``:
        the engine's own event, which may carry a reserved name (done.invoke.<id>, ...)."""
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
            return Step("rejected", event, payload, before, before, now,
                        note="no active state accepts it")
        self.instance.send(event, **payload)
        armed, cancelled = self._apply_timer_changes()
        return Step("event", event, payload, before, self.active, now, armed, cancelled)

    def fire_due(self) -> list[Step]:
        """Send every timer event due by now, soonest first (each armed timer once)."""
        steps: list[Step] = []
        while not self.is_final:
            now = self.clock.now()
            due = [t for t in self.timers if t.deadline <= now]
            if not due:
                break
            if len(steps) >= MAX_TIMER_STEPS:
                raise SessionError(f"more than {MAX_TIMER_STEPS} timers fired at once; "
                                   "a zero-delay `after` loop?")
            timer = due[0]
            del self._timers[timer.event]
            before = self.active
            self.instance.send(timer.event)
            armed, cancelled = self._apply_timer_changes()
            steps.append(Step("timer", timer.event, {}, before, self.active, now, armed,
                              cancelled))
        return steps

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
        armed: list[Timer] = []
        cancelled: list[str] = []
        for entered, state in self.instance.take_timer_changes():
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
