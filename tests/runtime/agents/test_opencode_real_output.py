"""The opencode adapter reads what the real opencode 1.18.33 printed (captured against the
scripted model server with the adapter's own launch: tests/support/captured/opencode/),
without running it."""

from __future__ import annotations

import json

import pytest

from interlock.runtime.agents.opencode import OpencodeAdapter
from interlock.runtime.config.agents import AgentConfig
from interlock.runtime.engine.agent_output import AgentOutput

from support.paths import TESTS

CAPTURED = TESTS / "support" / "captured" / "opencode"
adapter = OpencodeAdapter()


def read(name: str) -> AgentOutput:
    stderr = CAPTURED / f"{name}.stderr.txt"
    return adapter.read((CAPTURED / f"{name}.jsonl").read_text(),
                        stderr.read_text() if stderr.exists() else "")


def test_success_answer_usage_cost_and_session() -> None:
    output = read("success")
    assert output.answer == "verdict: accept\nsummary: looks fine\n"
    assert output.usage.input_tokens == 321 and output.usage.output_tokens == 45
    assert output.usage.cost_usd == pytest.approx(0.001638)  # the provider's price in config
    assert output.error is None and output.reason is None and output.final
    assert output.session == "ses_de406e95bffe6eBkVq5MV3ytEY"


def test_a_tool_step_then_the_answer_sums_both_steps() -> None:
    output = read("tool_write")
    assert output.answer == "written: hello.txt" and output.final
    assert output.usage.input_tokens == 240 and output.usage.output_tokens == 60
    assert output.denials == ()
    assert not adapter.read((CAPTURED / "tool_write.jsonl").read_text().splitlines()[2]).final


@pytest.mark.parametrize(("name", "denial"), [
    ("denied_write", "write /w/hello.txt"),
    ("denied_shell", "bash echo ran > ran.txt"),
])
def test_a_rejected_tool_call_is_a_denial_and_the_agent_goes_on(name: str, denial: str
                                                                ) -> None:
    output = read(name)
    assert output.denials == (denial,)
    assert output.error is None and output.final
    assert output.answer.startswith("I may not")


def test_an_allowed_shell_command_is_no_denial() -> None:
    output = read("shell")
    assert output.denials == () and output.answer == "ran it"


@pytest.mark.parametrize(("name", "reason", "words"), [
    ("http_400", "invalid_request", "Invalid 'messages': empty array. (HTTP 400)"),
    ("http_401", "auth", "Incorrect API key provided"),
    ("http_403", "permission_denied", "(HTTP 403)"),
    ("http_404", "not_found", "does not exist"),
    ("http_429", "rate_limited", "Rate limit reached for requests (HTTP 429)"),
    ("http_500", "unavailable", "(HTTP 500)"),
    ("no_server", "unavailable", "Cannot connect to API"),
    ("not_logged_in", "unavailable", "Cannot connect to API"),
    ("unknown_model", "not_found", "Model not found: nosuch/model-x"),
])
def test_failures_in_the_clis_own_words(name: str, reason: str, words: str) -> None:
    output = read(name)
    assert output.reason == reason
    assert output.error is not None and output.error.startswith("opencode: ")
    assert words in output.error
    assert output.answer == "" and output.final


def test_an_unexpected_server_error_takes_its_cause_from_the_error_log() -> None:
    stdout = (CAPTURED / "unknown_model.jsonl").read_text()
    assert "Unexpected server error" in stdout
    alone = adapter.read(stdout)  # without --print-logs' stderr: opencode's words only
    assert alone.error == "opencode: Unexpected server error. Check server logs for details."


def test_a_cut_stream_retried_gives_the_retry_answer() -> None:
    output = read("cut")
    assert output.answer == "verdict: accept\nsummary: looks fine\n"
    assert output.error is None and output.final


@pytest.mark.parametrize(("name", "reason", "words"), [
    ("unknown_agent", "not_found", 'agent "nosuch" not found'),
    ("subagent", "invalid_request", 'agent "explore" is a subagent'),
])
def test_an_agent_opencode_falls_back_from_is_an_error(name: str, reason: str, words: str
                                                       ) -> None:
    stderr = (CAPTURED / f"{name}.stderr.txt").read_text()
    output = adapter.read((CAPTURED / "unknown_agent.jsonl").read_text(), stderr)
    assert output.answer == "verdict: accept\nsummary: looks fine\n"  # the default agent's
    assert output.reason == reason
    assert output.error is not None and words in output.error


def test_a_usage_error_before_any_event_comes_from_stderr() -> None:
    output = adapter.read("", (CAPTURED / "empty_prompt.stderr.txt").read_text())
    assert output.error == "opencode: You must provide a message or a command"
    assert not output.final and output.session is None


def test_error_log_lines_of_a_good_run_are_no_error() -> None:
    stderr = ('timestamp=2026-11-27T07:49:07.608Z level=ERROR run=51c96751 message="Failed '
              'to fetch models.dev" cause="Cause([Fail(HttpClientError: Transport error)])"\n')
    output = adapter.read((CAPTURED / "success.jsonl").read_text(), stderr)
    assert output.error is None and output.reason is None


def test_a_steer_answers_in_the_same_session() -> None:
    output = read("steer")
    assert output.answer == "second: steered"
    assert output.session == "ses_de403c8ffffe6rwfe2vred5AvY"


def config(**settings: object) -> AgentConfig:
    return AgentConfig.model_validate({"cli": "opencode", "cwd": "/w", **settings})


def test_the_prompt_goes_through_stdin_never_argv() -> None:
    launch = adapter.launch(config(model="scripted/m", agent="plan"), "-p --help: Review it")
    assert launch.stdin == "-p --help: Review it"
    assert all("Review" not in arg for arg in launch.argv)
    assert launch.argv[:4] == ("opencode", "run", "--format", "json")
    assert launch.argv[-4:] == ("--model", "scripted/m", "--agent", "plan")
    assert launch.cwd == "/w"  # PWD follows it at spawn (dispatch.process.working_folder)


def test_permissions_are_opencodes_own_rules_per_call() -> None:
    def rules(permissions: str | None) -> dict[str, object]:
        env = adapter.launch(config(permissions=permissions), "p").env
        return dict(json.loads(env["OPENCODE_PERMISSION"]))

    read_only = rules(None)
    assert read_only["*"] == "ask"  # opencode run rejects what it would ask about
    assert "edit" not in read_only and "bash" not in read_only
    assert read_only["grep"] == "allow"
    assert rules("edit")["edit"] == "allow" and "bash" not in rules("edit")
    assert rules("full")["edit"] == rules("full")["bash"] == "allow"
    assert rules("read-only") == read_only


def test_the_agent_goes_on_after_a_denial_keeping_its_own_config_content() -> None:
    env = {"OPENCODE_CONFIG_CONTENT": json.dumps({"experimental": {"batch_tool": True},
                                                  "share": "disabled"})}
    launch = adapter.launch(config(env=env), "p")
    content = json.loads(launch.env["OPENCODE_CONFIG_CONTENT"])
    assert content == {"share": "disabled", "experimental": {
        "batch_tool": True, "continue_loop_on_deny": True}}


def test_resume_continues_the_session_with_the_steer_on_stdin() -> None:
    launch = adapter.resume(config(), "ses_1", "STEER: go")
    assert launch is not None and launch.stdin == "STEER: go"
    assert launch.argv[launch.argv.index("--session") + 1] == "ses_1"
    assert launch.cwd == "/w"  # the session's folder: elsewhere opencode run never exits
