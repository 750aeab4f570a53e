"""OpenAI Chat Completions (``POST /v1/chat/completions``, ``stream: true``), as opencode
calls it.

opencode reaches it through its bundled ``@ai-sdk/openai-compatible`` provider (a custom
``provider`` entry with ``options.baseURL``, see :mod:`interlock.testing.clis.opencode`).
The request carries ``model``, ``messages`` (``system``; ``user`` with a string or a list
of ``{"type": "text"}`` parts; ``assistant`` with ``content`` and ``tool_calls``; ``tool``
with ``tool_call_id`` and the result as ``content``), ``tools`` (``{"type": "function",
"function": {"name", "description", "parameters"}}``), ``tool_choice``, ``max_tokens``,
``stream: true`` and ``stream_options: {"include_usage": true}``.

The answer is the documented chunk stream that the AI SDK's openai-compatible provider
parses (vercel/ai packages/openai-compatible/src/chat/openai-compatible-chat-language-
model.ts): ``data: {"object": "chat.completion.chunk", "choices": [{"index": 0, "delta":
{...}, "finish_reason": ...}]}`` events: a ``role`` delta, ``content`` deltas, per tool
call a ``tool_calls`` delta with ``index``, ``id``, ``type`` and ``function.name`` then
``function.arguments`` pieces, a last choice with ``finish_reason`` (``stop`` or
``tool_calls``), a usage chunk (``choices: []``, ``usage: {prompt_tokens,
completion_tokens, total_tokens, prompt_tokens_details.cached_tokens,
completion_tokens_details.reasoning_tokens}``), then ``data: [DONE]``. Errors are the
API's ``{"error": {"message", "type", "param", "code"}}`` with the HTTP status and, when
scripted, a ``retry-after`` header (opencode's session retry waits that long:
packages/opencode/src/session/retry.ts).

Tool calls name the tools the request offers (:mod:`interlock.testing.tools`: opencode's
``write`` with an absolute ``filePath``, taken from the ``Working directory:`` its system
prompt states, and ``bash``). A request without tools is one opencode makes on its own
(the session's title, asked of the same model): a side request.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from interlock.testing.model_server import Ids, Message, Parsed, iter_text, sse
from interlock.testing.replies import Reply, say
from interlock.testing.tools import tool_use

# OpenAI's error types and codes by HTTP status (platform.openai.com/docs/guides/error-codes).
_ERRORS: dict[int, tuple[str, str | None]] = {
    400: ("invalid_request_error", None), 401: ("invalid_request_error", "invalid_api_key"),
    403: ("permission_error", "unsupported_country_region_territory"),
    404: ("invalid_request_error", "model_not_found"),
    429: ("requests", "rate_limit_exceeded"), 500: ("server_error", None),
    503: ("server_error", None)}
_CWD = re.compile(r"Working directory:\s*(/\S+)")
DONE = b"data: [DONE]\n\n"


def _text(content: Any) -> str:
    """A message's ``content``: a string, or the text of its parts."""
    if isinstance(content, str):
        return content
    parts: list[str] = []
    for part in content or ():
        if isinstance(part, dict) and part.get("type") == "text":
            parts.append(str(part.get("text", "")))
        elif isinstance(part, str):
            parts.append(part)
    return "\n".join(parts)


def _messages(body: dict[str, Any]) -> tuple[Message, ...]:
    out: list[Message] = []
    for message in body.get("messages") or ():
        if not isinstance(message, dict):
            continue
        role = str(message.get("role", ""))
        if role == "developer":
            role = "system"
        out.append(Message(role, _text(message.get("content"))))
    return tuple(out)


class ChatCompletionsWire:
    name = "openai_chat"
    paths: Sequence[str] = ("/v1/chat/completions",)

    def parse(self, path: str, body: Any) -> Parsed:
        body = body if isinstance(body, dict) else {}
        tools: dict[str, Any] = {}
        for tool in body.get("tools") or ():
            function = tool.get("function") if isinstance(tool, dict) else None
            if isinstance(function, dict) and function.get("name"):
                tools[str(function["name"])] = function.get("parameters") or {}
        return Parsed(messages=_messages(body), model=str(body.get("model", "")),
                      stream=bool(body.get("stream")), side=not tools, tools=tools)

    def side_reply(self, parsed: Parsed) -> Reply:
        return say("Scripted session", input_tokens=10, output_tokens=2)

    def render(self, reply: Reply, parsed: Parsed, ids: Ids) -> Response | Iterable[bytes]:
        calls = self._calls(reply, parsed, ids)
        finish = "tool_calls" if calls else "stop"
        completion_id = ids.next("chatcmpl-")
        usage = {"prompt_tokens": reply.input_tokens, "completion_tokens": reply.output_tokens,
                 "total_tokens": reply.input_tokens + reply.output_tokens,
                 "prompt_tokens_details": {"cached_tokens": 0},
                 "completion_tokens_details": {"reasoning_tokens": 0}}
        head = {"id": completion_id, "created": int(time.time()), "model": parsed.model,
                "system_fingerprint": "fp_scripted"}
        if not parsed.stream:
            message: dict[str, Any] = {"role": "assistant", "content": reply.text or None}
            if calls:
                message["tool_calls"] = calls
            return JSONResponse({**head, "object": "chat.completion", "choices": [
                {"index": 0, "message": message, "logprobs": None, "finish_reason": finish}],
                "usage": usage})
        return list(self._chunks(reply.text, calls, finish, head, usage))

    def _calls(self, reply: Reply, parsed: Parsed, ids: Ids) -> list[dict[str, Any]]:
        cwd = _working_directory(parsed)
        calls: list[dict[str, Any]] = []
        for tool in reply.tools:
            name, arguments = tool_use(tool, parsed.tools, cwd=cwd)
            calls.append({"id": ids.next("call_"), "type": "function",
                          "function": {"name": name, "arguments": json.dumps(arguments)}})
        return calls

    def _chunks(self, text: str, calls: list[dict[str, Any]], finish: str,
                head: dict[str, Any], usage: dict[str, Any]) -> Iterator[bytes]:
        def chunk(delta: dict[str, Any], reason: str | None = None) -> bytes:
            return sse(None, {**head, "object": "chat.completion.chunk", "choices": [
                {"index": 0, "delta": delta, "logprobs": None, "finish_reason": reason}]})

        yield chunk({"role": "assistant", "content": ""})
        for piece in iter_text(text):
            yield chunk({"content": piece})
        for index, call in enumerate(calls):
            function = call["function"]
            yield chunk({"tool_calls": [{"index": index, "id": call["id"], "type": "function",
                                         "function": {"name": function["name"],
                                                      "arguments": ""}}]})
            for piece in iter_text(function["arguments"], 200):
                yield chunk({"tool_calls": [{"index": index,
                                             "function": {"arguments": piece}}]})
        yield chunk({}, finish)
        yield sse(None, {**head, "object": "chat.completion.chunk", "choices": [],
                         "usage": usage})
        yield DONE

    def error(self, reply: Reply) -> Response:
        headers = {}
        if reply.retry_after is not None:
            headers["retry-after"] = f"{reply.retry_after:g}"
        kind, code = _ERRORS.get(reply.status, ("server_error", None))
        return JSONResponse({"error": {"message": reply.message, "type": kind, "param": None,
                                       "code": code}},
                            status_code=reply.status, headers=headers)

    def extra_routes(self) -> Sequence[Route]:
        return ()  # opencode asks nothing else of the provider (no model list)


def _working_directory(parsed: Parsed) -> str | None:
    for message in parsed.messages:
        if message.role == "system":
            found = _CWD.search(message.text)
            if found:
                return found.group(1)
    return None
