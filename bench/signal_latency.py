"""Time from a signal's rename into ``inputs/`` to its session handler, against the seed's poll.

Measured: from the rename of a signal file into ``SESSION_DIR/signals/inputs/`` to the
moment the consumer enters the session handler (the ``deliver`` callback of a
``Subscription``; its first statement takes ``time.monotonic()``). Rows, in one run:

1. interlock's ``Consumer`` watching 1 session (one mailbox);
2. interlock's ``Consumer`` watching 100 sessions (100 mailboxes, one consumer), each
   signal into a random one of them;
3. burst: 1,000 signals renamed back to back into one mailbox watched by a ``Consumer``
   (time from each rename to its handler: queueing; median, p99 and max);
4. baseline, the seed's design: a loop on a fixed 1 s grid that lists ``inputs/``, peeks,
   parses, claims by rename and calls the handler, 1 session. It sleeps, so it is measured
   over fewer signals (``--baseline-signals``, 100) arriving at random phases of its grid
   (random gaps of 50-150 ms, no waiting for the handler).

In rows 1 and 2 the signals come one at a time: the writer waits until the consumer has
handled the previous signal (and written its handling metadata), then a random 2-20 ms
gap, so each signal meets an idle worker, not a backlog. A row stops at ``--signals``
(1,000) or after ``--row-seconds`` (18 s), whichever comes first, so that the whole run
stays near a minute; the table says how many signals each row measured.

The writer is a separate process (``bench/agents/signal_writer.py``), as real writers
are (``interlock signal``, a person's ``mv``). It writes each signal the way
``Mailbox.post`` does with ``durable=True`` (write in ``tmp/``, fsync, rename into
``inputs/``, fsync ``inputs/``) and stamps CLOCK_MONOTONIC just before and just after the
rename; the file fsync precedes both stamps and is not counted, the folder fsync follows
them (it overlaps with the consumer's work, as it does for real writers). Latency is
counted from the stamp *before* the rename, so it can never come out negative; the span
between the two stamps (the rename itself, plus any preemption) is printed, and bounds
the over-count. CLOCK_MONOTONIC is system-wide on Linux, so the writer's stamps compare
directly with the handler's. A writer thread in this process would share the GIL with
watchdog's threads and the consumer's worker, and its own stamp could be delayed by them
(or delay them); a separate process keeps the measurement free of that and is what
happens in production. The consumer side runs as interlock runs it: watchdog's observer
threads and the consumer's worker thread share this process's GIL. Mailboxes are the
default ``Mailbox(...)`` (durable: the claim and the processed file are fsynced), under
the system's temporary folder.

Where the time goes is shown per row from bench-only stamps (a ``Consumer`` subclass that
notes when a name is first hinted and first handled, and a ``Mailbox`` subclass that
notes when a claim starts): rename -> hint (inotify, watchdog's threads, the observer
calling the consumer's handler), hint -> worker (the consumer's queue and the worker
waking), worker -> claim (peek, parse, route), claim -> handler (the claim rename, its
fsync, the read of the claimed file). A signal handled before any hint announced it was
found by a reconciliation scan.

``--move-delay S`` is a what-if: it sets watchdog's move-pairing delay
(``InotifyMoveEventGrouper.delay``) to S in this process before the consumers start. The
consumer sets it to 0 (watchdog's default, 0.5 s, made every hint behind a claim wait
half a second: rows 1 and 2 measured p99 ~480-500 ms); ``--move-delay 0.5`` shows that.

Target: p99 <= 10 ms for rows 1 and 2, printed as PASS/FAIL. Ratios are the baseline's
median over a row's median (higher is faster), for rows 1 and 2 (the burst measures
queueing, which the baseline row does not). The machine may be running other work
(the load average is printed). Temporary folders are removed; the run checks that no
thread or writer process is left behind.

Then, unless ``--live-seconds 0``, the live-session rows of ``bench/live_sessions.py``:
an idle ``interlock run`` session and a PAUSED ``interlock ralph run``, each a real
runner process: their CPU over ``--live-seconds`` (60) of quiet (target <= 0.2 % of a
core), and signal -> journaled step latency (target p99 <= 50 ms), against the 1 s poll.

Run: ``python bench/signal_latency.py [--signals 1000] [--row-seconds 18]`` (about a
minute, and 2.5 more for the live-session rows). Exit status 0 unless the bench itself
fails; a missed target is printed as FAIL.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import json
import math
import os
import random
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from interlock.runtime.signals.consumer import Consumer, Handled, Subscriber, Subscription
from interlock.runtime.signals.mailbox import Mailbox, SignalClaim
from interlock.runtime.signals.model import (
    MAX_SIGNAL_BYTES,
    Signal,
    iso_utc,
    make_signal,
    parse_signal,
)

WRITER = Path(__file__).resolve().parent / "agents" / "signal_writer.py"
TARGET = 0.010  # seconds, p99 for rows 1 and 2
SEED_INTERVAL = 1.0  # the seed's poll period
GAP_MS = (2.0, 20.0)  # between a handled signal and the next one (rows 1 and 2)
PHASE_GAP_MS = (50.0, 150.0)  # between baseline signals
ACK_TIMEOUT = 10.0  # seconds the writer waits for the consumer to handle a signal
STALL = 5.0  # seconds without a handler entry after which the drain gives up
DRAIN_MAX = 60.0  # seconds the drain waits at most after the writer is done
SLOW = 0.100  # a signal slower than this is counted separately


@dataclass
class Post:
    session: int
    signal_id: str
    before: float  # CLOCK_MONOTONIC just before the rename into inputs/
    after: float  # ... and just after it

    @property
    def name(self) -> str:
        return f"signal.{self.signal_id}.yaml"


@dataclass
class Result:
    label: str
    sessions: int
    planned: int
    posts: list[Post] = field(default_factory=list)
    entered: dict[str, float] = field(default_factory=dict)  # signal id -> handler entry
    hinted: dict[str, float] = field(default_factory=dict)  # file name -> first hint
    handling: dict[str, float] = field(default_factory=dict)  # file name -> first _handle
    claiming: dict[str, float] = field(default_factory=dict)  # file name -> claim start
    problems: list[str] = field(default_factory=list)
    target: float | None = None
    wall: float = 0.0  # seconds from the first rename to the last handler entry
    took: float = 0.0  # seconds the row took, setup and drain included
    scans: int = 0
    missed: int = 0

    @property
    def latencies(self) -> list[float]:
        return [self.entered[p.signal_id] - p.before for p in self.posts
                if p.signal_id in self.entered]

    @property
    def passed(self) -> bool | None:
        if self.target is None:
            return None
        lat = self.latencies
        return bool(lat) and not self.problems and percentile(lat, 99) <= self.target


def move_grouper() -> Any:
    """Watchdog's class whose ``delay`` (0.5 s) holds an unpaired IN_MOVED_FROM event back
    to pair it with an IN_MOVED_TO: ``InotifyMoveEventGrouper`` in watchdog 7,
    ``InotifyBuffer`` in watchdog 6."""
    try:
        module = importlib.import_module("watchdog.observers.inotify_move_event_grouper")
        return module.InotifyMoveEventGrouper
    except ImportError:
        return importlib.import_module("watchdog.observers.inotify_buffer").InotifyBuffer


def percentile(values: list[float], pct: float) -> float:
    """Nearest-rank percentile (p99 of fewer than 100 values is their maximum)."""
    if not values:
        return math.nan
    ordered = sorted(values)
    return ordered[max(0, math.ceil(pct / 100 * len(ordered)) - 1)]


# -- instrumented consumer (bench only) -------------------------------------------------------


class _TimedMailbox(Mailbox):
    """Notes when the consumer starts a claim."""

    claiming: dict[str, float]

    def claim(self, name: str, owner: str) -> SignalClaim | None:
        self.claiming.setdefault(name, time.monotonic())
        return super().claim(name, owner)


class _TimedConsumer(Consumer):
    """Notes when a name is first hinted (on watchdog's observer thread) and when the worker
    first handles it."""

    hinted: dict[str, float]
    handling: dict[str, float]

    def hint(self, key: Path, name: str) -> None:
        self.hinted.setdefault(name, time.monotonic())
        super().hint(key, name)

    def _handle(self, sub: Subscriber, name: str) -> None:
        self.handling.setdefault(name, time.monotonic())
        super()._handle(sub, name)


class _Acks:
    """Tells the writer (through its stdin) that a signal was handled."""

    def __init__(self) -> None:
        self.fd: int | None = None
        self.handled = 0

    def __call__(self, handled: Handled) -> None:
        self.handled += 1
        fd = self.fd
        if fd is not None:
            with contextlib.suppress(OSError):
                os.write(fd, b"+")


# -- the writer -------------------------------------------------------------------------------


def run_writer(mode: str, dirs: list[Path], count: int, seed: int, gap_ms: tuple[float, float],
               seconds: float | None, acks: _Acks | None, result: Result) -> None:
    """Run the writer process to its end; its posts go into ``result``."""
    config = {"mode": mode, "sessions": [str(d) for d in dirs], "count": count, "seed": seed,
              "gap_ms": list(gap_ms), "seconds": seconds, "ack_timeout": ACK_TIMEOUT}
    proc = subprocess.Popen([sys.executable, str(WRITER), json.dumps(config)],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE)
    assert proc.stdin is not None and proc.stdout is not None
    try:
        ready = proc.stdout.readline()
        if ready.strip() != b"ready":
            result.problems.append(f"writer did not start: {ready!r}")
            return
        if acks is not None:
            acks.fd = proc.stdin.fileno()
        proc.stdin.write(b"g")
        proc.stdin.flush()
        line = proc.stdout.readline()
        if acks is not None:
            acks.fd = None
        try:
            report = json.loads(line)
        except ValueError:
            result.problems.append(f"writer failed: {line!r}")
            return
        result.posts = [Post(int(s), str(i), float(b), float(a)) for s, i, b, a in report["posts"]]
        if report["problem"]:
            result.problems.append(f"writer: {report['problem']}")
    finally:
        if acks is not None:
            acks.fd = None
        proc.stdin.close()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
            result.problems.append("writer did not exit; killed")
        proc.stdout.close()


def drain(result: Result) -> None:
    """Wait until every posted signal reached its handler, or until none has for STALL
    seconds (a scan every 2 s would have found a signal by then), at most DRAIN_MAX."""
    started = time.monotonic()
    seen, progress = -1, started
    while True:
        now = time.monotonic()
        done = sum(1 for p in result.posts if p.signal_id in result.entered)
        if done == len(result.posts) or now - progress > STALL or now - started > DRAIN_MAX:
            break
        if done != seen:
            seen, progress = done, now
        time.sleep(0.05)
    lost = [p for p in result.posts if p.signal_id not in result.entered]
    if lost:
        result.problems.append(f"{len(lost)} signals never reached the handler (none did "
                               f"for {STALL:g} s, or {DRAIN_MAX:g} s passed)")
    if result.posts and result.entered:
        last = max(result.entered[p.signal_id] for p in result.posts
                   if p.signal_id in result.entered)
        result.wall = last - min(p.before for p in result.posts)


# -- rows -------------------------------------------------------------------------------------


def _handler(entered: dict[str, float]) -> Callable[[Signal, str], str]:
    def deliver(signal: Signal, handled_at: str) -> str:
        now = time.monotonic()
        entered[signal.id] = now
        return "bench"
    return deliver


def consumer_row(root: Path, label: str, sessions: int, mode: str, count: int, seed: int,
                 seconds: float | None, target: float | None) -> Result:
    result = Result(label, sessions, count, target=target)
    started = time.monotonic()
    dirs = [root / f"session-{i:03d}" for i in range(sessions)]
    mailboxes: list[_TimedMailbox] = []
    for d in dirs:
        mailbox = _TimedMailbox(d)
        mailbox.claiming = result.claiming
        mailboxes.append(mailbox)
    acks = _Acks()
    consumer = _TimedConsumer(on_handled=acks)
    consumer.hinted, consumer.handling = result.hinted, result.handling
    deliver = _handler(result.entered)
    for mailbox in mailboxes:
        consumer.add(Subscription(mailbox, deliver))
    consumer.start()
    try:
        # Warm up on one signal (imports, first parse), then let watchdog's 0.5 s move
        # grouping of the warm-up's claim pass, so the first measured signal meets an idle
        # consumer.
        time.sleep(0.3)
        Mailbox(dirs[0]).post(make_signal("INFO", message="warm-up", now=datetime.now(UTC)))
        deadline = time.monotonic() + 5
        while acks.handled < 1 and time.monotonic() < deadline:
            time.sleep(0.005)
        time.sleep(0.7)
        run_writer(mode, dirs, count, seed, GAP_MS, seconds,
                   acks if mode == "spaced" else None, result)
        drain(result)
    finally:
        consumer.stop()
    if consumer.error is not None:
        result.problems.append(f"consumer stopped: {consumer.error!r}")
    result.scans, result.missed = consumer.stats.scans, consumer.stats.missed
    result.took = time.monotonic() - started
    return result


def seed_row(root: Path, count: int, seed: int) -> Result:
    """The seed's design: a fixed 1 s grid; list, peek, parse, claim, handle, archive."""
    result = Result("seed design: 1 s polling loop, 1 session", 1, count)
    started = time.monotonic()
    session = root / "seed-session"
    mailbox = Mailbox(session)
    deliver = _handler(result.entered)
    stop = threading.Event()
    owner = f"{os.getpid()}.seed.bench"

    def poll() -> None:
        t0, k = time.monotonic(), 0
        while True:
            k += 1
            if stop.wait(max(0.0, t0 + k * SEED_INTERVAL - time.monotonic())):
                return
            for name in mailbox.pending():
                raw = mailbox.peek(name, MAX_SIGNAL_BYTES)
                if raw is None:
                    continue
                signal = parse_signal(raw, name)
                claim = mailbox.claim(name, owner)
                if claim is None:
                    continue
                handled_at = iso_utc(datetime.now(UTC))
                action = deliver(signal, handled_at)
                mailbox.finish(claim, {"handled_by": "seed", "handled_at": handled_at,
                                       "action_taken": action, "signal_id": signal.id})

    poller = threading.Thread(target=poll, name="bench-seed-poll", daemon=True)
    poller.start()
    try:
        run_writer("phased", [session], count, seed, PHASE_GAP_MS, None, None, result)
        drain(result)
    finally:
        stop.set()
        poller.join(timeout=10)
    result.took = time.monotonic() - started
    return result


# -- report -----------------------------------------------------------------------------------


def _ms(seconds: float) -> str:
    return f"{seconds * 1000:,.2f}" if math.isfinite(seconds) else "-"


def _summary(values: list[float]) -> str:
    if not values:
        return "-"
    return (f"median {_ms(statistics.median(values))}, p99 {_ms(percentile(values, 99))}, "
            f"max {_ms(max(values))} ms")


def print_table(rows: list[Result], base: Result) -> None:
    header = (f"{'row':<50}{'n':>11}{'median ms':>11}{'p99 ms':>10}{'max ms':>10}"
              f"{'target':>10}  {'result':<7}{'vs 1 s poll':>12}")
    print(header)
    print("-" * len(header))
    base_median = statistics.median(base.latencies) if base.latencies else math.nan
    for row in rows:
        lat = row.latencies
        median = statistics.median(lat) if lat else math.nan
        ratio = (base_median / median if row.target is not None and lat and median > 0
                 else math.nan)
        target = "-" if row.target is None else f"<= {row.target * 1000:g}"
        verdict = {None: "-", True: "PASS", False: "FAIL"}[row.passed]
        print(f"{row.label:<50}{f'{len(lat)}/{row.planned}':>11}{_ms(median):>11}"
              f"{_ms(percentile(lat, 99)):>10}{_ms(max(lat, default=math.nan)):>10}"
              f"{target:>10}  {verdict:<7}"
              f"{(f'{ratio:,.1f}x' if math.isfinite(ratio) else '-'):>12}")


def print_breakdown(row: Result) -> None:
    hint, queue, parse, claim = [], [], [], []
    by_scan = 0
    for p in row.posts:
        name = p.name
        entered = row.entered.get(p.signal_id)
        hinted, handling = row.hinted.get(name), row.handling.get(name)
        claiming = row.claiming.get(name)
        if entered is None or handling is None or claiming is None:
            continue
        if hinted is None or hinted > handling:
            by_scan += 1
        else:
            hint.append(hinted - p.before)
            queue.append(handling - hinted)
        parse.append(claiming - handling)
        claim.append(entered - claiming)
    lat = row.latencies
    slow = sum(1 for v in lat if v > SLOW)
    print(f"  {row.label}: {len(row.posts)} posted, {slow} over {SLOW * 1000:g} ms, "
          f"{by_scan} found by a scan before any hint; {row.scans} scans, "
          f"{row.missed} missed events")
    print(f"    rename -> hint      {_summary(hint)}")
    print(f"    hint -> worker      {_summary(queue)}")
    print(f"    worker -> claim     {_summary(parse)}   (peek, parse, route)")
    print(f"    claim -> handler    {_summary(claim)}   (rename, fsync, read)")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--signals", type=int, default=1000,
                        help="signals per row for rows 1 and 2, and in the burst")
    parser.add_argument("--row-seconds", type=float, default=18.0,
                        help="rows 1 and 2 stop posting after this long")
    parser.add_argument("--baseline-signals", type=int, default=100,
                        help="signals for the 1 s polling loop")
    parser.add_argument("--sessions", type=int, default=100, help="mailboxes in row 2")
    parser.add_argument("--seed", type=int, default=4, help="random seed")
    parser.add_argument("--move-delay", type=float, default=None,
                        help="what-if: watchdog's move-pairing delay (s) for this run")
    parser.add_argument("--live-seconds", type=float, default=60.0,
                        help="idle period of the live-session rows (bench/live_sessions.py); "
                        "0 skips them")
    args = parser.parse_args(argv)
    if min(args.signals, args.baseline_signals, args.sessions) < 1:
        parser.error("counts must be at least 1")

    threads_before = {t.ident for t in threading.enumerate()}
    rng = random.Random(args.seed)
    grouper = move_grouper()
    original_delay = grouper.delay
    if args.move_delay is not None:
        grouper.delay = args.move_delay
    load = os.getloadavg()
    started = time.monotonic()
    print(f"python {sys.version.split()[0]}, {os.cpu_count()} CPUs, load average "
          f"{load[0]:.2f} {load[1]:.2f} {load[2]:.2f} (other work may be running); "
          f"temporary folder {tempfile.gettempdir()}")
    print(f"rows 1, 2: up to {args.signals} signals or {args.row_seconds:g} s, one at a time, "
          f"{GAP_MS[0]:g}-{GAP_MS[1]:g} ms after the previous one was handled; burst: "
          f"{args.signals} renames back to back; 1 s poll: {args.baseline_signals} signals "
          f"{PHASE_GAP_MS[0]:g}-{PHASE_GAP_MS[1]:g} ms apart")
    if args.move_delay is not None:
        print(f"WHAT-IF: watchdog's move grouping delay set to {args.move_delay:g} s "
              f"(default {original_delay:g} s)")
    print("latency: writer's CLOCK_MONOTONIC just before the rename into inputs/ -> handler "
          "entry\n")
    try:
        with tempfile.TemporaryDirectory(prefix="interlock-signal-bench-") as tmp_name:
            tmp = Path(tmp_name)
            one = consumer_row(tmp / "one", "interlock Consumer, 1 session", 1, "spaced",
                               args.signals, rng.randrange(1 << 30), args.row_seconds, TARGET)
            many = consumer_row(tmp / "many",
                                f"interlock Consumer, {args.sessions} sessions (random)",
                                args.sessions, "spaced", args.signals, rng.randrange(1 << 30),
                                args.row_seconds, TARGET)
            burst = consumer_row(tmp / "burst", "burst: interlock Consumer, 1 session", 1,
                                 "burst", args.signals, rng.randrange(1 << 30), None, None)
            base = seed_row(tmp / "seed", args.baseline_signals, rng.randrange(1 << 30))
    finally:
        grouper.delay = original_delay

    rows = [one, many, burst, base]
    print_table(rows, base)
    print("\nn: signals measured / planned; vs 1 s poll: the polling loop's median / the "
          "row's median (higher is faster; not for the burst, which measures queueing).")
    print("\nwhere the time goes (bench-only stamps in the consumer):")
    for row in (one, many, burst):
        print_breakdown(row)
    if burst.posts:
        renames = burst.posts[-1].after - burst.posts[0].before
        print(f"  burst: {len(burst.posts)} renames took {_ms(renames)} ms; first rename -> "
              f"last handler {_ms(burst.wall)} ms "
              f"({len(burst.latencies) / burst.wall if burst.wall > 0 else math.nan:,.0f} "
              "signals/s)")
    spans = [p.after - p.before for row in rows for p in row.posts]
    print(f"\nrename syscall span (after - before stamp, the most a latency can be "
          f"over-counted): {_summary(spans)}")
    took = zip(("1 session", f"{args.sessions} sessions", "burst", "1 s poll"), rows,
               strict=True)
    print(f"run time {time.monotonic() - started:.1f} s ("
          + ", ".join(f"{name} {row.took:.1f} s" for name, row in took) + ")")

    failed = False
    for row in rows:
        for problem in row.problems:
            print(f"FAIL: {row.label}: {problem}")
            failed = True
        if row.passed is False and row.target is not None and row.latencies:
            print(f"FAIL: {row.label}: p99 {_ms(percentile(row.latencies, 99))} ms > target "
                  f"{_ms(row.target)} ms")
            failed = True
    deadline = time.monotonic() + 5
    left: list[threading.Thread] = []
    while time.monotonic() < deadline:
        left = [t for t in threading.enumerate() if t.ident not in threads_before]
        if not left:
            break
        time.sleep(0.05)
    if left:
        print(f"FAIL: threads left running: {', '.join(sorted(t.name for t in left))}")
        failed = True
    print("\nall targets met" if not failed else "\nFAIL: see above")
    if args.live_seconds > 0:  # the same path through live runners, and their idle CPU
        print()
        sys.path.insert(0, str(Path(__file__).resolve().parent))
        live_sessions = importlib.import_module("live_sessions")
        live_sessions.main(["--idle-seconds", f"{args.live_seconds:g}"])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
