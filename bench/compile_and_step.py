"""Compile cost and stepping speed of interlock-compiled machines against hand-written ones.

For every built-in spec (specs/*.yaml) and a generated 50-state spec:

* load + lint + compile time, for each backend that accepts the spec;
* events/s of the compiled machine, and for polling_state and the 50-state spec the
  events/s of the same machine written by hand, in python-statemachine (a StateChart
  built from ``State``/``.to()``) and in transitions (a ``HierarchicalMachine``), all in
  this one process, with the ratio compiled / hand-written (goal: >= 0.95).

Guards and actions do the same trivial work everywhere (count a call); before timing,
each hand-written machine is checked against the compiled one on the same trace.

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
from typing import Any

from statemachine import State, StateChart
from transitions.extensions.nesting import HierarchicalMachine, NestedState

from interlock.machines import Call, SpecError, build_ir, compile, lint, load, loads
from interlock.machines.backends.base import CompiledMachine, MachineInstance

ROOT = Path(__file__).resolve().parent.parent
TARGETS = ("statemachine", "transitions")

# -- the same trivial bindings everywhere -------------------------------------------------

GUARDS = {"document_complete": True, "silence_reached": False, "exit_ok": True, "ready": True}


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

POLL_TRACE = ("chunk", "poll", "marker", "silence", "chunk", "poll")
POLL_START = ("start",)


class HandPolling(StateChart):  # type: ignore[type-arg]
    """specs/polling_state.yaml written by hand in python-statemachine."""

    catch_errors_as_events = False
    validate_final_reachability = False

    calls = 0
    pending = State(initial=True)

    class active(State.Compound):  # the spec's state id
        receiving = State(initial=True)
        marker_seen = State(enter="reset_silence")

    completed = State(final=True, enter=["terminate_subagent", "build_result"])
    timeout = State(final=True, enter=["terminate_subagent", "build_result"])
    error = State(final=True, enter=["terminate_subagent", "build_result"])

    start = pending.to(active, on="spawn_subagent")
    poll = active.to(None, on="count_poll")
    exited = active.to(completed, cond="exit_ok", on="record_exit") | active.to(
        error, on="record_exit")
    spawn_failed = active.to(error, on="record_spawn_error")
    dispatch_timeout = active.to(timeout, on="note_dispatch_timeout")
    idle_timeout = active.receiving.to(timeout, on="note_idle_timeout")
    chunk = active.receiving.to(active.receiving, on="buffer_chunk") | active.marker_seen.to(
        active.receiving, on=["buffer_chunk", "clear_completion_detected"])
    marker = active.receiving.to(active.marker_seen, cond="document_complete",
                                 on="mark_completion_detected")
    silence = active.marker_seen.to(
        completed, cond="silence_reached", on=["count_silence", "note_marker_completion"]
    ) | active.marker_seen.to(None, on="count_silence")

    def on_enter_active(self) -> None:
        self.calls += 1  # start_clock

    def on_exit_active(self) -> None:
        self.calls += 1  # stop_clock

    def _act(self) -> None:
        self.calls += 1

    spawn_subagent = count_poll = record_exit = record_spawn_error = _act
    note_dispatch_timeout = note_idle_timeout = buffer_chunk = _act
    clear_completion_detected = mark_completion_detected = reset_silence = _act
    count_silence = note_marker_completion = terminate_subagent = build_result = _act

    def exit_ok(self) -> bool:
        return True

    def document_complete(self) -> bool:
        return True

    def silence_reached(self) -> bool:
        return False


def hand_polling_transitions() -> tuple[HandModel, Callable[[str], Any]]:
    model = HandModel()
    finals = [{"name": n, "final": True, "on_enter": ["act", "act"]}
              for n in ("completed", "timeout", "error")]
    states = ["pending",
              {"name": "active", "initial": "receiving", "on_enter": "act", "on_exit": "act",
               "children": ["receiving", {"name": "marker_seen", "on_enter": "act"}]},
              *finals]
    a, r, m = "active", "active/receiving", "active/marker_seen"
    transitions = [
        {"trigger": "start", "source": "pending", "dest": a, "after": "act"},
        {"trigger": "poll", "source": a, "dest": None, "after": "act"},
        {"trigger": "exited", "source": a, "dest": "completed", "conditions": "yes",
         "after": "act"},
        {"trigger": "exited", "source": a, "dest": "error", "after": "act"},
        {"trigger": "spawn_failed", "source": a, "dest": "error", "after": "act"},
        {"trigger": "dispatch_timeout", "source": a, "dest": "timeout", "after": "act"},
        {"trigger": "idle_timeout", "source": r, "dest": "timeout", "after": "act"},
        {"trigger": "chunk", "source": r, "dest": r, "after": "act"},
        {"trigger": "chunk", "source": m, "dest": r, "after": ["act", "act"]},
        {"trigger": "marker", "source": r, "dest": m, "conditions": "yes", "after": "act"},
        {"trigger": "silence", "source": m, "dest": "completed", "conditions": "no",
         "after": ["act", "act"]},
        {"trigger": "silence", "source": m, "dest": None, "after": "act"},
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


def same_run(compiled: MachineInstance, hand_send: Callable[[str], Any],
             hand_config: Callable[[], set[str]], trace: Iterable[str]) -> bool:
    for event in trace:
        compiled.send(event)
        hand_send(event)
        if set(compiled.configuration) != hand_config():
            return False
    return True


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
    cases = [("polling_state", (ROOT / "specs" / "polling_state.yaml").read_text(),
              POLL_START, POLL_TRACE),
             ("ring50", ring_spec(), (), RING_TRACE)]
    ok = True
    for name, text, prefix, trace in cases:
        # python-statemachine
        compiled = compiled_instance(text, "statemachine")
        hand: Any = (HandPolling if name == "polling_state" else hand_ring_chart())()
        for event in prefix:
            compiled.send(event)
            hand.send(event)
        chart = hand

        def chart_config(chart: Any = chart) -> set[str]:
            return set(chart.configuration_values)

        agree = same_run(compiled, hand.send, chart_config, trace * 3)
        c, h = paired_rates(compiled.send, hand.send, trace, events, repeats)
        ok &= agree
        print(f"{name:<20}{'statemachine':<14}{c:>12,.0f}{h:>12,.0f}{c / h:>8.2f}"
              + ("" if agree else "  (hand-written differs!)"))
        # transitions
        tcompiled = compiled_instance(text, "transitions")
        model, trigger = (hand_polling_transitions() if name == "polling_state"
                          else hand_ring_transitions())
        for event in prefix:
            tcompiled.send(event)
            trigger(event)

        def hand_config(model: Any = model) -> set[str]:
            value = model.state
            paths = [value] if isinstance(value, str) else value
            return {part for path in paths for part in path.split("/")}

        agree = same_run(tcompiled, trigger, hand_config, trace * 3)
        c, h = paired_rates(tcompiled.send, trigger, trace, events, repeats)
        ok &= agree
        print(f"{name:<20}{'transitions':<14}{c:>12,.0f}{h:>12,.0f}{c / h:>8.2f}"
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
