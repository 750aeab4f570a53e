"""Poll-Signals for the sessions of one Ralph run (seed 004 §2, §4).

One mailbox, ``.ralph-sessions/<ID>/signals/``, serves the orchestrator session and the
subagent session running under it (a child machine). :class:`RalphFeed` is that mailbox's
subscriber in a :class:`~interlock.runtime.signals.consumer.Consumer` (watchdog hints,
reconciliation scans, claims, exactly-once delivery, dead consumers' claims recovered):
its routing offers a signal to the innermost sessions whose identity it targets (``ALL``,
``Ralph-Executor``...) and whose current configuration accepts it (``Runner.accepts``):
every subagent running that takes it (the Executors of a parallel batch each get it once;
a signal naming a ``task`` only that task's), else the orchestrator; keyed by the signal
id in each session's store inbox (a signal re-read after a crash is never applied twice),
and the consumer archives it in ``processed/`` with its handling metadata. The
orchestrator also takes STEER and INFO targeted at a subagent that is not running, at its
checkpoints, and buffers them for that subagent's next invocation.
Anything no session accepts now stays in ``inputs/`` for later (APPROVE waits for
KNOWLEDGE_APPROVAL): every committed step of a session the feed serves asks for a scan
while something waits there.
Since the orchestrator accepts only ABORT while a subagent runs, the two never compete
for the other signals (the seed's temporal demarcation).

Each session's runner asks the feed before it raises ``polled`` (``Runner.mailbox_clear``):
clear once a scan that started after its last commit offered it nothing, or at once when
the mailbox is idle (nothing in ``inputs/``, no claim held); until then the question asks
for a scan, whose end wakes the runner to ask again.

A subagent session can end between being offered a signal and taking it (its agent
answered just then): the signal is in its inbox, archived as handled by it, and would be
lost with it. When a subagent's runner detaches, such signals are handed over to the
session that invoked it, the orchestrator, at the next scan, once its configuration
accepts them: INFO and STEER reach the later invocations, PAUSE pauses, ABORT aborts.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from interlock.runtime.config.ralph import IDENTITIES
from interlock.runtime.engine.host import HostPlugin, SessionHost
from interlock.runtime.engine.runner import Runner, RunOutcome
from interlock.runtime.engine.session import Step
from interlock.runtime.ralph.folder import now_iso
from interlock.runtime.signals.consumer import Consumer
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


@dataclass(eq=False)
class _Taker:
    """A session the feed serves, and what its last scans did for it."""

    runner: Runner
    identity: str
    listener: Callable[[Step], None]
    offered: int = 0  # signals offered to its session so far
    scan_from: tuple[int, int] | None = None  # (runner seq, offered) when a scan started
    clear_seq: int = -1  # the latest seq a scan that offered it nothing started after


@dataclass(frozen=True, slots=True)
class _Route:
    signal_id: str
    takers: tuple[_Taker, ...]
    buffered: bool  # a STEER/INFO for a subagent that the orchestrator keeps for it


class RalphFeed(HostPlugin):
    """The mailbox of one Ralph session, feeding its runners (see the module docstring);
    a plugin of the orchestrator's host, and the subscriber of its own consumer.
    ``store`` should be a connection of its own (used under the feed's lock)."""

    def __init__(self, mailbox: Mailbox, store: Store, owner: str,
                 note: Notify | None = None, *, watch: bool = True) -> None:
        self.mailbox = mailbox
        self.store = store
        self.note = note or (lambda _text: None)
        self._lock = threading.RLock()
        self._takers: list[_Taker] = []  # outermost first
        self._orphans: list[QueuedEvent] = []  # signals an ended subagent never took
        self._route: _Route | None = None  # set by wants(), used by deliver()
        self._detach: Callable[[], None] | None = None
        self.consumer = Consumer(owner=owner, watch=watch)
        self.consumer.add(self)

    # -- as a plugin of the orchestrator's host -------------------------------------------

    async def start(self, host: SessionHost) -> None:
        self._detach = self.attach(host.runner, ORCHESTRATOR)
        self.consumer.start()
        host.note(f"signals: {self.mailbox.inputs} (interlock signal "
                  f"{host.runner.session_id} STEER 'message')")

    async def stop(self, outcome: RunOutcome | None) -> None:
        self.consumer.stop()
        if self._detach is not None:
            self._detach()
        self.store.close()

    # -- sessions -------------------------------------------------------------------------

    def attach(self, runner: Runner, identity: str) -> Callable[[], None]:
        """Feed ``runner`` as ``identity``; returns the detach."""

        def stepped(step: Step) -> None:
            if step.accepted and not self.mailbox.idle():
                self.consumer.rescan()  # what waits in inputs/ may be taken now

        taker = _Taker(runner, identity, stepped)
        with self._lock:
            self._takers.append(taker)
        runner.mailbox_clear = lambda seq: self._clear(taker, seq)
        runner.step_listeners.append(stepped)
        if not self.mailbox.idle():
            self.consumer.rescan()  # what waits may be for this session

        def detach() -> None:
            with self._lock:
                with contextlib.suppress(ValueError):
                    self._takers.remove(taker)
                if identity != ORCHESTRATOR and runner.session.is_final:
                    self._orphans += [item for item in self.store.queued_events(runner.session_id)
                                      if item.event.startswith("signal.")]
                orphaned = bool(self._orphans)
            runner.mailbox_clear = None
            with contextlib.suppress(ValueError):
                runner.step_listeners.remove(stepped)
            if orphaned or not self.mailbox.idle():
                self.consumer.rescan()  # its signals, or what waited, for the others

        return detach

    def _clear(self, taker: _Taker, seq: int) -> bool:
        """Whether a scan that started once commit ``seq`` was made offered ``taker``
        nothing, or the mailbox is idle now (nothing in ``inputs/``, no claim, no signal
        of an ended subagent to hand over: a scan could offer nothing); if not, a scan is
        asked for (its end wakes the runner)."""
        with self._lock:
            if taker.clear_seq >= seq:
                return True
            if not self._orphans and self.mailbox.idle():
                taker.clear_seq = seq  # a scan under way has nothing to tell it
                return True
        self.consumer.rescan()
        return False

    def send(self, runner: Runner, event: str, data: dict[str, Any]) -> None:
        """Queue ``event`` for ``runner``'s session and wake it."""
        with self._lock:
            self.store.enqueue(runner.session_id, event, data, time.time())
        runner.wake()

    def queued(self, runner: Runner) -> bool:
        """Whether events wait in ``runner``'s session inbox (not taken yet)."""
        with self._lock:
            return bool(self.store.queued_events(runner.session_id))

    # -- as the mailbox's subscriber (on the consumer's thread) ---------------------------

    def scan_started(self) -> None:
        with self._lock:
            self._hand_over()
            for taker in self._takers:
                taker.scan_from = (taker.runner.seq, taker.offered)

    def scan_done(self) -> None:
        with self._lock:
            cleared = []
            for taker in self._takers:
                started, taker.scan_from = taker.scan_from, None
                if started is not None and started[1] == taker.offered \
                        and started[0] > taker.clear_seq:
                    taker.clear_seq = started[0]
                    cleared.append(taker.runner)
        for runner in cleared:
            runner.wake()  # its question before `polled` has an answer now

    def wants(self, signal: Signal) -> bool:
        with self._lock:
            subagents = tuple(taker for taker in self._takers
                              if taker.identity != ORCHESTRATOR
                              and self._takes(signal, taker, buffered=False))
            if subagents:
                self._route = _Route(signal.id, subagents, False)
            else:
                self._route = next((_Route(signal.id, (taker,), buffered)
                                    for taker in self._takers if taker.identity == ORCHESTRATOR
                                    for buffered in (False, True)
                                    if self._takes(signal, taker, buffered=buffered)), None)
            return self._route is not None

    @staticmethod
    def _takes(signal: Signal, taker: _Taker, *, buffered: bool) -> bool:
        """Whether ``taker`` takes ``signal`` now (``buffered``: the orchestrator, keeping
        a STEER or INFO for a subagent's next invocation)."""
        orchestrator = taker.identity == ORCHESTRATOR
        if buffered:
            if not (orchestrator and signal.task is None and signal.type in ("STEER", "INFO")
                    and signal.target not in ("ALL", ORCHESTRATOR)
                    and signal.target in IDENTITIES.values()):
                return False
        elif signal.target not in ("ALL", taker.identity):
            return False
        if not orchestrator and signal.type not in UNIVERSAL_TYPES:
            return False
        if signal.task is not None and (orchestrator or _task_of(taker) != signal.task):
            return False  # for that task's subagent only
        return taker.runner.accepts(signal.event, signal.event_data())

    def handler_of(self, signal: Signal) -> str:
        route = self._route
        if route is None:
            return ORCHESTRATOR
        return ", ".join(dict.fromkeys(taker.identity for taker in route.takers))

    def deliver(self, signal: Signal, handled_at: str) -> str:
        with self._lock:
            route = self._route
            if route is None or route.signal_id != signal.id:
                if not self.wants(signal):
                    raise LookupError(f"no session of this Ralph run takes {signal.id} now")
                route = self._route
                assert route is not None
            for taker in route.takers:
                self.store.offer(taker.runner.session_id, signal.event, signal.event_data(),
                                 time.time(), signal.id, wake=False)  # woken below
                taker.offered += 1
        first = route.takers[0]
        state = first.runner.active[-1] if first.runner.active else "?"
        action = (f"buffered for {signal.target}'s next invocation" if route.buffered
                  else handling_action(signal, first.identity, state))
        if len(route.takers) > 1:
            action += f" (each of {len(route.takers)}: " + ", ".join(
                _task_of(t) or t.runner.session_id for t in route.takers) + ")"
        self.note(f"{now_iso()}   {signal.type} ({signal.target}) {signal.message or ''}: "
                  f"{self.handler_of(signal)}: {action}")
        for taker in route.takers:
            taker.runner.wake()
        return action

    def _hand_over(self) -> None:
        """Offer the orchestrator (the outermost session) the signals an ended subagent
        never took, those its configuration accepts now (under the lock)."""
        if not self._orphans or not self._takers \
                or self._takers[0].identity != ORCHESTRATOR:
            return
        orchestrator = self._takers[0]
        runner = orchestrator.runner
        kept = []
        for item in self._orphans:
            if not runner.accepts(item.event, item.data):
                kept.append(item)
                continue
            key = f"{item.data.get('signal_id') or item.id}"
            self.store.offer(runner.session_id, item.event, item.data, time.time(), key)
            orchestrator.offered += 1
            self.note(f"{now_iso()}   {item.event.removeprefix('signal.')} "
                      f"{item.data.get('message') or ''}: {ORCHESTRATOR}: its subagent "
                      "ended before taking it")
            runner.wake()
        self._orphans = kept


def _task_of(taker: _Taker) -> str | None:
    """The task id the subagent session of ``taker`` works on, if any."""
    task = taker.runner.session.context.get("task")
    return str(task.get("id")) if isinstance(task, dict) and task.get("id") else None


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
