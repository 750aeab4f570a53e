"""What every compile target produces: a factory of running machine instances."""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from ..ir import MachineIR


class MachineInstance(Protocol):
    """One running machine, as the runtime and the differential tests drive it."""

    def send(self, event: str, /, **data: Any) -> None:
        """Process one external event to completion (eventless and raised events included).

        An event no active state accepts is ignored (the configuration is unchanged).
        """

    @property
    def configuration(self) -> frozenset[str]:
        """Ids of all active states, ancestors included (history pseudo-states never)."""

    @property
    def context(self) -> dict[str, Any]:
        """The session context; bound actions may mutate it."""

    @property
    def is_terminated(self) -> bool:
        """True once a top-level final state is active."""


@dataclass(frozen=True)
class CompiledMachine:
    """A machine compiled for one target. ``native`` is the target's own object:
    the StateChart subclass for ``statemachine``, the machine kwargs for ``transitions``."""

    ir: MachineIR
    target: str
    native: Any
    factory: Callable[[dict[str, Any]], MachineInstance]

    def new(self, context: Mapping[str, Any] | None = None) -> MachineInstance:
        """A fresh instance in its initial configuration; ``context`` overrides defaults."""
        values = {name: copy.deepcopy(f.default) for name, f in self.ir.context.items()}
        values.update(context or {})
        return self.factory(values)
