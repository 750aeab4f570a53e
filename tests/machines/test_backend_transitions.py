"""The transitions backend: the shared features, and each B301 refusal at its line:col.

Every refusal is also shown to be necessary: built anyway (``check=False``), the
transitions machine behaves differently from python-statemachine on a short trace.
"""

from __future__ import annotations

import textwrap
from typing import Any

import pytest
from transitions.extensions import HierarchicalMachine

from interlock.machines import SpecError, build_ir, compile, loads
from interlock.machines.backends.transitions import (
    Machine,
    TransitionsInstance,
    build_plan,
)

from support.backend_features import (  # noqa: F401  (shared tests, run here for this target)
    PARALLEL,
    test_after_transitions_are_timer_events,
    test_atomic_self_transition_exits_and_reenters,
    test_atomic_transitions_and_initial_configuration,
    test_binding_errors_propagate,
    test_call_carries_data_context_source_and_target,
    test_candidates_are_tried_in_order_and_negated_guards_invert,
    test_compound_enters_initial_child_and_reports_ancestors,
    test_compound_self_transition_restarts_at_initial_child,
    test_context_starts_from_defaults_and_is_per_instance,
    test_dotted_event_matches_by_dotted_prefix,
    test_final_state_inside_compound_does_not_terminate,
    test_instances_are_independent,
    test_leaving_parallel_exits_every_region_in_reverse_document_order,
    test_names_that_clash_with_library_attributes_work,
    test_parallel_enters_every_region_in_document_order,
    test_parallel_region_moves_alone,
    test_parent_transition_applies_in_child_and_exits_in_reverse_document_order,
    test_raised_events_run_before_the_next_external_event,
    test_targetless_transition_runs_actions_without_exit_or_entry,
    test_top_level_final_terminates_and_ignores_later_events,
    test_unbound_names_compile_and_raise_when_reached,
    test_unhandled_and_unknown_events_are_ignored,
)
from support.backend_helpers import Recorder, build, config


@pytest.fixture
def target() -> str:
    return "transitions"


def refusal(text: str) -> list[tuple[str, int, int, str]]:
    """(code, line, column, message) of each diagnostic compiling ``text`` for transitions."""
    spec = loads(textwrap.dedent(text), file="spec.yaml")
    with pytest.raises(SpecError) as info:
        compile(spec, "transitions")
    return [(d.code, d.mark.line, d.mark.column, d.message) for d in info.value.diagnostics]


def both(text: str, trace: list[str]) -> tuple[Any, Any]:
    """Run ``trace`` through statemachine and through transitions built without checks."""
    ir = build_ir(loads(textwrap.dedent(text)))
    runs = []
    for unchecked in (False, True):
        rec = Recorder()
        bindings = rec.bindings(ir.actions, ir.guards)
        if unchecked:
            instance: Any = TransitionsInstance(build_plan(ir, bindings, check=False), {})
        else:
            instance = compile(ir, "statemachine", bindings).new()
        for event in trace:
            instance.send(event)
        runs.append((config(instance), rec.names()))
    return runs[0], runs[1]


HISTORY = """\
machine: player
initial: playing
states:
  playing:
    initial: intro
    on: {pause: paused}
    states:
      memory: {type: history, default: intro}
      intro: {}
  paused:
    on: {resume: memory}
"""


def test_refuses_history_states_at_the_state() -> None:
    [(code, line, column, message)] = refusal(HISTORY)
    assert (code, line, column) == ("B301", 8, 7)
    assert "history state 'memory'" in message


def test_refuses_eventless_transitions_at_the_transition() -> None:
    text = """\
    machine: router
    initial: route
    states:
      route:
        always: {target: done}
      done: {type: final}
    """
    [(code, line, column, message)] = refusal(text)
    assert (code, line, column) == ("B301", 5, 13)
    assert "eventless" in message


WILDCARD = """\
machine: wild
initial: a
states:
  a: {on: {job.*: b}}
  b: {}
"""


def test_refuses_wildcard_events_at_the_event() -> None:
    [(code, line, column, message)] = refusal(WILDCARD)
    assert (code, line, column) == ("B301", 4, 12)
    assert "wildcard event 'job.*'" in message


def test_wildcard_refusal_is_necessary() -> None:
    statemachine, transitions = both(WILDCARD, ["job.done"])
    assert statemachine != transitions


PREFIX = """\
machine: prefix
initial: a
states:
  a:
    on:
      job: b
      job.done: c
  b: {}
  c: {}
"""


def test_refuses_events_whose_dotted_prefix_is_declared() -> None:
    [(code, line, column, message)] = refusal(PREFIX)
    assert (code, line, column) == ("B301", 7, 7)
    assert "'job.done' is also matched by the transitions on 'job'" in message


def test_dotted_prefix_refusal_is_necessary() -> None:
    statemachine, transitions = both(PREFIX, ["job.done"])
    assert statemachine == (["b"], []) and transitions == (["c"], [])


TWO_REGIONS = """\
machine: par
initial: both
states:
  both:
    type: parallel
    states:
      left:
        initial: l1
        states:
          l1: {exit: [exit_l1], on: {go: {target: l2, actions: [act_l]}}}
          l2: {entry: [enter_l2]}
      right:
        initial: r1
        states:
          r1: {exit: [exit_r1], on: {go: {target: r2, actions: [act_r]}}}
          r2: {entry: [enter_r2]}
"""


def test_refuses_one_event_in_two_regions() -> None:
    [(code, line, column, message)] = refusal(TWO_REGIONS)
    assert (code, line, column) == ("B301", 15, 38)
    assert "'go' is handled in two regions of parallel state 'both'" in message


def test_two_regions_refusal_is_necessary() -> None:
    statemachine, transitions = both(TWO_REGIONS, ["go"])
    assert statemachine[0] == transitions[0]
    assert statemachine[1] == ["exit_r1", "exit_l1", "act_l", "act_r", "enter_l2", "enter_r2"]
    assert transitions[1] != statemachine[1]


OUTER = """\
machine: outer
initial: both
states:
  both:
    type: parallel
    on: {tick: {actions: [outer_tick]}}
    states:
      left:
        initial: l1
        states:
          l1: {on: {tick: {actions: [inner_tick]}}}
      right:
        initial: r1
        states:
          r1: {}
"""


def test_refuses_event_inside_a_region_and_around_it_when_targetless() -> None:
    [(code, line, column, message)] = refusal(OUTER)
    assert (code, line, column) == ("B301", 11, 21)
    assert "'tick' is handled in region 'left' and around parallel state 'both'" in message


def test_inside_and_around_refusal_is_necessary() -> None:
    statemachine, transitions = both(OUTER, ["tick"])
    assert statemachine[1] == ["inner_tick", "outer_tick"]
    assert transitions[1] == ["inner_tick"]


def test_accepts_event_inside_a_region_and_around_it_when_both_are_targeted() -> None:
    text = OUTER.replace("{actions: [outer_tick]}", "{target: done}").replace(
        "{actions: [inner_tick]}", "{target: l2}").replace(
        "l1: {on:", "l2: {}\n          l1: {on:") + "  done: {type: final}\n"
    compiled, _ = build(text, "transitions")
    m = compiled.new()
    m.send("tick")
    assert config(m) == ["both", "l2", "left", "r1", "right"]


DESCENDANT = """\
machine: ext
initial: outer
states:
  outer:
    entry: [enter_outer]
    exit: [exit_outer]
    initial: a
    on: {jump: b}
    states:
      a: {}
      b: {}
"""


def test_refuses_transition_to_a_descendant() -> None:
    [(code, line, column, message)] = refusal(DESCENDANT)
    assert (code, line, column) == ("B301", 8, 16)
    assert "from 'outer' to its descendant 'b'" in message


def test_descendant_refusal_is_necessary() -> None:
    statemachine, transitions = both(DESCENDANT, ["jump"])
    assert statemachine == (["b", "outer"], ["enter_outer", "exit_outer", "enter_outer"])
    assert transitions == (["b", "outer"], ["enter_outer"])


REGIONS = """\
machine: regions
initial: both
states:
  both:
    type: parallel
    states:
      left:
        initial: l1
        states:
          l1: {on: {l: l2}}
          l2: {on: {restart: left, cross: r1}}
      right:
        initial: r1
        states:
          r1: {on: {r: r2}}
          r2: {}
  outside:
    on: {enter: l2}
"""


def test_refuses_region_restart_crossing_and_entering_through_a_region() -> None:
    found = refusal(REGIONS)
    assert [(code, line, column) for code, line, column, _ in found] == [
        ("B301", 11, 30), ("B301", 11, 43), ("B301", 18, 17)]
    assert "re-enters a region of parallel state 'both'" in found[0][3]
    assert "crosses regions of parallel state 'both'" in found[1][3]
    assert "enters parallel state 'both' through 'l2'" in found[2][3]


@pytest.mark.parametrize("event", ["restart", "cross"])
def test_region_refusals_are_necessary(event: str) -> None:
    statemachine, transitions = both(REGIONS, ["l", "r", event])
    assert statemachine != transitions


def test_entering_through_a_region_refusal_is_necessary() -> None:
    text = REGIONS.replace("initial: both", "initial: outside")
    statemachine, transitions = both(text, ["enter"])
    assert statemachine[0] == ["both", "l2", "left", "r1", "right"]
    assert transitions[0] != statemachine[0]


def test_accepts_what_it_can_express_and_native_is_the_machine_kwargs() -> None:
    compiled, _ = build(PARALLEL, "transitions")
    native = compiled.native
    assert compiled.target == "transitions"
    assert native["initial"] == "both"
    assert [s["name"] for s in native["states"]] == ["both", "end"]
    assert {t["trigger"] for t in native["transitions"]} == {"l", "r", "stop"}
    assert {"source": "both/left/l1", "dest": "both/left/l2"}.items() <= next(
        t for t in native["transitions"] if t["trigger"] == "l").items()
    instance = compiled.new()
    assert isinstance(instance, TransitionsInstance)
    assert isinstance(instance.native, Machine)
    assert isinstance(instance.native, HierarchicalMachine)


def test_top_level_parallel_terminates_when_every_region_finishes() -> None:
    text = """\
    machine: join
    initial: both
    states:
      both:
        type: parallel
        states:
          left:
            initial: l1
            states: {l1: {on: {l: l2}}, l2: {type: final}}
          right:
            initial: r1
            states: {r1: {on: {r: r2}}, r2: {type: final}}
    """
    for target in ("statemachine", "transitions"):
        compiled, _ = build(text, target)
        m = compiled.new()
        m.send("l")
        assert not m.is_terminated
        m.send("r")
        assert m.is_terminated, target


def test_compile_for_transitions_reports_every_refusal_at_once() -> None:
    found = refusal(HISTORY.replace("pause: paused", "pause: paused, job.*: paused"))
    assert [line for _, line, _, _ in found] == [6, 8]


INVOKE = """\
machine: crew
initial: working
states:
  working:
    invoke: {agent: executor}
    on: {done.invoke.working: finished}
  finished: {type: final}
"""


def test_refuses_invoke_at_the_invoke() -> None:
    [(code, line, column, message)] = refusal(INVOKE)
    assert (code, line, column) == ("B301", 5, 5)
    assert "`invoke:` in state 'working'" in message
    spec = loads(INVOKE, file="spec.yaml")
    with pytest.raises(SpecError) as info:
        compile(spec, "transitions")
    hint = info.value.diagnostics[0].hint or ""
    assert "no runtime" in hint and "statemachine" in hint
