"""The ``opencode`` adapter (``opencode run --format json``).

Launch: ``opencode run --format json --title "" --print-logs --log-level ERROR
[--model provider/model] [--agent A] ARGS`` with the prompt on stdin: ``opencode run``
reads its piped stdin as the message when no message argument is given (``Bun.stdin.text()``
in packages/opencode/src/cli/cmd/run.ts), so no prompt text is ever in argv (a 1 MB prompt
arrives whole). ``--title ""`` names the session after the prompt's first 50 characters
instead of asking the model for a title (one model call fewer); ``--print-logs --log-level
ERROR`` puts opencode's error log on stderr, where the cause of an "Unexpected server
error" (``ref=err_...``) is found. opencode takes its working folder from ``$PWD`` before the
process's real one (run.ts): the spawners set ``PWD`` to the agent's folder
(:func:`interlock.runtime.dispatch.process.working_folder`).

Permissions are opencode's own permission rules, given per call in ``OPENCODE_PERMISSION``
(JSON merged over the ``permission`` of every config file; packages/opencode/src/config/
config.ts): every tool ``ask``, which ``opencode run`` answers by rejecting the call (it
cannot ask anyone), then ``allow`` for reading (``read`` keeps opencode's own ``ask`` for
``.env`` files), searching, todo lists, skills and subagents (``task``: the subagents get
the same rules); ``edit`` adds ``edit`` (write, edit, patch), ``full`` adds ``bash`` and the
web tools. Folders outside the working one stay ``ask`` (opencode's own scratch folders
allowed). The rejected call is shown to the model, and ``OPENCODE_CONFIG_CONTENT`` sets
``experimental.continue_loop_on_deny`` so the agent goes on to its answer instead of
stopping (merged with an ``OPENCODE_CONFIG_CONTENT`` of the agent's ``env``; an
``OPENCODE_PERMISSION`` there is replaced). An agent's own ``permission`` in the user's
opencode config still applies after these rules.

Read, following the ``--format json`` events of ``opencode run`` (run.ts, checked against
opencode 1.18.33: tests/support/captured/opencode/): one JSON object per line with
``type``, ``timestamp``, ``sessionID`` and a ``part``: ``step_start``, ``text``
(``part.text``), ``reasoning``, ``tool_use`` (``part.tool``, ``part.state``: ``status``
``completed`` or ``error``, ``input``, ``output`` / ``error``), ``step_finish``
(``part.reason``, ``part.cost``, ``part.tokens: {input, output, reasoning, cache: {read,
write}}``) and ``error`` (``error: {name, data: {message, statusCode, isRetryable,
responseBody}}``, then exit 1). The answer is the text of the last step that printed
text; usage sums the step_finish tokens and costs; a ``step_finish`` whose reason is not
``tool-calls`` ends the run (``final``). A tool call whose error is opencode's
``PermissionRejectedError`` or ``PermissionDeniedError`` (packages/opencode/src/permission)
is a denial. On stderr: opencode's ``Error: ...`` lines (a usage error before any event)
and its warning that an ``--agent`` is unknown or a subagent, after which opencode runs its
default agent: read as a ``not_found`` / ``invalid_request`` error.

Resume: ``--session ID`` continues the session (opencode's database under
``~/.local/share/opencode``) with the steer on stdin, headless too. It must run in the
session's working folder: elsewhere the model answers but ``opencode run`` never exits.
"""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Mapping
from typing import Any

from interlock.runtime.agents.base import Completion
from interlock.runtime.agents.events import (
    add,
    amount,
    count,
    json_events,
    mapping,
    status_reason,
)
from interlock.runtime.config.agents import AgentConfig, AgentLaunch, Permissions
from interlock.runtime.engine.agent_output import AgentOutput, FailureReason, Usage

_READ_ONLY: dict[str, Any] = {
    "*": "ask",
    "read": {"*": "allow", "*.env": "ask", "*.env.*": "ask", "*.env.example": "allow"},
    "glob": "allow", "grep": "allow", "list": "allow", "lsp": "allow", "skill": "allow",
    "todowrite": "allow", "task": "allow",
    "external_directory": {"*": "ask", "~/.local/share/opencode/tool-output/*": "allow",
                           "/tmp/opencode/*": "allow"},
}
PERMISSION_RULES: dict[Permissions, dict[str, Any]] = {
    "read-only": _READ_ONLY,
    "edit": {**_READ_ONLY, "edit": "allow"},
    "full": {**_READ_ONLY, "edit": "allow", "bash": "allow", "webfetch": "allow",
             "websearch": "allow", "codesearch": "allow"},
}
CONFIG_CONTENT = {"experimental": {"continue_loop_on_deny": True}}
# Tool errors that are opencode refusing the call (packages/opencode/src/permission:
# PermissionRejectedError, PermissionCorrectedError, PermissionDeniedError).
_REFUSALS = ("The user rejected permission", "The user has specified a rule which prevents")
_SUBJECT_KEYS = ("filePath", "path", "command", "url", "pattern", "query", "description")
_ANSI = re.compile(r"\x1b\[[0-9;]*m")
_AGENT_WARNING = re.compile(r'agent "[^"]*" (not found|is a subagent)[^\n]*')
_LOGGED_ERROR = r'ref={ref} error="((?:[^"\\]|\\.)*)"'
# opencode's error names and words where no HTTP status is given (packages/opencode/src/
# session/message-v2.ts, provider/provider.ts, session/retry.ts).
_TEXT_REASONS: tuple[tuple[str, FailureReason], ...] = (
    ("ProviderAuthError", "auth"), ("ProviderModelNotFoundError", "not_found"),
    ("Model not found", "not_found"), ("Provider not found", "not_found"),
    ("ContextOverflowError", "invalid_request"), ("Cannot connect to API", "unavailable"),
    ("Unable to connect", "unavailable"), ("Provider is overloaded", "unavailable"),
    ("Too Many Requests", "rate_limited"), ("rate limit", "rate_limited"))


class OpencodeAdapter:
    cli = "opencode"
    completion: Completion = "exit"

    def launch(self, config: AgentConfig, prompt: str) -> AgentLaunch:
        return self._launch(config, (), prompt)

    def resume(self, config: AgentConfig, session: str, prompt: str) -> AgentLaunch | None:
        return self._launch(config, ("--session", session), prompt)

    def _launch(self, config: AgentConfig, tail: tuple[str, ...], prompt: str) -> AgentLaunch:
        head = ["opencode", "run", "--format", "json", "--title", "", "--print-logs",
                "--log-level", "ERROR", *tail]
        if config.model:
            head += ["--model", config.model]
        if config.agent:
            head += ["--agent", config.agent]
        launch = config.launch_with(tuple(head), prompt)
        env = {**launch.env,
               "OPENCODE_PERMISSION": json.dumps(PERMISSION_RULES[config.allowed]),
               "OPENCODE_CONFIG_CONTENT": _config_content(launch.env)}
        return dataclasses.replace(launch, env=env)

    def read(self, stdout: str, stderr: str = "") -> AgentOutput:
        answer = ""
        step = ""
        inputs: int | None = None
        outputs: int | None = None
        cost: float | None = None
        error: str | None = None
        reason: FailureReason | None = None
        final = False
        session: str | None = None
        denials: list[str] = []
        for event in json_events(stdout):
            kind = event.get("type")
            part = mapping(event.get("part"))
            if session is None and isinstance(event.get("sessionID"), str):
                session = event["sessionID"] or None
            if kind == "step_start":
                step = ""
                final = False
            elif kind == "text":
                step += str(part.get("text", ""))
                answer = step
            elif kind == "tool_use":
                denial = _denial(part)
                if denial is not None:
                    denials.append(denial)
            elif kind == "step_finish":
                tokens = mapping(part.get("tokens"))
                inputs = add(inputs, count(tokens.get("input")))
                outputs = add(outputs, count(tokens.get("output")))
                final = part.get("reason") != "tool-calls"  # a tool call: another step follows
                spent = amount(part.get("cost"))
                if spent is not None:
                    cost = spent if cost is None else cost + spent
            elif kind == "error":
                error, reason = _error(mapping(event.get("error")), stderr)
                final = True
        if error is None:
            error, reason = _stderr_error(stderr)
        return AgentOutput(answer=answer, usage=Usage(inputs, outputs, cost), error=error,
                           final=final, reason=reason, denials=tuple(denials), session=session)


def _config_content(env: Mapping[str, str]) -> str:
    """``OPENCODE_CONFIG_CONTENT``: the agent's own (if its ``env`` sets one), with
    :data:`CONFIG_CONTENT` merged in."""
    try:
        given = json.loads(env.get("OPENCODE_CONFIG_CONTENT") or "{}")
    except ValueError:
        given = {}
    content: dict[str, Any] = dict(given) if isinstance(given, dict) else {}
    experimental = mapping(content.get("experimental"))
    content["experimental"] = {**experimental, **CONFIG_CONTENT["experimental"]}
    return json.dumps(content)


def _denial(part: Mapping[str, Any]) -> str | None:
    """``tool subject`` for a tool call opencode refused (None: not refused)."""
    state = mapping(part.get("state"))
    if state.get("status") != "error" or not str(state.get("error") or "").startswith(
            _REFUSALS):
        return None
    given = mapping(state.get("input"))
    subject = next((str(given[k]) for k in _SUBJECT_KEYS if given.get(k)), "")
    return f"{part.get('tool') or 'tool'} {subject}".strip()


def _error(error: Mapping[str, Any], stderr: str) -> tuple[str, FailureReason | None]:
    """The CLI's words for an ``error`` event, and what kind of failure they say."""
    data = mapping(error.get("data"))
    name = str(error.get("name") or "")
    message = str(data.get("message") or name or "no message")
    ref = data.get("ref")
    if isinstance(ref, str) and ref:  # "Unexpected server error": the cause is logged
        logged = re.search(_LOGGED_ERROR.format(ref=re.escape(ref)), stderr)
        if logged:
            message = _unescape(logged.group(1))
    status = count(data.get("statusCode"))
    text = f"opencode: {message}" + (f" (HTTP {status})" if status is not None else "")
    return text, _reason(status, f"{name} {message}")


def _reason(status: int | None, words: str) -> FailureReason | None:
    reason = status_reason(status)
    if reason is not None:
        return reason
    lowered = words.lower()
    return next((reason for text, reason in _TEXT_REASONS if text.lower() in lowered), None)


def _stderr_error(stderr: str) -> tuple[str | None, FailureReason | None]:
    """An error opencode printed on stderr only: ``Error: ...`` (before any event), or its
    warning that the ``--agent`` asked for is not a primary agent it knows."""
    text = _ANSI.sub("", stderr)
    for line in text.splitlines():
        line = line.strip()
        if line.startswith("Error: "):
            message = line.removeprefix("Error: ")
            return f"opencode: {message}", _reason(None, message)
    warning = _AGENT_WARNING.search(text)
    if warning:
        reason: FailureReason = "not_found" if warning.group(1) == "not found" \
            else "invalid_request"
        return f"opencode: {warning.group(0).strip()}", reason
    return None, None


def _unescape(text: str) -> str:
    try:
        value = json.loads(f'"{text}"')
    except ValueError:
        return text
    return value if isinstance(value, str) else text
