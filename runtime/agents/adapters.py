"""Choosing an adapter, and turning an agent + prompt into a dispatcher command.

:func:`adapter_for` gives an :class:`AgentConfig`'s adapter; :func:`agent_command` the
:class:`~interlock.runtime.dispatch.AgentCommand` to dispatch (the one place a launch
becomes a command: :func:`launch_command`, which ``agent:`` invokes use on their
resolver's launch); :func:`polling_for` the dispatch configuration with the agent's
timeout and output format; :func:`read_result` the adapter's reading of a result.
"""

from __future__ import annotations

from pathlib import Path

from interlock.runtime.agents.base import Adapter
from interlock.runtime.agents.claude import ClaudeAdapter
from interlock.runtime.agents.codex import CodexAdapter
from interlock.runtime.agents.command import CommandAdapter
from interlock.runtime.agents.demo_adapter import DemoAdapter
from interlock.runtime.agents.gemini import GeminiAdapter
from interlock.runtime.agents.opencode import OpencodeAdapter
from interlock.runtime.agents.ralph_protocol import REQUIRED_FIELD
from interlock.runtime.config.agents import AgentConfig, AgentLaunch
from interlock.runtime.config.dispatch import PollingConfiguration, parse_dispatch_config
from interlock.runtime.dispatch.process import SpawnOptions
from interlock.runtime.dispatch.result import DispatchResult
from interlock.runtime.dispatch.types import AgentCommand
from interlock.runtime.engine.agent_output import AgentOutput

ADAPTERS: dict[str, Adapter] = {
    adapter.cli: adapter
    for adapter in (ClaudeAdapter(), CodexAdapter(), OpencodeAdapter(), GeminiAdapter(),
                    CommandAdapter(), DemoAdapter())
}


def adapter_for(config: AgentConfig) -> Adapter:
    """The adapter of ``config.cli``."""
    return ADAPTERS[config.cli]


def agent_command(config: AgentConfig, prompt: str, *, name: str | None = None
                  ) -> AgentCommand:
    """What the dispatcher runs for ``config`` with ``prompt``."""
    return launch_command(adapter_for(config).launch(config, prompt), name=name)


def resume_command(config: AgentConfig, session: str, prompt: str, *,
                   name: str | None = None) -> AgentCommand | None:
    """What the dispatcher runs to continue the CLI's conversation ``session`` with
    ``prompt`` (a steer); None when the CLI cannot continue one."""
    launch = adapter_for(config).resume(config, session, prompt)
    return None if launch is None else launch_command(launch, name=name)


def launch_command(launch: AgentLaunch, *, name: str | None = None) -> AgentCommand:
    """The dispatcher's command for an adapter's launch."""
    options = SpawnOptions(cwd=Path(launch.cwd) if launch.cwd else None,
                           env=dict(launch.env) or None)
    return AgentCommand(argv=launch.argv, prompt=launch.stdin, name=name, options=options)


def polling_for(config: AgentConfig, base: PollingConfiguration | None = None, *,
                role: str | None = None) -> PollingConfiguration:
    """``base`` with the agent's ``timeout`` and ``outputFormat`` applied (validated again).
    For an agent playing a Ralph role (a demo role, or ``role``: the role an agent of any
    CLI is configured for) the required field, unless ``base`` sets one, is the key every
    answer of that role carries, so the detector can end the run on the answer document."""
    data = (base or PollingConfiguration()).model_dump(by_alias=True, exclude_unset=True)
    data["outputFormat"] = config.output_format
    markers = data.setdefault("completionMarkers", {})
    played = config.role or (role if role in REQUIRED_FIELD else None)
    if played is not None and "requiredField" not in markers:
        markers["requiredField"] = REQUIRED_FIELD[played]
    if config.timeout is not None:
        data["dispatchTimeout"] = config.timeout
    return parse_dispatch_config(data)


def read_result(config: AgentConfig, result: DispatchResult) -> AgentOutput:
    """The answer, usage and reported error in a finished dispatch's stdout."""
    return adapter_for(config).read(result.polling.stdout, result.polling.stderr)
