"""The agents' inbox through the façade (seed 002): post, list and mark messages, switch
the idle-only poller on or off, set its interval, serve a store over HTTP, connect."""

from __future__ import annotations

from interlock.runtime.inbox.api import (
    list_messages,
    mark_message,
    poll_settings,
    post_message,
    serve_inbox,
    set_enabled,
    set_interval,
)
from interlock.runtime.inbox.config import InboxConfigError
from interlock.runtime.inbox.connection import connect as connect_inbox
from interlock.runtime.inbox.model import BadRequest, InboxError
from interlock.runtime.inbox.model import Message as InboxMessage
from interlock.runtime.inbox.model import Status as MessageStatus

__all__ = ["BadRequest", "InboxConfigError", "InboxError", "InboxMessage", "MessageStatus",
           "connect_inbox", "list_messages", "mark_message", "poll_settings", "post_message",
           "serve_inbox", "set_enabled", "set_interval"]
