"""Writing a signal, and waiting for its receipt (``interlock signal ... --wait``).

A receipt is the handling metadata a consumer writes into ``processed/NAME`` when it has
delivered the signal, or the reason beside ``rejected/NAME`` when the file was refused.
Waiting listens to inotify on both folders and also checks them directly, so a receipt
written before the watch started is not missed.
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from watchdog.events import FileSystemEvent, FileSystemEventHandler
from watchdog.observers import Observer

from interlock.runtime.signals.mailbox import Mailbox, read_metadata
from interlock.runtime.signals.model import Signal, make_signal

# Watchdog logs through the standard library; without a handler of its own, Python's
# last-resort handler would print its warnings over the CLI's output.
logging.getLogger("watchdog").addHandler(logging.NullHandler())

@dataclass(frozen=True, slots=True)
class Receipt:
    """``handled`` with the consumer's metadata, or not handled with the rejection reason."""

    signal_id: str
    handled: bool
    metadata: dict[str, Any] | None = None
    reason: str | None = None

    def to_json(self) -> dict[str, Any]:
        if self.handled:
            return {"id": self.signal_id, "handled": True, **(self.metadata or {})}
        return {"id": self.signal_id, "handled": False, "rejected": self.reason}


def post_signal(session_dir: Path, kind: str, message: str | None = None, *,
                target: str = "ALL", iteration: int | None = None,
                now: datetime | None = None, task: str | None = None
                ) -> tuple[Mailbox, Signal]:
    """Create a signal file in ``SESSION_DIR/signals/inputs/`` (through ``tmp/``)."""
    mailbox = Mailbox(session_dir)
    signal = make_signal(kind, target, message, iteration, now=now or datetime.now(UTC),
                         task=task)
    mailbox.post(signal)
    return mailbox, signal


def receipt_of(mailbox: Mailbox, signal: Signal) -> Receipt | None:
    name = signal.file_name
    metadata = read_metadata(mailbox.processed / name)
    if metadata is not None:
        return Receipt(signal.id, True, metadata)
    reason_file = mailbox.rejected / f"{name}.reason"
    if reason_file.exists():
        return Receipt(signal.id, False,
                       reason=reason_file.read_text(encoding="utf-8", errors="replace").strip())
    return None


class _Wake(FileSystemEventHandler):
    def __init__(self, event: threading.Event) -> None:
        self.event = event

    def on_any_event(self, event: FileSystemEvent) -> None:
        self.event.set()


def wait_for_receipt(mailbox: Mailbox, signal: Signal, timeout: float) -> Receipt | None:
    """The signal's receipt, or None after ``timeout`` seconds."""
    woken = threading.Event()
    observer = Observer()
    for folder in (mailbox.processed, mailbox.rejected):
        observer.schedule(_Wake(woken), str(folder), recursive=False)
    observer.start()
    try:
        deadline = time.monotonic() + timeout
        while True:
            receipt = receipt_of(mailbox, signal)
            if receipt is not None:
                return receipt
            left = deadline - time.monotonic()
            if left <= 0:
                return None
            woken.wait(min(left, 1.0))  # the 1 s cap is a safety net, not the pace
            woken.clear()
    finally:
        observer.stop()
        observer.join(timeout=5)
