"""The claude adapter reads what the real Claude Code 2.1.197 printed (captured against
the scripted model server: tests/support/captured/claude/), without running it."""

from __future__ import annotations

import pytest

from interlock.runtime.agents.claude import ClaudeAdapter

from support.paths import TESTS

CAPTURED = TESTS / "support" / "captured" / "claude"
adapter = ClaudeAdapter()


def read(name: str):  # type: ignore[no-untyped-def]
    return adapter.read((CAPTURED / f"{name}.jsonl").read_text())


def test_success_answer_usage_cost_and_session() -> None:
    output = read("success")
    assert output.answer == "verdict: accept\nsummary: fine\n"
    assert output.usage.input_tokens == 321 and output.usage.output_tokens == 45
    assert output.usage.cost_usd is not None and output.usage.cost_usd > 0
    assert output.error is None and output.reason is None and output.final
    assert output.session and len(output.session) == 36


def test_a_denied_write_is_named_though_the_call_succeeded() -> None:
    output = read("denied_write")
    assert output.error is None  # Claude Code reports success...
    assert output.denials == ("Write /w/hello.txt",)  # ...and the refusal beside it


@pytest.mark.parametrize(("name", "reason", "words"), [
    ("not_logged_in", "auth", "Not logged in · Please run /login"),
    ("http_401", "auth", "Invalid API key"),
    ("http_429", "rate_limited", "429"),
    ("http_529", "unavailable", "529"),
])
def test_failures_in_the_clis_own_words(name: str, reason: str, words: str) -> None:
    output = read(name)
    assert output.reason == reason
    assert output.error is not None and output.error.startswith("claude: ")
    assert words in output.error
    assert output.answer == ""


def test_a_usage_error_before_any_event_comes_from_stderr() -> None:
    output = adapter.read("", "--dangerously-skip-permissions cannot be used with root/sudo "
                              "privileges for security reasons\n")
    assert output.error == ("claude: --dangerously-skip-permissions cannot be used with "
                            "root/sudo privileges for security reasons")


def test_permissions_map_to_claudes_own_modes() -> None:
    from interlock.runtime.config.agents import AgentConfig

    def argv(permissions: str | None) -> tuple[str, ...]:
        config = AgentConfig.model_validate({"cli": "claude", "permissions": permissions})
        return adapter.launch(config, "prompt").argv

    assert argv(None)[5:7] == ("--permission-mode", "default")
    assert argv("edit")[5:7] == ("--permission-mode", "acceptEdits")
    assert argv("full")[5:9] == ("--permission-mode", "acceptEdits", "--allowedTools", "Bash")
    assert "prompt" not in argv("full")
