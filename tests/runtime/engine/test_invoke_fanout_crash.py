"""SIGKILL of the runner in the middle of a fan-out, then resume (real processes, SQLite):
every item is done once, the ``.all`` comes once with every outcome in item order; the
children running at the crash are adopted, restarted or failed per ``on_resume``, the one
that had ended is never run again, and no process is left."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from interlock.runtime.store.base import InvocationRecord
from interlock.runtime.store.sqlite import SqliteStore

from support.fanout_helpers import fanout_spec, resume_fanout, times
from support.invoke_helpers import (
    alive,
    group_gone,
    outcome,
    pids,
    run_until,
    wait_for,
)

RUN_SESSION = Path(__file__).resolve().parents[2] / "support" / "invoke" / "run_session.py"


def crash_mid_fanout(store: SqliteStore, tmp_path: Path, on_resume: str) -> list[int]:
    """Run a fan-out of four items, two at once, in a runner process: `a` ends at once, the
    others wait for the file `release` (:func:`resume_fanout` makes it). Once `a` has ended and
    `b` and `c` run (recorded), SIGKILL the runner; the pids of `b` and `c`."""
    release = tmp_path / "release"
    spec = fanout_spec(tmp_path, ["a", "b", "c", "d"], on_resume=on_resume, args=[
        "--wait-file={{ '' if index == 0 else '" + str(release) + "' }}"])
    spec_file = tmp_path / "spec.yaml"
    spec_file.write_text(spec)
    env = {**os.environ, "PYTHONPATH": str(RUN_SESSION.parents[2])}
    runner = subprocess.Popen([sys.executable, str(RUN_SESSION), str(tmp_path / "state.db"),
                               str(spec_file), str(tmp_path / "session")], env=env)
    try:
        wait_for(lambda: runner.poll() is not None
                 or (sorted(r.index for r in _running(store)) == [1, 2]
                     and len(pids(tmp_path / "pids")) == 3))  # b and c run their own code
        assert runner.poll() is None, "the runner process ended early"
    finally:
        runner.send_signal(signal.SIGKILL)
        runner.wait(timeout=10)
    running = _running(store)
    assert sorted(r.index or 0 for r in running) == [1, 2]
    assert all(alive(r.pid or 0, r.start_ticks) for r in running)  # they outlived it
    assert sorted(times(tmp_path)) == [0]
    return [r.pid or 0 for r in running]


def _running(store: SqliteStore) -> list[InvocationRecord]:
    """The children in flight whose process is noted."""
    try:
        rows = store.invocations("s1", in_flight=True)
    except Exception:  # the runner has not created the session yet
        return []
    return [r for r in rows if r.pid is not None and r.start_ticks is not None]


def ran(tmp_path: Path) -> dict[int, int]:
    """How many times each index ran to its end."""
    return {index: len(runs) for index, runs in times(tmp_path).items()}


@pytest.mark.parametrize(("on_resume", "oks", "started"), [
    ("adopt", [True, True, True, True], 4),      # b and c adopted: nothing runs twice
    ("restart", [True, True, True, True], 6),    # b and c stopped, started once more
    ("fail", [True, False, False, True], 4),     # b and c runner_lost; d runs
])
def test_a_fanout_resumed_after_a_sigkill_does_each_item_once(
        store: SqliteStore, tmp_path: Path, on_resume: str, oks: list[bool],
        started: int) -> None:
    left = crash_mid_fanout(store, tmp_path, on_resume)
    resume_fanout(store, tmp_path)
    every = outcome(store)
    assert [o["item"] for o in every["outcomes"]] == ["a", "b", "c", "d"]
    assert [o["ok"] for o in every["outcomes"]] == oks
    assert len(pids(tmp_path / "pids")) == started
    assert ran(tmp_path) == ({0: 1, 3: 1} if on_resume == "fail" else {0: 1, 1: 1, 2: 1, 3: 1})
    journal = store.journal("s1", after_seq=-1)
    events = [e.event for e in journal if e.kind == "event"]
    assert events.count("done.invoke.work.all") == 1
    assert sorted(e.data["index"] for e in journal
                  if e.kind == "event" and e.event != "done.invoke.work.all") == [0, 1, 2, 3]
    kinds = [e.kind for e in journal]
    if on_resume == "adopt":
        assert kinds.count("adopted") == 2 and "lost" not in kinds
    else:
        assert kinds.count("lost") == 2
        assert kinds.count("restarted") == (2 if on_resume == "restart" else 0)
    if on_resume == "fail":
        assert {o["reason"] for o in every["outcomes"] if not o["ok"]} == {"runner_lost"}
    [fanout] = store.fanouts("s1")
    assert fanout.outcome == "done"
    assert store.invocations("s1", in_flight=True) == []
    assert all(group_gone(pid) for pid in left + pids(tmp_path / "pids"))


RUN_PARENT = RUN_SESSION.parent / "run_fanout_parent.py"


def test_machine_children_of_a_fanout_are_adopted_after_a_sigkill(
        store: SqliteStore, tmp_path: Path) -> None:
    """Each child session's agent waits for `release` but the first's: the parent is
    SIGKILLed while the second and third run; resumed, it adopts both child sessions (which
    adopt their agents): every task's agent ran once."""
    from support.fanout_helpers import CHILD
    from support.machine_helpers import Machines, child_spec, fanout_parent, open_parent

    release = tmp_path / "release"
    argv = [sys.executable, str(CHILD), str(tmp_path / "times"), "{{ context.topic }}",
            "{{ context.task.n }}", "--pids", str(tmp_path / "pids"),
            "--wait-file={{ '' if context.task.n == 0 else '" + str(release) + "' }}"]
    spec_file = tmp_path / "parent.yaml"
    spec_file.write_text(fanout_parent())
    env = {**os.environ, "PYTHONPATH": str(RUN_SESSION.parents[2])}
    runner = subprocess.Popen([sys.executable, str(RUN_PARENT), str(tmp_path / "state.db"),
                               str(tmp_path), str(spec_file), *argv], env=env)
    try:
        wait_for(lambda: runner.poll() is not None or (
            len(pids(tmp_path / "pids")) == 3 and sorted(times(tmp_path)) == [0]))
        assert runner.poll() is None, "the runner process ended early"
    finally:
        runner.send_signal(signal.SIGKILL)
        runner.wait(timeout=10)
    resumed = open_parent(store, tmp_path, Machines(child_spec(argv)), spec=fanout_parent())
    release.touch()
    try:
        run_until(resumed, lambda: resumed.session.is_final)
    finally:
        resumed.close()
    assert resumed.session.active == ("passed",)
    assert ran(tmp_path) == {0: 1, 1: 1, 2: 1} and len(pids(tmp_path / "pids")) == 3
    outcomes = store.get("p1").snapshot["context"]["seen"]["outcomes"]
    assert [(o["state"], o["output"]["answer"]["item"]) for o in outcomes] == [
        ("answered", "T1"), ("answered", "T2"), ("answered", "T3")]
    assert [e.kind for e in store.journal("p1", after_seq=-1)].count("adopted") == 2
    assert all(store.get(o["session"]).status == "finished" for o in outcomes)
    assert all(group_gone(pid) for pid in pids(tmp_path / "pids"))
