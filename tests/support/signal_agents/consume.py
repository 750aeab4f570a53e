"""A mailbox consumer built on the Consumer API (for tests/test_signals_stress.py).

    consume.py SESSION_DIR [--as NAME] [--ledger FILE] [--crash claim|finish|drop]
               [--once] [--scan-interval S] [--no-fsync]

Prints JSON lines on stdout: ``{"ready": OWNER}`` once serving (its claims folder name),
``{"handled": {...}}`` per signal it archived (``Handled.to_json()``, printed by
``on_handled``), ``{"overflowed": N}`` each time it learns that its inotify queue
overflowed, and ``{"stats": {...}}`` (ConsumerStats) when it stops: after one pass with
``--once``, else on SIGTERM or SIGINT.

``--ledger FILE``: delivery records the signal id in FILE (appended, fsynced) unless it is
there already: idempotent by id, as the session store's keyed offer is.

``--crash``: SIGKILLs itself the first time the consumer calls ``Mailbox.claim`` (after the
peek, before the rename), ``Mailbox.finish`` (after delivery, before the processed file) or
``Mailbox.drop_claim`` (after the processed file, before the claim is removed).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import signal
import sys
import threading
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))  # tests/: support.signals_helpers

from interlock.runtime.signals.consumer import Consumer, Handled, Subscription
from interlock.runtime.signals.mailbox import Mailbox
from interlock.runtime.signals.model import Signal

from support.signals_helpers import Ledger

CRASH_POINTS = {"claim": "claim", "finish": "finish", "drop": "drop_claim"}
_out = threading.Lock()  # the worker and watchdog's thread both print


def emit(obj: dict[str, Any]) -> None:
    with _out:
        sys.stdout.write(json.dumps(obj, ensure_ascii=False) + "\n")
        sys.stdout.flush()


class ReportingConsumer(Consumer):
    def overflowed(self) -> None:
        super().overflowed()
        emit({"overflowed": self.stats.overflows})


def crash_at(method: str) -> None:
    def die(*args: object, **kwargs: object) -> None:
        os.kill(os.getpid(), signal.SIGKILL)

    setattr(Mailbox, method, die)


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("session_dir", type=Path)
    parser.add_argument("--as", dest="identity", default="ALL")
    parser.add_argument("--ledger", type=Path)
    parser.add_argument("--crash", choices=sorted(CRASH_POINTS))
    parser.add_argument("--once", action="store_true")
    parser.add_argument("--scan-interval", type=float, default=2.0)
    parser.add_argument("--no-fsync", action="store_true")
    args = parser.parse_args()
    ledger = Ledger(args.ledger) if args.ledger else None

    def deliver(sig: Signal, handled_at: str) -> str:
        if ledger is None:
            return "reported"
        return "applied" if ledger.apply(sig.id) else "already applied"

    def handled(h: Handled) -> None:
        emit({"handled": h.to_json()})

    if args.crash:
        crash_at(CRASH_POINTS[args.crash])
    consumer = ReportingConsumer(scan_interval=args.scan_interval, on_handled=handled,
                                 watch=not args.once)
    consumer.add(Subscription(Mailbox(args.session_dir, durable=not args.no_fsync), deliver,
                              identity=args.identity))
    if args.once:
        emit({"ready": consumer.owner})
        consumer.run_once()
    else:
        # Blocked before the consumer's threads start (they inherit the mask), then waited
        # for here: a Python handler would run only in the main thread, which a signal
        # delivered to another thread does not wake from a blocking wait.
        stops = {signal.SIGINT, signal.SIGTERM}
        signal.pthread_sigmask(signal.SIG_BLOCK, stops)
        consumer.start()
        emit({"ready": consumer.owner})
        signal.sigwait(stops)
        consumer.stop()
        if consumer.error is not None:
            emit({"error": repr(consumer.error)})
    emit({"stats": dataclasses.asdict(consumer.stats)})
    return 0


if __name__ == "__main__":
    sys.exit(main())
