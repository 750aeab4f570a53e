"""Inbox claims/s: 8 worker processes claim and finish every message of one store.

* bare: a ``FOR UPDATE SKIP LOCKED`` loop written here, straight on the adapter's table:
  one ``UPDATE ... WHERE id = (SELECT ... LIMIT 1 FOR UPDATE SKIP LOCKED) RETURNING``
  to claim, one ``UPDATE`` fenced by the token to finish (the baseline);
* postgresql: the PostgresInbox adapter as a worker uses it: ``claim_next`` (one
  ``SKIP LOCKED`` statement that also honours expired leases), then
  ``update_status(done, token)`` (fenced, checked and journaled in one statement);
* sqlite: the SqliteInbox adapter the same way, on one file.

Each row is messages claimed and finished per second over all workers, from the moment
they are all ready to the last one done; the PostgreSQL rows are medians of several
rounds in which bare and adapter take turns going first. The ratio is the median of the
rounds' own ratios (adapter / bare, run back to back), which a change in the machine's
load between rounds moves less than a ratio of the medians. The PostgreSQL cluster is the
throwaway test cluster. Run: ``bash scripts/with_pg.sh .venv/bin/python bench/inbox_claims.py``
(without INTERLOCK_TEST_PG_URL the PostgreSQL rows are skipped).
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import statistics
import tempfile
import time
import uuid
from pathlib import Path
from typing import Any

import psycopg

from interlock.runtime.host.owners import default_owner
from interlock.runtime.inbox.connection import connect
from interlock.runtime.inbox.model import Status
from interlock.runtime.inbox.postgres import PostgresInbox
from interlock.runtime.inbox.sqlite import SqliteInbox

LEASE = 60.0

BARE_CLAIM = """
UPDATE inbox_messages SET status = 'in_progress', lease_token = %(token)s,
       lease_until = %(until)s, owner = %(owner)s, updated_at = %(now)s
 WHERE id = (SELECT id FROM inbox_messages WHERE status = 'queued'
             ORDER BY created_at, id LIMIT 1 FOR UPDATE SKIP LOCKED)
RETURNING id"""
BARE_DONE = """
UPDATE inbox_messages SET status = 'done', lease_until = NULL, updated_at = %s
 WHERE id = %s AND lease_token = %s AND status = 'in_progress'"""


def bare_worker(url: str, slot: int, slots: int, barrier: Any) -> None:
    owner = default_owner(f"bare{slot}")
    with psycopg.connect(url, autocommit=True) as conn:
        barrier.wait()
        while True:
            token = uuid.uuid4().hex
            now = time.time()
            row = conn.execute(BARE_CLAIM, {"token": token, "until": now + LEASE,
                                            "owner": owner, "now": now}).fetchone()
            if row is None:
                return
            conn.execute(BARE_DONE, (time.time(), row[0], token))


def adapter_worker(url: str, slot: int, slots: int, barrier: Any) -> None:
    owner = default_owner(f"w{slot}")
    inbox = connect(url)
    try:
        barrier.wait()
        while True:
            claims = inbox.claim_next(owner, LEASE)
            if not claims:
                return
            for claim in claims:
                inbox.update_status(claim.message.id, Status.DONE, claim.lease.token)
    finally:
        inbox.close()


def measure(worker: Any, url: str, workers: int) -> float:
    """Seconds for ``workers`` processes to drain the store."""
    ctx = multiprocessing.get_context("spawn")
    barrier = ctx.Barrier(workers + 1)
    procs = [ctx.Process(target=worker, args=(url, n, workers, barrier))
             for n in range(workers)]
    for p in procs:
        p.start()
    barrier.wait(timeout=120)
    started = time.perf_counter()
    for p in procs:
        p.join()
        if p.exitcode != 0:
            raise SystemExit(f"a worker failed (exit {p.exitcode})")
    return time.perf_counter() - started


def fill(store: PostgresInbox | SqliteInbox, n: int) -> None:
    store.post_many([("bench", "bench", str(i)) for i in range(n)])


def check_drained(store: PostgresInbox | SqliteInbox, n: int) -> None:
    done = len(store.list(Status.DONE, limit=n + 1))
    if done != n:
        raise SystemExit(f"expected {n} messages done, found {done}")


def pg_rows(base: str, n: int, workers: int, rounds: int
            ) -> tuple[list[tuple[str, float]], list[float]]:
    """Median rates over ``rounds`` rounds, and each round's adapter / bare ratio; bare
    and adapter alternate who goes first, so a change in the machine's load hits both
    alike."""
    schema = f"bench_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(base, autocommit=True) as conn:
        conn.execute(f"CREATE SCHEMA {schema}")
    url = f"{base}{'&' if '?' in base else '?'}options=-c%20search_path%3D{schema}"
    modes = [("bare SKIP LOCKED", bare_worker), ("postgresql adapter", adapter_worker)]
    rates: dict[str, list[float]] = {name: [] for name, _ in modes}
    try:
        store = PostgresInbox(url)
        for r in range(rounds):
            for name, worker in modes if r % 2 == 0 else modes[::-1]:
                with psycopg.connect(url, autocommit=True) as conn:
                    conn.execute("TRUNCATE inbox_messages, inbox_journal")
                fill(store, n)
                seconds = measure(worker, url, workers)
                check_drained(store, n)
                rates[name].append(n / seconds)
        store.close()
    finally:
        with psycopg.connect(base, autocommit=True) as conn:
            conn.execute(f"DROP SCHEMA {schema} CASCADE")
    ratios = [a / b for b, a in zip(*rates.values(), strict=True)]
    return [(name, statistics.median(rates[name])) for name, _ in modes], ratios


def sqlite_row(n: int, workers: int) -> tuple[str, float]:
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "inbox.db"
        store = SqliteInbox(path)
        fill(store, n)
        seconds = measure(adapter_worker, f"sqlite://{path}", workers)
        check_drained(store, n)
        store.close()
    return ("sqlite adapter", n / seconds)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-n", "--messages", type=int, default=4000)
    parser.add_argument("-w", "--workers", type=int, default=8)
    parser.add_argument("-r", "--rounds", type=int, default=5,
                        help="PostgreSQL rounds (medians are reported)")
    args = parser.parse_args()
    rows: list[tuple[str, float]] = []
    ratios: list[float] = []
    base = os.environ.get("INTERLOCK_TEST_PG_URL", "")
    if base:
        pg, ratios = pg_rows(base, args.messages, args.workers, args.rounds)
        rows.extend(pg)
    else:
        print("INTERLOCK_TEST_PG_URL is not set: PostgreSQL rows skipped")
    rows.append(sqlite_row(args.messages, args.workers))
    print(f"{args.messages} messages, {args.workers} workers ({os.cpu_count()} CPUs), "
          f"PostgreSQL: median of {args.rounds} rounds")
    for name, rate in rows:
        print(f"  {name:22} {rate:9.0f} claims/s")
    if ratios:
        print(f"  adapter / bare         {statistics.median(ratios):9.2f}x (goal >= 0.80; "
              f"rounds: {' '.join(f'{r:.2f}' for r in ratios)})")


if __name__ == "__main__":
    main()
