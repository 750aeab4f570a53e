"""The codex adapter reads what the real codex 0.171.0 (``codex exec --json``) printed,
captured against the scripted model server (tests/support/captured/codex/), without
running it; and its launches carry codex's own flags."""

from __future__ import annotations

import pytest

from interlock.runtime.agents.codex import RUST_LOG, CodexAdapter
from interlock.runtime.config.agents import AgentConfig
from interlock.runtime.engine.agent_output import AgentOutput

from support.paths import TESTS

CAPTURED = TESTS / "support" / "captured" / "codex"
adapter = CodexAdapter()


def read(name: str) -> AgentOutput:
    """The adapter's reading of capture ``name`` (its stdout and, if any, its stderr)."""
    stdout = CAPTURED / f"{name}.jsonl"
    stderr = CAPTURED / f"{name}.stderr.txt"
    return adapter.read(stdout.read_text() if stdout.exists() else "",
                        stderr.read_text() if stderr.exists() else "")


def test_success_answer_usage_and_session() -> None:
    output = read("success")
    assert output.answer == "verdict: accept\nsummary: fine\n"
    assert output.usage.input_tokens == 321 and output.usage.output_tokens == 45
    assert output.usage.cost_usd is None  # codex reports no cost
    assert output.error is None and output.reason is None and output.final
    assert output.session and len(output.session) == 36 and output.denials == ()


def test_a_write_and_a_command_that_ran_are_no_denials() -> None:
    for name in ("write_edit", "shell_full"):
        output = read(name)
        assert output.answer and output.error is None and output.denials == ()
    assert read("write_edit").usage.input_tokens == 240  # summed over the two requests


@pytest.mark.parametrize(("name", "denial"), [
    ("write_denied", "apply_patch (writing is blocked by read-only sandbox)"),
    ("write_outside", "apply_patch (writing outside of the project)"),
    ("shell_denied", "shell (read_only_file_system)"),
    ("shell_outside", "shell /work/cx_outside.txt (read_only_file_system)"),
    ("escalation_refused", "shell (approval policy is Never; reject command)"),
])
def test_refused_tool_calls_come_from_stderr(name: str, denial: str) -> None:
    """codex exits 0 and prints no event for a refused call: only its log names it."""
    output = read(name)
    assert output.denials == (denial,)
    assert output.error is None and output.final


@pytest.mark.parametrize(("name", "reason", "words"), [
    ("http_400", "invalid_request", "Invalid value for 'input'."),
    ("http_401", "auth", "unexpected status 401 Unauthorized: Incorrect API key"),
    # no auth.json and no CODEX_API_KEY: codex sends no key at all, OpenAI answers 401
    ("not_logged_in", "auth", "401 Unauthorized: Missing bearer or basic authentication"),
    ("http_403", "permission_denied", "unexpected status 403 Forbidden"),
    ("http_404", "not_found", "The model `gpt-nope` does not exist"),
    ("http_429", "rate_limited", "exceeded retry limit, last status: 429"),
    ("http_500", "unavailable", "experiencing high demand"),
    ("http_503", "unavailable", "Selected model is at capacity"),
    ("cut_failed", "unavailable", "stream disconnected before completion"),
    ("unreachable", "unavailable", "Connection failed: error sending request"),
])
def test_failures_in_the_clis_own_words(name: str, reason: str, words: str) -> None:
    output = read(name)
    assert output.reason == reason
    assert output.error is not None and output.error.startswith("codex: ")
    assert words in output.error
    assert "Reconnecting..." not in output.error  # the retry notices are not the error
    assert output.answer == "" and output.final


def test_a_stream_cut_retried_into_an_answer_is_no_error() -> None:
    output = read("cut_recovered")
    assert output.answer == "verdict: accept\n"
    assert output.error is None and output.final


def test_a_warning_item_is_not_an_error() -> None:
    output = read("unknown_model")  # "Model metadata for `...` not found" as an error item
    assert output.answer == "verdict: accept\n" and output.error is None


def test_retrying_offline_is_not_yet_an_error() -> None:
    """No login and no network: codex retries forever ("waiting for network"); the
    dispatcher's timeout ends it."""
    output = read("not_logged_in_offline")
    assert output.error is None and not output.final and output.answer == ""


@pytest.mark.parametrize(("name", "reason", "words"), [
    ("legacy_profile", "invalid_request", "Error loading config.toml: --profile `reviewer`"),
    ("bad_option", "invalid_request", "error: unexpected argument '--bogus' found"),
    ("untrusted", "permission_denied", "Not inside a trusted directory"),
])
def test_a_failure_before_any_event_comes_from_stderr(name: str, reason: str, words: str
                                                      ) -> None:
    output = read(name)
    assert output.error is not None and output.error.startswith("codex: ")
    assert words in output.error and output.reason == reason
    assert not output.final


def test_resume_continues_the_same_session() -> None:
    first, second = read("resume_first"), read("resume_second")
    assert first.answer == "first: answered" and second.answer == "second: steered"
    assert first.session == second.session is not None


def _config(**settings: object) -> AgentConfig:
    return AgentConfig.model_validate({"cli": "codex", **settings})


def test_permissions_map_to_codexs_sandbox() -> None:
    def argv(permissions: str | None) -> tuple[str, ...]:
        return adapter.launch(_config(permissions=permissions), "the prompt").argv

    assert argv(None)[:8] == ("codex", "exec", "--json", "--skip-git-repo-check",
                              "--disable", "unbounded_connection_retries",
                              "--sandbox", "read-only")
    assert argv("edit")[6:8] == ("--sandbox", "workspace-write")
    assert argv("full")[6:8] == ("--sandbox", "danger-full-access")
    assert argv("full")[-1] == "-" and "the prompt" not in argv("full")


def test_the_launch_and_the_resume_read_the_prompt_from_stdin() -> None:
    config = _config(model="gpt-5.5", agent="reviewer", permissions="edit", args=["--x"])
    launch = adapter.launch(config, "the prompt")
    assert launch.stdin == "the prompt" and launch.argv[-2:] == ("--x", "-")
    assert launch.argv[8:10] == ("--model", "gpt-5.5")
    assert launch.argv[10:12] == ("--profile", "reviewer")
    assert launch.env["RUST_LOG"] == RUST_LOG
    resumed = adapter.resume(config, "01a21bef-382f", "STEER: stop")
    assert resumed is not None and resumed.stdin == "STEER: stop"
    assert resumed.argv[:12] == launch.argv[:12]  # the sandbox is given again
    assert resumed.argv[-4:] == ("--x", "resume", "01a21bef-382f", "-")


def test_untrusted_refuse_leaves_codexs_git_check_on() -> None:
    for untrusted in ("allow", "refuse"):
        config = _config(untrusted=untrusted, permissions="edit")
        launched = adapter.launch(config, "p").argv
        resumed = adapter.resume(config, "s1", "p")
        assert resumed is not None
        for argv in (launched, resumed.argv):
            assert ("--skip-git-repo-check" in argv) == (untrusted == "allow")
            assert argv[argv.index("--sandbox") + 1] == "workspace-write"


def test_the_agents_own_rust_log_wins() -> None:
    launch = adapter.launch(_config(env={"RUST_LOG": "debug"}), "p")
    assert launch.env["RUST_LOG"] == "debug"
