"""What the dispatcher and its users share: the command to run, where running agents are
recorded, and the seam of the process side (:class:`ProcessDriver`, and the hooks of a
run it calls). Imports nothing of the polling loop, so the engine's invoker and the
adapters can use these without it."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from interlock.runtime.dispatch.output import Stream
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
    orphan them (:mod:`interlock.runtime.engine.orphans` stops them on the next start)."""

    def started(self, dispatch_id: str, process: AgentProcess, started_at: float) -> None: ...

    def stopped(self, dispatch_id: str) -> None: ...


class ProcessRun(Protocol):
    """What a :class:`ProcessDriver` may call on the dispatch it serves (the public hooks
    of :class:`~interlock.runtime.dispatch.polling.Dispatch`)."""

    @property
    def command(self) -> AgentCommand: ...

    @property
    def dispatch_id(self) -> str: ...

    @property
    def loop(self) -> asyncio.AbstractEventLoop: ...

    def guarded(self, callback: Callable[..., object], *args: Any) -> None: ...

    def arm(self, name: str, when: float | None, callback: Callable[[], None]) -> None: ...

    def read_output(self, stream: Stream) -> bool: ...

    def drain(self) -> None: ...

    def exited(self, code: int | None) -> None: ...

    def finished(self) -> bool: ...

    async def terminate(self, process: AgentProcess) -> None: ...


class ProcessDriver(Protocol):
    """The process side of a dispatch: where its agent comes from and how it is heard.
    The dispatch calls :meth:`spawn` once (SpawnError: the agent could not be started),
    records the process (its registry), calls :meth:`watch`, and :meth:`stop` at the end.
    The plain dispatcher's driver reads pipes (:class:`~interlock.runtime.dispatch.polling.
    PipeDriver`); an invoked agent's reads spool files (``dispatch/invoke_process.py``)."""

    def spawn(self, run: ProcessRun) -> AgentProcess: ...

    def watch(self, run: ProcessRun, process: AgentProcess) -> None:
        """Arrange for ``run`` to hear the process: its output (``run.read_output``), its
        exit (``run.exited``)."""

    async def stop(self, run: ProcessRun, process: AgentProcess) -> None:
        """Stop the process and let go of it (most drivers: ``run.terminate(process)``)."""
