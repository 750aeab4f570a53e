"""A worker process for the inbox stress test and bench:
``python inbox_worker.py URL TAG LEASE_SECONDS [--hold-after N]``.

Odd slots (INBOX_SLOT=i/n) fetch queued messages and claim each, starting at their own
place in the batch; even slots use ``claim_next``. Each marks its messages done with the
lease token (starting once $INBOX_GO_FILE exists, after printing ``{"ready": owner}``),
until the file $INBOX_STOP_FILE exists, then prints
``{"done": n, "lost": n, "stale": n}``. With ``--hold-after N``, after N
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
from interlock.runtime.inbox.connection import connect
from interlock.runtime.inbox.model import InboxUnavailable, StaleLease, Status

BATCH = 32


def main(argv: list[str]) -> int:
    url, tag, lease_text = argv[:3]
    hold_after = int(argv[argv.index("--hold-after") + 1]) if "--hold-after" in argv else -1
    lease = float(lease_text)
    stop = Path(os.environ["INBOX_STOP_FILE"])
    owner = default_owner(tag)
    inbox = connect(url, timeout=30.0)
    print(json.dumps({"ready": owner}), flush=True)
    go = Path(os.environ.get("INBOX_GO_FILE", stop))
    while not go.exists() and not stop.exists():  # all workers start together
        time.sleep(0.005)
    slot, slots = (int(x) for x in os.environ.get("INBOX_SLOT", "0/1").split("/"))
    done = lost = stale = 0
    while not stop.exists():
        try:
            if slot % 2:  # the seed's way: fetch, then claim each
                batch = inbox.fetch_queued(BATCH)
                start = (slot * len(batch)) // slots  # workers start at different places
                claims = [(m.id, inbox.claim(m.id, owner, lease))
                          for m in batch[start:] + batch[:start]]
            else:  # the worker loop's way: one SKIP LOCKED step
                claims = [(c.message.id, c.lease) for c in inbox.claim_next(owner, lease, 4)]
        except InboxUnavailable:
            continue
        if not claims:
            time.sleep(0.02)  # nothing fetchable now: leases of dead workers still running
            continue
        for message_id, got in claims:
            if got is None:
                lost += 1
                continue
            if done == hold_after:
                print(json.dumps({"holding": message_id, "token": got.token}), flush=True)
                while True:
                    time.sleep(60)
            try:
                inbox.update_status(message_id, Status.DONE, got.token)
                done += 1
            except StaleLease:
                stale += 1
    print(json.dumps({"done": done, "lost": lost, "stale": stale}), flush=True)
    inbox.close()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
