"""How specs meet Python: guards and actions are names, bound to callables at compile time.

Every bound callable receives one :class:`Call` and nothing else, whatever the backend,
so the same bindings drive python-statemachine and transitions alike. A guard returns a
truthy value to allow its transition; an action's return value is ignored.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, MutableMapping
from dataclasses import dataclass
from typing import Any


@dataclass(slots=True)
class Call:
    """What a bound guard or action is told about the step it runs in."""

    name: str
    event: str | None
    data: Mapping[str, Any]
    context: MutableMapping[str, Any]
    source: str | None = None
    target: str | None = None
    # Events an action raises go to the internal queue: handled before the next external one.
    # Made on first use: most calls raise nothing, and this runs on every guard and action.
    raised: list[tuple[str, dict[str, Any]]] | None = None
    # The session the call runs in, when a runtime runs it (interlock.runtime's
    # SessionContext: id, folder, clock, log); None for a bare compiled machine.
    session: Any = None

    def raise_event(self, event: str, **data: Any) -> None:
        if self.raised is None:
            self.raised = []
        self.raised.append((event, data))


Binding = Callable[[Call], Any]
Bindings = Mapping[str, Binding]
