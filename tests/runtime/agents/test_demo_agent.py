"""`interlock demo-agent` as the dispatcher sees it: a real process read line by line."""

from __future__ import annotations

import json
import signal
import subprocess
from typing import Any

import pytest
import yaml

from interlock.runtime.agents.demo import make_answer, render
from interlock.runtime.dispatch.verdict import VerdictValue

from support.proc_helpers import Child, cli_argv


def run_agent(*args: str, stdin: bytes | None = None) -> tuple[str, str, int]:
    """Run the demo agent to completion: (stdout, stderr, exit code)."""
    result = subprocess.run(cli_argv("demo-agent", "--delay", "0", *args), input=stdin or b"",
                            capture_output=True, timeout=60)
    return result.stdout.decode(), result.stderr.decode(), result.returncode


def check_answer(doc: Any, role: str) -> None:
    assert set(doc) == {"p", "v", "i"}
    assert doc["p"] == role
    assert doc["v"] in {v.value for v in VerdictValue}
    assert isinstance(doc["i"], list)
    for issue in doc["i"]:
        assert len(issue) == 1 and next(iter(issue)) in {"C", "H"}
        assert isinstance(next(iter(issue.values())), str)


@pytest.mark.parametrize("role", ["TECHLEAD", "SECURITY", "QA", "ARCHITECT", "perf-review"])
def test_output_is_seed_style_yaml(role: str) -> None:
    out, err, code = run_agent("--role", role)
    assert code == 0, err
    assert out.startswith(f"p: {role.upper()}\nv: ")
    doc = yaml.safe_load(out)
    check_answer(doc, role.upper())
    if doc["v"] != "GO":
        assert 2 <= len(doc["i"]) <= 4


@pytest.mark.parametrize("verdict", ["GO", "CONDITIONAL", "NO-GO", "no-go"])
def test_verdict_is_honored(verdict: str) -> None:
    out, err, code = run_agent("--role", "TECHLEAD", "--verdict", verdict)
    assert code == 0, err
    doc = yaml.safe_load(out)
    assert doc["v"] == verdict.upper()
    severities = [next(iter(issue)) for issue in doc["i"]]
    if verdict.upper() == "NO-GO":
        assert severities[0] == "C"
    elif verdict == "CONDITIONAL":
        assert severities and set(severities) == {"H"}
    else:
        assert severities == []


def test_answer_is_deterministic_and_shaped_by_the_prompt() -> None:
    prompt = "Review the security of the token handling"
    first = run_agent("--role", "ARCHITECT", "--prompt", prompt)
    assert first == run_agent("--role", "ARCHITECT", stdin=prompt.encode())
    assert first[0] != run_agent("--role", "ARCHITECT")[0]
    answer = make_answer("ARCHITECT", prompt)
    assert answer.issues[0].text in {"threat model for the new entry point is missing",
                                     "secrets handling is not described in the plan"}


def test_fail_prints_an_error_and_no_answer() -> None:
    out, err, code = run_agent("--role", "QA", "--fail")
    assert code == 1
    assert "v:" not in out and out == ""
    assert "error:" in err and "Traceback" not in err


def test_json_format_parses() -> None:
    out, err, code = run_agent("--role", "SECURITY", "--format", "json")
    assert code == 0, err
    assert out.endswith("}\n")
    check_answer(json.loads(out), "SECURITY")


def test_end_marker_closes_the_yaml_document() -> None:
    out, _, code = run_agent("--role", "QA", "--end-marker")
    assert code == 0
    assert out.endswith("\n...\n")
    check_answer(yaml.safe_load(out), "QA")


def test_bad_role_is_a_usage_error() -> None:
    _, err, code = run_agent("--role", "two words")
    assert code == 2
    assert "--role" in err


def test_linger_keeps_the_process_alive_after_the_answer() -> None:
    with Child(cli_argv("demo-agent", "--role", "TECHLEAD", "--delay", "0", "--linger", "600",
                        "--end-marker")) as agent:
        lines = agent.lines_until("...")
        check_answer(yaml.safe_load("\n".join(lines)), "TECHLEAD")
        assert agent.proc.poll() is None  # answered, yet still running: the hung-CLI case
        assert agent.nothing_pending()  # silent, and stdout not closed
        agent.proc.terminate()
        assert agent.proc.wait(20) == -signal.SIGTERM  # 143 in a shell


def test_delay_paces_the_lines_one_flush_at_a_time() -> None:
    with Child(cli_argv("demo-agent", "--role", "SECURITY", "--delay", "600")) as agent:
        assert agent.readline() == b"p: SECURITY\n"
        # The first line was flushed on its own; the next one waits for the delay.
        assert agent.nothing_pending()
        assert agent.proc.poll() is None
        agent.proc.terminate()
        assert agent.proc.wait(20) == -signal.SIGTERM


def test_lines_arrive_in_order_with_a_short_delay() -> None:
    with Child(cli_argv("demo-agent", "--role", "QA", "--delay", "0.01",
                        "--verdict", "NO-GO")) as agent:
        expected = render(make_answer("QA", "", VerdictValue.NO_GO))
        got = [agent.readline().decode().rstrip("\n") for _ in expected]
        assert got == expected
        out, _, code = agent.communicate()
        assert (out, code) == (b"", 0)
