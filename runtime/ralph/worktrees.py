"""The git side of a parallel Ralph session: its integration branch, one worktree per task,
and the merges of the merge queue. git itself does the work (``git worktree``, ``git
merge``, ``git update-ref``); nothing here re-implements it.

* The **integration branch** ``ralph/<ID>`` starts at the project's ``HEAD`` the first time
  a batch forks; approved tasks merge into it, never into the user's checked-out branch.
  ``git merge ralph/<ID>`` takes the session's work.
* Each task of a parallel batch works in **its own worktree** on its own branch
  ``ralph/<ID>-<TASK>``, forked from the integration branch. Worktrees live in one flat
  folder, ``.ralph-sessions/worktrees/<ID>-<TASK>`` (the sessions folder is excluded in
  ``.git/info/exclude``, so nothing in the project's own tree sees them), never inside
  another worktree.
* A **merge** brings the integration branch into the task's branch, in the task's
  worktree, then moves the integration branch to the result with a compare-and-swap
  (``git update-ref NEW OLD``): the integration branch only ever fast-forwards, and a
  merge that another merge overtook is done again, never lost. A conflict leaves the
  merge in progress in the worktree for the Merger; :meth:`Worktrees.conclude` finishes
  it once no file is left unmerged. A merge a crash cut short is aborted and done again.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

SESSIONS_DIR = ".ralph-sessions"
WORKTREES_DIR = "worktrees"
GIT_TIMEOUT = 120.0
_CONFLICT_MARKER = re.compile(rb"^(<<<<<<< |>>>>>>> |=======$)", re.MULTILINE)


class GitError(Exception):
    """A git command failed; the message names it and what git said."""


class NotARepository(GitError):
    """The project folder is not inside a git work tree."""


@dataclass(frozen=True, slots=True)
class MergeResult:
    """How one merge went: ``merged`` (the integration branch now holds the task), or the
    files left in conflict (the merge stays in progress in the task's worktree)."""

    task: str
    merged: bool
    conflicts: tuple[str, ...] = ()
    head: str | None = None  # the integration branch's commit after the merge


@dataclass(frozen=True, slots=True)
class TaskWorktree:
    """One task's worktree as git lists it."""

    task: str
    branch: str
    path: Path
    merged: bool  # its branch is contained in the integration branch
    merging: bool  # a merge is in progress in it (a conflict waiting for the Merger)


def run_git(cwd: Path, *args: str, check: bool = True,
            env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """``git args`` in ``cwd``; :class:`GitError` naming the command when it fails and
    ``check``."""
    try:
        done = subprocess.run(["git", *args], cwd=cwd, capture_output=True, text=True,
                              timeout=GIT_TIMEOUT, check=False,
                              env={**os.environ, **(env or {}), "GIT_TERMINAL_PROMPT": "0"})
    except FileNotFoundError:
        raise GitError("git is not installed (it runs parallel Ralph batches)") from None
    except subprocess.TimeoutExpired:
        raise GitError(f"git {' '.join(args)} in {cwd} took over {GIT_TIMEOUT:g}s") from None
    if check and done.returncode != 0:
        said = (done.stderr or done.stdout).strip().splitlines()
        raise GitError(f"git {' '.join(args)} in {cwd} failed: "
                       f"{said[-1] if said else f'exit {done.returncode}'}")
    return done


def work_tree_of(folder: Path) -> Path | None:
    """The top of the git work tree ``folder`` is in, or None."""
    if shutil.which("git") is None:
        return None
    done = run_git(folder, "rev-parse", "--show-toplevel", check=False)
    return Path(done.stdout.strip()) if done.returncode == 0 else None


class Worktrees:
    """The integration branch and task worktrees of Ralph session ``session_id`` in the
    git repository whose main work tree is ``root`` (the project folder)."""

    def __init__(self, root: Path, session_id: str) -> None:
        top = work_tree_of(root)
        if top is None:
            raise NotARepository(
                f"{root} is not a git repository: parallel Ralph batches give each task "
                "its own git worktree. Run `git init && git add -A && git commit -m start` "
                "there, or set `ralph.isolation: none` in interlock.yaml to let the tasks "
                "share the folder knowingly")
        self.root = top
        self.session_id = session_id
        self.place = root / SESSIONS_DIR / WORKTREES_DIR
        self._author = {"GIT_AUTHOR_NAME": f"interlock ralph {session_id}",
                        "GIT_AUTHOR_EMAIL": "ralph@interlock.invalid",
                        "GIT_COMMITTER_NAME": f"interlock ralph {session_id}",
                        "GIT_COMMITTER_EMAIL": "ralph@interlock.invalid"}

    # -- names ----------------------------------------------------------------------------

    @property
    def integration(self) -> str:
        return f"ralph/{self.session_id}"

    def branch_of(self, task: str) -> str:
        return f"ralph/{self.session_id}-{task}"

    def path_of(self, task: str) -> Path:
        return self.place / f"{self.session_id}-{task}"

    # -- the integration branch -------------------------------------------------------------

    def head(self, ref: str | None = None) -> str | None:
        """The commit ``ref`` (the integration branch by default) points at, or None."""
        done = run_git(self.root, "rev-parse", "--verify", "--quiet",
                       f"refs/heads/{ref or self.integration}^{{commit}}", check=False)
        return done.stdout.strip() or None

    def ensure_integration(self) -> str:
        """The integration branch's commit, made at the project's ``HEAD`` when missing.
        Refuses a repository without a commit (there is nothing to fork from)."""
        head = self.head()
        if head is not None:
            return head
        start = run_git(self.root, "rev-parse", "--verify", "--quiet", "HEAD^{commit}",
                        check=False).stdout.strip()
        if not start:
            raise GitError(f"{self.root} has no commit yet: make one "
                           "(`git add -A && git commit -m start`) so the tasks can fork")
        run_git(self.root, "branch", self.integration, start)
        self._exclude_sessions()
        return start

    def _exclude_sessions(self) -> None:
        """``.ralph-sessions/`` in ``.git/info/exclude``: the sessions folder (and the
        worktrees in it) is never added by a ``git add -A`` in the project."""
        common = Path(run_git(self.root, "rev-parse", "--path-format=absolute",
                              "--git-common-dir").stdout.strip())
        exclude = common / "info" / "exclude"
        lines = exclude.read_text(encoding="utf-8").splitlines() if exclude.exists() else []
        if f"/{SESSIONS_DIR}/" not in lines:
            exclude.parent.mkdir(parents=True, exist_ok=True)
            with exclude.open("a", encoding="utf-8") as out:
                out.write(f"/{SESSIONS_DIR}/\n")

    # -- task worktrees ---------------------------------------------------------------------

    def fork(self, task: str) -> Path:
        """The task's worktree on its branch, forked from the integration branch; an
        existing one (a run that crashed) is reused as it is."""
        path, branch = self.path_of(task), self.branch_of(task)
        if (path / ".git").exists():
            return path
        run_git(self.root, "worktree", "prune")
        self.place.mkdir(parents=True, exist_ok=True)
        if self.head(branch) is not None:
            run_git(self.root, "worktree", "add", str(path), branch)
        else:
            run_git(self.root, "worktree", "add", "-b", branch, str(path),
                    self.ensure_integration())
        return path

    def commit_leftovers(self, task: str, message: str) -> bool:
        """What the task's agent left uncommitted in its worktree, committed on the task's
        branch in one commit; False when there was nothing."""
        path = self.path_of(task)
        run_git(path, "add", "-A")
        if run_git(path, "diff", "--cached", "--quiet", check=False).returncode == 0:
            return False
        run_git(path, "commit", "--no-verify", "-q", "-m", message, env=self._author)
        return True

    def diff(self, task: str) -> str:
        """The task's own changes: its branch against where it forked from the
        integration branch."""
        base = run_git(self.root, "merge-base", self.integration, self.branch_of(task)).stdout
        return run_git(self.root, "diff", base.strip(), self.branch_of(task)).stdout

    # -- the merge queue --------------------------------------------------------------------

    def merge(self, task: str) -> MergeResult:
        """Merge the task into the integration branch (the module docstring says how). A
        merge left in progress by a crash is aborted first and done again."""
        path = self.path_of(task)
        if self._merging(path):
            run_git(path, "merge", "--abort")
        while True:
            target = self.ensure_integration()
            if self.is_merged(task):
                return MergeResult(task, True, head=target)
            done = run_git(path, "merge", "--no-edit", "-q", self.integration,
                           check=False, env=self._author)
            if done.returncode != 0:
                conflicts = self.conflicts(task)
                if not conflicts:
                    raise GitError(f"git merge {self.integration} in {path} failed: "
                                   f"{(done.stderr or done.stdout).strip()}")
                return MergeResult(task, False, conflicts)
            head = self._advance(task, target)
            if head is not None:
                return MergeResult(task, True, head=head)

    def conclude(self, task: str) -> MergeResult:
        """After the Merger: the merge in progress committed once no file is unmerged and
        no conflict marker is left in the files that were in conflict, then the
        integration branch advanced; otherwise the files still in conflict."""
        path = self.path_of(task)
        if not self._merging(path):
            return self.merge(task)
        conflicted = self.conflicts(task)
        left = tuple(f for f in conflicted if _has_markers(path / f))
        if left:
            return MergeResult(task, False, left)
        run_git(path, "add", "-A")
        run_git(path, "commit", "--no-verify", "--no-edit", "-q", env=self._author)
        return self.merge(task)

    def abort(self, task: str) -> None:
        """Give up the merge in progress in the task's worktree (its branch as before)."""
        path = self.path_of(task)
        if self._merging(path):
            run_git(path, "merge", "--abort")

    def conflicts(self, task: str) -> tuple[str, ...]:
        """The files git holds unmerged in the task's worktree."""
        done = run_git(self.path_of(task), "diff", "--name-only", "--diff-filter=U",
                       check=False)
        return tuple(sorted(line for line in done.stdout.splitlines() if line))

    def _advance(self, task: str, old: str) -> str | None:
        """Move the integration branch from ``old`` to the task's head (a fast-forward:
        the task's head contains ``old``); None when it moved meanwhile."""
        new = run_git(self.path_of(task), "rev-parse", "HEAD").stdout.strip()
        done = run_git(self.root, "update-ref", "-m", f"ralph {self.session_id}: merge {task}",
                       f"refs/heads/{self.integration}", new, old, check=False)
        return new if done.returncode == 0 else None

    @staticmethod
    def _merging(path: Path) -> bool:
        done = run_git(path, "rev-parse", "--verify", "--quiet", "MERGE_HEAD", check=False)
        return done.returncode == 0

    # -- listing and cleaning ---------------------------------------------------------------

    def is_merged(self, task: str) -> bool:
        """The task's branch is contained in the integration branch (or is gone), and its
        worktree holds nothing uncommitted."""
        path = self.path_of(task)
        if path.exists() and run_git(path, "status", "--porcelain", check=False).stdout.strip():
            return False  # work left in the worktree, committed nowhere
        if self.head(self.branch_of(task)) is None:
            return True
        return run_git(self.root, "merge-base", "--is-ancestor", self.branch_of(task),
                       self.integration, check=False).returncode == 0

    def listed(self) -> list[TaskWorktree]:
        """The session's task worktrees, as ``git worktree list`` has them."""
        prefix = f"{self.session_id}-"
        found: list[TaskWorktree] = []
        for path in _worktree_paths(self.root):
            if path.parent != self.place.resolve() or not path.name.startswith(prefix):
                continue
            task = path.name[len(prefix):]
            found.append(TaskWorktree(task, self.branch_of(task), path, self.is_merged(task),
                                      self._merging(path)))
        return found

    def remove(self, task: str, *, force: bool = False) -> None:
        """Remove the task's worktree and branch; :class:`GitError` when its branch holds
        work the integration branch does not, unless ``force``."""
        if not force and not self.is_merged(task):
            raise GitError(f"task {task}'s branch {self.branch_of(task)} has work not merged "
                           f"into {self.integration}")
        path = self.path_of(task)
        if path.exists():
            run_git(self.root, "worktree", "remove", "--force", str(path))
        run_git(self.root, "worktree", "prune")
        if self.head(self.branch_of(task)) is not None:
            run_git(self.root, "branch", "-D", "-q", self.branch_of(task))

    def clean(self, *, force: bool = False, tasks: Sequence[str] | None = None) -> list[str]:
        """Remove the session's task worktrees and branches (only the merged ones unless
        ``force``); returns the tasks removed. The integration branch stays."""
        removed: list[str] = []
        for item in self.listed():
            if tasks is not None and item.task not in tasks:
                continue
            if item.merged or force:
                self.remove(item.task, force=force)
                removed.append(item.task)
        for branch in self._task_branches():  # a branch whose worktree is already gone
            task = branch[len(self.integration) + 1:]
            if (tasks is None or task in tasks) and (force or self.is_merged(task)):
                self.remove(task, force=force)
                if task not in removed:
                    removed.append(task)
        return removed

    def _task_branches(self) -> list[str]:
        done = run_git(self.root, "for-each-ref", "--format=%(refname:short)",
                       f"refs/heads/ralph/{self.session_id}-*")
        return [line for line in done.stdout.splitlines() if line]


def _worktree_paths(root: Path) -> list[Path]:
    done = run_git(root, "worktree", "list", "--porcelain")
    return [Path(line[len("worktree "):]).resolve()
            for line in done.stdout.splitlines() if line.startswith("worktree ")]


def _has_markers(path: Path) -> bool:
    try:
        return _CONFLICT_MARKER.search(path.read_bytes()) is not None
    except (FileNotFoundError, IsADirectoryError):
        return False
