"""What every compile target produces: a factory of running machine instances."""

from __future__ import annotations

import copy
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

from interlock.machines.ir import MachineIR


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
class MachineState:
    """What a snapshot needs of a machine besides its context.

    ``configuration`` lists the active states in the engine's own order (restoring that
    order restores the exit order too); ``history`` is the memory of history states.
    """

    configuration: tuple[str, ...]
    history: Mapping[str, tuple[str, ...]]


class DurableInstance(MachineInstance, Protocol):
    """An instance that can be saved and told which timed or invoking states it entered
    or left."""

    def save(self) -> MachineState:
        """The configuration and history memory, by spec state ids."""

    def take_timer_changes(self) -> list[tuple[bool, str]]:
        """Entries (True) and exits (False) of states with ``after`` transitions or an
        ``invoke`` since the last call, in the order they happened; clears the log."""


@dataclass(frozen=True)
class CompiledMachine:
    """A machine compiled for one target. ``native`` is the target's own object:
    the StateChart subclass for ``statemachine``, the machine kwargs for ``transitions``."""

    ir: MachineIR
    target: str
    native: Any
    factory: Callable[[dict[str, Any]], MachineInstance]
    restorer: Callable[[dict[str, Any], MachineState], DurableInstance] | None = None
    # The guard and action callables it was compiled with, by name (a runtime evaluates
    # guards outside a step with them: Session.enabled).
    bindings: Mapping[str, Callable[..., Any]] = field(default_factory=dict, compare=False)

    def new(self, context: Mapping[str, Any] | None = None) -> MachineInstance:
        """A fresh instance in its initial configuration; ``context`` overrides defaults."""
        values = {name: copy.deepcopy(f.default) for name, f in self.ir.context.items()}
        values.update(context or {})
        return self.factory(values)

    def restore(self, context: dict[str, Any], state: MachineState) -> DurableInstance:
        """An instance in a saved configuration; no entry action runs.

        ValueError for a target that cannot restore (only ``statemachine`` can).
        """
        if self.restorer is None:
            raise ValueError(f"the {self.target} target cannot restore a saved machine; "
                             "compile for statemachine")
        return self.restorer(context, state)
