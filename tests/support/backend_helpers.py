"""Helpers shared by the backend tests: compile YAML text with logging bindings."""

from __future__ import annotations

import textwrap
from collections.abc import Callable, Mapping
from typing import Any

from interlock.machines import Call, compile, loads
from interlock.machines.backends.base import CompiledMachine, MachineInstance

Entry = tuple[str, str | None, str | None, str | None]


class Recorder:
    """Bindings that log every action as (name, event, source, target)."""

    def __init__(self, guards: Mapping[str, bool | Callable[[Call], Any]] | None = None) -> None:
        self.log: list[Entry] = []
        self.calls: list[Call] = []
        self.guards = dict(guards or {})

    def action(self, call: Call) -> None:
        self.calls.append(call)
        self.log.append((call.name, call.event, call.source, call.target))

    def bindings(self, names: tuple[str, ...], guards: tuple[str, ...]) -> dict[str, Any]:
        out: dict[str, Any] = dict.fromkeys(names, self.action)
        for name in guards:
            value = self.guards.get(name, True)
            out[name] = value if callable(value) else (lambda call, v=value: v)
        return out

    def names(self) -> list[str]:
        return [entry[0] for entry in self.log]


def build(
    text: str,
    target: str = "statemachine",
    guards: Mapping[str, bool | Callable[[Call], Any]] | None = None,
    extra: Mapping[str, Callable[[Call], Any]] | None = None,
) -> tuple[CompiledMachine, Recorder]:
    """Compile dedented YAML for ``target`` with every action logged."""
    spec = loads(textwrap.dedent(text), file="spec.yaml")
    from interlock.machines import build_ir

    ir = build_ir(spec)
    recorder = Recorder(guards)
    bindings = recorder.bindings(ir.actions, ir.guards)
    bindings.update(extra or {})
    return compile(spec, target, bindings), recorder  # type: ignore[arg-type]


def start(
    text: str,
    target: str = "statemachine",
    guards: Mapping[str, bool | Callable[[Call], Any]] | None = None,
    extra: Mapping[str, Callable[[Call], Any]] | None = None,
    context: dict[str, Any] | None = None,
) -> tuple[MachineInstance, Recorder]:
    compiled, recorder = build(text, target, guards, extra)
    return compiled.new(context), recorder


def config(instance: MachineInstance) -> list[str]:
    return sorted(instance.configuration)
