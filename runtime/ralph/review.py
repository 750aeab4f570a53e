"""Review-then-mark-corrected: the human's review of the tasks a Reviewer rejected.

A task a Reviewer rejected is ``[F] review: <verdict>`` in progress.md until a later
iteration does it; its Executor's report is ``iterations/<N>/tasks/<task>.md``. The
human reviews that report with the review menu (seed 000), which may stage a correction
under the task's node (``<session>-<task>``): the next Executor invocation for the task
shows it in its prompt and takes it. When the session waits for those corrections
(``ralph.review_rejections``: ``awaiting_corrections``), each review that ended queues
``corrected`` for its task, so the session goes on once all are reviewed.

:func:`review_tasks` is that protocol; the review itself (a terminal menu, scripted
answers, a web form) is the caller's :data:`Reviewer`, which says whether the review
ended (True) or the human stopped it (False: nothing more is reviewed or marked).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from interlock.runtime.ralph.folder import RalphFolder
from interlock.runtime.signals.staged import task_node

EXECUTOR_UNIT = "Ralph-Executor"


class CorrectionQueue(Protocol):
    """What marking a task corrected needs of the store."""

    def staged_config(self, node: str) -> object | None: ...

    def enqueue(self, session_id: str, event: str, data: dict[str, object],
                at: float) -> object: ...


@dataclass(frozen=True, slots=True)
class TaskReview:
    """One rejected task to review: the Executor's ``report`` on it (None: the task has
    no report; ``missing`` says so and names those that have one), the ``node`` a
    correction is staged under, and the ``unit`` the review menu names."""

    session_id: str
    task: str
    node: str
    report: Path | None
    unit: str
    missing: str | None = None


@dataclass(frozen=True, slots=True)
class ReviewResult:
    """How one task's review went: ``stopped`` by the human (not marked), or ended, and
    then whether ``corrected`` was queued (only while the session waits for it)."""

    task: str
    reviewed: bool  # the reviewer ran on the task's report
    stopped: bool = False
    corrected: bool = False


#: The review of one task (called for a task without a report too, to say so): True
#: when it ended, False when the human stopped it.
Reviewer = Callable[[TaskReview], bool]


def rejected_tasks(folder: RalphFolder, n: int | None = None) -> list[str]:
    """Tasks a Reviewer rejected and no later iteration (up to ``n``, by default the
    current one) has done: what needs a review (``interlock ralph review ID TASK``)."""
    last = int(folder.metadata().get("iteration", 1)) if n is None else n
    rejected: dict[str, None] = {}
    for k in range(1, last + 1):
        for task in folder.progress(k):
            if str(task.reason or "").startswith("review:"):
                rejected[task.id] = None
            elif task.marker == "x":
                rejected.pop(task.id, None)
    return list(rejected)


def task_review(folder: RalphFolder, task: str) -> TaskReview:
    """What reviewing ``task`` opens: the Executor's report on it in the latest iteration
    that has one, and the node its correction is staged under."""
    reports = sorted(folder.path.glob(f"iterations/*/tasks/{task}.md"),
                     key=lambda p: int(p.parent.parent.name)
                     if p.parent.parent.name.isdigit() else 0)
    node = task_node(folder.id, task)
    unit = f"{EXECUTOR_UNIT} ({folder.id})"
    if reports:
        return TaskReview(folder.id, task, node, reports[-1], unit)
    known = sorted({p.stem for p in folder.path.glob("iterations/*/tasks/*.md")})
    hint = (f"; tasks with a report: {', '.join(known)}" if known
            else "; no task has a report yet")
    return TaskReview(folder.id, task, node, None, unit,
                      f"Ralph session {folder.id} has no report on task {task!r}{hint}")


def waits_for_corrections(folder: RalphFolder) -> bool:
    """Whether the session waits for the human's corrections (metadata.yaml)."""
    return str(folder.metadata().get("waiting_for") or "").startswith("corrections")


def mark_corrected(folder: RalphFolder, store: CorrectionQueue, task: str) -> bool:
    """The review of ``task`` ended: when the session waits for its correction, queue
    ``corrected`` (noting whether a correction was staged for its next Executor).
    Returns whether it was queued."""
    if not waits_for_corrections(folder):
        return False
    node = task_node(folder.id, task)
    staged = store.staged_config(node) is not None
    resolution = (f"correction staged (interlock staged {node})" if staged
                  else "reviewed, nothing staged")
    store.enqueue(folder.id, "corrected", {"task": task, "resolution": resolution},
                  time.time())
    return True


def review_tasks(folder: RalphFolder, store: CorrectionQueue, reviewer: Reviewer,
                 tasks: Iterable[str] | None = None) -> list[ReviewResult]:
    """Review ``tasks`` (by default every rejected task not done since:
    :func:`rejected_tasks`) one after another with ``reviewer``, and mark each corrected
    whose review ended. A task without a report has nothing to review (the reviewer is
    told: ``report`` None, ``missing`` why) and is marked all the same, so a waiting
    session goes on. Stops at the first review the human stopped."""
    results: list[ReviewResult] = []
    for task in rejected_tasks(folder) if tasks is None else tasks:
        item = task_review(folder, task)
        if not reviewer(item):
            results.append(ReviewResult(task, reviewed=item.report is not None,
                                        stopped=True))
            break
        results.append(ReviewResult(task, reviewed=item.report is not None,
                                    corrected=mark_corrected(folder, store, task)))
    return results


__all__ = ["CorrectionQueue", "ReviewResult", "Reviewer",
           "TaskReview", "mark_corrected", "rejected_tasks", "review_tasks", "task_review",
           "waits_for_corrections"]
