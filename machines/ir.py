"""The IR: a frozen, normalized machine that lint, renderers and backends all read.

A spec is nested and full of shorthands; the IR is flat. Every state is listed once by
id (ids are unique across a machine), with its parent, children and resolved initial
child. Every transition is one record: its source, its kind (``event``, ``after`` or
``always``), its event name, target, guard and actions, and the marks lint needs to
point at the right line.

Delayed transitions get a timer event named ``after.<state>.<n>`` (n counts the
state's ``after:`` entries from 0). The runtime arms a timer on entry to the state and
sends that event when it is due; a machine never reads a clock.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from types import MappingProxyType
from typing import Any

from interlock.machines.diagnostics import Mark
from interlock.machines.durations import parse_duration
from interlock.machines.spec import InvokeSpec, Spec, StateSpec, TransitionSpec

TIMER_EVENT_PREFIX = "after"


class StateKind(StrEnum):
    ATOMIC = "atomic"
    COMPOUND = "compound"
    PARALLEL = "parallel"
    FINAL = "final"
    HISTORY = "history"


class TransitionKind(StrEnum):
    EVENT = "event"
    AFTER = "after"
    ALWAYS = "always"


@dataclass(frozen=True, slots=True)
class Guard:
    """A named guard, possibly negated (``!name`` in a spec)."""

    name: str
    negated: bool = False

    @classmethod
    def parse(cls, text: str) -> Guard:
        text = text.strip()
        if text.startswith("!"):
            return cls(text[1:].strip(), True)
        return cls(text)

    def __str__(self) -> str:
        return f"!{self.name}" if self.negated else self.name


@dataclass(frozen=True, slots=True)
class Delay:
    """How long an ``after`` transition waits: literal seconds or a context field."""

    text: str
    seconds: float | None
    context_key: str | None

    @classmethod
    def parse(cls, text: str) -> Delay:
        try:
            return cls(text, parse_duration(text), None)
        except ValueError:
            return cls(text, None, text)


def timer_event(state_id: str, index: int) -> str:
    return f"{TIMER_EVENT_PREFIX}.{state_id}.{index}"


@dataclass(frozen=True, slots=True)
class TransitionIR:
    source: str
    kind: TransitionKind
    event: str | None
    target: str | None
    guard: Guard | None
    actions: tuple[str, ...]
    delay: Delay | None
    description: str | None
    mark: Mark
    marks: Mapping[str, Mark] = field(default_factory=dict, compare=False)

    @property
    def internal(self) -> bool:
        """Targetless: runs its actions without leaving the source state."""
        return self.target is None

    def mark_of(self, name: str) -> Mark:
        return self.marks.get(name, self.mark)


class OnResume(StrEnum):
    """What a resumed runner does with an invocation its dead predecessor left running."""

    ADOPT = "adopt"  # reattach to the same process (same pid and start time), keep reading
    RESTART = "restart"  # stop what is left of it and start exactly one new one
    FAIL = "fail"  # raise error.invoke.<id> with reason runner_lost


INVOKE_DONE_PREFIX = "done.invoke"
INVOKE_ERROR_PREFIX = "error.invoke"


def invoke_done_event(invoke_id: str) -> str:
    return f"{INVOKE_DONE_PREFIX}.{invoke_id}"


def invoke_error_event(invoke_id: str) -> str:
    return f"{INVOKE_ERROR_PREFIX}.{invoke_id}"


#: The last token of a fan-out's "every child has ended" event, ``done.invoke.<id>.all``.
ALL_SUFFIX = "all"


def invoke_all_event(invoke_id: str) -> str:
    """``done.invoke.<id>.all``: raised once when every child of a fan-out has ended."""
    return f"{INVOKE_DONE_PREFIX}.{invoke_id}.{ALL_SUFFIX}"


@dataclass(frozen=True, slots=True)
class InvokeIR:
    """An agent, program or child machine started when its state is entered and cancelled
    when the state is left.

    Exactly one of ``agent`` (a name from interlock.yaml ``agents:``), ``command`` (an
    argv) and ``machine`` (a built-in spec's name or a spec file relative to this one) is
    set in a valid spec; lint reports otherwise. ``prompt`` is Jinja2 template text,
    ``prompt_file`` a template path relative to the spec file (one or neither; never for
    a machine). ``input`` values may be templates (a machine's context). ``timeout`` is a
    literal duration or a context field (like ``after:``); None means the dispatch
    settings decide. Completion raises :func:`invoke_done_event` (a machine's adds its
    final state: ``done.invoke.<id>.<final>``), failure :func:`invoke_error_event`.

    ``each`` makes it a fan-out: one child per item of a list (a ``{{ expression }}``
    text or a literal list, evaluated by the runtime on entry), at most ``concurrency``
    at once (an int, a ``{{ expression }}`` text, or None: all at once); every child
    raises its own done/error event and the last one's end :func:`invoke_all_event`.
    """

    id: str
    state: str
    agent: str | None
    command: tuple[str, ...] | None
    machine: str | None
    prompt: str | None
    prompt_file: str | None
    input: Mapping[str, Any]
    timeout: Delay | None
    on_resume: OnResume
    mark: Mark
    continue_: str | None = None
    cwd: str | None = None
    each: str | tuple[Any, ...] | None = None
    concurrency: int | str | None = None
    marks: Mapping[str, Mark] = field(default_factory=dict, compare=False)

    def mark_of(self, name: str) -> Mark:
        return self.marks.get(name, self.mark)

    @property
    def done_event(self) -> str:
        return invoke_done_event(self.id)

    @property
    def error_event(self) -> str:
        return invoke_error_event(self.id)

    @property
    def fans_out(self) -> bool:
        """Whether it runs one child per item of a list (``each:``)."""
        return self.each is not None

    @property
    def all_event(self) -> str:
        return invoke_all_event(self.id)


@dataclass(frozen=True, slots=True)
class StateIR:
    id: str
    kind: StateKind
    parent: str | None
    children: tuple[str, ...]
    initial: str | None
    entry: tuple[str, ...]
    exit: tuple[str, ...]
    transitions: tuple[TransitionIR, ...]
    history: str | None
    default: str | None
    description: str | None
    tags: tuple[str, ...]
    depth: int
    mark: Mark
    marks: Mapping[str, Mark] = field(default_factory=dict, compare=False)
    invoke: InvokeIR | None = None  # the agent this state runs while it is active

    def mark_of(self, name: str) -> Mark:
        return self.marks.get(name, self.mark)

    @property
    def is_final(self) -> bool:
        return self.kind is StateKind.FINAL

    @property
    def is_history(self) -> bool:
        return self.kind is StateKind.HISTORY


@dataclass(frozen=True, slots=True)
class ContextFieldIR:
    name: str
    type: str
    default: Any
    description: str | None
    mark: Mark
    marks: Mapping[str, Mark] = field(default_factory=dict, compare=False)

    def mark_of(self, name: str) -> Mark:
        return self.marks.get(name, self.mark)


@dataclass(frozen=True)
class MachineIR:
    """A whole machine. ``states`` is in document order, parents before children."""

    name: str
    version: int
    description: str | None
    tags: tuple[str, ...]
    file: str
    initial: str | None
    top: tuple[str, ...]
    states: Mapping[str, StateIR]
    context: Mapping[str, ContextFieldIR]
    mark: Mark
    marks: Mapping[str, Mark] = field(default_factory=dict, compare=False)
    # Every state as written, duplicates included (lint reports duplicate ids from it).
    declared: tuple[StateIR, ...] = field(default=(), compare=False)

    def mark_of(self, name: str) -> Mark:
        return self.marks.get(name, self.mark)

    def state(self, state_id: str) -> StateIR:
        return self.states[state_id]

    def ancestors(self, state_id: str) -> tuple[str, ...]:
        """Proper ancestors, nearest first."""
        chain = []
        parent = self.states[state_id].parent
        while parent is not None:
            chain.append(parent)
            parent = self.states[parent].parent
        return tuple(chain)

    def descendants(self, state_id: str) -> tuple[str, ...]:
        """All states below ``state_id``, depth first (safe on duplicate ids)."""
        out: list[str] = []
        seen = {state_id}
        stack = list(reversed(self.states[state_id].children))
        while stack:
            child = stack.pop()
            if child in seen:
                continue
            seen.add(child)
            out.append(child)
            stack.extend(reversed(self.states[child].children))
        return tuple(out)

    def transitions(self) -> Iterator[TransitionIR]:
        for state in self.states.values():
            yield from state.transitions

    @property
    def events(self) -> tuple[str, ...]:
        """Event names that transitions listen for (timer events excluded), sorted."""
        return tuple(sorted({t.event for t in self.transitions()
                             if t.kind is TransitionKind.EVENT and t.event is not None}))

    @property
    def timer_events(self) -> tuple[str, ...]:
        return tuple(t.event for t in self.transitions()
                     if t.kind is TransitionKind.AFTER and t.event is not None)

    @property
    def guards(self) -> tuple[str, ...]:
        return tuple(sorted({t.guard.name for t in self.transitions() if t.guard}))

    @property
    def actions(self) -> tuple[str, ...]:
        names: set[str] = set()
        for state in self.states.values():
            names.update(state.entry, state.exit)
            for t in state.transitions:
                names.update(t.actions)
        return tuple(sorted(names))

    @property
    def invokes(self) -> tuple[InvokeIR, ...]:
        """Every state's invocation, in document order."""
        return tuple(s.invoke for s in self.states.values() if s.invoke is not None)

    def leaf_states(self) -> tuple[str, ...]:
        return tuple(s.id for s in self.states.values()
                     if not s.children and s.kind is not StateKind.HISTORY)


def _transition(
    source: str, kind: TransitionKind, event: str | None, spec: TransitionSpec,
    delay: Delay | None, event_mark: Mark,
) -> TransitionIR:
    marks = {name: spec.mark_of(name) for name in ("target", "guard", "actions")}
    marks["event"] = event_mark
    return TransitionIR(
        source=source,
        kind=kind,
        event=event,
        target=spec.target,
        guard=Guard.parse(spec.guard) if spec.guard else None,
        actions=tuple(spec.actions),
        delay=delay,
        description=spec.description,
        mark=spec.mark,
        marks=MappingProxyType(marks),
    )


def _state_transitions(sid: str, state: StateSpec) -> tuple[TransitionIR, ...]:
    out: list[TransitionIR] = []
    for event, candidates in state.on.items():
        event_mark = state.key_mark_of("on", event)
        for candidate in candidates:
            out.append(_transition(sid, TransitionKind.EVENT, event, candidate, None, event_mark))
    for index, (text, candidates) in enumerate(state.after.items()):
        delay = Delay.parse(text)
        delay_mark = state.key_mark_of("after", text)
        for candidate in candidates:
            out.append(_transition(sid, TransitionKind.AFTER, timer_event(sid, index), candidate,
                                   delay, delay_mark))
    for candidate in state.always:
        out.append(_transition(sid, TransitionKind.ALWAYS, None, candidate, None,
                               state.mark_of("always")))
    return tuple(out)


def _invoke(sid: str, spec: InvokeSpec | None) -> InvokeIR | None:
    if spec is None:
        return None
    marks = {name: spec.mark_of(name)
             for name in ("id", "agent", "command", "machine", "prompt", "prompt_file", "input",
                          "timeout", "on_resume", "continue_", "cwd", "each", "concurrency")}
    marks.update({f"input.{key}": spec.key_mark_of("input", key) for key in spec.input})
    return InvokeIR(
        id=spec.id or sid,
        state=sid,
        agent=spec.agent,
        command=tuple(spec.command) if spec.command is not None else None,
        machine=spec.machine,
        prompt=spec.prompt,
        prompt_file=spec.prompt_file,
        input=MappingProxyType(dict(spec.input)),
        timeout=Delay.parse(spec.timeout) if spec.timeout is not None else None,
        on_resume=OnResume(spec.on_resume),
        mark=spec.mark,
        continue_=spec.continue_,
        cwd=spec.cwd,
        each=tuple(spec.each) if isinstance(spec.each, list) else spec.each,
        concurrency=spec.concurrency,
        marks=MappingProxyType(marks),
    )


def _kind(state: StateSpec) -> StateKind:
    return StateKind(state.kind)


def _initial(
    explicit: str | None, children: tuple[str, ...], states: dict[str, StateSpec]
) -> str | None:
    if explicit is not None:
        return explicit
    candidates = [c for c in children if _kind(states[c]) is not StateKind.HISTORY]
    return candidates[0] if len(candidates) == 1 else None


def build_ir(spec: Spec) -> MachineIR:
    """Flatten a validated spec into the IR. Never fails; lint reports what is wrong."""
    declared: list[StateIR] = []
    states: dict[str, StateIR] = {}

    def visit(sid: str, state: StateSpec, parent: str | None, depth: int) -> None:
        children = tuple(state.states)
        kind = _kind(state)
        initial = (_initial(state.initial, children, state.states)
                   if kind is StateKind.COMPOUND else state.initial)
        marks = {name: state.mark_of(name)
                 for name in ("type", "initial", "entry", "exit", "on", "after", "always",
                              "history", "default", "states", "invoke")}
        ir = StateIR(
            id=sid,
            kind=kind,
            parent=parent,
            children=children,
            initial=initial,
            entry=tuple(state.entry),
            exit=tuple(state.exit),
            transitions=_state_transitions(sid, state),
            history=(state.history or "shallow") if kind is StateKind.HISTORY else None,
            default=state.default,
            description=state.description,
            tags=tuple(state.tags),
            depth=depth,
            mark=state.mark,
            marks=MappingProxyType(marks),
            invoke=_invoke(sid, state.invoke),
        )
        declared.append(ir)
        states.setdefault(sid, ir)
        for child_id, child in state.states.items():
            visit(child_id, child, sid, depth + 1)

    for sid, state in spec.states.items():
        visit(sid, state, None, 0)

    context = {
        name: ContextFieldIR(name, f.type, f.default, f.description, f.mark,
                             MappingProxyType({n: f.mark_of(n) for n in ("type", "default")}))
        for name, f in spec.context.items()
    }
    top = tuple(spec.states)
    return MachineIR(
        name=spec.machine,
        version=spec.version,
        description=spec.description,
        tags=tuple(spec.tags),
        file=spec.file,
        initial=_initial(spec.initial, top, spec.states),
        top=top,
        states=MappingProxyType(states),
        context=MappingProxyType(context),
        mark=spec.mark,
        marks=MappingProxyType({n: spec.mark_of(n)
                                for n in ("machine", "initial", "states", "context")}),
        declared=tuple(declared),
    )
