"""The ``codex`` adapter (OpenAI Codex CLI, ``codex exec --json``).

Launch: ``codex exec --json [--skip-git-repo-check] --disable unbounded_connection_retries
--sandbox MODE [--model M] [--profile P] ARGS -`` with the prompt on stdin (``-`` as the
prompt makes ``codex exec`` read it from stdin, so no prompt text is ever in argv).
``--skip-git-repo-check`` (``untrusted: allow``, the default) lets it run in a folder
outside a git repository; with ``untrusted: refuse`` it exits 1 there ("Not inside a
trusted directory and --skip-git-repo-check was not specified."; codex 0.171's exec checks
only for a git work tree: a project's ``trust_level`` in config.toml does not count).
Codex has no agent flag; ``agent:`` names a Codex profile (``--profile NAME`` layers
``$CODEX_HOME/NAME.config.toml`` over the user's config; an unknown name is silently
ignored by codex 0.171). ``--disable unbounded_connection_retries``: an endpoint codex
cannot reach fails the call (``unavailable``) after codex's bounded retries instead of
being retried until the invocation's timeout (codex 0.171's default).

Permissions map to codex's sandbox (``codex exec`` never asks for an approval: whatever
the sandbox does not allow is refused): ``read-only`` -> ``read-only`` (the model still
runs shell commands, its only way to read files, but nothing can write and there is no
network), ``edit`` -> ``workspace-write`` (``apply_patch`` and shell commands may write
inside the working folder, no network), ``full`` -> ``danger-full-access`` (commands
unsandboxed). Codex cannot allow file edits without shell commands: in ``edit`` the model
may also run commands, sandboxed to writing the working folder.

Read, following the ``codex exec --json`` JSONL events (codex-rs/exec/src/exec_events.rs,
checked against the real CLI: tests/support/captured/codex/): ``thread.started``
(``thread_id``: the session), ``turn.started``, ``item.started`` / ``item.updated`` /
``item.completed`` with an ``item`` whose ``type`` is ``agent_message`` (``text``),
``reasoning``, ``command_execution`` (``command``, ``exit_code``, ``status``),
``file_change`` (``changes``, ``status``), ``error`` (a warning such as unknown model
metadata, not a failure), ...; ``turn.completed`` with ``usage: {input_tokens,
cached_input_tokens, output_tokens, ...}``; ``turn.failed`` with ``error: {message}``; and
``error`` events with ``message`` (``Reconnecting... N/M (...)`` while codex retries, then
the final error). The answer is the text of the last completed ``agent_message``; usage
sums every ``turn.completed``. Codex reports no cost.

Refused tool calls never reach stdout. codex logs a refused call on stderr (``ERROR
codex_core::tools::router: error=patch rejected: writing is blocked by read-only sandbox;
...`` or ``error=approval policy is Never; reject command ...``) without its path or
command; a command its sandbox stopped leaves no event at all, only a warning of the
sandbox (``WARN codex_sandboxing::violation: recorded sandbox violation: ...
reason=read_only_file_system path=/abs/file``, the path ``unknown`` for a relative one),
which the launch turns on (``RUST_LOG=error,codex_sandboxing::violation=warn``: codex's
default, errors only, plus those; not when the agent's ``env`` sets ``RUST_LOG``).
Failures before any event (a config error, an unknown option) are plain text on stderr.

Resume: ``codex exec ... resume SESSION -`` continues a recorded session (kept under
``$CODEX_HOME/sessions``) with the steer on stdin; the exec options (sandbox, model,
profile) go before ``resume``, as the resumed run does not keep the first run's sandbox.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import replace
from typing import Any

from interlock.runtime.agents.base import Completion
from interlock.runtime.agents.events import add, count, json_events, mapping, status_reason
from interlock.runtime.config.agents import AgentConfig, AgentLaunch, Permissions
from interlock.runtime.engine.agent_output import AgentOutput, FailureReason, Usage

PERMISSION_FLAGS: dict[Permissions, tuple[str, ...]] = {
    "read-only": ("--sandbox", "read-only"), "edit": ("--sandbox", "workspace-write"),
    "full": ("--sandbox", "danger-full-access")}
UNTRUSTED_FLAG = "--skip-git-repo-check"  # run outside a git repository (untrusted: allow)
RETRYING = "Reconnecting..."  # codex-rs/core: an error event while codex retries
# codex's default log filter (errors only) plus the sandbox's violation records.
RUST_LOG = "error,codex_sandboxing::violation=warn"
# A tool call codex refused (codex-rs/core/src/tools/router.rs logs it as an error) and a
# command its sandbox stopped (codex-rs/sandboxing/src/violation.rs, a warning).
_REFUSED = re.compile(r"\bERROR codex_core::tools::router: error=(.*)$", re.MULTILINE)
_VIOLATION = re.compile(r"\bWARN codex_sandboxing::violation: recorded sandbox violation:"
                        r"(.*)$", re.MULTILINE)
_LOG_LINE = re.compile(r"^\S+Z\s+(?:ERROR|WARN|INFO|DEBUG|TRACE) ")
_PATCH_REFUSED = re.compile(r"^patch rejected: ([^;]*)")
_COMMAND_REFUSED = ("reject command", "rejected by user", "rejected:")
_DASH = " \u2014 "  # "reject command \u2014 you cannot ask for escalated permissions ..."
_VIOLATION_PATH = re.compile(r"\bpath=(\S+)")
_VIOLATION_REASON = re.compile(r"\breason=(\S+)")
_STATUS = re.compile(r"(?:unexpected status|last status:) (\d{3})")
# codex's own words for failures with no status in them (codex-rs/protocol/src/error.rs).
_TEXT_REASONS: tuple[tuple[str, FailureReason], ...] = (
    ("experiencing high demand", "unavailable"), ("at capacity", "unavailable"),
    ("stream disconnected", "unavailable"), ("connection failed", "unavailable"),
    ("stream closed before", "unavailable"), ("idle timeout", "unavailable"),
    ("timed out", "unavailable"), ("usage limit", "rate_limited"),
    ("quota exceeded", "rate_limited"), ("rate limit", "rate_limited"),
    ("does not exist", "not_found"), ("model_not_found", "not_found"),
    ("not logged in", "auth"), ("invalid_api_key", "auth"), ("incorrect api key", "auth"),
    ("missing environment variable", "auth"),
    ("not inside a trusted directory", "permission_denied"),
    ("invalid_request_error", "invalid_request"),
    ("error loading config", "invalid_request"), ("unexpected argument", "invalid_request"),
    ("invalid value", "invalid_request"))
_STDERR_NOISE = ("WARNING: proceeding, even though we could not create PATH aliases",
                 "Reading prompt from stdin", "Stack backtrace:")


class CodexAdapter:
    cli = "codex"
    completion: Completion = "exit"

    def launch(self, config: AgentConfig, prompt: str) -> AgentLaunch:
        return _logging(config.launch_with(self._head(config), prompt, ("-",)))

    def resume(self, config: AgentConfig, session: str, prompt: str) -> AgentLaunch | None:
        return _logging(config.launch_with(self._head(config), prompt,
                                           ("resume", session, "-")))

    def _head(self, config: AgentConfig) -> tuple[str, ...]:
        head = ["codex", "exec", "--json",
                *((UNTRUSTED_FLAG,) if config.untrusted == "allow" else ()),
                "--disable", "unbounded_connection_retries", *PERMISSION_FLAGS[config.allowed]]
        if config.model:
            head += ["--model", config.model]
        if config.agent:
            head += ["--profile", config.agent]
        return tuple(head)

    def read(self, stdout: str, stderr: str = "") -> AgentOutput:
        answer = ""
        inputs: int | None = None
        outputs: int | None = None
        error: str | None = None
        final = False
        session: str | None = None
        denials: list[str] = []
        started = False
        for event in json_events(stdout):
            kind = event.get("type")
            if not isinstance(kind, str):
                continue
            started = True
            if kind == "thread.started":
                session = _text(event.get("thread_id")) or session
            elif kind == "turn.started":
                final = False  # codex may go on with another turn (a goal's next step)
            elif kind == "item.completed":
                item = mapping(event.get("item"))
                item_type = item.get("type", item.get("item_type"))  # item_type: older codex
                if item_type in ("agent_message", "assistant_message"):
                    answer = str(item.get("text", ""))
                elif item_type == "command_execution" and item.get("status") == "declined":
                    denials.append(f"shell {item.get('command', '')}".strip())
            elif kind == "turn.completed":
                usage = mapping(event.get("usage"))
                inputs = add(inputs, count(usage.get("input_tokens")))
                outputs = add(outputs, count(usage.get("output_tokens")))
                error, final = None, True
            elif kind == "turn.failed":
                message = _text(mapping(event.get("error")).get("message"))
                error = f"codex: {message}" if message else error or "codex: the turn failed"
                final = True
            elif kind == "error":
                message = _text(event.get("message")) or "no message"
                if not message.startswith(RETRYING):
                    error = f"codex: {message}"
        denials.extend(_refusals(stderr))
        if not started:
            error = _stderr_error(stderr)
        return AgentOutput(answer="" if error else answer,
                           usage=Usage(inputs, outputs), error=error, final=final,
                           reason=_reason(error) if error else None,
                           denials=tuple(denials), session=session)


def _logging(launch: AgentLaunch) -> AgentLaunch:
    """``launch`` with codex's default log level (errors) plus its sandbox violations, the
    only trace of a command the sandbox stopped (unless the agent's env sets RUST_LOG)."""
    if "RUST_LOG" in launch.env:
        return launch
    return replace(launch, env={**launch.env, "RUST_LOG": RUST_LOG})


def _refusals(stderr: str) -> list[str]:
    """Each tool call codex refused, from its stderr log: ``apply_patch (why)`` for a
    file change and ``shell (why)`` for a command codex would not run (codex names neither
    the path nor the command), ``shell PATH (why)`` for a command its sandbox stopped
    (``path=unknown`` when codex could not tell)."""
    refused: list[str] = []
    for line in stderr.splitlines():
        found = _REFUSED.search(line)
        if found:
            message = found.group(1).strip()
            patch = _PATCH_REFUSED.match(message)
            if patch:
                refused.append(f"apply_patch ({patch.group(1).strip()})")
            elif any(word in message for word in _COMMAND_REFUSED):
                refused.append(f"shell ({message.split(_DASH)[0].strip()})")
            continue
        violation = _VIOLATION.search(line)
        if violation:
            path = _VIOLATION_PATH.search(violation.group(1))
            why = _VIOLATION_REASON.search(violation.group(1))
            subject = f" {path.group(1)}" if path and path.group(1) != "unknown" else ""
            refused.append(f"shell{subject} ({why.group(1) if why else 'sandbox violation'})")
    return refused


def _reason(error: str) -> FailureReason | None:
    """What kind of failure codex's message is: the HTTP status it quotes, else the API
    error body it quotes, else its own words."""
    status = _STATUS.search(error)
    if status:
        return status_reason(int(status.group(1)))
    body = _api_error(error)
    if body is not None:
        kind = f"{body.get('type', '')} {body.get('code', '')}"
        if "invalid_api_key" in kind or "authentication" in kind:
            return "auth"
        if "rate_limit" in kind or "insufficient_quota" in kind:
            return "rate_limited"
        if "not_found" in kind:
            return "not_found"
        if "server_error" in kind:
            return "unavailable"
        return "invalid_request"
    lowered = error.lower()
    return next((reason for words, reason in _TEXT_REASONS if words in lowered), None)


def _api_error(error: str) -> Mapping[str, Any] | None:
    """The API's error object when codex quotes its body (a 400 is printed raw)."""
    start = error.find("{")
    if start < 0:
        return None
    try:
        body, _ = json.JSONDecoder().raw_decode(error, start)
    except ValueError:
        return None
    detail = mapping(body).get("error") if isinstance(body, dict) else None
    return detail if isinstance(detail, Mapping) else None


def _stderr_error(stderr: str) -> str | None:
    """codex's own message when it stopped before printing any event (``Error: ...``,
    ``Error loading config.toml: ...``, a usage error)."""
    lines = [line.strip() for line in stderr.splitlines() if line.strip()
             and not line.strip().startswith(_STDERR_NOISE) and not _LOG_LINE.match(line)]
    lines = [line for line in lines if not re.match(r"^\d+: ", line)]  # backtrace frames
    if not lines:
        return None
    chosen = next((line for line in lines if line.lower().startswith(("error", "fatal"))),
                  lines[0])
    return f"codex: {chosen.removeprefix('Error: ')}"


def _text(value: object) -> str | None:
    return value if isinstance(value, str) and value else None
