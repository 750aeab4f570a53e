"""The live view: rendered to text at a fixed width; followed until the session ends; and
once on a real pseudo-terminal."""

from __future__ import annotations

import io
import re
import sys
import textwrap
from pathlib import Path

import pexpect
from rich.console import Console

from interlock.runtime.ralph.watch import RalphStatus, follow, render_text

RUNNING = {
    "session_id": "260208-143000",
    "state": "EXECUTING_BATCH",
    "status": "running",
    "iteration": 2, "max_iterations": 5, "batch": 1, "batches": 2,
    "elapsed": 754.2,
    "tasks": [
        {"id": "task-1", "title": "parse the file", "marker": "x"},
        {"id": "task-2", "title": "write the report", "marker": "/"},
        {"id": "task-3", "title": "test it", "marker": "F", "note": "gates failed 2 time(s)"},
        {"id": "task-4", "title": "document it", "marker": " "},
    ],
    "agent": {"role": "executor", "task": "task-2", "elapsed": 83.4, "attempt": 2,
              "last_lines": ["line 1", "line 2", "line 3", "line 4", "line 5", "line 6"]},
    "signals": [{"type": "STEER", "message": "use bar, not foo", "target": "ALL",
                 "action": "passed to Ralph-Executor"},
                {"type": "INFO", "message": "target is Azure"}],
    "spend": {"input_tokens": 12000, "output_tokens": 3400, "cost_usd": 0.4321},
    "inbox": {"delivered": 3, "pending": 1},
    "some_future_field": True,
}


def _words(text: str) -> str:
    """Text with its runs of spaces as one (the columns' padding is not the point)."""
    return " ".join(text.split())


def test_render_shows_everything() -> None:
    text = render_text(RalphStatus.model_validate(RUNNING), width=90)
    flat = _words(text)
    for expected in ("ralph 260208-143000", "EXECUTING_BATCH", "running",
                     "2 of 5, batch 1/2", "12m34s", "12,000 in / 3,400 out tokens, $0.43",
                     "tasks: 1/4 done, 1 failed", "[x] task-1", "[/] task-2", "[F] task-3",
                     "[ ] task-4", "(gates failed 2 time(s))", "executor on task-2 1m23s",
                     "attempt 2", "STEER use bar, not foo -> passed to Ralph-Executor",
                     "INFO target is Azure", "(pending)",
                     "inbox 3 delivered, 1 not yet taken"):
        assert expected in flat, (expected, text)
    assert "line 1" not in text and "line 6" in text  # only the last five lines
    assert max(len(line) for line in text.splitlines()) <= 90


def test_render_a_parallel_batch_one_line_per_executor_and_the_merge_queue() -> None:
    status = RalphStatus.model_validate({
        **RUNNING, "integration": "ralph/260208-143000", "merge_queue": ["task-1", "task-3"],
        "workers": [{"role": "Ralph-Executor", "task": "task-2", "elapsed": 61,
                     "last_lines": ["a", "writing parser.py"]},
                    {"role": "Ralph-Executor", "task": "task-4", "elapsed": 5}]})
    flat = _words(render_text(status, width=90))
    for expected in ("running Executors (2)", "task-2 1m1s writing parser.py", "task-4 5s",
                     "merge queue: task-1 task-3 into ralph/260208-143000"):
        assert expected in flat, (expected, flat)
    assert "executor on task-2 1m23s" not in flat  # the workers replace the single agent


def test_render_a_stopped_session() -> None:
    status = RalphStatus.model_validate({
        "session_id": "s1", "state": "COMPLETE", "status": "stopped", "iteration": 3,
        "stop": {"reason": "max_iterations",
                 "detail": "reached max_iterations: 3 iterations done, the limit is 3"}})
    text = _words(render_text(status, width=100))
    assert "stopped max_iterations: reached max_iterations: 3 iterations done" in text
    assert "tokens not reported" in text and "running agent" not in text
    assert "inbox" not in text  # no inbox message reached it
    assert status.finished


def test_follow_until_the_session_ends() -> None:
    statuses = [
        RalphStatus.model_validate({**RUNNING, "iteration": n}) for n in (1, 2)
    ] + [RalphStatus.model_validate({"session_id": "260208-143000", "state": "COMPLETE",
                                     "status": "complete", "iteration": 3})]
    reads = iter(statuses)
    waits: list[float] = []
    out = io.StringIO()
    console = Console(file=out, width=100, force_terminal=True, color_system=None)
    last = follow(lambda: next(reads), 0.25, console=console, sleep=waits.append)
    assert last.status == "complete"
    assert waits == [0.25, 0.25]
    assert "COMPLETE" in out.getvalue()


def test_follow_stops_when_told() -> None:
    status = RalphStatus.model_validate(RUNNING)
    console = Console(file=io.StringIO(), width=80)
    assert follow(lambda: status, 1.0, until=lambda s: True, console=console,
                  sleep=lambda s: None) is status


SCRIPT = """\
from interlock.runtime.ralph.watch import RalphStatus, follow
status = RalphStatus.model_validate({
    "session_id": "demo-1", "state": "COMPLETE", "status": "stopped", "iteration": 4,
    "tasks": [{"id": "task-1", "title": "never finishes", "marker": "/"}],
    "stop": {"reason": "no_progress", "detail": "3 invocations changed nothing"}})
follow(lambda: status, 0.1)
print("WATCH-DONE")
"""


def test_on_a_real_terminal(tmp_path: Path) -> None:
    script = tmp_path / "watch_once.py"
    script.write_text(textwrap.dedent(SCRIPT))
    child = pexpect.spawn(sys.executable, [str(script)], dimensions=(30, 100),
                          encoding="utf-8", timeout=60, env={"TERM": "xterm", "PATH": "/usr/bin"})
    child.expect("WATCH-DONE")
    screen = _words(re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", child.before or ""))
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 0
    for expected in ("ralph demo-1", "COMPLETE", "no_progress: 3 invocations changed nothing",
                     "[/] task-1"):
        assert expected in screen, (expected, screen)
