"""Guards and actions at run time: the part of binding every backend shares.

A spec names guards and actions; :mod:`..bindings` maps names to callables. A backend
wraps each *use* of a name (a :class:`Site`: which guard or action, where it is written,
which transition or state it belongs to) and calls the bound callable with one
:class:`~..bindings.Call`. A name without a binding does not stop a compile: the site
gets a stand-in that raises :class:`UnboundNameError` when it is reached.

What a :class:`~..bindings.Call` carries, whatever the backend:

* ``event``: the event being processed, as sent (``poll``, ``after.active.0``, a raised
  event); ``None`` while the machine enters its initial configuration.
* ``data``: the keyword arguments sent (or raised) with that event.
* ``source``/``target``: for a guard or a transition action, the transition's source and
  target (``None`` when targetless); for an exit action, the state being exited (source);
  for an entry action, the state being entered (target).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from interlock.machines.bindings import Binding, Bindings, Call
from interlock.machines.diagnostics import Mark
from interlock.machines.ir import MachineIR, StateIR, TransitionIR


class Role(StrEnum):
    GUARD = "guard"
    ENTRY = "entry action"
    EXIT = "exit action"
    TRANSITION = "transition action"


class UnboundNameError(LookupError):
    """A guard or action was reached at run time but no callable is bound to its name."""

    def __init__(self, role: Role, name: str, mark: Mark) -> None:
        self.role = role
        self.name = name
        self.mark = mark
        super().__init__(
            f"{mark}: {role.value} {name!r} is not bound; pass a callable for it in the "
            "bindings given to compile()"
        )


@dataclass(frozen=True, slots=True)
class Site:
    """One use of a guard or action name in a machine."""

    role: Role
    name: str
    mark: Mark
    source: str | None
    target: str | None


def unbound(site: Site) -> Binding:
    def raise_unbound(call: Call) -> Any:
        raise UnboundNameError(site.role, site.name, site.mark)

    return raise_unbound


def resolve(bindings: Bindings, site: Site) -> Binding:
    """The callable bound to a site's name, or a stand-in raising :class:`UnboundNameError`."""
    fn = bindings.get(site.name)
    return fn if fn is not None else unbound(site)


class Hook:
    """One guard or action site as a backend calls it: ``check`` for guards, ``run`` for
    actions. A backend subclass says in ``_invoke`` how its step becomes a :class:`Call`
    and where raised events go."""

    __slots__ = ("_fn", "_name", "_source", "_target")

    def __init__(self, fn: Binding, site: Site) -> None:
        self._fn = fn
        self._name = site.name
        self._source = site.source
        self._target = site.target

    def _invoke(self, event_data: Any) -> Any:
        raise NotImplementedError

    def check(self, event_data: Any) -> bool:
        return bool(self._invoke(event_data))

    def run(self, event_data: Any) -> None:
        self._invoke(event_data)


def entry_sites(state: StateIR) -> Iterator[Site]:
    mark = state.mark_of("entry")
    for name in state.entry:
        yield Site(Role.ENTRY, name, mark, None, state.id)


def exit_sites(state: StateIR) -> Iterator[Site]:
    mark = state.mark_of("exit")
    for name in state.exit:
        yield Site(Role.EXIT, name, mark, state.id, None)


def guard_site(transition: TransitionIR) -> Site | None:
    if transition.guard is None:
        return None
    return Site(Role.GUARD, transition.guard.name, transition.mark_of("guard"),
                transition.source, transition.target)


def action_sites(transition: TransitionIR) -> Iterator[Site]:
    mark = transition.mark_of("actions")
    for name in transition.actions:
        yield Site(Role.TRANSITION, name, mark, transition.source, transition.target)


def initial_child(ir: MachineIR, state_id: str | None) -> str | None:
    """The child entered by default (the root's when ``state_id`` is None).

    The IR leaves ``initial`` unset when it is ambiguous (lint reports M202); backends
    then agree on the first non-history child in document order, as python-statemachine
    does.
    """
    if state_id is None:
        explicit, children = ir.initial, ir.top
    else:
        state = ir.states[state_id]
        explicit, children = state.initial, state.children
    if explicit is not None:
        return explicit
    for child in children:
        if not ir.states[child].is_history:
            return child
    return None
