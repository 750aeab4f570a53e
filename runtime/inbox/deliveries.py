"""What reached a session from the inbox: which of its events are deliveries (the event
``inbox.message``, or a Ralph session's ``signal.INFO`` made from a message) and the count
``interlock status`` shows. Light on purpose: reading a session's status needs this, not
the poller that delivers (:mod:`.session`)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from interlock.runtime.store.base import QueuedEvent, Store

INBOX_EVENT = "inbox.message"
INFO_EVENT = "signal.INFO"
INBOX_SIGNAL_TAG = "inbox"  # how the id of a signal made from an inbox message ends


@dataclass(frozen=True, slots=True)
class InboxCount:
    """A session's inbox count: messages ``delivered`` to it (taken or still queued for
    it), and of those, ``pending``: queued for the session, not yet taken."""

    delivered: int
    pending: int

    def to_json(self) -> dict[str, int]:
        return {"delivered": self.delivered, "pending": self.pending}


def _is_delivery(event: str | None, data: Mapping[str, Any] | None) -> bool:
    if event == INBOX_EVENT:
        return True
    if event != INFO_EVENT or not isinstance(data, Mapping):
        return False
    signal_id = str(data.get("signal_id", ""))
    return signal_id.startswith("inbox-") or signal_id.rsplit("-", 1)[-1].startswith(
        INBOX_SIGNAL_TAG)


def may_take_inbox(spec_text: str) -> bool:
    """Whether a spec can listen for deliveries at all (``inbox.message``, ``signal.INFO``
    or a wildcard): a cheap test before reading a session's journal."""
    return any(word in spec_text for word in ("inbox", "signal", "*"))


def inbox_count(store: Store, session_id: str, queued: list[QueuedEvent] | None = None,
                spec_text: str | None = None) -> InboxCount | None:
    """The session's inbox count from its journal and queue; None when no inbox message
    ever reached it. ``queued`` is the session's event queue when the caller has it;
    with ``spec_text``, a spec that cannot take deliveries is answered without a read."""
    if spec_text is not None and not may_take_inbox(spec_text):
        return None
    items = queued if queued is not None else store.queued_events(session_id)
    pending = sum(_is_delivery(i.event, i.data) for i in items)
    taken = sum(e.kind in ("event", "rejected") and _is_delivery(e.event, e.data)
                for e in store.journal(session_id, -1))
    if not pending and not taken:
        return None
    return InboxCount(taken + pending, pending)
