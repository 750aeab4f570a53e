"""IR -> a python-statemachine 3.x ``StateChart`` subclass (the primary compile target).

Every IR feature maps onto SCXML semantics as python-statemachine implements them:
compound states enter their initial child, parallel states all their regions, a
top-level final state terminates the machine, history states (shallow or deep) restore
what was active or take their default. A targeted transition is *external* (a
self-transition exits and re-enters its state); a targetless one only runs its actions.
Candidates for one event are tried in document order; a guard written ``!name`` is
wired as ``unless``. ``always`` transitions are eventless; ``after`` transitions are
ordinary events named ``after.<state>.<n>`` that the runtime sends when a timer fires.
Transition actions run between the exits and the entries (SCXML transition content).
An event no active state accepts is ignored.

``invoke:`` compiles to nothing in the class: the runtime starts the agent when its
state is entered, cancels it when the state is left, and sends ``done.invoke.<id>`` /
``error.invoke.<id>`` as ordinary events, which transitions hear like any other.
python-statemachine 3.2's own invoke (SCXML semantics) is not used: it would run the
agent inside the machine, where the journal cannot record it and a resumed runner
could not adopt, restart or fail it.

Names inside the class. python-statemachine turns state ids and event ids into class
attributes, and looks callbacks up by name (``on_enter_<state>``, ``before_<event>``).
So that no spec name can shadow an attribute or a convention:

* every event id gets the prefix ``ev_`` (``poll`` -> ``ev_poll``; the Event's
  ``name`` stays ``poll``). No attribute of the class or convention name starts with
  it, the prefix sticks to the first token so dotted prefix matching is unchanged
  (``ev_job`` still matches ``ev_job.done``), and the engine's own events
  (``done.state.*``, ``error.*``) never match a spec transition (a spec's ``done``
  would otherwise catch every ``done.state.<id>``). Undotted ids stay one token, which
  python-statemachine matches fastest. :meth:`StateChartInstance.send` adds the prefix;
  bindings see the spec's names.
* a state id that is not a plain identifier, starts with ``_``, ``ev_`` or a callback
  convention prefix (``on_``, ``before_``, ``after_``, ``prepare_``), or names an
  attribute of ``StateChart``, ``State`` or ``HistoryState`` (``send``,
  ``configuration``, ``states``, ``initial``, ``exit``, ...) gets the id ``st:<id>``.
  The state's value is that id too (python-statemachine refuses to set an attribute
  named like a state value); :attr:`StateChartInstance.configuration` maps it back.

Data sent with an event travels in one keyword argument (``_data``), so keys such as
``delay``, ``event`` or ``source`` reach the bindings intact. Errors raised by bindings
propagate to the caller of ``send`` (``catch_errors_as_events`` is off). python-statemachine
numbers states' ``document_order`` per nesting level; the compiled class renumbers them
in true document order, so exits run in reverse and entries in document order.
"""

from __future__ import annotations

import keyword
from collections.abc import Iterable
from types import MappingProxyType
from typing import Any, cast

from statemachine import HistoryState, State, StateChart
from statemachine.event import Event
from statemachine.factory import StateMachineMetaclass
from statemachine.orderedset import OrderedSet

from interlock.machines.backends.base import CompiledMachine, MachineState
from interlock.machines.backends.calls import (
    Hook,
    Site,
    action_sites,
    entry_sites,
    exit_sites,
    guard_site,
    initial_child,
    unbound,
)
from interlock.machines.bindings import Bindings, Call
from interlock.machines.diagnostics import SpecError, error
from interlock.machines.events import descriptor_matches
from interlock.machines.ir import MachineIR, StateIR, StateKind, TransitionKind
from interlock.machines.memo import PerIR

TARGET = "statemachine"
EVENT_PREFIX = "ev_"
STATE_PREFIX = "st:"
DATA_KEY = "_data"  # the keyword send() passes the event data in
_SKIP = len(EVENT_PREFIX)

_NO_DATA: MappingProxyType[str, Any] = MappingProxyType({})
_UNSAFE_PREFIXES = ("_", EVENT_PREFIX, "on_", "before_", "after_", "prepare_")
_RESERVED: frozenset[str] = frozenset(
    {*dir(StateChart), *dir(State()), *dir(HistoryState()),
     "model", "history_values", "state_field", "start_configuration_values",
     "initial_state", "final_states", "states_map", "name", "id"}
)


def native_state_id(state_id: str) -> str:
    """The id a spec state gets inside the StateChart class."""
    if (not state_id.isidentifier() or keyword.iskeyword(state_id)
            or state_id.startswith(_UNSAFE_PREFIXES) or state_id in _RESERVED):
        return STATE_PREFIX + state_id
    return state_id


def native_event(event: str) -> str:
    """The event id a spec event gets inside the StateChart class."""
    return EVENT_PREFIX + event


class SpecEvent(Event):
    """An event descriptor with the same SCXML dotted-prefix match, minus the allocations.

    python-statemachine's ``Event.match`` splits the descriptor with ``Event.split``, which
    builds a new ``Event`` (and humanizes its id with a regex) for every dotted token, on
    every comparison. Every event sent is compared with the descriptors of the active
    states' transitions, timer events (``after.<state>.<n>``) among them, so that cost was
    paid on every step; this match compares plain strings instead.
    """

    def match(self, event: str) -> bool:
        return descriptor_matches(self.id, event)


class _Model:
    """The StateChart's model: where the configuration is stored, next to the context,
    the instance's bindings and the log of timed and invoking states entered and left."""

    __slots__ = ("bindings", "context", "state", "timer_log")
    state: Any  # the raw configuration, written by python-statemachine

    def __init__(self, context: dict[str, Any], bindings: Bindings) -> None:
        self.context = context
        self.bindings = bindings
        self.timer_log: list[tuple[bool, str]] = []


class _TimerTrack:
    """Entry/exit callback of a state with ``after`` transitions or an invoke: logs it for
    the runtime."""

    __slots__ = ("_entered", "_state")

    def __init__(self, state: str, entered: bool) -> None:
        self._state = state
        self._entered = entered

    def run(self, event_data: Any) -> None:
        event_data.trigger_data.model.timer_log.append((self._entered, self._state))


def _raise_events(machine: StateChart[Any], raised: list[tuple[str, dict[str, Any]]]) -> None:
    for event, data in raised:
        if data:
            machine.send(EVENT_PREFIX + event, internal=True, _data=data)
        else:
            machine.send(EVENT_PREFIX + event, internal=True)


class _Hook(Hook):
    """A site shaped for python-statemachine's dependency injection: ``check``/``run``
    take only ``event_data``; the engine passes it by keyword and drops the rest. The
    callable is the instance's binding for the site's name, looked up when the site is
    reached (one chart class serves every instance, whatever its bindings); ``_fn`` is
    the stand-in for a name left unbound."""

    __slots__ = ()

    def __init__(self, site: Site) -> None:
        super().__init__(unbound(site), site)

    def _invoke(self, event_data: Any) -> Any:
        trigger = event_data.trigger_data
        event = trigger.event
        call = Call(
            self._name,
            event[_SKIP:] if event is not None and event.startswith(EVENT_PREFIX) else None,
            trigger.kwargs.get(DATA_KEY, _NO_DATA),
            trigger.model.context,
            self._source,
            self._target,
        )
        result = (trigger.model.bindings.get(self._name) or self._fn)(call)
        if call.raised:
            _raise_events(trigger.machine, call.raised)
        return result


def _runs(sites: Iterable[Site]) -> list[Any]:
    return [_Hook(site).run for site in sites]


class StateChartInstance:
    """A running StateChart behind the :class:`~.base.MachineInstance` contract."""

    __slots__ = ("_events", "_model", "_spec_ids", "native")

    def __init__(
        self,
        chart: type[StateChart[Any]],
        context: dict[str, Any],
        spec_ids: dict[str, str] | None,
        events: dict[str, str],
        bindings: Bindings,
        saved: MachineState | None = None,
    ) -> None:
        self._model = _Model(context, bindings)
        self._spec_ids = spec_ids
        self._events = events
        if saved is not None:  # a configuration on the model: the engine enters nothing
            self._model.state = OrderedSet(native_state_id(s) for s in saved.configuration)
        self.native: StateChart[Any] = chart(model=self._model)
        if saved is not None:
            states = chart.states_map
            self.native.history_values = {
                native_state_id(h): [states[native_state_id(s)] for s in remembered]
                for h, remembered in saved.history.items()
            }

    def send(self, event: str, /, **data: Any) -> None:
        # Declared events reuse one native name string: its hash is computed once, not on
        # every lookup the engine makes with it.
        native = self._events.get(event) or EVENT_PREFIX + event
        if data:
            self.native.send(native, _data=data)
        else:  # one keyword less for every callback's signature binding
            self.native.send(native)

    @property
    def configuration(self) -> frozenset[str]:
        values = self.native.configuration_values
        if self._spec_ids is None:
            return frozenset(values)
        return frozenset(self._spec_ids.get(v, v) for v in values)

    @property
    def context(self) -> dict[str, Any]:
        return self._model.context

    @property
    def is_terminated(self) -> bool:
        return bool(self.native.is_terminated)

    def _spec_id(self, native: str) -> str:
        return native if self._spec_ids is None else self._spec_ids.get(native, native)

    def save(self) -> MachineState:
        history = {self._spec_id(hid): tuple(self._spec_id(s.value) for s in states)
                   for hid, states in self.native.history_values.items()}
        return MachineState(tuple(self._spec_id(v) for v in self.native.configuration_values),
                            history)

    def take_timer_changes(self) -> list[tuple[bool, str]]:
        log = self._model.timer_log
        self._model.timer_log = []
        return log


def _class_name(machine: str) -> str:
    words = "".join(c if c.isalnum() else " " for c in machine).split()
    name = "".join(w[:1].upper() + w[1:] for w in words) or "Machine"
    return name if name.isidentifier() else f"M{name}"


def _check(ir: MachineIR) -> None:
    """What python-statemachine refuses outright, reported at the spec's line."""
    problems = [
        error("M207", f"final state {t.source!r} cannot have outgoing transitions",
              t.mark_of("event"))
        for state in ir.states.values() if state.is_final for t in state.transitions
    ]
    if problems:
        raise SpecError(problems)


class _Builder:
    def __init__(self, ir: MachineIR) -> None:
        self.ir = ir
        self.states: dict[str, State] = {}
        self.events: dict[str, Event] = {}

    def state(self, state: StateIR) -> State:
        ir = self.ir
        native_id = native_state_id(state.id)
        if state.kind is StateKind.HISTORY:
            history = HistoryState(name=state.id, value=native_id, type=state.history or "shallow")
            return history._set_id(native_id)
        children = [self.states[c] for c in state.children if not ir.states[c].is_history]
        histories = [self.states[c] for c in state.children if ir.states[c].is_history]
        built = State(
            name=state.id,
            value=native_id,
            initial=initial_child(ir, state.parent) == state.id,
            final=state.kind is StateKind.FINAL,
            parallel=state.kind is StateKind.PARALLEL,
            states=children or None,
            history=histories or None,  # type: ignore[arg-type]
            enter=self._enter(state) or None,
            exit=self._exit(state) or None,
        )
        return built._set_id(native_id)

    def _tracked(self, state: StateIR) -> bool:
        """A state whose entries and exits the runtime hears of: it arms timers (``after``)
        or starts an invoke, each entry anew (a re-entry in one step included)."""
        return state.invoke is not None or any(
            t.kind is TransitionKind.AFTER for t in state.transitions)

    def _enter(self, state: StateIR) -> list[Any]:
        runs = _runs(entry_sites(state))
        return [_TimerTrack(state.id, True).run, *runs] if self._tracked(state) else runs

    def _exit(self, state: StateIR) -> list[Any]:
        runs = _runs(exit_sites(state))
        return [*runs, _TimerTrack(state.id, False).run] if self._tracked(state) else runs

    def event(self, name: str) -> Event:
        if name not in self.events:
            self.events[name] = SpecEvent(id=native_event(name), name=name)
        return self.events[name]

    def transitions(self, state: StateIR) -> None:
        source = self.states[state.id]
        for t in state.transitions:
            guard = guard_site(t)
            kwargs: dict[str, Any] = {
                "event": None if t.kind is TransitionKind.ALWAYS or t.event is None
                else self.event(t.event),
                "on": _runs(action_sites(t)) or None,
            }
            if guard is not None:
                hook = _Hook(guard).check
                kwargs["unless" if t.guard is not None and t.guard.negated else "cond"] = [hook]
            target = self.states[t.target] if t.target is not None else None
            source.to(target, **kwargs)

    def history_default(self, state: StateIR) -> None:
        default = state.default or initial_child(self.ir, state.parent)
        if default is not None and default in self.states:
            self.states[state.id].to(self.states[default])

    def build(self) -> type[StateChart[Any]]:
        ir = self.ir
        for sid in reversed(tuple(ir.states)):  # children before their parents
            self.states[sid] = self.state(ir.states[sid])
        for state in ir.states.values():
            if state.is_history:
                self.history_default(state)
            else:
                self.transitions(state)
        name = _class_name(ir.name)
        attrs: dict[str, Any] = {
            "__module__": __name__,
            "__qualname__": name,
            "__doc__": ir.description or f"The {ir.name!r} machine, compiled by interlock.",
            "catch_errors_as_events": False,
            "allow_event_without_transition": True,
            "validate_disconnected_states": False,
            "validate_trap_states": False,
            "validate_final_reachability": False,
        }
        for sid in ir.top:
            attrs[native_state_id(sid)] = self.states[sid]
        chart = cast("type[StateChart[Any]]", StateMachineMetaclass(name, (StateChart,), attrs))
        # python-statemachine numbers document_order per nesting level, so siblings of
        # different depths tie; number them in true document order instead.
        for order, sid in enumerate(ir.states, start=1):
            self.states[sid].document_order = order
        return chart


def build_chart(ir: MachineIR) -> type[StateChart[Any]]:
    """The StateChart subclass for a machine, built once per IR (:class:`PerIR`); each
    instance brings its own bindings, and unbound names raise when reached."""
    return _charts(ir)


def _build(ir: MachineIR) -> type[StateChart[Any]]:
    _check(ir)
    return _Builder(ir).build()


_charts = PerIR(_build)


def compile_statemachine(ir: MachineIR, bindings: Bindings | None = None) -> CompiledMachine:
    """Compile a machine (already linted) for python-statemachine."""
    chart = build_chart(ir)
    bound = dict(bindings or {})
    renamed = {native_state_id(s): s for s in ir.states if native_state_id(s) != s}
    spec_ids = renamed or None
    events = {e: native_event(e) for e in (*ir.events, *ir.timer_events)}

    def factory(context: dict[str, Any]) -> StateChartInstance:
        return StateChartInstance(chart, context, spec_ids, events, bound)

    def restorer(context: dict[str, Any], saved: MachineState) -> StateChartInstance:
        unknown = [s for s in (*saved.configuration, *saved.history) if s not in ir.states]
        if unknown:
            raise ValueError(f"the saved configuration names states {ir.name!r} does not "
                             f"have: {', '.join(unknown)}")
        return StateChartInstance(chart, context, spec_ids, events, bound, saved)

    return CompiledMachine(ir=ir, target=TARGET, native=chart, factory=factory,
                           restorer=restorer)
