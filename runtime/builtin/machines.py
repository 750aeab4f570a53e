"""The registry of the built-in specs' runtime sides, and the plugin that runs their
watchers and ``--demo`` stand-ins beside a session.

Each built-in spec ``specs/<name>.yaml`` may have a module defining ``BUILTIN``, a
:class:`~interlock.runtime.engine.builtin.Builtin` (its bindings, its demo): found by
:func:`builtin_for`. Demo agents stand in for real agents through the agents
configuration, not here.
"""

from __future__ import annotations

import asyncio
import importlib
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from interlock.runtime.engine.builtin import Builtin, DemoDriver, SessionPort, Watcher
from interlock.runtime.engine.builtin_specs import builtin_spec_dir
from interlock.runtime.engine.host import HostPlugin, SessionHost
from interlock.runtime.engine.runner import RunOutcome
from interlock.runtime.store import Store, open_store


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
        self._tasks: list[asyncio.Task[None]] = []
        self._queue: Store | None = None

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

        self._queue = queue
        self._tasks = [asyncio.create_task(play(part)) for part in plays]
        # Each runs up to its first wait before the runner's first step: a watcher that
        # starts again what a crash interrupted sees the session as the crash left it.
        await asyncio.sleep(0)

    async def stop(self, outcome: RunOutcome | None) -> None:
        tasks, self._tasks = self._tasks, []
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)  # their cleanup first
        if self._queue is not None:
            self._queue.close()
            self._queue = None


_registered: dict[str, Builtin] = {}


def register(builtin: Builtin) -> None:
    """Make ``builtin`` known by its name (the built-in modules do; so can tests)."""
    _registered[builtin.name] = builtin


# Where each built-in's runtime side lives: in the room it belongs to (a name not here:
# ``interlock.runtime.builtin.<name>``). Imported by name, on first use.
MODULES: dict[str, str] = {
    "ralph_orchestrator": "interlock.runtime.ralph.builtin_orchestrator",
    "ralph_subagent": "interlock.runtime.ralph.builtin_subagent",
    "review_menu": "interlock.runtime.interview.builtin_review_menu",
    "poller_interview": "interlock.runtime.interview.builtin_poller_interview",
    "inbox_poller": "interlock.runtime.inbox.builtin_poller",
}


def builtin_for(name: str) -> Builtin | None:
    """The runtime side of the built-in spec ``name``, or None when it has none."""
    if name not in _registered:
        home = MODULES.get(name, f"interlock.runtime.builtin.{name}")
        try:
            module = importlib.import_module(home)
        except ModuleNotFoundError as exc:
            if exc.name != home:
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
