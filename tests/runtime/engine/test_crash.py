"""Crash test: a runner SIGKILLed at random points loses no event and applies none twice.

A session of tests/crash/crashy.yaml gets ~120 queued events (and arms and cancels timers
as it goes); `interlock resume` runs it as a real process. One uninterrupted run is the
reference. Then, KILLS times (two at a time), a fresh copy is resumed, killed with SIGKILL
at a random point of its work (once its queue is down to a random length, a few ms later),
and resumed again until it finishes: the final state, the context (which lists every event
it applied, in order) and the journal's steps must equal the reference's. Kill points are
chosen by progress, not by wall time: a delay measured on a loaded machine can land every
kill after the last step.
KILLS is 20 under INTERLOCK_STRESS=full (`make stress`, .ci/run), 6 at the reduced size.
"""

from __future__ import annotations

import random
import signal
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from interlock.runtime.engine.runner import Runner
from interlock.runtime.engine.snapshot import Snapshot
from interlock.runtime.store.sqlite import SqliteStore

from support.paths import ROOT
from support.stress import scaled

SPEC = ROOT / "tests" / "support" / "crash" / "crashy.yaml"
BINDINGS = ROOT / "tests" / "support" / "crash" / "crashy_bindings.py"
SESSION = "crashy-1"
KILLS = scaled(6, 20)
SEED = 20261123

pytestmark = [pytest.mark.slow, pytest.mark.stress]


def _events() -> list[tuple[str, dict[str, Any]]]:
    events: list[tuple[str, dict[str, Any]]] = [("go", {})]
    for n in range(120):
        events.append(("lap", {}) if n % 10 == 9 else ("tick", {"n": n}))
    events.append(("finish", {}))
    return events


def _prepare(db: Path) -> None:
    from interlock.runtime.engine.bindings_loader import load_bindings

    store = SqliteStore(db)
    try:
        runner, _ = Runner.open(store, SPEC.read_text(), str(SPEC), session_id=SESSION,
                                bindings=load_bindings(str(BINDINGS)))
        runner.close()
        for event, data in _events():
            store.enqueue(SESSION, event, data, time.time())
    finally:
        store.close()


def _resume(db: Path, kill_at: tuple[int, float] | None = None) -> int | None:
    """Run `interlock resume` to the end; with ``kill_at = (left, jitter)``, SIGKILL it
    ``jitter`` seconds after its queue is down to ``left`` events. None when killed."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "interlock.runtime.cli", "resume", SESSION, "--store", str(db),
         "--bindings", str(BINDINGS)],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )
    if kill_at is not None and _wait_for_queue(db, proc, kill_at[0]):
        time.sleep(kill_at[1])
        proc.send_signal(signal.SIGKILL)
        proc.communicate()
        return None
    try:
        _, stderr = proc.communicate(timeout=60)
    except subprocess.TimeoutExpired:
        proc.kill()
        _, stderr = proc.communicate()
        pytest.fail(f"resume did not finish within 60 s: {stderr[-2000:]}")
    assert proc.returncode == 0, stderr
    return proc.returncode


def _wait_for_queue(db: Path, proc: subprocess.Popen[str], left: int) -> bool:
    """Wait until the session's queue holds at most ``left`` events; False if the process
    ended first."""
    store = SqliteStore(db)
    try:
        deadline = time.monotonic() + 60
        while proc.poll() is None and time.monotonic() < deadline:
            if len(store.queued_events(SESSION)) <= left:
                return True
            time.sleep(0.002)
        return False
    finally:
        store.close()


def _status(db: Path) -> str:
    store = SqliteStore(db)
    try:
        return store.get(SESSION).status
    finally:
        store.close()


def _outcome(db: Path) -> tuple[Any, ...]:
    store = SqliteStore(db)
    try:
        row = store.get(SESSION)
        steps = [(e.kind, e.event, e.data, e.before, e.after) for e in store.journal(SESSION)
                 if e.kind in ("event", "timer", "rejected")]
        queued = store.queued_events(SESSION)
    finally:
        store.close()
    snapshot = Snapshot.from_json(row.snapshot)
    return row.status, snapshot.configuration, dict(snapshot.context), steps, len(queued)


def test_sigkill_at_random_points_changes_nothing(tmp_path: Path) -> None:
    reference_db = tmp_path / "reference.db"
    _prepare(reference_db)
    _resume(reference_db)
    reference = _outcome(reference_db)
    status, _, context, steps, queued = reference
    assert status == "finished" and queued == 0
    ticks = [data["n"] for event, data in _events() if event == "tick"]
    assert context["seen"] == ticks  # every tick applied once, in order
    assert context["laps"] == 12 and len(steps) > len(_events())

    rng = random.Random(SEED)
    kill_points = [(rng.randrange(1, len(_events())), rng.uniform(0, 0.02))
                   for _ in range(KILLS)]

    def kill_point(point: int) -> bool:
        """One independent copy: killed at its point, then resumed to the end. True when
        the kill left work to resume (it can land after the last step, before the exit)."""
        db = tmp_path / f"crash-{point}.db"
        _prepare(db)
        killed = _resume(db, kill_at=kill_points[point]) is None
        interrupted = killed and _status(db) != "finished"
        if interrupted:
            _resume(db)
        assert _outcome(db) == reference, (
            f"kill point {point} at {kill_points[point]} (seed {SEED})")
        return interrupted

    # Two copies at a time (the machine has two cores): each is its own database and
    # process, so they cannot interfere; only the wall time halves.
    with ThreadPoolExecutor(max_workers=2) as pool:
        killed = sum(pool.map(kill_point, range(KILLS)))
    assert killed >= KILLS // 2, "most kill points must land while the runner works"
