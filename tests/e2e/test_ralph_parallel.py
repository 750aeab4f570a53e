"""Parallel Ralph batches from the command line: the worktrees a session leaves are listed by
``ralph status`` and removed by ``ralph clean``, which keeps unmerged work unless forced."""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from interlock.runtime import InterlockError
from interlock.runtime import sync as runtime
from interlock.runtime.ralph.folder import RalphFolder
from interlock.runtime.ralph.worktrees import Worktrees

from support.proc_helpers import cli_argv
from support.ralph_e2e import (
    finish,
    meta,
    session,
    start,
    wait_until,
)


@pytest.fixture(autouse=True)
def _no_leftovers(tmp_path: Path) -> Iterator[None]:
    """Whatever a test started under its folder (a runner a failed assertion left, its
    agents) is stopped when it ends."""
    yield
    for pid in _agents_under(tmp_path):
        with contextlib.suppress(OSError):
            os.kill(pid, signal.SIGKILL)


def git(cwd: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True,
                          text=True).stdout.strip()


def cli(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(cli_argv(*args), cwd=cwd, capture_output=True, text=True,
                          timeout=60)


def _repo(root: Path) -> Path:
    root.mkdir()
    git(root, "init", "-q", "-b", "main")
    git(root, "-c", "user.name=Me", "-c", "user.email=me@example.com", "commit", "-q",
        "--allow-empty", "-m", "start")
    return root


def test_status_lists_the_worktrees_and_clean_keeps_unmerged_work_unless_forced(
        tmp_path: Path) -> None:
    root = _repo(tmp_path / "project")
    assert cli(root, "ralph", "init", "--id", "s", "--request", "x").returncode == 0
    trees = Worktrees(root, "s")
    for task in ("T1", "T2"):
        (trees.fork(task) / f"{task}.md").write_text(f"{task}\n")
        trees.commit_leftovers(task, f"{task}: work")
    assert trees.merge("T1").merged
    folder = RalphFolder(root, "s")
    folder.update_metadata(integration="ralph/s", worktrees={
        t: {"branch": trees.branch_of(t), "path": str(trees.path_of(t)),
            "state": "merged" if t == "T1" else "working"} for t in ("T1", "T2")})

    shown = cli(root, "ralph", "status", "s")
    assert shown.returncode == 0, shown.stderr
    assert f"worktree T2: {trees.path_of('T2')} on ralph/s-T2, working" in shown.stdout
    assert "take it with: git merge ralph/s" in shown.stdout
    as_json = json.loads(cli(root, "ralph", "status", "s", "--json").stdout)
    assert [t["task"] for t in as_json["worktrees"]] == ["T1", "T2"]
    assert as_json["integration"] == "ralph/s"

    kept = cli(root, "ralph", "clean", "s")
    assert kept.returncode == 1 and "Traceback" not in kept.stderr
    assert f"unmerged work kept in 1 worktree(s): {trees.path_of('T2')}" in kept.stderr
    assert not trees.path_of("T1").exists() and trees.path_of("T2").exists()
    assert list(folder.metadata()["worktrees"]) == ["T2"]

    forced = cli(root, "ralph", "clean", "s", "--force")
    assert forced.returncode == 0, forced.stderr
    assert "removed 1 worktree(s): T2" in forced.stderr
    assert git(root, "worktree", "list").count("\n") == 0
    assert git(root, "for-each-ref", "--format=%(refname:short)", "refs/heads/ralph/") == \
        "ralph/s"
    assert "worktrees" not in folder.metadata()


def test_clean_outside_a_git_repository_says_so(tmp_path: Path) -> None:
    assert cli(tmp_path, "ralph", "init", "--id", "s", "--request", "x").returncode == 0
    done = cli(tmp_path, "ralph", "clean", "s")
    assert done.returncode == 1 and "is not a git repository" in done.stderr
    assert "Traceback" not in done.stderr


# -- whole sessions -----------------------------------------------------------------------

EDIT_SHARED = """\
prompt=$(cat)
task=$(printf '%s\\n' "$prompt" | sed -n 's/^Task: \\([^ ]*\\).*/\\1/p' | head -1)
workdir=$(printf '%s\\n' "$prompt" | sed -n 's/^Workdir: //p' | head -1)
printf 'first line\\nchanged by %s\\nlast line\\n' "$task" > "$workdir/shared.txt"
printf 'status: done\\nreport: %s edited shared.txt in %s\\n' "$task" "$PWD"
"""


def _session(root: Path, request: str, agents: str = "", ralph: str = "") -> None:
    """A git repository with interlock.yaml (``agents`` lines for roles; the rest demo)
    and Ralph session ``s``."""
    _repo(root)
    (root / "shared.txt").write_text("first line\nsecond line\nlast line\n")
    git(root, "add", "-A")
    git(root, "-c", "user.name=Me", "-c", "user.email=me@example.com", "commit", "-q", "-m",
        "shared")
    named = {line.split(":", 1)[0].strip() for line in agents.splitlines() if line}
    lines = [*(line for line in agents.splitlines() if line),
             *(f"{role}: {{cli: demo}}" for role in
               ("planner", "executor", "reviewer", "questioner", "librarian", "merger")
               if role not in named)]
    (root / "interlock.yaml").write_text(
        f"ralph:\n  knowledge_approval_timeout: 100ms\n  {ralph}\nagents:\n"
        + "".join(f"  {line}\n" for line in lines))
    assert cli(root, "ralph", "init", "--id", "s", "--request", request).returncode == 0


def _branches(root: Path) -> list[str]:
    return git(root, "for-each-ref", "--format=%(refname:short)", "refs/heads/ralph/").split()


def _executor_spans(root: Path) -> list[tuple[float, float]]:
    from interlock.runtime.store import open_store

    store = open_store(None, root)
    try:
        return [(r.started_at, r.ended_at or r.started_at)
                for r in store.invocations("s") if r.invoke == "executors"]
    finally:
        store.close()


def test_a_parallel_batch_runs_at_once_and_every_task_reaches_the_integration_branch(
        tmp_path: Path) -> None:
    root = tmp_path / "project"
    _session(root, "parse; lex; emit; test", agents="executor: {cli: demo, delay: 300ms}")
    done = cli(root, "ralph", "run", "s", "--parallel", "4")
    assert done.returncode == 0, done.stderr
    assert "Ralph session s completed" in done.stderr
    spans = _executor_spans(root)
    assert len(spans) == 4
    assert max(start for start, _ in spans) < min(end for _, end in spans)  # all at once
    for task in ("T1", "T2", "T3", "T4"):
        assert git(root, "show", f"ralph/s:{task}.md").startswith(f"# {task}:")
        assert not (root / f"{task}.md").exists()  # the user's branch is untouched
    assert git(root, "branch", "--show-current") == "main"
    assert git(root, "worktree", "list").count("\n") == 0  # merged worktrees removed
    assert _branches(root) == ["ralph/s"]
    status = json.loads(cli(root, "ralph", "status", "s", "--json").stdout)
    assert [t["marker"] for t in status["tasks"]] == ["x", "x", "x", "x"]
    assert status["integration"] == "ralph/s" and status["worktrees"] == []
    prompts = (root / ".ralph-sessions/s/iterations/1/invocations")
    reviews = sorted(p.read_text() for p in prompts.glob("*-reviewer.md"))
    assert all("The task's own changes" in text for text in reviews)  # its own diff


def test_two_tasks_editing_the_same_lines_are_merged_by_the_merger(tmp_path: Path) -> None:
    root = tmp_path / "project"
    root.parent.mkdir(exist_ok=True)
    (tmp_path / "edit.sh").write_text(EDIT_SHARED)
    _session(root, "first edit; second edit",
             agents=f"executor: {{cli: command, command: [bash, {tmp_path / 'edit.sh'}]}}")
    done = cli(root, "ralph", "run", "s", "--parallel", "2")
    assert done.returncode == 0, done.stderr
    merged = git(root, "show", "ralph/s:shared.txt")
    assert "changed by T1" in merged and "changed by T2" in merged
    assert "<<<<<<<" not in merged
    assert list((root / ".ralph-sessions/s/iterations/1/invocations").glob("*-merger.md"))
    report = (root / ".ralph-sessions/s/iterations/1/tasks/T1.md").read_text()
    assert "in " + str(root / ".ralph-sessions/worktrees/s-T1") in report  # its cwd
    assert _branches(root) == ["ralph/s"]


def test_a_conflict_the_merger_cannot_resolve_fails_the_task_and_asks_the_human(
        tmp_path: Path) -> None:
    root = tmp_path / "project"
    root.parent.mkdir(exist_ok=True)
    (tmp_path / "edit.sh").write_text(EDIT_SHARED)
    (tmp_path / "giveup.sh").write_text(
        "cat > /dev/null\nprintf 'status: blocked\\nreport: cannot\\nblockers: [both]\\n'\n")
    _session(root, "first edit; second edit",
             agents=f"executor: {{cli: command, command: [bash, {tmp_path / 'edit.sh'}]}}\n"
                    f"merger: {{cli: command, command: [bash, {tmp_path / 'giveup.sh'}]}}",
             )
    proc = start(root, "ralph", "run", "s", "--parallel", "2")
    questions = session(root) / "iterations/2/questions.md"
    wait_until(lambda: "waiting_for" in meta(root), proc=proc, what="the human's answers")
    assert "T2: merge conflict: shared.txt" in questions.read_text()  # the question asked
    progress = (root / ".ralph-sessions/s/iterations/1/progress.md").read_text()
    assert "[F] T2: second edit — merge conflict: shared.txt" in progress
    status = json.loads(cli(root, "ralph", "status", "s", "--json").stdout)
    assert status["status"] != "completed" and proc.poll() is None
    trees = {t["task"]: t for t in status["worktrees"]}
    assert trees["T2"]["state"] == "conflicted" and trees["T2"]["conflicts"] == ["shared.txt"]
    assert git(root, "show", "ralph/s-T2:shared.txt").count("changed by T2") == 1  # kept
    assert "changed by T2" not in git(root, "show", "ralph/s:shared.txt")
    proc.send_signal(signal.SIGINT)
    code, _ = finish(proc)
    assert code == 130


# -- signals and crashes while a parallel batch runs -----------------------------------------

HELD = """\
prompt=$(cat)
task=$(printf '%s\\n' "$prompt" | sed -n 's/^Task: \\([^ ]*\\).*/\\1/p' | head -1)
touch "{marks}/running-$task"
while [ ! -f "{marks}/go" ]; do sleep 0.05; done
printf 'status: done\\nreport: %s done\\n' "$task"
"""


def _held(tmp_path: Path, root: Path, request: str) -> None:
    """A session whose Executors each wait, once at work, for ``tmp_path/go``."""
    (tmp_path / "held.sh").write_text(HELD.format(marks=tmp_path))
    _session(root, request,
             agents=f"executor: {{cli: command, command: [bash, {tmp_path / 'held.sh'}]}}")


def _three_at_work(tmp_path: Path) -> tuple[Path, subprocess.Popen[str]]:
    """``ralph run --parallel 3`` of three held tasks, once their Executors are at work."""
    root = tmp_path / "project"
    _held(tmp_path, root, "one; two; three")
    proc = start(root, "ralph", "run", "s", "--parallel", "3")
    wait_until(lambda: all((tmp_path / f"running-{task}").exists()
                           for task in ("T1", "T2", "T3")),
               proc=proc, what="three Executors at work")
    return root, proc


def _agents_under(root: Path) -> list[int]:
    """Live processes working in ``root`` or a folder under it (a task's worktree)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        with contextlib.suppress(OSError):
            cwd = (entry / "cwd").readlink()
            state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
            if (cwd == root or root in cwd.parents) and state != "Z":
                found.append(int(entry.name))
    return found


def _records(root: Path) -> dict[str, str]:
    """Each Executor invocation record by its task."""
    found = {}
    for path in sorted((session(root) / "iterations/1/invocations").glob("*-executor.md")):
        text = path.read_text()
        task = text.split(" on ", 1)[1].split("\n", 1)[0].strip()
        found[task] = text
    return found


def test_a_steer_reaches_every_running_executor_once_and_a_task_signal_only_its_own(
        tmp_path: Path) -> None:
    from interlock import runtime

    root, proc = _three_at_work(tmp_path)
    shown = json.loads(cli(root, "ralph", "status", "s", "--json").stdout)
    assert sorted(w["task"] for w in shown["workers"]) == ["T1", "T2", "T3"]  # watch's lines
    runtime.post_signal("s", "INFO", "only for T2", target="Ralph-Executor", task="T2",
                        root=root)
    runtime.post_signal("s", "STEER", "prefer small functions", target="Ralph-Executor",
                        root=root)
    wait_until(lambda: len(_processed(root)) == 2, proc=proc, what="both signals taken")
    (tmp_path / "go").touch()
    code, err = finish(proc)
    assert code == 0, err
    records = _records(root)
    assert sorted(records) == ["T1", "T2", "T3"]
    for task, record in records.items():
        assert record.count("STEER: prefer small functions") == 1, task  # once each
        assert ("INFO: only for T2" in record) == (task == "T2"), task
    steer = next(s for s in _processed(root) if s["type"] == "STEER")
    assert steer["handling_metadata"]["handled_by"] == "Ralph-Executor"
    assert "(each of 3: T1, T2, T3)" in steer["handling_metadata"]["action_taken"]


def test_abort_stops_every_executor_and_keeps_their_worktrees_for_clean(
        tmp_path: Path) -> None:
    from interlock import runtime

    root, proc = _three_at_work(tmp_path)
    assert len(_agents_under(root / ".ralph-sessions/worktrees")) >= 3  # in their worktrees
    runtime.post_signal("s", "ABORT", "stop now", root=root)
    code, err = finish(proc)
    assert code == 1, err
    assert _agents_under(root) == []  # every Executor's process group stopped
    progress = (session(root) / "iterations/1/progress.md").read_text()
    for line in ("T1: one", "T2: two", "T3: three"):
        assert f"[F] {line} — Aborted by signal" in progress
    shown = cli(root, "ralph", "status", "s").stdout
    for task in ("T1", "T2", "T3"):
        assert f"worktree {task}: " in shown  # kept (no revert) and listed
    cleaned = cli(root, "ralph", "clean", "s", "--force")  # aborted work is not merged
    assert cleaned.returncode == 0, cleaned.stderr
    assert git(root, "worktree", "list").count("\n") == 0
    assert _branches(root) == ["ralph/s"]


def _adopted(root: Path, session_id: str) -> bool:
    """Whether the journal of ``session_id`` says an invocation was adopted (read in this
    process: a CLI call each time round would cost a third of a second of CPU)."""
    try:
        entries = runtime.log(session_id, root=root)
    except InterlockError:  # not created yet
        return False
    return any(entry.kind == "adopted" for entry in entries)


def test_a_runner_killed_mid_batch_is_resumed_with_each_task_done_once(
        tmp_path: Path) -> None:
    root, proc = _three_at_work(tmp_path)
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=30)
    again = start(root, "ralph", "run", "s", "--parallel", "3")
    wait_until(lambda: _adopted(root, "s.0002-executors"), proc=again,
               what="the new runner adopting the Executors")
    (tmp_path / "go").touch()
    code, err = finish(again)
    assert code == 0, err
    assert sorted(_records(root)) == ["T1", "T2", "T3"]  # one Executor invocation each
    assert git(root, "worktree", "list").count("\n") == 0
    assert _branches(root) == ["ralph/s"]
    assert _agents_under(root) == []


def _processed(root: Path) -> list[dict[str, object]]:
    import yaml

    folder = session(root) / "signals/processed"
    return [yaml.safe_load(p.read_text()) for p in sorted(folder.glob("signal.*.yaml"))]


def test_pause_lets_every_executor_finish_its_step_then_resume_goes_on(
        tmp_path: Path) -> None:
    from interlock import runtime

    root, proc = _three_at_work(tmp_path)
    runtime.post_signal("s", "PAUSE", "lunch", root=root)
    wait_until(lambda: len(_processed(root)) == 1, proc=proc, what="the PAUSE taken")
    assert "(each of 3: T1, T2, T3)" in \
        _processed(root)[0]["handling_metadata"]["action_taken"]
    (tmp_path / "go").touch()  # each Executor's call ends: its step is done
    wait_until(lambda: meta(root).get("orchestrator", {}).get("state") == "PAUSED",
               proc=proc, what="the session PAUSED")
    progress = (session(root) / "iterations/1/progress.md").read_text()
    assert "[F]" not in progress  # none cut short: done, or to run again after resume
    assert proc.poll() is None  # a paused session waits for resume
    resumed = cli(root, "ralph", "resume", "s", "--message", "back")
    assert resumed.returncode == 0, resumed.stderr
    code, err = finish(proc)
    assert code == 0, err
    assert _branches(root) == ["ralph/s"]
    assert meta(root)["status"] == "completed"
    progress = (session(root) / "iterations/1/progress.md").read_text()
    assert all(f"[x] {task}" in progress for task in ("T1", "T2", "T3"))


def test_parallel_outside_git_is_refused_unless_isolation_is_none(tmp_path: Path) -> None:
    (tmp_path / "interlock.yaml").write_text("agents:\n" + "".join(
        f"  {role}: {{cli: demo}}\n" for role in
        ("planner", "executor", "reviewer", "questioner", "librarian", "merger")))
    assert cli(tmp_path, "ralph", "init", "--id", "s", "--request", "a; b").returncode == 0
    refused = cli(tmp_path, "ralph", "run", "s", "--parallel", "2")
    assert refused.returncode == 2 and "Traceback" not in refused.stderr
    assert "is not a git repository" in refused.stderr
    assert "ralph.isolation: none" in refused.stderr
    assert not (tmp_path / ".interlock/state.db").exists()  # nothing ran
    (tmp_path / "interlock.yaml").write_text(
        (tmp_path / "interlock.yaml").read_text() + "ralph: {parallel: 2}\n")
    also = cli(tmp_path, "run", "ralph_orchestrator", "--session", "r1")  # the same assembly
    assert also.returncode == 1 and "is not a git repository" in also.stderr
    assert "Traceback" not in also.stderr
    (tmp_path / "interlock.yaml").write_text(
        (tmp_path / "interlock.yaml").read_text().replace("ralph: {parallel: 2}\n", ""))
    with (tmp_path / "interlock.yaml").open("a") as project:
        project.write("ralph: {isolation: none, knowledge_approval_timeout: 100ms}\n")
    shared = cli(tmp_path, "ralph", "run", "s", "--parallel", "2")
    assert shared.returncode == 0, shared.stderr
    assert (tmp_path / "T1.md").exists() and (tmp_path / "T2.md").exists()  # one folder
    assert len(_executor_spans(tmp_path)) == 2
