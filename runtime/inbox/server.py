"""``interlock inbox serve``: the inbox over HTTP (Starlette + uvicorn), so agents on other
machines can share one store.

Routes (JSON in and out; errors are ``{"error": KIND, "message": TEXT}`` with 400 bad
request, 404 unknown message, 409 stale lease, 422 invalid transition, 503 store
unavailable)::

    GET  /health                          {"ok": true}
    POST /messages                        {type, from, body?, correlation_id?,
                                           payload_ref?} -> {id}
    GET  /messages?status=S&limit=N       [message, ...]
    GET  /messages/{id}                   message
    GET  /messages/{id}/journal           [entry, ...]
    POST /fetch                           {limit?} -> [message, ...]
    POST /messages/{id}/claim             {owner, lease_seconds?} -> {token, lease_until} | null
    POST /claim                           {owner, lease_seconds?, limit?}
                                          -> [{message, token, lease_until}, ...]
    POST /messages/{id}/status            {status, token?, reason?} -> message
    POST /reclaim                         {} -> {reclaimed: N}
    GET  /settings                        {enabled?, interval?}
    PUT  /settings/{key}                  {value}
"""

from __future__ import annotations

import json
import socket
import sys
from collections.abc import Awaitable, Callable
from typing import Any

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from interlock.runtime.config.inbox_store import InboxError
from interlock.runtime.host.serving import bind as bind
from interlock.runtime.host.serving import serve as http_serve
from interlock.runtime.inbox.base import DEFAULT_LEASE, InboxAdapter
from interlock.runtime.inbox.model import (
    BadRequest,
    InboxUnavailable,
    InvalidTransition,
    StaleLease,
    UnknownMessage,
    parse_status,
)

STATUS_CODES: dict[type[InboxError], int] = {
    BadRequest: 400, UnknownMessage: 404, StaleLease: 409, InvalidTransition: 422,
    InboxUnavailable: 503,
}
Handler = Callable[[Request], Awaitable[Any]]


def _error(exc: InboxError) -> JSONResponse:
    return JSONResponse({"error": exc.kind, "message": str(exc)},
                        status_code=STATUS_CODES.get(type(exc), 400))


async def _body(request: Request) -> dict[str, Any]:
    raw = await request.body()
    if not raw:
        return {}
    try:
        data = json.loads(raw)
    except ValueError as exc:
        raise BadRequest(f"the request body is not JSON: {exc}") from None
    if not isinstance(data, dict):
        raise BadRequest("the request body must be a JSON object")
    return data


def _field(data: dict[str, Any], key: str, kind: type | tuple[type, ...],
           default: Any = ..., *, optional: bool = False) -> Any:
    if key not in data or (optional and data[key] is None):
        if default is ...:
            raise BadRequest(f"field {key!r} is required")
        return default
    value = data[key]
    if not isinstance(value, kind) or (isinstance(value, bool) and bool not in (
            kind if isinstance(kind, tuple) else (kind,))):
        raise BadRequest(f"field {key!r} has the wrong type: {value!r}")
    return value


def _int_param(request: Request, key: str, default: int) -> int:
    text = request.query_params.get(key)
    if text is None:
        return default
    try:
        return int(text)
    except ValueError:
        raise BadRequest(f"query parameter {key!r} must be an integer, got {text!r}") from None


def create_app(adapter: InboxAdapter) -> Starlette:
    """The ASGI app serving ``adapter``."""

    def route(path: str, methods: list[str],
              handler: Callable[[Request], Awaitable[Any]]) -> Route:
        async def endpoint(request: Request) -> Response:
            try:
                return JSONResponse(await handler(request))
            except InboxError as exc:
                return _error(exc)
        return Route(path, endpoint, methods=methods)

    async def health(request: Request) -> Any:
        return {"ok": True}

    async def post(request: Request) -> Any:
        data = await _body(request)
        message_id = adapter.post(
            _field(data, "type", str), _field(data, "from", str), _field(data, "body", str, ""),
            correlation_id=_field(data, "correlation_id", str, None, optional=True),
            payload_ref=_field(data, "payload_ref", str, None, optional=True))
        return {"id": message_id}

    async def list_(request: Request) -> Any:
        text = request.query_params.get("status")
        status = None if text is None else parse_status(text)
        limit = _int_param(request, "limit", 1000)
        return [m.to_json() for m in adapter.list(status, limit)]

    async def get(request: Request) -> Any:
        return adapter.get(request.path_params["id"]).to_json()

    async def journal(request: Request) -> Any:
        return [e.to_json() for e in adapter.journal(request.path_params["id"])]

    async def fetch(request: Request) -> Any:
        data = await _body(request)
        return [m.to_json() for m in adapter.fetch_queued(_field(data, "limit", int, 100))]

    async def claim(request: Request) -> Any:
        data = await _body(request)
        lease = adapter.claim(request.path_params["id"], _field(data, "owner", str),
                              _field(data, "lease_seconds", (int, float), DEFAULT_LEASE))
        return None if lease is None else {"token": lease.token,
                                           "lease_until": lease.lease_until}

    async def claim_next(request: Request) -> Any:
        data = await _body(request)
        claims = adapter.claim_next(_field(data, "owner", str),
                                    _field(data, "lease_seconds", (int, float), DEFAULT_LEASE),
                                    _field(data, "limit", int, 1))
        return [{"message": c.message.to_json(), "token": c.lease.token,
                 "lease_until": c.lease.lease_until} for c in claims]

    async def status(request: Request) -> Any:
        data = await _body(request)
        new = parse_status(_field(data, "status", str))
        return adapter.update_status(
            request.path_params["id"], new,
            _field(data, "token", str, None, optional=True),
            reason=_field(data, "reason", str, None, optional=True)).to_json()

    async def reclaim(request: Request) -> Any:
        return {"reclaimed": adapter.reclaim_expired()}

    async def settings(request: Request) -> Any:
        return adapter.settings()

    async def set_setting(request: Request) -> Any:
        data = await _body(request)
        if "value" not in data:
            raise BadRequest("field 'value' is required")
        adapter.set_setting(request.path_params["key"], data["value"])
        return adapter.settings()

    return Starlette(routes=[
        route("/health", ["GET"], health),
        route("/messages", ["POST"], post),
        route("/messages", ["GET"], list_),
        route("/messages/{id}", ["GET"], get),
        route("/messages/{id}/journal", ["GET"], journal),
        route("/fetch", ["POST"], fetch),
        route("/messages/{id}/claim", ["POST"], claim),
        route("/claim", ["POST"], claim_next),
        route("/messages/{id}/status", ["POST"], status),
        route("/reclaim", ["POST"], reclaim),
        route("/settings", ["GET"], settings),
        route("/settings/{key}", ["PUT"], set_setting),
    ])


def serve(adapter: InboxAdapter, sock: socket.socket, *, announce: bool = True) -> None:
    """Serve ``adapter`` on a bound socket until SIGINT/SIGTERM. Prints
    ``listening on http://HOST:PORT`` (flushed) once the server accepts connections."""
    host, port = sock.getsockname()[:2]

    def started() -> None:
        if announce:
            shown = f"[{host}]" if ":" in host else host
            sys.stdout.write(f"listening on http://{shown}:{port}\n")
            sys.stdout.flush()

    http_serve(create_app(adapter), sock, on_started=started, lifespan="off")
