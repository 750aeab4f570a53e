"""Differential test: python-statemachine and transitions must agree on every trace.

For each machine the transitions backend accepts (random machines from the common
subset, and every built-in spec in specs/), TRACES_PER_SPEC seeded random event traces
run through both backends; after every event the configurations, termination and the
log of actions (name, event, source, target, data) must be equal. The generated machines
are a stress test: GENERATED_SPECS of them at the reduced size, four times as many under
INTERLOCK_STRESS=full (`make stress`, .ci/run); the built-in specs run in `make test`.

Guards are bound to a deterministic function of (guard name, events sent so far), so
how often a backend evaluates a guard does not matter. The action ``r1`` raises an
internal event once per external event, so raised-event handling is compared too.
"""

from __future__ import annotations

import itertools
import random
import zlib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, event, given, note, reject, settings
from hypothesis import strategies as st

from interlock.machines import Call, MachineIR, SpecError, build_ir, compile, load, loads
from interlock.machines.backends.base import CompiledMachine, MachineInstance
from interlock.machines.ir import TransitionKind

from support.stress import scaled

SPECS = Path(__file__).resolve().parents[2] / "specs"
TRACES_PER_SPEC = 200  # per machine; asserted by every test below
GENERATED_SPECS = scaled(10, 60)
MAX_TRACE = 20

EVENTS = ("a", "b", "c", "go.left", "go.right")
EXTRA_EVENTS = ("a.more", "go", "go.left.deep", "nothing")
GUARDS = ("g1", "g2", "!g1", "!g3")
ACTIONS = ("x1", "x2", "x3", "r1")
RAISED = "b"

LogEntry = tuple[str, str | None, str | None, str | None, tuple[tuple[str, Any], ...]]


# -- bindings -----------------------------------------------------------------------------


def guard_value(name: str, sent: int) -> bool:
    """Deterministic in (name, number of events sent so far)."""
    return zlib.crc32(f"{name}:{sent}".encode()) % 3 != 0


def make_bindings(ir: MachineIR) -> dict[str, Callable[[Call], Any]]:
    def guard(call: Call) -> bool:
        return guard_value(call.name, call.context["_sent"])

    def action(call: Call) -> None:
        call.context["_log"].append(
            (call.name, call.event, call.source, call.target, tuple(sorted(call.data.items()))))
        if call.name == "r1" and not call.context["_raised"]:
            call.context["_raised"] = True
            call.raise_event(RAISED, by="r1")

    bindings: dict[str, Callable[[Call], Any]] = dict.fromkeys(ir.guards, guard)
    bindings.update(dict.fromkeys(ir.actions, action))
    return bindings


# -- driving both backends -----------------------------------------------------------------


def alphabet(ir: MachineIR) -> list[str]:
    declared = {t.event for t in ir.transitions()
                if t.kind is not TransitionKind.ALWAYS and t.event is not None}
    dotted = {f"{e[:-2] if e.endswith('.*') else e}.more" for e in declared}
    return sorted(declared | dotted | set(EXTRA_EVENTS))


def start(compiled: CompiledMachine) -> MachineInstance:
    return compiled.new({"_log": [], "_sent": 0, "_raised": False})


def step(instance: MachineInstance, event: str, sent: int) -> None:
    instance.context["_sent"] = sent
    instance.context["_raised"] = False
    instance.send(event, seq=sent)


def snapshot(instance: MachineInstance) -> tuple[frozenset[str], bool, list[LogEntry]]:
    return instance.configuration, instance.is_terminated, list(instance.context["_log"])


def run_traces(ir: MachineIR, traces: int = TRACES_PER_SPEC, seed: int = 0) -> int:
    """Run ``traces`` random traces through both backends; returns how many ran."""
    assert traces >= 200
    bindings = make_bindings(ir)
    left = compile(ir, "statemachine", bindings)
    right = compile(ir, "transitions", bindings)
    events = alphabet(ir)
    rng = random.Random(seed)
    ran = 0
    for trace_no in range(traces):
        trace = [rng.choice(events) for _ in range(rng.randint(1, MAX_TRACE))]
        a, b = start(left), start(right)
        assert snapshot(a) == snapshot(b), f"trace {trace_no}: initial configuration differs"
        for sent, name in enumerate(trace, start=1):
            step(a, name, sent)
            step(b, name, sent)
            assert snapshot(a) == snapshot(b), (
                f"trace {trace_no} diverged after {trace[:sent]}:\n"
                f"statemachine: {snapshot(a)}\ntransitions:  {snapshot(b)}")
        ran += 1
    return ran


# -- random machines in the common subset ----------------------------------------------------


REGION_EVENTS = (("a", "go.left"), ("b", "go.right"))


class _Shape:
    """The state tree a generated machine is built on."""

    def __init__(self) -> None:
        self.parent: dict[str, str | None] = {}
        self.kind: dict[str, str] = {}
        self.region: dict[str, int | None] = {}  # which region of a parallel state, if any

    def lineage(self, sid: str) -> list[str]:
        out: list[str] = []
        node: str | None = sid
        while node is not None:
            out.append(node)
            node = self.parent[node]
        return out

    def plausible_target(self, source: str, target: str) -> bool:
        """Targets the transitions backend accepts from ``source`` (to keep most specs)."""
        source_line, target_line = self.lineage(source), self.lineage(target)
        if source in target_line[1:]:
            return False
        parent = self.parent[target]
        if target in source_line:
            return parent is None or self.kind[parent] != "parallel"
        common = next((n for n in target_line if n in source_line), None)
        below = target_line[1:target_line.index(common)] if common else target_line[1:]
        return all(self.kind[n] != "parallel" for n in [*below, *([common] if common else [])])


@st.composite
def machines(draw: st.DrawFn) -> dict[str, Any]:
    """A random machine: nested compound/parallel/final states, guarded and targetless
    transitions, entry/exit/transition actions, ``after`` transitions. Targets and
    events are biased towards what the transitions backend accepts."""
    ids = (f"s{i}" for i in itertools.count())
    shape = _Shape()

    def state(parent: str | None, depth: int, region: int | None,
              kind: str | None = None) -> tuple[str, dict[str, Any]]:
        sid = next(ids)
        if kind is None:
            choices = (["compound"] * 4 + ["parallel"] * 2 + ["atomic"] * 3 + ["final"]
                       if depth == 0 else
                       ["atomic"] * 5 + ["compound"] * 2 + ["final"] * 2
                       + (["parallel"] if region is None else [])
                       if depth == 1 else ["atomic"] * 3 + ["final"])
            kind = draw(st.sampled_from(choices))
        shape.parent[sid], shape.kind[sid], shape.region[sid] = parent, kind, region
        body: dict[str, Any] = {}
        if kind in ("final", "parallel"):
            body["type"] = kind
        if kind == "parallel":
            body["states"] = dict(state(sid, depth + 1, i, "compound") for i in range(2))
        elif kind == "compound":
            children = [state(sid, depth + 1, region) for _ in range(draw(st.integers(2, 3)))]
            body["states"] = dict(children)
            body["initial"] = children[draw(st.integers(0, len(children) - 1))][0]
        for hook in ("entry", "exit"):
            names = draw(st.lists(st.sampled_from(ACTIONS), max_size=2))
            if names:
                body[hook] = names
        return sid, body

    top = [state(None, 0, None) for _ in range(draw(st.integers(2, 4)))]
    states = dict(top)
    bodies: dict[str, dict[str, Any]] = {}

    def collect(children: dict[str, dict[str, Any]]) -> None:
        for sid, body in children.items():
            bodies[sid] = body
            collect(body.get("states", {}))

    collect(states)
    all_ids = list(shape.kind)

    def candidate(source: str) -> dict[str, Any]:
        cand: dict[str, Any] = {}
        if draw(st.booleans()):
            fitting = [t for t in all_ids if shape.plausible_target(source, t)]
            pool = fitting if fitting and draw(st.integers(0, 9)) > 0 else all_ids
            cand["target"] = draw(st.sampled_from(pool))
        guard = draw(st.sampled_from((None, None, *GUARDS)))
        if guard:
            cand["guard"] = guard
        actions = draw(st.lists(st.sampled_from(ACTIONS), max_size=2))
        if actions:
            cand["actions"] = actions
        return cand

    for sid, kind in shape.kind.items():
        if kind == "final":
            continue
        body = bodies[sid]
        region = shape.region[sid]
        pool = EVENTS if region is None else REGION_EVENTS[region]
        events = draw(st.lists(st.sampled_from(pool), max_size=2, unique=True))
        if events:
            body["on"] = {e: [candidate(sid) for _ in range(draw(st.integers(1, 2)))]
                          for e in events}
        if draw(st.integers(0, 3)) == 0:
            body["after"] = {"5s": [candidate(sid)]}
    live = [sid for sid, _ in top if shape.kind[sid] != "final"] or [top[0][0]]
    return {"machine": "generated", "initial": draw(st.sampled_from(live)), "states": states}


def features(ir: MachineIR) -> Iterator[str]:
    """What a generated machine exercises (reported by --hypothesis-show-statistics)."""
    kinds = {s.kind.value for s in ir.states.values()}
    yield from (f"has {kind}" for kind in sorted(kinds))
    if any(ir.states[s].kind.value == "parallel" for s in ir.top):
        yield "has top-level parallel"
    transitions = list(ir.transitions())
    if any(t.target is None for t in transitions):
        yield "has targetless"
    if any(t.kind is TransitionKind.AFTER for t in transitions):
        yield "has after"
    if any(t.guard is not None and t.guard.negated for t in transitions):
        yield "has negated guard"
    if "r1" in ir.actions:
        yield "has raising action"


def _accepted(spec_text: str) -> MachineIR | None:
    ir = build_ir(loads(spec_text))
    try:
        compile(ir, "transitions", make_bindings(ir))
    except SpecError as exc:
        if all(d.code == "B301" for d in exc.diagnostics):
            return None
        raise
    return ir


@pytest.mark.stress
@settings(max_examples=GENERATED_SPECS, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.filter_too_much, HealthCheck.too_slow])
@given(machines(), st.integers(0, 2**16))
def test_generated_machines_agree(machine: dict[str, Any], seed: int) -> None:
    text = yaml.safe_dump(machine, sort_keys=False)
    note(text)
    ir = _accepted(text)
    if ir is None:
        reject()
    for feature in features(ir):
        event(feature)
    assert run_traces(ir, TRACES_PER_SPEC, seed) == TRACES_PER_SPEC


# -- the built-in specs -----------------------------------------------------------------------


@pytest.mark.parametrize("path", sorted(SPECS.glob("*.yaml")), ids=lambda p: p.stem)
def test_builtin_spec_agrees(path: Path) -> None:
    try:
        spec = load(path)
        ir = build_ir(spec)
        compile(ir, "transitions", make_bindings(ir))
    except SpecError as exc:
        if all(d.code == "B301" for d in exc.diagnostics):
            pytest.skip(f"the transitions backend refuses {path.name}: {exc.diagnostics[0]}")
        pytest.fail(f"{path.name} does not compile:\n{exc}")
    assert run_traces(ir, TRACES_PER_SPEC, seed=len(path.stem)) == TRACES_PER_SPEC
