"""A parallel Ralph batch against the same batch one task at a time, in one run.

Four independent tasks in one batch, in a git repository; the Executor is the offline
demo agent, slowed to take about ``--task-seconds`` per task (its answer's lines paced by
``delay``). The script runs the same session twice, ``ralph run --parallel 1`` and
``--parallel 4``, and prints the batch's wall time in each (from the first Executor's
start to the last one's end, read from the store), one task's time, and the ratios:

    at 4 workers: batch time <= 1.5 x one task's time, and >= 2.5x faster than at 1

Run: ``python bench/ralph_parallel.py [--tasks 4] [--task-seconds 3]``
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
from pathlib import Path

from interlock.runtime.agents import role_agent, roles
from interlock.runtime.store import open_store

# the demo Executor's answer, whose lines ``delay`` paces (one gap fewer than lines)
ANSWER_LINES = len(role_agent.render(roles.execute("Task: T1 a task\nWorkdir: /w")[0], "yaml"))


def _run(root: Path, tasks: int, delay: float, parallel: int) -> tuple[float, float]:
    """One session at ``parallel``: (batch wall time, the longest task's time)."""
    root.mkdir()
    git = ["git", "-c", "user.name=bench", "-c", "user.email=bench@localhost"]
    subprocess.run([*git, "init", "-q", "-b", "main"], cwd=root, check=True)
    subprocess.run([*git, "commit", "-q", "--allow-empty", "-m", "start"], cwd=root,
                   check=True)
    roles = ("planner", "reviewer", "questioner", "librarian", "merger")
    (root / "interlock.yaml").write_text(
        f"ralph: {{batch_size: {tasks}}}\nagents:\n"
        f"  executor: {{cli: demo, delay: {delay:.3f}s}}\n"
        + "".join(f"  {role}: {{cli: demo}}\n" for role in roles))
    interlock = [sys.executable, "-m", "interlock.runtime.cli"]
    request = "; ".join(f"task {n}" for n in range(1, tasks + 1))
    subprocess.run([*interlock, "ralph", "init", "--id", "b", "--request", request],
                   cwd=root, check=True, capture_output=True)
    subprocess.run([*interlock, "signal", "b", "SKIP", "bench"], cwd=root, check=True,
                   capture_output=True)  # the knowledge it stages: no approval wait
    done = subprocess.run([*interlock, "ralph", "run", "b", "--parallel", str(parallel)],
                          cwd=root, capture_output=True, text=True)
    if done.returncode != 0:
        sys.stderr.write(done.stderr)
        raise SystemExit(1)
    store = open_store(None, root)
    try:
        rows = [r for r in store.invocations("b")
                if r.invoke in ("executor", "executors") and r.ended_at is not None]
    finally:
        store.close()
    assert len(rows) == tasks, rows
    batch = max(r.ended_at or 0 for r in rows) - min(r.started_at for r in rows)
    return batch, max((r.ended_at or 0) - r.started_at for r in rows)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=4)
    parser.add_argument("--task-seconds", type=float, default=3.0)
    args = parser.parse_args()
    delay = args.task_seconds / (ANSWER_LINES - 1)
    with tempfile.TemporaryDirectory() as tmp:
        serial, _ = _run(Path(tmp) / "serial", args.tasks, delay, 1)
        parallel, task = _run(Path(tmp) / "parallel", args.tasks, delay, args.tasks)
    print(f"{args.tasks} tasks of about {args.task_seconds:g}s (the longest: {task:.2f}s)")
    print(f"batch at --parallel 1: {serial:.2f}s   at --parallel {args.tasks}: "
          f"{parallel:.2f}s")
    within = parallel / task
    faster = serial / parallel
    print(f"at {args.tasks} workers: {within:.2f}x one task's time (goal <= 1.5): "
          f"{'OK' if within <= 1.5 else 'over'}; {faster:.2f}x faster than at 1 "
          f"(goal >= 2.5): {'OK' if faster >= 2.5 else 'under'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
