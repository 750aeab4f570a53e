"""The shared inbox (seed 002): queued messages for agents, behind one adapter protocol.

``connect(url)`` opens a store by URL (SQLite, PostgreSQL, HTTP, ArangoDB); the function
API the CLI uses is in :mod:`interlock.runtime.inbox.api`; the idle-only poller is
:class:`interlock.runtime.inbox.poller.InboxPoller`.
"""

from interlock.runtime.inbox.base import InboxAdapter
from interlock.runtime.inbox.config import InboxConfigError, PollerConfig
from interlock.runtime.inbox.connection import connect
from interlock.runtime.inbox.model import (
    BadRequest,
    Claim,
    InboxError,
    InboxUnavailable,
    InvalidTransition,
    JournalEntry,
    Lease,
    Message,
    StaleLease,
    Status,
    UnknownMessage,
)

__all__ = [
    "BadRequest", "Claim", "InboxAdapter", "InboxConfigError", "InboxError",
    "InboxUnavailable", "InvalidTransition", "JournalEntry", "Lease", "Message",
    "PollerConfig", "StaleLease", "Status", "UnknownMessage", "connect",
]
