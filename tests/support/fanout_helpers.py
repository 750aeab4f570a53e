"""Fan-out tests (``invoke: each:``): a spec that runs the fan-out child fixture once per
item, and what its children recorded (how many ran at once, which started)."""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from interlock.runtime.store.base import Store

from support.invoke_helpers import open_runner, run_until

CHILD = Path(__file__).resolve().parent / "invoke" / "fanout_child.py"


def fanout_spec(folder: Path, items: Sequence[Any], *, concurrency: int | str | None = 2,
                args: Sequence[str] = (), on_resume: str = "adopt",
                each: str = "{{ context.tasks }}") -> str:
    """working (fans `work` out over ``items``: the child fixture, recording its times in
    ``folder/times`` and its pid in ``folder/pids``, with ``args``) -> passed (on
    ``done.invoke.work.all``, its data kept as ``outcome``) | left (on ``leave``); each
    child's done/error event is noted in ``seen``."""
    argv = [sys.executable, str(CHILD), str(folder / "times"), "{{ item }}", "{{ index }}",
            "--pids", str(folder / "pids"), *args]
    limit = "" if concurrency is None else f"\n      concurrency: {json.dumps(concurrency)}"
    return f"""
machine: fanning
initial: working
context:
  tasks: {{type: list, default: {json.dumps(list(items))}}}
  parallel: {{type: int, default: 2}}
  outcome: {{type: dict, default: {{}}}}
  seen: {{type: list, default: []}}
  ticks: {{type: int, default: 0}}
states:
  working:
    invoke:
      id: work
      command: {json.dumps(argv)}
      prompt: "Do {{{{ item }}}} ({{{{ index }}}} of {{{{ context.tasks | length }}}})"
      each: {json.dumps(each)}{limit}
      timeout: 30s
      on_resume: {on_resume}
    on:
      done.invoke.work.all: {{target: passed, actions: [keep]}}
      done.invoke.work: {{actions: [note]}}
      error.invoke.work: {{actions: [note]}}
      leave: left
  passed: {{type: final}}
  left: {{type: final}}
"""


def times(folder: Path) -> dict[int, list[tuple[float, float]]]:
    """What the children recorded as they ended: index -> [(start, end)] (system-wide
    monotonic seconds; a child that ran twice has two)."""
    found: dict[int, list[tuple[float, float]]] = {}
    path = folder / "times"
    for line in path.read_text().split("\n") if path.exists() else []:
        if line.strip():
            index, start, end = line.split()
            found.setdefault(int(index), []).append((float(start), float(end)))
    return found


def most_at_once(folder: Path) -> int:
    """The most children that ran at the same moment, from their recorded times."""
    edges = sorted((t, step) for runs in times(folder).values() for start, end in runs
                   for t, step in ((start, 1), (end, -1)))
    running = peak = 0
    for _, step in edges:  # an end sorts before a start at the same instant
        running += step
        peak = max(peak, running)
    return peak


def resume_fanout(store: Store, folder: Path) -> None:
    """Resume session ``s1`` of :func:`fanout_spec` (what a crash or a Ctrl-C left is
    settled as it opens), let the children waiting for ``folder/release`` go on, run it
    to ``passed``."""
    runner = open_runner(store, None, folder)  # type: ignore[arg-type]
    (folder / "release").touch()
    try:
        run_until(runner, lambda: runner.session.is_final)
    finally:
        runner.close()
    assert runner.session.active == ("passed",)
