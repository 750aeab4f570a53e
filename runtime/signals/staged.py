"""Staged corrections as a unit reads them (seed 000): which node a Ralph task's review
stages under, and the lines a unit's next prompt shows for a staged config.

>>> task_node("ralph-1a2b", "T3")
'ralph-1a2b-T3'
>>> print(staged_prompt({"action": "retry", "corrections": ["add benchmarks"],
...                      "poller_id": "poller-1"}), end="")
Previous output was corrected by the player (action: retry, poller poller-1).
Correction: add benchmarks
Restructure accordingly.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from interlock.runtime.signals.model import check_identifier


def task_node(session_id: str, task_id: str) -> str:
    """The node a Ralph task's review stages under: ``<session>-<task>``."""
    return check_identifier(f"{session_id}-{task_id}", "node")


def staged_prompt(config: Mapping[str, Any]) -> str:
    """The lines a unit's next prompt shows for a consumed staged config (seed 000)."""
    action = config.get("action", "retry")
    lines = [f"Previous output was corrected by the player (action: {action}, "
             f"poller {config.get('poller_id') or '-'})."]
    lines += [f"Correction: {c}" for c in config.get("corrections") or []]
    lines += [f"Additional context: {c}" for c in config.get("context_additions") or []]
    if action == "config":
        lines += [f"{key.title()}: {config[key]}" for key in ("model", "harness", "tools")
                  if config.get(key)]
    lines.append("Restructure accordingly.")
    return "\n".join(lines) + "\n"
