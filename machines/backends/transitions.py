"""IR -> a ``transitions`` HierarchicalMachine, for the machines it can express alike.

The second compile target, and the differential tests' oracle: the same traces run
through both backends must give the same configurations and the same action logs. What
transitions cannot do with python-statemachine's semantics is refused with ``B301`` at
the spec's line; :mod:`.transitions_check` lists each refusal and why.

How the rest is made to agree (each found by differential testing):

* States are nested ``NestedState`` s named by id with separator ``/``
  (``active/receiving``); every transition is declared at the root with full paths.
* Transition actions run between the exits and the entries (SCXML transition
  content), states are exited in reverse document order and entered in document order:
  :class:`Transition` reorders what ``NestedTransition`` computed. Targetless
  transitions keep their actions in ``before``.
* Entry actions of the initial configuration run when an instance is created
  (transitions itself does not run them).
* A dotted event is dispatched to the declared event that is its dotted prefix
  (``poll.fast`` -> ``poll``), as python-statemachine matches; others are ignored.
* Events raised by bindings are queued and run, in order, before ``send`` returns.
* Once terminated (a top-level final state, or every region of a top-level parallel
  state finished), events are ignored.
* The model gets no convenience methods (``is_<state>``, triggers), so no spec name can
  clash with them; its state lives in the attribute ``~state``. ``on_final`` callbacks
  are not used, so :class:`Transition` skips transitions' final-state bookkeeping.

When a binding raises, the error propagates and pending raised events are dropped (as
in python-statemachine); unlike python-statemachine, transitions does not roll the
configuration back from a half-done transition.

``native`` is the keyword arguments for :class:`Machine` (this module's subclass of
``HierarchicalMachine``): ``states``, ``transitions`` (whose entries may carry
``actions``), ``initial`` and the fixed options. Each instance builds its own machine.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from transitions.extensions.nesting import HierarchicalMachine, NestedState, NestedTransition

from interlock.machines.backends.base import CompiledMachine
from interlock.machines.backends.calls import (
    Hook,
    Site,
    action_sites,
    entry_sites,
    exit_sites,
    guard_site,
    initial_child,
    resolve,
)
from interlock.machines.backends.transitions_check import SEPARATOR, refusals
from interlock.machines.bindings import Bindings, Call
from interlock.machines.diagnostics import SpecError
from interlock.machines.ir import MachineIR, StateIR, StateKind, TransitionKind

TARGET = "transitions"

# Where the model keeps its state; no event name can be this (a trigger may not be).
MODEL_ATTRIBUTE = "~state"
_NO_DATA: dict[str, Any] = {}
_NOTHING: frozenset[str] = frozenset()


class State(NestedState):
    separator = SEPARATOR


class Transition(NestedTransition):
    """A nested transition whose actions run between exits and entries, in document order."""

    def __init__(self, *args: Any, actions: list[Any] | None = None, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.actions = actions or []

    def _change_state(self, event_data: Any) -> None:
        state_tree, exit_partials, enter_partials = self._resolve_transition(event_data)
        order: dict[str, int] = event_data.model.order

        def position(step: Any) -> int:  # a partial of some state's scoped_exit/enter
            return order[step.func.__self__._name]

        exit_partials.sort(key=position, reverse=True)
        enter_partials.sort(key=position)
        for exit_state in exit_partials:
            exit_state()
        event_data.machine.callbacks(self.actions, event_data)
        self._update_model(event_data, state_tree)
        for enter_state in enter_partials:
            enter_state()


class Machine(HierarchicalMachine):
    """HierarchicalMachine with interlock's nesting and quiet on unhandled events."""

    state_cls = State
    transition_cls = Transition

    def _checked_assignment(self, model: Any, name: str, func: Any) -> None:
        """Bind no convenience methods to the model: instances trigger by name."""

    def _add_model_to_state(self, state: Any, model: Any) -> None:
        """No ``is_<state>`` or trigger methods on the model (names could clash)."""

    def _add_trigger_to_model(self, trigger: str, model: Any) -> None:
        """No trigger methods on the model: instances call ``trigger_event``."""

    def _check_event_result(self, res: Any, model: Any, trigger: str) -> bool:
        return bool(res)


class _Model:
    """What transitions calls the model: configuration, context and the event in hand."""

    def __init__(self, context: dict[str, Any], order: dict[str, int]) -> None:
        self.context = context
        self.order = order
        self.event: str | None = None
        self.data: dict[str, Any] = _NO_DATA
        self.raised: deque[tuple[str, dict[str, Any]]] = deque()


@dataclass(slots=True)
class _Initial:
    """Stands in for transitions' EventData while the initial configuration is entered."""

    model: _Model


class _Hook(Hook):
    """A site called by transitions with an ``EventData`` (or :class:`_Initial`)."""

    __slots__ = ()

    def _invoke(self, event_data: Any) -> Any:
        model = event_data.model
        call = Call(self._name, model.event, model.data, model.context, self._source,
                    self._target)
        result = self._fn(call)
        if call.raised:
            model.raised.extend(call.raised)
        return result


def _runs(bindings: Bindings, sites: Iterable[Site]) -> list[Any]:
    return [_Hook(resolve(bindings, site), site).run for site in sites]


@dataclass(slots=True)
class _Plan:
    """Everything an instance needs, computed once per compiled machine."""

    ir: MachineIR
    config: dict[str, Any]
    order: dict[str, int]
    events: frozenset[str]
    initial_entries: tuple[tuple[Any, ...], ...]
    finals: frozenset[str]
    top_parallels: frozenset[str]
    region_finals: frozenset[str]
    routes: dict[str, str | None] = field(default_factory=dict)

    def route(self, event: str) -> str | None:
        """The declared event a sent event is dispatched to (dotted prefix match)."""
        try:
            return self.routes[event]
        except KeyError:
            pass
        tokens = event.split(".")
        found = None
        for k in range(len(tokens), 0, -1):
            candidate = ".".join(tokens[:k])
            if candidate in self.events:
                found = candidate
                break
        if len(self.routes) < 4096:
            self.routes[event] = found
        return found


def _paths(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    else:
        for item in value:
            yield from _paths(item)


class TransitionsInstance:
    """A running transitions machine behind the :class:`~.base.MachineInstance` contract."""

    __slots__ = ("_model", "_plan", "_terminated", "native")

    def __init__(self, plan: _Plan, context: dict[str, Any]) -> None:
        self._plan = plan
        self._model = _Model(context, plan.order)
        self._terminated = False
        self.native = Machine(model=self._model, **plan.config)
        initial = _Initial(self._model)
        for hooks in plan.initial_entries:
            for hook in hooks:
                hook(initial)
        self._drain(_NOTHING)

    def send(self, event: str, /, **data: Any) -> None:
        if self._terminated:
            return
        # Only a top-level parallel state needs to know what a step entered.
        before = self.configuration if self._plan.top_parallels else _NOTHING
        try:
            self._dispatch(event, data)
            self._drain(before)
        except BaseException:
            self._model.raised.clear()  # as python-statemachine clears its queues
            raise

    def _dispatch(self, event: str, data: dict[str, Any]) -> None:
        plan = self._plan
        trigger = plan.routes[event] if event in plan.routes else plan.route(event)
        if trigger is None:
            return
        model = self._model
        model.event = event
        model.data = data
        try:
            self.native.trigger_event(model, trigger)
        finally:
            model.event = None
            model.data = _NO_DATA

    def _drain(self, before: frozenset[str]) -> None:
        """Run raised events, then decide termination as python-statemachine does."""
        raised = self._model.raised
        while raised:
            event, data = raised.popleft()
            self._dispatch(event, data)
        plan = self._plan
        state = getattr(self._model, MODEL_ATTRIBUTE)
        first = state if isinstance(state, str) else next(_paths(state))
        top = first.partition(SEPARATOR)[0]
        if top in plan.finals:
            self._terminated = True
        elif top in plan.top_parallels:
            # python-statemachine ends when a final state inside a region of a top-level
            # parallel state is entered and every region has finished.
            after = self.configuration
            if not plan.region_finals.isdisjoint(after - before):
                self._terminated = _in_final(plan.ir, top, after)

    @property
    def configuration(self) -> frozenset[str]:
        paths = _paths(getattr(self._model, MODEL_ATTRIBUTE))
        return frozenset(part for path in paths for part in path.split(SEPARATOR))

    @property
    def context(self) -> dict[str, Any]:
        return self._model.context

    @property
    def is_terminated(self) -> bool:
        return self._terminated


def _in_final(ir: MachineIR, state_id: str, configuration: frozenset[str]) -> bool:
    """python-statemachine's ``is_in_final_state``."""
    state = ir.states[state_id]
    if state.kind is StateKind.PARALLEL:
        return all(_in_final(ir, c, configuration) for c in state.children)
    return any(ir.states[c].is_final and c in configuration for c in state.children)


def _state_config(ir: MachineIR, state: StateIR, bindings: Bindings) -> dict[str, Any]:
    config: dict[str, Any] = {"name": state.id}
    enter = _runs(bindings, entry_sites(state))
    leave = _runs(bindings, exit_sites(state))
    if enter:
        config["on_enter"] = enter
    if leave:
        config["on_exit"] = leave
    if state.is_final:
        config["final"] = True
    children = [_state_config(ir, ir.states[c], bindings)
                for c in state.children if not ir.states[c].is_history]
    if state.kind is StateKind.PARALLEL:
        config["parallel"] = children
    elif children:
        config["children"] = children
        config["initial"] = initial_child(ir, state.id)
    return config


def _path(ir: MachineIR, state_id: str) -> str:
    return SEPARATOR.join(reversed((state_id, *ir.ancestors(state_id))))


def _transition_config(ir: MachineIR, bindings: Bindings) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for t in ir.transitions():
        if t.kind is TransitionKind.ALWAYS or t.event is None:
            continue
        if t.target is not None and ir.states[t.target].is_history:
            continue  # refused; only reached with check=False
        config: dict[str, Any] = {"trigger": t.event, "source": _path(ir, t.source),
                                  "dest": None if t.target is None else _path(ir, t.target)}
        guard = guard_site(t)
        if guard is not None and t.guard is not None:
            key = "unless" if t.guard.negated else "conditions"
            config[key] = [_Hook(resolve(bindings, guard), guard).check]
        actions = _runs(bindings, action_sites(t))
        if actions:
            config["before" if t.target is None else "actions"] = actions
        out.append(config)
    return out


def _default_entry(ir: MachineIR, state_id: str) -> Iterator[str]:
    yield state_id
    state = ir.states[state_id]
    if state.kind is StateKind.PARALLEL:
        for child in state.children:
            yield from _default_entry(ir, child)
    elif state.children:
        first = initial_child(ir, state_id)
        if first is not None:
            yield from _default_entry(ir, first)


def build_plan(ir: MachineIR, bindings: Bindings | None = None, *, check: bool = True) -> _Plan:
    """Check a machine against what transitions can express and build its config.

    ``check=False`` builds even what is refused (history and eventless transitions are
    then dropped): the tests use it to show why each refusal exists.
    """
    problems = refusals(ir) if check else []
    if problems:
        raise SpecError(problems)
    bindings = bindings or {}
    top = initial_child(ir, None)
    config: dict[str, Any] = {
        "states": [_state_config(ir, ir.states[s], bindings)
                   for s in ir.top if not ir.states[s].is_history],
        "transitions": _transition_config(ir, bindings),
        "initial": top,
        "send_event": True,
        "auto_transitions": False,
        "ignore_invalid_triggers": True,
        "model_attribute": MODEL_ATTRIBUTE,
    }
    order = {sid: i for i, sid in enumerate(ir.states)}
    tops = {s for s in ir.top if ir.states[s].kind is StateKind.PARALLEL}
    entered = sorted(_default_entry(ir, top), key=order.__getitem__) if top else []
    entries = tuple(tuple(_runs(bindings, entry_sites(ir.states[s]))) for s in entered)
    return _Plan(
        ir=ir,
        config=config,
        order=order,
        events=frozenset(t.event for t in ir.transitions()
                         if t.kind is not TransitionKind.ALWAYS and t.event is not None),
        initial_entries=tuple(e for e in entries if e),
        finals=frozenset(s.id for s in ir.states.values() if s.is_final),
        top_parallels=frozenset(tops),
        region_finals=frozenset(
            s.id for s in ir.states.values()
            if s.is_final and len(ir.ancestors(s.id)) == 2 and ir.ancestors(s.id)[1] in tops),
    )


def compile_transitions(ir: MachineIR, bindings: Bindings | None = None) -> CompiledMachine:
    """Compile a machine (already linted) for transitions, or raise SpecError (B301)."""
    plan = build_plan(ir, bindings)

    def factory(context: dict[str, Any]) -> TransitionsInstance:
        return TransitionsInstance(plan, context)

    return CompiledMachine(ir=ir, target=TARGET, native=plan.config, factory=factory)
