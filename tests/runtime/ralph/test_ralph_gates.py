"""Backpressure gates run as real processes; the attempts policy is pure."""

from __future__ import annotations

import doctest
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from interlock.runtime.config.ralph import Gate
from interlock.runtime.ralph import gates as gates_module
from interlock.runtime.ralph.gates import (
    GateReport,
    GateResult,
    gate_decision,
    run_gate,
    run_gates,
)


def _gate(name: str, command: str | list[str], timeout: float = 30) -> Gate:
    return Gate.model_validate({"name": name, "command": command, "timeout": timeout})


def test_passing_and_failing_gates(tmp_path: Path) -> None:
    report = run_gates([_gate("ok", ["true"]), _gate("bad", ["false"])], tmp_path)
    assert [(r.name, r.exit_code, r.passed) for r in report.results] == [
        ("ok", 0, True), ("bad", 1, False)]
    assert not report.passed
    assert [r.name for r in report.failed] == ["bad"]
    assert run_gates([], tmp_path).passed


def test_runs_in_the_project_folder_and_captures_both_streams(tmp_path: Path) -> None:
    (tmp_path / "check.sh").write_text("echo out; echo err >&2; pwd; exit 3\n")
    result = run_gate(_gate("script", "sh check.sh"), tmp_path)
    assert result.exit_code == 3
    assert result.output.splitlines() == ["out", "err", str(tmp_path)]
    assert "exit 3" in result.summary()


def test_output_is_capped_to_its_tail(tmp_path: Path) -> None:
    result = run_gate(_gate("loud", "seq 1 5000"), tmp_path, output_cap=100)
    assert result.output.startswith("[... output cut ...]")
    assert result.output.rstrip().endswith("5000")
    assert len(result.output) < 140


def test_timeout_kills_the_whole_group(tmp_path: Path) -> None:
    pidfile = tmp_path / "child.pid"
    script = f"sleep 300 & echo $! > {pidfile}; echo started; wait"
    began = time.monotonic()
    result = run_gate(_gate("hang", ["sh", "-c", script], timeout=0.5), tmp_path)
    assert time.monotonic() - began < 10
    assert result.timed_out and not result.passed
    assert "started" in result.output and "timeout" in result.output
    child = int(pidfile.read_text())
    deadline = time.monotonic() + 5
    while _alive(child) and time.monotonic() < deadline:
        time.sleep(0.01)  # waiting on the kernel to reap the killed child, bounded
    assert not _alive(child)


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, IndexError):
        return False
    return state != "Z"


def test_missing_program_is_a_failed_gate(tmp_path: Path) -> None:
    result = run_gate(_gate("nope", ["no-such-program-xyz"]), tmp_path)
    assert result.exit_code is None and not result.passed
    assert "no-such-program-xyz" in result.output


def test_stop_at_first(tmp_path: Path) -> None:
    report = run_gates([_gate("a", ["false"]), _gate("b", ["true"])], tmp_path,
                       stop_at_first=True)
    assert [r.name for r in report.results] == ["a"]


def test_env_is_passed(tmp_path: Path) -> None:
    result = run_gate(_gate("env", "echo $GATE_VAR"), tmp_path, env={"GATE_VAR": "hi"})
    assert result.output.strip() == "hi"
    assert os.environ.get("GATE_VAR") is None


def test_attempts_policy() -> None:
    bad = GateReport((GateResult("tests", 1, "AssertionError: 1 != 2\n", 0.2),
                      GateResult("lint", 0, "", 0.1)))
    first = gate_decision(bad, 1, 3)
    assert first.action == "retry"
    assert "gate 'tests' failed (exit 1)" in first.feedback
    assert "AssertionError" in first.feedback and "lint" not in first.feedback
    assert gate_decision(bad, 2, 3).action == "retry"
    last = gate_decision(bad, 3, 3)
    assert (last.action, last.reason) == ("fail", "gates failed 3 time(s): tests")
    good = GateReport((GateResult("tests", 0, "", 0.2),))
    assert gate_decision(good, 3, 3).action == "accept"
    with pytest.raises(ValueError):
        gate_decision(good, 0, 3)


def test_report_json() -> None:
    report = GateReport((GateResult("t", 0, "ok\n", 0.12345),))
    assert report.to_json() == {"passed": True, "results": [
        {"name": "t", "exit": 0, "passed": True, "timedOut": False, "elapsed": 0.123,
         "output": "ok\n"}]}


def test_docstring_examples() -> None:
    result = doctest.testmod(gates_module)
    assert result.attempted > 0 and result.failed == 0


def test_the_gates_process_reports_a_verdict_document(tmp_path: Path) -> None:
    """``python -m interlock.runtime.ralph.gates PROJECT``: what the subagent's gating state
    invokes. Its answer is one YAML document with seed 001's verdict field."""
    (tmp_path / "interlock.yaml").write_text(
        "ralph:\n  gates:\n    - {name: exists, command: 'test -f T1.md'}\n"
        "    - {name: says, command: 'echo checked; grep -q pass T1.md'}\n")
    gates = [sys.executable, "-m", "interlock.runtime.ralph.gates", str(tmp_path)]
    failed = subprocess.run(gates, capture_output=True, text=True, timeout=60)
    assert failed.returncode == 0 and failed.stdout.endswith("...\n")
    report = yaml.safe_load(failed.stdout.removesuffix("...\n"))
    assert report["v"] == "NO-GO" and report["passed"] is False
    assert [r["passed"] for r in report["results"]] == [False, False]
    (tmp_path / "T1.md").write_text("all tests pass\n")
    passed = yaml.safe_load(subprocess.run(gates, capture_output=True, text=True,
                                           timeout=60).stdout.removesuffix("...\n"))
    assert passed["v"] == "GO" and "checked" in passed["results"][1]["output"]
    assert GateReport.from_json(passed).passed
    assert gate_decision(GateReport.from_json(report), 1, 2).feedback.count("## gate") == 2
    (tmp_path / "interlock.yaml").write_text("ralph: {gates: 3}\n")
    broken = subprocess.run(gates, capture_output=True, text=True, timeout=60)
    assert broken.returncode == 2 and "interlock.yaml:1" in broken.stderr


def test_a_stopped_gates_process_stops_the_gate_running(tmp_path: Path) -> None:
    """An ABORT cancels the gating invoke: SIGTERM to the gates process, which stops the
    gate it runs (a process group of its own) before it goes."""
    pidfile = tmp_path / "gate.pid"
    (tmp_path / "interlock.yaml").write_text(
        "ralph:\n  gates:\n    - {name: slow, command: 'echo $$ > gate.pid; exec sleep 300'}\n")
    proc = subprocess.Popen([sys.executable, "-m", "interlock.runtime.ralph.gates",
                             str(tmp_path)], stdout=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 20
    while not pidfile.exists() or not pidfile.read_text().strip():
        assert time.monotonic() < deadline, "the gate did not start"
        time.sleep(0.01)
    gate = int(pidfile.read_text())
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=10) == 128 + signal.SIGTERM
    deadline = time.monotonic() + 5
    while _alive(gate) and time.monotonic() < deadline:
        time.sleep(0.01)  # the kernel reaping the killed gate, bounded
    assert not _alive(gate)
