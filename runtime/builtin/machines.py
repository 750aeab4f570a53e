"""The runtime side of the built-in specs: their bindings, and their ``--demo`` stand-ins.

Each built-in spec ``specs/<name>.yaml`` has a module ``interlock.runtime.builtin.<name>``
that defines ``BUILTIN``, a :class:`Builtin`: how to make its bindings for one session,
and, for ``interlock run <name> --demo``, the context a demo starts with and a scripted
stand-in for whatever the machine waits for from the outside world (a ``start`` event, a
menu choice, a human's answers). Demo agents stand in for real agents through the agents
configuration, not here.
"""

from __future__ import annotations

import asyncio
import contextlib
import importlib
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from interlock.machines.bindings import Bindings
from interlock.runtime.engine.builtin_specs import builtin_spec_dir
from interlock.runtime.engine.host import HostPlugin, SessionHost
from interlock.runtime.engine.runner import RunOutcome
from interlock.runtime.engine.session import Step
from interlock.runtime.store import Store, open_store
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


class Watchers(HostPlugin):
    """A built-in's own event sources (its bindings' watchers, on every run) and, for a
    ``demo``, its scripted stand-ins, beside the runner as a plugin of the session's
    host. Their sends go through a store connection of their own; if one fails, the run
    stops with the reason noted."""

    def __init__(self, builtin: Builtin, port: SessionPort, store_url: str | None,
                 root: Path, demo: bool) -> None:
        self.builtin = builtin
        self.port = port
        self.store_url = store_url
        self.root = root
        self.demo = demo
        self._task: asyncio.Task[None] | None = None

    async def start(self, host: SessionHost) -> None:
        demo = self.builtin.demo if self.demo else None
        plays = [*self.port.watchers, *([demo] if demo is not None else [])]
        if not plays:
            return
        runner = host.runner
        queue = open_store(self.store_url, self.root)

        def send(event: str, data: dict[str, Any]) -> None:
            queue.enqueue(runner.session_id, event, data, time.time())
            runner.wake()

        driver = DemoDriver(runner.session_id, lambda: runner.active, send,
                            lambda: runner.session.context)
        self.port.connect(driver, queue, host.note)

        async def play(part: Watcher) -> None:
            try:
                await part(driver)
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # a stand-in that fails stops the run, with the reason
                host.note(f"{self.builtin.name}: {type(exc).__name__}: {exc}")
                host.stop.set()

        async def together() -> None:
            tasks = [asyncio.create_task(play(part)) for part in plays]
            try:
                await asyncio.gather(*tasks)
            finally:
                for task in tasks:
                    task.cancel()
                await asyncio.gather(*tasks, return_exceptions=True)  # their cleanup first
                queue.close()

        self._task = asyncio.create_task(together())

    async def stop(self, outcome: RunOutcome | None) -> None:
        task, self._task = self._task, None
        if task is not None:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task


_registered: dict[str, Builtin] = {}


def register(builtin: Builtin) -> None:
    """Make ``builtin`` known by its name (the built-in modules do; so can tests)."""
    _registered[builtin.name] = builtin


def builtin_for(name: str) -> Builtin | None:
    """The runtime side of the built-in spec ``name``, or None when it has none."""
    if name not in _registered:
        try:
            module = importlib.import_module(f"interlock.runtime.builtin.{name}")
        except ModuleNotFoundError as exc:
            if exc.name != f"interlock.runtime.builtin.{name}":
                raise
            return None
        found = getattr(module, "BUILTIN", None)
        if isinstance(found, Builtin):
            register(found)
    return _registered.get(name)


def is_builtin_spec(path: Path) -> bool:
    """Whether ``path`` is one of the specs shipped in the wheel."""
    try:
        return path.resolve().parent == builtin_spec_dir().resolve()
    except OSError:
        return False


def builtin_names() -> Iterable[str]:
    return sorted(p.stem for p in builtin_spec_dir().glob("*.yaml"))
