"""The inbox's function API (re-exported by ``interlock.runtime``; ``interlock inbox``
calls only these). Each call opens the store a URL names (None: ``.interlock/inbox.db``
under the current folder), does one thing and closes it. Errors are InboxError kinds
with messages fit for a user; InboxConfigError for a bad URL or value.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

from interlock.machines.durations import parse_duration
from interlock.runtime.config.inbox_store import InboxConfigError, parse_store_url
from interlock.runtime.inbox.base import DEFAULT_TIMEOUT, InboxAdapter
from interlock.runtime.inbox.connection import connect
from interlock.runtime.inbox.model import Message, Status, parse_status

T = TypeVar("T")

__all__ = [
    "connect", "list_messages", "mark_message", "poll_settings", "post_message",
    "serve_inbox", "set_enabled", "set_interval",
]


def _with(store: str | None, body: Callable[[InboxAdapter], T],
          timeout: float = DEFAULT_TIMEOUT) -> T:
    adapter = connect(store, timeout=timeout)
    try:
        return body(adapter)
    finally:
        adapter.close()


def post_message(type: str, sender: str, body: str = "", *, correlation_id: str | None = None,
                 payload_ref: str | None = None, store: str | None = None) -> str:
    """Queue a message; its id."""
    return _with(store, lambda a: a.post(type, sender, body, correlation_id=correlation_id,
                                         payload_ref=payload_ref))


def list_messages(status: str | Status | None = None, *, limit: int = 1000,
                  store: str | None = None) -> list[Message]:
    """Messages, oldest first; only those of ``status`` when given."""
    wanted = None if status is None else parse_status(str(status))
    return _with(store, lambda a: a.list(wanted, limit))


def mark_message(message_id: str, status: str | Status, *, reason: str | None = None,
                 store: str | None = None) -> Message:
    """The operator's ``/poll ack|done|failed``: no lease token, journaled as
    ``operator``. InvalidTransition when the message cannot move there."""
    new = parse_status(str(status))
    return _with(store, lambda a: a.update_status(message_id, new, reason=reason))


def set_enabled(enabled: bool, *, store: str | None = None) -> None:
    """``/poll on`` / ``/poll off``: the store's setting that running pollers follow."""
    _with(store, lambda a: a.set_setting("enabled", enabled))


def set_interval(duration: str | float, *, store: str | None = None) -> float:
    """``/poll interval``: seconds between polls (text like 30s, 2m or a number)."""
    try:
        seconds = parse_duration(duration)
    except ValueError as exc:
        raise InboxConfigError(f"interval {duration!r}: {exc}") from None
    if seconds <= 0:
        raise InboxConfigError(f"interval {duration!r}: must be more than 0")
    _with(store, lambda a: a.set_setting("interval", seconds))
    return seconds


def poll_settings(*, store: str | None = None) -> dict[str, Any]:
    """The stored poller settings (``enabled``, ``interval``; absent when never set)."""
    return _with(store, lambda a: a.settings())


def serve_inbox(store: str | None = None, host: str = "127.0.0.1", port: int = 8765,
                *, root: Path | None = None) -> None:
    """Serve the store over HTTP until interrupted (prints ``listening on URL``)."""
    from interlock.runtime.inbox.server import bind, serve

    where = parse_store_url(store, root)
    if where.kind == "http":
        raise InboxConfigError("serve needs a store (sqlite, postgresql or arango), "
                               f"not another server ({where.url})")
    if not 0 <= port <= 65535:
        raise InboxConfigError(f"--port {port}: must be in 0..65535")
    adapter = connect(store, root=root)
    try:
        try:
            sock = bind(host, port)
        except OSError as exc:
            raise InboxConfigError(f"cannot listen on {host}:{port}: "
                                   f"{exc.strerror or exc}") from None
        serve(adapter, sock)
    finally:
        adapter.close()
