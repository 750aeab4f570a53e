"""The poller agent: asks the questions of an interview and drafts the interpretation.

One call per stage (``category``, ``narrow``, ``suggest``, ``refine``): a prompt with an
``Interview: STAGE`` line and what the player said so far goes to the configured agent
(``agents:`` in ``interlock.yaml``; without one, the offline demo questioner), which
answers one YAML document in the :class:`~interlock.runtime.interview.protocol.PollerReply`
shape. A malformed answer is asked for again (``attempts`` in all), then reported as a
:class:`PollerFailed` in one line; it is never shown raw.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, Protocol

from interlock.runtime.agents.config import AgentConfig, load_agents, resolve_agent
from interlock.runtime.interview.protocol import PollerReply, ProtocolError, parse_reply

Stage = Literal["category", "narrow", "suggest", "refine"]
DEFAULT_AGENT = "poller"
FALLBACK_ROLE = "questioner"
ATTEMPTS = 3
OUTPUT_EXCERPT = 2000


class PollerFailed(Exception):
    """The poller agent failed or kept answering out of shape."""


class Poller(Protocol):
    def reply(self, stage: Stage, facts: Mapping[str, Any]) -> PollerReply:
        """The agent's reply for ``stage``, given the interview's context ``facts``."""


def render_prompt(stage: Stage, facts: Mapping[str, Any]) -> str:
    """The prompt for one stage: marker lines the demo questioner reads, and the
    instructions a real agent follows."""
    issues = ", ".join(str(i) for i in facts.get("selected_issues") or [])
    lines = [
        "You are the poller of a review interview: you help the player say what should "
        "change in a unit's output. Answer with ONE YAML document and nothing else.",
        "For category/narrow: questions: [{id, kind: select|multi|text|confirm, prompt, "
        "options: [{key, label}]}] (one question, keys A-D).",
        "For suggest/refine: questions: [], interpretation: 'You said: ... Suggested fix: "
        "...', corrections: [..], context_additions: [..].",
        "",
        f"Interview: {stage}",
        f"Trigger: {facts.get('trigger') or 'retry'}",
        f"Node: {facts.get('source_node') or ''}",
    ]
    if facts.get("category"):
        lines.append(f"Category: {facts['category']}")
    if facts.get("section"):
        lines.append(f"Section: {facts['section']}")
    if issues:
        lines.append(f"Issues: {issues}")
    if facts.get("interpretation"):
        lines.append(f"Current interpretation: {facts['interpretation']}")
    output = str(facts.get("output") or "")[:OUTPUT_EXCERPT]
    if output:
        lines += ["", "The unit's output under review:", output]
    return "\n".join(lines) + "\n"


def choose_agent(name: str | None, root: Path) -> AgentConfig:
    """The agent called ``name`` (default ``poller``) in ROOT/interlock.yaml; an unconfigured
    ``poller`` is the demo questioner. PollerFailed for an unknown name."""
    agents = load_agents(root / "interlock.yaml")
    wanted = name or DEFAULT_AGENT
    config = agents.get(wanted)
    if config is None and wanted == DEFAULT_AGENT:
        config = resolve_agent(FALLBACK_ROLE, agents)
    config = config or resolve_agent(wanted, agents)
    if config is None:
        known = ", ".join(sorted(agents)) or "none configured"
        raise PollerFailed(f"no agent {wanted!r} in {root / 'interlock.yaml'} ({known})")
    return config


@dataclass
class AgentPoller:
    """A poller that is a real agent process, dispatched like any sub-agent."""

    config: AgentConfig
    root: Path
    attempts: int = ATTEMPTS

    def reply(self, stage: Stage, facts: Mapping[str, Any]) -> PollerReply:
        prompt = render_prompt(stage, facts)
        problem = ""
        for _ in range(self.attempts):
            try:
                return _fits(stage, parse_reply(self._ask(prompt)))
            except ProtocolError as exc:
                problem = str(exc)
        raise PollerFailed(f"the poller agent answered out of shape {self.attempts} times "
                           f"({stage}): {problem}")

    def _ask(self, prompt: str) -> Any:
        from interlock.runtime.agents.adapters import agent_command, polling_for, read_result
        from interlock.runtime.dispatch import dispatch_all
        from interlock.runtime.dispatch.config import parse_dispatch_config
        from interlock.runtime.dispatch.document import check_document

        base = parse_dispatch_config({"pollingInterval": 1, "minOutputLength": 1,
                                      "completionMarkers": {"requiredField": "questions",
                                                            "minSilenceCycles": 2}})
        config = polling_for(self.config, base)
        command = agent_command(self.config, prompt, name="poller")
        (result,) = asyncio.run(dispatch_all([command], config,
                                             spill_dir=self.root / ".interlock" / "dispatch"))
        if not result.polling.success:
            last = result.polling.stderr.strip().splitlines()[-1:]
            reason = result.error or (last[0] if last else result.polling.status)
            raise PollerFailed(f"the poller agent failed ({result.polling.status}): {reason}")
        answer = read_result(self.config, result).answer
        found = check_document(answer, output_format=config.output_format,
                               required_field="questions", min_output_length=1)
        if found.document is None:
            raise ProtocolError(f"no YAML document with 'questions' in the answer "
                                f"({found.reason})")
        return found.document


def _fits(stage: Stage, reply: PollerReply) -> PollerReply:
    """A question stage needs one question; an interpretation stage an interpretation."""
    if stage in ("category", "narrow"):
        if not reply.questions:
            raise ProtocolError(f"the {stage} reply holds no question")
        return reply
    if not reply.interpretation:
        raise ProtocolError(f"the {stage} reply holds no interpretation")
    return reply
