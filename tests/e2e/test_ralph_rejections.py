"""A Reviewer's rejection opens the review menu (seed 000) for the task's report before
the Planner replans it (``ralph.review_rejections``): in ``ralph run``'s own terminal (a
real pty, keys pressed), or, with ``wait`` and no terminal, through ``interlock ralph
review``; the next Executor of the task shows the staged correction and takes it once.
Real processes throughout: the CLI, the demo agents, the poller."""

from __future__ import annotations

import os
from pathlib import Path

import pexpect

from support.pty_screen import COLUMNS, ROWS, Recorder, keys, screen_of
from support.ralph_e2e import (
    INTERLOCK,
    cli,
    finish,
    invocations,
    meta,
    progress,
    project,
    session,
    start,
    state,
    wait_until,
)

CORRECTED = "Previous output was corrected by the player (action: retry"


def rejecting_project(root: Path, ralph: str = "") -> None:
    """A reviewer that rejects its first review (then accepts), one task."""
    (root / "reject.yaml").write_text("answers:\n  - {verdict: retry}\n")
    project(root, "reviewer: {cli: demo, script: reject.yaml}", ralph=ralph,
            request="write the parser")


def ralph_run_in_pty(root: Path, steps: list[tuple[str, str]]) -> tuple[int | None, str]:
    """``interlock ralph run s`` in a real pty, keys pressed as the patterns show up; its
    exit status and the screen at the end."""
    env = {**os.environ, "TERM": "xterm-256color", "COLUMNS": str(COLUMNS),
           "LINES": str(ROWS)}
    child = pexpect.spawn(INTERLOCK[0], [*INTERLOCK[1:], "ralph", "run", "s"], cwd=str(root),
                          env=env, dimensions=(ROWS, COLUMNS), encoding="utf-8", timeout=90)
    recorder = Recorder()
    child.logfile_read = recorder
    try:
        keys(child, recorder, steps)
        child.expect(pexpect.EOF)
    finally:
        child.close(force=True)
    return child.exitstatus, "\n".join(screen_of(recorder))


def test_a_rejection_opens_the_menu_in_ralph_runs_terminal(tmp_path: Path) -> None:
    """auto (the default) with a terminal: the menu opens in ralph run's pty on the
    rejected task's report; the seed's retry path by keys stages a correction; the run
    goes on, and iteration 2's Executor shows it and takes it."""
    rejecting_project(tmp_path)
    code, text = ralph_run_in_pty(tmp_path, [
        (r"The Reviewer rejected T1", ""),
        (r"^\? What should happen", "2"),    # Retry
        (r"^\? What's wrong", "A"),
        (r"^\? What's missing", "A"),
        (r"^\? Is this what you meant", "A"),  # Correct: staged
    ])
    assert code == 0, text
    assert "T1: write the parser" in text and "Traceback" not in text
    assert "[F] T1: write the parser — review: retry" in progress(tmp_path, 1)
    assert "[x] T1" in progress(tmp_path, 2)
    executor = invocations(tmp_path, "executor", 2)[0]
    assert CORRECTED in executor
    corrections = (session(tmp_path) / "iterations/2/corrections.md").read_text()
    assert "- T1: correction staged (interlock staged s-T1)" in corrections
    assert cli(tmp_path, "staged", "s-T1").returncode == 1  # taken by that Executor


def test_esc_in_the_menu_stops_the_run_and_the_next_run_asks_again(tmp_path: Path) -> None:
    """Esc in the menu stops ralph run (exit 130, saved, waiting for the correction);
    ralph run again opens the menu again; Accept there goes on with nothing staged."""
    rejecting_project(tmp_path)
    code, text = ralph_run_in_pty(tmp_path, [(r"^\? What should happen", "\x1b")])
    assert code == 130, text
    assert "waiting_for" in meta(tmp_path) and state(tmp_path) == "REPLANNING"
    assert "corrections of T1" in cli(tmp_path, "ralph", "status", "s").stdout
    code, text = ralph_run_in_pty(tmp_path, [(r"^\? What should happen", "\r")])  # Accept
    assert code == 0, text
    assert "[x] T1" in progress(tmp_path, 2)
    assert CORRECTED not in invocations(tmp_path, "executor", 2)[0]
    corrections = (session(tmp_path) / "iterations/2/corrections.md").read_text()
    assert "- T1: reviewed, nothing staged" in corrections


def test_without_a_terminal_auto_goes_on_unattended(tmp_path: Path) -> None:
    """auto without a terminal: nothing waits; the rejected task is replanned and done.
    A session a terminal run left waiting goes on too when run without one."""
    rejecting_project(tmp_path)
    done = cli(tmp_path, "ralph", "run", "s")
    assert done.returncode == 0, done.stderr
    assert "[x] T1" in progress(tmp_path, 2)
    assert not (session(tmp_path) / "iterations/2/corrections.md").exists()
    left = tmp_path / "left"
    left.mkdir()
    rejecting_project(left)
    code, text = ralph_run_in_pty(left, [(r"^\? What should happen", "\x1b")])
    assert code == 130, text
    done = cli(left, "ralph", "run", "s")
    assert done.returncode == 0, done.stderr
    corrections = (session(left) / "iterations/2/corrections.md").read_text()
    assert "- T1: none (no terminal to review in)" in corrections


def test_wait_holds_the_replanning_for_ralph_review_from_elsewhere(tmp_path: Path) -> None:
    """wait: with no terminal the session waits in REPLANNING; `interlock ralph review ID
    TASK --answers` (another process) stages the correction and the run goes on."""
    rejecting_project(tmp_path, ralph="review_rejections: wait")
    proc = start(tmp_path, "ralph", "run", "s")
    wait_until(lambda: str(meta(tmp_path).get("waiting_for", "")).startswith(
        "corrections of T1") and state(tmp_path) == "REPLANNING",  # written by the runner
        proc=proc, what="waiting for the correction of T1")                # just after the step
    assert proc.poll() is None
    (tmp_path / "answers.yaml").write_text("[retry, A, A, A]\n")
    reviewed = cli(tmp_path, "ralph", "review", "s", "T1", "--answers", "answers.yaml")
    assert reviewed.returncode == 0, reviewed.stderr
    code, err = finish(proc)
    assert code == 0, err
    assert "waiting for corrections of T1: interlock ralph review s TASK" in err
    assert CORRECTED in invocations(tmp_path, "executor", 2)[0]
    assert "waiting_for" not in meta(tmp_path)


def test_wait_goes_on_without_a_correction_on_ralph_resume(tmp_path: Path) -> None:
    rejecting_project(tmp_path, ralph="review_rejections: wait")
    proc = start(tmp_path, "ralph", "run", "s")
    wait_until(lambda: "waiting_for" in meta(tmp_path),
               proc=proc, what="waiting for the correction")
    resumed = cli(tmp_path, "ralph", "resume", "s")
    assert resumed.returncode == 0, resumed.stderr
    code, err = finish(proc)
    assert code == 0, err
    corrections = (session(tmp_path) / "iterations/2/corrections.md").read_text()
    assert "- T1: none (ralph resume)" in corrections
    assert "[x] T1" in progress(tmp_path, 2)


def test_a_bad_review_rejections_value_is_located(tmp_path: Path) -> None:
    rejecting_project(tmp_path, ralph="review_rejections: sometimes")
    done = cli(tmp_path, "ralph", "run", "s")
    assert done.returncode == 2, done.stderr
    assert "interlock.yaml:3:22" in done.stderr and "review_rejections" in done.stderr
