"""Reading JSON Lines event streams as printed so far (claude, codex, opencode).

A stream may be read while the agent still writes it: the last line may be cut off. A
line that does not parse as a JSON object is skipped (CLIs print the odd warning on
stdout), so reading never raises.

>>> [e["type"] for e in json_events('{"type": "a"}\\nnoise\\n{"type": "b"}\\n{"ty')]
['a', 'b']
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from typing import Any

from interlock.runtime.engine.agent_output import FailureReason

# What an HTTP status from a model API means for the caller (AgentOutput.reason).
_STATUS_REASONS: tuple[tuple[range, FailureReason], ...] = (
    (range(401, 402), "auth"), (range(403, 404), "permission_denied"),
    (range(404, 405), "not_found"), (range(408, 410), "unavailable"),
    (range(429, 430), "rate_limited"), (range(400, 500), "invalid_request"),
    (range(500, 600), "unavailable"))


def status_reason(status: int | None) -> FailureReason | None:
    """The failure reason of an API's HTTP ``status`` (None: not a failure status).

    >>> status_reason(401), status_reason(429), status_reason(529), status_reason(200)
    ('auth', 'rate_limited', 'unavailable', None)
    """
    if status is None:
        return None
    return next((reason for codes, reason in _STATUS_REASONS if status in codes), None)


def json_events(stdout: str) -> Iterator[dict[str, Any]]:
    """Every JSON object on its own line of ``stdout``, in order."""
    for line in stdout.splitlines():
        text = line.strip()
        if not text.startswith("{"):
            continue
        try:
            event = json.loads(text)
        except ValueError:
            continue
        if isinstance(event, dict):
            yield event


def json_document(stdout: str) -> dict[str, Any] | None:
    """The one JSON object ``stdout`` holds (text before its first ``{`` is skipped), or
    None while it is incomplete or absent."""
    start = stdout.find("{")
    if start < 0:
        return None
    try:
        value, _ = json.JSONDecoder().raw_decode(stdout, start)
    except ValueError:
        return None
    return value if isinstance(value, dict) else None


def mapping(value: Any) -> Mapping[str, Any]:
    """``value`` when it is a mapping, else an empty one (for walking untrusted JSON)."""
    return value if isinstance(value, Mapping) else {}


def count(value: Any) -> int | None:
    """A token count: an int (not a bool), else None."""
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def amount(value: Any) -> float | None:
    """A cost: a number (not a bool), else None."""
    if isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    return None


def add(total: int | None, value: int | None) -> int | None:
    """Sum counts where None means "not reported"."""
    if value is None:
        return total
    return value if total is None else total + value
