"""Sessions from the command line, as real processes: run, send, status, log, resume."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from pathlib import Path

from support.cli import Cli, wait_for_status
from support.paths import ROOT

SPEC = ROOT / "tests" / "support" / "crash" / "crashy.yaml"
BINDINGS = ROOT / "tests" / "support" / "crash" / "crashy_bindings.py"


def _start(tmp_path: Path, *extra: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "interlock.runtime.cli", "run", str(SPEC), "--session", "s1",
         "--bindings", str(BINDINGS), *extra],
        cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )


def test_run_send_status_log_and_ctrl_c_then_resume(cli: Cli, tmp_path: Path) -> None:
    runner = _start(tmp_path)
    wait_for_status(tmp_path, lambda v: v["active"] == ["idle"], runner)
    assert cli("send", "s1", "go", cwd=tmp_path).returncode == 0
    assert cli("send", "s1", "tick", "--data", '{"n": 5}', cwd=tmp_path).returncode == 0
    view = wait_for_status(tmp_path, lambda v: v["context"]["seen"] == [5], runner)
    assert view["active"] == ["working", "lap"]
    assert [t["event"] for t in view["timers"]] == ["after.lap.1"]  # the 0s one fired

    runner.send_signal(signal.SIGINT)
    _, stderr = runner.communicate(timeout=30)
    assert runner.returncode == 130
    assert "Continue with: interlock resume s1" in stderr
    assert "Traceback" not in stderr

    cli("send", "s1", "tick", "--data", '{"n": 6}', cwd=tmp_path)  # queued while stopped
    cli("send", "s1", "finish", cwd=tmp_path)
    resumed = cli("resume", "s1", "--bindings", str(BINDINGS), cwd=tmp_path)
    assert resumed.returncode == 0, resumed.stderr
    assert "finished in [done]" in resumed.stdout

    log = cli("log", "s1", "--json", cwd=tmp_path)
    entries = [json.loads(line) for line in log.stdout.splitlines()]
    assert [e["kind"] for e in entries][:2] == ["created", "event"]
    assert [e["data"].get("n") for e in entries if e["event"] == "tick"] == [5, 6]
    assert entries[-1]["after"] == ["done"]
    final = json.loads(cli("status", "s1", "--json", cwd=tmp_path).stdout)
    assert final["status"] == "finished" and final["context"]["seen"] == [5, 6]

    diagram = cli("diagram", "--session", "s1", cwd=tmp_path)
    assert diagram.returncode == 0
    assert "class done active" in diagram.stdout


def test_a_second_runner_on_the_same_session_refuses(cli: Cli, tmp_path: Path) -> None:
    first = _start(tmp_path)
    try:
        wait_for_status(tmp_path, lambda v: v["active"] == ["idle"], first)
        second = cli("resume", "s1", "--bindings", str(BINDINGS), cwd=tmp_path)
        assert second.returncode == 1
        assert "being run by another runner" in second.stderr
    finally:
        first.send_signal(signal.SIGINT)
        first.communicate(timeout=30)


def test_bad_input_gets_messages_and_exit_codes(cli: Cli, tmp_path: Path) -> None:
    missing = cli("send", "nope", "go", cwd=tmp_path)
    assert missing.returncode == 1 and "no session 'nope'" in missing.stderr
    assert cli("status", "nope", cwd=tmp_path).returncode == 1
    bad_data = cli("send", "nope", "go", "--data", "{oops", cwd=tmp_path)
    assert bad_data.returncode == 2 and "--data is not JSON" in bad_data.stderr
    not_object = cli("send", "nope", "go", "--data", "[1]", cwd=tmp_path)
    assert not_object.returncode == 2 and "must be a JSON object" in not_object.stderr
    bad_store = cli("status", "--store", "mysql://x", cwd=tmp_path)
    assert bad_store.returncode == 2 and "unknown store 'mysql://x' (--store)" in bad_store.stderr
    bad_id = cli("run", str(SPEC), "--session", "../escape", "--bindings", str(BINDINGS),
                 cwd=tmp_path)
    assert bad_id.returncode == 2 and "'../escape' is not a valid name" in bad_id.stderr
    reserved = cli("send", "nope", "after.lap.0", cwd=tmp_path)
    assert reserved.returncode == 2 and "reserved for the engine" in reserved.stderr
    no_bindings = cli("run", str(SPEC), "--bindings", "no_such_module_q", cwd=tmp_path)
    assert no_bindings.returncode == 2
    assert "bindings module 'no_such_module_q' not found" in no_bindings.stderr
    for result in (missing, bad_data, not_object, bad_store, no_bindings):
        assert "Traceback" not in result.stderr


def test_log_follow_prints_steps_as_they_happen_and_ends_with_the_session(
        cli: Cli, tmp_path: Path) -> None:
    runner = _start(tmp_path)
    wait_for_status(tmp_path, lambda v: v["active"] == ["idle"], runner)
    follower = subprocess.Popen(
        [sys.executable, "-m", "interlock.runtime.cli", "log", "s1", "--follow"],
        cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    for event in ("go", "finish"):
        assert cli("send", "s1", event, cwd=tmp_path).returncode == 0
    runner.communicate(timeout=30)
    out, err = follower.communicate(timeout=30)
    assert follower.returncode == 0, err
    lines = out.splitlines()
    assert "created" in lines[0]
    assert any(" event     go" in line for line in lines)
    assert lines[-1].endswith("[working, lap] -> [done]")
