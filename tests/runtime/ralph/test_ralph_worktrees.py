"""The git side of parallel Ralph batches, against real git: worktrees, the integration
branch, merges that never lose work, conflicts left for the Merger, crash recovery, clean."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from interlock.runtime.ralph.worktrees import GitError, NotARepository, Worktrees


def git(cwd: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True,
                          text=True).stdout.strip()


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    root = tmp_path / "project"
    root.mkdir()
    git(root, "init", "-q", "-b", "main")
    git(root, "config", "user.email", "me@example.com")
    git(root, "config", "user.name", "Me")
    (root / "notes.txt").write_text("one\ntwo\nthree\n")
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "start")
    return root


def branches(root: Path) -> list[str]:
    return git(root, "for-each-ref", "--format=%(refname:short)", "refs/heads/ralph/").split()


def show(root: Path, ref: str, file: str) -> str:
    return git(root, "show", f"{ref}:{file}")


def test_a_folder_that_is_not_a_repository_is_refused_saying_what_to_do(
        tmp_path: Path) -> None:
    with pytest.raises(NotARepository, match=r"git init .*ralph.isolation: none"):
        Worktrees(tmp_path, "s1")


def test_tasks_fork_from_the_integration_branch_and_merge_one_after_another(
        repo: Path) -> None:
    trees = Worktrees(repo, "s1")
    one, two = trees.fork("T1"), trees.fork("T2")
    assert one == repo / ".ralph-sessions/worktrees/s1-T1"  # one flat place
    assert branches(repo) == ["ralph/s1", "ralph/s1-T1", "ralph/s1-T2"]
    (one / "a.txt").write_text("from T1\n")
    (two / "b.txt").write_text("from T2\n")
    assert trees.commit_leftovers("T1", "T1: task one") is True
    assert trees.commit_leftovers("T1", "T1: again") is False  # nothing left
    assert trees.commit_leftovers("T2", "T2: task two") is True
    assert "from T1" in trees.diff("T1") and "b.txt" not in trees.diff("T1")

    first = trees.merge("T1")
    second = trees.merge("T2")  # the integration branch moved: T2 is merged on top of it
    assert first.merged and second.merged
    assert show(repo, "ralph/s1", "a.txt") == "from T1"
    assert show(repo, "ralph/s1", "b.txt") == "from T2"
    assert git(repo, "rev-parse", "ralph/s1") == second.head
    assert git(repo, "branch", "--show-current") == "main"  # the user's branch untouched
    assert not (repo / "a.txt").exists()
    assert trees.merge("T1").head == second.head  # merging again changes nothing
    assert ".ralph-sessions" not in git(repo, "status", "--porcelain")  # excluded

    assert sorted(trees.clean()) == ["T1", "T2"]
    assert git(repo, "worktree", "list").count("\n") == 0  # only the main worktree
    assert branches(repo) == ["ralph/s1"]


def test_a_conflict_is_left_for_the_merger_and_concluded_when_resolved(repo: Path) -> None:
    trees = Worktrees(repo, "s1")
    for task, line in (("T1", "two by T1"), ("T2", "two by T2")):
        path = trees.fork(task)
        (path / "notes.txt").write_text(f"one\n{line}\nthree\n")
        trees.commit_leftovers(task, f"{task}: edit line two")
    assert trees.merge("T1").merged
    conflicted = trees.merge("T2")
    assert conflicted.merged is False and conflicted.conflicts == ("notes.txt",)
    assert trees.listed()[1].merging is True

    assert trees.conclude("T2").conflicts == ("notes.txt",)  # markers still there
    (trees.path_of("T2") / "notes.txt").write_text("one\ntwo by T1\ntwo by T2\nthree\n")
    done = trees.conclude("T2")
    assert done.merged
    assert show(repo, "ralph/s1", "notes.txt") == "one\ntwo by T1\ntwo by T2\nthree"


def test_unmerged_work_is_kept_unless_forced(repo: Path) -> None:
    trees = Worktrees(repo, "s1")
    (trees.fork("T0") / "draft.txt").write_text("not committed\n")
    assert trees.clean() == [] and trees.is_merged("T0") is False  # uncommitted work
    trees.remove("T0", force=True)
    (trees.fork("T1") / "a.txt").write_text("kept\n")
    trees.commit_leftovers("T1", "T1: work")
    assert trees.clean() == []
    with pytest.raises(GitError, match="has work not merged into ralph/s1"):
        trees.remove("T1")
    listed = trees.listed()
    assert [(t.task, t.merged) for t in listed] == [("T1", False)]
    assert trees.clean(force=True) == ["T1"]
    assert branches(repo) == ["ralph/s1"]


def test_a_merge_cut_short_is_aborted_and_done_again(repo: Path) -> None:
    trees = Worktrees(repo, "s1")
    for task, line in (("T1", "by T1"), ("T2", "by T2")):
        (trees.fork(task) / "notes.txt").write_text(f"{line}\n")
        trees.commit_leftovers(task, task)
    trees.merge("T1")
    assert trees.merge("T2").conflicts  # a run dies here, the merge in progress
    again = Worktrees(repo, "s1")  # the next run
    assert again.fork("T2") == trees.path_of("T2")  # the worktree is reused
    assert again.merge("T2").conflicts == ("notes.txt",)  # aborted, then merged again
    again.abort("T2")
    assert again.conflicts("T2") == ()
    assert show(repo, "ralph/s1-T2", "notes.txt") == "by T2"  # the task's work intact


def test_the_integration_branch_never_moves_backwards(repo: Path) -> None:
    trees = Worktrees(repo, "s1")
    (trees.fork("T1") / "a.txt").write_text("a\n")
    trees.commit_leftovers("T1", "T1")
    before = trees.ensure_integration()
    # someone commits onto the integration branch meanwhile: T1 merges on top of it
    git(repo, "worktree", "add", "-q", str(repo.parent / "side"), "ralph/s1")
    (repo.parent / "side/c.txt").write_text("c\n")
    git(repo.parent / "side", "add", "-A")
    git(repo.parent / "side", "commit", "-q", "-m", "side")
    result = trees.merge("T1")
    assert result.merged
    assert git(repo, "merge-base", "--is-ancestor", before, "ralph/s1") == ""
    assert show(repo, "ralph/s1", "c.txt") == "c" and show(repo, "ralph/s1", "a.txt") == "a"
