"""Parallel Ralph batches from the command line: the worktrees a session leaves are listed by
``ralph status`` and removed by ``ralph clean``, which keeps unmerged work unless forced."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from interlock.runtime.ralph.folder import RalphFolder
from interlock.runtime.ralph.worktrees import Worktrees

from support.proc_helpers import cli_argv


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
