"""What a guard or action knows of the session it runs in: ``call.session``.

The runtime hands every bound callable a :class:`interlock.machines.Call` whose
``session`` is a :class:`SessionContext`: the session's id and folder, its clock (the
injected one: tests drive it), and a logger named after the session. With ``call.context``
(the session's context data) and ``call.raise_event`` (an internal event, handled before
the next external one), that is all a binding needs.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from interlock.machines.bindings import Binding, Bindings, Call
from interlock.runtime.engine.clock import Clock, SystemClock


@dataclass(frozen=True, slots=True)
class SessionContext:
    """One session as its bindings see it."""

    id: str
    folder: Path
    clock: Clock = field(default_factory=SystemClock)
    log: logging.Logger = field(default_factory=lambda: logging.getLogger("interlock.session"))

    @classmethod
    def of(cls, session_id: str, folder: Path, clock: Clock | None = None) -> SessionContext:
        return cls(session_id, folder, clock or SystemClock(),
                   logging.getLogger(f"interlock.session.{session_id}"))

    def now(self) -> float:
        """The session clock's time (wall-clock seconds; simulated in tests)."""
        return self.clock.now()


def with_session(bindings: Mapping[str, Binding], session: SessionContext) -> Bindings:
    """``bindings`` whose calls carry ``session`` (async bindings stay async)."""

    def attach(fn: Binding) -> Binding:
        def bound(call: Call) -> Any:
            call.session = session
            return fn(call)

        bound.__name__ = getattr(fn, "__name__", "binding")
        bound.__wrapped__ = fn  # type: ignore[attr-defined]
        return bound

    return {name: attach(fn) for name, fn in bindings.items()}
