"""What the dispatcher and its users share: the command to run and where running agents
are recorded. Imports nothing of the polling loop, so the engine's invoker and the
adapters can use these without it."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

from interlock.runtime.dispatch.process import AgentProcess, SpawnOptions


@dataclass(frozen=True, slots=True)
class AgentCommand:
    """What to run (seed 001's SubAgentCommand): an argv list, never a shell line. The
    prompt, when given, is written to the agent's stdin, which is then closed; otherwise
    stdin is /dev/null. ``name`` labels the result (a reviewer role, say)."""

    argv: tuple[str, ...]
    prompt: str | None = None
    name: str | None = None
    options: SpawnOptions = field(default_factory=SpawnOptions)


class AgentRegistry(Protocol):
    """Where running agent process groups are recorded, so a dispatcher that dies cannot
    orphan them (:mod:`interlock.runtime.host.orphans` stops them on the next start)."""

    def started(self, dispatch_id: str, process: AgentProcess, started_at: float) -> None: ...

    def stopped(self, dispatch_id: str) -> None: ...
