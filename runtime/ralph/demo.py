"""The main job, offline: three Ralph sessions with the demo agents and scripted signals.

Session 1 plans four tasks (two batches). During batch 1 a ``STEER scope: ...`` makes the
Executor block its task, which leads to REPLANNING and iteration 2; an INFO given at the
same time shows in every later prompt; in iteration 2 a PAUSE stops the session, which
is resumed with a message; at KNOWLEDGE_APPROVAL an APPROVE promotes the staged knowledge
to ``.docs/``. Session 2 is ended by ABORT while its Executor runs. Session 3, in a git
repository of its own, runs a batch of two tasks at once (``parallel: 2``), each in its
git worktree, and merges both into its integration branch ``ralph/demo-3``. Everything
happens in a fresh folder, and the demo prints a timeline and the orchestrator diagram
with the path each session took.
"""

from __future__ import annotations

import asyncio
import subprocess
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

from rich.console import Console
from rich.markup import escape

from interlock.machines import load
from interlock.machines.ir import build_ir
from interlock.machines.render import render_mermaid
from interlock.runtime.config.ralph import RalphConfig
from interlock.runtime.ralph.folder import RalphFolder
from interlock.runtime.ralph.runner import RalphResult, RalphRun, spec_path
from interlock.runtime.signals.writer import post_signal
from interlock.runtime.store import open_store

PROJECT = """\
# Demo agents (offline), one per role; the executor prints its answer a line every 120 ms.
# A real agent instead: planner: {cli: claude, model: sonnet} (docs/agents.md).
agents:
  planner: {cli: demo}
  executor: {cli: demo, delay: 120ms}
  reviewer: {cli: demo}
  questioner: {cli: demo}
  librarian: {cli: demo}
ralph:
  knowledge_approval_timeout: 30s
"""
REQUEST_1 = "parse the input; validate the records\nwrite the report; publish the summary"
REQUEST_2 = "migrate the database; update the docs"
REQUEST_3 = "write the lexer; write the parser"


class Timeline:
    """Timestamped lines, printed as they come."""

    def __init__(self, console: Console) -> None:
        self.console = console
        self.start = time.monotonic()
        self.lines: list[str] = []

    def __call__(self, text: str) -> None:
        if text[:4].isdigit() and "Z " in text[:26]:
            text = text.split("Z ", 1)[1]
        line = f"{time.monotonic() - self.start:6.2f}s  {text}"
        self.lines.append(line)
        self.console.print(escape(line))


async def _wait(check: Callable[[], bool], what: str, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise TimeoutError(f"the demo waited {timeout:g}s for {what}")
        await asyncio.sleep(0.02)


def _state(folder: RalphFolder) -> str:
    return str((folder.metadata().get("orchestrator") or {}).get("state"))


def _in_progress(folder: RalphFolder, n: int) -> bool:
    return any(t.marker == "/" for t in folder.progress(n))


async def _session_one(root: Path, note: Timeline) -> RalphResult:
    folder = RalphFolder(root, "demo-1")
    folder.create(REQUEST_1)
    note("session demo-1: " + " | ".join(REQUEST_1.splitlines()))
    run = RalphRun(root, "demo-1", RalphConfig(knowledge_approval_timeout=30), on_note=note)
    running = asyncio.create_task(run.run())

    def signal(kind: str, message: str | None = None) -> None:
        post_signal(folder.path, kind, message)
        note(f">> human: {kind} {message or ''}")

    await _wait(lambda: _in_progress(folder, 1), "T1 in progress")
    signal("INFO", "the report is read on phones")
    signal("STEER", "scope: parse the input as a stream")
    await _wait(lambda: folder.metadata().get("iteration") == 2 and _in_progress(folder, 2),
                "iteration 2 at work")
    signal("PAUSE", "lunch")
    await _wait(lambda: _state(folder) == "PAUSED", "PAUSED")
    store = open_store(None, root)
    try:
        store.enqueue("demo-1", "resume", {"message": "back from lunch"}, time.time())
    finally:
        store.close()
    note(">> human: interlock ralph resume demo-1 --message 'back from lunch'")
    await _wait(lambda: _state(folder) == "KNOWLEDGE_APPROVAL", "KNOWLEDGE_APPROVAL")
    signal("APPROVE", "promote all")
    return await asyncio.wait_for(running, 60)


async def _session_two(root: Path, note: Timeline) -> RalphResult:
    folder = RalphFolder(root, "demo-2")
    folder.create(REQUEST_2)
    note("session demo-2: " + REQUEST_2)
    run = RalphRun(root, "demo-2", RalphConfig(), on_note=note)
    running = asyncio.create_task(run.run())
    await _wait(lambda: _in_progress(folder, 1), "T1 in progress")
    post_signal(folder.path, "ABORT", "wrong database")
    note(">> human: ABORT wrong database")
    return await asyncio.wait_for(running, 30)


async def _session_three(root: Path, note: Timeline) -> RalphResult:
    """A batch of two at once, in a git repository: two worktrees, two merges."""
    project = root / "parallel"
    project.mkdir()
    (project / "interlock.yaml").write_text(PROJECT.replace(
        "  librarian: {cli: demo}\n", "  librarian: {cli: demo}\n  merger: {cli: demo}\n"),
        encoding="utf-8")
    _git(project, "init", "-q", "-b", "main")
    _git(project, "add", "-A")
    _git(project, "commit", "-q", "-m", "the project before the session")
    folder = RalphFolder(project, "demo-3")
    folder.create(REQUEST_3)
    post_signal(folder.path, "SKIP", "no knowledge to promote this time")
    note(f"session demo-3 (parallel: 2, in the git repository {project}): {REQUEST_3}")
    run = RalphRun(project, "demo-3", RalphConfig(parallel=2, knowledge_approval_timeout=30),
                   on_note=note)
    return await asyncio.wait_for(run.run(), 60)


def _git(cwd: Path, *args: str) -> str:
    return subprocess.run(["git", "-c", "user.name=interlock demo", "-c",
                           "user.email=demo@localhost", *args], cwd=cwd, check=True,
                          capture_output=True, text=True).stdout


def _visited(root: Path, session_id: str) -> frozenset[str]:
    store = open_store(None, root)
    try:
        return frozenset(s for e in store.journal(session_id, -1) for s in e.after)
    finally:
        store.close()


def run_ralph_demo(workdir: Path, console: Console) -> bool:
    """Run both sessions in a fresh folder under ``workdir``; True when both ended as
    scripted (completed, then aborted)."""
    root = workdir / f"ralph-{datetime.now(UTC):%y%m%d-%H%M%S}"
    root.mkdir(parents=True)
    (root / "interlock.yaml").write_text(PROJECT, encoding="utf-8")
    root = root.resolve()
    console.print(f"[bold]Ralph[/]: three offline sessions in {root}\n")
    note = Timeline(console)
    first = asyncio.run(_session_one(root, note))
    second = asyncio.run(_session_two(root, note))
    third = asyncio.run(_session_three(root, note))
    ir = build_ir(load(spec_path()))
    for ident in ("demo-1", "demo-2"):
        text = render_mermaid(ir, _visited(root, ident))
        (root / f"{ident}-path.md").write_text(
            f"# {ident}: the orchestrator's path (visited states filled)\n\n```mermaid\n"
            f"{text}```\n", encoding="utf-8")
    (root / "timeline.txt").write_text("\n".join(note.lines) + "\n", encoding="utf-8")
    one = RalphFolder(root, "demo-1")
    console.print(f"\ndemo-1: {first.outcome}; iteration 2 progress:")
    console.print(escape((one.iteration(2) / "progress.md").read_text(encoding="utf-8")))
    console.print(f"demo-2: {second.outcome}; progress:")
    two = RalphFolder(root, "demo-2")
    console.print(escape((two.iteration(1) / "progress.md").read_text(encoding="utf-8")))
    console.print(f"Promoted knowledge: {sorted(p.name for p in (root / '.docs').glob('*'))}")
    project = root / "parallel"
    console.print(f"demo-3: {third.outcome}; both tasks ran at once and merged into "
                  f"ralph/demo-3 (take it with: git merge ralph/demo-3):")
    console.print(escape(_git(project, "log", "--oneline", "--graph", "ralph/demo-3")))
    worktrees = _git(project, "worktree", "list").count("\n")
    console.print(f"worktrees left: {worktrees - 1}; branches: "
                  f"{_git(project, 'branch', '--list', 'ralph/*').split()}")
    console.print(f"Timeline: {root / 'timeline.txt'}; diagrams with the path taken: "
                  f"{root / 'demo-1-path.md'}, {root / 'demo-2-path.md'}")
    return (first.outcome == "completed" and second.outcome == "aborted"
            and third.outcome == "completed")
