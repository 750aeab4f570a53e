"""OpenAI Responses API (``POST /v1/responses``, ``stream: true``), as codex calls it.

codex reaches it at ``<provider base_url>/responses`` (a ``[model_providers.x]`` entry
with ``wire_api = "responses"``, see :mod:`interlock.testing.clis.codex`). The request
(codex-rs/codex-api/src/requests/responses.rs) carries ``instructions``, ``input`` (a
list of items: ``message`` with ``role`` developer/system/user/assistant and
``input_text``/``output_text`` parts, ``function_call`` / ``function_call_output``,
``custom_tool_call`` / ``custom_tool_call_output``, ``reasoning``, and, for models in
codex's "code mode", an ``additional_tools`` item), and ``tools`` (``function`` with a
JSON-schema ``parameters``, ``custom`` freeform tools such as ``apply_patch``,
``namespace`` groups of either).

The answer is the documented server-sent event stream that codex parses
(codex-rs/codex-api/src/sse/responses.rs): ``response.created``, per output item
``response.output_item.added`` / deltas (``response.output_text.delta``,
``response.function_call_arguments.delta``, ``response.custom_tool_call_input.delta``) /
``response.output_item.done`` (codex acts on the ``done`` item), then
``response.completed`` with ``response.usage`` (``input_tokens``,
``input_tokens_details.cached_tokens``, ``output_tokens``,
``output_tokens_details.reasoning_tokens``, ``total_tokens``). A stream that ends
without ``response.completed`` is, for codex, "stream closed before
response.completed". Errors are the API's ``{"error": {"message", "type", "param",
"code"}}`` with the HTTP status (codex-rs/codex-api/src/api_bridge.rs reads
``error.type``/``error.code``).

Tool calls: a scripted shell command is codex's ``exec_command`` (``cmd``: a string) or
``shell`` (``command``: an argv list) through :func:`interlock.testing.tools.tool_use`;
a scripted file write is codex's freeform ``apply_patch`` tool (an ``*** Add File:``
patch, codex-rs/apply-patch). Models in codex's "code mode" (its default model in 0.171)
are offered neither directly but one freeform ``exec`` tool that runs JavaScript calling
``tools.apply_patch(patch)`` / ``tools.exec_command({cmd})`` (codex-rs/core/src/tools/
code_mode); the call is then such a script. A request that offers no tools at all is one
codex makes on its own: a side request (none seen from ``codex exec`` 0.171).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import PurePosixPath
from typing import Any

from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from interlock.testing.model_server import Ids, Message, Parsed, iter_text, sse
from interlock.testing.replies import Reply, ToolCall, say
from interlock.testing.tools import SHELL_TOOLS, tool_use

# error.type / error.code per status, as the OpenAI API sends them.
_ERRORS: dict[int, tuple[str, str | None]] = {
    400: ("invalid_request_error", None), 401: ("invalid_request_error", "invalid_api_key"),
    403: ("invalid_request_error", "unsupported_country_region_territory"),
    404: ("invalid_request_error", "model_not_found"), 429: ("requests", "rate_limit_exceeded"),
    500: ("server_error", None), 503: ("server_error", "server_is_overloaded")}
_CWD = re.compile(r"<cwd>([^<]+)</cwd>")
# User messages codex adds as context of its own (not the user's words).
_CONTEXT_PREFIXES = ("<environment_context>", "# AGENTS.md instructions", "<user_instructions>",
                     "<permissions instructions>", "<skills_instructions>")
APPLY_PATCH = "apply_patch"
CODE_MODE = "exec"  # codex's "code mode": one JavaScript tool that calls the others


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    parts = [str(p.get("text", "")) for p in content or ()
             if isinstance(p, dict) and p.get("type") in ("input_text", "output_text", "text")]
    return "\n".join(parts)


def _call_text(item: Mapping[str, Any]) -> str:
    arguments = item.get("arguments", item.get("input", ""))
    return f"[{item.get('name')}] {arguments}"


def _messages(body: Mapping[str, Any]) -> tuple[Message, ...]:
    out: list[Message] = []
    if body.get("instructions"):
        out.append(Message("system", str(body["instructions"])))
    items = body.get("input")
    if isinstance(items, str):
        return (*out, Message("user", items))
    for item in items or ():
        if not isinstance(item, dict):
            continue
        kind = item.get("type", "message")
        if kind == "message":
            role = str(item.get("role", "user"))
            text = _text(item.get("content"))
            if role == "developer" or (role == "user"
                                       and text.lstrip().startswith(_CONTEXT_PREFIXES)):
                role = "system"
            out.append(Message(role, text))
        elif kind in ("function_call", "custom_tool_call", "local_shell_call"):
            out.append(Message("assistant", _call_text(item)))
        elif kind in ("function_call_output", "custom_tool_call_output"):
            output = item.get("output")
            out.append(Message("tool", output if isinstance(output, str)
                               else _text(output) or json.dumps(output)))
    return tuple(out)


def _offered(tools: Iterable[Any], into: dict[str, Any]) -> None:
    for tool in tools:
        if not isinstance(tool, dict):
            continue
        kind = tool.get("type")
        if kind == "namespace":
            _offered(tool.get("tools") or (), into)
        elif kind == "function" and tool.get("name"):
            into[str(tool["name"])] = tool.get("parameters") or {}
        elif kind == "custom" and tool.get("name"):
            into[str(tool["name"])] = {"type": "custom", "format": tool.get("format")}


def _tools(body: Mapping[str, Any]) -> dict[str, Any]:
    tools: dict[str, Any] = {}
    _offered(body.get("tools") or (), tools)
    for item in body.get("input") or ():
        if isinstance(item, dict) and item.get("type") == "additional_tools":
            _offered(item.get("tools") or (), tools)
    return tools


def add_file_patch(path: str, content: str) -> str:
    """An ``apply_patch`` patch that creates ``path`` with ``content`` (codex's patch
    grammar, codex-rs/apply-patch/apply_patch_tool_instructions.md: every added line
    starts with ``+``)."""
    lines = content.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    body = "".join(f"+{line}\n" for line in lines)
    return f"*** Begin Patch\n*** Add File: {path}\n{body}*** End Patch\n"


class ResponsesWire:
    name = "openai_responses"
    paths: Sequence[str] = ("/v1/responses",)

    def parse(self, path: str, body: Any) -> Parsed:
        body = body if isinstance(body, dict) else {}
        tools = _tools(body)
        return Parsed(messages=_messages(body), model=str(body.get("model", "")),
                      stream=bool(body.get("stream", False)), side=not tools, tools=tools)

    def side_reply(self, parsed: Parsed) -> Reply:
        return say("ok", input_tokens=10, output_tokens=1)

    def render(self, reply: Reply, parsed: Parsed, ids: Ids) -> Response | Iterable[bytes]:
        items = self._items(reply, parsed, ids)
        response_id = ids.next("resp_")
        usage = {"input_tokens": reply.input_tokens,
                 "input_tokens_details": {"cached_tokens": 0},
                 "output_tokens": reply.output_tokens,
                 "output_tokens_details": {"reasoning_tokens": 0},
                 "total_tokens": reply.input_tokens + reply.output_tokens}
        response = {"id": response_id, "object": "response", "status": "completed",
                    "model": parsed.model, "output": items, "usage": usage}
        if not parsed.stream:
            return JSONResponse(response)
        return list(self._events(items, response))

    def _items(self, reply: Reply, parsed: Parsed, ids: Ids) -> list[dict[str, Any]]:
        items: list[dict[str, Any]] = []
        if reply.text:
            items.append({"type": "message", "id": ids.next("msg_"), "status": "completed",
                          "role": "assistant", "content": [
                              {"type": "output_text", "text": reply.text, "annotations": []}]})
        cwd = _working_directory(parsed)
        for call in reply.tools:
            items.append(self._call(call, parsed, ids, cwd))
        return items

    def _call(self, call: ToolCall, parsed: Parsed, ids: Ids, cwd: str | None
              ) -> dict[str, Any]:
        call_id = ids.next("call_")
        if _code_mode(call, parsed.tools):
            return {"type": "custom_tool_call", "id": ids.next("ctc_"), "status": "completed",
                    "call_id": call_id, "name": CODE_MODE, "input": _script(call, cwd)}
        if call.kind == "write_file" and APPLY_PATCH in parsed.tools:
            path = call.path
            if cwd and not PurePosixPath(path).is_absolute():
                path = str(PurePosixPath(cwd) / path)
            patch = add_file_patch(path, call.content)
            if parsed.tools[APPLY_PATCH].get("type") == "custom":
                return {"type": "custom_tool_call", "id": ids.next("ctc_"), "status": "completed",
                        "call_id": call_id, "name": APPLY_PATCH, "input": patch}
            return {"type": "function_call", "id": ids.next("fc_"), "status": "completed",
                    "call_id": call_id, "name": APPLY_PATCH,
                    "arguments": json.dumps({"input": patch})}
        name, arguments = tool_use(call, parsed.tools, cwd=cwd)
        return {"type": "function_call", "id": ids.next("fc_"), "status": "completed",
                "call_id": call_id, "name": name, "arguments": json.dumps(arguments)}

    def _events(self, items: list[dict[str, Any]], response: dict[str, Any]
                ) -> Iterator[bytes]:
        sequence = 0

        def event(kind: str, **data: Any) -> bytes:
            nonlocal sequence
            sequence += 1
            return sse(kind, {"type": kind, "sequence_number": sequence, **data})

        pending = {**response, "status": "in_progress", "output": [], "usage": None}
        yield event("response.created", response=pending)
        yield event("response.in_progress", response=pending)
        for index, item in enumerate(items):
            kind = item["type"]
            if kind == "message":
                text = item["content"][0]["text"]
                yield event("response.output_item.added", output_index=index,
                            item={**item, "status": "in_progress", "content": []})
                part = {"type": "output_text", "text": "", "annotations": []}
                yield event("response.content_part.added", item_id=item["id"],
                            output_index=index, content_index=0, part=part)
                for piece in iter_text(text):
                    yield event("response.output_text.delta", item_id=item["id"],
                                output_index=index, content_index=0, delta=piece)
                yield event("response.output_text.done", item_id=item["id"],
                            output_index=index, content_index=0, text=text)
                yield event("response.content_part.done", item_id=item["id"],
                            output_index=index, content_index=0, part={**part, "text": text})
            elif kind == "function_call":
                yield event("response.output_item.added", output_index=index,
                            item={**item, "status": "in_progress", "arguments": ""})
                yield event("response.function_call_arguments.delta", item_id=item["id"],
                            output_index=index, delta=item["arguments"])
                yield event("response.function_call_arguments.done", item_id=item["id"],
                            output_index=index, arguments=item["arguments"])
            else:  # custom_tool_call
                yield event("response.output_item.added", output_index=index,
                            item={**item, "status": "in_progress", "input": ""})
                yield event("response.custom_tool_call_input.delta", item_id=item["id"],
                            output_index=index, delta=item["input"])
                yield event("response.custom_tool_call_input.done", item_id=item["id"],
                            output_index=index, input=item["input"])
            yield event("response.output_item.done", output_index=index, item=item)
        yield event("response.completed", response=response)

    def error(self, reply: Reply) -> Response:
        kind, code = _ERRORS.get(reply.status, ("server_error" if reply.status >= 500
                                                else "invalid_request_error", None))
        headers = {"x-request-id": "req_scripted"}
        if reply.retry_after is not None:
            headers["retry-after"] = f"{reply.retry_after:g}"
            headers["retry-after-ms"] = f"{reply.retry_after * 1000:.0f}"
        return JSONResponse({"error": {"message": reply.message, "type": kind, "param": None,
                                       "code": code}},
                            status_code=reply.status, headers=headers)

    def extra_routes(self) -> Sequence[Route]:
        return ()


def _code_mode(call: ToolCall, offered: Mapping[str, Any]) -> bool:
    """Whether codex offered its tools only through code mode's ``exec`` (its newer
    models: codex-rs/core/src/tools/code_mode), not directly."""
    if offered.get(CODE_MODE, {}).get("type") != "custom":
        return False
    direct = (APPLY_PATCH,) if call.kind == "write_file" else SHELL_TOOLS
    return not any(name in offered for name in direct)


def _script(call: ToolCall, cwd: str | None) -> str:
    """The JavaScript a model sends code mode's ``exec`` for ``call``: the nested
    ``tools.apply_patch(patch)`` or ``tools.exec_command({cmd})``, its result as text."""
    if call.kind == "write_file":
        path = call.path
        if cwd and not PurePosixPath(path).is_absolute():
            path = str(PurePosixPath(cwd) / path)
        invoke = f"tools.apply_patch({json.dumps(add_file_patch(path, call.content))})"
    else:
        invoke = f"tools.exec_command({json.dumps({'cmd': call.command})})"
    return (f"const result = await {invoke};\n"
            "text(typeof result === 'string' ? result : JSON.stringify(result));\n")


def _working_directory(parsed: Parsed) -> str | None:
    for message in parsed.messages:
        found = _CWD.search(message.text)
        if found:
            return found.group(1).strip()
    return None
