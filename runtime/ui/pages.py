"""The pages (HTML, rendered by Jinja2 with autoescape on: everything a spec or an agent
wrote is escaped) and the JSON they read: the sessions, a session, a session's file, an
invocation in full, the inbox."""

from __future__ import annotations

import asyncio
import mimetypes
from pathlib import Path
from typing import TYPE_CHECKING, Any

from jinja2 import Environment, FileSystemLoader, select_autoescape
from starlette.requests import Request
from starlette.responses import FileResponse, HTMLResponse, JSONResponse, Response
from starlette.routing import Route

from interlock import runtime
from interlock.runtime.ui.data import RALPH_MACHINE, invocation_json, session_data

if TYPE_CHECKING:
    from interlock.runtime.ui.server import UiConfig

__all__ = ["ROUTES", "not_found", "render", "server_error"]

TEMPLATES = Environment(loader=FileSystemLoader(Path(__file__).parent / "templates"),
                        autoescape=select_autoescape(default=True), auto_reload=False)
# what a text file of a session is served as: plain text, never a page of its own
TEXT = "text/plain; charset=utf-8"


def _config(request: Request) -> UiConfig:
    config: UiConfig = request.app.state.config
    return config


def render(request: Request, template: str, status: int = 200, **values: Any) -> Response:
    config = _config(request)
    html = TEMPLATES.get_template(template).render(
        csrf=config.csrf, root=str(config.root), store=config.store, **values)
    return HTMLResponse(html, status)


async def not_found(request: Request, exc: Exception) -> Response:
    detail = getattr(exc, "detail", None) or str(exc) or "no such page"
    if request.url.path.startswith(("/api/", "/events/")):
        return JSONResponse({"error": detail}, 404)
    return render(request, "error.html", 404, title="Not found", message=detail)


async def server_error(request: Request, exc: Exception) -> Response:
    message = f"{type(exc).__name__}: {exc}"
    if request.url.path.startswith(("/api/", "/events/")):
        return JSONResponse({"error": message}, 500)
    return render(request, "error.html", 500, title="Something went wrong", message=message)


def _where(request: Request) -> dict[str, Any]:
    return _config(request).where


async def sessions_page(request: Request) -> Response:
    version, rows = await request.app.state.hub.current()
    return render(request, "sessions.html", title="Sessions",
                  initial={"version": version, "rows": rows})


async def sessions_json(request: Request) -> Response:
    _, rows = await request.app.state.hub.current()
    return JSONResponse(rows)


async def session_page(request: Request) -> Response:
    session_id = request.path_params["session"]
    try:
        data = await session_data(_config(request), session_id)
        chart = await runtime.session_chart(session_id, **_where(request))
    except (runtime.NotFound, runtime.UsageError) as exc:
        return await not_found(request, exc)
    except runtime.InterlockError as exc:  # no Graphviz: the page without its chart
        data = await session_data(_config(request), session_id)
        chart = None
        data["chart_error"] = str(exc)
    info = data["info"]
    return render(request, "session.html", title=f"Session {session_id}", data=data,
                  chart=chart, info=info, ralph=info["machine"] == RALPH_MACHINE
                  and not info["parent"], signal_types=runtime.SIGNAL_TYPES,
                  targets=runtime.RALPH_TARGETS)


async def session_json(request: Request) -> Response:
    try:
        return JSONResponse(await session_data(_config(request),
                                               request.path_params["session"]))
    except (runtime.NotFound, runtime.UsageError) as exc:
        return await not_found(request, exc)


async def invocation_full(request: Request) -> Response:
    """One invocation with its prompt, output, answer and calls."""
    session_id, wanted = request.path_params["session"], request.path_params["invocation"]
    try:
        views = await runtime.invocations(session_id, **_where(request))
    except (runtime.NotFound, runtime.UsageError) as exc:
        return await not_found(request, exc)
    for view in views:
        if view.id == wanted:
            return JSONResponse(invocation_json(view, full=True))
    return await not_found(request, runtime.NotFound(f"no invocation {wanted} in "
                                                     f"session {session_id}"))


async def session_file(request: Request) -> Response:
    """A file of the session's folders, as text (or as what it is, for images)."""
    params = request.path_params
    try:
        path = await runtime.session_file(params["session"], params["folder"], params["path"],
                                          **_where(request))
    except (runtime.NotFound, runtime.UsageError) as exc:
        return await not_found(request, exc)
    kind = mimetypes.guess_type(path.name)[0] or ""
    media = kind if kind in ("image/png", "image/jpeg", "image/gif") else TEXT
    return FileResponse(path, media_type=media, content_disposition_type="inline",
                        filename=path.name)


async def inbox_page(request: Request) -> Response:
    store = runtime.project_inbox(root=_config(request).root)
    return render(request, "inbox.html", title="Inbox", inbox=store)


async def inbox_json(request: Request) -> Response:
    store = runtime.project_inbox(root=_config(request).root)
    if store is None:
        return JSONResponse({"error": "no inbox here: interlock.yaml has no inbox: "
                             "section"}, 404)
    status = request.query_params.get("status") or None
    try:
        messages = await asyncio.to_thread(runtime.list_messages, status, store=store)
    except (runtime.InboxError, runtime.InboxConfigError, runtime.BadRequest) as exc:
        return JSONResponse({"error": str(exc)}, 400)
    return JSONResponse([m.to_json() for m in messages])


ROUTES = [
    Route("/", sessions_page),
    Route("/api/sessions", sessions_json),
    Route("/s/{session}", session_page),
    Route("/api/s/{session}", session_json),
    Route("/api/s/{session}/invocations/{invocation}", invocation_full),
    Route("/s/{session}/files/{folder}/{path:path}", session_file),
    Route("/inbox", inbox_page),
    Route("/api/inbox", inbox_json),
]
