"""compile(): Spec or IR -> a CompiledMachine for one backend. (stub)"""

from __future__ import annotations

from typing import Literal

from .backends.base import CompiledMachine
from .bindings import Bindings
from .ir import MachineIR
from .spec import Spec

Target = Literal["statemachine", "transitions"]


def compile(
    spec: Spec | MachineIR, target: Target = "statemachine", bindings: Bindings | None = None
) -> CompiledMachine:
    raise NotImplementedError
