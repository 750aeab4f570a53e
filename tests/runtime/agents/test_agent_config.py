"""`agents:` in interlock.yaml: AgentConfig, load_agents and its located errors."""

from __future__ import annotations

from pathlib import Path

import pytest

from interlock.runtime.config.agents import (
    CODES,
    AgentConfig,
    AgentConfigError,
    default_agents,
    load_agents,
    resolve_agent,
)
from interlock.runtime.config.role_names import ALL_ROLES


def write(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "interlock.yaml"
    path.write_text(text)
    return path


def errors(tmp_path: Path, text: str) -> list[str]:
    with pytest.raises(AgentConfigError) as info:
        load_agents(write(tmp_path, text))
    for d in info.value.diagnostics:
        assert d.code in CODES or d.code.startswith("Y")
    return [str(d).removeprefix(f"{tmp_path}/") for d in info.value.diagnostics]


def test_a_full_configuration_loads(tmp_path: Path) -> None:
    agents = load_agents(write(tmp_path, """\
dispatch: {dispatchTimeout: 3m}
agents:
  reviewer:
    cli: claude
    model: sonnet
    agent: code-reviewer
    outputFormat: json
    args: [--max-turns, "3"]
    env: {ANTHROPIC_LOG: debug}
    cwd: work
    timeout: 5m
  lint: {cli: command, command: [ruff, check, --output-format, json]}
  planner: {cli: demo, delay: 100ms, script: scripts/planner.yaml}
"""))
    reviewer = agents["reviewer"]
    assert reviewer.cli == "claude" and reviewer.model == "sonnet"
    assert reviewer.agent == "code-reviewer" and reviewer.output_format == "json"
    assert reviewer.args == ("--max-turns", "3") and reviewer.env == {"ANTHROPIC_LOG": "debug"}
    assert reviewer.cwd == str(tmp_path.resolve() / "work")  # relative to the project file
    assert reviewer.timeout == 300.0
    assert agents["lint"].command == ("ruff", "check", "--output-format", "json")
    planner = agents["planner"]
    assert planner.role == "planner"  # a demo agent named like a role plays that role
    assert planner.delay == 0.1
    assert planner.script == str(tmp_path.resolve() / "scripts" / "planner.yaml")


def test_absent_file_or_key_is_no_agents(tmp_path: Path) -> None:
    assert load_agents(tmp_path / "interlock.yaml") == {}
    assert load_agents(write(tmp_path, "dispatch: {pollingInterval: 2}\n")) == {}


def test_unknown_key_is_located_with_a_hint(tmp_path: Path) -> None:
    [message] = errors(tmp_path, "agents:\n  r:\n    cli: claude\n    modle: sonnet\n")
    assert message.startswith("interlock.yaml:4:5: error A501: unknown key 'modle'")
    assert "did you mean 'model'?" in message


def test_unknown_cli_wrong_type_and_bad_duration(tmp_path: Path) -> None:
    messages = errors(tmp_path, """\
agents:
  a: {cli: cursor}
  b: {cli: codex, args: [1]}
  c: {cli: gemini, timeout: soon}
  d: {cli: codex, env: [A]}
""")
    assert messages[0].startswith("interlock.yaml:2:12: error A502: invalid value for "
                                  "agents.a.cli")
    assert "'claude', 'codex', 'opencode', 'gemini', 'command' or 'demo'" in messages[0]
    assert messages[1].startswith("interlock.yaml:3:26: error A502: invalid value for "
                                  "agents.b.args.0")
    assert messages[2].startswith("interlock.yaml:4:29: error A505: invalid duration for "
                                  "agents.c.timeout")
    assert messages[3].startswith("interlock.yaml:5:24: error A502")


def test_command_needs_its_argv(tmp_path: Path) -> None:
    [message] = errors(tmp_path, "agents:\n  lint:\n    cli: command\n")
    assert message.startswith("interlock.yaml:2:3: error A503: agents.lint: cli: command "
                              "needs command")


def test_settings_of_another_cli_are_refused(tmp_path: Path) -> None:
    [message] = errors(tmp_path, "agents:\n  r: {cli: claude, role: planner}\n")
    assert "role is only for cli: demo, not cli: claude" in message
    [message] = errors(tmp_path, "agents:\n  x: {cli: demo}\n")
    assert "cli: demo needs role" in message
    [message] = errors(tmp_path, "agents:\n  r: {cli: claude, untrusted: refuse}\n")
    assert "untrusted is only for cli: codex or gemini, not cli: claude" in message
    [message] = errors(tmp_path, "agents:\n  r: {cli: codex, untrusted: never}\n")
    assert "error A502: invalid value for agents.r.untrusted" in message


def test_missing_cli_and_non_mappings(tmp_path: Path) -> None:
    [message] = errors(tmp_path, "agents:\n  r: {model: sonnet}\n")
    assert message.startswith("interlock.yaml:2:3: error A503: agents.r.cli is required")
    [message] = errors(tmp_path, "agents: [claude]\n")
    assert "error A504: agents must map agent names to settings" in message
    [message] = errors(tmp_path, "agents:\n  r: claude\n")
    assert message.startswith("interlock.yaml:2:6: error A504")


def test_every_problem_is_reported_at_once(tmp_path: Path) -> None:
    assert len(errors(tmp_path, "agents:\n  a: {cli: x}\n  b: {cli: command}\n")) == 2


def test_yaml_errors_keep_their_location(tmp_path: Path) -> None:
    [message] = errors(tmp_path, "agents:\n  a: {cli: claude\n")
    assert message.startswith("interlock.yaml:")


def test_default_agents_are_the_demo_roles() -> None:
    agents = default_agents()
    assert tuple(agents) == (*ALL_ROLES, "poller")
    assert all(a.cli == "demo" and a.role == name for name, a in agents.items()
               if name in ALL_ROLES)
    assert agents["poller"].role == "questioner"  # the interview's poller, offline
    assert resolve_agent("planner", {}) == agents["planner"]  # no agents: section
    configured = {"reviewer": AgentConfig(cli="claude"), "questioner": AgentConfig(cli="codex")}
    assert resolve_agent("reviewer", configured) is configured["reviewer"]
    assert resolve_agent("planner", configured) is None  # never a demo in its place
    assert resolve_agent("nobody", configured) is None
    assert resolve_agent("poller", configured) is configured["questioner"]
    executor = resolve_agent("executor", {"executor": AgentConfig(cli="claude")})
    assert executor is not None and executor.permissions == "edit"  # the role's default
    assert resolve_agent("executor", {"executor": AgentConfig(
        cli="claude", permissions="read-only")}).permissions == "read-only"  # type: ignore
