"""``agent:`` invokes: their handler, and the resolver of the project's agents.

The handler (:class:`AgentHandler`) asks an :data:`AgentResolver` the caller passes in (the
seam to ``runtime/agents``) what ``agent: NAME`` runs with the rendered prompt, builds
the dispatcher's command from that launch through the adapters
(:func:`~interlock.runtime.agents.adapters.launch_command`), and continues the agent's
CLI conversation when the invoke says ``continue:``. The process is spooled and adopted
like a command's (:class:`~interlock.runtime.dispatch.invoke_process.ProcessHandler`).

The project's resolver (:func:`agent_resolver`): ``agent: NAME`` names an agent of
``interlock.yaml``'s ``agents:`` (runtime/config/agents.py); without an ``agents:``
section (or without the file), the built-in demo role of that name (``executor``,
``reviewer``, ...) runs offline. The agent's adapter builds the launch and reads its
output; its ``timeout`` and ``outputFormat`` go into the dispatch settings. A tool call
the CLI refused fails the call (``permission_denied``) when the agent is there to change
files (:func:`~interlock.runtime.config.agents.must_edit`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from interlock.machines.ir import InvokeIR
from interlock.runtime.agents.adapters import adapter_for, launch_command, polling_for
from interlock.runtime.config.agents import AgentLaunch, load_agents, must_edit, resolve_agent
from interlock.runtime.config.dispatch import PollingConfiguration
from interlock.runtime.config.project_file import PROJECT_FILE
from interlock.runtime.dispatch.invoke_command import CommandHandler
from interlock.runtime.dispatch.invoke_process import (
    ProcessCommand,
    ProcessHandler,
    Reader,
    Spool,
)
from interlock.runtime.engine.agent_output import AgentOutput
from interlock.runtime.engine.invoke_handler import (
    HandlerFactory,
    InvokeError,
    InvokeHost,
    InvokeKind,
    Item,
    invoke_cwd,
    templated,
)


@dataclass(frozen=True, slots=True)
class ResolvedAgent:
    """What an ``agent:`` invoke runs: the launch, how to read its stdout into the
    answer text and usage (an adapter's ``read``; None: stdout is the answer), the
    agent's own dispatch settings (None: the invoker's), and how to continue one of its
    CLI's conversations instead (``resume(session, text)``; None: it cannot)."""

    launch: AgentLaunch
    read: Reader | None = None
    config: PollingConfiguration | None = None
    resume: Callable[[str, str], AgentLaunch | None] | None = None


# (agent name from interlock.yaml, rendered prompt) -> what to run. Connected to
# runtime/agents as: config = resolve_agent(name, load_agents(path)); adapter =
# adapter_for(config); ResolvedAgent(adapter.launch(config, prompt), adapter.read,
# polling_for(config, base)): :func:`agent_resolver`.
AgentResolver = Callable[[str, str], ResolvedAgent]


class AgentHandler(ProcessHandler):
    """The handler of ``agent:`` invokes (see the module docstring)."""

    def __init__(self, host: InvokeHost, resolver: AgentResolver | None) -> None:
        super().__init__(host)
        self.resolver = resolver

    def command(self, invoke: InvokeIR, context: Mapping[str, Any],
                item: Item | None = None) -> ProcessCommand:
        prompt = self.prompt(invoke, context, item)
        if self.resolver is None or invoke.agent is None:
            raise InvokeError(f"invoke {invoke.id!r}: no agent resolver for agent "
                              f"{invoke.agent!r}")
        name = templated(invoke.agent, context, f"invoke {invoke.id!r} agent", item)
        try:
            resolved = self.resolver(name, prompt or "")
        except Exception as exc:
            raise InvokeError(f"invoke {invoke.id!r}: agent {name!r}: {exc}") from None
        launch = resolved.launch
        if invoke.continue_ is not None and resolved.resume is not None:
            text = templated(invoke.continue_, context, f"invoke {invoke.id!r} continue", item)
            session = (self._conversation(invoke.id, resolved.read, item) if text.strip()
                       else None)
            if session is not None:
                launch = resolved.resume(session, text) or launch
        folder = invoke_cwd(invoke, context, item)
        if folder:  # the invoke's own folder (a task's worktree) over the agent's cwd:
            launch = dataclasses.replace(launch, cwd=folder)
        return ProcessCommand(launch_command(launch, name=invoke.id), resolved.read,
                              resolved.config)

    def _conversation(self, invoke_id: str, read: Reader | None,
                      item: Item | None = None) -> str | None:
        """The CLI conversation the invoke's previous call in this session ran in (for a
        fan-out's child, the previous call for the same index), its spooled output read by
        the agent's adapter; or None."""
        host = self.host
        index = item.index if item is not None else None
        earlier = [r for r in host.store.invocations(host.session_id)
                   if r.invoke == invoke_id and r.index == index]
        if not earlier or read is None:
            return None
        spool = Spool(Path(earlier[-1].spool))
        try:
            stdout = spool.stdout.read_text(encoding="utf-8", errors="replace")
            stderr = spool.stderr.read_text(encoding="utf-8", errors="replace")
        except OSError:
            return None
        return read(stdout, stderr).session


def process_handlers(agents: AgentResolver | None = None) -> dict[InvokeKind, HandlerFactory]:
    """The handlers of ``agent:`` invokes (resolved by ``agents``; None: each fails with a
    ``spawn_error``) and ``command:`` invokes, for ``Runner.open(invokers=...)``."""

    def agent(host: InvokeHost) -> AgentHandler:
        return AgentHandler(host, agents)

    return {"agent": agent, "command": CommandHandler}


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
