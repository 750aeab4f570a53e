"""Every request passes the guard (an ASGI middleware) before any page:

1. **Host**: on the loopback, only this machine's names (``127.0.0.1``, ``localhost``,
   ``[::1]``) are served: a page of another site whose name resolves to 127.0.0.1
   (DNS rebinding) gets 421.
2. **Token** (when the server has one): the ``?token=`` of the first visit is checked,
   kept in an HttpOnly, SameSite=Strict cookie, and the visitor sent on without it;
   afterwards the cookie (or ``Authorization: Bearer TOKEN``) must carry it. Without it:
   401.
3. **State changes are POST only**, and each must be same-origin: the browser's
   ``Sec-Fetch-Site`` (when sent) is ``same-origin``, ``Origin`` (when sent) is this
   server, and the ``X-CSRF-Token`` header carries this server's secret (which only its
   own pages hold, in ``<meta name="csrf-token">``). Otherwise: 403.

Every response gets a Content-Security-Policy allowing this server's own scripts and
styles only, no framing, no referrer, ``nosniff``, and no caching.
"""

from __future__ import annotations

import hmac
from http.cookies import SimpleCookie
from typing import TYPE_CHECKING
from urllib.parse import parse_qsl, urlencode, urlsplit

from starlette.datastructures import Headers
from starlette.responses import PlainTextResponse, RedirectResponse, Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

if TYPE_CHECKING:
    from interlock.runtime.ui.server import UiConfig

__all__ = ["COOKIE", "CSRF_HEADER", "Guard"]

COOKIE = "interlock_ui_token"
CSRF_HEADER = "x-csrf-token"
LOOPBACK_NAMES = frozenset({"127.0.0.1", "localhost", "[::1]", "::1"})
SAFE_METHODS = frozenset({"GET", "HEAD"})
HEADERS = [
    (b"content-security-policy",
     b"default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
     b"connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"),
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"no-referrer"),
    (b"x-frame-options", b"DENY"),
    (b"cache-control", b"no-store"),
]


def _same(given: str | None, expected: str) -> bool:
    return given is not None and hmac.compare_digest(given.encode(), expected.encode())


def _host_name(headers: Headers) -> str:
    host = headers.get("host", "")
    if host.startswith("["):
        return host[: host.find("]") + 1]
    return host.rsplit(":", 1)[0] if ":" in host else host


class Guard:
    """The checks above, in front of ``app``."""

    def __init__(self, app: ASGIApp, config: UiConfig) -> None:
        self.app = app
        self.config = config

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        refusal = self.refusal(scope)
        if refusal is not None:
            await self._secured(refusal, scope, receive, send)
            return

        async def secured(message: Message) -> None:
            if message["type"] == "http.response.start":
                message["headers"] = [*message.get("headers", []), *HEADERS]
            await send(message)

        await self.app(scope, receive, secured)

    async def _secured(self, response: Response, scope: Scope, receive: Receive,
                       send: Send) -> None:
        for name, value in HEADERS:
            response.raw_headers.append((name, value))
        await response(scope, receive, send)

    def refusal(self, scope: Scope) -> Response | None:
        """The response that refuses this request, or None to let it through."""
        headers = Headers(scope=scope)
        method = scope["method"]
        if self.config.loopback and _host_name(headers) not in LOOPBACK_NAMES:
            return PlainTextResponse("421: this server answers to 127.0.0.1 and localhost "
                                     "only\n", 421)
        token = self.config.token
        if token is not None:
            query = dict(parse_qsl(scope.get("query_string", b"").decode("latin-1")))
            if method in SAFE_METHODS and "token" in query:
                return self._first_visit(scope, query, token)
            if not self._carries(headers, token):
                return PlainTextResponse("401: this page needs the token `interlock ui` "
                                         "printed: open the URL it printed (…/?token=…)\n",
                                         401, headers={"www-authenticate": "Bearer"})
        if method in SAFE_METHODS:
            return None
        if method != "POST":
            return PlainTextResponse(f"405: {method} is not served here\n", 405,
                                     headers={"allow": "GET, HEAD, POST"})
        return self._cross_site(headers)

    def _first_visit(self, scope: Scope, query: dict[str, str], token: str) -> Response:
        if not _same(query.pop("token"), token):
            return PlainTextResponse("401: wrong token\n", 401)
        rest = urlencode(query)
        response = RedirectResponse(scope["path"] + (f"?{rest}" if rest else ""), 303)
        response.set_cookie(COOKIE, token, httponly=True, samesite="strict", path="/")
        return response

    @staticmethod
    def _carries(headers: Headers, token: str) -> bool:
        cookie = SimpleCookie()
        cookie.load(headers.get("cookie", ""))
        kept = cookie.get(COOKIE)
        bearer = headers.get("authorization", "")
        return (_same(kept.value if kept is not None else None, token)
                or (bearer.startswith("Bearer ") and _same(bearer[7:].strip(), token)))

    def _cross_site(self, headers: Headers) -> Response | None:
        """403 for a POST that is not this server's own page's."""
        site = headers.get("sec-fetch-site")
        origin = headers.get("origin")
        why = None
        if site is not None and site not in ("same-origin", "none"):
            why = f"Sec-Fetch-Site is {site}"
        elif origin is not None and origin != "null" and \
                urlsplit(origin).netloc != headers.get("host"):
            why = f"Origin {origin} is another site"
        elif origin == "null":
            why = "Origin is null"
        elif not _same(headers.get(CSRF_HEADER), self.config.csrf):
            why = f"the {CSRF_HEADER} header does not carry this server's token"
        if why is None:
            return None
        return PlainTextResponse(f"403: cross-site request refused ({why})\n", 403)
