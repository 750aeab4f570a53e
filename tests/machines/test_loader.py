"""The loader: safe YAML, shorthands, and marks that land where the user wrote things."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from interlock.machines import SpecError, build_ir, load, loads
from interlock.machines.ir import TransitionKind
from interlock.machines.spec import Spec


def spec_of(text: str) -> Spec:
    return loads(textwrap.dedent(text), "door.yaml")


def codes(text: str | bytes) -> list[tuple[str, int, int]]:
    """(code, line, column) of the SpecError that loading ``text`` must raise."""
    with pytest.raises(SpecError) as info:
        loads(textwrap.dedent(text) if isinstance(text, str) else text, "door.yaml")
    return [(d.code, d.mark.line, d.mark.column) for d in info.value.diagnostics]


DOOR = """\
machine: door
context:
  knocks: {type: int, default: 0}
initial: closed
states:
  closed:
    on:
      open: opened
      knock:
        - {guard: "!deaf", target: closed, actions: [count]}
        - target: opened
    after: {30s: opened, knocks: closed}
  opened:
    entry: log
    always: {guard: windy, target: closed}
    on: {close: closed, tick: null}
"""


# -- marks ----------------------------------------------------------------------------


def test_states_are_marked_at_their_key() -> None:
    ir = build_ir(spec_of(DOOR))
    assert (ir.states["closed"].mark.line, ir.states["closed"].mark.column) == (6, 3)
    assert (ir.states["opened"].mark.line, ir.states["opened"].mark.column) == (13, 3)
    assert ir.states["closed"].mark.file == "door.yaml"


def test_machine_and_context_marks() -> None:
    ir = build_ir(spec_of(DOOR))
    machine = ir.mark_of("machine")
    assert (machine.line, machine.column) == (1, 10)
    initial = ir.mark_of("initial")
    assert (initial.line, initial.column) == (4, 10)
    field = ir.context["knocks"]
    assert (field.mark.line, field.mark.column) == (3, 3)
    assert (field.mark_of("default").line, field.mark_of("default").column) == (3, 32)


def test_transition_marks_point_at_targets_guards_and_actions() -> None:
    closed = build_ir(spec_of(DOOR)).states["closed"]
    shorthand, guarded, fallback = closed.transitions[:3]
    assert (shorthand.mark_of("target").line, shorthand.mark_of("target").column) == (8, 13)
    assert (guarded.mark.line, guarded.mark.column) == (10, 11)
    assert (guarded.mark_of("guard").line, guarded.mark_of("guard").column) == (10, 19)
    assert (guarded.mark_of("target").line, guarded.mark_of("target").column) == (10, 36)
    assert (guarded.mark_of("actions").line, guarded.mark_of("actions").column) == (10, 53)
    assert (fallback.mark_of("target").line, fallback.mark_of("target").column) == (11, 19)


def test_event_and_delay_marks_point_at_their_keys() -> None:
    ir = build_ir(spec_of(DOOR))
    events = {(t.event, t.kind): t.mark_of("event") for t in ir.transitions()}
    where = {key: (mark.line, mark.column) for key, mark in events.items()}
    assert where[("open", TransitionKind.EVENT)] == (8, 7)
    assert where[("knock", TransitionKind.EVENT)] == (9, 7)
    assert where[("after.closed.0", TransitionKind.AFTER)] == (12, 13)
    assert where[("after.closed.1", TransitionKind.AFTER)] == (12, 26)
    assert where[("tick", TransitionKind.EVENT)] == (16, 25)


def test_numeric_event_keys_are_marked_too() -> None:
    ir = build_ir(spec_of("machine: m\nstates:\n  a:\n    on:\n      404: a\n    after: {5: a}\n"))
    marks = [(t.mark_of("event").line, t.mark_of("event").column) for t in ir.transitions()]
    assert marks == [(5, 7), (6, 13)]


def test_a_file_is_marked_with_its_path(tmp_path: Path) -> None:
    path = tmp_path / "door.yaml"
    path.write_text(DOOR)
    spec = load(path)
    assert spec.file == str(path)
    assert build_ir(spec).states["closed"].mark.file == str(path)
    assert load(str(path)).file == str(path)


# -- shorthands -----------------------------------------------------------------------


def test_shorthands_normalize() -> None:
    spec = spec_of(DOOR)
    closed, opened = spec.states["closed"], spec.states["opened"]
    assert [t.target for t in closed.on["open"]] == ["opened"]
    assert [(t.guard, t.target, t.actions) for t in closed.on["knock"]] == [
        ("!deaf", "closed", ["count"]), (None, "opened", [])]
    assert opened.entry == ["log"]
    assert [(t.guard, t.target) for t in opened.always] == [("windy", "closed")]
    assert [(t.target, t.actions) for t in opened.on["tick"]] == [(None, [])]


def test_a_list_of_target_names_is_a_list_of_candidates() -> None:
    spec = spec_of("machine: m\nstates:\n  a: {on: {go: [b, c]}, always: a}\n  b: {}\n  c: {}\n")
    assert [t.target for t in spec.states["a"].on["go"]] == ["b", "c"]
    assert [t.target for t in spec.states["a"].always] == ["a"]


def test_guards_are_parsed_with_negation() -> None:
    ir = build_ir(spec_of(DOOR))
    guard = ir.states["closed"].transitions[1].guard
    assert guard is not None and (guard.name, guard.negated) == ("deaf", True)


def test_a_state_with_children_is_compound_and_its_only_child_is_initial() -> None:
    ir = build_ir(spec_of("machine: m\nstates:\n  box:\n    states:\n      only: {}\n"))
    assert ir.states["box"].kind == "compound"
    assert ir.states["box"].initial == "only"
    assert ir.initial == "box"


# -- YAML 1.2 and safety --------------------------------------------------------------


def test_on_is_a_string_key_not_a_boolean() -> None:
    spec = spec_of("machine: m\nstates:\n  a:\n    on: {go: a}\n")
    assert list(spec.states["a"].on) == ["go"]


def test_yes_no_and_off_are_text() -> None:
    spec = spec_of("""\
        machine: m
        context:
          a: {default: yes}
          b: {default: off}
          c: {default: true}
        states: {s: {}}
    """)
    assert [spec.context[n].default for n in "abc"] == ["yes", "off", True]


def test_duplicate_top_level_keys_are_errors() -> None:
    assert codes("machine: a\nstates: {s: {}}\nmachine: a\n") == [("Y004", 3, 1)]


def test_duplicate_nested_keys_are_errors_even_with_the_same_value() -> None:
    text = "machine: m\nstates:\n  s:\n    on: {go: s}\n    on: {go: s}\n"
    assert codes(text) == [("Y004", 5, 5)]


def test_duplicate_keys_inside_flow_mappings() -> None:
    assert codes("machine: m\nstates: {s: {on: {go: s, go: t}}}\n") == [("Y004", 2, 26)]


def test_merge_keys_copy_and_explicit_keys_win() -> None:
    spec = spec_of("""\
        machine: m
        context:
          base: &counter {type: int, default: 0}
          before: {default: 5, <<: *counter}
          after: {<<: *counter, default: 7}
        states:
          a: &abortable
            on: {abort: a}
          b:
            <<: *abortable
            entry: [hello]
    """)
    assert [(f.type, f.default) for f in spec.context.values()] == [
        ("int", 0), ("int", 5), ("int", 7)]
    assert [t.target for t in spec.states["b"].on["abort"]] == ["a"]
    assert spec.states["b"].entry == ["hello"]


def test_an_override_after_a_merge_is_marked_where_it_is_written() -> None:
    ir = build_ir(spec_of("""\
        machine: m
        context:
          base: &counter {type: int, default: 0}
          after: {<<: *counter, default: 7}
        states: {s: {}}
    """))
    mark = ir.context["after"].mark_of("default")
    assert (mark.line, mark.column) == (4, 34)


def test_a_list_of_merges() -> None:
    spec = spec_of("""\
        machine: m
        context:
          a: &a {type: int}
          b: &b {default: 3, description: from b}
          c: {<<: [*a, *b]}
        states: {s: {}}
    """)
    c = spec.context["c"]
    assert (c.type, c.default, c.description) == ("int", 3, "from b")


def test_python_tags_are_never_constructed(tmp_path: Path) -> None:
    victim = tmp_path / "pwned"
    text = f"machine: !!python/object/apply:os.mkdir ['{victim}']\nstates: {{s: {{}}}}\n"
    assert codes(text) == [("Y002", 1, 10)]
    assert not victim.exists()
    assert codes("machine: !!python/name:os.system x\nstates: {}\n")[0][0] == "Y002"


def test_an_impossible_timestamp_is_a_diagnostic() -> None:
    assert codes("machine: m\ndescription: 2024-13-45\nstates: {s: {}}\n") == [("S103", 2, 14)]


def test_a_byte_order_mark_is_accepted() -> None:
    assert loads(b"\xef\xbb\xbfmachine: m\nstates: {s: {}}\n").machine == "m"


# -- shape errors ---------------------------------------------------------------------


def test_an_unknown_key_suggests_the_right_one() -> None:
    with pytest.raises(SpecError) as info:
        spec_of("machine: m\nstates:\n  s:\n    enrty: [x]\n")
    [found] = info.value.diagnostics
    assert (found.code, found.mark.line, found.mark.column) == ("S101", 4, 5)
    assert found.hint == "did you mean 'entry'?"


def test_an_unknown_top_level_key_names_the_spec() -> None:
    with pytest.raises(SpecError) as info:
        spec_of("machine: m\nintial: s\nstates: {s: {}}\n")
    [found] = info.value.diagnostics
    assert found.message == "unknown key 'intial' in spec"
    assert found.hint == "did you mean 'initial'?"


def test_an_unknown_key_in_a_shorthand_transition_is_marked_at_the_key() -> None:
    text = "machine: m\nstates:\n  s:\n    on:\n      go: {taget: s}\n"
    assert codes(text) == [("S101", 5, 12)]
    listed = "machine: m\nstates:\n  s:\n    on:\n      go:\n        - {taget: s}\n"
    assert codes(listed) == [("S101", 6, 12)]


def test_missing_required_fields() -> None:
    assert codes("states: {s: {}}\n") == [("S102", 1, 1)]
    assert codes("machine: m\n") == [("S102", 1, 1)]


@pytest.mark.parametrize(("text", "mark"), [
    ("machine: m\nstates:\n  s: {type: finished}\n", (3, 13)),
    ("machine: m\nstates:\n  s: {entry: {a: 1}}\n", (3, 14)),
    ("machine: m\nstates: [a, b]\n", (2, 9)),
    ("machine: [m]\nstates: {s: {}}\n", (1, 10)),
    ("machine: m\ncontext:\n  n: {type: integer}\nstates: {s: {}}\n", (3, 13)),
])
def test_wrong_types(text: str, mark: tuple[int, int]) -> None:
    assert codes(text) == [("S103", *mark)]


def test_an_unsupported_version() -> None:
    assert codes("machine: m\nversion: 2\nstates: {s: {}}\n") == [("S106", 2, 10)]


def test_several_shape_errors_are_reported_together() -> None:
    text = "machine: m\nstates:\n  a: {enrty: x}\n  b: {type: nope}\n"
    assert [c for c, _, _ in codes(text)] == ["S101", "S103"]
