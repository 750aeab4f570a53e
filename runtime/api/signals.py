"""Live signals through the façade: post one into a session's mailbox, wait for its
receipt, or serve mailboxes by hand (``interlock mailbox consume``)."""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from interlock.runtime.api.common import opened_store, root_of, translated
from interlock.runtime.api.errors import InterlockError, NotFound, UsageError
from interlock.runtime.signals.addressing import (
    UnknownSession,
    is_folder_reference,
    resolve_mailbox_folder,
)
from interlock.runtime.signals.consumer import Consumer, Handled, Rejected, Subscription
from interlock.runtime.signals.mailbox import Mailbox
from interlock.runtime.signals.model import (
    SIGNAL_TYPES,
    STATE_SPECIFIC_TYPES,
    TARGET_ALL,
    UNIVERSAL_TYPES,
    Signal,
    SignalError,
    check_identifier,
    make_signal,
)
from interlock.runtime.signals.writer import Receipt
from interlock.runtime.signals.writer import post_signal as _post
from interlock.runtime.signals.writer import wait_for_receipt as _wait

__all__ = ["SIGNAL_TYPES", "Handled", "PostedSignal", "Receipt", "Rejected", "Signal",
           "consume_signals", "mailbox_folder", "parse_signal_types", "post_signal",
           "wait_for_receipt"]


@dataclass(frozen=True, slots=True)
class PostedSignal:
    """A signal now in ``inputs`` of its mailbox."""

    signal: Signal
    mailbox: Mailbox

    @property
    def id(self) -> str:
        return self.signal.id

    @property
    def inputs(self) -> Path:
        return self.mailbox.inputs


def _store_sessions(store: str | None, base: Path) -> list[str]:
    """The session ids in the store; none when there is no store yet (nothing is made)."""
    try:
        with opened_store(store, base, create=False) as opened:
            return [row.id for row in opened.list()]
    except NotFound:
        return []


def mailbox_folder(session: Path | str, *, create: bool = False, store: str | None = None,
                   root: Path | str | None = None) -> Path:
    """The session folder a signal for ``session`` goes to: a session id (its folder
    ``ROOT/.interlock/sessions/ID``) or a folder (a Path, or text with a '/').

    NotFound (listing the known session ids) for a session that is neither in the store
    nor has a folder, or a folder without a ``signals/`` mailbox, unless ``create``;
    UsageError for an unsafe id."""
    base = root_of(root)
    if isinstance(session, Path):
        session = str(session) if is_folder_reference(str(session)) else f"./{session}"
    known = [] if create and is_folder_reference(session) else _store_sessions(store, base)
    try:
        return resolve_mailbox_folder(session, base, known, create=create)
    except UnknownSession as exc:
        raise NotFound(str(exc)) from None
    except SignalError as exc:
        raise UsageError(str(exc)) from None


def post_signal(session: Path | str, kind: str, message: str | None = None, *,
                target: str = TARGET_ALL, iteration: int | None = None, create: bool = False,
                store: str | None = None, root: Path | str | None = None,
                task: str | None = None) -> PostedSignal:
    """Write a signal file into the ``signals/inputs/`` of ``session`` (see
    :func:`mailbox_folder`) atomically (tmp/, fsync, rename). ``task``: for the subagent
    working on that task only (a Ralph session's parallel batch). UsageError for a bad
    type, target, task or message (checked first); NotFound for an unknown session
    (unless ``create``)."""
    try:
        make_signal(kind, target, message, iteration, now=datetime.now(UTC), task=task)
    except SignalError as exc:
        raise UsageError(str(exc)) from None
    session_dir = mailbox_folder(session, create=create, store=store, root=root)
    try:
        with translated():
            mailbox, signal = _post(session_dir, kind, message, target=target,
                                    iteration=iteration, task=task)
    except OSError as exc:
        raise InterlockError(f"cannot write to the mailbox in {session_dir}: "
                             f"{exc.strerror or exc}") from None
    return PostedSignal(signal, mailbox)


def wait_for_receipt(posted: PostedSignal, timeout: float) -> Receipt | None:
    """Block until a consumer handled (or rejected) the signal; None after ``timeout``."""
    return _wait(posted.mailbox, posted.signal, timeout)


def parse_signal_types(text: str | None) -> tuple[str, ...]:
    """``STEER,INFO`` -> the types; None -> the universal ones."""
    if text is None:
        return UNIVERSAL_TYPES
    types = tuple(t.strip().upper() for t in text.split(",") if t.strip())
    unknown = [t for t in types if t not in SIGNAL_TYPES]
    if unknown or not types:
        raise UsageError(f"--types: unknown {', '.join(unknown) or 'empty list'}; "
                         f"choose from {','.join(SIGNAL_TYPES)}")
    return types


def consume_signals(session_dirs: Sequence[Path], *, identity: str = TARGET_ALL,
                    types: Sequence[str] = UNIVERSAL_TYPES, once: bool = False,
                    scan_interval: float = 2.0, stop: threading.Event | None = None,
                    on_handled: Callable[[Handled], None] | None = None,
                    on_rejected: Callable[[Rejected], None] | None = None) -> None:
    """Handle the signals of ``session_dirs`` as they arrive (or, with ``once``, those there
    now) until ``stop`` is set; several consumers on one mailbox never handle a signal
    twice. State-specific types (APPROVE, SKIP) are taken only when named in ``types``."""
    try:
        check_identifier(identity, "--as")
    except SignalError as exc:
        raise UsageError(str(exc)) from None
    for folder in session_dirs:
        if not folder.is_dir():
            raise UsageError(f"no session folder {folder}")
    handled_by = "interlock" if identity == TARGET_ALL else identity
    explicit = set(types) & set(STATE_SPECIFIC_TYPES)

    def accepts(signal: Signal) -> bool:
        return signal.type not in STATE_SPECIFIC_TYPES or signal.type in explicit

    def deliver(signal: Signal, handled_at: str) -> str:
        return "reported by interlock mailbox consume"

    consumer = Consumer(scan_interval=scan_interval, on_handled=on_handled,
                        on_rejected=on_rejected, watch=not once)
    for folder in session_dirs:
        consumer.add(Subscription(Mailbox(folder), deliver, identity=identity,
                                  types=tuple(types), accepts=accepts, handled_by=handled_by))
    if once:
        consumer.run_once()
        return
    try:
        consumer.serve_until(stop or threading.Event())
    except Exception as exc:
        raise InterlockError(f"the consumer stopped: {exc}") from None
