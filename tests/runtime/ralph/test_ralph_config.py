"""The ``ralph:`` section of interlock.yaml: defaults, durations, located errors."""

from __future__ import annotations

import doctest
from pathlib import Path

import pytest

from interlock.runtime.config import ralph as config_module
from interlock.runtime.config.ralph import RalphConfig, RalphConfigError, load_ralph_config


def _write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "interlock.yaml"
    path.write_text(text)
    return path


def test_absent_file_or_key_gives_defaults(tmp_path: Path) -> None:
    assert load_ralph_config(tmp_path / "missing.yaml") == RalphConfig()
    assert load_ralph_config(_write(tmp_path, "agents: {}\n")) == RalphConfig()


def test_full_section(tmp_path: Path) -> None:
    path = _write(tmp_path, """\
ralph:
  gates:
    - {name: tests, command: [pytest, -q], timeout: 10m}
    - {name: lint, command: "ruff check ."}
  gate_attempts: 3
  max_iterations: 5
  max_runtime: 1h30m
  max_cost: 2.5
  invocation_timeout: 90s
  no_progress_limit: 4
  knowledge_approval_timeout: 5m
  retry: {exit_codes: [75], output_patterns: ["No messages returned"], attempts: 4,
          base_delay: 500ms, max_delay: 30s}
""")
    config = load_ralph_config(path)
    assert [g.argv for g in config.gates] == [("pytest", "-q"), ("sh", "-c", "ruff check .")]
    assert config.gates[0].timeout == 600.0
    assert (config.gate_attempts, config.max_iterations, config.max_runtime) == (3, 5, 5400.0)
    assert (config.max_cost, config.invocation_timeout, config.no_progress_limit) == (
        2.5, 90.0, 4)
    assert config.knowledge_approval_timeout == 300.0
    assert config.retry.exit_codes == (75,)
    assert (config.retry.attempts, config.retry.base_delay, config.retry.max_delay) == (
        4, 0.5, 30.0)


def test_null_limits_mean_unlimited(tmp_path: Path) -> None:
    config = load_ralph_config(_write(tmp_path, "ralph: {max_iterations: null}\n"))
    assert config.max_iterations is None


@pytest.mark.parametrize(("text", "expected"), [
    ("ralph:\n  max_iteration: 3\n", "interlock.yaml:2:3: error R601: unknown key "
     "'max_iteration' in ralph"),
    ("ralph:\n  max_runtime: soon\n", "interlock.yaml:2:16: error R604: invalid duration "
     "for ralph.max_runtime"),
    ("ralph:\n  gates:\n    - {name: t, comand: [x]}\n", "interlock.yaml:3:17: error R601: "
     "unknown key 'comand' in ralph.gates.0"),
    ("ralph:\n  retry: {output_patterns: ['(']}\n", "interlock.yaml:2:29: error R605: "
     "invalid regular expression in ralph.retry.output_patterns.0"),
    ("ralph:\n  gate_attempts: 0\n", "interlock.yaml:2:18: error R602: invalid value for "
     "ralph.gate_attempts"),
    ("ralph: [1]\n", "interlock.yaml:1:8: error R603: ralph must be a mapping"),
    ("ralph:\n  gates:\n    - {name: t, command: [a]}\n    - {name: t, command: [b]}\n",
     "error R602: invalid value for ralph.gates: two gates are named 't'"),
])
def test_errors_are_located(tmp_path: Path, text: str, expected: str) -> None:
    with pytest.raises(RalphConfigError) as info:
        load_ralph_config(_write(tmp_path, text))
    message = str(info.value)
    assert expected in message.replace(str(tmp_path) + "/", ""), message
    assert all(len(str(d).splitlines()) == 1 for d in info.value.diagnostics)


def test_unknown_key_suggests(tmp_path: Path) -> None:
    with pytest.raises(RalphConfigError) as info:
        load_ralph_config(_write(tmp_path, "ralph: {retry: {atempts: 2}}\n"))
    assert "did you mean 'attempts'" in str(info.value.diagnostics[0].hint)


def test_docstring_examples() -> None:
    result = doctest.testmod(config_module)
    assert result.attempted > 0 and result.failed == 0


def test_a_folder_means_its_interlock_yaml(tmp_path: Path) -> None:
    _write(tmp_path, "ralph: {max_iterations: 4, retry: {base: 1s, cap: 9s}}\n")
    config = load_ralph_config(tmp_path)
    assert config.max_iterations == 4
    assert (config.retry.base, config.retry.cap) == (1.0, 9.0)
    assert (config.retry.base_delay, config.retry.max_delay) == (1.0, 9.0)


def test_with_overrides_validates_and_names_the_option() -> None:
    config = RalphConfig(max_cost=3.0)
    changed = config.with_overrides(max_iterations=2, max_runtime="1h", max_cost=None)
    assert (changed.max_iterations, changed.max_runtime, changed.max_cost) == (2, 3600.0, 3.0)
    with pytest.raises(RalphConfigError, match=r"invalid value for --max-iterations: "):
        config.with_overrides(max_iterations=0)


def test_role_agents_are_the_demo_roles_only_without_an_agents_section(tmp_path: Path
                                                                        ) -> None:
    from interlock.runtime.config.ralph import role_agents

    assert {a.cli for a in role_agents(tmp_path).values()} == {"demo"}
    assert len(role_agents(tmp_path)) == 5
    _write(tmp_path, "agents:\n  executor: {cli: command, command: [my-agent]}\n")
    agents = role_agents(tmp_path)
    assert agents["executor"].cli == "command" and "planner" not in agents
    assert agents["executor"].permissions == "edit"  # the Executor's default
