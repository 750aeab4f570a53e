"""The agent resolver of ``agent:`` invokes: the project's agents, else the demo roles.

``agent: NAME`` names an agent of ``interlock.yaml``'s ``agents:`` (runtime/agents/config.py);
without an ``agents:`` section (or without the file), the built-in demo role of that name
(``executor``, ``reviewer``, ...) runs offline. The agent's adapter builds the launch and
reads its output; its ``timeout`` and ``outputFormat`` go into the dispatch settings. A
tool call the CLI refused fails the call (``permission_denied``) when the agent is there
to change files (:func:`~interlock.runtime.agents.config.must_edit`).
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

from interlock.runtime.agents.adapters import adapter_for, polling_for
from interlock.runtime.agents.base import AgentOutput
from interlock.runtime.agents.config import load_agents, must_edit, resolve_agent
from interlock.runtime.dispatch.config import PollingConfiguration
from interlock.runtime.engine.invoke import AgentResolver, InvokeError, Reader, ResolvedAgent
from interlock.runtime.host.project_file import PROJECT_FILE


def agent_resolver(root: Path, base: PollingConfiguration | None = None) -> AgentResolver:
    """Resolve ``agent:`` names against ``root/interlock.yaml`` (read at each invoke, so an
    edit applies to the next one); ``base`` is the dispatch settings the agent's own apply
    to. An unknown name or a broken file fails the invoke (``spawn_error``)."""
    project = root / PROJECT_FILE

    def resolve(name: str, prompt: str) -> ResolvedAgent:
        agents = load_agents(project)
        config = resolve_agent(name, agents)
        if config is None:
            where = (f"under agents: in {project}" if agents
                     else f"in {project}, and no demo role of that name")
            raise InvokeError(f"no agent {name!r} {where}")
        adapter = adapter_for(config)
        return ResolvedAgent(adapter.launch(config, prompt),
                             refusing_reader(adapter.read, adapter.cli, must_edit(config, name)),
                             polling_for(config, base, role=name),
                             resume=lambda session, text: adapter.resume(config, session, text))

    return resolve


def refusing_reader(read: Reader, cli: str, edits: bool) -> Reader:
    """``read``, where a refused tool call of an agent that must edit is a failure
    (``permission_denied``, naming the tool and its target) unless the CLI failed anyway."""
    if not edits:
        return read

    def reading(stdout: str, stderr: str) -> AgentOutput:
        output = read(stdout, stderr)
        if not output.denials or output.error is not None:
            return output
        refused = "; ".join(output.denials)
        return dataclasses.replace(output, reason="permission_denied",
                                   error=f"{cli} refused {refused} (permissions: see "
                                         "docs/agents.md#permissions)")

    return reading
