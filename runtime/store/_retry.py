"""Bounded retry with exponential backoff, shared by the store backends."""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TypeVar

from interlock.runtime.store.base import StoreUnavailable

T = TypeVar("T")

# Told before each pause: (failed attempt number from 1, pause in seconds, the error).
OnRetry = Callable[[int, float, Exception], None]


@dataclass(frozen=True, slots=True)
class Backoff:
    """``attempts`` tries in all; the pauses between them grow from ``first`` by ``factor``
    up to ``cap``, each shortened by up to a quarter at random so processes spread out."""

    attempts: int = 6
    first: float = 0.05
    factor: float = 2.0
    cap: float = 2.0

    def pauses(self) -> Iterator[float]:
        pause = self.first
        for _ in range(self.attempts - 1):
            yield min(pause, self.cap) * random.uniform(0.75, 1.0)
            pause *= self.factor

    @property
    def budget(self) -> float:
        """The longest total pause, in seconds."""
        return sum(min(self.first * self.factor**i, self.cap) for i in range(self.attempts - 1))


def retry(
    op: Callable[[], T],
    *,
    backoff: Backoff,
    transient: Callable[[Exception], bool],
    give_up: Callable[[Exception, int], str],
    on_retry: OnRetry | None = None,
) -> T:
    """Run ``op``; on a transient error pause and run it again, at most
    ``backoff.attempts`` times, then raise StoreUnavailable(give_up(error, attempts))."""
    pauses = backoff.pauses()
    attempt = 0
    while True:
        attempt += 1
        try:
            return op()
        except Exception as error:
            if not transient(error):
                raise
            pause = next(pauses, None)
            if pause is None:
                raise StoreUnavailable(give_up(error, attempt)) from error
            if on_retry is not None:
                on_retry(attempt, pause, error)
            time.sleep(pause)
