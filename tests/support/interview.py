"""Helpers of the interview tests: the seed's path as answers, JSON lines, a clock front end."""

from __future__ import annotations

import json
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
