"""The façade for scripts without an event loop: the same calls, blocking.

>>> from interlock.runtime import sync
>>> sync.sessions(root=tmp)  # doctest: +SKIP
[]
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Coroutine
from functools import wraps
from typing import Any, ParamSpec, TypeVar

from interlock.runtime.api import interview as _interview
from interlock.runtime.api import sessions as _sessions

P = ParamSpec("P")
T = TypeVar("T")


def _blocking(fn: Callable[P, Coroutine[Any, Any, T]]) -> Callable[P, T]:
    @wraps(fn)
    def call(*args: P.args, **kwargs: P.kwargs) -> T:
        return asyncio.run(fn(*args, **kwargs))

    return call


start = _blocking(_sessions.start)
resume = _blocking(_sessions.resume)
send = _blocking(_sessions.send)
status = _blocking(_sessions.status)
sessions = _blocking(_sessions.sessions)
log = _blocking(_sessions.log)
staged = _blocking(_interview.staged)
consume_staged = _blocking(_interview.consume_staged)
review = _interview.review_blocking
resume_review = _interview.resume_blocking

__all__ = ["consume_staged", "log", "resume", "resume_review", "review", "send", "sessions",
           "staged", "start", "status"]
