"""Prompt rendering: Jinja2, sandboxed, StrictUndefined, errors located."""

from __future__ import annotations

from pathlib import Path

import pytest

from interlock.machines.diagnostics import Mark
from interlock.runtime.engine.prompts import PromptError, render_prompt, signal_lines

SIGNALS = [{"type": "STEER", "message": "scope: only the parser"},
           {"type": "INFO", "message": "the CI runs\non Python 3.12"}]


def test_context_input_and_signals_are_visible() -> None:
    text = render_prompt(
        "Iteration {{ context.iteration }}: {{ input.task }}\n"
        "{% for s in signals %}[{{ s.type }}] {{ s.message }}\n{% endfor %}{{ signal_text }}",
        context={"iteration": 2, "repo": "interlock"},
        input={"task": "work on {{ context.repo }}", "n": 3}, signals=SIGNALS)
    assert text.startswith("Iteration 2: work on interlock\n[STEER] scope: only the parser\n")
    assert text.endswith("STEER: scope: only the parser\nINFO: the CI runs on Python 3.12")


def test_nested_input_strings_are_rendered() -> None:
    text = render_prompt("{{ input.files[1] }} {{ input.meta.who }}", context={"u": "ann"},
                         input={"files": ["a", "{{ context.u }}.md"],
                                "meta": {"who": "{{ 1 + 1 }}"}})
    assert text == "ann.md 2"


def test_missing_variable_in_a_prompt_file_names_file_line_and_variable(tmp_path: Path) -> None:
    prompt = tmp_path / "plan.j2"
    prompt.write_text("Plan:\n\n{{ input.request }} for {{ context.owner }}\n")
    with pytest.raises(PromptError) as info:
        render_prompt(prompt, context={}, input={"request": "x"})
    assert info.value.variable == "owner"
    assert str(info.value).startswith(f"{prompt}:3:1: error A510: prompt: undefined variable "
                                      "'owner'")


def test_missing_variable_in_an_inline_prompt_is_located_from_the_spec_mark() -> None:
    with pytest.raises(PromptError) as info:
        render_prompt("first\nsecond {{ nothing }}", context={},
                      origin=Mark("specs/ralph.yaml", 40, 15))
    assert info.value.mark == Mark("specs/ralph.yaml", 41, 1)
    assert info.value.variable == "nothing"
    with pytest.raises(PromptError) as info:
        render_prompt("{{ nothing }}", context={}, origin="specs/ralph.yaml:12")
    assert str(info.value.mark) == "specs/ralph.yaml:12:1"
    with pytest.raises(PromptError) as info:
        render_prompt("{{ nothing }}", context={}, origin="specs/ralph.yaml:12:15")
    assert str(info.value.mark) == "specs/ralph.yaml:12:15"


def test_missing_variable_in_the_input_names_the_input_key() -> None:
    with pytest.raises(PromptError) as info:
        render_prompt("{{ input.goal }}", context={}, input={"goal": "{{ context.nope }}"},
                      origin="spec.yaml:7")
    assert "input.goal: undefined variable 'nope'" in str(info.value)


def test_undefined_is_never_an_empty_string() -> None:
    for template in ("{{ x }}", "{{ x | default_missing }}", "{{ context.a.b }}",
                     "{% for i in x %}{% endfor %}", "{{ x ~ 'y' }}"):
        with pytest.raises(PromptError):
            render_prompt(template, context={"a": {}})


def test_syntax_error_and_empty_prompt() -> None:
    with pytest.raises(PromptError, match="template syntax error"):
        render_prompt("a\n{% if %}", context={}, origin="s.yaml:3")
    with pytest.raises(PromptError, match="renders to an empty text"):
        render_prompt("{% if false %}x{% endif %}  \n", context={})
    with pytest.raises(PromptError, match="cannot be read"):
        render_prompt(Path("/nonexistent/prompt.j2"), context={})


def test_the_environment_is_sandboxed() -> None:
    with pytest.raises(PromptError):
        render_prompt("{{ ''.__class__.__mro__[1].__subclasses__() }}", context={})


def test_signal_lines_fold_newlines() -> None:
    assert signal_lines(SIGNALS) == ("STEER: scope: only the parser\n"
                                     "INFO: the CI runs on Python 3.12")
    assert signal_lines([]) == ""
