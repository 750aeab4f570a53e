"""Helpers of the interview tests: the seed's path as answers, JSON lines, a clock front end."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

# menu -> retry -> category A -> narrow A -> echo Close -> D -> multi {B, C} -> echo Correct
SEED_ANSWERS: list[Any] = ["retry", "A", "A", "X", "D", ["B", "C"], "A"]
SEED_IDS = ["menu", "category", "narrow", "echo", "close", "combination", "echo"]


def json_lines(ids: list[str], answers: list[Any]) -> str:
    """The --json answers of a path: one line per answer."""
    return "".join(json.dumps({"id": i, "answer": a}) + "\n"
                   for i, a in zip(ids, answers, strict=True))


def without_time(staged: dict[str, Any] | None) -> dict[str, Any]:
    """A staged config minus resolved_at (the one field that differs between runs)."""
    assert staged is not None
    return {k: v for k, v in staged.items() if k != "resolved_at"}


FAKE_POLLER = Path(__file__).resolve().parent / "interview_agents" / "poller.py"


def use_fake_poller(folder: Path, *args: str) -> Path:
    """Configure the fake poller (tests/support/interview_agents/poller.py) as the `poller`
    agent of FOLDER/interlock.yaml; its calls are recorded in FOLDER/calls (returned)."""
    argv = [sys.executable, str(FAKE_POLLER), "--calls", str(folder / "calls"),
            "--held", str(folder / "held"), "--go", str(folder / "go"), *args]
    (folder / "interlock.yaml").write_text(
        f"agents:\n  poller: {{cli: command, command: {json.dumps(argv)}, cwd: {folder}}}\n")
    return folder / "calls"


def calls(path: Path) -> list[tuple[str, int]]:
    """The fake poller's calls: (stage, pid) in order."""
    if not path.exists():
        return []
    return [(stage, int(pid)) for stage, pid in
            (line.split() for line in path.read_text().splitlines())]


def gone(pid: int) -> bool:
    """No process ``pid`` is left (a zombie counts as gone)."""
    import psutil

    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True
