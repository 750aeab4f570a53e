"""Post signals into one mailbox as fast as possible (for tests/test_signals_stress.py).

    post_signals.py SESSION_DIR RECORDS_FILE COUNT [--tag TAG] [--burst]

Prints ``ready`` once set up, then waits for one line on stdin, so that the test releases
every writer at the same moment; when done, writes one JSON line per posted signal
(id, type, message) to RECORDS_FILE and prints ``done COUNT``.

Default: ``Mailbox.post`` (tmp/, fsync, rename into inputs/) of ``make_signal(...)`` in a
loop, the types STEER, INFO, PAUSE and ABORT in turn (PAUSE and ABORT without a message
half of the time).

``--burst``: before ``ready``, creates COUNT signal files in tmp/ (no fsync); on the go,
renames them all into inputs/ in one tight loop: as many inotify events as files, in a
moment, far more than a kernel inotify queue holds (fs.inotify.max_queued_events).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from datetime import UTC, datetime
from pathlib import Path

from interlock.runtime.signals.mailbox import Mailbox
from interlock.runtime.signals.model import Signal, make_signal, new_signal_id, render_signal

KINDS = ("STEER", "INFO", "PAUSE", "ABORT")
PLACEHOLDER = "@@@@@@@@"


def _message(tag: str, kind: str, n: int) -> str | None:
    if kind in ("PAUSE", "ABORT") and n % 8 >= 4:
        return None
    return f"{tag} #{n}: {kind.lower()}, with 'quotes' and é"


def post(mailbox: Mailbox, tag: str, count: int) -> list[dict[str, object]]:
    records: list[dict[str, object]] = []
    for n in range(count):
        kind = KINDS[n % len(KINDS)]
        signal = make_signal(kind, message=_message(tag, kind, n), now=datetime.now(UTC))
        mailbox.post(signal)
        records.append({"id": signal.id, "type": signal.type, "message": signal.message})
    return records


def stage_burst(mailbox: Mailbox, tag: str, count: int) -> list[tuple[str, dict[str, object]]]:
    """COUNT signal files in tmp/, written straight (rendering each with YAML would take
    longer than the whole burst): one rendered template per type, the number put in."""
    templates = {kind: render_signal(Signal("x", kind, "ALL", f"{tag} {PLACEHOLDER}"))
                 for kind in KINDS}
    staged: list[tuple[str, dict[str, object]]] = []
    for n in range(count):
        kind = KINDS[n % len(KINDS)]
        number = f"{n:08d}"
        signal_id = new_signal_id(datetime.now(UTC))
        name = f"signal.{signal_id}.yaml"
        fd = os.open(mailbox.tmp / name, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        try:
            os.write(fd, templates[kind].replace(PLACEHOLDER, number).encode())
        finally:
            os.close(fd)
        staged.append((name, {"id": signal_id, "type": kind, "message": f"{tag} {number}"}))
    return staged


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("session_dir", type=Path)
    parser.add_argument("records", type=Path)
    parser.add_argument("count", type=int)
    parser.add_argument("--tag", default="writer")
    parser.add_argument("--burst", action="store_true")
    args = parser.parse_args()
    mailbox = Mailbox(args.session_dir, durable=not args.burst)
    staged = stage_burst(mailbox, args.tag, args.count) if args.burst else []
    print("ready", flush=True)
    sys.stdin.readline()
    if args.burst:
        tmp, inputs = str(mailbox.tmp), str(mailbox.inputs)
        for name, _ in staged:  # plain strings: Path objects would slow the burst down
            os.rename(f"{tmp}/{name}", f"{inputs}/{name}")  # noqa: PTH104
        records = [record for _, record in staged]
    else:
        records = post(mailbox, args.tag, args.count)
    args.records.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in records),
                            encoding="utf-8")
    print(f"done {len(records)}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
