"""The one host that runs a session: its runner and the plugins beside it.

Every session, whatever started it (``interlock run``, ``interlock ralph run``, the
Python façade), runs in a :class:`SessionHost`: it stops the agent processes a dead
runner left behind, opens the session's :class:`~interlock.runtime.engine.runner.Runner`
(store, lease, invoker, timers, child sessions), then runs it with its plugins until it
ends. A plugin is what a session needs beside its machine: the live-signal feed of its
mailbox, the inbox poller, a built-in's event watchers, the Ralph session's folder and
limits. Each is told when the host starts, after every committed step, and when the run
ends; none of them polls. A plugin may end the run (``host.stop``) and leave a note.

Nothing in the host wakes on a timer to look for work: the runner waits for a wake-up
(a signal, an invocation's end, the store changing, the next timer's deadline).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Any

from interlock.runtime.engine.runner import Opened, Runner, RunOutcome
from interlock.runtime.engine.session import Step
from interlock.runtime.store import Store

LOG = logging.getLogger(__name__)
Note = Callable[[str], None]


class HostPlugin:
    """A part of a session's host; every hook is optional (the defaults do nothing).

    ``start`` runs before the runner's first step (on the host's loop); ``on_step`` after
    each committed step, on the loop, so it must be quick (a plugin with slow work to do
    hands it to a task of its own); ``stop`` when the run has ended, before the runner
    lets its lease go, in the reverse order of the starts.
    """

    async def start(self, host: SessionHost) -> None:
        return None

    def on_step(self, step: Step) -> None:
        return None

    async def stop(self, outcome: RunOutcome | None) -> None:
        return None


class SessionHost:
    """One session's runner and its plugins (see the module docstring)."""

    def __init__(self, runner: Runner, opened: Opened | None = None, *,
                 stop: asyncio.Event | None = None,
                 on_step: Callable[[Step], None] | None = None,
                 on_note: Note | None = None) -> None:
        self.runner = runner
        self.created = opened.created if opened is not None else False
        self.stop = stop or asyncio.Event()
        self._on_step = on_step
        self.note: Note = on_note or (lambda _text: None)
        self.plugins: list[HostPlugin] = []

    @classmethod
    async def open(cls, store: Store, spec_text: str | None, spec_path: str, *,
                   stop: asyncio.Event | None = None,
                   on_step: Callable[[Step], None] | None = None,
                   on_note: Note | None = None, **runner: Any) -> SessionHost:
        """Stop the agent processes dead runners left behind, then open the session
        (``runner``: :meth:`Runner.open`'s keyword arguments)."""
        await asyncio.to_thread(reap, store, on_note)
        opened_runner, opened = await asyncio.to_thread(Runner.open, store, spec_text,
                                                        spec_path, **runner)
        return cls(opened_runner, opened, stop=stop, on_step=on_step, on_note=on_note)

    def add(self, *plugins: HostPlugin | None) -> SessionHost:
        """Run ``plugins`` beside the runner (None is skipped)."""
        self.plugins += [p for p in plugins if p is not None]
        return self

    async def run(self) -> RunOutcome:
        """Start the plugins, run the session until it ends or :attr:`stop` is set, stop
        the plugins, close the runner."""
        started: list[HostPlugin] = []
        outcome: RunOutcome | None = None
        try:
            for plugin in self.plugins:
                await plugin.start(self)
                started.append(plugin)
            outcome = await self.runner.run(self.stop, on_step=self._stepped)
            return outcome
        finally:
            for plugin in reversed(started):
                try:
                    await plugin.stop(outcome)
                except Exception:  # one plugin's failure must not keep the lease held
                    LOG.exception("stopping %s failed", type(plugin).__name__)
            await asyncio.to_thread(self.runner.close)

    def _stepped(self, step: Step) -> None:
        if self._on_step is not None:
            self._on_step(step)
        for plugin in self.plugins:
            plugin.on_step(step)


def reap(store: Store, on_note: Note | None = None) -> None:
    """Stop agent process groups that a dead runner or dispatcher left behind."""
    from interlock.runtime.engine.orphans import reap_orphans

    for reaped in reap_orphans(store):
        if on_note is not None:
            on_note(f"stopped {reaped.describe()}")

