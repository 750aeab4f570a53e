"""The session folder edited from many threads at once, as the Executors of a parallel
batch do (each child session steps in its own thread): no edit of progress.md or
metadata.yaml is lost."""

from __future__ import annotations

import threading
from pathlib import Path

from interlock.runtime.ralph.folder import RalphFolder, Task

TASKS = [f"T{i}" for i in range(1, 9)]


def _all_at_once(work: list[threading.Thread]) -> None:
    for thread in work:
        thread.start()
    for thread in work:
        thread.join()


def test_tasks_marked_at_once_keep_every_mark(tmp_path: Path) -> None:
    folder = RalphFolder(tmp_path, "s")
    folder.open_iteration(1)
    folder.write_progress(1, [Task(t, f"task {t}") for t in TASKS])
    start = threading.Barrier(len(TASKS))

    def executor(task: str) -> None:
        start.wait()
        for _ in range(3):
            folder.mark(1, task, "/")
        folder.mark(1, task, "x")

    _all_at_once([threading.Thread(target=executor, args=(t,)) for t in TASKS])
    assert [(t.id, t.marker) for t in folder.progress(1)] == [(t, "x") for t in TASKS]


def test_worktrees_recorded_at_once_are_all_kept(tmp_path: Path) -> None:
    folder = RalphFolder(tmp_path, "s")
    start = threading.Barrier(len(TASKS))

    def record(task: str) -> None:
        start.wait()
        for i in range(3):
            folder.record_worktree(task, {"branch": f"ralph/s-{task}", "round": i})

    _all_at_once([threading.Thread(target=record, args=(t,)) for t in TASKS])
    trees = folder.metadata()["worktrees"]
    assert sorted(trees) == TASKS
    assert all(line["round"] == 2 for line in trees.values())
