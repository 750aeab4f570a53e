"""Live signals into running sessions: `interlock run` consumes its session's mailbox."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
from datetime import UTC, datetime
from pathlib import Path

from interlock.runtime.signals.mailbox import Mailbox, read_metadata
from interlock.runtime.signals.model import make_signal
from interlock.runtime.store import open_store

from support.cli import Cli, wait_for_status
from support.paths import ROOT
from support.proc_helpers import cli_argv

SPEC = ROOT / "tests" / "support" / "steerable" / "steerable.yaml"
BINDINGS = ROOT / "tests" / "support" / "steerable" / "steerable_bindings.py"


def _start(tmp_path: Path, session: str = "s1") -> subprocess.Popen[str]:
    return subprocess.Popen(
        cli_argv("run", str(SPEC), "--session", session, "--bindings", str(BINDINGS)),
        cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _journal(cli: Cli, tmp_path: Path) -> list[dict]:
    log = cli("log", "s1", "--json", cwd=tmp_path)
    return [json.loads(line) for line in log.stdout.splitlines()]


def test_signals_steer_a_running_session_and_approve_waits_for_its_state(
        cli: Cli, tmp_path: Path) -> None:
    runner = _start(tmp_path)
    folder = tmp_path / ".interlock" / "sessions" / "s1"
    try:
        wait_for_status(tmp_path, lambda v: v["active"] == ["working"], runner)
        early = cli("signal", str(folder), "APPROVE", "--wait", "0.5", cwd=tmp_path)
        assert early.returncode == 124  # nothing accepts APPROVE while working: it waits

        steer = cli("signal", str(folder), "STEER", "use bar, not foo", "--wait", "30",
                    cwd=tmp_path)
        assert steer.returncode == 0, steer.stderr
        receipt = json.loads(steer.stdout)
        assert receipt["handled_by"] == "interlock session s1"
        assert receipt["action_taken"].startswith("delivered to session s1 as signal.STEER")
        wait_for_status(tmp_path,
                        lambda v: v["context"]["steers"] == ["use bar, not foo"], runner)

        assert cli("send", "s1", "review", cwd=tmp_path).returncode == 0
        out, err = runner.communicate(timeout=60)  # the waiting APPROVE finishes it
        assert runner.returncode == 0, err
        assert "finished in [approved]" in out
    finally:
        if runner.poll() is None:
            runner.kill()
            runner.communicate()
    entries = _journal(cli, tmp_path)
    events = [(e["event"], e["data"].get("message")) for e in entries if e["kind"] == "event"]
    assert events == [("signal.STEER", "use bar, not foo"), ("review", None),
                      ("signal.APPROVE", None)]
    mailbox = Mailbox(folder)
    assert mailbox.pending() == []
    archived = sorted(p.name for p in mailbox.processed.iterdir() if p.is_file())
    assert len(archived) == 2
    for name in archived:
        meta = read_metadata(mailbox.processed / name)
        assert meta is not None and meta["handled_by"] == "interlock session s1"


def test_a_signal_claimed_by_a_dead_runner_is_applied_once(cli: Cli, tmp_path: Path) -> None:
    """The state a runner SIGKILLed between delivery and metadata leaves behind: the claim
    in its claims folder, the event already offered to the store. The next runner adopts
    the claim, finds the key delivered, archives the signal, and applies nothing twice."""
    first = _start(tmp_path)  # creates the session; stopped before any signal
    wait_for_status(tmp_path, lambda v: v["active"] == ["working"], first)
    first.send_signal(signal.SIGINT)
    first.communicate(timeout=30)
    store = open_store(None, tmp_path)
    folder = tmp_path / ".interlock" / "sessions" / "s1"
    mailbox = Mailbox(folder)
    steer = make_signal("STEER", message="only once", now=datetime.now(UTC))
    mailbox.post(steer)
    dead = subprocess.Popen(["true"])
    dead.wait()
    owner = f"{dead.pid}.dead00.{os.uname().nodename}"
    assert mailbox.claim(steer.file_name, owner) is not None
    try:
        assert store.offer("s1", steer.event, steer.event_data(), time.time(), steer.id)
    finally:
        store.close()

    runner = _start(tmp_path)
    try:
        view = wait_for_status(
            tmp_path,
            lambda v: v["context"]["steers"] == ["only once"] and v["queued"] == 0, runner)
        wait_for_status(tmp_path, lambda v: mailbox.is_finished(steer.file_name), runner)
        meta = read_metadata(mailbox.processed / steer.file_name)
        assert meta is not None
        assert meta["action_taken"].startswith("already delivered to session s1")
        assert view["context"]["steers"] == ["only once"]
    finally:
        runner.send_signal(signal.SIGINT)
        runner.communicate(timeout=30)
    assert not (mailbox.claims / owner).exists()
    steers = [e for e in _journal(cli, tmp_path) if e["event"] == "signal.STEER"]
    assert len(steers) == 1 and steers[0]["data"]["signal_id"] == steer.id

