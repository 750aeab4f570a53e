"""The adapter protocol every inbox store implements (seed 002's ``IDatabaseAdapter``).

Times are epoch seconds from the adapter's clock (the server's, for HTTP). Settings are
the poller's ``/poll on|off|interval``, kept in the store so that the CLI and a running
poller agree: ``enabled`` (bool) and ``interval`` (seconds).
"""

from __future__ import annotations

import builtins
from typing import Any, Protocol, runtime_checkable

from interlock.runtime.inbox.model import (
    BadRequest,
    Claim,
    Message,
    MessageLease,
    Status,
    StatusChange,
)

DEFAULT_LEASE = 300.0
DEFAULT_TIMEOUT = 10.0  # seconds per request to a remote store
SETTING_KEYS = ("enabled", "interval")


@runtime_checkable
class InboxAdapter(Protocol):
    """A message store. Every method raises InboxUnavailable when the store cannot be
    reached, and the other InboxError kinds for requests it refuses."""

    def post(self, type: str, sender: str, body: str = "", *,
             correlation_id: str | None = None, payload_ref: str | None = None) -> str:
        """Queue a message; its id."""
        ...

    def get(self, message_id: str) -> Message:
        """One message, or UnknownMessage."""
        ...

    def list(self, status: Status | None = None, limit: int = 1000) -> builtins.list[Message]:
        """Messages (of one status), oldest first."""
        ...

    def fetch_queued(self, limit: int = 100) -> builtins.list[Message]:
        """Queued messages and those whose lease expired, oldest first."""
        ...

    def claim(self, message_id: str, owner: str,
              lease_seconds: float = DEFAULT_LEASE) -> MessageLease | None:
        """Take the message: status in_progress, a new token and lease. None when someone
        else holds a live lease or the message is finished."""
        ...

    def claim_next(self, owner: str, lease_seconds: float = DEFAULT_LEASE,
                   limit: int = 1) -> builtins.list[Claim]:
        """Fetch and claim in one step: up to ``limit`` fetchable messages, those whose
        lease expired first, then the oldest queued ones, skipping any another worker is
        claiming at this moment (the worker loop's call; PostgreSQL: one ``FOR UPDATE
        SKIP LOCKED`` statement)."""
        ...

    def update_status(self, message_id: str, status: Status, token: str | None = None, *,
                      reason: str | None = None) -> Message:
        """Move the message on; fenced by ``token`` (StaleLease), or the operator's when
        no token is given. InvalidTransition for a move the rules forbid."""
        ...

    def reclaim_expired(self) -> int:
        """Return every message whose lease ran out to ``queued``; how many."""
        ...

    def journal(self, message_id: str) -> builtins.list[StatusChange]:
        """The message's status changes, in order."""
        ...

    def settings(self) -> dict[str, Any]:
        """The stored poller settings (keys absent when never set)."""
        ...

    def set_setting(self, key: str, value: Any) -> None:
        """Store one poller setting (``enabled`` or ``interval``)."""
        ...

    def close(self) -> None: ...


def check_setting(key: str, value: Any) -> None:
    """BadRequest unless ``key`` is a known setting with a value of its type."""
    if key == "enabled":
        if not isinstance(value, bool):
            raise BadRequest(f"setting enabled must be true or false, got {value!r}")
    elif key == "interval":
        if isinstance(value, bool) or not isinstance(value, int | float) or not value > 0:
            raise BadRequest(f"setting interval must be a positive number of seconds, "
                             f"got {value!r}")
    else:
        raise BadRequest(f"unknown setting {key!r} (one of: {', '.join(SETTING_KEYS)})")
