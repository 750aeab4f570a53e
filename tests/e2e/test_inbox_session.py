"""The inbox poller inside sessions, through the installed CLI: `inbox.message` exactly
once per message across a SIGKILLed runner and a resume; `interlock run inbox_poller
--demo` to its final state."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

from support.cli import Cli, wait_for_status

INTERLOCK = str(Path(sys.executable).parent / "interlock")

LISTENER = """\
machine: listener
initial: listening
states:
  listening:
    on:
      inbox.message: listening
      finish: finished
  finished:
    type: final
"""


def _runner(cwd: Path, *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen([INTERLOCK, *args], cwd=cwd, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def _deliveries(cli: Cli, cwd: Path) -> list[str]:
    log = cli("log", "s1", "--json", cwd=cwd)
    assert log.returncode == 0, log.stderr
    entries = [json.loads(line) for line in log.stdout.splitlines() if line.strip()]
    return [e["data"]["id"] for e in entries
            if e["event"] == "inbox.message" and e["kind"] == "event"]


def _messages(cli: Cli, cwd: Path) -> dict[str, dict[str, object]]:
    listed = cli("inbox", "list", "--json", "--store", "inbox.db", cwd=cwd)
    assert listed.returncode == 0, listed.stderr
    return {m["id"]: m for m in json.loads(listed.stdout)}


def _post(cli: Cli, cwd: Path, body: str) -> str:
    posted = cli("inbox", "post", "--store", "inbox.db", "--type", "note", "--from", "alice",
                 body, cwd=cwd)
    assert posted.returncode == 0, posted.stderr
    return posted.stdout.strip().split()[-1]


def test_inbox_messages_exactly_once_across_a_killed_runner(cli: Cli, tmp_path: Path) -> None:
    (tmp_path / "interlock.yaml").write_text(
        "inbox:\n  store: inbox.db\n  interval: 100ms\n  lease: 50ms\n")
    (tmp_path / "listener.yaml").write_text(LISTENER)
    first = _post(cli, tmp_path, "one")
    runner = _runner(tmp_path, "run", "listener.yaml", "--session", "s1")
    try:
        view = wait_for_status(tmp_path, lambda v: (v.get("inbox") or {}).get(
            "delivered") == 1 and v["queued"] == 0, runner)
        assert view["inbox"] == {"delivered": 1, "pending": 0}
        runner.send_signal(signal.SIGKILL)
        runner.communicate(timeout=30)
    finally:
        if runner.poll() is None:
            runner.kill()
            runner.communicate()
    second = _post(cli, tmp_path, "two")
    lease_until = _messages(cli, tmp_path)[first]["lease_until"]
    assert isinstance(lease_until, float) and lease_until < time.time()  # fetchable again
    resumed = _runner(tmp_path, "resume", "s1")
    try:
        wait_for_status(tmp_path, lambda v: (v.get("inbox") or {}).get(
            "delivered") == 2 and v["queued"] == 0, resumed)
        sent = cli("send", "s1", "finish", cwd=tmp_path)
        assert sent.returncode == 0, sent.stderr
        _, err = resumed.communicate(timeout=60)
        assert resumed.returncode == 0, err
    finally:
        if resumed.poll() is None:
            resumed.kill()
            resumed.communicate()
    assert sorted(_deliveries(cli, tmp_path)) == sorted([first, second])
    messages = _messages(cli, tmp_path)
    assert {messages[first]["status"], messages[second]["status"]} == {"in_progress"}
    status = cli("status", "s1", cwd=tmp_path)
    assert "inbox: 2 delivered, 0 not yet taken" in status.stdout


def test_run_inbox_poller_demo_to_stopped(tmp_path: Path) -> None:
    ran = subprocess.run([INTERLOCK, "run", "inbox_poller", "--demo", "--session", "d1"],
                         cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert ran.returncode == 0, ran.stderr
    assert "finished in [stopped]" in ran.stdout
    folder = tmp_path / ".interlock" / "sessions" / "d1"
    surfaced = sorted(p.stem for p in (folder / "inbox").glob("*.json"))
    assert len(surfaced) == 2
    listed = subprocess.run([INTERLOCK, "inbox", "list", "--json", "--store",
                             str(folder / "demo-inbox.db")], capture_output=True, text=True,
                            timeout=60)
    statuses = sorted(m["status"] for m in json.loads(listed.stdout))
    assert statuses == ["done", "in_progress"]  # one marked done explicitly, never auto
    status = subprocess.run([INTERLOCK, "status", "d1", "--json"], cwd=tmp_path,
                            capture_output=True, text=True, timeout=60)
    view = json.loads(status.stdout)
    assert view["status"] == "finished" and view["active"] == ["stopped"]
    assert view["context"]["inbox_count"] == 2
