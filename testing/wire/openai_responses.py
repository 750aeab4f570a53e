"""OpenAI Responses API (codex): to be written (see testing/wire/anthropic.py for the shape)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from interlock.testing.model_server import Ids, Parsed
from interlock.testing.replies import Reply, say


class ResponsesWire:
    name = "openai_responses"
    paths: Sequence[str] = ()

    def parse(self, path: str, body: Any) -> Parsed:
        return Parsed(messages=())

    def side_reply(self, parsed: Parsed) -> Reply:
        return say("ok")

    def render(self, reply: Reply, parsed: Parsed, ids: Ids) -> Response | Iterable[bytes]:
        raise NotImplementedError

    def error(self, reply: Reply) -> Response:
        return JSONResponse({"error": {"message": reply.message}}, status_code=reply.status)

    def extra_routes(self) -> Sequence[Route]:
        return ()
