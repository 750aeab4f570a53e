"""A session run by its :class:`~interlock.runtime.engine.runner.Runner`, beside a front end.

The poller interview invokes its agent (``invoke:`` in ``consulting``), so the session must
keep taking events while the agent works: the agent's ``done.invoke.poller`` arrives in the
inbox, timers fire, the lease is renewed and a cancel request is heard. :class:`LiveSession`
runs ``Runner.run`` on an event loop in a thread of its own, as ``interlock run`` would; the
front end stays in the caller's thread (the terminal UI wants the main thread), waits until
the session is at rest (at a question, or over), and sends the player's answer in as queued
events, like ``interlock send``. Nothing here steps the session itself.

The caller's view of the session is taken after each pump of the runner, when the session
is between steps, together with whether the event queue still holds events (so an answer sent
is known to be taken once a later view shows the queue empty).
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from interlock.runtime.engine.runner import Runner, RunOutcome
from interlock.runtime.engine.session import Step

WAIT_SLICE = 1.0  # seconds: the longest single wait for the runner's thread (Ctrl-C stays live)


@dataclass(frozen=True)
class View:
    """The session as of one moment between steps."""

    seq: int
    active: tuple[str, ...]
    context: dict[str, Any]
    final: bool
    deadline: float | None  # the soonest armed timer (the question's idle timeout)
    pending: bool  # events were waiting in the event queue


class LiveSession:
    """Runs ``runner`` until its session is final, failed, cancelled or :meth:`close`;
    ``at_rest(active)`` says when the caller has something to do (a question is on
    screen)."""

    def __init__(self, runner: Runner, at_rest: Callable[[tuple[str, ...]], bool]) -> None:
        self.runner = runner
        self.at_rest = at_rest
        self.outcome: RunOutcome | None = None  # how the run ended, once it has
        self._error: BaseException | None = None
        self._changed = threading.Condition()
        self._view = self._look()
        self._ended = False
        self._loop = asyncio.new_event_loop()
        self._stop = asyncio.Event()
        self._thread = threading.Thread(target=self._main, daemon=True,
                                        name=f"interlock-{runner.session_id}")
        self._thread.start()

    @property
    def session_id(self) -> str:
        return self.runner.session_id

    # -- the runner's side ------------------------------------------------------------

    def _look(self) -> View:
        """Read between steps only (before the run, after a pump, after the run)."""
        session = self.runner.session
        return View(self.runner.seq, session.active, copy.deepcopy(session.context),
                    session.is_final, session.next_deadline(),
                    bool(self.runner.store.queued_events(self.runner.session_id)))

    def _stepped(self, step: Step) -> None:
        with self._changed:
            self._view = self._look()
            self._changed.notify_all()

    def _main(self) -> None:
        try:
            self.outcome = self._loop.run_until_complete(
                self.runner.run(self._stop, on_step=self._stepped))
        except BaseException as exc:  # handed to the caller's thread by settle()
            self._error = exc
        finally:
            with self._changed:
                with contextlib.suppress(Exception):
                    self._view = self._look()
                self._ended = True
                self._changed.notify_all()
            with contextlib.suppress(Exception):  # the runner's worker threads, as asyncio.run
                self._loop.run_until_complete(self._loop.shutdown_default_executor())
            self._loop.close()

    # -- the caller's side ------------------------------------------------------------

    def settle(self, since: int | None = None) -> View:
        """Wait until the session is final or the run is over, or until it is at rest with
        an empty inbox in a view newer than ``since`` (a view's ``seq``)."""
        with self._changed:
            while True:
                view = self._view
                if self._error is not None:
                    raise self._error
                if self._ended or view.final:
                    return view
                if (since is None or view.seq > since) and not view.pending \
                        and self.at_rest(view.active):
                    return view
                self._changed.wait(WAIT_SLICE)

    def send(self, events: Sequence[tuple[str, dict[str, Any]]]) -> View:
        """Queue ``events`` in the session's event queue, in order, and wait until they are taken
        and the session is at rest again (or over)."""
        store, clock = self.runner.store, self.runner.clock
        with self._changed:
            since = self._view.seq
            for event, data in events:  # a view taken after this sees them pending
                store.enqueue(self.session_id, event, dict(data), clock.now())
        self.runner.wake()
        return self.settle(since)

    def wait_for_step(self, view: View) -> View:
        """After a question's deadline passed unanswered: wait until the runner has fired
        the idle timer (or anything else happened)."""
        self.runner.wake()
        return self.settle(view.seq)

    @property
    def ended(self) -> bool:
        with self._changed:
            return self._ended or self._view.final

    def close(self) -> None:
        """Stop the run (a step under way finishes and commits first), then close the
        runner: an agent still working is stopped (journaled ``interrupted``)."""
        if self._thread.is_alive():
            with contextlib.suppress(RuntimeError):  # the loop closed meanwhile
                self._loop.call_soon_threadsafe(self._stop.set)
            self._thread.join()
        self.runner.close()
