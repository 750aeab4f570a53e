"""Poll-Signals for the sessions of one Ralph run (seed 004 §2, §4).

One mailbox, ``.ralph-sessions/<ID>/signals/``, serves the orchestrator session and the
subagent session running under it (a child machine). A signal is offered to the innermost
session whose identity it targets (``ALL``, ``Ralph-Executor``...) and whose current
configuration accepts it (``Runner.accepts``: the same rule as the generic signal feed),
claimed by an atomic rename, offered to that session's inbox keyed by the signal id (a
signal re-read after a crash is never applied twice), and archived in ``processed/`` with
its handling metadata. The orchestrator also takes STEER and INFO targeted at a subagent
that is not running, at its checkpoints, and buffers them for that subagent's next
invocation. Anything no session accepts now stays in ``inputs/`` for later (APPROVE waits
for KNOWLEDGE_APPROVAL). Since the orchestrator accepts only ABORT while a subagent runs,
the two never compete for the other signals (the seed's temporal demarcation).

Each session's runner asks the feed before it raises ``polled`` (``Runner.mailbox_clear``):
the feed then scans at once, so a boundary costs one directory listing, not a poll
interval; :meth:`RalphFeed.scan` also runs on the Ralph runner's tick for signals that
arrive while a session waits (an agent running, PAUSED, KNOWLEDGE_APPROVAL).

A subagent session can end between being offered a signal and taking it (its agent
answered just then): the signal is in its inbox, archived as handled by it, and would be
lost with it. When a subagent's runner detaches, such signals are handed over to the
session that invoked it, the orchestrator, at its next boundary (before ``polled``), once
its configuration accepts them: INFO and STEER reach the later invocations, PAUSE pauses,
ABORT aborts.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

from interlock.runtime.engine.runner import Runner
from interlock.runtime.host.owners import owner_is_dead
from interlock.runtime.ralph.config import IDENTITIES
from interlock.runtime.ralph.folder import now_iso
from interlock.runtime.signals.mailbox import Mailbox
from interlock.runtime.signals.model import UNIVERSAL_TYPES, Signal, SignalError, parse_signal
from interlock.runtime.store import Store
from interlock.runtime.store.base import QueuedEvent

ORCHESTRATOR = IDENTITIES["orchestrator"]
PEEK_BYTES = 64 * 1024
Notify = Callable[[str], None]


def handling_action(signal: Signal, identity: str, state: str) -> str:
    """What taking ``signal`` does, in the words ``processed/`` keeps."""
    if identity == ORCHESTRATOR or signal.type in ("APPROVE", "SKIP"):
        return f"delivered as {signal.event} in {state}"
    return {"ABORT": "process group stopped; in-progress task marked [F]",
            "PAUSE": "the step under way finishes; progress saved (Paused by signal)",
            "STEER": "Implement restarts with the message (or the task is escalated)",
            "INFO": "added to the context of this and later invocations"}.get(
                signal.type, f"delivered as {signal.event} in {state}")


class RalphFeed:
    """The mailbox of one Ralph session, feeding its runners (see the module docstring).
    ``store`` should be a connection of its own; every method is thread-safe."""

    def __init__(self, mailbox: Mailbox, store: Store, owner: str,
                 note: Notify | None = None) -> None:
        self.mailbox = mailbox
        self.store = store
        self.owner = owner
        self.note = note or (lambda _text: None)
        self._lock = threading.RLock()
        self._runners: list[tuple[Runner, str]] = []  # (runner, identity), outermost first
        self._orphans: list[QueuedEvent] = []  # signals an ended subagent never took

    def attach(self, runner: Runner, identity: str) -> Callable[[], None]:
        """Feed ``runner`` as ``identity``; returns the detach."""
        entry = (runner, identity)
        with self._lock:
            self._runners.append(entry)
        runner.mailbox_clear = lambda _seq: self.clear_for(runner)

        def detach() -> None:
            with self._lock:
                with contextlib.suppress(ValueError):
                    self._runners.remove(entry)
                if identity != ORCHESTRATOR and runner.session.is_final:
                    self._orphans += [item for item in self.store.queued_events(runner.session_id)
                                      if item.event.startswith("signal.")]
            runner.mailbox_clear = None

        return detach

    def _hand_over(self, runner: Runner) -> bool:
        """Offer the orchestrator (``runner``, the outermost) the signals an ended subagent
        never took, those its configuration accepts now; whether it was offered any."""
        with self._lock:
            if not self._orphans or not self._runners or self._runners[0][0] is not runner:
                return False
            kept, offered = [], False
            for item in self._orphans:
                if not runner.accepts(item.event, item.data):
                    kept.append(item)
                    continue
                key = f"{item.data.get('signal_id') or item.id}"
                self.store.offer(runner.session_id, item.event, item.data, time.time(), key)
                self.note(f"{now_iso()}   {item.event.removeprefix('signal.')} "
                          f"{item.data.get('message') or ''}: {ORCHESTRATOR}: its subagent "
                          "ended before taking it")
                offered = True
            self._orphans = kept
        if offered:
            runner.wake()
        return offered

    def send(self, runner: Runner, event: str, data: dict[str, Any]) -> None:
        """Queue ``event`` for ``runner``'s session and wake it (under the feed's lock:
        the runners' threads share this store)."""
        with self._lock:
            self.store.enqueue(runner.session_id, event, data, time.time())
        runner.wake()

    def queued(self, runner: Runner) -> bool:
        """Whether events wait in ``runner``'s session inbox (not taken yet)."""
        with self._lock:
            return bool(self.store.queued_events(runner.session_id))

    def clear_for(self, runner: Runner) -> bool:
        """Whether the mailbox holds nothing ``runner`` accepts now (what it asks before it
        raises ``polled``); a signal another session accepts is offered to it meanwhile."""
        if self._hand_over(runner):
            return False
        while True:
            taker = self.scan()
            if taker is None:
                return True
            if taker is runner:
                return False

    def scan(self) -> Runner | None:
        """Offer the oldest signal some session accepts now to the innermost such session;
        which runner took it (None: nothing was taken)."""
        with self._lock:
            runners = list(reversed(self._runners))
            for name, signal in pending(self.mailbox, quarantine=True):
                for runner, identity in runners:
                    if self._offer(signal, name, runner, identity):
                        return runner
            return None

    def _offer(self, signal: Signal, name: str, runner: Runner, identity: str) -> bool:
        orchestrator = identity == ORCHESTRATOR
        mine = signal.target in ("ALL", identity)
        buffered = (orchestrator and not mine and signal.type in ("STEER", "INFO")
                    and signal.target in IDENTITIES.values())
        if not (mine or buffered) or (not orchestrator and signal.type not in UNIVERSAL_TYPES):
            return False
        if not runner.accepts(signal.event, signal.event_data()):
            return False
        claim = self.mailbox.claim(name, self.owner)
        if claim is None:
            return False
        self.store.offer(runner.session_id, signal.event, signal.event_data(), time.time(),
                         signal.id)
        state = runner.active[-1] if runner.active else "?"
        action = (f"buffered for {signal.target}'s next invocation" if buffered
                  else handling_action(signal, identity, state))
        self.mailbox.finish(claim, {"handled_by": identity, "handled_at": now_iso(),
                                    "action_taken": action})
        self.note(f"{now_iso()}   {signal.type} ({signal.target}) {signal.message or ''}: "
                  f"{identity}: {action}")
        runner.wake()
        return True


def pending(mailbox: Mailbox, *, quarantine: bool = False) -> Iterator[tuple[str, Signal]]:
    """The signals waiting in ``inputs/``, oldest first, peeked and parsed; a malformed
    file is skipped, or with ``quarantine`` moved aside with its reason (the
    orchestrator's poll does that; an agent's ``ralph poll`` leaves it)."""
    for name in mailbox.pending():
        raw = mailbox.peek(name, PEEK_BYTES)
        if raw is None:
            continue  # claimed by someone else meanwhile
        try:
            signal = parse_signal(raw, name)
        except SignalError as exc:
            if quarantine:
                mailbox.reject(name, str(exc))
            continue
        yield name, signal


def take_signals(mailbox: Mailbox, identity: str, owner: str,
                 types: tuple[str, ...] = UNIVERSAL_TYPES,
                 action: str = "taken by the agent") -> list[Signal]:
    """Claim and archive the signals of ``types`` targeted at ALL or ``identity``, oldest
    first (what ``interlock ralph poll`` gives a running agent); others stay in
    ``inputs/``."""
    taken: list[Signal] = []
    for name, signal in pending(mailbox):
        if signal.type not in types or signal.target not in ("ALL", identity):
            continue
        claim = mailbox.claim(name, owner)
        if claim is None:
            continue
        mailbox.finish(claim, {"handled_by": identity, "handled_at": now_iso(),
                               "action_taken": action})
        taken.append(signal)
    return taken


def recover_claims(mailbox: Mailbox) -> None:
    """Signals a dead consumer claimed but did not archive go back to ``inputs/`` (or are
    dropped when already in ``processed/``)."""
    for owner in mailbox.owners_with_claims():
        if not owner_is_dead(owner):
            continue
        for name in list(mailbox.claimed(owner)):
            path = mailbox.claims / owner / name
            if mailbox.is_finished(name):
                path.unlink(missing_ok=True)
            else:
                with contextlib.suppress(FileNotFoundError):
                    path.rename(mailbox.inputs / name)
