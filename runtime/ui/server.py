"""The web application and its server: :func:`ui_app` builds the Starlette app over the
façade, :func:`serve_ui` serves it with uvicorn until Ctrl-C (``interlock ui``)."""

from __future__ import annotations

import asyncio
import contextlib
import secrets
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.routing import Mount
from starlette.staticfiles import StaticFiles

from interlock import runtime

__all__ = ["DEFAULT_PORT", "LOOPBACK", "UiConfig", "serve_ui", "ui_app"]

DEFAULT_PORT = 8642
LOOPBACK = frozenset({"127.0.0.1", "localhost", "::1"})
HERE = Path(__file__).resolve().parent


@dataclass(frozen=True)
class UiConfig:
    """What one ``interlock ui`` serves and how it guards it: the sessions of ``store``
    (a URL; None: SQLite under ``root``) and ``root`` (the project: Ralph sessions,
    interlock.yaml); ``token`` (None: none asked for) checked on every request;
    ``loopback``: only Host names of this machine are served (a page of another site
    that resolves its name to 127.0.0.1 gets nothing); ``csrf``: this server's secret
    that every POST carries; ``backstop``: seconds between looks at the store when no
    wake-up came (a runner that died says nothing)."""

    store: str | None = None
    root: Path = field(default_factory=Path.cwd)
    token: str | None = None
    loopback: bool = True
    csrf: str = field(default_factory=lambda: secrets.token_urlsafe(32))
    backstop: float = 5.0

    @property
    def where(self) -> dict[str, Any]:
        """The façade's ``store=`` and ``root=`` for this server's sessions."""
        return {"store": self.store, "root": self.root}


def ui_app(config: UiConfig | None = None) -> Starlette:
    """The web application of ``config`` (default: the working folder's sessions, on the
    loopback, no token)."""
    from interlock.runtime.ui.actions import ROUTES as ACTIONS
    from interlock.runtime.ui.guard import Guard
    from interlock.runtime.ui.pages import ROUTES as PAGES
    from interlock.runtime.ui.pages import not_found, server_error
    from interlock.runtime.ui.reviews import Reviews
    from interlock.runtime.ui.streams import ROUTES as STREAMS
    from interlock.runtime.ui.streams import SessionsHub

    config = config or UiConfig()

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        closing = asyncio.Event()  # set when the server stops: the streams end
        loop = asyncio.get_running_loop()
        app.state.closing = closing
        app.state.stop_streams = lambda: loop.call_soon_threadsafe(closing.set)
        with contextlib.suppress(runtime.InterlockError):
            await app.state.hub.current()  # read before the first page asks for it
        try:
            yield
        finally:
            closing.set()
            await app.state.hub.close()
            app.state.reviews.close()

    app = Starlette(
        routes=[*PAGES, *ACTIONS, *STREAMS,
                Mount("/static", StaticFiles(directory=HERE / "static"), name="static")],
        middleware=[Middleware(Guard, config=config)],
        exception_handlers={404: not_found, 500: server_error},
        lifespan=lifespan)
    app.state.config = config
    app.state.hub = SessionsHub(config)
    app.state.reviews = Reviews(config)
    return app


def serve_ui(*, host: str = "127.0.0.1", port: int = DEFAULT_PORT, token: str | None = None,
             store: str | None = None, root: Path | str | None = None,
             on_ready: Callable[[str, str | None], None] | None = None) -> None:
    """Serve the sessions of ``store`` (and ``root``'s Ralph sessions) on ``host:port``
    until Ctrl-C or SIGTERM. A host other than the loopback needs a token: without
    ``token`` one is made. ``on_ready(url, token)`` is called once it accepts connections
    (``url`` carries the token, for the first visit). InterlockError (one line) when the
    port is taken."""
    if not 0 <= port <= 65535:
        raise runtime.UsageError(f"--port {port}: must be in 0..65535")
    loopback = host in LOOPBACK
    if token is None and not loopback:
        token = secrets.token_urlsafe(24)
    if token is not None and not token.strip():
        raise runtime.UsageError("--token is empty")
    app = ui_app(UiConfig(store=store, root=Path(root) if root is not None else Path.cwd(),
                          token=token, loopback=loopback))

    def started(bound_host: str, bound: int) -> None:
        if on_ready is not None:
            shown = f"[{bound_host}]" if ":" in bound_host else bound_host
            on_ready(f"http://{shown}:{bound}/" + (f"?token={token}" if token else ""), token)

    runtime.serve_app(app, host=host, port=port, on_started=started,
                      on_stop=lambda: app.state.stop_streams())
