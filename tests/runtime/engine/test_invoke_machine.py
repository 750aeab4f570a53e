"""Child machines (``invoke: machine:``) with real sessions and real agent processes: the
done event names the child's final state and carries its context, leaving the state
cancels the child and stops its agent, a failing child is an error event, Ctrl-C leaves
the child resumable and a resumed parent adopts it, a SIGKILLed parent's child and agent
are adopted, restarted or failed per ``on_resume``."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

from interlock.runtime.engine.invoke_offline import (
    cancel_offline,
    child_sessions,
    stop_invocations,
)
from interlock.runtime.engine.runner import Runner
from interlock.runtime.store.sqlite import SqliteStore

from support.invoke_helpers import agent_argv, alive, group_gone, pids, run_until, wait_for
from support.machine_helpers import PARENT, Machines, child_spec, open_parent, run_parent


def hanging_child(store: SqliteStore, tmp_path: Path) -> tuple[Runner, Path]:
    """The parent open, its child's agent started and hanging; the file of agent pids."""
    log = tmp_path / "pids"
    runner = open_parent(store, tmp_path, Machines(child_spec(
        agent_argv("--pids", str(log), "--hang"))))
    wait_for(lambda: bool(pids(log)))
    return runner, log


def test_the_child_runs_to_its_final_state_and_the_parent_hears_which(
        store: SqliteStore, tmp_path: Path) -> None:
    machines = Machines(child_spec(agent_argv()))
    runner = run_parent(store, tmp_path, machines)
    assert runner.session.active == ("passed",)
    seen = store.get("p1").snapshot["context"]["seen"]
    assert seen["state"] == "answered"
    assert seen["session"] == "p1.0001-step"
    # the input reached the child as typed values, and the child's agent saw them
    assert seen["output"]["task"] == {"id": "T7", "title": "parse"}
    assert seen["output"]["answer"]["prompt"] == "Topic parsing task T7"
    child = store.get("p1.0001-step")
    assert child.status == "finished" and child.spec_name == "child"
    [record] = store.invocations("p1")
    assert record.argv == ("machine", "child") and record.outcome == "done"
    assert Path(record.spool).name == "0001-step"
    [agent] = store.invocations("p1.0001-step")
    assert agent.outcome == "done" and Path(agent.spool).parent.parent == Path(record.spool)
    assert machines.calls == [("child", str(tmp_path / "parent.yaml"))]
    assert child_sessions(store, "p1") == ["p1.0001-step"]


def test_leaving_the_state_cancels_the_child_and_stops_its_agent(
        store: SqliteStore, tmp_path: Path) -> None:
    runner, log = hanging_child(store, tmp_path)
    try:
        runner.send("leave")
        assert runner.session.active == ("left",)
    finally:
        runner.close()
    [pid] = pids(log)
    assert group_gone(pid)  # stopped inside the step that left the state
    child = store.get("p1.0001-step")
    assert child.status == "cancelled"
    [record] = store.invocations("p1")
    wait_for(lambda: store.invocations("p1")[0].outcome == "cancelled")
    assert store.invocations("p1.0001-step")[0].outcome == "cancelled"
    kinds = [e.kind for e in store.journal("p1.0001-step", after_seq=-1)]
    assert kinds[-1] == "cancelled"
    assert record.argv == ("machine", "child")


def test_a_child_that_fails_is_an_error_event_and_the_parent_goes_on(
        store: SqliteStore, tmp_path: Path) -> None:
    runner = open_parent(store, tmp_path, Machines(child_spec(
        agent_argv("--hang"), fail_on="boom")))
    try:
        wait_for(lambda: bool(store.invocations("p1.0001-step")))
        store.enqueue("p1.0001-step", "boom", {}, 0.0)
        run_until(runner, lambda: runner.session.is_final)
    finally:
        runner.close()
    assert runner.session.active == ("failed",)
    seen = store.get("p1").snapshot["context"]["seen"]
    assert seen["reason"] == "machine_failed"
    assert "the child's action broke" in seen["message"]
    assert store.get("p1.0001-step").status == "failed"
    [agent] = store.invocations("p1.0001-step")
    assert agent.outcome == "interrupted"  # a failed session runs no agents


def test_an_unknown_machine_is_a_spawn_error(store: SqliteStore, tmp_path: Path) -> None:
    runner = run_parent(store, tmp_path, Machines(child_spec(agent_argv())),
                        spec=PARENT.replace("machine: child", "machine: nothing"))
    seen = store.get("p1").snapshot["context"]["seen"]
    assert runner.session.active == ("failed",)
    assert seen["reason"] == "spawn_error" and "no machine 'nothing'" in seen["message"]


def test_ctrl_c_leaves_the_child_resumable_and_the_resumed_parent_adopts_it(
        store: SqliteStore, tmp_path: Path) -> None:
    log = tmp_path / "pids"
    machines = Machines(child_spec(agent_argv("--pids", str(log), "--delay", "1.5")))
    runner = open_parent(store, tmp_path, machines)
    try:
        wait_for(lambda: bool(pids(log)))
    finally:
        runner.close()  # Ctrl-C: the runner is stopped, not the session
    [first] = pids(log)
    assert group_gone(first)  # the child's agent was interrupted with its runner
    assert store.get("p1.0001-step").status == "active"
    [record] = store.invocations("p1")
    assert record.outcome is None  # still in flight: the child session goes on later
    runner = run_parent(store, tmp_path, machines)
    assert runner.session.active == ("passed",)
    assert len(pids(log)) == 2  # the same child session started its agent again
    assert [r.outcome for r in store.invocations("p1")] == ["done"]
    kinds = [e.kind for e in store.journal("p1", after_seq=-1)]
    assert "adopted" in kinds
    assert store.get("p1.0001-step").status == "finished"


def test_cancel_offline_stops_a_dead_runners_child_and_its_agent(
        store: SqliteStore, tmp_path: Path) -> None:
    runner, log = hanging_child(store, tmp_path)
    try:
        [pid] = pids(log)
        [agent] = store.invocations("p1.0001-step")
        # what a dead parent runner leaves: the child session's agent still running
        runner.invoker.shutdown(interrupt=False)  # type: ignore[union-attr]
        assert agent.pid is not None and alive(agent.pid, agent.start_ticks)
        assert store.holder("p1.0001-step") is None  # the child's runner let it go
        stopped = stop_invocations(store, "p1", at=1.0)
        assert [r.argv for r in stopped] == [("machine", "child")]
        assert group_gone(pid)
        assert store.get("p1.0001-step").status == "cancelled"
        assert not cancel_offline(store, "p1.0001-step", "again", 2.0)
    finally:
        runner.close()


RUN_PARENT = Path(__file__).resolve().parents[2] / "support" / "invoke" / "run_parent.py"


def crash_mid_child(store: SqliteStore, tmp_path: Path, on_resume: str) -> tuple[int, str]:
    """Run the parent in a process of its own, SIGKILL it while its child's agent runs;
    the agent's (pid, start ticks)."""
    log = tmp_path / "pids"
    env = {**os.environ, "PYTHONPATH": str(RUN_PARENT.parents[2])}
    process = subprocess.Popen(
        [sys.executable, str(RUN_PARENT), str(tmp_path / "state.db"), str(tmp_path),
         on_resume, "--pids", str(log), "--delay", "1.5"], env=env)

    def agent_recorded() -> bool:
        try:
            records = store.invocations("p1.0001-step", in_flight=True)
        except Exception:
            return False
        return bool(records) and records[0].start_ticks is not None and bool(pids(log))

    try:
        wait_for(lambda: process.poll() is not None or agent_recorded())
        assert process.poll() is None, "the parent's process ended early"
    finally:
        process.send_signal(signal.SIGKILL)
        process.wait(timeout=10)
    [agent] = store.invocations("p1.0001-step", in_flight=True)
    assert agent.pid is not None and agent.start_ticks is not None
    assert alive(agent.pid, agent.start_ticks)  # the agent outlived both runners
    return agent.pid, agent.start_ticks


def resume_parent(store: SqliteStore, tmp_path: Path, on_resume: str) -> None:
    run_parent(store, tmp_path, Machines(child_spec(agent_argv())), on_resume=on_resume)


def test_after_a_sigkill_adopt_resumes_the_child_which_adopts_its_agent(
        store: SqliteStore, tmp_path: Path) -> None:
    pid, ticks = crash_mid_child(store, tmp_path, "adopt")
    resume_parent(store, tmp_path, "adopt")
    seen = store.get("p1").snapshot["context"]["seen"]
    assert store.get("p1").snapshot["configuration"] == ["passed"]
    [agent_pid] = pids(tmp_path / "pids")  # no second agent
    assert seen["output"]["answer"]["pid"] == agent_pid  # the first agent's own answer
    assert not alive(pid, ticks)
    assert [r.outcome for r in store.invocations("p1")] == ["done"]
    assert [r.outcome for r in store.invocations("p1.0001-step")] == ["done"]
    assert "adopted" in [e.kind for e in store.journal("p1.0001-step", after_seq=-1)]


def test_after_a_sigkill_restart_cancels_the_child_and_starts_a_new_one(
        store: SqliteStore, tmp_path: Path) -> None:
    pid, ticks = crash_mid_child(store, tmp_path, "restart")
    resume_parent(store, tmp_path, "restart")
    assert not alive(pid, ticks)  # the old child's agent was stopped
    assert store.get("p1.0001-step").status == "cancelled"
    assert store.get("p1.0002-step").status == "finished"
    assert [r.outcome for r in store.invocations("p1")] == ["lost", "done"]
    seen = store.get("p1").snapshot["context"]["seen"]
    assert seen["session"] == "p1.0002-step"


def test_after_a_sigkill_fail_cancels_the_child_and_reports_runner_lost(
        store: SqliteStore, tmp_path: Path) -> None:
    pid, ticks = crash_mid_child(store, tmp_path, "fail")
    resume_parent(store, tmp_path, "fail")
    assert not alive(pid, ticks)
    assert store.get("p1").snapshot["configuration"] == ["failed"]
    assert store.get("p1").snapshot["context"]["seen"]["reason"] == "runner_lost"
    assert store.get("p1.0001-step").status == "cancelled"
