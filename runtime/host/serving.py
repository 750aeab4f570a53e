"""Serving HTTP on this host: a listening socket, and uvicorn running an ASGI app on it
until Ctrl-C or SIGTERM, which end it cleanly (exit 0), as the inbox's server and
``interlock ui`` do.

An idle server costs next to nothing: uvicorn's own loop would wake ten times a second to
look for the end; this one waits for it (and wakes once a second for the Date header).
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import threading
from collections.abc import Callable, Iterator
from types import FrameType
from typing import Any, Literal

import uvicorn

__all__ = ["Server", "bind", "serve"]

TICK = 1.0  # seconds between uvicorn's housekeeping ticks (its own: 0.1)


def bind(host: str, port: int) -> socket.socket:
    """A listening socket on host:port (port 0: a free one); OSError names the problem."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)  # no Nagle: replies at once
    try:
        sock.bind((host, port))
    except OSError:
        sock.close()
        raise
    sock.listen(512)
    sock.set_inheritable(True)
    return sock


class Server(uvicorn.Server):
    """uvicorn's server, ended by Ctrl-C, SIGTERM or :meth:`stop` (from any thread):
    ``on_started()`` once it accepts connections, ``on_stop()`` when it is asked to end
    (before open connections are waited for: long-lived responses can end then)."""

    def __init__(self, config: uvicorn.Config, *, on_started: Callable[[], None] | None = None,
                 on_stop: Callable[[], None] | None = None) -> None:
        super().__init__(config)
        self._on_started = on_started
        self._on_stop = on_stop
        self._ending: asyncio.Event | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stopping = threading.Lock()

    @contextlib.contextmanager
    def capture_signals(self) -> Iterator[None]:
        """SIGINT/SIGTERM stop the server gracefully, and that is a clean exit (0):
        uvicorn would raise the signal again afterwards."""
        with super().capture_signals():
            yield
            self._captured_signals.clear()

    async def startup(self, sockets: list[socket.socket] | None = None) -> None:
        self._loop = asyncio.get_running_loop()
        self._ending = asyncio.Event()
        await super().startup(sockets)
        if self._on_started is not None and not self.should_exit:
            self._on_started()

    async def main_loop(self) -> None:
        counter = 0
        assert self._ending is not None
        while not await self.on_tick(counter):
            counter += 10  # a tick is a second: uvicorn refreshes its Date header every 10
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._ending.wait(), TICK)

    def handle_exit(self, sig: int, frame: FrameType | None) -> None:
        first = not self.should_exit
        super().handle_exit(sig, frame)  # a second Ctrl-C forces the end
        if first:
            self._ended()

    def stop(self) -> None:
        """End the server, from any thread."""
        first = not self.should_exit
        self.should_exit = True
        if first:
            self._ended()

    def _ended(self) -> None:
        with self._stopping:
            on_stop, self._on_stop = self._on_stop, None
        if on_stop is not None:
            on_stop()
        if self._loop is not None and self._ending is not None:
            with contextlib.suppress(RuntimeError):  # the loop has closed already
                self._loop.call_soon_threadsafe(self._ending.set)


def serve(app: Any, sock: socket.socket, *, on_started: Callable[[], None] | None = None,
          on_stop: Callable[[], None] | None = None,
          lifespan: Literal["auto", "on", "off"] = "on") -> None:
    """Serve ``app`` on the bound ``sock`` until SIGINT/SIGTERM (see :class:`Server`)."""
    config = uvicorn.Config(app, log_level="warning", access_log=False, lifespan=lifespan,
                            timeout_graceful_shutdown=1, ws="none")
    Server(config, on_started=on_started, on_stop=on_stop).run(sockets=[sock])
