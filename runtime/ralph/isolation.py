"""Where each task of a parallel batch works, and how its work comes back: the orchestrator's
side of :mod:`~interlock.runtime.ralph.worktrees`.

With ``ralph.isolation: worktree`` (the default) each task gets its own git worktree and
branch, its leftovers are committed there after its Executor, and an approved task merges
into the session's integration branch; metadata.yaml's ``worktrees`` and ``integration``
say where each stands (``ralph status`` lists them). With ``isolation: none`` the tasks
share the project folder, knowingly: nothing is forked, committed or merged.
"""

from __future__ import annotations

import shutil
from collections.abc import Callable

from interlock.runtime.ralph.folder import RalphFolder, now_iso
from interlock.runtime.ralph.worktrees import MergeResult, Worktrees

#: Where an Executor working in a worktree stages its knowledge notes (inside its folder,
#: which its CLI may write); moved to the iteration's knowledge folder when it ends.
STAGED_IN_WORKTREE = ".ralph-knowledge"


class Isolation:
    """The worktrees of one Ralph session's parallel batches (see the module docstring)."""

    def __init__(self, folder: RalphFolder, *, worktrees: bool,
                 note: Callable[[str], None] | None = None) -> None:
        self.folder = folder
        self.isolated = worktrees
        self.note = note or (lambda _text: None)
        self._trees: Worktrees | None = None

    @property
    def trees(self) -> Worktrees:
        if self._trees is None:
            self._trees = Worktrees(self.folder.root, self.folder.id)
        return self._trees

    def check(self) -> None:
        """Refuse, before anything runs, a folder where the tasks cannot be isolated
        (:class:`~interlock.runtime.ralph.worktrees.NotARepository` says what to do)."""
        if self.isolated:
            _ = self.trees

    def fork(self, task: str) -> str:
        """The folder ``task``'s Executor works in ("" : the project folder)."""
        if not self.isolated:
            return ""
        path = self.trees.fork(task)
        self._record(task, "working")
        self.folder.update_metadata(integration=self.trees.integration)
        return str(path)

    def workdir(self, task: str) -> str:
        """Where ``task``'s work is (its worktree when it has one, else "")."""
        if not self.isolated:
            return ""
        path = self.trees.path_of(task)
        return str(path) if path.exists() else ""

    def settle(self, task: str, title: str, iteration: int) -> None:
        """The knowledge notes the Executor staged in its worktree moved to the
        iteration's knowledge folder; what else it left uncommitted there committed on
        the task's branch in one commit naming the task."""
        path = self.trees.path_of(task) if self.isolated else None
        if path is None or not path.exists():
            return
        staged = path / STAGED_IN_WORKTREE
        if staged.is_dir():
            target = self.folder.iteration(iteration) / "knowledge"
            target.mkdir(parents=True, exist_ok=True)
            for note in sorted(staged.iterdir()):
                if note.is_file():
                    note.replace(target / note.name)
            shutil.rmtree(staged, ignore_errors=True)
        self.trees.commit_leftovers(task, f"ralph {self.folder.id} {task}: {title}")

    def diff(self, task: str) -> str:
        """The task's own changes, for its Reviewer ("" without a worktree)."""
        if not self.isolated or not self.trees.path_of(task).exists():
            return ""
        return self.trees.diff(task)

    def merge(self, task: str) -> MergeResult:
        """Merge the approved task into the integration branch (its merge state recorded)."""
        if not self.isolated or not self.trees.path_of(task).exists():
            return MergeResult(task, True)
        return self._recorded(self.trees.merge(task))

    def conclude(self, task: str) -> MergeResult:
        """After the Merger: finish the merge, or say which files are still in conflict."""
        if not self.isolated:
            return MergeResult(task, True)
        return self._recorded(self.trees.conclude(task))

    def give_up(self, task: str, conflicts: list[str]) -> None:
        """The merge could not be resolved: rolled back, the task's branch kept as it was."""
        if self.isolated:
            self.trees.abort(task)
            self._record(task, "conflicted", conflicts)

    def finish(self) -> list[str]:
        """At the end of a completed session: the merged tasks' worktrees and branches
        removed (what holds unmerged work stays, listed)."""
        if not self.isolated or self.trees.head() is None:
            return []
        removed = self.trees.clean()
        self.folder.forget_worktrees(removed)
        return removed

    def _recorded(self, result: MergeResult) -> MergeResult:
        self._record(result.task, "merged" if result.merged else "merging",
                     list(result.conflicts))
        into = self.trees.integration
        self.note(f"{now_iso()}   merged {result.task} into {into}" if result.merged else
                  f"{now_iso()}   {result.task} conflicts with {into} in "
                  f"{', '.join(result.conflicts)}: for the Merger")
        return result

    def _record(self, task: str, state: str, conflicts: list[str] | None = None) -> None:
        line: dict[str, object] = {"branch": self.trees.branch_of(task),
                                   "path": str(self.trees.path_of(task)), "state": state}
        if conflicts:
            line["conflicts"] = conflicts
        self.folder.record_worktree(task, line)
