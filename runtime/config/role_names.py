"""The Ralph roles by name: seed 004's five, and the Merger that resolves a parallel
batch's merge conflicts (issue 19); the standard library only, so the demo role agent, a
process started for every call, can check its ``--role`` cheaply."""

from __future__ import annotations

from typing import Literal

ROLES: tuple[str, ...] = ("planner", "executor", "reviewer", "questioner", "librarian")
# The Merger works only when a batch's tasks run at once (ralph.parallel > 1): a project's
# agents: needs it then, and only then.
MERGER = "merger"
ALL_ROLES: tuple[str, ...] = (*ROLES, MERGER)
# The roles that change files: their agents run with ``permissions: edit`` unless set.
EDITING_ROLES: frozenset[str] = frozenset({"executor", "librarian", "merger"})
Role = Literal["planner", "executor", "reviewer", "questioner", "librarian", "merger"]
