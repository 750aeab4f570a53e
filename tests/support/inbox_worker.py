"""A worker process for the inbox stress test and bench:
``python inbox_worker.py URL TAG LEASE_SECONDS [--hold-after N]``.

It fetches queued messages, claims them starting at its own slot of
the batch (INBOX_SLOT=i/n), and marks each done with
its lease token, until the file STOP (an env var path) exists. Each line it prints is
JSON: ``{"done": n, "lost": n, "stale": n}`` at the end. With ``--hold-after N``, after N
messages done it claims one more, prints ``{"holding": id, "token": token}`` and waits
(holding the lease) to be SIGKILLed.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

from interlock.runtime.host.owners import default_owner
from interlock.runtime.inbox.connect import connect
from interlock.runtime.inbox.model import InboxUnavailable, StaleLease, Status

BATCH = 32


def main(argv: list[str]) -> int:
    url, tag, lease_text = argv[:3]
    hold_after = int(argv[argv.index("--hold-after") + 1]) if "--hold-after" in argv else -1
    lease = float(lease_text)
    stop = Path(os.environ["INBOX_STOP_FILE"])
    owner = default_owner(tag)
    inbox = connect(url, timeout=30.0)
    slot, slots = (int(x) for x in os.environ.get("INBOX_SLOT", "0/1").split("/"))
    done = lost = stale = 0
    while not stop.exists():
        try:
            batch = inbox.fetch_queued(BATCH)
        except InboxUnavailable:
            continue
        if not batch:
            time.sleep(0.02)  # nothing fetchable now: leases of dead workers still running
            continue
        start = (slot * len(batch)) // slots  # workers start at different places
        batch = batch[start:] + batch[:start]
        for message in batch:
            got = inbox.claim(message.id, owner, lease)
            if got is None:
                lost += 1
                continue
            if done == hold_after:
                print(json.dumps({"holding": message.id, "token": got.token}), flush=True)
                while True:
                    time.sleep(60)
            try:
                inbox.update_status(message.id, Status.DONE, got.token)
                done += 1
            except StaleLease:
                stale += 1
    print(json.dumps({"done": done, "lost": lost, "stale": stale}), flush=True)
    inbox.close()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
