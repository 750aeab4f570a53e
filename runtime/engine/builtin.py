"""What a built-in spec's runtime side is made of (:class:`Builtin`), and what it is given.

Each built-in spec ``specs/<name>.yaml`` has a module in the room it belongs to (found by
:func:`interlock.runtime.builtin.machines.builtin_for`) that defines ``BUILTIN``, a
:class:`Builtin`: how to make its bindings for one session, and, for ``interlock run <name>
--demo``, the context a demo starts with and a scripted stand-in for whatever the machine
waits for from the outside world (:class:`DemoDriver`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from interlock.machines.bindings import Bindings
from interlock.runtime.engine.host import SessionHost
from interlock.runtime.engine.session import Step
from interlock.runtime.store import Store
from interlock.runtime.store.base import AgentProcessStore


class DemoDriver:
    """The scripted outside world of a ``--demo`` run, beside the runner in its loop.

    ``active`` is the configuration as of the last committed step; ``send`` queues an
    event like ``interlock send`` and wakes the runner; ``wait_for`` waits (bounded) until
    one of some states is active.
    """

    def __init__(self, session_id: str, active: Callable[[], tuple[str, ...]],
                 send: Callable[[str, dict[str, Any]], None],
                 context: Callable[[], Mapping[str, Any]]) -> None:
        self.session_id = session_id
        self._active = active
        self._send = send
        self._context = context

    @property
    def active(self) -> tuple[str, ...]:
        return self._active()

    @property
    def context(self) -> Mapping[str, Any]:
        return self._context()

    def send(self, event: str, data: Mapping[str, Any] | None = None) -> None:
        self._send(event, dict(data or {}))

    async def wait_for(self, *states: str, timeout: float = 60.0, poll: float = 0.01) -> str:
        """The first of ``states`` that is active; TimeoutError after ``timeout`` s."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        while True:
            active = set(self._active())
            for state in states:
                if state in active:
                    return state
            if loop.time() >= deadline:
                raise TimeoutError(f"the demo waited {timeout:g}s for "
                                   f"{' or '.join(states)}; active: {sorted(active)}")
            await asyncio.sleep(poll)


Watcher = Callable[[DemoDriver], Awaitable[None]]


class SessionPort:
    """How a built-in's own event sources (an agent's output, its exit, poll ticks) reach
    the durable session its bindings serve.

    The façade connects the port once the session's runner is open, on every run (start
    or resume): :meth:`send` then queues an event in the store's event queue, where the runner
    takes it as its next step (journaled like any sent event), and wakes the runner.
    ``store`` is the port's own store connection (for an agent registry), usable on the
    runner's event loop. Coroutines given to :meth:`watch` run beside the runner on that
    loop for each run and are cancelled when it ends (their ``finally`` cleans up).
    """

    def __init__(self) -> None:
        self.driver: DemoDriver | None = None
        self.store: AgentProcessStore | None = None
        self.note: Callable[[str], None] | None = None
        self.watchers: list[Watcher] = []

    def connect(self, driver: DemoDriver, store: AgentProcessStore,
                note: Callable[[str], None] | None = None) -> None:
        self.driver, self.store, self.note = driver, store, note

    def watch(self, watcher: Watcher) -> None:
        self.watchers.append(watcher)

    def send(self, event: str, data: Mapping[str, Any] | None = None) -> None:
        if self.driver is None:
            raise RuntimeError("the session port is not connected to a runner yet")
        self.driver.send(event, data)


@dataclass(frozen=True, slots=True)
class BuiltinSetup:
    """What a built-in's bindings may need to know about the session they serve."""

    session_id: str
    root: Path  # the working folder (interlock.yaml, .interlock/)
    folder: Path  # the session's own folder
    demo: bool = False
    options: Mapping[str, Any] = field(default_factory=dict)
    port: SessionPort = field(default_factory=SessionPort)
    store_url: str | None = None  # the store the session is in (None: the default)


class OpenHost(Protocol):
    """A built-in that assembles its session's host itself (its plugins, agents and
    child machines): the session opened (created with ``context``, or resumed) in
    ``store``, ready to run."""

    def __call__(self, setup: BuiltinSetup, store: Store, *,
                 context: Mapping[str, Any] | None, stop: asyncio.Event | None,
                 on_step: Callable[[Step], None] | None,
                 on_note: Callable[[str], None] | None) -> Awaitable[SessionHost]: ...


@dataclass(frozen=True, slots=True)
class Builtin:
    """One built-in spec's runtime side: its bindings, or ``open_host``, the whole
    assembly of its session (``ralph_orchestrator``: the Ralph session's)."""

    name: str
    bindings: Callable[[BuiltinSetup], Bindings]
    demo_context: Mapping[str, Any] = field(default_factory=dict)
    demo: Callable[[DemoDriver], Awaitable[None]] | None = None
    open_host: OpenHost | None = None
