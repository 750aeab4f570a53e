"""A scripted model that plays Ralph's five roles, for a real CLI driven by the server.

:class:`RalphModel` answers each request the way interlock's offline demo roles answer
(:func:`interlock.runtime.agents.role_agent.answer`): the Planner plans one task per
clause of the request, the Executor writes its task's files, the Reviewer accepts, the
Librarian promotes the staged notes. The difference with the demo agents: the files are
written by the CLI itself, through the tool calls this model asks for (claude's
``Write``, codex's ``apply_patch``...), so a Ralph session with real CLIs in every role
does its real work offline::

    with ModelServer(RalphModel()) as server:
        ...  # interlock.yaml: every role {cli: claude, env: cli_env("claude", ...)}

The role comes from the prompt's first line (``You are Ralph-Executor ...``); a request
whose last message is a tool's result gets the role's final answer (a YAML mapping,
closed by ``...``). A ``STEER:`` line in a later user message (a steer continuing the
conversation) joins the prompt the answer is computed from. ``delays`` holds a role's
replies back (seconds), so a test can steer an agent while it works.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path

import yaml

from interlock.testing.model_server import ModelRequest
from interlock.testing.replies import Reply, ToolCall, say

_ROLE = re.compile(r"You are Ralph-(Planner|Executor|Reviewer|Questioner|Librarian)\b")


class RalphModel:
    """The responder of a :class:`~interlock.testing.ModelServer` (see the module)."""

    def __init__(self, delays: Mapping[str, float] | None = None) -> None:
        self.delays = dict(delays or {})

    def __call__(self, request: ModelRequest) -> Reply:
        from interlock.runtime.agents.role_agent import answer

        prompt = request.user_text
        found = _ROLE.search(prompt)
        if found is None:
            return say("I only play Ralph's roles: no `You are Ralph-<Role>` in the prompt.")
        role = found.group(1).lower()
        delay = self.delays.get(role, 0.0)
        result, effects = answer(role, prompt)
        last = request.last
        tools = tuple(ToolCall("write_file", path=target, content=text)
                      for target, text in effects.writes.items())
        tools += tuple(ToolCall("write_file", path=target,
                                content=Path(source).read_text(encoding="utf-8"))
                       for source, target in effects.copies.items())
        if tools and (last is None or last.role != "tool"):
            return Reply(text=f"Writing {len(tools)} file(s).", tools=tools, delay=delay)
        text = yaml.safe_dump(result, sort_keys=False, allow_unicode=True) + "...\n"
        return say(text, delay=delay)
