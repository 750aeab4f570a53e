"""check_context: --context values against the spec's context types (the M215 rule)."""

from __future__ import annotations

from typing import Any

import pytest

from interlock.machines import build_ir, check_context, context_message, lint, loads
from interlock.machines.context import fits

SPEC = """\
machine: typed
context:
  retries: {type: int, default: 0}
  ratio: {type: float}
  name: {type: str}
  verbose: {type: bool}
  items: {type: list}
  options: {type: dict}
  timeout: {type: duration, default: 3m}
  anything: {}
states:
  a: {}
"""


@pytest.fixture(scope="module")
def ir() -> Any:
    return build_ir(loads(SPEC, "typed.yaml"))


@pytest.mark.parametrize("values", [
    {},
    {"retries": 3, "ratio": 2, "name": "x", "verbose": False, "items": [1],
     "options": {"a": 1}, "timeout": "1h30m", "anything": [True]},
    {"timeout": 20}, {"timeout": 0.5}, {"ratio": 1.5},
    {"retries": None},  # null: unset, as for defaults
])
def test_values_that_fit(ir: Any, values: dict[str, Any]) -> None:
    assert check_context(ir, values) == []


@pytest.mark.parametrize(("values", "expected"), [
    ({"retries": True}, "context field 'retries' must be an int, got a bool: true"),
    ({"retries": 1.5}, "context field 'retries' must be an int, got a float: 1.5"),
    ({"retries": "3"}, "context field 'retries' must be an int, got text: \"3\""),
    ({"ratio": False}, "context field 'ratio' must be a float, got a bool: false"),
    ({"name": 3}, "context field 'name' must be a str, got an int: 3"),
    ({"verbose": "yes"}, "context field 'verbose' must be a bool, got text: \"yes\""),
    ({"items": {}}, "context field 'items' must be a list, got a mapping: {}"),
    ({"options": []}, "context field 'options' must be a dict, got a list: []"),
    ({"timeout": "soon"}, "context field 'timeout' must be a duration, got text: \"soon\""),
    ({"timeout": True}, "context field 'timeout' must be a duration, got a bool: true"),
    ({"timeout": -1}, "context field 'timeout' must be a duration, got an int: -1"),
])
def test_wrong_types_name_the_field_and_the_type(ir: Any, values: dict[str, Any],
                                                 expected: str) -> None:
    [problem] = check_context(ir, values)
    assert problem.field == next(iter(values))
    assert problem.message == expected
    assert problem.hint


def test_unknown_keys_suggest_the_closest_field(ir: Any) -> None:
    [problem] = check_context(ir, {"retry": 1})
    assert (problem.field, problem.message) == ("retry", "unknown context field 'retry'")
    assert problem.hint is not None and problem.hint.startswith("did you mean 'retries'?")
    [far] = check_context(ir, {"zzz": 1})
    assert far.hint is not None and "did you mean" not in far.hint
    assert "retries, ratio, name" in far.hint


def test_a_spec_without_context_says_so() -> None:
    bare = build_ir(loads("machine: bare\nstates:\n  a: {}\n"))
    [problem] = check_context(bare, {"x": 1})
    assert problem.hint == "machine 'bare' declares no context fields"


def test_every_problem_in_one_line(ir: Any) -> None:
    problems = check_context(ir, {"retries": True, "retry": 1})
    line = context_message(problems)
    assert "\n" not in line
    assert line.startswith("--context: context field 'retries' must be an int")
    assert "; unknown context field 'retry'" in line


@pytest.mark.parametrize(("type_name", "literal", "value"), [
    ("int", "true", True), ("float", '"1"', "1"), ("duration", "soon", "soon"),
    ("bool", "yes", "yes"), ("int", "1", 1), ("duration", "3m", "3m"),
])
def test_lint_and_check_context_share_the_rule(type_name: str, literal: str,
                                               value: Any) -> None:
    """A default M215 rejects is a value --context rejects, and the other way round."""
    ir = build_ir(loads(f"machine: m\ncontext:\n  f: {{type: {type_name}, default: {literal}}}"
                        "\nstates:\n  a: {}\n"))
    assert ir.context["f"].default == value
    m215 = [d for d in lint(ir) if d.code == "M215"]
    assert bool(m215) == (not fits(type_name, value))
    assert bool(check_context(ir, {"f": value})) == bool(m215)
