"""The lifecycle with real processes: status, SIGKILL, cancel, rm, sessions."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import psutil
import pytest

from interlock.runtime.engine.clock import ManualClock
from interlock.runtime.engine.lifecycle import (
    SessionOver,
    SessionRunning,
    cancel,
    list_sessions,
    remove,
    status_of,
    wait_until_not_running,
)
from interlock.runtime.engine.runner import Runner, SessionClosed
from interlock.runtime.store import SessionNotFound
from interlock.runtime.store.sqlite import SqliteStore

from support.paths import TESTS

FAULTS = TESTS / "support" / "faults"
RECORDER_PATH = str(FAULTS / "recorder.yaml")
sys.path.insert(0, str(FAULTS))
import faults_bindings  # noqa: E402


@pytest.fixture
def db(tmp_path: Path) -> Path:
    return tmp_path / "state.db"


@pytest.fixture
def store(db: Path) -> Iterator[SqliteStore]:
    s = SqliteStore(db)
    yield s
    s.close()


def start_runner(db: Path, session_id: str = "r1") -> subprocess.Popen[str]:
    """A real runner process (tests/support/faults/drive.py), once it holds the session."""
    proc = subprocess.Popen([sys.executable, str(FAULTS / "drive.py"), str(db),
                             RECORDER_PATH, session_id],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert proc.stdout is not None and proc.stdout.readline() == "ready\n"
    return proc


def pids_in(pidfile: Path, count: int, timeout: float = 10.0) -> list[int]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if pidfile.exists():
            pids = [int(p) for p in pidfile.read_text().split()]
            if len(pids) >= count:
                return pids
        time.sleep(0.02)
    raise AssertionError(f"no {count} pids in {pidfile}")


def alive(pid: int) -> bool:
    """A live process, not a zombie waiting for its parent."""
    try:
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def test_running_while_a_live_runner_holds_the_lease_then_finished(
        db: Path, store: SqliteStore) -> None:
    proc = start_runner(db)
    try:
        info = status_of(store, store.get("r1"), time.time())
        assert info.status == "running" and info.pid == proc.pid
        assert info.host is not None and info.since is not None
        (listing,) = list_sessions(store, time.time())
        assert listing.info.status == "running" and listing.active == ("idle",)
        with pytest.raises(SessionRunning, match="cancel it first"):
            remove(store, "r1", time.time())
        store.enqueue("r1", "done", {}, time.time())
        out, _ = proc.communicate(timeout=30)
        assert proc.returncode == 0 and out == "finished\n"
    finally:
        proc.kill()
    assert status_of(store, store.get("r1"), time.time()).status == "finished"
    with pytest.raises(SessionOver):
        cancel(store, "r1", None, time.time())


def test_sigkill_of_a_runner_reads_stopped_at_once_on_this_host(
        db: Path, store: SqliteStore) -> None:
    proc = start_runner(db)
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=10)
    row = store.get("r1")
    lease = store.holder("r1")
    now = time.time()
    assert lease is not None and lease.expires_at > now  # the lease itself has not lapsed
    assert status_of(store, row, now).status == "stopped"  # but its owner is known dead
    # A runner on another host cannot be known dead: it reads running until the lapse.
    remote = lease.owner.replace(lease.owner.partition(":")[0], "elsewhere", 1)
    clock = ManualClock(now)
    store.acquire("r1", remote, 30.0, clock.now(), take_from=lease.owner)
    assert status_of(store, row, clock.now()).status == "running"
    assert status_of(store, row, clock.advance(30.0)).status == "stopped"


def test_cancel_of_a_live_runner_stops_it_and_its_children(
        db: Path, store: SqliteStore, tmp_path: Path) -> None:
    pidfile = tmp_path / "pids"
    proc = start_runner(db)
    try:
        store.enqueue("r1", "spawn", {"pidfile": str(pidfile)}, time.time())  # own group
        store.enqueue("r1", "spawn", {"pidfile": str(pidfile), "group": True}, time.time())
        store.enqueue("r1", "wait", {"pidfile": str(pidfile)}, time.time())  # blocks a step
        children = pids_in(pidfile, 3)
        assert all(alive(pid) for pid in children)
        asked = time.monotonic()
        outcome = cancel(store, "r1", "enough", time.time())
        assert outcome.action == "requested" and outcome.was == "running"
        info = wait_until_not_running(store, "r1", timeout=20.0)
        out, err = proc.communicate(timeout=5)
        took = time.monotonic() - asked
    finally:
        proc.kill()
    assert info.status == "cancelled"
    assert proc.returncode == 0 and out == "cancelled\n", err
    # A bound, not a pace (a second here; bench/ measures speed): without the cancel the
    # blocked step would wait for its `sleep 60`.
    assert took < 20.0
    assert not any(alive(pid) for pid in children)
    (entry,) = [e for e in store.journal("r1") if e.kind == "cancelled"]
    assert entry.note is not None and "reason: enough" in entry.note
    assert store.get("r1").snapshot["timers"] == []
    assert store.holder("r1") is None
    with pytest.raises(SessionClosed, match="cancelled"):
        Runner.open(store, None, RECORDER_PATH, session_id="r1",
                    bindings=faults_bindings.BINDINGS)


def test_cancel_of_a_stopped_or_failed_session_marks_it(store: SqliteStore) -> None:
    clock = ManualClock()
    for sid in ("s1", "s2"):
        runner, _ = Runner.open(store, (FAULTS / "recorder.yaml").read_text(), RECORDER_PATH,
                                session_id=sid, clock=clock, bindings=faults_bindings.BINDINGS)
        if sid == "s2":
            store.enqueue(sid, "record", {"n": 3}, clock.now())
            runner.pump()
        runner.close()
    assert [x.info.status for x in list_sessions(store, clock.now())] == ["stopped", "failed"]
    for sid, was in (("s1", "stopped"), ("s2", "failed")):
        outcome = cancel(store, sid, None, clock.now())
        assert (outcome.action, outcome.was) == ("cancelled", was)
        assert status_of(store, store.get(sid), clock.now()).status == "cancelled"
        assert store.journal(sid)[-1].kind == "cancelled"
        assert store.holder(sid) is None


def test_remove_deletes_a_stopped_session_and_force_stops_a_live_runner(
        db: Path, store: SqliteStore, tmp_path: Path) -> None:
    clock = ManualClock()
    runner, _ = Runner.open(store, (FAULTS / "recorder.yaml").read_text(), RECORDER_PATH,
                            session_id="s1", clock=clock, bindings=faults_bindings.BINDINGS)
    runner.close()
    assert remove(store, "s1", clock.now()).status == "stopped"
    with pytest.raises(SessionNotFound):
        store.get("s1")
    pidfile = tmp_path / "pids"
    proc = start_runner(db, "r1")
    try:
        store.enqueue("r1", "spawn", {"pidfile": str(pidfile), "group": True}, time.time())
        (child,) = pids_in(pidfile, 1)
        assert remove(store, "r1", time.time(), force=True).status == "running"
        out, err = proc.communicate(timeout=10)
    finally:
        proc.kill()
    assert proc.returncode == 0 and out == "removed\n" and "Traceback" not in err
    assert not alive(child)
    assert list_sessions(store, time.time()) == []
