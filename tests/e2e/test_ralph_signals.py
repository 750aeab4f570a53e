"""Every live signal of seed 004, both while an agent runs and at a checkpoint, through
the installed CLI: `interlock ralph run` with the demo agents as real processes, signals
dropped with `interlock signal` (or, where an agent's call is short, the same façade call
in the test's own process). Each checks what the engine did and who handled it
(`handling_metadata` in signals/processed/)."""

from __future__ import annotations

from pathlib import Path

from support.cli import wait_for_status
from support.ralph_e2e import (
    SLOW,
    cli,
    finish,
    invocation,
    invocations,
    meta,
    pending,
    post,
    processed,
    processes_in,
    progress,
    project,
    session,
    signal,
    start,
    state,
    wait_until,
)


def running(root: Path, task: str = "T1") -> bool:
    return f"[/] {task}" in progress(root)


def agent_working(root: Path, task: str = "T1") -> bool:
    """The task is in progress and its Executor's agent runs (Mark WIP comes before the
    agent is invoked: a signal in between lands at that step boundary instead)."""
    if not running(root, task):
        return False
    for pid in processes_in(root):
        try:
            if b"executor" in Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0"):
                return True
        except OSError:
            continue
    return False


def handled(root: Path, kind: str) -> dict[str, object]:
    """The handling record of the one ``kind`` signal archived. The consumer archives a
    signal after the session took it, so the state it led to may show first: wait."""
    def archived() -> list[dict[str, object]]:
        return [s["handling_metadata"] for s in processed(root) if s["type"] == kind]

    wait_until(lambda: bool(archived()), timeout=10, what=f"{kind} archived")
    [found] = archived()
    return found


# -- ABORT ------------------------------------------------------------------------------


def test_abort_while_the_executor_runs(tmp_path: Path) -> None:
    project(tmp_path, SLOW)
    proc = start(tmp_path, "ralph", "run", "s")
    wait_until(lambda: running(tmp_path), proc=proc, what="T1 in progress")
    post(tmp_path, "ABORT", "stop now")
    code, err = finish(proc)
    assert code == 1, err
    data = meta(tmp_path)
    assert data["status"] == "aborted" and data["orchestrator"]["state"] == "COMPLETE"
    assert "[F] T1: write the parser — Aborted by signal" in progress(tmp_path)
    it_meta = (session(tmp_path) / "iterations/1/metadata.yaml").read_text()
    assert "completed_at" in it_meta
    assert handled(tmp_path, "ABORT")["handled_by"] == "Ralph-Executor"
    assert "outcome: blocked (aborted)" in invocation(tmp_path, "002-executor")
    assert processes_in(tmp_path) == []  # the agent's process group was stopped


def test_abort_at_a_checkpoint_in_knowledge_approval(tmp_path: Path) -> None:
    project(tmp_path, ralph="knowledge_approval_timeout: 1h", request="write the parser")
    proc = start(tmp_path, "ralph", "run", "s")
    wait_until(lambda: state(tmp_path) == "KNOWLEDGE_APPROVAL",
               proc=proc, what="KNOWLEDGE_APPROVAL")
    signal(tmp_path, "ABORT")
    code, err = finish(proc)
    assert code == 1, err
    assert meta(tmp_path)["status"] == "aborted"
    assert handled(tmp_path, "ABORT")["handled_by"] == "Ralph-Orchestrator"
    assert "[x] T1" in progress(tmp_path)  # finished work is not reverted


def test_abort_at_a_checkpoint_while_paused(tmp_path: Path) -> None:
    project(tmp_path, request="write the parser")
    signal(tmp_path, "PAUSE", "hold on")
    proc = start(tmp_path, "ralph", "run", "s")
    wait_until(lambda: state(tmp_path) == "PAUSED", proc=proc, what="PAUSED")
    assert proc.poll() is None  # a paused session waits
    signal(tmp_path, "ABORT")
    code, err = finish(proc)
    assert code == 1, err
    assert meta(tmp_path)["status"] == "aborted"


# -- PAUSE ------------------------------------------------------------------------------


def test_pause_while_running_keeps_the_work_then_resume(tmp_path: Path) -> None:
    project(tmp_path, SLOW, request="write the parser; write the report")
    proc = start(tmp_path, "ralph", "run", "s")
    wait_until(lambda: agent_working(tmp_path), proc=proc, what="T1's agent working")
    post(tmp_path, "PAUSE", "wait for me")
    wait_until(lambda: state(tmp_path) == "PAUSED", proc=proc, what="PAUSED")
    text = progress(tmp_path)
    assert "Paused by signal" in text
    assert "[x] T1" in text and "[ ] T2" in text  # T1's agent finished its step first
    assert proc.poll() is None
    assert handled(tmp_path, "PAUSE")["handled_by"] == "Ralph-Executor"
    resumed = cli(tmp_path, "ralph", "resume", "s", "--message", "go on")
    assert resumed.returncode == 0, resumed.stderr
    code, err = finish(proc)
    assert code == 0, err
    assert progress(tmp_path).count("[x]") == 2
    executors = invocations(tmp_path, "executor")
    assert len(executors) == 2  # T1 was not done again
    assert "Resumed after PAUSE: go on" in executors[1]


def test_pause_at_a_checkpoint_then_resume(tmp_path: Path) -> None:
    project(tmp_path, request="write the parser")
    signal(tmp_path, "PAUSE", "hold on")
    proc = start(tmp_path, "ralph", "run", "s")
    wait_until(lambda: state(tmp_path) == "PAUSED", proc=proc, what="PAUSED")
    assert handled(tmp_path, "PAUSE")["handled_by"] == "Ralph-Orchestrator"
    assert not (session(tmp_path) / "iterations/1/invocations/001-planner.md").exists()
    assert cli(tmp_path, "ralph", "resume", "s", "--message", "plan it").returncode == 0
    code, err = finish(proc)
    assert code == 0, err
    assert "Resumed after PAUSE: plan it" in invocation(tmp_path, "001-planner")


# -- STEER ------------------------------------------------------------------------------


def test_steer_scope_change_and_info_while_running(tmp_path: Path) -> None:
    project(tmp_path, SLOW, request="write the parser; test it")
    proc = start(tmp_path, "ralph", "run", "s")
    wait_until(lambda: running(tmp_path), proc=proc, what="T1 in progress")
    post(tmp_path, "INFO", "the target is Linux")
    post(tmp_path, "STEER", "scope: write a lexer instead")
    code, err = finish(proc, 120)
    assert code == 0, err
    first = progress(tmp_path, 1)
    assert "[F] T1: write the parser — STEER scope change: scope: write a lexer" in first
    assert progress(tmp_path, 2) == "- [x] T1: write a lexer instead\n"
    report = (session(tmp_path) / "iterations/1/tasks/T1.md").read_text()
    assert "(c) scope change" in report
    assert handled(tmp_path, "INFO")["handled_by"] == "Ralph-Executor"
    assert handled(tmp_path, "STEER")["handled_by"] == "Ralph-Executor"
    later = [*invocations(tmp_path, "executor", 1)[1:], *invocations(tmp_path, "executor", 2),
             *invocations(tmp_path, "planner", 2)]
    assert later and all("INFO: the target is Linux" in text for text in later)


def test_steer_redo_while_running_restarts_the_implementation(tmp_path: Path) -> None:
    project(tmp_path, SLOW, request="write the parser")
    proc = start(tmp_path, "ralph", "run", "s")
    wait_until(lambda: running(tmp_path), proc=proc, what="T1 in progress")
    post(tmp_path, "STEER", "redo: use bar", target="Ralph-Executor")
    code, err = finish(proc)
    assert code == 0, err
    report = (session(tmp_path) / "iterations/1/tasks/T1.md").read_text()
    assert "(a) work invalidated" in report and "restarted 1 time" in report
    record = invocation(tmp_path, "002-executor")
    assert record.count("## Call ") == 2 and "STEER: redo: use bar" in record
    assert "[x] T1" in progress(tmp_path)


def test_steer_and_info_at_a_checkpoint_reach_the_next_prompts(tmp_path: Path) -> None:
    project(tmp_path, request="write the parser")
    signal(tmp_path, "STEER", "prefer small functions")
    signal(tmp_path, "INFO", "python 3.11")
    signal(tmp_path, "STEER", "only for the reviewer", "--target", "Ralph-Reviewer")
    done = cli(tmp_path, "ralph", "run", "s")
    assert done.returncode == 0, done.stderr
    planner = invocation(tmp_path, "001-planner")
    assert "STEER: prefer small functions" in planner and "INFO: python 3.11" in planner
    assert "only for the reviewer" not in planner
    assert "INFO: python 3.11" in invocation(tmp_path, "002-executor")
    assert "STEER: only for the reviewer" in invocation(tmp_path, "003-reviewer")
    assert all(s["handling_metadata"]["handled_by"] == "Ralph-Orchestrator"
               for s in processed(tmp_path))
    targeted = [s for s in processed(tmp_path) if s.get("target") == "Ralph-Reviewer"]
    assert "buffered for Ralph-Reviewer" in targeted[0]["handling_metadata"]["action_taken"]


# -- APPROVE and SKIP: consumed only in KNOWLEDGE_APPROVAL ------------------------------


def decide_at_approval(root: Path, kind: str, message: str) -> None:
    """A session run to KNOWLEDGE_APPROVAL, then ``kind`` (APPROVE or SKIP) sent there;
    the run completes."""
    project(root, ralph="knowledge_approval_timeout: 1h", request="write the parser")
    proc = start(root, "ralph", "run", "s")
    wait_until(lambda: state(root) == "KNOWLEDGE_APPROVAL", proc=proc,
               what="KNOWLEDGE_APPROVAL")
    signal(root, kind, message)
    code, err = finish(proc)
    assert code == 0, err


def test_approve_at_the_checkpoint_promotes_knowledge(tmp_path: Path) -> None:
    decide_at_approval(tmp_path, "APPROVE", "looks good")
    assert (tmp_path / ".docs" / "T1.md").exists()
    assert "Approval: looks good" in invocation(tmp_path, "004-librarian")


def test_approve_while_running_waits_for_knowledge_approval(tmp_path: Path) -> None:
    project(tmp_path, SLOW, ralph="knowledge_approval_timeout: 1h", request="write the parser")
    proc = start(tmp_path, "ralph", "run", "s")
    wait_until(lambda: running(tmp_path), proc=proc, what="T1 in progress")
    post(tmp_path, "APPROVE", "early")
    assert pending(tmp_path)  # not consumed while the executor runs
    code, err = finish(proc)
    assert code == 0, err
    action = str(handled(tmp_path, "APPROVE")["action_taken"])
    assert "awaiting_approval" in action
    assert (tmp_path / ".docs" / "T1.md").exists()


def test_skip_at_the_checkpoint_keeps_knowledge_unpromoted(tmp_path: Path) -> None:
    decide_at_approval(tmp_path, "SKIP", "not now")
    assert not (tmp_path / ".docs").exists()
    knowledge = session(tmp_path) / "iterations/1/knowledge/T1.md"
    assert knowledge.exists() and "carried_from" not in knowledge.read_text()


def test_skip_while_running_waits_for_knowledge_approval(tmp_path: Path) -> None:
    project(tmp_path, SLOW, ralph="knowledge_approval_timeout: 1h", request="write the parser")
    proc = start(tmp_path, "ralph", "run", "s")
    wait_until(lambda: running(tmp_path), proc=proc, what="T1 in progress")
    post(tmp_path, "SKIP", "early")
    assert pending(tmp_path)
    code, err = finish(proc)
    assert code == 0, err
    assert "awaiting_approval" in str(handled(tmp_path, "SKIP")["action_taken"])
    assert not (tmp_path / ".docs").exists()


# -- interlock run ralph_orchestrator -----------------------------------------------------


def test_interlock_run_of_the_orchestrator_reads_the_mailbox_interlock_signal_writes(
        tmp_path: Path) -> None:
    """`interlock run ralph_orchestrator` (no --demo: the knowledge approval waits an hour)
    names the Ralph folder's mailbox in its hint, and takes an APPROVE that `interlock
    signal` posts there."""
    proc = start(tmp_path, "run", "ralph_orchestrator", "--session", "r1")
    wait_for_status(tmp_path, lambda view: "KNOWLEDGE_APPROVAL" in view["active"], proc,
                    session="r1")
    posted = cli(tmp_path, "signal", "r1", "APPROVE", "ok")
    assert posted.returncode == 0, posted.stderr
    inputs = tmp_path / ".ralph-sessions" / "r1" / "signals" / "inputs"
    assert str(inputs) in posted.stderr
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    assert f"signals: {inputs} (interlock signal r1" in out + err
    assert "APPROVE" in str(processed(tmp_path, "r1"))

