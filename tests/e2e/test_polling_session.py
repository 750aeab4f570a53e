"""`interlock run polling_state --demo`: the built-in spec as a durable session, through the
installed CLI, with the offline demo agent as a real process (no fakes)."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import psutil

from interlock.runtime.engine.snapshot import Snapshot
from interlock.runtime.host.procfs import carries_dispatch_id, group_members
from interlock.runtime.store import AgentRecord, SessionNotFound, open_store

from support.cli import Cli
from support.proc_helpers import cli_argv

AGENT = [sys.executable, "-m", "interlock.runtime.cli", "demo-agent", "--role", "QA"]


def _status(cli: Cli, cwd: Path, session: str) -> dict[str, Any]:
    shown = cli("status", session, "--json", cwd=cwd)
    assert shown.returncode == 0, shown.stderr
    view: dict[str, Any] = json.loads(shown.stdout)
    return view


def _journal(cli: Cli, cwd: Path, session: str) -> list[dict[str, Any]]:
    shown = cli("log", session, "--json", cwd=cwd)
    assert shown.returncode == 0, shown.stderr
    return [json.loads(line) for line in shown.stdout.splitlines()]


def _carriers(dispatch_id: str) -> list[int]:
    """Live processes started for this dispatch (INTERLOCK_DISPATCH_ID in their env)."""
    return [pid for pid in psutil.pids() if carries_dispatch_id(pid, dispatch_id)]


def _stored_agents(cwd: Path) -> list[AgentRecord]:
    store = open_store(None, cwd)
    try:
        return store.agents()
    finally:
        store.close()


def test_demo_runs_to_completed_with_a_polling_result(cli: Cli, tmp_path: Path) -> None:
    run = cli("run", "polling_state", "--demo", "--session", "p1", cwd=tmp_path)
    assert run.returncode == 0, run.stdout + run.stderr
    view = _status(cli, tmp_path, "p1")
    assert view["status"] == "finished" and view["active"] == ["completed"]
    result = view["context"]["result"]
    assert result["success"] is True and result["status"] == "completed"
    assert result["completionMethod"] == "exit" and result["exitCode"] == 0
    assert result["verdict"]["verdict"] == "GO" and result["verdict"]["role"] == "QA"
    assert result["stdout"].startswith("p: QA\n")
    assert result["pollCount"] == view["context"]["poll_count"]
    events = [e["event"] for e in _journal(cli, tmp_path, "p1") if e["kind"] == "event"]
    assert events[0] == "start" and events[-1] == "exited"
    assert "chunk" in events
    assert _carriers(result["dispatchId"]) == [] and _stored_agents(tmp_path) == []


def test_an_end_marker_completes_and_the_lingering_agent_is_stopped(
        cli: Cli, tmp_path: Path) -> None:
    context = {"command": [*AGENT, "--end-marker", "--linger", "600", "--delay", "0.05"]}
    run = cli("run", "polling_state", "--demo", "--session", "m1", "--context",
              json.dumps(context), cwd=tmp_path)
    assert run.returncode == 0, run.stdout + run.stderr
    view = _status(cli, tmp_path, "m1")
    result = view["context"]["result"]
    assert view["active"] == ["completed"]
    assert result["completionMethod"] == "marker" and result["exitCode"] is None
    assert result["verdict"]["verdict"] == "GO"
    journal = _journal(cli, tmp_path, "m1")
    marker = [e for e in journal if e["event"] == "marker"]
    assert marker and marker[-1]["after"] == ["completed"]
    assert "exited" not in [e["event"] for e in journal]  # stopped by us, not exited
    assert _carriers(result["dispatchId"]) == [] and _stored_agents(tmp_path) == []


def _committed_active(cwd: Path, session: str) -> bool:
    """Whether the session's last committed step left it in ``active`` (the agent is
    recorded while the step that spawns it runs, before that step commits)."""
    store = open_store(None, cwd)
    try:
        return "active" in Snapshot.from_json(store.get(session).snapshot).configuration
    except SessionNotFound:
        return False
    finally:
        store.close()


def _wait_for_record(cwd: Path, runner: subprocess.Popen[bytes], session: str,
                     deadline: float = 30.0) -> AgentRecord:
    """The agent's record, once the step that spawned it is committed."""
    end = time.monotonic() + deadline
    while time.monotonic() < end:
        if runner.poll() is not None:
            raise AssertionError(f"the runner exited {runner.returncode}")
        if (cwd / ".interlock" / "state.db").exists():
            records = _stored_agents(cwd)
            if records and _committed_active(cwd, session):
                return records[0]
        time.sleep(0.05)  # waiting on another process, not on time
    raise AssertionError("the runner never recorded its agent in a committed step")


def test_a_sigkilled_run_resumes_restarts_its_agent_and_leaves_none_behind(
        cli: Cli, tmp_path: Path) -> None:
    context = {"command": [*AGENT, "--delay", "1"]}
    runner = subprocess.Popen(
        cli_argv("run", "polling_state", "--demo", "--session", "k1", "--context",
                 json.dumps(context)),
        cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        record = _wait_for_record(tmp_path, runner, "k1")
        runner.send_signal(signal.SIGKILL)  # the runner only: the agent leads its own group
        runner.wait(timeout=20)
        assert list(group_members(record.pgid)) == [record.pid]  # orphaned, still running
    finally:
        if runner.poll() is None:
            runner.kill()
            runner.wait()

    resumed = cli("resume", "k1", cwd=tmp_path)
    assert resumed.returncode == 0, resumed.stdout + resumed.stderr
    assert f"stopped agent group {record.pgid}" in resumed.stderr
    assert "starting it again" in resumed.stderr
    assert list(group_members(record.pgid)) == []
    view = _status(cli, tmp_path, "k1")
    result = view["context"]["result"]
    assert view["active"] == ["completed"] and result["success"] is True
    assert result["dispatchId"] != record.id  # a fresh run of the same command
    kinds = [e["kind"] for e in _journal(cli, tmp_path, "k1")]
    assert "resumed" in kinds
    assert _carriers(result["dispatchId"]) == [] and _carriers(record.id) == []
    assert _stored_agents(tmp_path) == []


def test_a_command_that_cannot_start_ends_in_error(cli: Cli, tmp_path: Path) -> None:
    context = {"command": [str(tmp_path / "no-such-agent")]}
    run = cli("run", "polling_state", "--demo", "--session", "e1", "--context",
              json.dumps(context), cwd=tmp_path)
    assert run.returncode == 0, run.stdout + run.stderr
    view = _status(cli, tmp_path, "e1")
    result = view["context"]["result"]
    assert view["active"] == ["error"] and result["status"] == "error"
    assert result["completionMethod"] == "spawn" and "command not found" in result["error"]
