"""Events/s of a durable session against the bare compiled machine, in one process.

* bare: the compiled python-statemachine instance, ``send`` in a loop (the baseline);
* session: the Session layer (timer bookkeeping, acceptance check), no store;
* sqlite / postgresql: a Runner committing every step (journal entry + snapshot) in one
  transaction, as `interlock run` does.
* queued: the same events queued in the store first, then taken by a running session:
  once by ``Runner.run`` itself and once through the façade (``interlock.runtime.resume``,
  what `interlock resume` calls), so the two rows show what the façade costs.

SQLite runs with synchronous=FULL (every commit is on disk); PostgreSQL is the throwaway
test cluster (fsync off: it measures the round trips, not the disk).

Run: ``bash scripts/with_pg.sh .venv/bin/python bench/session_throughput.py`` (without
INTERLOCK_TEST_PG_URL set, the PostgreSQL row is skipped).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path

from interlock import runtime
from interlock.machines import Call, compile, loads
from interlock.machines.backends.base import CompiledMachine
from interlock.runtime.engine.clock import SystemClock
from interlock.runtime.engine.runner import Runner
from interlock.runtime.engine.session import Session
from interlock.runtime.store import Store, open_store

SPEC = """
machine: toggle
initial: off
context:
  flips: {type: int, default: 0}
states:
  off:
    on: {flip: {target: on, actions: [count]}}
  on:
    after: {1h: off}
    on: {flip: {target: off, actions: [count]}}
"""


def count(call: Call) -> None:
    call.context["flips"] += 1


def machine() -> CompiledMachine:
    return compile(loads(SPEC), bindings={"count": count})


def rate(send: Callable[[], object], events: int) -> float:
    started = time.perf_counter()
    for _ in range(events):
        send()
    return events / (time.perf_counter() - started)


def bare(events: int) -> float:
    instance = machine().new()
    return rate(lambda: instance.send("flip"), events)


def session(events: int) -> float:
    s = Session.start(machine(), SystemClock())
    return rate(lambda: s.send("flip"), events)


def durable(store: Store, events: int) -> float:
    runner, _ = Runner.open(store, SPEC, "toggle.yaml", session_id=f"bench-{uuid.uuid4().hex}",
                            bindings={"count": count})
    try:
        return rate(lambda: runner.send("flip"), events)
    finally:
        runner.close()


def _queue(store: Store, events: int) -> str:
    runner, _ = Runner.open(store, SPEC, "toggle.yaml", session_id=f"bench-{uuid.uuid4().hex}",
                            bindings={"count": count})
    runner.close()
    for _ in range(events):
        store.enqueue(runner.session_id, "flip", {}, time.time())
    return runner.session_id


def _until(events: int) -> tuple[asyncio.Event, Callable[[object], None]]:
    stop = asyncio.Event()
    seen = 0

    def step(_: object) -> None:
        nonlocal seen
        seen += 1
        if seen >= events:
            stop.set()

    return stop, step


def queued_runner(store: Store, events: int) -> float:
    session_id = _queue(store, events)

    async def drain() -> None:
        runner, _ = Runner.open(store, None, "toggle.yaml", session_id=session_id,
                                bindings={"count": count})
        stop, step = _until(events)
        try:
            await runner.run(stop, on_step=step)
        finally:
            runner.close()

    started = time.perf_counter()
    asyncio.run(drain())
    return events / (time.perf_counter() - started)


def queued_facade(store: Store, url: str, root: Path, events: int) -> float:
    session_id = _queue(store, events)
    stop, step = _until(events)
    started = time.perf_counter()
    asyncio.run(runtime.resume(session_id, bindings={"count": count}, signals=False,
                               store=url, root=root, stop=stop, on_step=step))
    return events / (time.perf_counter() - started)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=2000)
    args = parser.parse_args()
    rows: list[tuple[str, float]] = [("bare compiled machine", max(bare(args.events)
                                                                   for _ in range(3)))]
    rows.append(("session, no store", max(session(args.events) for _ in range(3))))
    with tempfile.TemporaryDirectory() as tmp:
        store = open_store(str(Path(tmp) / "bench.db"), Path(tmp))
        rows.append(("session + SQLite journal", durable(store, args.events)))
        runner_rows, facade_rows = [], []
        for _ in range(3):  # alternate, so drift on a busy machine hits both alike
            runner_rows.append(queued_runner(store, args.events))
            facade_rows.append(queued_facade(store, str(Path(tmp) / "bench.db"), Path(tmp),
                                             args.events))
        rows.append(("queued, Runner.run (SQLite)", max(runner_rows)))
        rows.append(("queued, runtime.resume (SQLite)", max(facade_rows)))
        store.close()
    pg_url = os.environ.get("INTERLOCK_TEST_PG_URL")
    if pg_url:
        store = open_store(pg_url, Path.cwd())
        rows.append(("session + PostgreSQL journal", durable(store, args.events)))
        store.close()
    base = rows[0][1]
    print(f"{args.events} events per row; ratio = events/s / bare events/s\n")
    print(f"{'':<32}{'events/s':>12}{'ratio':>9}")
    for name, value in rows:
        print(f"{name:<32}{value:>12,.0f}{value / base:>9.3f}")
    if not pg_url:
        print("\n(PostgreSQL skipped: run under scripts/with_pg.sh)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
