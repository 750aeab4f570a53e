"""The gemini adapter's ``read`` on output captured from the real Gemini CLI 0.61.

The samples in tests/support/captured/gemini/ were printed by the real CLI run against the
scripted model server (testing/clis/gemini.py; the working folder shown as ``/w``, the
home as ``/h``): ``NAME.jsonl`` its stdout with ``--output-format stream-json``,
``NAME.stderr.txt`` its stderr, ``json_*`` with ``--output-format json``. The exit codes
are noted per case: the CLI exits with the HTTP status modulo 256 on an API error.
"""

from __future__ import annotations

import pytest

from interlock.runtime.agents.gemini import GeminiAdapter
from interlock.runtime.config.agents import AgentConfig
from interlock.runtime.engine.agent_output import AgentOutput, Usage

from support.paths import TESTS

CAPTURED = TESTS / "support" / "captured" / "gemini"
ADAPTER = GeminiAdapter()


def sample(name: str) -> tuple[str, str]:
    """(stdout, stderr) of one captured run; '' for a stream it did not print on."""
    out = next((CAPTURED / f"{name}{ext}" for ext in (".jsonl", ".json")
                if (CAPTURED / f"{name}{ext}").exists()), None)
    err = CAPTURED / f"{name}.stderr.txt"
    return (out.read_text(encoding="utf-8") if out else "",
            err.read_text(encoding="utf-8") if err.exists() else "")


def read(name: str) -> AgentOutput:
    return ADAPTER.read(*sample(name))


def test_an_answer_with_usage_and_session() -> None:
    out = read("success")  # exit 0
    assert out.answer == "verdict: accept\nsummary: looks fine\n"
    assert out.final and out.error is None and out.reason is None and out.denials == ()
    assert out.usage == Usage(331, 46)  # the router's side call (10 + 1) counted too
    assert out.session and len(out.session) == 36


def test_the_answer_is_the_text_after_the_last_tool_call() -> None:
    out = read("write_edit")  # --approval-mode auto_edit, exit 0
    assert out.answer == "written: hello.txt" and out.denials == () and out.error is None
    assert read("shell_full").denials == ()  # --approval-mode yolo


@pytest.mark.parametrize(("name", "denial"), [
    ("write_denied", "write_file /w/hello.txt"),  # --approval-mode default: no write_file
    ("shell_denied", "run_shell_command echo ran > ran.txt"),  # auto_edit: no shell
])
def test_a_refused_tool_call_is_a_denial(name: str, denial: str) -> None:
    out = read(name)  # the run itself succeeds: exit 0
    assert out.denials == (denial,)
    assert out.error is None and out.final


@pytest.mark.parametrize(("name", "reason", "words"), [
    ("error_401", "auth", "invalid x-api-key"),  # exit 145
    ("error_400_key", "auth", "API key not valid"),  # exit 144: the Gemini API's bad key
    ("error_404", "not_found", "models/gemini-9 is not found"),  # exit 1
    ("error_429", "rate_limited", "rate limit reached"),  # exit 173: status on stderr only
    ("error_500", "unavailable", "internal failure"),  # exit 244
    ("error_503", "unavailable", "The model is overloaded"),  # exit 247
    ("cut", "unavailable", "terminated"),  # exit 1: no retry of a cut stream
    ("unreachable", "unavailable", "fetch failed"),  # exit 1
])
def test_api_errors_are_the_clis_own_words(name: str, reason: str, words: str) -> None:
    out = read(name)
    assert out.final and out.reason == reason, out
    assert out.error and out.error.startswith("gemini error: [API Error: ") and words in out.error


def test_the_cut_stream_keeps_the_text_so_far() -> None:
    stdout, _ = sample("cut")
    assert ADAPTER.read(stdout).answer.startswith("verdict: acc")


@pytest.mark.parametrize(("name", "reason", "words"), [
    ("not_logged_in", "auth", "Please set an Auth method"),  # exit 41, empty HOME, no key
    ("untrusted", "permission_denied", "not running in a trusted directory"),  # exit 55
    ("resume_unknown", "not_found", "Error resuming session"),  # exit 42
])
def test_a_failure_before_the_session_is_read_from_stderr(name: str, reason: str,
                                                           words: str) -> None:
    stdout, stderr = sample(name)
    assert stdout == ""
    out = ADAPTER.read(stdout, stderr)
    assert out.reason == reason and out.error and words in out.error
    assert out.error.startswith("gemini error: ") and not out.final


def test_noise_on_stderr_alone_is_no_error() -> None:
    _, stderr = sample("success")
    assert ADAPTER.read("", stderr) == AgentOutput(answer="")


def test_resume_continues_the_same_session() -> None:
    first, second = read("resume_first"), read("resume_second")
    assert first.answer == "first: answered" and second.answer == "second: steered"
    assert first.session and first.session == second.session
    config = AgentConfig.model_validate({"cli": "gemini", "cwd": "/w"})
    launch = ADAPTER.resume(config, first.session, "STEER: go on")
    assert launch is not None and launch.stdin == "STEER: go on" and launch.cwd == "/w"
    assert launch.argv[-2:] == ("--resume", first.session)


def test_the_json_output_format_is_read_too() -> None:
    out = read("json_success")  # --output-format json, exit 0
    assert out.answer == "verdict: accept\nsummary: looks fine\n" and out.final
    assert out.usage == Usage(331, 46) and out.session
    failed = read("json_error_429")  # exit 173; the error object is printed on stderr
    assert failed.reason == "rate_limited" and failed.error == "gemini error: rate limit reached"


def test_reading_any_prefix_never_raises_and_is_final_only_at_the_result() -> None:
    for name in ("write_denied", "error_429", "success"):
        stdout, stderr = sample(name)
        for end in range(len(stdout.rstrip())):
            assert not ADAPTER.read(stdout[:end], stderr).final
        assert ADAPTER.read(stdout, stderr).final


@pytest.mark.parametrize(("permissions", "mode"), [
    (None, "default"), ("read-only", "default"), ("edit", "auto_edit"), ("full", "yolo"),
])
def test_launch_maps_permissions_and_keeps_the_prompt_out_of_argv(permissions: str | None,
                                                                   mode: str) -> None:
    config = AgentConfig.model_validate({"cli": "gemini", "model": "gemini-2.5-pro",
                                         "permissions": permissions, "args": ["--debug"]})
    launch = ADAPTER.launch(config, "-p --help")
    assert launch.argv == ("gemini", "--output-format", "stream-json", "--skip-trust",
                           "--approval-mode", mode, "--model", "gemini-2.5-pro", "--debug")
    assert launch.stdin == "-p --help"


def test_untrusted_refuse_leaves_geminis_folder_trust_on() -> None:
    config = AgentConfig.model_validate({"cli": "gemini", "untrusted": "refuse"})
    resumed = ADAPTER.resume(config, "s1", "p")
    assert ADAPTER.launch(config, "p").argv == ("gemini", "--output-format", "stream-json",
                                                "--approval-mode", "default")
    assert resumed is not None and "--skip-trust" not in resumed.argv
    allowed = ADAPTER.resume(config.model_copy(update={"untrusted": "allow"}), "s1", "p")
    assert allowed is not None and "--skip-trust" in allowed.argv
