"""``command:`` invokes: any program, its argv written in the spec.

``invoke: {id: lint, command: [ruff, check, "{{ context.path }}"]}`` runs the argv (each
word a template over the context, and a fan-out child's ``item`` and ``index``) with the
rendered prompt, if any, on stdin; its stdout is the answer. The process is spooled and
adopted like an agent's (:class:`~interlock.runtime.dispatch.invoke_process.ProcessHandler`).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from interlock.machines.ir import InvokeIR
from interlock.runtime.dispatch.invoke_process import ProcessCommand, ProcessHandler
from interlock.runtime.dispatch.process import SpawnOptions
from interlock.runtime.dispatch.types import AgentCommand
from interlock.runtime.engine.invoke_handler import Item, invoke_cwd, templated


class CommandHandler(ProcessHandler):
    """The handler of ``command:`` invokes: the argv, rendered; no adapter reads it."""

    def command(self, invoke: InvokeIR, context: Mapping[str, Any],
                item: Item | None = None) -> ProcessCommand:
        prompt = self.prompt(invoke, context, item)
        assert invoke.command is not None
        argv = tuple(templated(word, context, f"invoke {invoke.id!r} command", item)
                     for word in invoke.command)
        folder = invoke_cwd(invoke, context, item)
        options = SpawnOptions(cwd=Path(folder)) if folder else SpawnOptions()
        return ProcessCommand(AgentCommand(argv, prompt, invoke.id, options))
