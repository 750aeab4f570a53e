"""The Ralph protocol between the orchestrator and its role agents (seed 004): the key
every answer of a role carries, and what a STEER signal asks for. The standard library
only: the adapters, the Ralph runner and the offline demo roles all read it."""

from __future__ import annotations

from typing import Any, Literal

SteerKind = Literal["invalidated", "additive", "scope"]

# The top-level key every answer of a role carries (a dispatcher's requiredField).
REQUIRED_FIELD: dict[str, str] = {
    "planner": "tasks", "executor": "status", "reviewer": "verdict",
    "questioner": "questions", "librarian": "mode", "merger": "status",
}


def review_verdict(answer: Any) -> str:
    """A Reviewer's verdict: ``accept`` unless its answer says otherwise (any other
    verdict sends the task back).

    >>> review_verdict({"verdict": "retry"}), review_verdict({}), review_verdict(None)
    ('retry', 'accept', 'accept')
    """
    return str(answer.get("verdict", "accept")) if isinstance(answer, dict) else "accept"


def classify_steer(message: str) -> SteerKind:
    """A STEER by its first word: ``redo:`` invalidates the work, ``scope:`` changes the
    scope, anything else adds to it."""
    words = message.strip().split(maxsplit=1)
    first = words[0].lower() if words else ""
    if first == "redo:":
        return "invalidated"
    if first == "scope:":
        return "scope"
    return "additive"
