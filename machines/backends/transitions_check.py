"""What the transitions backend refuses (B301), each found by running the same traces
through both backends (tests/test_differential.py) and reported at the spec's line.

transitions' ``HierarchicalMachine`` selects, exits and enters states by its own rules.
Where those rules differ from python-statemachine's (SCXML), compiling would give a
machine that behaves differently, so the backend refuses:

* ``invoke:`` (an agent run while a state is active): in this project the engine that
  starts, journals and cancels invocations runs statemachine-compiled machines only,
  so a transitions-compiled machine would have nothing to run its agents;
* history states (no equivalent);
* eventless (``always``) transitions (no equivalent);
* wildcard events (``*``, ``x.*``, a trailing ``.``): events are matched by exact name;
* an event whose dotted prefix is another declared event (``done`` and ``done.ok``):
  python-statemachine matches ``done.ok`` with both, transitions with one;
* one event handled in two regions of a parallel state: python-statemachine takes both
  transitions in one microstep (all exits, then all actions, then all entries);
  transitions runs them one after the other, so the actions interleave;
* one event handled inside a region and by the parallel state or a state around it,
  one of the two targetless: python-statemachine picks a transition per active leaf, so
  the other regions' leaves reach the outer transition and both are taken (targetless
  ones never conflict); transitions takes the inner one only;
* a transition from a state to its own descendant: python-statemachine exits and
  re-enters the source (an external transition), transitions exits only below it;
* a transition between two regions of a parallel state, and a transition back to a
  region (or to a state that encloses the source inside a region): python-statemachine
  leaves and re-enters the whole parallel state, transitions only that region;
* a transition into a parallel state through one of its regions' descendants:
  transitions enters only the regions on the target's path, not the others.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterator

from interlock.machines.diagnostics import Diagnostic, Mark, error
from interlock.machines.ir import MachineIR, StateKind, TransitionIR, TransitionKind

CODE = "B301"
SEPARATOR = "/"


def _refuse(message: str, mark: Mark, hint: str | None = None) -> Diagnostic:
    return error(CODE, f"the transitions backend cannot express this: {message}", mark, hint)


def _lineage(ir: MachineIR, state_id: str) -> tuple[str, ...]:
    """The state and its proper ancestors, nearest first."""
    return (state_id, *ir.ancestors(state_id))


def _region_of(ir: MachineIR, state_id: str, parallel: str) -> str | None:
    """The child of ``parallel`` whose subtree holds ``state_id`` (None if outside)."""
    for node in _lineage(ir, state_id):
        if ir.states[node].parent == parallel:
            return node
    return None


def _event_transitions(ir: MachineIR) -> Iterator[TransitionIR]:
    for t in ir.transitions():
        if t.kind is not TransitionKind.ALWAYS and t.event is not None:
            yield t


def _structure(ir: MachineIR) -> Iterator[Diagnostic]:
    for state in ir.states.values():
        if state.invoke is not None:
            yield _refuse(
                f"`invoke:` in state {state.id!r}", state.invoke.mark,
                "the transitions backend has no runtime in this project to start, journal "
                "and cancel invoked agents; compile for statemachine (the default)")
        if state.is_history:
            yield _refuse(f"history state {state.id!r}", state.mark,
                          "compile for statemachine, or drop the history state")
        elif state.id and SEPARATOR in state.id:
            yield _refuse(f"state id {state.id!r} contains {SEPARATOR!r}", state.mark)
    for t in ir.transitions():
        if t.kind is TransitionKind.ALWAYS:
            yield _refuse(f"eventless (always) transition in state {t.source!r}", t.mark)


def _events(ir: MachineIR) -> Iterator[Diagnostic]:
    first: dict[str, TransitionIR] = {}
    for t in _event_transitions(ir):
        assert t.event is not None
        first.setdefault(t.event, t)
    names = set(first)
    for name, t in first.items():
        tokens = name.split(".")
        if "*" in name or "" in tokens:
            yield _refuse(f"wildcard event {name!r}", t.mark_of("event"),
                          "transitions matches events by exact name")
            continue
        for k in range(1, len(tokens)):
            prefix = ".".join(tokens[:k])
            if prefix in names:
                yield _refuse(
                    f"event {name!r} is also matched by the transitions on {prefix!r} "
                    "(dotted prefix)", t.mark_of("event"),
                    "rename one of the events so that neither is a dotted prefix of the other")
                break


def _regions(ir: MachineIR) -> Iterator[Diagnostic]:
    for parallel in ir.states.values():
        if parallel.kind is not StateKind.PARALLEL:
            continue
        seen: dict[str, str] = {}
        reported: set[str] = set()
        by_region: dict[str, list[TransitionIR]] = defaultdict(list)
        for t in _event_transitions(ir):
            region = _region_of(ir, t.source, parallel.id)
            if region is not None:
                by_region[region].append(t)
        for region in parallel.children:
            for t in by_region[region]:
                assert t.event is not None
                other = seen.setdefault(t.event, region)
                if other != region and t.event not in reported:
                    reported.add(t.event)
                    yield _refuse(
                        f"event {t.event!r} is handled in two regions of parallel state "
                        f"{parallel.id!r} ({other!r} and {region!r})", t.mark_of("event"),
                        "python-statemachine takes both transitions in one step; "
                        "use distinct events per region")
        yield from _outer_and_region(ir, parallel.id, by_region, reported)


def _outer_and_region(
    ir: MachineIR, parallel: str, by_region: dict[str, list[TransitionIR]], reported: set[str],
) -> Iterator[Diagnostic]:
    """An event handled inside one region and by the parallel state (or a state around it).

    python-statemachine picks a transition per active leaf: the leaves of the other
    regions reach the outer transition, and when either one is targetless the two do not
    conflict, so both are taken; transitions takes only the inner one.
    """
    outer: dict[str, list[TransitionIR]] = defaultdict(list)
    for t in _event_transitions(ir):
        if t.source in _lineage(ir, parallel):
            assert t.event is not None
            outer[t.event].append(t)
    for region, inner in by_region.items():
        for t in inner:
            assert t.event is not None
            around = outer.get(t.event, [])
            targetless = t.target is None or any(o.target is None for o in around)
            if around and targetless and t.event not in reported:
                reported.add(t.event)
                yield _refuse(
                    f"event {t.event!r} is handled in region {region!r} and around parallel "
                    f"state {parallel!r} (by {around[0].source!r}), one of them targetless",
                    t.mark_of("event"),
                    "python-statemachine takes both transitions in one step")


def _targets(ir: MachineIR) -> Iterator[Diagnostic]:
    for t in ir.transitions():
        if t.target is None or t.target not in ir.states or t.source not in ir.states:
            continue
        if ir.states[t.target].is_history:
            continue  # reported with the history state
        source_line = _lineage(ir, t.source)
        target_line = _lineage(ir, t.target)
        parent = ir.states[t.target].parent
        if t.target in source_line:
            if parent is not None and ir.states[parent].kind is StateKind.PARALLEL:
                yield _refuse(
                    f"transition from {t.source!r} to {t.target!r} re-enters a region of "
                    f"parallel state {parent!r}", t.mark,
                    "python-statemachine exits and re-enters the whole parallel state")
            continue
        if t.source in target_line:
            yield _refuse(
                f"transition from {t.source!r} to its descendant {t.target!r}", t.mark,
                "python-statemachine exits and re-enters the source; target a sibling "
                "or give the child its own transition")
            continue
        common = next((s for s in target_line if s in source_line), None)
        if common is not None and ir.states[common].kind is StateKind.PARALLEL:
            yield _refuse(
                f"transition from {t.source!r} to {t.target!r} crosses regions of parallel "
                f"state {common!r}", t.mark,
                "python-statemachine exits and re-enters the whole parallel state")
            continue
        for ancestor in target_line[1:]:
            if ancestor == common:
                break
            if ir.states[ancestor].kind is StateKind.PARALLEL:
                yield _refuse(
                    f"transition from {t.source!r} enters parallel state {ancestor!r} "
                    f"through {t.target!r}", t.mark,
                    "target the parallel state itself, so that every region is entered")
                break


def refusals(ir: MachineIR) -> list[Diagnostic]:
    """Every B301 diagnostic for a machine, in document order."""
    return [*_structure(ir), *_events(ir), *_regions(ir), *_targets(ir)]
