"""Ralph sessions end to end: `interlock ralph ...` as real processes, demo agents (and
fake CLIs) as real processes; the subagents as child sessions whose agents the engine
invokes. The signals, each both while an agent runs and at a checkpoint, are in
test_ralph_signals.py. Waits are on files, bounded; nothing sleeps for time."""

from __future__ import annotations

import contextlib
import json
import os
import signal as signals
from datetime import datetime
from pathlib import Path

import pytest
import yaml

from interlock.runtime.ralph.watch import RalphStatus, render_text

from support.ralph_e2e import (
    SLOW,
    cli,
    finish,
    invocation,
    meta,
    post,
    processed,
    processes_in,
    progress,
    project,
    session,
    start,
    state,
    wait_until,
)


def test_a_session_runs_to_completion_offline(tmp_path: Path) -> None:
    project(tmp_path)
    done = cli(tmp_path, "ralph", "run", "s")
    assert done.returncode == 0, done.stderr
    assert meta(tmp_path)["status"] == "completed"
    assert meta(tmp_path)["orchestrator"]["state"] == "COMPLETE"
    assert progress(tmp_path).count("[x]") == 3
    it = session(tmp_path) / "iterations" / "1"
    assert sorted(p.name for p in (it / "tasks").iterdir()) == ["T1.md", "T2.md", "T3.md"]
    assert sorted(p.name for p in (it / "reviews").iterdir()) == ["T1.md", "T2.md", "T3.md"]
    names = sorted(p.name for p in (it / "invocations").iterdir())
    assert names[0] == "001-planner.md" and len(names) == 7
    assert "Request:" in invocation(tmp_path, "001-planner")
    assert "completed_at" in yaml.safe_load((it / "metadata.yaml").read_text())
    # no APPROVE in time: staged knowledge is carried forward, not promoted
    assert "carried_from" in (it / "knowledge" / "T1.md").read_text()
    assert not (tmp_path / ".docs").exists()
    # each subagent invocation is a child session whose agent the engine invoked
    log = cli(tmp_path, "log", "s.0002-executor", "--json")
    entries = [json.loads(line) for line in log.stdout.splitlines() if line.strip()]
    assert [e["data"]["invoke"] for e in entries if e["kind"] == "invoked"] == ["agent"]
    assert any(e.get("event") == "done.invoke.agent" for e in entries)
    parent = [json.loads(line) for line in cli(tmp_path, "log", "s", "--json").stdout
              .splitlines() if line.strip()]
    assert "done.invoke.executor.completed" in {e.get("event") for e in parent}
    status = cli(tmp_path, "ralph", "status", "s", "--json")
    from interlock.runtime.ralph.watch import RalphStatus

    seen = RalphStatus.model_validate_json(status.stdout)
    assert seen.finished and [t.marker for t in seen.tasks] == ["x", "x", "x"]
    data = meta(tmp_path)  # the elapsed time of an ended session stops at its end
    ended = datetime.fromisoformat(data["ended_at"].replace("Z", "+00:00")).timestamp()
    assert seen.elapsed == pytest.approx(ended - data["limits"]["started_at"], abs=0.01)
    watched = cli(tmp_path, "watch", "s")
    assert watched.returncode == 0 and "COMPLETE" in watched.stdout

def test_sigkill_mid_executor_then_run_again(tmp_path: Path) -> None:
    """The runner is SIGKILLed while T2's executor runs; `ralph run` again adopts that
    executor (same process, its own answer), so no task is done twice, no signal handled
    twice, and no process is left."""
    project(tmp_path, SLOW)
    proc = start(tmp_path, "ralph", "run", "s")
    wait_until(lambda: "[/] T2" in progress(tmp_path), proc=proc, what="T2 in progress")
    post(tmp_path, "INFO", "before the crash")
    wait_until(lambda: len(set(processes_in(tmp_path)) - {proc.pid}) > 0,
               proc=proc, what="the T2 executor process")
    agents = set(processes_in(tmp_path)) - {proc.pid}
    os.kill(proc.pid, signals.SIGKILL)  # the runner only: its agent lives on
    proc.wait(timeout=10)
    assert agents <= set(processes_in(tmp_path))
    again = cli(tmp_path, "ralph", "run", "s", timeout=120)
    assert again.returncode == 0, again.stderr
    text = progress(tmp_path)
    assert text.count("[x]") == 3 and text.count("T2:") == 1
    assert len(processed(tmp_path)) == 1
    assert list((session(tmp_path) / "signals/inputs").iterdir()) == []
    assert processes_in(tmp_path) == []
    record = invocation(tmp_path, "003-executor")
    assert record.count("## Call ") == 1  # the adopted agent's one call
    log = cli(tmp_path, "log", "s.0003-executor", "--json").stdout
    kinds = [json.loads(line)["kind"] for line in log.splitlines() if line.strip()]
    # the kill may land before the `invoked` entry is journaled: the row was written
    # before the spawn, and that one row is what the resumed child adopted
    assert "adopted" in kinds and kinds.count("invoked") <= 1
    from interlock.runtime.store.sqlite import SqliteStore

    store = SqliteStore(tmp_path / ".interlock" / "state.db")
    try:
        [row] = store.invocations("s.0003-executor")  # one agent for T2, never a second
    finally:
        store.close()
    assert row.outcome == "done"

def test_max_iterations_stops_an_agent_that_never_finishes(tmp_path: Path) -> None:
    (tmp_path / "reject.yaml").write_text("default: {verdict: retry}\n")
    project(tmp_path, "reviewer: {cli: demo, script: reject.yaml}", request="write it")
    done = cli(tmp_path, "ralph", "run", "s", "--max-iterations", "2")
    assert done.returncode == 3, done.stderr
    assert meta(tmp_path)["stop"]["reason"] == "max_iterations"
    shown = json.loads(cli(tmp_path, "ralph", "status", "s", "--json").stdout)
    assert shown["max_iterations"] == 2 and shown["stop"]["reason"] == "max_iterations"
    view = render_text(RalphStatus.model_validate(shown))  # what `interlock watch` draws
    assert f"{shown['iteration']} of 2" in view


def test_a_hung_agent_is_killed_by_the_invocation_timeout(tmp_path: Path) -> None:
    (tmp_path / "hang.yaml").write_text("hang: true\n")
    project(tmp_path, "executor: {cli: demo, script: hang.yaml}",
            ralph="invocation_timeout: 1s\n  max_iterations: 1", request="write it")
    done = cli(tmp_path, "ralph", "run", "s")
    assert done.returncode == 3, done.stderr
    assert "timed out after 1s" in progress(tmp_path)
    assert meta(tmp_path)["stop"]["reason"] == "max_iterations"
    assert processes_in(tmp_path) == []


def test_a_transient_failure_is_retried(tmp_path: Path) -> None:
    (tmp_path / "flaky.yaml").write_text("fail_times: 2\n")
    project(tmp_path, "executor: {cli: demo, script: flaky.yaml}",
            ralph="retry: {exit_codes: [1], attempts: 3, base: 10ms, cap: 50ms}",
            request="write it")
    done = cli(tmp_path, "ralph", "run", "s")
    assert done.returncode == 0, done.stderr
    assert "[x] T1" in progress(tmp_path)
    record = invocation(tmp_path, "002-executor")
    assert "## Call 3 (attempt 3" in record and record.count("error: the agent exited") == 2
    log = cli(tmp_path, "log", "s.0002-executor").stdout
    assert log.count("backing_off") >= 2  # the backoff is a state with its timer

def test_poll_takes_signals_for_a_role(tmp_path: Path) -> None:
    project(tmp_path)
    cli(tmp_path, "signal", "s", "INFO", "for everyone")
    cli(tmp_path, "signal", "s", "STEER", "only the reviewer", "--target", "Ralph-Reviewer")
    taken = cli(tmp_path, "ralph", "poll", "s", "--as", "executor", "--json")
    assert taken.returncode == 0, taken.stderr
    assert "for everyone" in taken.stdout and "only the reviewer" not in taken.stdout
    assert len(list((session(tmp_path) / "signals/inputs").iterdir())) == 1


def test_bad_input_is_one_line(tmp_path: Path) -> None:
    done = cli(tmp_path, "ralph", "run", "nope")
    assert done.returncode == 1 and "no Ralph session 'nope'" in done.stderr
    assert "Traceback" not in done.stderr
    done = cli(tmp_path, "ralph", "init", "--request", "x", "--id", "../x")
    assert done.returncode == 2 and "Traceback" not in done.stderr


def test_run_ralph_orchestrator_demo_reaches_complete(tmp_path: Path) -> None:
    done = cli(tmp_path, "run", "ralph_orchestrator", "--demo", "--session", "ro")
    assert done.returncode == 0, done.stderr
    assert "finished in [COMPLETE]" in done.stdout + done.stderr
    text = progress(tmp_path, 1, "ro")
    assert text == "- [x] T1: write the parser\n- [x] T2: test the parser\n"


def test_run_ralph_subagent_demo_reaches_completed(tmp_path: Path) -> None:
    done = cli(tmp_path, "run", "ralph_subagent", "--demo")
    assert done.returncode == 0, done.stderr
    assert "finished in [completed]" in done.stdout + done.stderr


def _artefacts(root: Path) -> dict[str, str]:
    """Every file of the session's iterations and the project, the timing of each call
    left out (the one thing a replay may change)."""
    files = {}
    for path in sorted(root.rglob("*")):
        rel = path.relative_to(root)
        if not path.is_file() or rel.parts[0] in (".interlock",) or "signals" in rel.parts:
            continue
        if rel.name == "metadata.yaml" or rel.suffix == ".jsonl":
            continue  # timestamps
        text = path.read_text().replace(str(root), "ROOT")
        files[str(rel)] = "\n".join(line for line in text.splitlines()
                                    if not line.startswith("## Call "))
    return files


def test_a_recorded_cassette_replays_to_identical_artefacts(tmp_path: Path) -> None:
    first, second = tmp_path / "first", tmp_path / "second"
    first.mkdir()
    second.mkdir()
    cassette = tmp_path / "session.jsonl"
    project(first)
    project(second)
    done = cli(first, "ralph", "run", "s", "--record", str(cassette))
    assert done.returncode == 0, done.stderr
    assert len(cassette.read_text().splitlines()) == 7
    done = cli(second, "ralph", "run", "s", "--replay", str(cassette))
    assert done.returncode == 0, done.stderr
    assert _artefacts(first) == _artefacts(second)
    assert progress(second).count("[x]") == 3


def test_a_session_recorded_in_two_runs_replays_in_two_runs(tmp_path: Path) -> None:
    """Recorded up to a limit, continued with a higher one (the cassette appended);
    replayed the same way, the continued replay goes on from its own invocation."""
    first, second = tmp_path / "first", tmp_path / "second"
    cassette = tmp_path / "session.jsonl"
    for root in (first, second):
        root.mkdir()
        (root / "reject.yaml").write_text("answers:\n  - {verdict: retry}\n")
        project(root, "reviewer: {cli: demo, script: reject.yaml}",
                ralph="max_iterations: 1", request="write the parser")
    for root, mode in ((first, "--record"), (second, "--replay")):
        limited = cli(root, "ralph", "run", "s", mode, str(cassette))
        assert limited.returncode == 3, limited.stderr
        done = cli(root, "ralph", "run", "s", "--max-iterations", "2", mode, str(cassette))
        assert done.returncode == 0, done.stderr
    assert len(cassette.read_text().splitlines()) == 6
    assert _artefacts(first) == _artefacts(second)
    assert "[x] T1" in progress(second, 2)


def test_a_cassette_that_does_not_match_pauses_the_session_saying_why(tmp_path: Path
                                                                     ) -> None:
    """A replay whose first prompt differs from the recorded one: the Planner cannot
    start, the session pauses, and the run ends (exit 4) saying why and what next;
    ``--wait`` keeps it waiting instead; `ralph status` says why."""
    first, second = tmp_path / "first", tmp_path / "second"
    cassette = tmp_path / "session.jsonl"
    for root, request in ((first, "write it"), (second, "write something else")):
        root.mkdir()
        project(root, request=request)
    assert cli(first, "ralph", "run", "s", "--record", str(cassette)).returncode == 0
    done = cli(second, "ralph", "run", "s", "--replay", str(cassette))
    assert done.returncode == 4, done.stderr
    assert "PAUSED: Ralph-Planner failed:" in done.stderr
    assert "paused: Ralph-Planner failed:" in done.stderr.splitlines()[-1]
    assert "then `interlock ralph run s`" in done.stderr
    shown = cli(second, "ralph", "status", "s").stdout
    assert "paused: Ralph-Planner failed:" in shown and "the prompt differs" in shown
    proc = start(second, "ralph", "run", "s", "--replay", str(cassette), "--wait")

    def paused_again() -> bool:
        meta = yaml.safe_load((session(second) / "metadata.yaml").read_text())
        return meta.get("ended_at") is None and bool(meta.get("paused_for"))

    wait_until(paused_again, proc=proc, what="the pause, waiting")
    proc.send_signal(signals.SIGINT)
    code, err = finish(proc)
    assert code == 130 and "PAUSED: Ralph-Planner failed:" in err


def test_gates_send_a_failing_task_back_then_fail_it(tmp_path: Path) -> None:
    """A gate that passes once T1.md exists accepts T1; one that never passes fails T2
    after gate_attempts, with the gate's output in the next prompt."""
    project(tmp_path, ralph="gates:\n    - {name: check, command: 'test ! -e T2.md'}\n"
            "  gate_attempts: 2\n  max_iterations: 1", request="write one; write two")
    done = cli(tmp_path, "ralph", "run", "s")
    assert done.returncode == 3, done.stderr
    text = progress(tmp_path)
    assert "[x] T1" in text and "[F] T2: write two — gates:" in text
    record = (session(tmp_path) / "iterations/1/invocations/003-executor.md").read_text()
    assert "The gates failed on your last attempt" in record
    assert "## Gates, run 2: failed" in (session(tmp_path) / "iterations/1/tasks/T2.md"
                                         ).read_text()


def test_a_dead_runners_hung_agent_is_adopted_and_killed_at_its_timeout(
        tmp_path: Path) -> None:
    """A runner is SIGKILLed while its executor hangs; the next runner adopts that agent
    (a healthy one would keep its work) and the invocation timeout, counted from the
    agent's start, kills it; the task is replanned and done; no process is left."""
    (tmp_path / "hang.yaml").write_text("hang: true\n")
    project(tmp_path, "executor: {cli: demo, script: hang.yaml}",
            ralph="invocation_timeout: 3s", request="write it")
    proc = start(tmp_path, "ralph", "run", "s")

    def executor() -> set[int]:  # the hung executor's processes (the shim and the agent)
        found = set()
        for pid in set(processes_in(tmp_path)) - {proc.pid}:
            with contextlib.suppress(OSError):
                if b"hang.yaml" in Path(f"/proc/{pid}/cmdline").read_bytes():
                    found.add(pid)
        return found

    wait_until(lambda: "[/] T1" in progress(tmp_path) and bool(executor()),
               proc=proc, what="the hung executor")
    hung = executor()
    os.kill(proc.pid, signals.SIGKILL)  # the runner only: its agent hangs on
    proc.wait(timeout=10)
    assert hung <= set(processes_in(tmp_path))
    project_file = tmp_path / "interlock.yaml"
    project_file.write_text(project_file.read_text().replace(
        "executor: {cli: demo, script: hang.yaml}", "executor: {cli: demo}"))
    again = cli(tmp_path, "ralph", "run", "s")
    assert again.returncode == 0, again.stderr
    assert not hung & set(processes_in(tmp_path))
    assert "[F] T1: write it — timed out after 3s" in progress(tmp_path, 1)
    assert "[x] T1" in progress(tmp_path, 2)
    assert processes_in(tmp_path) == []


def test_a_blocked_executor_asks_the_questioner_and_waits_for_answers(tmp_path: Path) -> None:
    """A blocker that is not a scope change goes to the Questioner; its questions wait
    in REPLANNING for the human, whose answers reach the replanning Planner."""
    (tmp_path / "blocked.yaml").write_text(
        "answers:\n  - {status: blocked, blockers: [needs a database]}\n")
    project(tmp_path, "executor: {cli: demo, script: blocked.yaml}", request="store users")
    proc = start(tmp_path, "ralph", "run", "s")
    questions = session(tmp_path) / "iterations/2/questions.md"
    wait_until(questions.exists, proc=proc, what="the Questioner's questions")
    assert "What should be done about this blocker: needs a database?" in \
        questions.read_text()
    wait_until(lambda: "waiting_for" in meta(tmp_path), proc=proc, what="waiting for answers")
    assert state(tmp_path) == "REPLANNING" and proc.poll() is None
    shown = cli(tmp_path, "ralph", "status", "s").stdout
    assert "waiting for answers" in shown and "needs a database" in shown
    answered = cli(tmp_path, "ralph", "resume", "s", "--message", "use sqlite")
    assert answered.returncode == 0, answered.stderr
    code, err = finish(proc)
    assert code == 0, err
    assert "[F] T1: store users — needs a database" in progress(tmp_path, 1)
    assert "[x] T1: store users" in progress(tmp_path, 2)
    replanner = [p.read_text() for p in
                 sorted((session(tmp_path) / "iterations/2/invocations").glob("*-planner.md"))]
    assert replanner and "use sqlite" in replanner[0]
    assert "Answers: use sqlite" in questions.read_text()


def test_a_loop_that_makes_no_progress_is_stopped(tmp_path: Path) -> None:
    """A reviewer that always rejects: rejected, replanned, redone the same way; the
    states repeat, the engine sees no progress and stops the session (no limit set)."""
    (tmp_path / "reject.yaml").write_text("default: {verdict: retry}\n")
    project(tmp_path, "reviewer: {cli: demo, script: reject.yaml}",
            ralph="no_progress_limit: 3", request="write it")
    done = cli(tmp_path, "ralph", "run", "s")
    assert done.returncode == 3, done.stderr
    data = meta(tmp_path)
    assert data["stop"]["reason"] == "no_progress"
    assert "ralph run s" in done.stderr


def test_iterations_that_keep_failing_are_stopped_however_the_plan_is_worded(
        tmp_path: Path) -> None:
    """An Executor that fails every time (as a real claude denied its writes did) and a
    Planner that words the task anew at each replan: no task done, no file changed, so
    no progress, though no two iterations look alike (it once went round 54 of them)."""
    root, scripts = tmp_path / "project", tmp_path / "scripts"
    root.mkdir()
    scripts.mkdir()
    plans = [{"tasks": [{"id": "T1", "title": f"write it, take {n}"}]} for n in range(1, 13)]
    (scripts / "planner.yaml").write_text(yaml.safe_dump({"answers": plans}))
    (scripts / "executor.yaml").write_text(yaml.safe_dump(
        {"fail_times": 99, "exit_code": 2, "fail_message": "cannot write here"}))
    project(root, f"planner: {{cli: demo, script: {scripts / 'planner.yaml'}}}\n"
                  f"executor: {{cli: demo, script: {scripts / 'executor.yaml'}}}",
            ralph="no_progress_limit: 3", request="write it")
    done = cli(root, "ralph", "run", "s", "--max-iterations", "8")
    assert done.returncode == 3, done.stderr
    stop = meta(root)["stop"]
    assert stop["reason"] == "no_progress", stop
    assert "finished no task" in stop["detail"]
    assert meta(root)["limits"]["iterations_done"] < 3


def test_a_correction_staged_by_ralph_review_reaches_the_next_executor_once(
        tmp_path: Path) -> None:
    """A rejected task's report goes through the review menu (seed 000's retry path,
    scripted); the correction is staged under the task's node, the next Executor
    invocation of that task shows it in its prompt and takes it, exactly once."""
    (tmp_path / "reject.yaml").write_text("answers:\n  - {verdict: retry}\n")
    project(tmp_path, "reviewer: {cli: demo, script: reject.yaml}",
            ralph="max_iterations: 1", request="write the parser")
    first = cli(tmp_path, "ralph", "run", "s")
    assert first.returncode == 3, first.stderr  # the rejection, then the limit
    assert "[F] T1: write the parser — review: retry" in progress(tmp_path)
    shown = cli(tmp_path, "ralph", "status", "s").stdout
    assert "interlock ralph review s T1" in shown
    (tmp_path / "answers.yaml").write_text("[retry, A, A, A]\n")
    reviewed = cli(tmp_path, "ralph", "review", "s", "T1", "--answers", "answers.yaml")
    assert reviewed.returncode == 0, reviewed.stderr
    assert "staged: interlock staged s-T1" in reviewed.stderr
    assert cli(tmp_path, "staged", "s-T1").returncode == 0
    again = cli(tmp_path, "ralph", "run", "s", "--max-iterations", "2")
    assert again.returncode == 0, again.stderr
    executors = sorted((session(tmp_path) / "iterations/2/invocations").glob("*-executor.md"))
    prompt = executors[0].read_text()
    assert "Previous output was corrected by the player (action: retry" in prompt
    assert "Correction: Add a 'Performance' section" in prompt
    assert "[x] T1" in progress(tmp_path, 2)
    assert cli(tmp_path, "staged", "s-T1").returncode == 1  # taken: it is not there any more
    missing = cli(tmp_path, "ralph", "review", "s", "T9", "--answers", "answers.yaml")
    assert missing.returncode == 1 and "no report on task 'T9'" in missing.stderr
