"""The agent resolver of ``agent:`` invokes: the project's agents, else the demo roles.

``agent: NAME`` names an agent of ``interlock.yaml``'s ``agents:`` (runtime/agents/config.py);
without one of that name (or without the file), the built-in demo role of that name
(``executor``, ``reviewer``, ...) runs offline. The agent's adapter builds the launch and
reads its stdout; its ``timeout`` and ``outputFormat`` go into the dispatch settings.
"""

from __future__ import annotations

from pathlib import Path

from interlock.runtime.agents.adapters import adapter_for, polling_for
from interlock.runtime.agents.config import load_agents, resolve_agent
from interlock.runtime.dispatch.config import PollingConfiguration
from interlock.runtime.engine.invoke import AgentResolver, InvokeError, ResolvedAgent
from interlock.runtime.host.project_file import PROJECT_FILE


def agent_resolver(root: Path, base: PollingConfiguration | None = None) -> AgentResolver:
    """Resolve ``agent:`` names against ``root/interlock.yaml`` (read at each invoke, so an
    edit applies to the next one); ``base`` is the dispatch settings the agent's own apply
    to. An unknown name or a broken file fails the invoke (``spawn_error``)."""
    project = root / PROJECT_FILE

    def resolve(name: str, prompt: str) -> ResolvedAgent:
        config = resolve_agent(name, load_agents(project))
        if config is None:
            raise InvokeError(f"no agent {name!r} under agents: in {project}, and no demo "
                              "role of that name")
        adapter = adapter_for(config)
        return ResolvedAgent(adapter.launch(config, prompt), adapter.read,
                             polling_for(config, base, role=name))

    return resolve
