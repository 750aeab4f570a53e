"""The ``gemini`` adapter (Gemini CLI headless mode, ``--output-format stream-json``).

Launch: ``gemini --output-format stream-json [--skip-trust] --approval-mode MODE [--model M]
ARGS`` with the prompt on stdin. Headless mode runs whenever stdin is not a terminal
(``packages/core/src/utils/headless.ts``) and then reads the prompt from stdin, up to
8 MB (``packages/cli/src/utils/readStdin.ts``), so the prompt is never in argv.
``--skip-trust`` (``untrusted: allow``, the default) trusts the working folder for this
run: headless Gemini CLI otherwise exits 55 in a folder ``~/.gemini/trustedFolders.json``
does not trust (``packages/cli/src/utils/userStartupWarnings.ts``), which
``untrusted: refuse`` keeps. Gemini CLI has no agent flag; ``agent:`` is not used.

Permissions map to the approval mode. Headless, every tool call the policy engine would
ask about is denied and the tool is not even offered to the model
(``packages/cli/src/config/config.ts``, ``policy/``): ``read-only`` is ``default``
(read, list, search only), ``edit`` is ``auto_edit`` (``write_file``/``replace`` too, no
shell), ``full`` is ``yolo`` (shell too). ``plan``, the CLI's own "read-only" mode, is not
used: it still lets the model write plan files under ``~/.gemini``.

Read, following the stream-json events (``packages/core/src/output/types.ts``,
``packages/cli/src/nonInteractiveCli.ts``), one JSON object per line: ``init``
(``session_id``, ``model``), ``message`` (``role: user`` echoes the prompt; ``role:
assistant`` with ``delta: true`` carries the answer's pieces), ``tool_use`` (``tool_name``,
``tool_id``, ``parameters``), ``tool_result`` (``tool_id``, ``status: success | error``,
``error: {type, message}``), ``error`` (``severity``, ``message``: a warning, or an invalid
stream), then one ``result`` (``status: success | error``, ``error: {type, message}``,
``stats: {input_tokens, output_tokens, ...}``). The answer is the assistant text after the
last tool call, as the CLI's own ``json`` output gives it. A tool result with an error of
type ``tool_not_registered`` (the approval mode hid the tool), ``policy_violation`` or
``path_not_in_workspace`` is a denial.

Errors: the result event's message (``[API Error: ...]``) carries the API's own error body
for most statuses but not for 429 or 503; the status is then read from what the CLI printed
on stderr (its error dump ends with ``status: 429``). Failures before the session starts
(no credentials, exit 41; an untrusted folder, exit 55) are plain text on stderr only.
Gemini CLI's single-object ``--output-format json`` (``response``, ``stats``, ``error``)
is read too, should a user's ``args`` ask for it.

Resume: ``--resume SESSION_ID`` continues a session the CLI recorded under
``~/.gemini/tmp/<project>/chats`` for the same working folder
(``packages/cli/src/utils/sessionUtils.ts``), headless too.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from typing import Any

from interlock.runtime.agents.base import Completion
from interlock.runtime.agents.events import (
    add,
    count,
    json_document,
    json_events,
    mapping,
    status_reason,
)
from interlock.runtime.config.agents import AgentConfig, AgentLaunch, Permissions
from interlock.runtime.engine.agent_output import AgentOutput, FailureReason, Usage

PERMISSION_FLAGS: dict[Permissions, tuple[str, ...]] = {
    "read-only": ("--approval-mode", "default"), "edit": ("--approval-mode", "auto_edit"),
    "full": ("--approval-mode", "yolo")}
UNTRUSTED_FLAG = "--skip-trust"  # run in a folder gemini does not trust (untrusted: allow)
# Tool error types (packages/core/src/tools/tool-error.ts) that mean the CLI refused the
# call rather than the call failing.
DENIAL_TYPES = frozenset({"tool_not_registered", "policy_violation", "path_not_in_workspace"})
_SUBJECT_KEYS = ("file_path", "absolute_path", "path", "dir_path", "command", "url", "pattern",
                 "query")
_API_ERROR = re.compile(r'\{"error":\s*\{"code":\s*(\d{3})')
_STATUS_LINE = re.compile(r"^\s*(?:status|code):\s*(\d{3})\b", re.MULTILINE)
# The CLI's own words where no status is printed (packages/cli/src/
# validateNonInterActiveAuth.ts, packages/cli/src/config/auth.ts,
# packages/core/src/code_assist/oauth2.ts, packages/core/src/utils/errorParsing.ts).
_TEXT_REASONS: tuple[tuple[str, FailureReason], ...] = (
    ("API key not valid", "auth"), ("API_KEY_INVALID", "auth"),
    ("Please set an Auth method", "auth"), ("must specify the GEMINI_API_KEY", "auth"),
    ("Manual authorization is required", "auth"), ("Error authenticating", "auth"),
    ("not running in a trusted directory", "permission_denied"),
    ("To increase your limits", "rate_limited"), ("quota", "rate_limited"),
    ("ModelNotFoundError", "not_found"), ("is not found", "not_found"),
    ("Error resuming session", "not_found"),
    ("terminated", "unavailable"), ("fetch failed", "unavailable"),
    ("ECONNREFUSED", "unavailable"), ("ECONNRESET", "unavailable"))
_STDERR_NOISE = ("Warning: 256-color", "Ripgrep is not available", "[STARTUP]",
                 "YOLO mode is enabled", "Approval mode overridden")


class GeminiAdapter:
    cli = "gemini"
    completion: Completion = "exit"

    def launch(self, config: AgentConfig, prompt: str) -> AgentLaunch:
        return config.launch_with(self._head(config), prompt)

    def resume(self, config: AgentConfig, session: str, prompt: str) -> AgentLaunch | None:
        return config.launch_with((*self._head(config), "--resume", session), prompt)

    def _head(self, config: AgentConfig) -> tuple[str, ...]:
        head = ["gemini", "--output-format", "stream-json",
                *((UNTRUSTED_FLAG,) if config.untrusted == "allow" else ()),
                *PERMISSION_FLAGS[config.allowed]]
        if config.model:
            head += ["--model", config.model]
        return tuple(head)

    def read(self, stdout: str, stderr: str = "") -> AgentOutput:
        events = [e for e in json_events(stdout) if isinstance(e.get("type"), str)]
        if not events:
            doc = json_document(stdout)
            if doc is not None and ("response" in doc or "error" in doc):
                return _document(doc, stderr)
            return _startup_failure(stderr)
        return _stream(events, stderr)


def _stream(events: Iterable[dict[str, Any]], stderr: str) -> AgentOutput:
    answer: list[str] = []
    calls: dict[str, str] = {}
    denials: list[str] = []
    session: str | None = None
    problem: str | None = None
    for event in events:
        kind = event["type"]
        if kind == "init":
            session = _text(event.get("session_id")) or session
        elif kind == "message" and event.get("role") == "assistant":
            answer.append(_text(event.get("content")))
        elif kind == "tool_use":
            answer.clear()
            calls[_text(event.get("tool_id"))] = _call(event)
        elif kind == "tool_result":
            answer.clear()
            failure = mapping(event.get("error"))
            if event.get("status") == "error" and failure.get("type") in DENIAL_TYPES:
                denials.append(calls.get(_text(event.get("tool_id")), "a tool call"))
        elif kind == "error" and event.get("severity") == "error":
            problem = _text(event.get("message")) or problem
        elif kind == "result":
            stats = mapping(event.get("stats"))
            error = reason = None
            if event.get("status") == "error":
                failure = mapping(event.get("error"))
                detail = _text(failure.get("message")) or problem or "no result"
                error = f"gemini error: {_one_line(detail)}"
                reason = _reason(detail, stderr)
            return AgentOutput(answer="".join(answer),
                               usage=Usage(count(stats.get("input_tokens")),
                                           count(stats.get("output_tokens"))),
                               error=error, final=True, reason=reason,
                               denials=tuple(denials), session=session)
    return AgentOutput(answer="".join(answer), denials=tuple(denials), session=session)


def _document(doc: Mapping[str, Any], stderr: str) -> AgentOutput:
    """Gemini CLI's ``--output-format json`` object (``packages/core/src/output/
    json-formatter.ts``): ``session_id``, ``response``, ``stats.models.NAME.tokens``
    (``prompt``, ``candidates``), ``error: {type, message, code}``."""
    inputs: int | None = None
    outputs: int | None = None
    for model in mapping(mapping(doc.get("stats")).get("models")).values():
        tokens = mapping(mapping(model).get("tokens"))
        inputs = add(inputs, count(tokens.get("prompt")))
        outputs = add(outputs, count(tokens.get("candidates")))
    error = reason = None
    if doc.get("error") is not None:
        detail = mapping(doc.get("error"))
        message = _text(detail.get("message")) or json.dumps(doc.get("error"))
        error = f"gemini error: {_one_line(message)}"
        code = detail.get("code")  # an HTTP status, or the CLI's exit code (41: auth)
        status = code if isinstance(code, int) and 100 <= code < 600 else None
        reason = _reason(message, stderr, status)
    response = doc.get("response")
    return AgentOutput(answer=response if isinstance(response, str) else "",
                       usage=Usage(inputs, outputs), error=error, final=True, reason=reason,
                       session=_text(doc.get("session_id")) or None)


def _startup_failure(stderr: str) -> AgentOutput:
    """No event at all: what the CLI said on stderr before its session began (exit 41 no
    credentials, 55 an untrusted folder, 42 an unknown session, 1 a bad flag), if
    anything. A run that began always prints events, so this is only ever a failure."""
    document = _last_object(stderr)
    if document is not None and "error" in document:
        return _document(document, stderr)
    said: list[str] = []
    for line in stderr.splitlines():
        text = line.strip()
        if text.startswith("Usage: "):  # yargs prints its help after the problem
            break
        if text and not text.startswith(_STDERR_NOISE) and not text.startswith("at "):
            said.append(text)
    if not said:
        return AgentOutput(answer="")
    return AgentOutput(answer="", error=f"gemini error: {_one_line(' '.join(said[:2]))}",
                       reason=_reason(stderr, ""))


def _last_object(text: str) -> dict[str, Any] | None:
    """The last JSON object of ``text`` that starts a line (``--output-format json``
    prints its error object on stderr after the error dump)."""
    start = len(text)
    while (start := text.rfind("{", 0, start)) >= 0:
        if start == 0 or text[start - 1] == "\n":
            document = json_document(text[start:])
            if document is not None:
                return document
    return None


def _call(event: Mapping[str, Any]) -> str:
    """``write_file /w/hello.txt``: the tool and what it was asked to act on."""
    name = _text(event.get("tool_name")) or "tool"
    parameters = mapping(event.get("parameters"))
    subject = next((parameters[k] for k in _SUBJECT_KEYS if isinstance(parameters.get(k), str)),
                   None)
    if subject is None:
        subject = json.dumps(dict(parameters), ensure_ascii=False) if parameters else ""
    return f"{name} {subject}".strip()


def _reason(message: str, stderr: str, status: int | None = None) -> FailureReason | None:
    """Why the call failed: ``status`` (an HTTP status the CLI reported), else the one in
    the API's error body (in the message or on stderr), else the last ``status: N`` /
    ``code: N`` of the error dump on stderr, else the CLI's own words. A 400 that says the
    key is invalid (the Gemini API's answer to a bad key) is ``auth``."""
    if status is None:
        found = _API_ERROR.search(message) or _API_ERROR.search(stderr)
        statuses = [found.group(1)] if found else _STATUS_LINE.findall(stderr)
        status = int(statuses[-1]) if statuses else None
    said = _text_reason(message) or _text_reason(stderr)
    reason = status_reason(status)
    if reason == "invalid_request" and said == "auth":
        return said
    return reason or said


def _text_reason(text: str) -> FailureReason | None:
    return next((reason for words, reason in _TEXT_REASONS if words in text), None)


def _text(value: Any) -> str:
    return value if isinstance(value, str) else ""


def _one_line(text: str) -> str:
    return " ".join(text.split())
