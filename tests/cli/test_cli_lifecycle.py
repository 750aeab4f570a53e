"""A session's lifecycle through the installed CLI, with real runner processes: a fault
fails the session in one line and resume (--retry) goes on; error.execution handlers;
kill -9; cancel with a child process; rm; sessions."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path

import psutil

from support.cli import Cli, wait_for_status
from support.paths import ROOT

FAULTS = ROOT / "tests" / "support" / "faults"
BINDINGS = str(FAULTS / "faults_bindings.py")


def _run(tmp_path: Path, spec: str, session: str, bindings: str = BINDINGS
         ) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "interlock.runtime.cli", "run", str(FAULTS / spec),
         "--session", session, "--bindings", bindings, "--no-signals"],
        cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _running(cli: Cli, tmp_path: Path, runner: subprocess.Popen[str], session: str) -> None:
    wait_for_status(tmp_path, lambda v: v["status"] == "running", runner, session)


def _record(cli: Cli, tmp_path: Path, session: str, n: int) -> subprocess.CompletedProcess[str]:
    return cli("send", session, "record", "--data", json.dumps({"n": n}), cwd=tmp_path)


def _fail_on_third_event(cli: Cli, tmp_path: Path, session: str) -> None:
    runner = _run(tmp_path, "recorder.yaml", session)
    _running(cli, tmp_path, runner, session)
    for n in (1, 2, 3):
        _record(cli, tmp_path, session, n)
    _, stderr = runner.communicate(timeout=30)
    assert runner.returncode == 1
    lines = stderr.strip().splitlines()
    assert "Traceback" not in stderr
    assert "action 'record' (" in lines[-1] and "recorder.yaml:" in lines[-1]
    assert "raised ValueError: boom" in lines[-1]
    for n in (4, 5):  # the failed session keeps events for the next run
        assert "queued" in _record(cli, tmp_path, session, n).stderr
    assert cli("send", session, "done", cwd=tmp_path).returncode == 0


def _status(cli: Cli, tmp_path: Path, session: str) -> dict[str, object]:
    result = cli("status", session, "--json", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    view: dict[str, object] = json.loads(result.stdout)
    return view


def test_a_fault_fails_the_session_and_resume_goes_on_without_the_event(
        cli: Cli, tmp_path: Path) -> None:
    _fail_on_third_event(cli, tmp_path, "s1")
    assert _status(cli, tmp_path, "s1")["status"] == "failed"
    log = [json.loads(line) for line in cli("log", "s1", "--json", cwd=tmp_path).stdout
           .splitlines()]
    errors = [e for e in log if e["kind"] == "error"]
    assert len(errors) == 1 and "Traceback" in json.dumps(errors[0])

    resumed = cli("resume", "s1", "--bindings", BINDINGS, "--no-signals", cwd=tmp_path)
    assert resumed.returncode == 0, resumed.stderr
    view = _status(cli, tmp_path, "s1")
    assert view["status"] == "finished"
    assert view["context"] == {"seen": [1, 2, 4, 5]}  # type: ignore[comparison-overlap]
    kinds = [json.loads(line)["kind"] for line in
             cli("log", "s1", "--json", cwd=tmp_path).stdout.splitlines()]
    assert kinds.count("error") == 1  # nothing lost from the journal


def test_resume_retry_with_fixed_bindings_applies_the_failed_event(
        cli: Cli, tmp_path: Path) -> None:
    _fail_on_third_event(cli, tmp_path, "s2")
    resumed = cli("resume", "s2", "--retry", "--bindings", f"{BINDINGS}:FIXED",
                  "--no-signals", cwd=tmp_path)
    assert resumed.returncode == 0, resumed.stderr
    view = _status(cli, tmp_path, "s2")
    assert view["status"] == "finished"
    assert view["context"] == {"seen": [1, 2, 3, 4, 5]}  # type: ignore[comparison-overlap]


def test_a_spec_handling_error_execution_goes_on(cli: Cli, tmp_path: Path) -> None:
    runner = _run(tmp_path, "handled.yaml", "h1")
    _running(cli, tmp_path, runner, "h1")
    for n in (1, 2, 3):
        _record(cli, tmp_path, "h1", n)
    view = wait_for_status(tmp_path, lambda v: v["active"] == ["broken"], runner, "h1")
    assert view["status"] == "running"
    assert view["context"]["seen"] == [1, 2]
    [noted] = view["context"]["errors"]
    assert noted["binding"] == "record" and noted["error_type"] == "ValueError"
    assert noted["event"] == "record" and noted["state"] == "idle"
    runner.send_signal(signal.SIGINT)
    runner.communicate(timeout=30)


def test_kill_9_reads_stopped_at_once_and_cancel_marks_it(cli: Cli, tmp_path: Path) -> None:
    runner = _run(tmp_path, "recorder.yaml", "k1")
    _running(cli, tmp_path, runner, "k1")
    runner.kill()
    runner.wait(timeout=10)
    assert _status(cli, tmp_path, "k1")["status"] == "stopped"
    cancelled = cli("cancel", "k1", "--reason", "done with it", cwd=tmp_path)
    assert cancelled.returncode == 0, cancelled.stderr
    assert _status(cli, tmp_path, "k1")["status"] == "cancelled"
    again = cli("cancel", "k1", cwd=tmp_path)
    assert again.returncode == 1 and "cancelled" in again.stderr


def test_cancel_of_a_live_runner_stops_it_and_its_child(cli: Cli, tmp_path: Path) -> None:
    runner = _run(tmp_path, "recorder.yaml", "c1")
    _running(cli, tmp_path, runner, "c1")
    pidfile = tmp_path / "pids"
    sent = cli("send", "c1", "spawn", "--data", json.dumps({"pidfile": str(pidfile),
                                                           "group": True}), cwd=tmp_path)
    assert sent.returncode == 0, sent.stderr
    [child] = [int(line) for line in pidfile.read_text().split()]
    assert psutil.pid_exists(child)

    refused = cli("rm", "c1", cwd=tmp_path)
    assert refused.returncode == 1 and "running" in refused.stderr

    cancelled = cli("cancel", "c1", "--reason", "enough", cwd=tmp_path)
    assert cancelled.returncode == 0, cancelled.stderr
    runner.communicate(timeout=10)
    assert runner.returncode == 0
    assert not psutil.pid_exists(child) or psutil.Process(child).status() == "zombie"
    assert _status(cli, tmp_path, "c1")["status"] == "cancelled"

    listed = json.loads(cli("sessions", "--json", cwd=tmp_path).stdout)
    assert [(s["id"], s["status"]) for s in listed] == [("c1", "cancelled")]
    assert cli("rm", "c1", cwd=tmp_path).returncode == 0
    gone = cli("status", "c1", cwd=tmp_path)
    assert gone.returncode == 1 and "c1" in gone.stderr
    assert any((tmp_path / ".interlock").iterdir())  # the store stays; the session went
