"""The ``claude`` adapter (Claude Code in print mode, streaming JSON).

Launch: ``claude -p --output-format stream-json --verbose --permission-mode MODE
[--allowedTools Bash] [--model M] [--agent A] ARGS`` with the prompt on stdin (print mode
reads it from stdin when no prompt argument is given, so no prompt text is ever in argv;
stream-json needs ``--verbose``; ``--agent NAME`` selects a configured subagent).
``permissions`` maps to Claude Code's own permission modes: ``read-only`` -> ``default``
(in print mode every tool that needs a permission is refused: writes, edits, commands),
``edit`` -> ``acceptEdits`` (file edits, and filesystem commands such as ``mkdir`` or a
redirect, inside the working folder; other commands refused), ``full`` -> ``acceptEdits``
plus ``--allowedTools Bash`` (every command; ``bypassPermissions`` is refused when running
as root). A steer continues the conversation: ``--resume SESSION`` (:meth:`resume`).

Read, following the stream-json format Claude Code prints (checked against the real CLI,
tests/support/captured/claude/): one JSON object per line: ``system`` (``subtype: init``,
``session_id``), ``assistant`` (``message.content`` blocks; text in ``{"type": "text"}``),
``user`` (tool results), then one final ``result`` event: ``subtype``, ``is_error``,
``api_error_status`` (the HTTP status of a failed API call, or null), ``result`` (the answer,
or the CLI's own error text such as "Not logged in · Please run /login"),
``total_cost_usd``, ``usage``, ``modelUsage`` (per model: ``inputTokens``,
``outputTokens``, ``costUSD``) and ``permission_denials`` (``tool_name``, ``tool_input``: a
refused tool call, which does not make the result an error).
"""

from __future__ import annotations

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

PERMISSION_FLAGS: dict[Permissions, tuple[str, ...]] = {
    "read-only": ("--permission-mode", "default"),
    "edit": ("--permission-mode", "acceptEdits"),
    "full": ("--permission-mode", "acceptEdits", "--allowedTools", "Bash"),
}


class ClaudeAdapter:
    cli = "claude"
    completion: Completion = "exit"

    def launch(self, config: AgentConfig, prompt: str) -> AgentLaunch:
        return config.launch_with(self._head(config), prompt)

    def resume(self, config: AgentConfig, session: str, prompt: str) -> AgentLaunch | None:
        return config.launch_with((*self._head(config), "--resume", session), prompt)

    def _head(self, config: AgentConfig) -> tuple[str, ...]:
        head = ["claude", "-p", "--output-format", "stream-json", "--verbose",
                *PERMISSION_FLAGS[config.allowed]]
        if config.model:
            head += ["--model", config.model]
        if config.agent:
            head += ["--agent", config.agent]
        return tuple(head)

    def read(self, stdout: str, stderr: str = "") -> AgentOutput:
        answer = ""
        session: str | None = None
        for event in json_events(stdout):
            kind = event.get("type")
            session = _text(event.get("session_id")) or session
            if kind == "assistant":
                blocks = mapping(event.get("message")).get("content")
                texts = [str(b.get("text", "")) for b in blocks or ()
                         if isinstance(b, dict) and b.get("type") == "text"]
                if texts:
                    answer = "".join(texts)
            elif kind == "result":
                return _result(event, answer, session)
        error = _stderr_error(stderr)
        return AgentOutput(answer=answer, session=session, error=error,
                           reason=_reason(None, error or ""))


def _result(event: Mapping[str, Any], answer_so_far: str, session: str | None
            ) -> AgentOutput:
    result = event.get("result")
    text = result if isinstance(result, str) else answer_so_far
    subtype = str(event.get("subtype") or "")
    failed = event.get("is_error") is True or subtype.startswith("error")
    error: str | None = None
    reason: FailureReason | None = None
    if failed:
        errors = event.get("errors")
        listed = "; ".join(str(e) for e in errors) if isinstance(errors, list) else ""
        detail = (listed if subtype.startswith("error") and listed else text.strip()
                  ) or listed or subtype or "no result"
        error = f"claude: {detail}"
        status = event.get("api_error_status")
        reason = _reason(status if isinstance(status, int) else None, detail)
    return AgentOutput(answer="" if failed else text, usage=_usage(event), error=error,
                       final=True, reason=reason, denials=_denials(event), session=session)


def _usage(event: Mapping[str, Any]) -> Usage:
    """Tokens summed over ``modelUsage`` (every model the call used, retries included),
    else the result's ``usage``; the cost is ``total_cost_usd``."""
    models = [mapping(m) for m in mapping(event.get("modelUsage")).values()]
    inputs: int | None = None
    outputs: int | None = None
    for model in models:
        inputs = add(inputs, count(model.get("inputTokens")))
        outputs = add(outputs, count(model.get("outputTokens")))
    if inputs is None and outputs is None:
        usage = mapping(event.get("usage"))
        inputs, outputs = count(usage.get("input_tokens")), count(usage.get("output_tokens"))
    return Usage(input_tokens=inputs, output_tokens=outputs,
                 cost_usd=amount(event.get("total_cost_usd")))


def _denials(event: Mapping[str, Any]) -> tuple[str, ...]:
    """Each refused tool call as ``Tool target`` (the path, the command, or the input)."""
    denied: list[str] = []
    for item in event.get("permission_denials") or ():
        entry = mapping(item)
        tool = str(entry.get("tool_name") or "tool")
        given = mapping(entry.get("tool_input"))
        target = (given.get("file_path") or given.get("notebook_path") or given.get("command")
                  or given.get("path") or "")
        denied.append(f"{tool} {target}".strip())
    return tuple(denied)


def _reason(status: int | None, text: str) -> FailureReason | None:
    """What kind of failure the API status, else the CLI's own words, say (claude reports
    no status when it is not logged in or cannot connect)."""
    if status == 403:
        return "auth"  # Anthropic's 403: a key without access (permission_error)
    reason = status_reason(status)
    if reason is not None:
        return reason
    lowered = text.lower()
    if "not logged in" in lowered or "api key" in lowered:
        return "auth"
    if "rate limit" in lowered or "(429)" in lowered:
        return "rate_limited"
    if "unable to connect" in lowered or "overloaded" in lowered:
        return "unavailable"
    return None


def _stderr_error(stderr: str) -> str | None:
    """The CLI's own message when it stopped before any result (a usage error)."""
    lines = [line.strip() for line in stderr.splitlines() if line.strip()]
    return f"claude: {lines[-1]}" if lines else None


def _text(value: object) -> str | None:
    return value if isinstance(value, str) and value else None
