"""The agents' inbox through the façade (seed 002): post, list and mark messages, switch
the idle-only poller on or off, set its interval, serve a store over HTTP, connect.

The message model loads with this module; the stores and their configuration (pydantic)
on first use of a call, so the CLI names the statuses without loading them."""

from __future__ import annotations

import importlib
from pathlib import Path
from typing import TYPE_CHECKING, Any

from interlock.runtime.config.inbox_store import InboxError
from interlock.runtime.inbox.model import BadRequest
from interlock.runtime.inbox.model import Message as InboxMessage
from interlock.runtime.inbox.model import Status as MessageStatus

# façade name -> (module under interlock.runtime.inbox, its name there)
_LAZY: dict[str, tuple[str, str]] = {
    **{name: ("api", name) for name in (
        "list_messages", "mark_message", "poll_settings", "post_message", "serve_inbox",
        "set_enabled", "set_interval")},
    "InboxConfigError": ("interlock.runtime.config.inbox", "InboxConfigError"),
    "connect_inbox": ("connection", "connect"),
}

if TYPE_CHECKING:
    from interlock.runtime.config.inbox_store import InboxConfigError as InboxConfigError
    from interlock.runtime.inbox.api import list_messages as list_messages
    from interlock.runtime.inbox.api import mark_message as mark_message
    from interlock.runtime.inbox.api import poll_settings as poll_settings
    from interlock.runtime.inbox.api import post_message as post_message
    from interlock.runtime.inbox.api import serve_inbox as serve_inbox
    from interlock.runtime.inbox.api import set_enabled as set_enabled
    from interlock.runtime.inbox.api import set_interval as set_interval
    from interlock.runtime.inbox.connection import connect as connect_inbox

__all__ = ["BadRequest", "InboxConfigError", "InboxError", "InboxMessage", "MessageStatus",
           "connect_inbox", "list_messages", "mark_message", "poll_settings", "post_message",
           "project_inbox", "serve_inbox", "set_enabled", "set_interval"]


def project_inbox(*, root: Path | str | None = None) -> str | None:
    """The inbox store of the project at ``root`` (default: the working folder) when its
    ``interlock.yaml`` has an ``inbox:`` section (its sessions poll that inbox): the
    section's ``store``, else the default SQLite file; None without the section.
    InboxConfigError for a bad section."""
    from interlock.machines import SpecError
    from interlock.runtime.config.inbox import load_poller_config
    from interlock.runtime.config.inbox_store import InboxConfigError, parse_store_url

    base = Path(root) if root is not None else Path.cwd()
    try:
        config = load_poller_config(start=base)
    except SpecError as exc:
        raise InboxConfigError(str(exc)) from None
    if config is None:
        return None
    where = parse_store_url(config.store, base)
    return f"sqlite://{where.path}" if where.path is not None else where.url


def __getattr__(name: str) -> Any:
    where = _LAZY.get(name)
    if where is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    home = where[0] if "." in where[0] else f"interlock.runtime.inbox.{where[0]}"
    value = getattr(importlib.import_module(home), where[1])
    globals()[name] = value
    return value
