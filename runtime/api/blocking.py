"""Coroutines as blocking calls, async generators as plain generators: how
:mod:`interlock.runtime.sync` (generated) turns the façade into calls for scripts."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable, Coroutine, Iterator
from functools import wraps
from typing import Any, ParamSpec, TypeVar

P = ParamSpec("P")
T = TypeVar("T")


def blocking(fn: Callable[P, Coroutine[Any, Any, T]]) -> Callable[P, T]:
    """``fn`` run to completion on a loop of its own (``asyncio.run``)."""

    @wraps(fn)
    def call(*args: P.args, **kwargs: P.kwargs) -> T:
        return asyncio.run(fn(*args, **kwargs))

    return call


def iterating(fn: Callable[P, AsyncIterator[T]]) -> Callable[P, Iterator[T]]:
    """``fn``'s items, each awaited on a loop of its own for the whole iteration."""

    @wraps(fn)
    def call(*args: P.args, **kwargs: P.kwargs) -> Iterator[T]:
        loop = asyncio.new_event_loop()
        items = fn(*args, **kwargs)
        try:
            while True:
                try:
                    yield loop.run_until_complete(anext(items))
                except StopAsyncIteration:
                    return
        finally:
            aclose = getattr(items, "aclose", None)
            if aclose is not None:
                loop.run_until_complete(aclose())
            loop.close()

    return call
