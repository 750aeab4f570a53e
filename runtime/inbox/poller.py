"""The idle-only inbox poller (seed 002), driven by ``specs/inbox_poller.yaml``.

The spec runs as an in-memory :class:`~interlock.runtime.engine.session.Session` on the
injected engine :class:`Clock` (the way ``runtime/dispatch`` runs ``polling_state``); the
machine makes every decision and this module binds its guards and actions:

* ``agent_streaming`` is ``not is_idle()``: while the session has an agent invocation in
  flight, a due poll is skipped (no adapter call) and the wait starts again;
* ``fetch_queued``/``claim_next`` call the adapter and raise ``fetched``/``fetch_failed``
  and ``claimed``/``claim_lost``/``claim_failed``;
* ``count_failure`` sets ``backoff_delay`` with full jitter: uniform in
  ``[0, min(backoff_base * 2^(n-1), backoff_max)]`` from the injected RNG;
* ``notice_degraded``/``notice_recovered`` log once per outage (entry of ``degraded``,
  and the one transition out of it);
* ``enqueue_prompt`` hands the claimed message to ``deliver``; ``emit_inbox_increment``
  adds the round's messages to ``inbox_count`` and calls ``on_count``.

Nothing is ever acked automatically: :meth:`InboxPoller.ack`, ``done`` and ``failed``
are explicit, fenced by the lease token of the claim. ``/poll on|off|interval`` live in
the store's settings (``interlock inbox on|off|interval`` writes them); :meth:`tick` reads
them and sends ``poll.on``/``poll.off``/``poll.interval``.

Drive it with :meth:`tick` (tests, on a ManualClock) or :meth:`run` (an asyncio task).
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import random
from collections.abc import Callable
from pathlib import Path
from typing import Any

from interlock.machines import Call, compile, load
from interlock.machines.backends.base import CompiledMachine
from interlock.runtime.config.inbox import PollerConfig
from interlock.runtime.config.inbox_store import InboxError
from interlock.runtime.engine.builtin_specs import resolve_spec
from interlock.runtime.engine.clock import Clock
from interlock.runtime.engine.session import Session
from interlock.runtime.host.owners import default_owner
from interlock.runtime.inbox.base import InboxAdapter
from interlock.runtime.inbox.model import Message, MessageLease, Status, UnknownMessage

LOG = logging.getLogger("interlock.inbox")
MIN_DELAY = 0.001  # a jittered delay never rounds down to a busy loop
SETTINGS_REFRESH = 5.0  # run(): re-read the store's settings at least this often
MAX_FETCH = 1000  # the most messages one fetch asks for (batch + those skipped)


@functools.lru_cache(maxsize=1)
def _spec_path() -> Path:
    return resolve_spec("inbox_poller")


def backoff_bound(failures: int, base: float, cap: float) -> float:
    """The upper bound of the n-th consecutive failure's delay: ``min(base*2^(n-1), cap)``."""
    return min(base * 2.0 ** max(failures - 1, 0), cap)


class InboxPoller:
    """Surfaces queued messages to one session while its agent is idle."""

    def __init__(self, adapter: InboxAdapter, *, clock: Clock, is_idle: Callable[[], bool],
                 deliver: Callable[[Message], None], config: PollerConfig | None = None,
                 owner: str | None = None, rng: random.Random | None = None,
                 logger: logging.Logger | None = None,
                 on_count: Callable[[int], None] | None = None,
                 skip: Callable[[Message], bool] | None = None) -> None:
        self.adapter = adapter
        self.clock = clock
        self.is_idle = is_idle
        self.deliver = deliver
        self.config = config or PollerConfig()
        self.owner = owner or default_owner("inbox")
        self.rng = rng or random.Random()
        self.log = logger or LOG
        self.on_count = on_count
        self.skip = skip  # fetched messages to leave alone (already delivered elsewhere)
        self._skipped = 0  # how many the last fetch skipped: the next fetch takes more
        self.leases: dict[str, tuple[Message, MessageLease]] = {}  # claimed, not yet finished
        self._enabled = self.config.enabled
        self._queued: list[Message] = []
        self._claimed: Message | None = None
        self._round = 0
        self._last_error = ""
        self._mark_outcome: Message | InboxError | None = None
        self._wake: asyncio.Event | None = None
        self._running = False
        self._stopping = False
        self.session: Session | None = None

    @classmethod
    def from_config(cls, config: PollerConfig, *, clock: Clock, is_idle: Callable[[], bool],
                    deliver: Callable[[Message], None], root: Path | None = None,
                    **options: Any) -> InboxPoller:
        """A poller on the store ``config`` names (requests bounded by its
        ``request_timeout``); ``options`` as for the constructor."""
        from interlock.runtime.inbox.connection import connect

        adapter = connect(config.store, timeout=config.request_timeout, root=root)
        return cls(adapter, clock=clock, is_idle=is_idle, deliver=deliver, config=config,
                   **options)

    # -- the machine ------------------------------------------------------------------

    def _compile(self) -> CompiledMachine:
        return compile(load(_spec_path()), bindings=self.bindings())

    def context_from_config(self) -> dict[str, Any]:
        """The spec's context fields this poller's config sets."""
        c = self.config
        return {"adapter": type(self.adapter).__name__, "poll_interval": c.interval,
                "request_timeout": c.request_timeout, "lease_duration": c.lease,
                "backoff_base": c.backoff_base, "backoff_max": c.backoff_max,
                "backoff_delay": c.backoff_base}

    def bindings(self) -> dict[str, Callable[[Call], Any]]:
        """The spec's guards and actions on this poller's adapter (also what the durable
        ``inbox_poller`` built-in binds: runtime/inbox/builtin_poller.py)."""
        def reset_backoff(call: Call) -> None:
            call.context["consecutive_failures"] = 0
            call.context["backoff_delay"] = call.context["backoff_base"]

        def count_failure(call: Call) -> None:
            n = call.context["consecutive_failures"] + 1
            call.context["consecutive_failures"] = n
            bound = backoff_bound(n, float(call.context["backoff_base"]),
                                  float(call.context["backoff_max"]))
            call.context["backoff_delay"] = max(self.rng.uniform(0.0, bound), MIN_DELAY)
            if "error" in call.data:
                self._last_error = str(call.data["error"])

        def fetch(call: Call) -> None:
            try:
                fetched = self.adapter.fetch_queued(min(self.config.batch + self._skipped,
                                                        MAX_FETCH))
                fresh = [m for m in fetched if self.skip is None or not self.skip(m)]
            except InboxError as exc:
                call.raise_event("fetch_failed", error=str(exc))
                return
            self._skipped = len(fetched) - len(fresh)
            self._queued = fresh[:self.config.batch]
            self._round = 0
            call.raise_event("fetched", count=len(self._queued))

        def claim_next(call: Call) -> None:
            message = self._queued.pop(0)
            try:
                lease = self.adapter.claim(message.id, self.owner, self.config.lease)
            except UnknownMessage:
                lease = None
            except InboxError as exc:
                self._queued.clear()
                call.raise_event("claim_failed", error=str(exc))
                return
            if lease is None:
                call.raise_event("claim_lost", id=message.id)
                return
            self._claimed = message
            self.leases[message.id] = (message, lease)
            call.raise_event("claimed", id=message.id)

        def enqueue_prompt(call: Call) -> None:
            assert self._claimed is not None
            self._round += 1
            self.deliver(self._claimed)

        def emit_increment(call: Call) -> None:
            if self._round:
                call.context["inbox_count"] += self._round
                self._round = 0
                if self.on_count is not None:
                    self.on_count(call.context["inbox_count"])

        def notice_degraded(call: Call) -> None:
            self.log.warning("inbox degraded: %s (%s); retrying with backoff",
                             self._last_error or "the inbox does not answer", self.adapter)

        def notice_recovered(call: Call) -> None:
            self.log.info("inbox recovered after %d failed attempts",
                          call.context["consecutive_failures"])

        def mark(status: Status) -> Callable[[Call], None]:
            def action(call: Call) -> None:
                self._mark_outcome = self._mark(str(call.data["id"]), status,
                                                call.data.get("reason"))
            return action

        def set_poll_interval(call: Call) -> None:
            call.context["poll_interval"] = float(call.data["seconds"])

        return {
            "enabled_in_settings": lambda call: self._enabled,
            "config_valid": lambda call: True,  # connect() validated the store up front
            "agent_streaming": lambda call: not self.is_idle(),
            "has_queued": lambda call: bool(self._queued),
            "reset_backoff": reset_backoff,
            "note_disabled": lambda call: self.log.info(
                "inbox poller off (turn it on with `interlock inbox on`)"),
            "report_config_error": lambda call: None,  # never reached: see config_valid
            "set_poll_interval": set_poll_interval,
            "list_messages": lambda call: None,  # listing needs no state: use the API
            "mark_acked": mark(Status.ACKED),
            "mark_done": mark(Status.DONE),
            "mark_failed": mark(Status.FAILED),
            "fetch_queued": fetch,
            "count_failure": count_failure,
            "claim_next": claim_next,
            "enqueue_prompt": enqueue_prompt,
            "emit_inbox_increment": emit_increment,
            "notice_degraded": notice_degraded,
            "notice_recovered": notice_recovered,
        }

    def _mark(self, message_id: str, status: Status,
              reason: str | None) -> Message | InboxError:
        held = self.leases.get(message_id)
        try:
            message = self.adapter.update_status(message_id, status,
                                                 held[1].token if held else None,
                                                 reason=reason)
        except InboxError as exc:
            return exc
        if status is not Status.ACKED:
            self.leases.pop(message_id, None)
        return message

    # -- state ------------------------------------------------------------------------

    @property
    def state(self) -> tuple[str, ...]:
        return self.session.active if self.session is not None else ()

    @property
    def count(self) -> int:
        """Messages surfaced so far (the spec's ``inbox_count``)."""
        return int(self.session.context["inbox_count"]) if self.session else 0

    @property
    def pending(self) -> int:
        """Messages this poller claimed that are not done or failed yet."""
        return len(self.leases)

    @property
    def enabled(self) -> bool:
        return self.session is not None and "enabled" in self.session.active

    def next_deadline(self) -> float | None:
        return self.session.next_deadline() if self.session is not None else None

    # -- driving ----------------------------------------------------------------------

    def start(self) -> None:
        """Start the machine and send ``start`` (enabled if the settings say so)."""
        self.session = Session.start(self._compile(), self.clock, self.context_from_config())
        self._sync_settings()
        self.session.send("start")

    def tick(self) -> None:
        """Follow the store's settings, then fire the timers that are due."""
        if self.session is None:
            self.start()
        assert self.session is not None
        self._sync_settings()
        self.session.fire_due()

    def _sync_settings(self) -> None:
        assert self.session is not None
        try:
            stored = self.adapter.settings()
        except InboxError:
            return  # the poll itself will notice and back off
        self._enabled = bool(stored.get("enabled", self.config.enabled))
        interval = float(stored.get("interval", self.config.interval))
        if interval != self.session.context["poll_interval"] and not self.session.send(
                "poll.interval", {"seconds": interval}).accepted:
            self.session.context["poll_interval"] = interval  # disabled: used when enabled
        if self._enabled and "disabled" in self.session.active:
            self.session.send("poll.on")
        elif not self._enabled and "enabled" in self.session.active:
            self.session.send("poll.off")

    def stop(self) -> None:
        """``shutdown``: unfinished claims come back when their leases run out. While
        :meth:`run` works, it is asked to stop and sends ``shutdown`` itself (its ticks run
        in a worker thread, and the machine is stepped by one thread at a time)."""
        if self._running:
            self._stopping = True
            if self._wake is not None:
                self._wake.set()
        elif self.session is not None and not self.session.is_final:
            self.session.send("shutdown")

    def nudge(self) -> None:
        """Wake :meth:`run` now (the agent went idle, settings changed)."""
        if self._wake is not None:
            self._wake.set()

    async def run(self) -> None:
        """Tick at every deadline (and every SETTINGS_REFRESH s) until :meth:`stop`.

        Each tick runs in a worker thread, so that an adapter call (bounded by
        ``request_timeout``) never holds up the caller's event loop."""
        self._wake = asyncio.Event()
        self._running, self._stopping = True, False
        ticking: asyncio.Future[None] | None = None
        try:
            ticking = asyncio.ensure_future(asyncio.to_thread(self.tick))
            await ticking
            assert self.session is not None
            while not self.session.is_final and not self._stopping:
                deadline = self.session.next_deadline()
                now = self.clock.now()
                wait = SETTINGS_REFRESH if deadline is None else min(
                    SETTINGS_REFRESH, max(deadline - now, 0.0))
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._wake.wait(), wait)
                self._wake.clear()
                if not self.session.is_final and not self._stopping:
                    ticking = asyncio.ensure_future(asyncio.to_thread(self.tick))
                    await ticking
        finally:
            if ticking is not None and not ticking.done():
                await asyncio.wait([ticking])  # cancelled: let the tick under way finish
            self._running = False
            if self.session is not None and not self.session.is_final:
                self.session.send("shutdown")

    # -- explicit acknowledgement (never automatic) -----------------------------------

    def ack(self, message_id: str, reason: str | None = None) -> Message:
        return self._command("poll.ack", message_id, Status.ACKED, reason)

    def done(self, message_id: str, reason: str | None = None) -> Message:
        return self._command("poll.done", message_id, Status.DONE, reason)

    def failed(self, message_id: str, reason: str | None = None) -> Message:
        return self._command("poll.failed", message_id, Status.FAILED, reason)

    def _command(self, event: str, message_id: str, status: Status,
                 reason: str | None) -> Message:
        """``/poll ack|done|failed`` through the machine (as the lease holder when this
        poller claimed the message, else as the operator); directly when disabled."""
        self._mark_outcome = None
        step = None if self.session is None else self.session.send(
            event, {"id": message_id, "reason": reason})
        outcome = (self._mark_outcome if step is not None and step.accepted
                   else self._mark(message_id, status, reason))
        self._mark_outcome = None
        if isinstance(outcome, InboxError):
            raise outcome
        assert outcome is not None
        return outcome
