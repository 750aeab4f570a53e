"""Live signals into a running session: a mailbox consumer that feeds a Runner.

Each signal becomes the session event ``signal.<TYPE>`` (data: signal_id, target,
message, iteration), offered to the session's event queue in the store keyed by the signal id,
so a signal re-delivered after a consumer crash is never applied twice. The runner is
woken at once instead of at its next look at the queue. A signal that no active state accepts
stays in ``inputs/`` (seed 004: peek, and leave what the current context does not take)
and is looked at again after every step, so an APPROVE waits for KNOWLEDGE_APPROVAL.
"Accepts" includes guards: a signal whose transitions are all guarded false now stays too.

The feed also tells the runner when the mailbox is clear: a full scan that started after
the last committed step delivered nothing, or nothing is in the mailbox at all (no
signal waiting or being handled: no scan needed). The runner then raises ``polled`` at a
checkpoint (a state listening for it), so checkpoints advance by themselves once the
signals waiting for them have been taken (STEER first, then ``polled``).
"""

from __future__ import annotations

import threading
import time
from pathlib import Path

from interlock.runtime.engine.host import HostPlugin, SessionHost
from interlock.runtime.engine.runner import Runner, RunOutcome
from interlock.runtime.engine.session import Step
from interlock.runtime.signals.consumer import Consumer, Subscription
from interlock.runtime.signals.mailbox import Mailbox
from interlock.runtime.signals.model import SIGNAL_TYPES, TARGET_ALL, Signal, check_identifier
from interlock.runtime.store import EventQueue, open_store


class SessionFeed:
    """Delivers one mailbox into one runner's session. ``store`` should be a connection of
    its own (the consumer works on its own thread)."""

    def __init__(self, runner: Runner, store: EventQueue, folder: Path, *,
                 identity: str = TARGET_ALL, scan_interval: float = 2.0) -> None:
        self.runner = runner
        self.store = store
        self.mailbox = Mailbox(folder)
        self.consumer = Consumer(scan_interval=scan_interval)
        self.consumer.add(Subscription(
            self.mailbox, self._deliver, identity=identity, types=SIGNAL_TYPES,
            accepts=lambda signal: runner.accepts(signal.event, signal.event_data()),
            handled_by=f"interlock session {runner.session_id}",
            before_scan=self._scan_starts, after_scan=self._scan_done))
        self._delivered = 0  # signals offered to the session so far
        self._scan: tuple[int, int] | None = None  # (runner seq, delivered) at scan start
        self._clear_seq = -1  # the latest seq a clear scan started after
        self._clearing = threading.Lock()  # _clear_seq: the consumer's and the runner's
        runner.mailbox_clear = self.clear_since

    def _scan_starts(self) -> None:
        self._scan = (self.runner.seq, self._delivered)

    def _scan_done(self) -> None:
        started = self._scan
        if started is None or started[1] != self._delivered:
            return  # it delivered: the runner steps, and the step asks for a new scan
        with self._clearing:
            if started[0] <= self._clear_seq:
                return  # the runner knew already (an idle mailbox)
            self._clear_seq = started[0]
        self.runner.wake()

    def clear_since(self, seq: int) -> bool:
        """Whether a scan that started once commit ``seq`` was made found nothing to
        deliver, or the mailbox is idle now (nothing to deliver at all): the runner's
        test before it raises ``polled``."""
        with self._clearing:
            if self._clear_seq >= seq:
                return True
            if self.mailbox.idle():
                self._clear_seq = seq
                return True
        return False

    def _deliver(self, signal: Signal, handled_at: str) -> str:
        self._delivered += 1
        item = self.store.offer(self.runner.session_id, signal.event, signal.event_data(),
                                time.time(), signal.id, wake=False)
        self.runner.wake()
        if item is None:
            return f"already delivered to session {self.runner.session_id} as {signal.event}"
        return f"delivered to session {self.runner.session_id} as {signal.event} (#{item})"

    def stepped(self) -> None:
        """The session moved: signals waiting in inputs/ may be taken now."""
        if not self.mailbox.idle():
            self.consumer.rescan()

    def start(self) -> None:
        self.consumer.start()

    def stop(self) -> None:
        self.consumer.stop()
        if self.runner.mailbox_clear == self.clear_since:
            self.runner.mailbox_clear = None


class SignalFeed(HostPlugin):
    """A session's live signals, as a plugin of its host: a :class:`SessionFeed` on the
    session's mailbox (:func:`~interlock.runtime.signals.addressing.session_mailbox_dir`)
    with a store connection of its own. It takes signals for ALL and for ``identity``,
    else, under ALL, for the machine's own ``agent`` context field when it has one (a
    Ralph subagent's ``Ralph-Executor``)."""

    def __init__(self, store_url: str | None, root: Path, identity: str = TARGET_ALL) -> None:
        self.store_url = store_url
        self.root = root
        self.identity = check_identifier(identity, "signals_as")
        self.feed: SessionFeed | None = None

    async def start(self, host: SessionHost) -> None:
        from interlock.runtime.signals.addressing import session_mailbox_dir

        runner = host.runner
        identity = self.identity
        agent = runner.session.context.get("agent")
        if identity == TARGET_ALL and isinstance(agent, str) and agent:
            identity = check_identifier(agent, "the session's agent")
        folder = session_mailbox_dir(self.root, runner.session_id)
        self.feed = SessionFeed(runner, open_store(self.store_url, self.root), folder,
                                identity=identity)
        host.note(f"signals: {self.feed.mailbox.inputs} (interlock signal "
                  f"{runner.session_id} STEER 'message')")
        self.feed.start()

    def on_step(self, step: Step) -> None:
        if self.feed is not None and step.accepted:
            self.feed.stepped()  # signals waiting in inputs/ may be taken now

    async def stop(self, outcome: RunOutcome | None) -> None:
        feed, self.feed = self.feed, None
        if feed is not None:
            feed.stop()
            feed.store.close()
