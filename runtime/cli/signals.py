"""``interlock signal`` and ``interlock mailbox consume``: the live-signal mailbox by hand."""

from __future__ import annotations

import json
import signal as os_signal
import sys
import threading
from pathlib import Path

from rich.markup import escape

from interlock.runtime.cli.output import EXIT_ERRORS, EXIT_OK, EXIT_USAGE, err, fail
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
)
from interlock.runtime.signals.writer import post_signal, wait_for_receipt

EXIT_TIMEOUT = 124
EXIT_INTERRUPTED = 130


def send_signal(session_dir: Path, kind: str, message: str | None, target: str,
                iteration: int | None, wait: float | None) -> int:
    try:
        mailbox, signal = post_signal(session_dir, kind, message, target=target,
                                      iteration=iteration)
    except SignalError as exc:
        return fail(str(exc), EXIT_USAGE)
    except OSError as exc:
        return fail(f"cannot write to the mailbox in {session_dir}: {exc.strerror or exc}")
    err.print(f"posted {signal.type} {escape(signal.file_name)} to "
              f"{escape(str(mailbox.inputs))}")
    if wait is None:
        print(signal.id)
        return EXIT_OK
    receipt = wait_for_receipt(mailbox, signal, wait)
    if receipt is None:
        err.print(f"no consumer handled {signal.id} within {wait:g}s; it stays in inputs/")
        return EXIT_TIMEOUT
    print(json.dumps(receipt.to_json(), ensure_ascii=False))
    return EXIT_OK if receipt.handled else EXIT_ERRORS


def _parse_types(text: str | None) -> tuple[str, ...]:
    if text is None:
        return UNIVERSAL_TYPES
    types = tuple(t.strip().upper() for t in text.split(",") if t.strip())
    unknown = [t for t in types if t not in SIGNAL_TYPES]
    if unknown or not types:
        raise SignalError(f"--types: unknown {', '.join(unknown) or 'empty list'}; "
                          f"choose from {','.join(SIGNAL_TYPES)}")
    return types


def consume(session_dirs: list[Path], identity: str, types_text: str | None, as_json: bool,
            once: bool, count: int | None, scan_interval: float) -> int:
    try:
        types = _parse_types(types_text)
        check_identifier(identity, "--as")
    except SignalError as exc:
        return fail(str(exc), EXIT_USAGE)
    for folder in session_dirs:
        if not folder.is_dir():
            return fail(f"no session folder {folder}", EXIT_USAGE)
    handled_by = "interlock" if identity == TARGET_ALL else identity
    done = threading.Event()
    lock = threading.Lock()
    handled = 0

    def deliver(signal: Signal, handled_at: str) -> str:
        return "reported by interlock mailbox consume"

    def rejected(r: Rejected) -> None:
        err.print(f"[yellow]rejected[/] {escape(r.name)}: {escape(r.reason)} "
                  f"(moved to {escape(str(r.mailbox.rejected))})")

    def handled_cb(h: Handled) -> None:
        # Printed once the handling metadata is written: a signal is reported by the one
        # consumer that finished it, and only once, even across a crash and re-delivery.
        nonlocal handled
        signal = h.signal
        with lock:
            if as_json:
                line = {"id": signal.id, "type": signal.type, "target": signal.target,
                        "message": signal.message, "iteration": signal.iteration,
                        "handled_by": h.handled_by, "handled_at": h.handled_at}
                sys.stdout.write(json.dumps(line, ensure_ascii=False) + "\n")
            else:
                sys.stdout.write(f"{h.handled_at} {signal.type:<7} {signal.target}: "
                                 f"{signal.message or ''}\n")
            sys.stdout.flush()
            handled += 1
            if count is not None and handled >= count:
                done.set()

    # State-specific types are taken only when asked for by name.
    explicit = set(types) & set(STATE_SPECIFIC_TYPES)

    def accepts(signal: Signal) -> bool:
        return signal.type not in STATE_SPECIFIC_TYPES or signal.type in explicit

    consumer = Consumer(scan_interval=scan_interval, on_handled=handled_cb,
                        on_rejected=rejected, watch=not once)
    for folder in session_dirs:
        consumer.add(Subscription(Mailbox(folder), deliver, identity=identity, types=types,
                                  accepts=accepts, handled_by=handled_by))
    if once:
        consumer.run_once()
        return EXIT_OK
    for sig in (os_signal.SIGINT, os_signal.SIGTERM):
        os_signal.signal(sig, lambda *_: done.set())
    consumer.start()
    try:
        while not done.wait(0.5):
            if consumer.error is not None:
                return fail(f"the consumer stopped: {consumer.error}")
    finally:
        consumer.stop()
    if count is not None and handled >= count:
        return EXIT_OK
    return EXIT_INTERRUPTED
