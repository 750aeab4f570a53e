"""The poller agent: asks the questions of an interview and drafts the interpretation.

The agent is not called from here: ``poller_interview`` invokes it in its ``consulting``
state (``invoke: {agent: poller, prompt_file: poller_interview.prompt.j2}``, see
docs/invoke.md), once per stage (``category``, ``narrow``, ``suggest``, ``refine``). The
prompt carries an ``Interview: STAGE`` line and what the player said so far; the agent
answers one YAML document in the :class:`~interlock.runtime.interview.protocol.PollerReply`
shape, which :func:`check_reply` accepts or refuses in one line (the raw answer is never
shown).

This module says which agent plays the poller (:func:`choose_agent`) and how its
``agent: poller`` invokes resolve (:func:`poller_resolver`): the agent named ``poller`` in
``interlock.yaml``'s ``agents:``, another one chosen with ``--agent``, else the offline
demo questioner.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from interlock.runtime.agents.invoke import AgentResolver, ResolvedAgent, agent_resolver
from interlock.runtime.config.agents import AgentConfig, load_agents, resolve_agent
from interlock.runtime.config.dispatch import PollingConfiguration, parse_dispatch_config
from interlock.runtime.interview.protocol import PollerReply, ProtocolError, parse_reply

Stage = Literal["category", "narrow", "suggest", "refine"]
QUESTION_STAGES: tuple[str, ...] = ("category", "narrow")
DEFAULT_AGENT = "poller"  # the name the spec invokes (a demo stand-in when unconfigured)


class PollerFailed(Exception):
    """The poller agent cannot be had (an unknown ``--agent`` name)."""


def dispatch_settings() -> PollingConfiguration:
    """How a poller agent's answer is detected: a short YAML document with ``questions``
    (even ``questions: []``) is complete."""
    return parse_dispatch_config({"pollingInterval": 1, "minOutputLength": 1,
                                  "completionMarkers": {"requiredField": "questions",
                                                        "minSilenceCycles": 2}})


def choose_agent(name: str | None, root: Path) -> AgentConfig:
    """The agent called ``name`` (default ``poller``) in ROOT/interlock.yaml, else the demo
    role of that name (``poller``: the demo questioner). PollerFailed for an unknown name."""
    agents = load_agents(root / "interlock.yaml")
    wanted = name or DEFAULT_AGENT
    config = resolve_agent(wanted, agents)
    if config is None:
        known = ", ".join(sorted(agents)) or "none configured"
        raise PollerFailed(f"no agent {wanted!r} in {root / 'interlock.yaml'} ({known})")
    return config


def poller_resolver(root: Path, agent: str | None = None) -> AgentResolver:
    """The resolver of the interview's invokes: ``agent: poller`` runs ``agent`` (default:
    the ``poller`` of ROOT/interlock.yaml, else the demo questioner), read afresh at each
    call, with the poller's dispatch settings under the agent's own."""
    resolve = agent_resolver(root, dispatch_settings())
    chosen = agent or DEFAULT_AGENT

    def poller(name: str, prompt: str) -> ResolvedAgent:
        return resolve(chosen if name == DEFAULT_AGENT else name, prompt)

    return poller


def check_reply(stage: str, answer: Any) -> PollerReply:
    """The agent's answer document for ``stage`` as a :class:`PollerReply`: a question
    stage needs a question, an interpretation stage an interpretation. ProtocolError (one
    line, naming the field) otherwise."""
    if answer is None:
        raise ProtocolError(f"the {stage} reply is empty")
    reply = parse_reply(answer)
    if stage in QUESTION_STAGES:
        if not reply.questions:
            raise ProtocolError(f"the {stage} reply holds no question")
        return reply
    if not reply.interpretation:
        raise ProtocolError(f"the {stage} reply holds no interpretation")
    return reply
