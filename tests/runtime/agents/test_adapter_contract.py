"""The agent adapter contract, run against every adapter with a real process.

The fast suite: the FAKE executables of ``tests/support/fake_clis/`` (named exactly like
the CLIs) first on PATH, no node. The real CLIs run the same kind of cases against the
scripted model server in ``test_real_cli_contract.py``. Each fake checks
the flags the adapter passes and prints its CLI's documented output format (see the
fakes' docstrings). ``command`` runs a small Python program and ``demo`` the offline role
agent; both are real.

For each adapter: launch -> a real dispatch (``runtime/dispatch``) -> read gives the
answer as the expected YAML document, the usage where the CLI reports it, the error on
the error variant; a missing executable is a spawn error; reading any prefix of the
stream (an agent still writing) never raises.
"""

from __future__ import annotations

import json
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from interlock.runtime.agents.adapters import (
    ADAPTERS,
    adapter_for,
    agent_command,
    polling_for,
    read_result,
)
from interlock.runtime.config.agents import AGENT_CLIS, AgentConfig
from interlock.runtime.dispatch import DispatchResult, dispatch
from interlock.runtime.engine.agent_output import Usage

from support.paths import TESTS

FAKES = TESTS / "support" / "fake_clis"
PROMPT = "Review the plan for the parser.\nIt has three tasks; check each one."
ECHO_AGENT = (
    "import sys, json, os\n"
    "p = sys.stdin.read()\n"
    "print('verdict: accept'); print('cli: command'); print(f'words: {len(p.split())}')\n"
    "print('first: ' + json.dumps(p.strip().splitlines()[0]))\n"
    "sys.exit(3 if os.environ.get('FAKE_CLI_ERROR') == '1' else 0)\n"
)


@dataclass(frozen=True)
class Case:
    """One adapter under test: its config and what it reports."""

    cli: str
    settings: dict[str, Any]
    usage: Usage
    reports_errors: bool  # the CLI says what went wrong in its own output
    checks_words: bool = True  # the answer counts the prompt's words

    def config(self, **env: str) -> AgentConfig:
        path = f"{FAKES}{os.pathsep}{os.environ.get('PATH', os.defpath)}"
        return AgentConfig.model_validate(
            {"cli": self.cli, **self.settings, "env": {"PATH": path, **env}})


CLI_USAGE = Usage(input_tokens=1200, output_tokens=85)
CASES = [
    Case("claude", {"model": "sonnet", "agent": "reviewer"},
         Usage(1200, 85, 0.0123), reports_errors=True),
    Case("codex", {"model": "gpt-5-codex"}, CLI_USAGE, reports_errors=True),
    Case("opencode", {"model": "anthropic/claude-sonnet-4-5", "agent": "plan"},
         Usage(1200, 85, 0.0123), reports_errors=True),
    Case("gemini", {"model": "gemini-2.5-pro"}, CLI_USAGE, reports_errors=True),
    Case("command", {"command": [sys.executable, "-c", ECHO_AGENT]}, Usage(),
         reports_errors=False),
    Case("demo", {"role": "reviewer"}, Usage(), reports_errors=False, checks_words=False),
]
IDS = [case.cli for case in CASES]


def run(config: AgentConfig, prompt: str = PROMPT) -> DispatchResult:
    return dispatch(agent_command(config, prompt, name=config.cli), polling_for(config),
                    spill_dir=None)


def test_every_cli_has_an_adapter_and_a_case() -> None:
    assert set(ADAPTERS) == set(AGENT_CLIS) == set(IDS)
    for cli, adapter in ADAPTERS.items():
        assert adapter.cli == cli
        assert adapter.completion in ("exit", "document")


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_answer_is_the_document(case: Case) -> None:
    config = case.config()
    result = run(config)
    assert result.status == "completed", result.polling.stderr
    output = read_result(config, result)
    doc = yaml.safe_load(output.answer)
    assert doc["verdict"] == "accept"
    if case.checks_words:
        assert doc["cli"] == case.cli
        assert doc["words"] == len(PROMPT.split())  # the whole prompt arrived
        assert doc["first"] == PROMPT.splitlines()[0]
    assert output.error is None


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_usage_where_the_cli_reports_it(case: Case) -> None:
    config = case.config()
    assert read_result(config, run(config)).usage == case.usage


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_error_variant(case: Case, tmp_path: Path) -> None:
    if case.cli == "demo":
        script = tmp_path / "fail.yaml"
        script.write_text("fail_times: 1\nexit_code: 3\n")
        config = AgentConfig(cli="demo", role="reviewer", script=str(script))
    else:
        config = case.config(FAKE_CLI_ERROR="1")
    result = run(config)
    assert result.status == "error"
    assert result.polling.exit_code not in (0, None)
    output = read_result(config, result)
    if case.reports_errors:
        assert output.error, output
        assert case.cli in output.error
    else:
        assert output.error is None  # only the exit code says so


@pytest.mark.parametrize("case", [c for c in CASES if c.cli != "demo"],
                         ids=[c.cli for c in CASES if c.cli != "demo"])
def test_missing_executable_is_a_spawn_error(case: Case, tmp_path: Path) -> None:
    settings = dict(case.settings)
    if case.cli == "command":
        settings["command"] = ["no-such-agent-cli", "--json"]
    config = AgentConfig.model_validate({"cli": case.cli, **settings,
                                         "env": {"PATH": str(tmp_path)}})
    result = run(config)
    assert result.status == "error"
    assert result.polling.completion_method == "spawn"
    assert result.error


@pytest.mark.parametrize("case", [c for c in CASES if c.cli not in ("command", "demo")],
                         ids=[c.cli for c in CASES if c.cli not in ("command", "demo")])
def test_the_fake_received_the_documented_flags(case: Case, tmp_path: Path) -> None:
    log = tmp_path / "call.json"
    config = case.config(FAKE_CLI_LOG=str(log))
    launch = adapter_for(config).launch(config, PROMPT)
    assert run(config).status == "completed"
    call = json.loads(log.read_text())
    assert call["argv"] == list(launch.argv[1:])
    assert config.model in call["argv"]
    if launch.stdin is not None:
        assert call["stdin"] == PROMPT
    else:
        assert PROMPT in call["argv"]


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_reading_any_prefix_never_raises(case: Case) -> None:
    config = case.config()
    stdout = run(config).polling.stdout
    adapter = adapter_for(config)
    final = adapter.read(stdout)
    for end in range(len(stdout) + 1):
        partial = adapter.read(stdout[:end])
        assert isinstance(partial.answer, str)
    assert adapter.read("").answer == ""
    assert final.answer


@pytest.mark.parametrize("case", CASES, ids=IDS)
def test_final_only_once_the_last_event_is_whole(case: Case) -> None:
    """A CLI that lingers after its last event can be stopped: ``final`` says the answer
    is whole; one byte short of the last event it is not."""
    config = case.config()
    stdout = run(config).polling.stdout
    adapter = adapter_for(config)
    cut = stdout[:len(stdout.rstrip()) - 1]
    if adapter.completion == "exit":
        assert adapter.read(stdout).final
        assert not adapter.read(cut).final
    else:
        assert not adapter.read(stdout).final


def test_args_env_and_cwd_reach_the_launch(tmp_path: Path) -> None:
    config = AgentConfig(cli="claude", args=("--max-turns", "3"), env={"A": "1"},
                         cwd=str(tmp_path))
    launch = adapter_for(config).launch(config, "p")
    assert launch.argv[:5] == ("claude", "-p", "--output-format", "stream-json", "--verbose")
    assert launch.argv[-2:] == ("--max-turns", "3")
    assert launch.stdin == "p"
    assert dict(launch.env) == {"A": "1"} and launch.cwd == str(tmp_path)
    command = agent_command(config, "p", name="r")
    assert command.options.cwd == tmp_path and command.prompt == "p"


@pytest.mark.parametrize("cli", ["claude", "codex", "opencode", "gemini"])
def test_the_prompt_is_never_an_argument(cli: str) -> None:
    """Not in argv (``ps`` and the journal show argv; a long prompt would not fit), so a
    prompt that looks like a flag stays the prompt: it goes through stdin."""
    config = AgentConfig.model_validate({"cli": cli, "args": ["--x"]})
    launch = adapter_for(config).launch(config, "-p --help")
    assert "-p --help" not in launch.argv and "--x" in launch.argv
    assert launch.stdin == "-p --help"
