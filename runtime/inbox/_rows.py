"""What the SQL stores share: column order, row conversion, new ids and tokens, the rows
of a batch post, and the checks of limits and leases."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import Any

from interlock.runtime.inbox.model import LEASED, BadRequest, Message, Status, StatusChange

COLUMNS = ("id, type, sender, status, body, correlation_id, payload_ref, lease_until, "
           "owner, created_at, updated_at")
JOURNAL_COLUMNS = "message_id, at, before_status, after_status, actor, reason"
LEASED_NAMES = tuple(sorted(s.value for s in LEASED))


def new_id() -> str:
    return uuid.uuid4().hex


def new_token() -> str:
    return uuid.uuid4().hex


def message_from(row: Sequence[Any]) -> Message:
    return Message(id=row[0], type=row[1], sender=row[2], status=Status(row[3]), body=row[4],
                   correlation_id=row[5], payload_ref=row[6], lease_until=row[7],
                   owner=row[8], created_at=row[9], updated_at=row[10])


def entry_from(row: Sequence[Any]) -> StatusChange:
    return StatusChange(row[0], row[1], Status(row[2]), Status(row[3]), row[4], row[5])


def queue_rows(ids: Sequence[str], messages: Sequence[tuple[str, str, str]],
               now: float) -> list[tuple[str, str, str, str, float, float]]:
    """(id, type, sender, body, created_at, updated_at) for a batch post: created_at one
    microsecond apart, so that the batch keeps its order."""
    return [(i, t, s, b, now + n * 1e-6, now)
            for n, (i, (t, s, b)) in enumerate(zip(ids, messages, strict=True))]


def check_limit(limit: int) -> int:
    if not isinstance(limit, int) or isinstance(limit, bool) or limit < 1:
        raise BadRequest(f"limit must be a positive integer, got {limit!r}")
    return limit


def check_lease(seconds: float) -> float:
    if isinstance(seconds, bool) or not isinstance(seconds, int | float) or not seconds > 0:
        raise BadRequest(f"lease_seconds must be a positive number, got {seconds!r}")
    return float(seconds)
