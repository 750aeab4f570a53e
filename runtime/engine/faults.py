"""Faults: a guard or action that raises, named by binding and by its place in the spec.

Every bound callable is wrapped (:func:`guard_bindings`) so that an exception leaving it
says which binding raised (its name, guard or action) and where that name is used in the
spec (``file:line:col``, from the IR: its use in the state the step ran in, else its first
use). The session rolls its step back (``Session.send``/``fire_one`` raise
:class:`StepFault`); the runner then raises ``error.execution`` or fails the session
(:class:`UnhandledFault`). The traceback goes to the journal, never to the terminal.
"""

from __future__ import annotations

import traceback
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from interlock.machines.backends.calls import (
    Role,
    Site,
    UnboundNameError,
    action_sites,
    entry_sites,
    exit_sites,
    guard_site,
)
from interlock.machines.bindings import Binding, Bindings, Call
from interlock.machines.ir import MachineIR
from interlock.runtime.engine.errors import SessionError

ERROR_EXECUTION = "error.execution"


class BindingFault(Exception):
    """A bound guard or action raised ``error`` (kept as ``__cause__`` too)."""

    def __init__(self, binding: str, role: str, mark: str | None, state: str | None,
                 error: BaseException) -> None:
        super().__init__(f"{role} {binding!r} raised {type(error).__name__}: {error}")
        self.binding = binding
        self.role = role
        self.mark = mark
        self.state = state
        self.error = error


@dataclass(frozen=True, slots=True)
class Fault:
    """What went wrong in one step, as journaled and as ``error.execution``'s data."""

    binding: str | None  # None: the engine itself raised (e.g. a timer delay)
    role: str  # "guard" | "action" | "engine"
    mark: str | None
    state: str | None
    event: str | None  # None: the initial entry
    error_type: str
    message: str
    traceback: str

    def describe(self) -> str:
        """One line: ``action 'record' (spec.yaml:12:9) raised ValueError: boom``."""
        where = f" ({self.mark})" if self.mark else ""
        who = (f"{self.role} {self.binding!r}{where}" if self.binding is not None
               else f"the engine{where}")
        on = f" on event {self.event!r}" if self.event is not None else " on start"
        return f"{who} raised {self.error_type}: {self.message}{on}"

    def event_data(self) -> dict[str, Any]:
        """The data ``error.execution`` carries (SCXML's name; fields per issue 9)."""
        return {"binding": self.binding, "state": self.state, "event": self.event,
                "error_type": self.error_type, "message": self.message}

    def journal_data(self) -> dict[str, Any]:
        return {**self.event_data(), "role": self.role, "mark": self.mark,
                "traceback": self.traceback}


class StepFault(SessionError):
    """A step raised and was rolled back; the session is as it was before it."""

    def __init__(self, fault: Fault) -> None:
        super().__init__(fault.describe())
        self.fault = fault


class UnhandledFault(SessionError):
    """A step raised, nothing handled ``error.execution``: the session is ``failed``.

    ``str()`` is the one line for the terminal; the traceback is in the journal.
    """

    def __init__(self, session_id: str, fault: Fault) -> None:
        super().__init__(fault.describe())
        self.session_id = session_id
        self.fault = fault
        self.binding = fault.binding
        self.mark = fault.mark
        self.error_type = fault.error_type
        self.message = fault.message


def fault_of(exc: BaseException, event: str | None, active: tuple[str, ...]) -> Fault:
    """Describe an exception that left a step."""
    trace = "".join(traceback.format_exception(exc))
    state = ", ".join(active) or None
    if isinstance(exc, BindingFault):
        inner = exc.error
        return Fault(exc.binding, exc.role, exc.mark, exc.state or state, event,
                     type(inner).__name__, _message(inner), trace)
    if isinstance(exc, UnboundNameError):
        role = "guard" if exc.role is Role.GUARD else "action"
        return Fault(exc.name, role, str(exc.mark), state, event, type(exc).__name__,
                     f"{exc.role.value} {exc.name!r} is not bound", trace)
    return Fault(None, "engine", None, state, event, type(exc).__name__, _message(exc), trace)


def _message(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return text[0] if text else repr(exc)


def _sites(ir: MachineIR) -> Iterator[tuple[str, Site]]:
    for state in ir.states.values():
        for site in entry_sites(state):
            yield state.id, site
        for site in exit_sites(state):
            yield state.id, site
        for t in state.transitions:
            guard = guard_site(t)
            if guard is not None:
                yield state.id, guard
            for site in action_sites(t):
                yield state.id, site


def guard_bindings(bindings: Bindings, ir: MachineIR) -> dict[str, Binding]:
    """The same bindings, each raising :class:`BindingFault` instead of what it raised."""
    uses: dict[str, list[tuple[str, Site]]] = {}
    for state_id, site in _sites(ir):
        uses.setdefault(site.name, []).append((state_id, site))

    def wrap(name: str, fn: Binding) -> Binding:
        sites = uses.get(name, [])

        def call(c: Call) -> Any:
            try:
                return fn(c)
            except Exception as exc:
                here = (c.source, c.target)
                site = next((s for sid, s in sites if sid in here), None)
                site = site or (sites[0][1] if sites else None)
                role = "guard" if site is not None and site.role is Role.GUARD else "action"
                state = c.source or c.target
                raise BindingFault(name, role, None if site is None else str(site.mark),
                                   state, exc) from exc

        call.__name__ = getattr(fn, "__name__", name)
        return call

    return {name: wrap(name, fn) for name, fn in bindings.items()}
