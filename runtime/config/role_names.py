"""The five Ralph roles by name (seed 004); the standard library only, so the demo role
agent, a process started for every call, can check its ``--role`` cheaply."""

from __future__ import annotations

from typing import Literal

ROLES: tuple[str, ...] = ("planner", "executor", "reviewer", "questioner", "librarian")
# The roles that change files: their agents run with ``permissions: edit`` unless set.
EDITING_ROLES: frozenset[str] = frozenset({"executor", "librarian"})
Role = Literal["planner", "executor", "reviewer", "questioner", "librarian"]
