"""Testing workflows with the real agent CLIs, offline: a scripted model server.

:class:`ModelServer` runs on 127.0.0.1 and answers the model APIs the agent CLIs call
(claude, codex, gemini, opencode) with scripted replies, recording every request;
:func:`cli_env` gives a CLI its own home and configuration pointing at the server. Free,
deterministic, no network: the CLI still does its real work (its tool calls, permission
checks, output format, exit codes).
"""

from __future__ import annotations

from interlock.testing.model_server import Message, ModelRequest, ModelServer, Script
from interlock.testing.replies import Reply, ToolCall, cut, fail, run_shell, say, write_file

__all__ = ["Message", "ModelRequest", "ModelServer", "Reply", "Script", "ToolCall", "cut",
           "fail", "run_shell", "say", "write_file"]
