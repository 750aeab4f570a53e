"""SIGKILL of the runner mid-invoke, then resume: ``adopt`` takes the same agent's answer
and starts no second one, ``restart`` starts exactly one, ``fail`` raises error.invoke
with reason runner_lost; no process is left in any case (real processes throughout)."""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

from interlock.runtime.engine.invoke_offline import stop_invocations
from interlock.runtime.engine.lifecycle import cancel, remove
from interlock.runtime.host.procfs import start_ticks
from interlock.runtime.store.sqlite import SqliteStore

from support.invoke_helpers import (
    agent_argv,
    alive,
    group_gone,
    one_invoke_spec,
    open_runner,
    outcome,
    pids,
    run_until,
    wait_for,
)

RUN_SESSION = Path(__file__).resolve().parents[2] / "support" / "invoke" / "run_session.py"


def crash_mid_invoke(store: SqliteStore, tmp_path: Path, on_resume: str) -> tuple[int, str]:
    """Start a runner process on the spec, wait until its agent runs and is recorded,
    SIGKILL the runner; the agent's (pid, start ticks)."""
    spec = one_invoke_spec(agent_argv("--pids", str(tmp_path / "pids"), "--delay", "2"),
                           on_resume=on_resume)
    spec_file = tmp_path / "spec.yaml"
    spec_file.write_text(spec)
    env = {**os.environ, "PYTHONPATH": str(RUN_SESSION.parents[2])}
    runner = subprocess.Popen([sys.executable, str(RUN_SESSION), str(tmp_path / "state.db"),
                               str(spec_file), str(tmp_path / "session")], env=env)
    try:
        wait_for(lambda: runner.poll() is not None
                 or (_recorded(store) is not None and len(pids(tmp_path / "pids")) == 1))
        assert runner.poll() is None, "the runner process ended early"
    finally:
        runner.send_signal(signal.SIGKILL)
        runner.wait(timeout=10)
    recorded = _recorded(store)
    assert recorded is not None
    assert alive(*recorded)  # the agent outlived its runner
    return recorded


def _recorded(store: SqliteStore) -> tuple[int, str] | None:
    try:
        records = store.invocations("s1", in_flight=True)
    except Exception:
        return None
    if not records or records[0].pid is None or records[0].start_ticks is None:
        return None
    return records[0].pid, records[0].start_ticks


def resume(store: SqliteStore, tmp_path: Path) -> None:
    runner = open_runner(store, None, tmp_path)  # type: ignore[arg-type]
    try:
        run_until(runner, lambda: runner.session.is_final)
    finally:
        runner.close()


def test_adopt_takes_the_same_agents_answer(store: SqliteStore, tmp_path: Path) -> None:
    pid, _ = crash_mid_invoke(store, tmp_path, "adopt")
    resume(store, tmp_path)
    assert pids(tmp_path / "pids") == [pid_of_agent(tmp_path)]  # no second agent
    data = outcome(store)
    assert data["answer"]["pid"] == pid_of_agent(tmp_path)
    assert store.get("s1").snapshot["configuration"] == ["passed"]
    assert "adopted" in [e.kind for e in store.journal("s1", after_seq=-1)]
    assert group_gone(pid)
    assert not alive_pid(pid_of_agent(tmp_path))


def test_adopt_finds_an_agent_whose_pid_the_dead_runner_never_noted(
        store: SqliteStore, tmp_path: Path) -> None:
    """The runner died between starting the agent and noting its pid (the row has none):
    the resumed runner finds the agent by its dispatch id and adopts it all the same."""
    pid, _ = crash_mid_invoke(store, tmp_path, "adopt")
    with sqlite3.connect(tmp_path / "state.db") as db:
        db.execute("UPDATE invocations SET pid = NULL, pgid = NULL, start_ticks = NULL")
    resume(store, tmp_path)
    assert pids(tmp_path / "pids") == [pid_of_agent(tmp_path)]  # no second agent
    assert outcome(store)["answer"]["pid"] == pid_of_agent(tmp_path)
    [record] = store.invocations("s1")
    assert record.pid == pid and record.outcome == "done"
    assert "adopted" in [e.kind for e in store.journal("s1", after_seq=-1)]
    assert group_gone(pid)


def test_restart_starts_exactly_one_new_agent(store: SqliteStore, tmp_path: Path) -> None:
    pid, _ = crash_mid_invoke(store, tmp_path, "restart")
    resume(store, tmp_path)
    first, second = pids(tmp_path / "pids")
    assert outcome(store)["answer"]["pid"] == second != first
    kinds = [e.kind for e in store.journal("s1", after_seq=-1)]
    assert "lost" in kinds and "restarted" in kinds
    assert group_gone(pid)
    assert not any(alive_pid(p) for p in (first, second))


def test_fail_raises_runner_lost(store: SqliteStore, tmp_path: Path) -> None:
    pid, _ = crash_mid_invoke(store, tmp_path, "fail")
    resume(store, tmp_path)
    data = outcome(store)
    assert data["reason"] == "runner_lost"
    assert store.get("s1").snapshot["configuration"] == ["failed"]
    assert len(pids(tmp_path / "pids")) == 1
    assert group_gone(pid)
    assert not alive_pid(pid_of_agent(tmp_path))


def test_stop_invocations_stops_what_a_dead_runner_left(store: SqliteStore, tmp_path: Path
                                                        ) -> None:
    pid, _ = crash_mid_invoke(store, tmp_path, "adopt")
    ended = stop_invocations(store, "s1", at=0.0, grace=1.0)
    assert [r.pid for r in ended] == [pid]
    assert group_gone(pid) and not alive_pid(pid_of_agent(tmp_path))
    assert store.invocations("s1", in_flight=True) == []


def pid_of_agent(tmp_path: Path) -> int:
    return pids(tmp_path / "pids")[0]


def alive_pid(pid: int) -> bool:
    """Running (a zombie no init reaped yet does not count: it runs nothing)."""
    return start_ticks(pid) is not None


def test_cancelling_a_session_no_runner_holds_stops_its_agents(store: SqliteStore,
                                                               tmp_path: Path) -> None:
    pid, _ = crash_mid_invoke(store, tmp_path, "adopt")
    assert cancel(store, "s1", "enough", time.time()).action == "cancelled"
    assert group_gone(pid) and not alive_pid(pid_of_agent(tmp_path))
    [record] = store.invocations("s1")
    assert record.outcome == "cancelled"
    last = store.journal("s1", after_seq=-1)[-1]
    assert last.kind == "cancelled" and record.id in (last.note or "")


def test_removing_a_session_no_runner_holds_stops_its_agents(store: SqliteStore,
                                                             tmp_path: Path) -> None:
    pid, _ = crash_mid_invoke(store, tmp_path, "adopt")
    assert remove(store, "s1", time.time()).status == "stopped"
    assert group_gone(pid) and not alive_pid(pid_of_agent(tmp_path))
