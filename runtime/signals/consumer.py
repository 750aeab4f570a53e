"""Consuming mailboxes: inotify hints, reconciliation scans, claims, exactly-once delivery.

One :class:`Consumer` serves any number of mailboxes (one per watched session) with one
worker thread. Watchdog (inotify) events are only hints that a name may be worth a look;
the truth is the folder itself, which is scanned at start, every ``scan_interval``
seconds, and at once when the kernel reports that its inotify queue overflowed (watchdog
then drops events; it says so in a log record, which the consumer listens for). A scan
that finds a signal no event announced counts as a missed event (``stats.missed``).

For each candidate, oldest first: peek (read and parse), route (target ``ALL`` or this
consumer's identity; a wanted type; state-specific types only when ``accepts`` says the
current state takes them; anything else stays in ``inputs/``), claim (atomic rename),
deliver, then write the handling metadata and drop the claim. Malformed files go to
``rejected/`` with their reason. A delivery that raises leaves the claim in place; it is
retried on the next scan. Claims of consumers that died (known by pid and start time:
:mod:`interlock.runtime.host.owners`) are adopted and finished, or put back into
``inputs/`` when this consumer's routing does not take them now; delivery is idempotent
by signal id (the session store's ``offer``), so a crash between claim and metadata never
applies a signal twice.
"""

from __future__ import annotations

import contextlib
import logging
import os
import queue
import secrets
import threading
import time
from collections.abc import Callable, Collection
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Protocol

from watchdog.events import (
    FileClosedEvent,
    FileCreatedEvent,
    FileMovedEvent,
    FileSystemEvent,
    FileSystemEventHandler,
)
from watchdog.observers import Observer

from interlock.runtime.host.owners import default_owner, owner_is_dead
from interlock.runtime.signals.mailbox import Mailbox, SignalClaim
from interlock.runtime.signals.model import (
    MAX_SIGNAL_BYTES,
    STATE_SPECIFIC_TYPES,
    TARGET_ALL,
    UNIVERSAL_TYPES,
    Signal,
    SignalError,
    fifo_key,
    iso_utc,
    parse_signal,
)

log = logging.getLogger(__name__)
WATCHDOG_LOGGER = "watchdog.observers.inotify_c"
DEFAULT_SCAN_INTERVAL = 2.0
WRITE_GRACE = 1.0  # seconds a malformed file may still be being written before rejection

Deliver = Callable[[Signal, str], str]  # (signal, handled_at) -> action_taken
Accepts = Callable[[Signal], bool]


# Watchdog logs through the standard library; without a handler of its own, Python's
# last-resort handler would print its warnings over the CLI's output.
logging.getLogger("watchdog").addHandler(logging.NullHandler())

@dataclass(frozen=True, slots=True)
class Handled:
    """A signal delivered and archived: what ``interlock mailbox consume`` prints."""

    signal: Signal
    mailbox: Mailbox
    handled_by: str
    handled_at: str
    action_taken: str

    def to_json(self) -> dict[str, Any]:
        return {"id": self.signal.id, "type": self.signal.type, "target": self.signal.target,
                "message": self.signal.message, "iteration": self.signal.iteration,
                "handled_by": self.handled_by, "handled_at": self.handled_at,
                "action_taken": self.action_taken,
                "session_dir": str(self.mailbox.session_dir)}


@dataclass(frozen=True, slots=True)
class Rejected:
    name: str
    mailbox: Mailbox
    reason: str


class Subscriber(Protocol):
    """One mailbox as a consumer serves it: which signals it wants (routing), how each is
    delivered, who handled it (``handling_metadata.handled_by``), and what to do when a
    full scan of the mailbox starts and when it is done."""

    mailbox: Mailbox

    def wants(self, signal: Signal) -> bool: ...

    def deliver(self, signal: Signal, handled_at: str) -> str: ...

    def handler_of(self, signal: Signal) -> str: ...

    def scan_started(self) -> None: ...

    def scan_done(self) -> None: ...


@dataclass
class Subscription:
    """One mailbox for one taker. ``identity`` is the target name it answers to besides
    ALL; ``types`` the signal types it takes; ``accepts`` decides for state-specific types
    (APPROVE, SKIP): absent, they are never taken."""

    mailbox: Mailbox
    deliver: Deliver
    identity: str = TARGET_ALL
    types: Collection[str] = UNIVERSAL_TYPES
    accepts: Accepts | None = None
    handled_by: str | None = None  # written as handling_metadata.handled_by (default: identity)
    # Told when a full scan of the mailbox starts and when it has been completed.
    before_scan: Callable[[], None] | None = None
    after_scan: Callable[[], None] | None = None

    @property
    def handler_name(self) -> str:
        return self.handled_by or self.identity

    def handler_of(self, signal: Signal) -> str:
        return self.handler_name

    def wants(self, signal: Signal) -> bool:
        if signal.target not in (TARGET_ALL, self.identity):
            return False
        if signal.type not in self.types:
            return False
        if signal.type in STATE_SPECIFIC_TYPES:
            return self.accepts is not None and self.accepts(signal)
        return self.accepts is None or self.accepts(signal)

    def scan_started(self) -> None:
        if self.before_scan is not None:
            self.before_scan()

    def scan_done(self) -> None:
        if self.after_scan is not None:
            self.after_scan()


@dataclass
class ConsumerStats:
    handled: int = 0
    rejected: int = 0
    lost_races: int = 0
    adopted: int = 0
    scans: int = 0
    missed: int = 0  # found by a scan, never announced by an inotify event
    overflows: int = 0
    failures: int = 0


class _Hints(FileSystemEventHandler):
    """Names that arrived in one mailbox's ``inputs/``: created, renamed in, or closed
    after writing."""

    def __init__(self, consumer: Consumer, key: Path) -> None:
        self.consumer = consumer
        self.key = key

    def on_any_event(self, event: FileSystemEvent) -> None:
        if event.is_directory or event.event_type not in ("created", "moved", "closed"):
            return
        raw = event.dest_path if event.event_type == "moved" else event.src_path
        path = Path(os.fsdecode(raw))
        if path.parent == self.key and not path.name.startswith("."):
            self.consumer.hint(self.key, path.name)


# Our own reads (peeks) raise open/close-nowrite events and claims raise moves out; asking
# inotify only for these keeps them from looping back as hints.
_HINT_EVENTS: list[type[FileSystemEvent]] = [FileCreatedEvent, FileMovedEvent, FileClosedEvent]


def _no_move_pairing_delay() -> None:
    """Watchdog holds every rename-out event 0.5 s to pair it with a rename-in, and its
    queue sleeps on that event even once it is paired: every hint behind a claim would
    wait half a second. The consumer needs names, not move pairs, so pairing is turned
    off (an internal of watchdog 7; without it, hints are late and scans still deliver)."""
    try:
        from watchdog.observers.inotify_move_event_grouper import InotifyMoveEventGrouper
    except ImportError:  # another platform or version: correct, only slower
        return
    InotifyMoveEventGrouper.delay = 0


_no_move_pairing_delay()


class _OverflowListener(logging.Handler):
    """Watchdog reports an inotify queue overflow only in a log record: listen for it."""

    def __init__(self, consumer: Consumer) -> None:
        super().__init__(logging.WARNING)
        self.consumer = consumer

    def emit(self, record: logging.LogRecord) -> None:
        if "overflow" in record.getMessage().lower():
            self.consumer.overflowed()


_RESCAN = "\0rescan"


class Consumer:
    """Serves subscriptions on a worker thread; :meth:`run_once` serves them inline."""

    def __init__(self, *, scan_interval: float = DEFAULT_SCAN_INTERVAL,
                 on_handled: Callable[[Handled], None] | None = None,
                 on_rejected: Callable[[Rejected], None] | None = None,
                 owner: str | None = None, watch: bool = True,
                 now: Callable[[], datetime] = lambda: datetime.now(UTC)) -> None:
        self.scan_interval = scan_interval
        self.on_handled = on_handled
        self.on_rejected = on_rejected
        self.owner = owner or default_owner(f"consumer-{secrets.token_hex(3)}")
        self.watch = watch
        self.now = now
        self.stats = ConsumerStats()
        self._subs: dict[Path, Subscriber] = {}
        self._queue: queue.SimpleQueue[tuple[Path | None, str]] = queue.SimpleQueue()
        self._announced: dict[Path, set[str]] = {}
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._observer: Any = None
        self._listener = _OverflowListener(self)
        self._lock = threading.Lock()
        self.error: BaseException | None = None
        self._on_failure: Callable[[], None] | None = None  # told when the worker dies

    # -- subscriptions ------------------------------------------------------------------

    def add(self, subscription: Subscriber) -> None:
        key = subscription.mailbox.inputs.resolve()
        with self._lock:
            self._subs[key] = subscription
            self._announced[key] = set()
        if self._observer is not None:
            self._watch(key, subscription)
        self.rescan(key)

    def _watch(self, key: Path, subscription: Subscriber) -> None:
        self._observer.schedule(_Hints(self, key), str(key), recursive=False,
                                event_filter=_HINT_EVENTS)

    # -- hints --------------------------------------------------------------------------

    def hint(self, key: Path, name: str) -> None:
        self._queue.put((key, name))

    def rescan(self, key: Path | None = None) -> None:
        """Ask for a full scan of one mailbox (by its inputs folder) or of all."""
        self._queue.put((key, _RESCAN))

    def overflowed(self) -> None:
        self.stats.overflows += 1
        self.rescan()

    # -- running ------------------------------------------------------------------------

    def start(self) -> None:
        if self.watch:
            logging.getLogger(WATCHDOG_LOGGER).addHandler(self._listener)
            self._observer = Observer()
            for key, subscription in self._subs.items():
                self._watch(key, subscription)
            self._observer.start()
        self._thread = threading.Thread(target=self._work, name="interlock-signals",
                                        daemon=True)
        self._thread.start()
        self.rescan()

    def stop(self) -> None:
        self._stop.set()
        self._queue.put((None, ""))
        if self._thread is not None:
            self._thread.join(timeout=10)
        if self._observer is not None:
            self._observer.stop()
            self._observer.join(timeout=10)
            logging.getLogger(WATCHDOG_LOGGER).removeHandler(self._listener)

    def serve_until(self, stop: threading.Event) -> None:
        """Serve until ``stop`` is set (or the worker fails: its error is raised)."""
        self._on_failure = stop.set
        self.start()
        try:
            stop.wait()
        finally:
            self.stop()
        if self.error is not None:
            raise self.error

    def __enter__(self) -> Consumer:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def _work(self) -> None:
        last_scan = time.monotonic()
        try:
            while not self._stop.is_set():
                timeout = max(0.0, last_scan + self.scan_interval - time.monotonic())
                try:
                    first = self._queue.get(timeout=timeout)
                except queue.Empty:
                    self._scan_all(periodic=True)
                    last_scan = time.monotonic()
                    continue
                batch = [first]
                while len(batch) < 4096:
                    try:
                        batch.append(self._queue.get_nowait())
                    except queue.Empty:
                        break
                if self._stop.is_set():
                    return
                if self._serve(batch):
                    last_scan = time.monotonic()
                elif time.monotonic() - last_scan >= self.scan_interval:
                    self._scan_all(periodic=True)  # due even while hints keep coming
                    last_scan = time.monotonic()
        except BaseException as exc:  # the owner learns it from .error and the log
            self.error = exc
            log.exception("signal consumer stopped")
            if self._on_failure is not None:
                self._on_failure()

    def _serve(self, batch: list[tuple[Path | None, str]]) -> bool:
        """Handle a batch of hints; True when it included a full scan."""
        scan_all = any(key is None and name == _RESCAN for key, name in batch)
        if scan_all:
            self._scan_all(periodic=False)
            return True
        rescans = {key for key, name in batch if name == _RESCAN and key is not None}
        for rescanned in rescans:
            self._scan(rescanned, periodic=False)
        hinted: dict[Path, set[str]] = {}
        for where, name in batch:
            if where is not None and name and name != _RESCAN and where not in rescans:
                hinted.setdefault(where, set()).add(name)
        for key, names in hinted.items():
            sub = self._subs.get(key)
            if sub is None:
                continue
            self._announced[key].update(names)
            for name in sorted(names, key=fifo_key):
                self._handle(sub, name)
        return False

    def run_once(self) -> None:
        """One full pass over every mailbox, inline (no threads)."""
        self._scan_all(periodic=False)

    def _scan_all(self, *, periodic: bool) -> None:
        for key in list(self._subs):
            self._scan(key, periodic=periodic)

    def _scan(self, key: Path, *, periodic: bool) -> None:
        sub = self._subs.get(key)
        if sub is None:
            return
        self.stats.scans += 1
        sub.scan_started()
        self._recover(sub)
        announced = self._announced[key]
        for name in sub.mailbox.pending():
            if self._stop.is_set():
                return  # what is left stays in inputs/ for the next consumer
            if self.watch and periodic and name not in announced:
                self.stats.missed += 1
            self._handle(sub, name)
        announced.clear()
        sub.scan_done()

    # -- one signal ---------------------------------------------------------------------

    def _handle(self, sub: Subscriber, name: str) -> None:
        mailbox = sub.mailbox
        raw = mailbox.peek(name, MAX_SIGNAL_BYTES)
        if raw is None:
            return  # taken by another consumer, or already handled
        try:
            signal = parse_signal(raw, name)
        except SignalError as exc:
            if mailbox.age(name) < WRITE_GRACE:
                return  # perhaps still being written in place; its close or a scan retries
            if mailbox.reject(name, str(exc)) is not None:
                self.stats.rejected += 1
                if self.on_rejected is not None:
                    self.on_rejected(Rejected(name, mailbox, str(exc)))
            return
        if not sub.wants(signal):
            return
        claim = mailbox.claim(name, self.owner)
        if claim is None:
            self.stats.lost_races += 1
            return
        self._complete(sub, claim, signal)

    def _complete(self, sub: Subscriber, claim: SignalClaim, signal: Signal) -> None:
        if sub.mailbox.is_finished(claim.name):  # finished before a crash: only the claim
            sub.mailbox.drop_claim(claim)         # was left. It was delivered; whether it was
            return                                # also reported (on_handled) is unknown
        handled_at = iso_utc(self.now())
        try:
            action = sub.deliver(signal, handled_at)
        except Exception:
            self.stats.failures += 1
            log.exception("delivering signal %s failed; it stays claimed and is retried",
                          signal.id)
            return
        handler = sub.handler_of(signal)
        metadata = {"handled_by": handler, "handled_at": handled_at,
                    "action_taken": action, "signal_id": signal.id,
                    "consumer": self.owner}
        sub.mailbox.finish(claim, metadata)
        self.stats.handled += 1
        if self.on_handled is not None:
            self.on_handled(Handled(signal, sub.mailbox, handler, handled_at, action))

    def _recover(self, sub: Subscriber) -> None:
        """Finish our own unfinished claims, and adopt those of dead consumers."""
        mailbox = sub.mailbox
        for owner in mailbox.owners_with_claims():
            mine = owner == self.owner
            if not mine and not owner_is_dead(owner):
                continue
            for name in list(mailbox.claimed(owner)):
                claim = (SignalClaim(name, mailbox.claims / owner / name,
                               (mailbox.claims / owner / name).read_bytes())
                         if mine else mailbox.adopt(name, owner, self.owner))
                if claim is None:
                    continue
                if not mine:
                    self.stats.adopted += 1
                try:
                    signal = parse_signal(claim.raw, name)
                except SignalError as exc:
                    mailbox.reject_claim(claim, str(exc))
                    continue
                if not mine and not mailbox.is_finished(name) and not sub.wants(signal):
                    mailbox.release(claim)  # not for this consumer now: back in line
                    continue
                self._complete(sub, claim, signal)
            if not mine:
                _remove_empty(mailbox.claims / owner)


def _remove_empty(folder: Path) -> None:
    with contextlib.suppress(OSError):
        folder.rmdir()  # only when empty: nothing is deleted

