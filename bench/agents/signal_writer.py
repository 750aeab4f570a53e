"""A signal writer for bench/signal_latency.py, in its own process, that stamps each rename.

``python bench/agents/signal_writer.py CONFIG_JSON``

CONFIG_JSON is an object: ``mode`` (``spaced``, ``phased`` or ``burst``), ``sessions`` (the
session folders), ``count``, ``seed``, ``gap_ms`` ([low, high]), ``seconds`` (stop posting
after this long; ``null``: no limit) and ``ack_timeout`` (seconds).

Each signal is written the way ``Mailbox.post`` writes it (``durable=True``): created in
``tmp/``, written, fsynced, renamed into ``inputs/``, then ``inputs/`` is fsynced. The
rename is stamped on CLOCK_MONOTONIC (``time.monotonic()``, system-wide on Linux, so the
bench compares the stamps with its own clock) just before and just after the rename;
the file fsync is done before both stamps, the folder fsync after both.

* ``spaced``: one signal at a time into a random session; before each one after the first
  the writer waits for an ack byte on stdin (the bench writes one when the consumer has
  handled a signal), then sleeps a random gap in ``gap_ms``;
* ``phased``: no acks; a random gap in ``gap_ms`` before every signal;
* ``burst``: all ``count`` signals are first written and fsynced in ``tmp/`` of the first
  session, then renamed into ``inputs/`` back to back (one stamp pair each), then
  ``inputs/`` is fsynced once.

Protocol: the writer prints ``ready`` when it is set up (for a burst: after staging), waits
for one byte on stdin (go), runs, and prints one JSON line: ``{"posts": [[session index,
signal id, before, after], ...], "problem": null or text}``.
"""

from __future__ import annotations

import json
import os
import random
import select
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from interlock.runtime.signals.mailbox import Mailbox, fsync_dir
from interlock.runtime.signals.model import Signal, make_signal


def rename_in(mailbox: Mailbox, staged: Path) -> tuple[float, float]:
    """The rename into inputs/, stamped just before and just after."""
    target = mailbox.inputs / staged.name
    before = time.monotonic()
    staged.rename(target)
    after = time.monotonic()
    return before, after


def new_signal(n: int) -> Signal:
    return make_signal("STEER", message=f"bench signal {n}", now=datetime.now(UTC))


def wait_byte(timeout: float | None) -> bool:
    ready, _, _ = select.select([0], [], [], timeout)
    return bool(ready) and os.read(0, 1) != b""


def main(argv: list[str]) -> None:
    config: dict[str, Any] = json.loads(argv[0])
    mode: str = config["mode"]
    mailboxes = [Mailbox(Path(p), create=False, durable=True) for p in config["sessions"]]
    count: int = config["count"]
    rng = random.Random(config["seed"])
    low, high = (g / 1000 for g in config["gap_ms"])
    ack_timeout: float = config["ack_timeout"]
    posts: list[list[Any]] = []
    problem: str | None = None

    staged: list[tuple[Signal, Path]] = []
    if mode == "burst":
        for n in range(count):
            signal = new_signal(n)
            staged.append((signal, mailboxes[0].stage(signal)))
    print("ready", flush=True)
    if not wait_byte(60.0):
        problem = "no go from the bench"
        count = 0
    seconds = config["seconds"]
    deadline = None if seconds is None else time.monotonic() + seconds

    if mode == "burst":
        for signal, path in staged:
            before, after = rename_in(mailboxes[0], path)
            posts.append([0, signal.id, before, after])
        fsync_dir(mailboxes[0].inputs)
    else:
        for n in range(count):
            if mode == "spaced" and n > 0 and not wait_byte(ack_timeout):
                problem = f"no ack for signal {n} within {ack_timeout:g} s"
                break
            time.sleep(rng.uniform(low, high))
            if deadline is not None and time.monotonic() > deadline:
                break
            index = rng.randrange(len(mailboxes))
            mailbox = mailboxes[index]
            signal = new_signal(n)
            before, after = rename_in(mailbox, mailbox.stage(signal))
            if mailbox.durable:
                fsync_dir(mailbox.inputs)
            posts.append([index, signal.id, before, after])
    sys.stdout.write(json.dumps({"posts": posts, "problem": problem}) + "\n")
    sys.stdout.flush()


if __name__ == "__main__":
    main(sys.argv[1:])
