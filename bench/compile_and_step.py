"""Compile cost and stepping speed of interlock-compiled machines against hand-written ones.

For every built-in spec (specs/*.yaml) and a generated 50-state spec:

* load + lint + compile time, for each backend that accepts the spec;
* events/s of the compiled machine, and for polling_state and the 50-state spec the
  events/s of the same machine written by hand, in python-statemachine (a StateChart
  built from ``State``/``.to()``) and in transitions (a ``HierarchicalMachine``), all in
  this one process, with the ratio compiled / hand-written (goal: >= 0.95).

Guards and actions do the same trivial work everywhere (read a value, count a call);
before timing, each hand-written machine is checked against the compiled one on the same
trace, and for polling_state on its other paths too (POLL_PATHS): the same configuration
and the same number of actions run after every event.

Run: ``python bench/compile_and_step.py [--quick]``
"""

from __future__ import annotations

import argparse
import gc
import statistics
import sys
import time
from collections.abc import Callable, Iterable
from functools import reduce
from operator import or_
from pathlib import Path
from typing import Any, NamedTuple

from statemachine import State, StateChart
from transitions.extensions.nesting import HierarchicalMachine, NestedState

from interlock.machines import Call, SpecError, build_ir, compile, lint, load, loads
from interlock.machines.backends.base import CompiledMachine, MachineInstance

ROOT = Path(__file__).resolve().parent.parent
TARGETS = ("statemachine", "transitions")

# -- the same trivial bindings everywhere -------------------------------------------------

# Guard values while timing; a path script (Step) may change them until it ends.
GUARDS = {"started": True, "is_stdout": True, "document_ended": False,
          "document_confirmed": False, "document_complete": True, "silence_reached": False,
          "exit_ok": True, "ready": True}
Step = str | dict[str, bool]  # an event to send, or guard values from then on


def bindings_for(names: Iterable[str], guards: Iterable[str]) -> dict[str, Callable[[Call], Any]]:
    def action(call: Call) -> None:
        call.context["calls"] += 1

    def guard(call: Call) -> bool:
        return GUARDS.get(call.name, True)

    out: dict[str, Callable[[Call], Any]] = dict.fromkeys(names, action)
    out.update(dict.fromkeys(guards, guard))
    return out


# -- the generated 50-state spec ------------------------------------------------------------

PHASES, STEPS = 5, 9  # 5 compound phases of 9 atomic steps: 50 states


def ring_spec() -> str:
    lines = ["machine: ring50", "initial: p0", "states:"]
    for p in range(PHASES):
        lines += [f"  p{p}:", f"    initial: p{p}s0", "    entry: [enter_phase]",
                  "    exit: [leave_phase]", "    on:", "      tick: {actions: [count]}",
                  "    states:"]
        for s in range(STEPS):
            if s < STEPS - 1:
                target, extra = f"p{p}s{s + 1}", ""
            else:
                target, extra = f"p{(p + 1) % PHASES}", ", guard: ready"
            lines.append(f"      p{p}s{s}: {{on: {{next: {{target: {target}, "
                         f"actions: [step]{extra}}}}}}}")
    return "\n".join(lines) + "\n"


RING_TRACE = ("next", "tick")


class HandRingChart(StateChart):  # type: ignore[type-arg]
    """The 50-state ring written directly with State/.to() (built by hand_ring_chart)."""

    catch_errors_as_events = False


def hand_ring_chart() -> type[StateChart]:  # type: ignore[type-arg]
    """python-statemachine by hand: State objects, .to() transitions, methods as callbacks."""
    phases: list[State] = []
    steps: list[list[State]] = []
    for p in range(PHASES):
        children = [State(f"p{p}s{s}", initial=s == 0) for s in range(STEPS)]
        for s, child in enumerate(children):
            child._set_id(f"p{p}s{s}")
        steps.append(children)
        phases.append(State(f"p{p}", initial=p == 0, states=children,
                            enter="enter_phase", exit="leave_phase"))
    nexts, ticks = [], []
    for p, children in enumerate(steps):
        for s, child in enumerate(children[:-1]):
            nexts.append(child.to(children[s + 1], on="step"))
        nexts.append(children[-1].to(phases[(p + 1) % PHASES], cond="ready", on="step"))
        ticks.append(phases[p].to(None, on="count"))

    def act(self: Any) -> None:
        self.calls += 1

    def ready(self: Any) -> bool:
        return True

    namespace: dict[str, Any] = {f"p{p}": phase for p, phase in enumerate(phases)}
    namespace.update(
        next=reduce(or_, nexts), tick=reduce(or_, ticks), calls=0,
        enter_phase=act, leave_phase=act, step=act, count=act, ready=ready,
        validate_disconnected_states=False, validate_trap_states=False,
    )
    return type("HandRing", (HandRingChart,), namespace)


class SlashState(NestedState):
    separator = "/"


class HandHSM(HierarchicalMachine):
    state_cls = SlashState


class HandModel:
    """The model of a hand-written transitions machine: callbacks are its methods."""

    def __init__(self) -> None:
        self.calls = 0

    def act(self) -> None:
        self.calls += 1

    def yes(self) -> bool:
        return True

    def no(self) -> bool:
        return False


def hand_ring_transitions() -> tuple[HandModel, Callable[[str], Any]]:
    model = HandModel()
    states = [{"name": f"p{p}", "initial": f"p{p}s0", "on_enter": "act", "on_exit": "act",
               "children": [f"p{p}s{s}" for s in range(STEPS)]} for p in range(PHASES)]
    transitions: list[dict[str, Any]] = []
    for p in range(PHASES):
        for s in range(STEPS - 1):
            transitions.append({"trigger": "next", "source": f"p{p}/p{p}s{s}",
                                "dest": f"p{p}/p{p}s{s + 1}", "after": "act"})
        transitions.append({"trigger": "next", "source": f"p{p}/p{p}s{STEPS - 1}",
                            "dest": f"p{(p + 1) % PHASES}", "conditions": "yes", "after": "act"})
        transitions.append({"trigger": "tick", "source": f"p{p}", "dest": None, "after": "act"})
    HandHSM(model=model, states=states, transitions=transitions, initial="p0",
            auto_transitions=False)
    return model, model.trigger  # type: ignore[attr-defined]


# -- polling_state by hand -----------------------------------------------------------------

# After POLL_START the machine is in active/collecting/receiving (the chunk finds the agent
# started); each round of POLL_TRACE takes a silent poll into marker_seen (no end marker,
# document not yet confirmed), counts one more, ignores a marker that closes nothing, and
# goes back to receiving on more stdout.
POLL_START = ("start", "chunk")
POLL_TRACE = ("chunk", "poll", "marker", "silence", "silence", "marker", "chunk", "poll")
# The other paths, checked once before timing, each from a fresh pair of machines; a dict
# sets guard values from there on. Timer events go by the compiled names (HAND_EVENTS).
POLL_PATHS: tuple[tuple[Step, ...], ...] = (
    ("start", {"started": False}, "chunk", "poll", "chunk", {"started": True}, "chunk",
     "chunk", "marker", {"document_ended": True}, "marker"),
    ("start", {"document_complete": False}, "silence", {"document_complete": True},
     "silence", {"is_stdout": False}, "chunk", "silence", {"is_stdout": True}, "chunk",
     {"document_confirmed": True}, "silence"),
    ("start", "chunk", "silence", "silence", {"silence_reached": True}, "silence"),
    ("start", "chunk", "silence", "poll", {"document_ended": True}, "marker"),
    ("start", "chunk", "silence", "chunk", "after.receiving.0"),
    ("start", {"started": False}, "chunk", "after.active.0"),
    ("start", "chunk", "silence", "exited"),
    ("start", "chunk", {"exit_ok": False}, "exited"),
    ("start", "spawn_failed"),
)
HAND_EVENTS = {"after.active.0": "dispatch_timeout", "after.receiving.0": "idle_timeout"}


class PollingGuards:
    """polling_state's guards, reading GUARDS, for both hand-written machines."""

    def exit_ok(self) -> bool:
        return GUARDS["exit_ok"]

    def started(self) -> bool:
        return GUARDS["started"]

    def is_stdout(self) -> bool:
        return GUARDS["is_stdout"]

    def document_ended(self) -> bool:
        return GUARDS["document_ended"]

    def document_confirmed(self) -> bool:
        return GUARDS["document_confirmed"]

    def document_complete(self) -> bool:
        return GUARDS["document_complete"]

    def silence_reached(self) -> bool:
        return GUARDS["silence_reached"]


class HandPolling(PollingGuards, StateChart):  # type: ignore[type-arg]
    """specs/polling_state.yaml written by hand in python-statemachine."""

    catch_errors_as_events = False
    validate_final_reachability = False

    calls = 0
    pending = State(initial=True)

    class active(State.Compound):  # the spec's state id
        class collecting(State.Compound, initial=True):
            starting = State(initial=True)
            receiving = State()

        marker_seen = State()

    completed = State(final=True, enter=["terminate_subagent", "build_result"])
    timeout = State(final=True, enter=["terminate_subagent", "build_result"])
    error = State(final=True, enter=["terminate_subagent", "build_result"])

    start = pending.to(active, on="spawn_subagent")
    poll = active.to(None, on="count_poll")  # type: ignore[arg-type]
    exited = (
        active.to(completed, cond="exit_ok", on="record_exit")  # type: ignore[operator]
        | active.to(error, on="record_exit")
    )
    spawn_failed = active.to(error, on="record_spawn_error")
    dispatch_timeout = active.to(timeout, on="note_dispatch_timeout")
    idle_timeout = active.collecting.receiving.to(timeout, on="note_idle_timeout")
    chunk = (
        active.collecting.starting.to(active.collecting.receiving, cond="started",
                                      on="buffer_chunk")
        | active.collecting.starting.to(None, on="buffer_chunk")
        | active.collecting.receiving.to(active.collecting.receiving, on="buffer_chunk")
        | active.marker_seen.to(active.collecting.receiving, cond="is_stdout",
                                on=["buffer_chunk", "clear_completion_detected"])
        | active.marker_seen.to(None, on="buffer_chunk")
    )
    marker = active.collecting.to(
        completed, cond="document_ended",
        on=["mark_completion_detected", "note_marker_completion"],
    ) | active.marker_seen.to(completed, cond="document_ended", on="note_marker_completion")
    silence = (
        active.collecting.to(completed, cond="document_confirmed",  # type: ignore[operator]
                             on=["mark_completion_detected", "count_silence",
                                 "note_marker_completion"])
        | active.collecting.to(active.marker_seen, cond="document_complete",
                               on=["mark_completion_detected", "count_silence"])
        | active.marker_seen.to(completed, cond="silence_reached",
                                on=["count_silence", "note_marker_completion"])
        | active.marker_seen.to(None, on="count_silence")
    )

    def on_enter_active(self) -> None:
        self.calls += 1  # start_clock

    def on_exit_active(self) -> None:
        self.calls += 1  # stop_clock

    def _act(self) -> None:
        self.calls += 1

    spawn_subagent = count_poll = record_exit = record_spawn_error = _act
    note_dispatch_timeout = note_idle_timeout = buffer_chunk = _act
    clear_completion_detected = mark_completion_detected = _act
    count_silence = note_marker_completion = terminate_subagent = build_result = _act



class HandPollingModel(PollingGuards, HandModel):
    """The model of hand_polling_transitions: polling_state's guards by name."""


def hand_polling_transitions() -> tuple[HandModel, Callable[[str], Any]]:
    model = HandPollingModel()
    finals = [{"name": n, "final": True, "on_enter": ["act", "act"]}
              for n in ("completed", "timeout", "error")]
    states = ["pending",
              {"name": "active", "initial": "collecting", "on_enter": "act", "on_exit": "act",
               "children": [{"name": "collecting", "initial": "starting",
                             "children": ["starting", "receiving"]},
                            "marker_seen"]},
              *finals]
    a, c, m = "active", "active/collecting", "active/marker_seen"
    s, r = "active/collecting/starting", "active/collecting/receiving"
    transitions: list[dict[str, Any]] = [
        {"trigger": "start", "source": "pending", "dest": a, "after": "act"},
        {"trigger": "poll", "source": a, "dest": None, "after": "act"},
        {"trigger": "exited", "source": a, "dest": "completed", "conditions": "exit_ok",
         "after": "act"},
        {"trigger": "exited", "source": a, "dest": "error", "after": "act"},
        {"trigger": "spawn_failed", "source": a, "dest": "error", "after": "act"},
        {"trigger": "dispatch_timeout", "source": a, "dest": "timeout", "after": "act"},
        {"trigger": "marker", "source": c, "dest": "completed", "conditions": "document_ended",
         "after": ["act", "act"]},
        {"trigger": "silence", "source": c, "dest": "completed",
         "conditions": "document_confirmed", "after": ["act", "act", "act"]},
        {"trigger": "silence", "source": c, "dest": m, "conditions": "document_complete",
         "after": ["act", "act"]},
        {"trigger": "chunk", "source": s, "dest": r, "conditions": "started", "after": "act"},
        {"trigger": "chunk", "source": s, "dest": None, "after": "act"},
        {"trigger": "chunk", "source": r, "dest": r, "after": "act"},
        {"trigger": "idle_timeout", "source": r, "dest": "timeout", "after": "act"},
        {"trigger": "chunk", "source": m, "dest": r, "conditions": "is_stdout",
         "after": ["act", "act"]},
        {"trigger": "chunk", "source": m, "dest": None, "after": "act"},
        {"trigger": "silence", "source": m, "dest": "completed", "conditions": "silence_reached",
         "after": ["act", "act"]},
        {"trigger": "silence", "source": m, "dest": None, "after": "act"},
        {"trigger": "marker", "source": m, "dest": "completed", "conditions": "document_ended",
         "after": "act"},
    ]
    HandHSM(model=model, states=states, transitions=transitions, initial="pending",
            auto_transitions=False)
    return model, model.trigger  # type: ignore[attr-defined]


# -- measuring -------------------------------------------------------------------------------


def _rate(send: Callable[[str], Any], trace: tuple[str, ...], loops: int) -> float:
    gc.collect()
    started = time.perf_counter()
    for _ in range(loops):
        for event in trace:
            send(event)
    return loops * len(trace) / (time.perf_counter() - started)


def best_rate(send: Callable[[str], Any], trace: tuple[str, ...], events: int,
              repeats: int) -> float:
    """Events per second, best of ``repeats`` runs of ``events`` events."""
    loops = max(1, events // len(trace))
    return max(_rate(send, trace, loops) for _ in range(repeats))


def paired_rates(compiled: Callable[[str], Any], hand: Callable[[str], Any],
                 trace: tuple[str, ...], events: int, repeats: int) -> tuple[float, float]:
    """Best events/s of each, measured alternately so both see the same machine load."""
    loops = max(1, events // len(trace))
    pairs = [(_rate(compiled, trace, loops), _rate(hand, trace, loops)) for _ in range(repeats)]
    return max(c for c, _ in pairs), max(h for _, h in pairs)


def compile_time(text: str, file: str, target: str, runs: int) -> float:
    """Median seconds for loads + lint + compile."""
    times = []
    for _ in range(runs):
        started = time.perf_counter()
        spec = loads(text, file)
        ir = build_ir(spec)
        lint(ir)
        compile(ir, target, bindings_for(ir.actions, ir.guards))  # type: ignore[arg-type]
        times.append(time.perf_counter() - started)
    return statistics.median(times)


def compiled_instance(text: str, target: str) -> MachineInstance:
    ir = build_ir(loads(text))
    compiled: CompiledMachine = compile(ir, target, bindings_for(ir.actions, ir.guards))  # type: ignore[arg-type]
    return compiled.new({"calls": 0})


class Driver(NamedTuple):
    """A hand-written machine as the checks drive and read it."""

    send: Callable[[str], Any]
    configuration: Callable[[], set[str]]
    calls: Callable[[], int]


def chart_driver(chart: Any) -> Driver:
    return Driver(chart.send, lambda: set(chart.configuration_values), lambda: chart.calls)


def transitions_driver(model: Any, trigger: Callable[[str], Any]) -> Driver:
    def configuration() -> set[str]:
        value = model.state
        paths = [value] if isinstance(value, str) else value
        return {part for path in paths for part in path.split("/")}

    return Driver(trigger, configuration, lambda: model.calls)


def same_run(compiled: MachineInstance, hand: Driver, steps: Iterable[Step]) -> bool:
    """After every event, the same configuration and the same number of actions run."""
    timed = dict(GUARDS)
    try:
        for step in steps:
            if isinstance(step, dict):
                GUARDS.update(step)
                continue
            before = compiled.context["calls"] - hand.calls()
            compiled.send(step)
            hand.send(HAND_EVENTS.get(step, step))
            if (set(compiled.configuration) != hand.configuration()
                    or compiled.context["calls"] - hand.calls() != before):
                return False
        return True
    finally:
        GUARDS.update(timed)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer events, for a smoke run")
    args = parser.parse_args(argv)
    events, repeats, runs = (2_000, 3, 5) if args.quick else (6_000, 35, 30)

    specs: list[tuple[str, str, str]] = []  # (name, file, text)
    for path in sorted((ROOT / "specs").glob("*.yaml")):
        specs.append((path.stem, str(path), path.read_text()))
    specs.append(("ring50 (generated)", "<ring50>", ring_spec()))

    print(f"python {sys.version.split()[0]}; {events} events per run, best of {repeats}\n")
    print("Compile: load + lint + compile, median of", runs)
    print(f"{'spec':<24}{'states':>7}  {'statemachine':>14}{'transitions':>14}")
    for name, file, text in specs:
        try:
            states = len(build_ir(load(file) if file != "<ring50>" else loads(text)).states)
        except SpecError as exc:
            print(f"{name:<24} does not load: {exc.diagnostics[0]}")
            continue
        cells = []
        for target in TARGETS:
            try:
                cells.append(f"{compile_time(text, file, target, runs) * 1000:>11.2f} ms")
            except SpecError as exc:
                cells.append(f"{'refused ' + exc.diagnostics[0].code:>14}")
        print(f"{name:<24}{states:>7}  {cells[0]:>14}{cells[1]:>14}")

    print("\nStepping: events/s, compiled by interlock vs written by hand")
    header = f"{'machine':<20}{'backend':<14}{'compiled':>12}{'by hand':>12}{'ratio':>8}"
    print(header)
    print("-" * len(header))
    ring_chart = hand_ring_chart()
    cases: list[tuple[str, str, tuple[str, ...], tuple[str, ...], tuple[tuple[Step, ...], ...],
                      Callable[[], Driver], Callable[[], Driver]]] = [
        ("polling_state", (ROOT / "specs" / "polling_state.yaml").read_text(),
         POLL_START, POLL_TRACE, POLL_PATHS, lambda: chart_driver(HandPolling()),
         lambda: transitions_driver(*hand_polling_transitions())),
        ("ring50", ring_spec(), (), RING_TRACE, (), lambda: chart_driver(ring_chart()),
         lambda: transitions_driver(*hand_ring_transitions())),
    ]
    ok = True
    for name, text, prefix, trace, paths, *new_hands in cases:
        for target, new_hand in zip(TARGETS, new_hands, strict=True):
            # checked once, before timing: the timed machines through the prefix and the
            # trace three times, then each other path from fresh machines
            compiled, hand = compiled_instance(text, target), new_hand()
            agree = same_run(compiled, hand, prefix + trace * 3)
            for steps in paths:
                agree &= same_run(compiled_instance(text, target), new_hand(), steps)
            c, h = paired_rates(compiled.send, hand.send, trace, events, repeats)
            ok &= agree
            print(f"{name:<20}{target:<14}{c:>12,.0f}{h:>12,.0f}{c / h:>8.2f}"
                  + ("" if agree else "  (hand-written differs!)"))

    print("\nOther built-in specs, compiled (events/s over their declared events):")
    for name, file, text in specs[:-1]:
        if name == "polling_state":
            continue
        try:
            ir = build_ir(load(file))
            instance = compiled_instance(text, "statemachine")
        except SpecError as exc:
            print(f"  {name:<22} does not compile: {exc.diagnostics[0]}")
            continue
        trace = ir.events or ("noop",)
        rate = best_rate(instance.send, tuple(trace), events // 3, 3)
        print(f"  {name:<22}{rate:>12,.0f}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
