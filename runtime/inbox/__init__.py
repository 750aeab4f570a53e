"""The shared inbox (seed 002): queued messages for agents, behind one adapter protocol.

``connect(url)`` opens a store by URL (SQLite, PostgreSQL, HTTP, ArangoDB); the function
API the CLI uses is in :mod:`interlock.runtime.inbox.api`; the idle-only poller is
:class:`interlock.runtime.inbox.poller.InboxPoller`.
(Its configuration, ``InboxConfigError`` and ``PollerConfig``, is
:mod:`interlock.runtime.config.inbox`.)
"""

from typing import TYPE_CHECKING

import lazy_loader

# Imported on first use: the CLI names the message statuses without loading the stores.
__getattr__, __dir__, __all__ = lazy_loader.attach(__name__, submod_attrs={
    "base": ["InboxAdapter"],
    "connection": ["connect"],
    "model": ["BadRequest", "Claim", "InboxError", "InboxUnavailable", "InvalidTransition",
              "Message", "MessageLease", "StaleLease", "Status", "StatusChange",
              "UnknownMessage"],
})

if TYPE_CHECKING:
    from interlock.runtime.config.inbox_store import InboxError as InboxError
    from interlock.runtime.inbox.base import InboxAdapter as InboxAdapter
    from interlock.runtime.inbox.connection import connect as connect
    from interlock.runtime.inbox.model import BadRequest as BadRequest
    from interlock.runtime.inbox.model import Claim as Claim
    from interlock.runtime.inbox.model import InboxUnavailable as InboxUnavailable
    from interlock.runtime.inbox.model import InvalidTransition as InvalidTransition
    from interlock.runtime.inbox.model import Message as Message
    from interlock.runtime.inbox.model import MessageLease as MessageLease
    from interlock.runtime.inbox.model import StaleLease as StaleLease
    from interlock.runtime.inbox.model import Status as Status
    from interlock.runtime.inbox.model import StatusChange as StatusChange
    from interlock.runtime.inbox.model import UnknownMessage as UnknownMessage
