"""``interlock signal`` and ``interlock mailbox consume``: the live-signal mailbox by hand."""

from __future__ import annotations

import json
import signal as os_signal
import sys
import threading
from pathlib import Path

from interlock import runtime
from interlock.runtime.cli.output import EXIT_ERRORS, EXIT_OK, err, fail

EXIT_TIMEOUT = 124
EXIT_INTERRUPTED = 130


def send_signal(session: str, kind: str, message: str | None, target: str,
                iteration: int | None, wait: float | None, *, create: bool = False,
                store_url: str | None = None, task: str | None = None) -> int:
    try:
        posted = runtime.post_signal(session, kind, message, target=target,
                                     iteration=iteration, create=create, store=store_url,
                                     task=task)
    except runtime.InterlockError as exc:
        return fail(str(exc), exc.exit_code)
    err.print(f"posted {posted.signal.type} {posted.signal.file_name} to {posted.inputs}")
    if wait is None:
        print(posted.id)
        return EXIT_OK
    receipt = runtime.wait_for_receipt(posted, wait)
    if receipt is None:
        err.print(f"no consumer handled {posted.id} within {wait:g}s; it stays in inputs/")
        return EXIT_TIMEOUT
    print(json.dumps(receipt.to_json(), ensure_ascii=False))
    return EXIT_OK if receipt.handled else EXIT_ERRORS


def consume(session_dirs: list[Path], identity: str, types_text: str | None, as_json: bool,
            once: bool, count: int | None, scan_interval: float) -> int:
    done = threading.Event()
    lock = threading.Lock()
    handled = 0

    def rejected(r: runtime.Rejected) -> None:
        err.print(("rejected", "yellow"), f" {r.name}: {r.reason} (moved to {r.mailbox.rejected})")

    def handled_cb(h: runtime.Handled) -> None:
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

    if not once:
        for sig in (os_signal.SIGINT, os_signal.SIGTERM):
            os_signal.signal(sig, lambda *_: done.set())
    try:
        runtime.consume_signals(session_dirs, identity=identity,
                                types=runtime.parse_signal_types(types_text), once=once,
                                scan_interval=scan_interval, stop=done,
                                on_handled=handled_cb, on_rejected=rejected)
    except runtime.InterlockError as exc:
        return fail(str(exc), exc.exit_code)
    if once or (count is not None and handled >= count):
        return EXIT_OK
    return EXIT_INTERRUPTED
