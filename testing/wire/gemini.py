"""Gemini API ``generateContent`` (``v1beta``), as Gemini CLI calls it with an API key.

Gemini CLI (``packages/core/src/core/contentGenerator.ts``) builds the ``@google/genai``
client with ``httpOptions.baseUrl = $GOOGLE_GEMINI_BASE_URL`` and the SDK's default API
version, so it calls ``POST {base}/v1beta/models/{model}:streamGenerateContent?alt=sse``
for the chat (``packages/core/src/core/geminiChat.ts``) and
``POST {base}/v1beta/models/{model}:generateContent`` for its own one-shot questions
(``packages/core/src/core/baseLlmClient.ts``: the model router's complexity classifier
of ``routing/strategies/*ClassifierStrategy.ts``, the next-speaker and loop checks), with
the key in ``x-goog-api-key``; ``:countTokens`` where it counts.

Request: ``contents`` (``role`` ``user`` | ``model``; ``parts`` of ``text``,
``functionCall`` {name, args}, ``functionResponse`` {name, response}),
``systemInstruction``, ``tools: [{functionDeclarations: [{name, description,
parametersJsonSchema | parameters}]}]``. The ``<session_context>`` block the CLI sends as
its first user turn (``packages/core/src/utils/environmentContext.ts``) is recorded as a
``system`` message, so :attr:`ModelRequest.prompt` is the user's prompt; a model turn's
``functionCall`` as ``name({args})`` text, a ``functionResponse`` as a ``tool`` message.
A request that offers no tools is one the CLI makes on its own: a side request, answered
with a JSON object that satisfies the side questions' schemas.

Answer (the SDK's ``_api_client`` reads ``data: JSON`` lines split by a blank line): one
``GenerateContentResponse`` per event, ``candidates[0].content.parts`` (``text`` pieces,
then ``functionCall`` parts), the last event with ``finishReason: STOP`` and
``usageMetadata`` (promptTokenCount, candidatesTokenCount, totalTokenCount). Errors are
Google's ``{"error": {"code", "message", "status", "details"}}`` (401
``UNAUTHENTICATED``, 429 ``RESOURCE_EXHAUSTED`` with a ``google.rpc.RetryInfo``
``retryDelay`` when ``retry_after`` is set: the CLI's retry loop,
``packages/core/src/utils/googleQuotaErrors.ts``, reads that, not the Retry-After
header, which is sent too).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from interlock.testing.model_server import Ids, Message, Parsed, iter_text
from interlock.testing.replies import Reply, say
from interlock.testing.tools import SHELL_TOOLS, WRITE_TOOLS, tool_use

_STATUS = {400: "INVALID_ARGUMENT", 401: "UNAUTHENTICATED", 403: "PERMISSION_DENIED",
           404: "NOT_FOUND", 409: "ABORTED", 429: "RESOURCE_EXHAUSTED", 499: "CANCELLED",
           500: "INTERNAL", 501: "NOT_IMPLEMENTED", 503: "UNAVAILABLE",
           504: "DEADLINE_EXCEEDED"}
_CONTEXT = "<session_context>"
_WORKSPACE = re.compile(r"Workspace Directories:\*{0,2}\s*\n\s*-\s*(/[^\n]*)")
# One JSON answer for every side question of Gemini CLI 0.61: the router's complexity
# classifier (numericalClassifierStrategy.ts), the older flash/pro classifier
# (classifierStrategy.ts), the next-speaker check (nextSpeakerChecker.ts) and the loop
# check (loopDetectionService.ts): each reads its own keys.
SIDE_ANSWER = json.dumps({
    "complexity_reasoning": "scripted", "complexity_score": 10,
    "reasoning": "scripted", "model_choice": "flash", "next_speaker": "user",
    "unproductive_state_analysis": "scripted", "unproductive_state_confidence": 0,
})


def _part_text(part: dict[str, Any]) -> tuple[str, str] | None:
    """(kind, text) of one part: ``text``, ``call`` or ``result``; None for thoughts."""
    if part.get("thought"):
        return None
    if "text" in part:
        return "text", str(part.get("text") or "")
    call = part.get("functionCall")
    if isinstance(call, dict):
        return "call", f"{call.get('name')}({json.dumps(call.get('args') or {})})"
    result = part.get("functionResponse")
    if isinstance(result, dict):
        response = result.get("response")
        if isinstance(response, dict):
            value = response.get("output", response.get("error", response))
            return "result", value if isinstance(value, str) else json.dumps(value)
        return "result", json.dumps(response)
    return None


def _messages(body: dict[str, Any]) -> tuple[Message, ...]:
    out: list[Message] = []
    system = body.get("systemInstruction")
    if isinstance(system, str):
        out.append(Message("system", system))
    elif isinstance(system, dict):
        out.append(Message("system", "\n".join(
            str(p.get("text", "")) for p in system.get("parts") or ()
            if isinstance(p, dict))))
    for content in body.get("contents") or ():
        if not isinstance(content, dict):
            continue
        role = "assistant" if content.get("role") == "model" else "user"
        texts: list[str] = []
        for part in content.get("parts") or ():
            read = _part_text(part) if isinstance(part, dict) else None
            if read is None:
                continue
            kind, text = read
            if kind == "result":
                out.append(Message("tool", text))
            elif kind == "text" and role == "user" and text.lstrip().startswith(_CONTEXT):
                out.append(Message("system", text))
            else:
                texts.append(text)
        if texts:
            out.append(Message(role, "\n".join(texts)))
    return tuple(out)


def _tools(body: dict[str, Any]) -> dict[str, Any]:
    tools: dict[str, Any] = {}
    for tool in body.get("tools") or ():
        for declaration in (tool.get("functionDeclarations") or ()
                            if isinstance(tool, dict) else ()):
            if isinstance(declaration, dict) and declaration.get("name"):
                schema = (declaration.get("parametersJsonSchema")
                          or declaration.get("parameters") or {})
                tools[str(declaration["name"])] = schema
    return tools


def _model(path: str) -> str:
    """``gemini-2.5-pro`` of ``/v1beta/models/gemini-2.5-pro:streamGenerateContent``."""
    name = path.rsplit("/", 1)[-1]
    return name.split(":", 1)[0]


class GeminiWire:
    name = "gemini"
    paths: Sequence[str] = ("/{version}/models/{model}:streamGenerateContent",
                            "/{version}/models/{model}:generateContent")

    def parse(self, path: str, body: Any) -> Parsed:
        body = body if isinstance(body, dict) else {}
        tools = _tools(body)
        return Parsed(messages=_messages(body), model=_model(path),
                      stream=path.endswith(":streamGenerateContent"), side=not tools,
                      tools=tools)

    def side_reply(self, parsed: Parsed) -> Reply:
        return say(SIDE_ANSWER, input_tokens=10, output_tokens=1)

    def render(self, reply: Reply, parsed: Parsed, ids: Ids) -> Response | Iterable[bytes]:
        response_id = ids.next("resp_")
        parts = self._parts(reply, parsed)
        usage = {"promptTokenCount": reply.input_tokens,
                 "candidatesTokenCount": reply.output_tokens,
                 "totalTokenCount": reply.input_tokens + reply.output_tokens,
                 "promptTokensDetails": [{"modality": "TEXT",
                                          "tokenCount": reply.input_tokens}]}
        if not parsed.stream:
            return JSONResponse(_chunk(parts, parsed.model, response_id, usage, final=True))
        return list(self._events(parts, parsed.model, response_id, usage))

    def _parts(self, reply: Reply, parsed: Parsed) -> list[dict[str, Any]]:
        parts: list[dict[str, Any]] = []
        if reply.text:
            parts.append({"text": reply.text})
        cwd = _workspace(parsed)
        for tool in reply.tools:
            name, arguments = tool_use(tool, _with_own_tools(parsed.tools), cwd=cwd)
            parts.append({"functionCall": {"name": name, "args": arguments}})
        return parts

    def _events(self, parts: list[dict[str, Any]], model: str, response_id: str,
                usage: dict[str, Any]) -> Iterator[bytes]:
        pieces: list[dict[str, Any]] = []
        for part in parts:
            if "text" in part:
                pieces.extend({"text": piece} for piece in iter_text(part["text"]))
            else:
                pieces.append(part)
        if not pieces:
            pieces.append({"text": ""})
        prompt_only = {"promptTokenCount": usage["promptTokenCount"],
                       "totalTokenCount": usage["promptTokenCount"]}
        for index, piece in enumerate(pieces):
            final = index == len(pieces) - 1
            yield _event(_chunk([piece], model, response_id,
                                usage if final else prompt_only, final=final))

    def error(self, reply: Reply) -> Response:
        headers: dict[str, str] = {}
        details: list[dict[str, Any]] = []
        if reply.retry_after is not None:
            headers["retry-after"] = f"{reply.retry_after:g}"
            details.append({"@type": "type.googleapis.com/google.rpc.RetryInfo",
                            "retryDelay": f"{reply.retry_after:g}s"})
        status = _STATUS.get(reply.status, "INTERNAL" if reply.status >= 500 else "UNKNOWN")
        error: dict[str, Any] = {"code": reply.status, "message": reply.message,
                                 "status": status}
        if details:
            error["details"] = details
        return JSONResponse({"error": error}, status_code=reply.status, headers=headers)

    def extra_routes(self) -> Sequence[Route]:
        async def count_tokens(request: Request) -> Response:
            return JSONResponse({"totalTokens": 100})
        return (Route("/{version}/models/{model}:countTokens", count_tokens,
                      methods=["POST"]),)


def _chunk(parts: list[dict[str, Any]], model: str, response_id: str,
           usage: dict[str, Any], *, final: bool) -> dict[str, Any]:
    candidate: dict[str, Any] = {"content": {"role": "model", "parts": parts}, "index": 0}
    if final:
        candidate["finishReason"] = "STOP"
    return {"candidates": [candidate], "usageMetadata": usage,
            "modelVersion": model, "responseId": response_id}


def _event(data: dict[str, Any]) -> bytes:
    """One event as the Gemini API sends it with ``alt=sse`` (CRLF line ends)."""
    return f"data: {json.dumps(data, separators=(',', ':'))}\r\n\r\n".encode()


def _with_own_tools(offered: dict[str, Any]) -> dict[str, Any]:
    """``offered`` plus gemini's own file and shell tools where the request left them out
    (Gemini CLI hides the tools its approval mode denies): a scripted call then names
    ``write_file`` / ``run_shell_command``, which the CLI refuses as unregistered."""
    out = dict(offered)
    if not any(name in offered for name in WRITE_TOOLS):
        out["write_file"] = {"properties": {"file_path": {}, "content": {}}}
    if not any(name in offered for name in SHELL_TOOLS):
        out["run_shell_command"] = {"properties": {"command": {}}}
    return out


def _workspace(parsed: Parsed) -> str | None:
    """The first workspace directory the CLI's ``<session_context>`` names."""
    for message in parsed.messages:
        found = _WORKSPACE.search(message.text)
        if found:
            return found.group(1).strip()
    return None
