"""Serving an ASGI application over HTTP through the façade (``interlock ui``'s)."""

from __future__ import annotations

import errno
from collections.abc import Callable
from typing import Any

from interlock.runtime.api.errors import InterlockError

__all__ = ["serve_app"]


def serve_app(app: Any, *, host: str = "127.0.0.1", port: int = 0,
              on_started: Callable[[str, int], None] | None = None,
              on_stop: Callable[[], None] | None = None) -> None:
    """Serve ``app`` (an ASGI application: Starlette's) on ``host:port`` until Ctrl-C or
    SIGTERM, which end it cleanly. ``on_started(host, port)`` once it accepts connections
    (the port bound: port 0 picks a free one); ``on_stop()`` when it is asked to end,
    before open connections are waited for. InterlockError in one line when the port is
    taken or the host cannot be listened on."""
    from interlock.runtime.host.serving import bind, serve

    try:
        sock = bind(host, port)
    except OSError as exc:
        if exc.errno == errno.EADDRINUSE:
            raise InterlockError(f"port {port} is in use on {host}: pick another with "
                                 "--port (or --port 0 for any free one)") from None
        raise InterlockError(f"cannot listen on {host}:{port}: "
                             f"{exc.strerror or exc}") from None
    bound = sock.getsockname()[1]
    try:
        serve(app, sock, on_started=(lambda: on_started(host, bound)) if on_started else None,
              on_stop=on_stop)
    finally:
        sock.close()
