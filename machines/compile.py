"""compile(): Spec or IR -> lint -> a CompiledMachine for one backend.

>>> from interlock.machines import loads, compile
>>> door = compile(loads("machine: door\\ninitial: closed\\nstates:\\n"
...                      "  closed: {on: {open: opened}}\\n  opened: {on: {close: closed}}\\n"))
>>> session = door.new()
>>> session.send("open")
>>> sorted(session.configuration)
['opened']
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Literal, get_args

from interlock.machines.backends.base import CompiledMachine
from interlock.machines.bindings import Bindings
from interlock.machines.checked import check_ir
from interlock.machines.ir import MachineIR
from interlock.machines.spec import Spec

Target = Literal["statemachine", "transitions"]
TARGETS: tuple[str, ...] = get_args(Target)


def _backend(target: str) -> Callable[[MachineIR, Bindings | None], CompiledMachine]:
    if target == "statemachine":
        from interlock.machines.backends.statemachine import compile_statemachine

        return compile_statemachine
    if target == "transitions":
        from interlock.machines.backends.transitions import compile_transitions

        return compile_transitions
    raise ValueError(f"unknown compile target {target!r}; valid targets: {', '.join(TARGETS)}")


def compile(
    spec: Spec | MachineIR, target: Target = "statemachine", bindings: Bindings | None = None
) -> CompiledMachine:
    """Build the IR, lint it with the bindings, and compile it for ``target``.

    Lint errors raise :class:`SpecError` (warnings do not block); so does a backend that
    cannot express the machine (``B301`` from ``transitions``). Guards and actions with
    no binding compile, and raise ``UnboundNameError`` when reached at run time.
    """
    backend = _backend(target)
    compiled = backend(check_ir(spec, bindings), bindings)
    return dataclasses.replace(compiled, bindings=dict(bindings or {}))
