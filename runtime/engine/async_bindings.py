"""Async guards and actions: a binding may be ``async def``.

Machines step synchronously (run to completion), so an awaitable a binding returns is
awaited right there: on the runner's event loop when the step runs in a worker thread
(as ``Runner.run`` does, so the loop stays free to renew the lease and to hear Ctrl-C),
or on a fresh loop when the caller has none.
"""

from __future__ import annotations

import asyncio
import inspect
import threading
from collections.abc import Awaitable
from typing import Any

from interlock.machines.bindings import Binding, Bindings, Call


class LoopRef:
    """The event loop async bindings run on, once a runner has one."""

    def __init__(self) -> None:
        self.loop: asyncio.AbstractEventLoop | None = None
        self.thread: int | None = None

    def attach(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self.thread = threading.get_ident()


async def _wait(awaitable: Awaitable[Any]) -> Any:
    return await awaitable


def resolve(awaitable: Awaitable[Any], ref: LoopRef) -> Any:
    """The awaitable's result, computed on the runner's loop or on a fresh one."""
    loop = ref.loop
    if loop is not None and loop.is_running():
        if threading.get_ident() == ref.thread:
            raise RuntimeError(
                "an async binding was reached on the event loop's own thread; step the "
                "session through Runner.run (which steps in a worker thread)"
            )
        return asyncio.run_coroutine_threadsafe(_wait(awaitable), loop).result()
    return asyncio.run(_wait(awaitable))


def bridge(bindings: Bindings, ref: LoopRef) -> dict[str, Binding]:
    """The same bindings, each returning a plain value even when it is async."""

    def wrap(fn: Binding) -> Binding:
        def call(c: Call) -> Any:
            result = fn(c)
            return resolve(result, ref) if inspect.isawaitable(result) else result

        call.__name__ = getattr(fn, "__name__", "binding")
        return call

    return {name: wrap(fn) for name, fn in bindings.items()}
