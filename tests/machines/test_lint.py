"""Lint, one check at a time: each code fires where it should and nowhere else."""

from __future__ import annotations

import textwrap
from collections.abc import Mapping
from pathlib import Path

import pytest

from interlock.machines import Diagnostic, Severity, SpecError, build_ir, lint, load, loads
from interlock.machines.templates import template_syntax_error

DESIGN_EXAMPLE = """\
machine: polling_state
version: 1
description: Adaptive sub-agent polling
context:
  poll_count: {type: int, default: 0}
  dispatch_timeout: {type: duration, default: 10m}
initial: pending
states:
  pending:
    on: {start: active}
  active:
    entry: [start_clock]
    after: {dispatch_timeout: timeout}
    on:
      chunk: {actions: [buffer_chunk]}
      exited:
        - {guard: exit_ok, target: completed}
        - {target: error}
  completed: {type: final}
  timeout:   {type: final}
  error:     {type: final}
"""


def run(text: str, bindings: Mapping[str, object] | None = None) -> list[Diagnostic]:
    return lint(loads(textwrap.dedent(text), "spec.yaml"), bindings)


def of(code: str, text: str, bindings: Mapping[str, object] | None = None) -> list[Diagnostic]:
    return [d for d in run(text, bindings) if d.code == code]


def at(code: str, text: str, bindings: Mapping[str, object] | None = None) -> list[tuple[int, int]]:
    """(line, column) of every diagnostic with ``code``."""
    return [(d.mark.line, d.mark.column) for d in of(code, text, bindings)]


def machine(states: str, head: str = "") -> str:
    """A spec from an indented ``states:`` block (and optional lines before it)."""
    return "machine: m\n" + textwrap.dedent(head) + "states:\n" + textwrap.indent(
        textwrap.dedent(states), "  ")


# -- the whole ------------------------------------------------------------------------


def test_the_design_example_is_clean() -> None:
    assert run(DESIGN_EXAMPLE) == []


def test_the_design_example_is_clean_with_its_bindings() -> None:
    names = ("start_clock", "buffer_chunk", "exit_ok")
    assert run(DESIGN_EXAMPLE, dict.fromkeys(names, object())) == []


def test_lint_takes_a_spec_or_its_ir() -> None:
    spec = loads(machine("a: {on: {go: nowhere}}\n"), "spec.yaml")
    assert lint(spec) == lint(build_ir(spec))
    assert [(d.code, d.mark.line, d.mark.column) for d in lint(spec)] == [("M201", 3, 16)]


def test_diagnostics_are_sorted_by_position() -> None:
    found = run(machine("""\
        a: {on: {go: zz}}
        b: {on: {go: yy}}
    """, "initial: a\n"))
    assert [d.mark for d in found] == sorted(d.mark for d in found)


@pytest.mark.parametrize(("code", "severity"), [
    ("M205", Severity.WARNING), ("M206", Severity.WARNING), ("M209", Severity.WARNING),
    ("M201", Severity.ERROR), ("M210", Severity.ERROR),
])
def test_severities(code: str, severity: Severity) -> None:
    spec = machine("""\
        a:
          on: {go: [b, c], bad: nowhere}
        b: {on: {back: a}}
        c: {}
        lost: {on: {go: a}}
        spin: {always: spin}
    """, "initial: a\n")
    found = of(code, spec)
    assert found
    assert {d.severity for d in found} == {severity}


# -- S104 identifiers -----------------------------------------------------------------


@pytest.mark.parametrize(("name", "why"), [
    ("class", "keyword"),
    ("None", "keyword"),
    ("__init", "'__'"),
    ("2nd", "letter"),
    ("front-door", "letter"),
    ("with space", "letter"),
])
def test_bad_state_ids(name: str, why: str) -> None:
    found = of("S104", machine(f"'{name}': {{type: final}}\n"))
    assert len(found) == 1
    assert name in found[0].message and why in found[0].message
    assert (found[0].mark.line, found[0].mark.column) == (3, 3)


@pytest.mark.parametrize("name", ["idle", "_private", "State2", "match", "a_b_c"])
def test_good_state_ids(name: str) -> None:
    assert of("S104", machine(f"{name}: {{type: final}}\n")) == []


def test_bad_names_everywhere_are_reported_where_written() -> None:
    spec = """\
        machine: my-machine
        context:
          __n: {type: int, default: 0}
        states:
          a:
            entry: [for]
            exit: [ok-exit]
            on:
              go: {target: b, guard: "!is-ready", actions: [do it]}
          b: {type: final}
    """
    assert at("S104", spec) == [(1, 10), (3, 3), (6, 12), (7, 11), (9, 30), (9, 52)]


def test_a_negated_guard_is_checked_without_its_bang() -> None:
    ok = machine("a: {on: {go: {target: b, guard: '!ready'}}}\nb: {type: final}\n")
    bare = machine("a: {on: {go: {target: b, guard: '!'}}}\nb: {type: final}\n")
    assert of("S104", ok) == []
    assert "is empty" in of("S104", bare)[0].message


def test_a_fix_is_suggested_for_bad_identifiers() -> None:
    [found] = of("S104", machine("waiting-for-input: {type: final}\n"))
    assert found.hint == "for example 'waiting_for_input'"


@pytest.mark.parametrize("event", ["go", "job.done", "job.*", "file-changed", "404", "a.b-c.d_e"])
def test_good_event_names(event: str) -> None:
    assert of("S104", machine(f"a: {{on: {{'{event}': b}}}}\nb: {{type: final}}\n")) == []


@pytest.mark.parametrize("event", ["go now", "job..done", "*", ".job", "job.", "job.*.x", "jöb"])
def test_bad_event_names(event: str) -> None:
    spec = machine(f"a:\n  on:\n    ok: b\n    '{event}': b\nb: {{type: final}}\n")
    found = of("S104", spec)
    assert [(d.mark.line, d.mark.column) for d in found] == [(6, 7)]
    assert repr(event) in found[0].message


def test_an_event_with_several_candidates_is_reported_once() -> None:
    spec = machine("a:\n  on:\n    bad name:\n      - {guard: g, target: b}\n      - b\n"
                   "b: {type: final}\n")
    assert at("S104", spec) == [(5, 7)]


# -- S105 / M212 delays ---------------------------------------------------------------


@pytest.mark.parametrize("key", ["500ms", "30s", "3m", "1h30m", "2d", "20", "2.5", "0"])
def test_durations_are_good_after_keys(key: str) -> None:
    spec = machine(f"a: {{after: {{{key}: b}}}}\nb: {{type: final}}\n")
    assert [d for d in run(spec) if d.code in ("S105", "M212")] == []


@pytest.mark.parametrize("key", ["5 minutes", "-3s", "3x", "1h 30m", "in.5s"])
def test_keys_that_are_neither_durations_nor_names(key: str) -> None:
    spec = machine(f"a:\n  after:\n    '{key}': b\nb: {{type: final}}\n")
    assert at("S105", spec) == [(5, 7)]
    assert of("M212", spec) == []


def test_a_delay_may_name_a_numeric_context_field() -> None:
    head = """\
        context:
          n: {type: int, default: 3}
          x: {type: float, default: 0.5}
          d: {type: duration, default: 2m}
          later: {type: duration}
        initial: a
    """
    spec = machine("a: {after: {n: b, x: b, d: b, later: b}}\nb: {type: final}\n", head)
    assert run(spec) == []


def test_a_delay_naming_no_field_suggests_a_close_one() -> None:
    head = "context:\n  poll_interval: {type: float, default: 1}\n"
    [found] = of("M212", machine("a: {after: {poll_intervall: b}}\nb: {type: final}\n", head))
    assert found.hint == "did you mean 'poll_interval'?"
    assert (found.mark.line, found.mark.column) == (5, 15)


@pytest.mark.parametrize(("field", "words"), [
    ("{type: str, default: x}", "of type str"),
    ("{type: bool, default: true}", "of type bool"),
    ("{type: duration, default: forever}", "not a valid delay"),
    ("{type: int, default: -5}", "not a valid delay"),
])
def test_a_delay_naming_an_unusable_field(field: str, words: str) -> None:
    spec = machine("a: {after: {t: b}}\nb: {type: final}\n", f"context:\n  t: {field}\n")
    [found] = of("M212", spec)
    assert words in found.message


# -- M201 targets ---------------------------------------------------------------------


def test_an_unknown_target_is_reported_at_the_target() -> None:
    spec = machine("closed:\n  on:\n    open: opend\nopened: {on: {close: closed}}\n",
                   "initial: closed\n")
    [found] = of("M201", spec)
    assert (found.mark.line, found.mark.column) == (6, 13)
    assert "'opend'" in found.message and "'closed'" in found.message
    assert found.hint == "did you mean 'opened'?"


def test_targets_in_every_kind_of_transition_are_checked() -> None:
    spec = machine("a:\n  on: {e: x1}\n  after: {1s: x2}\n  always: {guard: g, target: x3}\n"
                   "b: {type: final}\n", "initial: a\n")
    assert at("M201", spec) == [(5, 13), (6, 17), (7, 32)]


def test_nested_targets_are_states_too() -> None:
    spec = machine("""\
        a: {on: {go: deep}}
        box:
          initial: deep
          states:
            deep: {on: {out: a}}
    """, "initial: a\n")
    assert of("M201", spec) == []


HISTORY = """\
    stopped: {on: {play: playing, resume: hist}}
    playing:
      initial: intro
      on: {stop: stopped}
      states:
        intro: {on: {next: verse}}
        verse:
          initial: v1
          states:
            v1: {on: {next: v2}}
            v2: {on: {next: intro}}
        hist: {type: history, history: deep, default: DEFAULT}
"""


def test_a_history_default_may_be_any_state_inside_the_parent() -> None:
    for default in ("intro", "verse", "v2"):
        spec = machine(HISTORY.replace("DEFAULT", default), "initial: stopped\n")
        assert run(spec) == [], default


@pytest.mark.parametrize(("default", "words"), [
    ("stopped", "not inside 'playing'"),
    ("playing", "not inside 'playing'"),
    ("hist", "is itself a history state"),
    ("intr", "is not a state"),
])
def test_a_bad_history_default(default: str, words: str) -> None:
    [found] = of("M201", machine(HISTORY.replace("DEFAULT", default), "initial: stopped\n"))
    assert words in found.message
    assert (found.mark.line, found.mark.column) == (15, 53)


# -- M202 / M203 initial states -------------------------------------------------------


def test_a_single_top_level_state_is_the_implied_initial() -> None:
    assert run(machine("only: {type: final}\n")) == []


def test_several_top_level_states_need_an_initial() -> None:
    spec = machine("a: {on: {go: b}}\nb: {on: {go: a}}\n")
    [found] = of("M202", spec)
    assert (found.mark.line, found.mark.column) == (3, 3)
    assert found.hint is not None and "initial: a" in found.hint
    assert of("M202", machine("a: {on: {go: b}}\nb: {on: {go: a}}\n", "initial: b\n")) == []


def test_a_machine_without_states() -> None:
    assert [d.code for d in run("machine: m\nstates: {}\n")] == ["M202"]


def test_a_compound_with_several_children_needs_an_initial() -> None:
    spec = machine("""\
        box:
          states:
            a: {on: {go: b}}
            b: {on: {go: a}}
    """)
    assert at("M202", spec) == [(3, 3)]


def test_history_children_do_not_count_for_the_implied_initial() -> None:
    spec = machine("""\
        box:
          on: {back: h}
          states:
            only: {on: {go: box}}
            h: {type: history, default: only}
    """)
    assert of("M202", spec) == [] and of("M203", spec) == []


def test_a_compound_with_only_history_children_has_nothing_to_start_in() -> None:
    spec = machine("box:\n  states:\n    h: {type: history, default: h}\n")
    assert "only history" in of("M202", spec)[0].message


def test_a_parallel_state_needs_no_initial() -> None:
    spec = machine("""\
        both:
          type: parallel
          states:
            left: {type: final}
            right: {type: final}
    """)
    assert of("M202", spec) == []


@pytest.mark.parametrize(("initial", "words"), [
    ("v1", "is inside 'verse'"),
    ("stopped", "is a top-level state"),
    ("hist", "is a history state"),
    ("intr", "is not a state"),
])
def test_an_initial_must_be_a_direct_child(initial: str, words: str) -> None:
    spec = machine(HISTORY.replace("DEFAULT", "intro").replace("initial: intro",
                                                               f"initial: {initial}"),
                   "initial: stopped\n")
    [found] = of("M203", spec)
    assert words in found.message
    assert (found.mark.line, found.mark.column) == (6, 14)


def test_the_top_level_initial_must_be_a_top_level_state() -> None:
    spec = machine("a: {on: {go: box}}\nbox:\n  states:\n    inner: {on: {go: a}}\n",
                   "initial: inner\n")
    [found] = of("M203", spec)
    assert "is inside 'box'" in found.message
    assert (found.mark.line, found.mark.column) == (2, 10)


# -- M204 duplicate ids ---------------------------------------------------------------


def test_a_duplicate_id_is_reported_at_the_second_naming_the_first() -> None:
    spec = machine("""\
        closed: {on: {open: box}}
        box:
          on: {close: closed}
          states:
            closed: {type: final}
    """, "initial: closed\n")
    [found] = of("M204", spec)
    assert (found.mark.line, found.mark.column) == (8, 7)
    assert "line 4, column 3" in found.message


def test_a_state_named_like_its_parent_terminates() -> None:
    spec = machine("a:\n  states:\n    a:\n      states:\n        a: {}\n")
    assert at("M204", spec) == [(5, 7), (7, 11)]


def test_unique_ids_in_different_parents() -> None:
    spec = machine("x:\n  states: {x1: {type: final}}\ny:\n  states: {y1: {type: final}}\n",
                   "initial: x\n")
    assert of("M204", spec) == []


# -- M205 reachability ----------------------------------------------------------------


def test_only_the_topmost_unreachable_state_is_reported() -> None:
    spec = machine("""\
        a: {on: {go: a}}
        lost:
          initial: l1
          states:
            l1: {on: {go: l2}}
            l2: {on: {go: l1}}
    """, "initial: a\n")
    assert at("M205", spec) == [(5, 3)]


def test_a_child_not_entered_is_unreachable() -> None:
    spec = machine("""\
        box:
          initial: one
          states:
            one: {on: {go: one}}
            two: {type: final}
    """)
    assert at("M205", spec) == [(7, 7)]


def test_targeting_a_region_enters_its_sibling_regions() -> None:
    spec = machine("""\
        idle: {on: {go: left_b}}
        both:
          type: parallel
          states:
            left:
              initial: left_a
              states:
                left_a: {type: final}
                left_b: {type: final}
            right:
              initial: right_a
              states:
                right_a: {on: {go: right_b}}
                right_b: {type: final}
    """, "initial: idle\n")
    [found] = of("M205", spec)  # entered by target, the left region skips its initial
    assert "'left_a'" in found.message


def test_ancestor_transitions_and_history_defaults_reach_states() -> None:
    spec = machine("""\
        box:
          initial: a
          on: {jump: b}
          states:
            a: {on: {back: h}}
            b: {type: final}
            c: {type: final}
            h: {type: history, default: c}
    """)
    assert of("M205", spec) == []


def test_a_history_state_nobody_targets_is_unreachable() -> None:
    spec = machine("""\
        box:
          initial: a
          states:
            a: {on: {go: a}}
            h: {type: history, default: a}
    """)
    [found] = of("M205", spec)
    assert "history state 'h'" in found.message


# -- M206 traps -----------------------------------------------------------------------


def test_a_state_with_no_way_out_is_a_trap() -> None:
    spec = machine("""\
        a: {on: {go: stuck}}
        stuck:
          on:
            poke: {actions: [complain]}
            again: stuck
          always: {guard: g, actions: [log]}
    """, "initial: a\n")
    assert at("M206", spec) == [(5, 3)]


def test_final_states_and_states_with_exits_are_not_traps() -> None:
    spec = machine("a: {on: {go: b}}\nb: {after: {1s: c}}\nc: {type: final}\n", "initial: a\n")
    assert of("M206", spec) == []


def test_a_misspelt_target_is_reported_once_not_as_a_trap_too() -> None:
    spec = machine("a: {on: {go: bb}}\nb: {type: final}\n", "initial: a\n")
    assert [d.code for d in run(spec)] == ["M201", "M205"]


def test_an_ancestor_transition_is_a_way_out() -> None:
    spec = machine("""\
        box:
          initial: inner
          on: {cancel: done}
          states:
            inner: {}
        done: {type: final}
    """, "initial: box\n")
    assert of("M206", spec) == []


def test_a_sibling_region_leaving_the_parallel_state_is_a_way_out() -> None:
    spec = machine("""\
        both:
          type: parallel
          states:
            waiter:
              initial: waiting
              states:
                waiting: {}
            worker:
              initial: working
              states:
                working: {on: {done: finished, step: working2}}
                working2: {on: {back: working}}
        finished: {type: final}
    """, "initial: both\n")
    assert of("M206", spec) == []


def test_moves_inside_a_sibling_region_do_not_free_a_state() -> None:
    spec = machine("""\
        both:
          type: parallel
          states:
            waiter:
              initial: waiting
              states:
                waiting: {}
            worker:
              initial: working
              states:
                working: {on: {step: working2}}
                working2: {on: {back: working}}
    """)
    assert at("M206", spec) == [(9, 11)]


# -- M207 / M208 ----------------------------------------------------------------------


def test_a_final_state_with_transitions() -> None:
    spec = machine("""\
        a: {on: {go: done}}
        done:
          type: final
          entry: [celebrate]
          on: {again: a}
          after: {1s: a}
          always: a
    """, "initial: a\n")
    assert at("M207", spec) == [(8, 9), (9, 12), (10, 13)]


def test_a_final_state_with_entry_actions_only_is_fine() -> None:
    spec = machine("a: {on: {go: done}}\ndone: {type: final, entry: [x], exit: [y]}\n",
                   "initial: a\n")
    assert run(spec) == []


def test_a_history_state_needs_a_default() -> None:
    spec = HISTORY.replace(", default: DEFAULT", "")
    [found] = of("M208", machine(spec, "initial: stopped\n"))
    assert (found.mark.line, found.mark.column) == (15, 7)
    assert "'playing'" in (found.hint or "")


# -- M209 hidden candidates -----------------------------------------------------------


def test_an_unguarded_candidate_hides_later_ones() -> None:
    spec = machine("""\
        a:
          on:
            go:
              - b
              - {guard: g, target: c}
              - c
        b: {type: final}
        c: {type: final}
    """, "initial: a\n")
    found = of("M209", spec)
    assert [(d.mark.line, d.mark.column) for d in found] == [(8, 11), (9, 11)]
    assert "line 7, column 11" in found[0].message


def test_guarded_candidates_before_an_unguarded_one_are_fine() -> None:
    spec = machine("""\
        a:
          on:
            go: [{guard: g, target: b}, {guard: "!g", target: c}, b]
          always: [{guard: g, target: b}, c]
          after: {1s: [{guard: g, target: b}, c]}
        b: {type: final}
        c: {type: final}
    """, "initial: a\n")
    assert of("M209", spec) == []


@pytest.mark.parametrize(("first", "later", "hidden"), [
    ("job", "job.done", True),
    ("job.*", "job.done.ok", True),
    ("job", "job.*", True),
    ("job.done", "job", False),
    ("job", "jobs", False),
    ("job.done", "job.failed", False),
])
def test_events_match_by_dotted_prefix(first: str, later: str, hidden: bool) -> None:
    spec = machine(f"a:\n  on:\n    '{first}': b\n    '{later}': c\n"
                   "b: {type: final}\nc: {type: final}\n", "initial: a\n")
    assert at("M209", spec) == ([(7, len(later) + 11)] if hidden else [])


def test_always_and_after_candidates_can_be_hidden() -> None:
    spec = machine("""\
        a:
          always: [b, c]
          after: {1s: [b, c], 2s: c}
        b: {type: final}
        c: {type: final}
    """, "initial: a\n")
    assert at("M209", spec) == [(5, 17), (6, 21)]


# -- M210 eventless loops -------------------------------------------------------------


def test_a_cycle_of_unguarded_always_transitions() -> None:
    spec = machine("a: {always: b}\nb: {always: a}\n", "initial: a\n")
    [found] = of("M210", spec)
    assert (found.mark.line, found.mark.column) == (4, 15)
    assert "a -> b, b -> a" in found.message


def test_an_unguarded_always_to_itself() -> None:
    assert at("M210", machine("a: {always: a}\n")) == [(3, 15)]


def test_a_loop_through_a_compound_initial_child() -> None:
    spec = machine("""\
        a: {always: box}
        box:
          initial: inner
          states:
            inner: {always: {target: a, actions: [bounce]}}
    """, "initial: a\n")
    assert at("M210", spec) == [(4, 15)]


def test_a_compound_always_into_itself_loops() -> None:
    spec = machine("""\
        box:
          always: inner
          states:
            inner: {on: {go: out}}
        out: {type: final}
    """, "initial: box\n")
    assert at("M210", spec) == [(5, 13)]


def test_an_unguarded_targetless_always_loops_by_itself() -> None:
    spec = machine("a: {on: {go: b}, always: {actions: [tick]}}\nb: {type: final}\n",
                   "initial: a\n")
    [found] = of("M210", spec)
    assert "no guard and no target" in found.message


def test_a_guard_breaks_the_loop() -> None:
    spec = machine("a: {always: b}\nb: {always: {guard: ready, target: a}}\n", "initial: a\n")
    assert of("M210", spec) == []


def test_a_chain_of_always_transitions_that_ends_is_fine() -> None:
    spec = machine("a: {always: b}\nb: {always: c}\nc: {type: final}\n", "initial: a\n")
    assert of("M210", spec) == []


def test_a_child_always_preempts_its_parents() -> None:
    spec = machine("""\
        box:
          initial: inner
          always: inner
          states:
            inner: {always: out}
        out: {type: final}
    """, "initial: box\n")
    assert of("M210", spec) == []


# -- M211 bindings --------------------------------------------------------------------


BOUND = machine("""\
    a:
      entry: [on_enter]
      exit: [on_exit]
      on:
        go: {guard: "!ready", target: b, actions: [move]}
    b: {type: final}
""", "initial: a\n")


def test_without_bindings_nothing_is_unbound() -> None:
    assert of("M211", BOUND) == []


def test_every_bound_name_is_fine() -> None:
    names = dict.fromkeys(["on_enter", "on_exit", "ready", "move"], object())
    assert of("M211", BOUND, names) == []


def test_unbound_guards_and_actions_are_reported_where_used() -> None:
    found = of("M211", BOUND, {"on_entry": object()})
    assert [(d.mark.line, d.mark.column) for d in found] == [(5, 12), (6, 11), (8, 19), (8, 49)]
    assert "guard 'ready'" in found[2].message
    assert found[0].hint == "did you mean 'on_entry'?"


# -- M213 reserved events -------------------------------------------------------------


@pytest.mark.parametrize("event", ["after", "after.a.0", "after.*", "done.state.a", "done.x",
                                   "error.custom", "error.executions"])
def test_reserved_event_names(event: str) -> None:
    spec = machine(f"a:\n  on:\n    '{event}': b\nb: {{type: final}}\n", "initial: a\n")
    assert at("M213", spec) == [(6, 7)]


@pytest.mark.parametrize("event", ["error.execution", "error", "error.*", "done.invoke.work",
                                   "error.invoke.work", "error.invoke", "done.invoke"])
def test_engine_raised_events_may_be_listened_for(event: str) -> None:
    spec = machine(f"a:\n  on:\n    '{event}': b\nb: {{type: final}}\n", "initial: a\n")
    assert at("M213", spec) == []


@pytest.mark.parametrize("event", ["done", "error", "aftermath", "errors.x", "job.done",
                                   "undone.x"])
def test_names_that_are_not_reserved(event: str) -> None:
    spec = machine(f"a:\n  on:\n    '{event}': b\nb: {{type: final}}\n", "initial: a\n")
    assert of("M213", spec) == []


# -- M214 kind and fields -------------------------------------------------------------


@pytest.mark.parametrize(("state", "mark", "words"), [
    ("x: {type: final, initial: y}", (3, 29), "`initial:`"),
    ("x: {type: final, states: {y: {type: final}}}", (3, 28), "child states"),
    ("x: {initial: y}", (3, 16), "but no child states"),
    ("x: {type: atomic, states: {y: {type: final}}}", (3, 13), "`type: atomic`"),
    ("x: {type: compound}", (3, 13), "`type: compound` but has no child"),
    ("x: {type: parallel}", (3, 13), "`type: parallel` but has no child"),
    ("x: {type: final, history: deep}", (3, 29), "not a history state"),
    ("x: {type: final, default: x}", (3, 29), "not a history state"),
])
def test_fields_the_kind_does_not_allow(state: str, mark: tuple[int, int], words: str) -> None:
    found = of("M214", machine(state + "\n"))
    assert [(d.mark.line, d.mark.column) for d in found] == [mark]
    assert words in found[0].message


def test_a_parallel_state_with_an_initial() -> None:
    spec = machine("""\
        both:
          type: parallel
          initial: left
          states:
            left: {type: final}
            right: {type: final}
    """)
    assert at("M214", spec) == [(5, 14)]


def test_what_a_history_state_cannot_have() -> None:
    spec = machine("""\
        box:
          initial: a
          on: {back: h}
          states:
            a: {on: {go: h}}
            h:
              type: history
              default: a
              entry: [x]
              exit: [y]
              on: {e: a}
              after: {1s: a}
              always: {guard: g, target: a}
    """)
    assert at("M214", spec) == [(11, 16), (12, 15), (13, 13), (14, 16), (15, 17)]


@pytest.mark.parametrize(("spec", "words"), [
    ("h: {type: history, default: h}\n", "at the top level"),
    ("p:\n  type: parallel\n  states:\n    a: {type: final}\n"
     "    h: {type: history, default: a}\n", "a parallel state"),
])
def test_where_a_history_state_cannot_be(spec: str, words: str) -> None:
    assert any(words in d.message for d in of("M214", machine(spec)))


def test_well_formed_kinds_are_fine() -> None:
    assert [d for d in run(machine(HISTORY.replace("DEFAULT", "intro"), "initial: stopped\n"))
            if d.code == "M214"] == []


# -- M215 context defaults ------------------------------------------------------------


@pytest.mark.parametrize(("type_", "default", "fits"), [
    ("int", "1", True), ("int", "true", False), ("int", "1.5", False), ("int", "'1'", False),
    ("float", "3", True), ("float", "2.5", True), ("float", "false", False),
    ("str", "hello", True), ("str", "5", False), ("str", "no", True),
    ("bool", "true", True), ("bool", "yes", False), ("bool", "1", False),
    ("list", "[]", True), ("list", "{}", False),
    ("dict", "{a: 1}", True), ("dict", "[]", False),
    ("duration", "30s", True), ("duration", "90", True), ("duration", "1h30m", True),
    ("duration", "soon", False), ("duration", "-1", False), ("duration", "[1]", False),
    ("any", "[1, {a: b}]", True),
    ("int", "null", True),
])
def test_context_defaults_match_their_type(type_: str, default: str, fits: bool) -> None:
    head = f"context:\n  f: {{type: {type_}, default: {default}}}\n"
    found = of("M215", machine("a: {type: final}\n", head))
    assert [(d.mark.line, d.mark.column) for d in found] == ([] if fits else [(3, 24 + len(type_))])


# -- invoke: M216-M222, and S104/S105/M212/M214 for its fields --------------------------

CREW = """\
machine: crew
context:
  current_task: {type: str, default: ""}
  review_timeout: {type: duration, default: 5m}
initial: working
states:
  working:
    invoke:
      id: work
      agent: executor
      prompt: |
        Task: {{ context.current_task }}
        {% for s in signals %}- {{ s.message }}
        {% endfor %}
      input: {task: "{{ context.current_task }}", files: ["{{ input.task }}.md"]}
      timeout: 10m
      on_resume: restart
    on:
      done.invoke.work: {target: reviewing, actions: [record]}
      error.invoke.work: failed
  reviewing:
    type: parallel
    on: {error.invoke: failed}
    states:
      security:
        initial: checking
        states:
          checking:
            invoke: {agent: reviewer, timeout: review_timeout}
            on: {done.invoke.checking: passed}
          passed: {type: final}
      style:
        initial: linting
        states:
          linting:
            invoke: {command: [sh, -c, "ruff check ."], timeout: 90}
            on: {done.invoke.linting: clean}
          clean: {type: final}
  failed: {type: final}
"""


def invoking(invoke: str, on: str = "{done.invoke.a: b, error.invoke: b}", head: str = "") -> str:
    """A two-state machine whose first state ``a`` has ``invoke: <invoke>``."""
    return machine(f"a:\n  invoke: {invoke}\n  on: {on}\nb: {{type: final}}\n",
                   "initial: a\n" + head)


def codes(text: str, agents: list[str] | None = None) -> list[tuple[str, int, int]]:
    spec = loads(textwrap.dedent(text), "spec.yaml")
    return [(d.code, d.mark.line, d.mark.column) for d in lint(spec, agents=agents)]


def test_a_crew_with_invokes_is_clean() -> None:
    assert run(CREW) == []
    assert lint(loads(CREW), agents={"executor", "reviewer"}) == []


@pytest.mark.parametrize(("invoke", "found", "words"), [
    ("{agent: x, command: [sh]}", [("M216", 5, 33)], "both `agent:` and `command:`"),
    ("{agent: x, command: [sh], machine: m}", [("M216", 5, 48)],
     "all of `agent:` and `command:` and `machine:`"),
    ("{prompt: hi}", [("M216", 5, 5)], "none of `agent:`, `command:` and `machine:`"),
    ("{command: []}", [("M216", 5, 23)], "empty `command:`"),
    ("{command: ['']}", [("M216", 5, 23)], "empty `command:`"),
])
def test_an_invoke_runs_exactly_one_agent_or_command(
    invoke: str, found: list[tuple[str, int, int]], words: str
) -> None:
    assert codes(invoking(invoke)) == found
    assert words in of("M216", invoking(invoke))[0].message


def test_a_machine_takes_input_not_a_prompt() -> None:
    [d] = of("M217", invoking("{machine: child, prompt: hi}"))
    assert "takes no `prompt:`" in d.message and d.hint and "input:" in d.hint
    assert codes(invoking("{machine: child, input: {task: '{{ context.x }}'}}")) == []


def test_a_machine_file_is_resolved_from_the_spec_folder(tmp_path: Path) -> None:
    (tmp_path / "steps").mkdir()
    (tmp_path / "steps" / "review.yaml").write_text("machine: r\n")
    assert lint(load(_spec_file(tmp_path, "{machine: steps/review.yaml}"))) == []
    [d] = lint(load(_spec_file(tmp_path, "{machine: steps/reveiw.yaml}")))
    assert d.code == "M224" and d.hint == "did you mean 'steps/review.yaml'?"
    assert lint(load(_spec_file(tmp_path, "{machine: ralph_subagent}"))) == []  # built-in


def test_prompt_and_prompt_file_exclude_each_other() -> None:
    [d] = of("M217", invoking("{agent: x, prompt: hi, prompt_file: p.md}"))
    assert (d.mark.line, d.mark.column) == (5, 49)
    assert d.hint and "keep one" in d.hint


def _spec_file(folder: Path, invoke: str, name: str = "spec.yaml") -> Path:
    path = folder / name
    path.write_text(invoking(invoke))
    return path


def test_a_missing_prompt_file_is_reported_relative_to_the_spec(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "prompts").mkdir()
    (tmp_path / "prompts" / "task.md.j2").write_text("Task: {{ context.task }}\n")
    monkeypatch.chdir(tmp_path / "prompts")  # not the folder the file is resolved from
    spec = _spec_file(tmp_path, "{agent: x, prompt_file: prompts/task.md.j}")
    [d] = lint(load(spec))
    assert (d.code, d.mark.file, d.mark.line, d.mark.column) == ("M218", str(spec), 5, 37)
    assert d.hint == "did you mean 'prompts/task.md.j2'?"
    assert lint(load(_spec_file(tmp_path, "{agent: x, prompt_file: prompts/task.md.j2}"))) == []


def test_a_prompt_file_that_is_a_folder_or_not_text(tmp_path: Path) -> None:
    (tmp_path / "bin.j2").write_bytes(b"\xff\xfe")
    assert [d.code for d in lint(load(_spec_file(tmp_path, "{agent: x, prompt_file: .}")))] \
        == ["M218"]
    [d] = lint(load(_spec_file(tmp_path, "{agent: x, prompt_file: bin.j2}")))
    assert d.code == "M218" and "not UTF-8" in d.message


def test_a_prompt_file_is_not_checked_for_a_spec_read_from_text() -> None:
    assert run(invoking("{agent: x, prompt_file: nowhere.md.j2}")) == []


def test_template_syntax_errors_are_found_by_jinja2() -> None:
    assert template_syntax_error("{{ context.a }} {% if input.b %}x{% endif %}") is None
    problem = template_syntax_error("one\ntwo {{ x }\n")
    assert problem is not None and (problem.line, problem.message) == (2, "unexpected '}'")


def test_a_prompt_syntax_error_on_one_line_points_at_the_value() -> None:
    assert codes(invoking("{agent: x, prompt: 'Task: {{ context.t }'}")) == [("M219", 5, 32)]


def test_a_prompt_syntax_error_in_a_block_points_at_its_line() -> None:
    text = machine("""\
        a:
          invoke:
            agent: x
            prompt: |
              line one
              line two {% if context.x %}
              line three {{ context.y }
          on: {done.invoke.a: b}
        b: {type: final}
    """, "initial: a\n")
    [d] = of("M219", text)
    assert (d.mark.line, d.mark.column) == (10, 1)
    assert "unexpected '}'" in d.message and "prompt of state 'a'" in d.message


def test_an_input_string_is_a_template_too() -> None:
    text = invoking("{agent: x, input: {task: ok, more: {list: [1, '{{ a ]}']}}}")
    [d] = of("M219", text)
    assert (d.mark.line, d.mark.column) == (5, 42)
    assert "input 'more'" in d.message


def test_a_prompt_file_syntax_error_points_into_the_prompt_file(tmp_path: Path) -> None:
    prompt = tmp_path / "task.md.j2"
    prompt.write_text("Hello\n\n{% for s in signals %}{{ s }}\n")
    [d] = lint(load(_spec_file(tmp_path, "{agent: x, prompt_file: task.md.j2}")))
    assert (d.code, d.mark.file, d.mark.line, d.mark.column) == ("M219", str(prompt), 3, 1)
    assert d.hint == f"the file is named at {tmp_path / 'spec.yaml'}:5:37"


def test_done_and_error_events_must_name_an_invoke() -> None:
    text = invoking("{id: work, agent: x}", "{done.invoke.wrok: b, error.invoke.a: b}")
    assert codes(text) == [("M226", 5, 5), ("M220", 6, 10), ("M220", 6, 31)]
    first, second = of("M220", text)
    assert first.hint == "did you mean 'work'?"
    assert "'error.invoke.a'" in second.message


@pytest.mark.parametrize("event", ["done.invoke", "done.invoke.*", "error.invoke", "error",
                                   "error.invoke.a", "done.invoke.a.*"])
def test_listening_for_every_invoke_or_a_known_one_is_fine(event: str) -> None:
    assert of("M220", invoking("{agent: x}", f"{{{event}: b}}")) == []


def test_done_invoke_without_any_invoke() -> None:
    [d] = of("M220", machine("a: {on: {done.invoke.job: b}}\nb: {type: final}\n",
                             "initial: a\n"))
    assert d.hint and "no state has `invoke:`" in d.hint


def test_two_states_cannot_invoke_under_one_id() -> None:
    text = machine("""\
        both:
          type: parallel
          states:
            left: {invoke: {id: review, agent: x}, on: {done.invoke.review: end}}
            right: {invoke: {id: review, agent: x}}
        end: {type: final}
    """, "initial: both\n")
    [d] = of("M221", text)
    assert (d.mark.line, d.mark.column) == (8, 28)
    assert "'right'" in d.message and "'left'" in d.message


def test_agents_are_checked_only_when_given() -> None:
    text = invoking("{agent: executer}")
    assert codes(text) == []
    assert codes(text, ["executor", "reviewer"]) == [("M222", 5, 21)]
    [d] = lint(loads(text), agents=["executor"])
    assert d.hint == "did you mean 'executor'?"
    [d] = lint(loads(text), agents=[])
    assert d.hint and "defines no `agents:`" in d.hint
    assert codes(invoking("{command: [sh]}"), []) == []


@pytest.mark.parametrize(("timeout", "found"), [
    ("10m", []), ("90", []), ("1h30m", []), ("limit", []),
    ("limt", [("M212", 5, 33)]), ("label", [("M212", 5, 33)]),
    ("'10 minutes'", [("S105", 5, 33)]), ("0s", [("S105", 5, 33)]), ("0", [("S105", 5, 33)]),
])
def test_an_invoke_timeout_is_a_duration_or_a_context_field(
    timeout: str, found: list[tuple[str, int, int]]
) -> None:
    head = "context:\n  limit: {type: duration, default: 3m}\n  label: {type: str}\n"
    text = machine(f"a:\n  invoke: {{agent: x, timeout: {timeout}}}\n"
                   "  on: {done.invoke.a: b, error.invoke.a: b}\nb: {type: final}\n",
                   "initial: a\n" + head)
    assert codes(text) == [(c, line + 3, col) for c, line, col in found]


def test_final_and_history_states_cannot_invoke() -> None:
    text = machine("""\
        a:
          initial: x
          states:
            x: {on: {go: h}}
            h: {type: history, default: x, invoke: {agent: y}}
          on: {stop: b}
        b: {type: final, invoke: {agent: y}}
    """, "initial: a\n")
    assert codes(text) == [("M214", 8, 46), ("M214", 10, 28)]
    assert "final state 'b' cannot have an `invoke:`" in of("M214", text)[1].message


def test_an_invoke_id_is_an_identifier() -> None:
    [d] = of("S104", invoking("{id: 'job.one', agent: x}"))
    assert (d.mark.line, d.mark.column) == (5, 18)
    assert d.hint == "for example 'job_one'"


def test_a_listener_never_active_with_the_invocation_is_warned() -> None:
    text = machine("""\
        working:
          invoke: {id: work, agent: x}
          on: {done.invoke.work: reviewing, error.invoke.work: done}
        reviewing:
          on: {done.invoke.work: done, error.invoke: done}
        done: {type: final}
    """, "initial: working\n")
    [d] = run(text)
    assert (d.code, d.severity, d.mark.line, d.mark.column) == ("M223", Severity.WARNING, 8, 10)
    assert d.hint == "move the transition to 'working' or to a state around it"


def test_listeners_around_inside_or_beside_the_invocation_are_fine() -> None:
    text = machine("""\
        outer:
          initial: box
          on: {error.invoke.inner: done}
          states:
            box:
              type: parallel
              invoke: {agent: x}
              states:
                left:
                  initial: inner
                  states:
                    inner: {invoke: {agent: x}, on: {done.invoke.box: inner}}
                right: {on: {done.invoke.inner: done, error.invoke.box: done}}
        done: {type: final}
    """, "initial: outer\n")
    assert of("M223", text) == []


# -- fan-out: M227-M232 ------------------------------------------------------------------

def test_a_fanout_over_a_context_list_or_a_literal_one_is_clean() -> None:
    from support.render_cases import CASES

    assert run(CASES["fanout"]) == []


def test_an_empty_literal_list_is_a_fanout_too() -> None:
    text = invoking("{command: [x], each: []}", "{done.invoke.a.all: b, error.invoke.a: b}")
    assert run(text) == []


@pytest.mark.parametrize(("invoke", "code", "words"), [
    ("{command: [x], concurrency: 2}", "M227", "`concurrency:` but no `each:`"),
    ("{command: [x], each: [1], concurrency: 0}", "M228", "must be at least 1"),
    ("{command: [x], each: [1], concurrency: -3}", "M228", "must be at least 1"),
    ("{command: [x], each: [1], concurrency: context.n}", "M228", "neither an integer"),
    ("{command: [x], each: context.items}", "M229", "neither a list nor one"),
    ("{command: [x], each: 'a {{ context.items }}'}", "M229", "neither a list nor one"),
    ("{command: [x, '{{ item }}']}", "M231", "reads `item`"),
    ("{agent: '{{ index }}'}", "M231", "reads `index`"),
    ("{machine: m, input: {t: '{{ item.id }}'}}", "M231", "reads `item`"),
    ("{command: [x], each: '{{ context.items[index:] }}'}", "M231", "before any child"),
])
def test_fanout_misuse_is_an_error_where_it_is_written(invoke: str, code: str,
                                                       words: str) -> None:
    on = "{done.invoke.a: b, error.invoke: b}"
    [d] = of(code, invoking(invoke, on))
    assert d.severity is Severity.ERROR and words in d.message
    assert d.mark.line == 5 and d.mark.column > 5  # at the field, not at the invoke


def test_concurrency_true_is_not_an_integer() -> None:
    with pytest.raises(SpecError) as caught:
        loads(invoking("{command: [x], each: [1], concurrency: true}"), "spec.yaml")
    assert {d.code for d in caught.value.diagnostics} == {"S103"}


def test_each_as_a_number_or_a_mapping_is_refused_by_the_model() -> None:
    for each in ("3", "{a: 1}"):
        with pytest.raises(SpecError) as caught:
            loads(invoking(f"{{command: [x], each: {each}}}"), "spec.yaml")
        assert {d.code for d in caught.value.diagnostics} == {"S103"}


def test_a_loop_variable_named_item_is_not_the_fanouts() -> None:
    prompt = "'{% for item in context.todo %}{{ item }}{% endfor %}'"
    assert of("M231", invoking(f"{{command: [x], prompt: {prompt}}}")) == []


def test_the_all_event_of_an_invoke_without_each_is_an_error() -> None:
    for runs in ("command: [x]", "agent: x", "machine: m"):
        [d] = of("M230", invoking(f"{{{runs}}}", "{done.invoke.a.all: b, error.invoke: b}"))
        assert (d.mark.line, d.mark.column) == (6, 10)
        assert "has no `each:`" in d.message


def test_a_broader_listener_without_the_all_event_is_warned() -> None:
    text = invoking("{command: [x], each: [1, 2]}",
                    "{done.invoke.a: {actions: [tally]}, error.invoke.a: b}")
    [d] = run(text)
    assert (d.code, d.severity) == ("M232", Severity.WARNING)
    assert "'done.invoke.a.all'" in d.message and (d.mark.line, d.mark.column) == (6, 10)
    # with `.all` first, the broader one hears the children only
    fine = invoking("{command: [x], each: [1, 2]}",
                    "{done.invoke.a.all: b, done.invoke.a: {actions: [tally]}, "
                    "error.invoke.a: b}")
    assert run(fine) == []
    # `.all` after it: M209 already says it can never fire
    late = invoking("{command: [x], each: [1, 2]}",
                    "{done.invoke.a: {actions: [tally]}, done.invoke.a.all: b, "
                    "error.invoke.a: b}")
    assert [d.code for d in run(late)] == ["M209"]


def test_a_prompt_file_reading_item_without_each_is_reported_at_its_line(
        tmp_path: Path) -> None:
    (tmp_path / "task.md.j2").write_text("Task:\n{{ item.title }}\n")
    [d] = lint(load(_spec_file(tmp_path, "{agent: x, prompt_file: task.md.j2}")))
    assert (d.code, d.mark.file, d.mark.line) == ("M231", str(tmp_path / "task.md.j2"), 2)
    with_each = "{agent: x, prompt_file: task.md.j2, each: [1]}"
    on = "{done.invoke.a.all: b, error.invoke.a: b}"
    (tmp_path / "spec.yaml").write_text(invoking(with_each, on))
    assert lint(load(tmp_path / "spec.yaml")) == []
