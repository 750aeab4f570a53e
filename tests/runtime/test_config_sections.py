"""Every interlock.yaml section reports the same mistakes the same way (machines.settings):
located at FILE:LINE:COL, the setting named as written, its own code."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from interlock.machines.diagnostics import SpecError
from interlock.runtime.config.agents import load_agents
from interlock.runtime.config.dispatch import load_dispatch_config
from interlock.runtime.config.inbox import load_poller_config
from interlock.runtime.config.ralph import load_ralph_config

# section -> (its loader, the text up to the value of a duration setting, a text with a
#             misspelt key, (that key, the key meant), (its codes: unknown key, bad duration))
SECTIONS: dict[str, tuple[Callable[[Path], Any], str, str, tuple[str, str], tuple[str, str]]] = {
    "agents": (load_agents, "agents:\n  a:\n    cli: demo\n    role: planner\n    delay: ",
               "agents:\n  a: {cli: demo, role: planner, dealy: 1}\n", ("dealy", "delay"),
               ("A501", "A505")),
    "ralph": (load_ralph_config, "ralph:\n  knowledge_approval_timeout: ",
              "ralph: {max_iteration: 3}\n", ("max_iteration", "max_iterations"), ("R601", "R604")),
    "dispatch": (lambda p: load_dispatch_config(p), "dispatch:\n  idleTimeout: ",
                 "dispatch: {pollingIntervall: 3}\n", ("pollingIntervall", "pollingInterval"),
                 ("D401", "D404")),
    "inbox": (lambda p: load_poller_config(p), "inbox:\n  interval: ",
              "inbox: {intervall: 3}\n", ("intervall", "interval"), ("C002", "C002")),
}


def _line_column(text: str, index: int) -> str:
    return f"{text.count(chr(10), 0, index) + 1}:{index - (text.rfind(chr(10), 0, index) + 1) + 1}"


def _problems(tmp_path: Path, section: str, text: str) -> list[str]:
    project = tmp_path / "interlock.yaml"
    project.write_text(text)
    with pytest.raises(SpecError) as info:
        SECTIONS[section][0](project)
    return [str(d).replace(f"{project}:", "interlock.yaml:") for d in info.value.diagnostics]


@pytest.mark.parametrize("section", SECTIONS)
@pytest.mark.parametrize("value", ["null", ".inf", "soon", "[1]"])
def test_a_bad_duration_is_located_and_named(tmp_path: Path, section: str, value: str) -> None:
    _, prefix, _, _, (_, duration_code) = SECTIONS[section]
    problems = _problems(tmp_path, section, prefix + value + "\n")
    assert len(problems) == 1, problems
    assert problems[0].startswith(f"interlock.yaml:{_line_column(prefix, len(prefix))}: error "
                                  f"{duration_code}: invalid duration for "), problems


@pytest.mark.parametrize("section", SECTIONS)
def test_a_misspelt_key_is_located_with_a_suggestion(tmp_path: Path, section: str) -> None:
    _, _, text, (typo, meant), (unknown_code, _) = SECTIONS[section]
    problems = _problems(tmp_path, section, text)
    assert len(problems) == 1, problems
    assert problems[0].startswith(f"interlock.yaml:{_line_column(text, text.index(typo))}: "
                                  f"error {unknown_code}: "), problems
    assert problems[0].endswith(f"(did you mean {meant!r}?)"), problems
