"""Anthropic Messages API (``POST /v1/messages``), as Claude Code calls it.

Claude Code reaches it at ``$ANTHROPIC_BASE_URL/v1/messages`` with ``stream: true`` and
reads the documented server-sent events: ``message_start``, then per content block
``content_block_start`` / ``content_block_delta`` (``text_delta`` or ``input_json_delta``)
/ ``content_block_stop``, then ``message_delta`` (``stop_reason``: ``end_turn`` or
``tool_use``; output usage) and ``message_stop``. Errors are ``{"type": "error",
"error": {"type": ..., "message": ...}}`` with the HTTP status (401
``authentication_error``, 429 ``rate_limit_error``, 500 ``api_error``, 529
``overloaded_error``).

Tool calls name the tools the request offers (:mod:`interlock.testing.tools`: Claude
Code's ``Write`` with an absolute ``file_path``, taken from the working directory its
system prompt states, and ``Bash``). A request without tools is one the CLI makes on its
own (a title, a quota probe): a side request.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from interlock.testing.model_server import Ids, Message, Parsed, iter_text, sse
from interlock.testing.replies import Reply, say
from interlock.testing.tools import tool_use

_ERROR_TYPES = {400: "invalid_request_error", 401: "authentication_error",
                403: "permission_error", 404: "not_found_error", 429: "rate_limit_error",
                500: "api_error", 529: "overloaded_error"}
_CWD = re.compile(r"(?:Working directory|Primary working directory|cwd):\s*(/\S+)")


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    parts: list[str] = []
    for block in content or ():
        if not isinstance(block, dict):
            continue
        if block.get("type") == "text":
            text = str(block.get("text", ""))
            if not text.lstrip().startswith("<system-reminder>"):  # Claude Code's context
                parts.append(text)
        elif block.get("type") == "tool_result":
            parts.append(_text(block.get("content")))
    return "\n".join(parts)


def _messages(body: dict[str, Any]) -> tuple[Message, ...]:
    out: list[Message] = []
    system = body.get("system")
    if system:
        out.append(Message("system", _text(system)))
    for message in body.get("messages") or ():
        role = message.get("role")
        content = message.get("content")
        blocks = content if isinstance(content, list) else []
        results = [b for b in blocks if isinstance(b, dict) and b.get("type") == "tool_result"]
        if role == "user" and results:
            out.extend(Message("tool", _text(b.get("content"))) for b in results)
            rest = [b for b in blocks if b not in results]
            if _text(rest).strip():
                out.append(Message("user", _text(rest)))
        else:
            out.append(Message(str(role), _text(content)))
    return tuple(out)


class AnthropicWire:
    name = "anthropic"
    paths: Sequence[str] = ("/v1/messages",)

    def parse(self, path: str, body: Any) -> Parsed:
        body = body if isinstance(body, dict) else {}
        tools = {str(t.get("name")): t.get("input_schema") or {}
                 for t in body.get("tools") or () if isinstance(t, dict)}
        return Parsed(messages=_messages(body), model=str(body.get("model", "")),
                      stream=bool(body.get("stream")), side=not tools, tools=tools)

    def side_reply(self, parsed: Parsed) -> Reply:
        return say("ok", input_tokens=10, output_tokens=1)

    def render(self, reply: Reply, parsed: Parsed, ids: Ids) -> Response | Iterable[bytes]:
        blocks = self._blocks(reply, parsed)
        stop = "tool_use" if reply.tools else "end_turn"
        message_id = ids.next("msg_")
        usage = {"input_tokens": reply.input_tokens, "output_tokens": reply.output_tokens,
                 "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0}
        if not parsed.stream:
            content = [{"type": "text", "text": b["text"]} if b["type"] == "text"
                       else {**b, "id": ids.next("toolu_")} for b in blocks]
            return JSONResponse({"id": message_id, "type": "message", "role": "assistant",
                                 "model": parsed.model, "content": content,
                                 "stop_reason": stop, "stop_sequence": None, "usage": usage})
        return list(self._events(blocks, stop, message_id, parsed.model, usage, ids))

    def _blocks(self, reply: Reply, parsed: Parsed) -> list[dict[str, Any]]:
        blocks: list[dict[str, Any]] = []
        if reply.text:
            blocks.append({"type": "text", "text": reply.text})
        cwd = _working_directory(parsed)
        for tool in reply.tools:
            name, arguments = tool_use(tool, parsed.tools, cwd=cwd)
            blocks.append({"type": "tool_use", "name": name, "input": arguments})
        return blocks

    def _events(self, blocks: list[dict[str, Any]], stop: str, message_id: str, model: str,
                usage: dict[str, int], ids: Ids) -> Iterator[bytes]:
        yield sse("message_start", {"type": "message_start", "message": {
            "id": message_id, "type": "message", "role": "assistant", "model": model,
            "content": [], "stop_reason": None, "stop_sequence": None,
            "usage": {**usage, "output_tokens": 1}}})
        for index, block in enumerate(blocks):
            if block["type"] == "text":
                yield sse("content_block_start", {"type": "content_block_start", "index": index,
                                                  "content_block": {"type": "text", "text": ""}})
                for piece in iter_text(block["text"]):
                    yield sse("content_block_delta", {
                        "type": "content_block_delta", "index": index,
                        "delta": {"type": "text_delta", "text": piece}})
            else:
                yield sse("content_block_start", {
                    "type": "content_block_start", "index": index,
                    "content_block": {"type": "tool_use", "id": ids.next("toolu_"),
                                      "name": block["name"], "input": {}}})
                yield sse("content_block_delta", {
                    "type": "content_block_delta", "index": index,
                    "delta": {"type": "input_json_delta",
                              "partial_json": json.dumps(block["input"])}})
            yield sse("content_block_stop", {"type": "content_block_stop", "index": index})
        yield sse("message_delta", {"type": "message_delta",
                                    "delta": {"stop_reason": stop, "stop_sequence": None},
                                    "usage": {"output_tokens": usage["output_tokens"]}})
        yield sse("message_stop", {"type": "message_stop"})

    def error(self, reply: Reply) -> Response:
        headers = {}
        if reply.retry_after is not None:
            headers["retry-after"] = f"{reply.retry_after:g}"
        kind = _ERROR_TYPES.get(reply.status, "api_error")
        return JSONResponse({"type": "error", "error": {"type": kind, "message": reply.message}},
                            status_code=reply.status, headers=headers)

    def extra_routes(self) -> Sequence[Route]:
        async def count_tokens(request: Request) -> Response:
            return JSONResponse({"input_tokens": 100})
        return (Route("/v1/messages/count_tokens", count_tokens, methods=["POST"]),)


def _working_directory(parsed: Parsed) -> str | None:
    for message in parsed.messages:
        found = _CWD.search(message.text)
        if found:
            return found.group(1)
    return None

