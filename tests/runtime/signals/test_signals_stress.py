"""Live signals under load and across crashes: real processes, real inotify, real files.

- Stress (the acceptance test): consumer processes on one mailbox, writers posting as fast
  as they can and a burst of renames, all at once: every signal is handled exactly once
  and archived, nothing is left claimed or pending, and a consumer whose inotify queue
  overflowed catches up. By default a scaled-down size (3 writers x 200, a 1,500-file
  burst); the issue's full size (8 writers x 2,000, a 50,000-file burst) with
  ``INTERLOCK_STRESS=full``.
- Crashes (SIGKILL) between peek and claim, between claim and the handling metadata, and
  between the metadata and dropping the claim: a restarted consumer finishes the work once.
- Several consumers, one mailbox, a few hundred signals: each handled once.
- Inotify overflow: a consumer frozen (SIGSTOP) while more events arrive than its kernel
  queue holds notices the overflow and rescans; signals whose events were dropped are
  handled, once.
- A signal no consumer here wants, left in inputs/, must not keep the consumer busy.

Nothing sleeps to pace a test: waits block on pipes, processes or conditions, with a
deadline as a safety net only.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import threading
import time
from collections import Counter
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from interlock.runtime.signals.consumer import Consumer, Handled, Subscription
from interlock.runtime.signals.mailbox import Mailbox, read_metadata
from interlock.runtime.signals.model import Signal, make_signal

from support.proc_helpers import Child, cli_argv
from support.signals_helpers import (
    Fleet,
    Ledger,
    census,
    max_queued_events,
    signal_agent_argv,
    unarchived,
    wait_stopped,
)
from support.stress import FULL

DEADLINE = 30.0  # safety net for the small tests; never a pace


def _post(mailbox: Mailbox, count: int, tag: str, target: str = "ALL") -> list[Signal]:
    kinds = ("STEER", "INFO", "PAUSE", "ABORT")
    signals = []
    for n in range(count):
        signal_ = make_signal(kinds[n % 4], target, f"{tag} #{n}", now=datetime.now(UTC))
        mailbox.post(signal_)
        signals.append(signal_)
    return signals


def _handled(line: str) -> dict[str, Any] | None:
    """The handled record in a consumer's stdout line: `mailbox consume --json` prints it
    bare, tests/signals_agents/consume.py as {"handled": ...}; None for other lines."""
    obj = json.loads(line)
    if "handled" in obj:
        return dict(obj["handled"])
    return dict(obj) if "id" in obj else None


def _is_handled(line: str) -> bool:
    return _handled(line) is not None


def _records(fleet: Fleet) -> list[dict[str, Any]]:
    return [record for lines in fleet.lines for line in lines
            if (record := _handled(line)) is not None]


def _records_of(fleet: Fleet, index: int) -> list[dict[str, Any]]:
    return [r for line in fleet.lines[index] if (r := _handled(line)) is not None]


def _agent_line(fleet: Fleet, index: int, key: str) -> Any:
    found = [obj[key] for obj in fleet.json_lines(index) if key in obj]
    assert len(found) == 1, f"{key}: {found!r}"
    return found[0]


def _assert_exactly_once(records: list[dict[str, Any]], expected: set[str]) -> None:
    counts = Counter(r["id"] for r in records)
    twice = sorted(i for i, c in counts.items() if c > 1)
    missing = sorted(expected - set(counts))
    extra = sorted(set(counts) - expected)
    assert not twice, f"{len(twice)} signals handled more than once, e.g. {twice[:5]}"
    assert not missing, f"{len(missing)} signals never handled, e.g. {missing[:5]}"
    assert not extra, f"{len(extra)} unknown signals handled, e.g. {extra[:5]}"


def _assert_all_archived(mailbox: Mailbox, expected: set[str]) -> None:
    state = census(mailbox.root)
    assert state.inputs == [], f"{len(state.inputs)} left in inputs/: {state.inputs[:5]}"
    assert state.claims == [], f"claims left: {state.claims[:5]}"
    assert state.rejected == [], f"rejected: {state.rejected[:5]}"
    assert state.tmp == [], f"{len(state.tmp)} left in tmp/"
    assert state.processed_hidden == [], f"temporaries in processed/: {state.processed_hidden}"
    names = {f"signal.{i}.yaml" for i in expected}
    assert set(state.processed) == names, (
        f"processed/ holds {len(state.processed)} files, {len(names)} expected; "
        f"missing e.g. {sorted(names - set(state.processed))[:3]}, "
        f"extra e.g. {sorted(set(state.processed) - names)[:3]}")
    bad = unarchived(mailbox.processed, state.processed)
    assert not bad, f"{len(bad)} processed files without their handling_metadata: {bad[:3]}"


# -- 1. stress -----------------------------------------------------------------------------


@dataclass(frozen=True)
class Size:
    consumers: int
    writers: int
    per_writer: int
    burst: int
    deadline: float

    @property
    def total(self) -> int:
        return self.writers * self.per_writer + self.burst


# The full size is the acceptance (about 2 minutes on 2 CPUs; CI runs it with
# INTERLOCK_STRESS=full after `make test`): its burst alone overflows a default inotify
# queue (16384 events) three times over, and the frozen consumer's queue overflows for
# sure (see below). The default is what the suite can afford (a few seconds); the overflow
# path is then covered by test_inotify_overflow_is_noticed_and_rescanned.
FULL_SIZE = Size(consumers=4, writers=8, per_writer=2000, burst=50_000, deadline=400.0)
SMALL_SIZE = Size(consumers=4, writers=3, per_writer=200, burst=1500, deadline=150.0)


@pytest.mark.stress
@pytest.mark.timeout(900 if FULL else 300)
def test_stress_every_signal_exactly_once(tmp_path: Path) -> None:
    """The CLI consumers, plus one more on the Consumer API (it reports its stats). That
    one is frozen (SIGSTOP) while the writers run and until its kernel inotify queue must
    have overflowed: each signal puts an IN_MOVED_TO there when it arrives and an
    IN_MOVED_FROM (the claim) when another consumer handles it (reads are not watched);
    then it resumes and joins in. So the overflow path is taken for sure,
    under load, whatever the machine's speed."""
    size = FULL_SIZE if FULL else SMALL_SIZE
    session = tmp_path / "session"
    session.mkdir()
    mailbox = Mailbox(session)
    out = tmp_path / "out"
    out.mkdir()
    # Each consumer has a name, so that a warm-up signal can be aimed at it, and the
    # metadata says who handled what.
    argvs = [cli_argv("mailbox", "consume", str(session), "--json", "--scan-interval", "0.5",
                      "--as", f"c{i}") for i in range(size.consumers)]
    frozen = size.consumers  # the API consumer's index
    argvs.append(signal_agent_argv("consume", str(session), "--scan-interval", "0.5",
                                   "--as", f"c{frozen}"))
    with Fleet(argvs, out, name="consumer", counts=_is_handled) as consumers:
        # A consumer is watching once it has handled the warm-up signal aimed at it.
        warmups = [make_signal("INFO", f"c{i}", "warm-up", now=datetime.now(UTC))
                   for i in range(len(argvs))]
        for warmup in warmups:
            mailbox.post(warmup)
        consumers.wait_for(lambda: consumers.counted >= len(warmups), 60,
                           "consumers handling their warm-up signals")
        for index, warmup in enumerate(warmups):
            assert [r["id"] for r in _records_of(consumers, index)] == [warmup.id], \
                consumers.summary()
        frozen_pid = consumers.children[frozen].pid
        os.kill(frozen_pid, signal.SIGSTOP)
        wait_stopped(frozen_pid)

        writer_argvs = [signal_agent_argv("post_signals", str(session),
                                          str(out / f"writer-{i}.jsonl"),
                                          str(size.per_writer), "--tag", f"w{i}")
                        for i in range(size.writers)]
        writer_argvs.append(signal_agent_argv("post_signals", str(session),
                                              str(out / "burst.jsonl"), str(size.burst),
                                              "--tag", "burst", "--burst"))
        expected = size.total + len(warmups)
        limit = max_queued_events() + 100
        overflow_sure = False
        with Fleet(writer_argvs, out, name="writer", stdin=subprocess.PIPE,
                   counts=lambda line: line.startswith("done")) as writers:
            writers.wait_for(lambda: all(lines == ["ready"] for lines in writers.lines), 120,
                             "writers ready (the burst staged in tmp/)")
            start = time.monotonic()
            writers.send_all("go\n")
            resumed = False
            while consumers.counted < expected:  # both fleets' pipes must keep flowing
                if time.monotonic() - start > size.deadline:
                    raise TimeoutError(f"{consumers.counted}/{expected} handled after "
                                       f"{size.deadline}s; {consumers.summary()}; "
                                       f"{writers.summary()}")
                consumers.pump(0.05)
                writers.pump(0)
                handled = consumers.counted - len(warmups)
                if (not resumed and writers.counted == len(writer_argvs)
                        and size.total + handled > limit):
                    os.kill(frozen_pid, signal.SIGCONT)
                    resumed = overflow_sure = True
            elapsed = time.monotonic() - start
            if not resumed:
                os.kill(frozen_pid, signal.SIGCONT)
                overflow_sure = 2 * size.total > limit
            assert writers.finish(60) == [0] * len(writer_argvs), writers.summary()
            assert all(not e for e in writers.errors), writers.summary()
        if overflow_sure:
            consumers.wait_for(
                lambda: any(line.startswith('{"overflowed"') for line in consumers.lines[frozen]),
                60,
                "the frozen consumer noticing its inotify queue overflowed")
        codes = consumers.terminate(30)
        assert codes == [130] * size.consumers + [0], consumers.summary()
        assert all(not e for e in consumers.errors), consumers.summary()

    posted: dict[str, dict[str, Any]] = {}
    for records_file in sorted(out.glob("*.jsonl")):
        for line in records_file.read_text(encoding="utf-8").splitlines():
            record = json.loads(line)
            posted[record["id"]] = record
    assert len(posted) == size.total
    records = _records(consumers)
    warmup_ids = {w.id for w in warmups}
    _assert_exactly_once(records, set(posted) | warmup_ids)
    wrong = [r for r in records if r["id"] in posted
             and (r["type"], r["message"], r["target"])
             != (posted[r["id"]]["type"], posted[r["id"]]["message"], "ALL")]
    assert not wrong, f"{len(wrong)} signals reported with other contents, e.g. {wrong[:2]}"
    _assert_all_archived(mailbox, set(posted) | warmup_ids)
    sample = sorted(posted)[:: max(1, len(posted) // 50)]
    for signal_id in sample:
        metadata = read_metadata(mailbox.processed / f"signal.{signal_id}.yaml")
        assert metadata is not None and metadata["signal_id"] == signal_id
    by_consumer = Counter(r["handled_by"] for r in records if r["id"] in posted)
    assert len(by_consumer) >= 2, f"one consumer did everything: {by_consumer}"

    stats = _agent_line(consumers, frozen, "stats")
    assert stats["handled"] == len(_records_of(consumers, frozen)), stats
    assert stats["failures"] == 0, stats
    if overflow_sure:
        assert stats["overflows"] >= 1, f"the overflow went unnoticed: {stats}"
    print(f"\nstress {'full' if FULL else 'small'}: {size.total} signals "
          f"({size.writers}x{size.per_writer} + burst {size.burst}) in {elapsed:.1f}s; "
          f"per consumer {dict(sorted(by_consumer.items()))}; API consumer stats {stats}")


# -- 2. crash between peek and claim --------------------------------------------------------


def _run_agent(*args: str) -> tuple[list[dict[str, Any]], int]:
    with Child(signal_agent_argv("consume", *args)) as child:
        out, err, code = child.communicate(DEADLINE)
    assert not err, err.decode()
    return [json.loads(line) for line in out.decode().splitlines()], code


def test_crash_between_peek_and_claim_leaves_the_signal_in_inputs(tmp_path: Path,
                                                                  cli: Any) -> None:
    mailbox = Mailbox(tmp_path)
    [posted] = _post(mailbox, 1, "crash")
    lines, code = _run_agent(str(tmp_path), "--once", "--crash", "claim")
    assert code == -signal.SIGKILL
    assert [list(obj) for obj in lines] == [["ready"]]  # died before handling anything
    state = census(mailbox.root)
    assert state.inputs == [posted.file_name] and state.claims == [] and state.processed == []

    result = cli("mailbox", "consume", str(tmp_path), "--json", "--count", "1",
                 timeout=DEADLINE)
    assert result.returncode == 0, result.stderr
    assert [json.loads(line)["id"] for line in result.stdout.splitlines()] == [posted.id]
    _assert_all_archived(mailbox, {posted.id})


# -- 3. crash between claim and metadata; between metadata and dropping the claim ------------


def _restart(mailbox: Mailbox, ledger: Ledger) -> tuple[Consumer, list[Handled]]:
    """A new consumer, in this process, delivering idempotently by id through ``ledger``."""
    handled: list[Handled] = []

    def deliver(signal_: Signal, handled_at: str) -> str:
        return "applied" if ledger.apply(signal_.id) else "already applied"

    consumer = Consumer(watch=False, on_handled=handled.append)
    consumer.add(Subscription(mailbox, deliver))
    consumer.run_once()
    return consumer, handled


def test_crash_between_claim_and_metadata_is_adopted_once(tmp_path: Path) -> None:
    mailbox = Mailbox(tmp_path)
    ledger = Ledger(tmp_path / "ledger")
    [posted] = _post(mailbox, 1, "crash")
    lines, code = _run_agent(str(tmp_path), "--once", "--crash", "finish",
                             "--ledger", str(ledger.path))
    assert code == -signal.SIGKILL  # reaped: its pid is gone, so its claims are adoptable
    dead_owner = lines[0]["ready"]
    assert len(lines) == 1
    state = census(mailbox.root)
    assert state.claims == [f"{dead_owner}/{posted.file_name}"]
    assert state.processed == [] and state.inputs == []
    assert ledger.ids() == [posted.id]  # delivered before the crash

    consumer, handled = _restart(mailbox, ledger)
    assert consumer.stats.adopted == 1 and consumer.stats.handled == 1, consumer.stats
    assert [h.signal.id for h in handled] == [posted.id]
    assert handled[0].action_taken == "already applied"
    assert ledger.ids() == [posted.id]
    _assert_all_archived(mailbox, {posted.id})
    metadata = read_metadata(mailbox.processed / posted.file_name)
    assert metadata is not None and metadata["consumer"] == consumer.owner
    assert not (mailbox.claims / dead_owner).exists()

    consumer, handled = _restart(mailbox, ledger)  # and a further restart does nothing
    assert handled == [] and consumer.stats.adopted == 0


def test_crash_after_metadata_before_dropping_the_claim(tmp_path: Path) -> None:
    mailbox = Mailbox(tmp_path)
    ledger = Ledger(tmp_path / "ledger")
    [posted] = _post(mailbox, 1, "crash")
    lines, code = _run_agent(str(tmp_path), "--once", "--crash", "drop",
                             "--ledger", str(ledger.path))
    assert code == -signal.SIGKILL
    dead_owner = lines[0]["ready"]
    assert len(lines) == 1  # died inside finish(): on_handled never ran, nothing printed
    state = census(mailbox.root)
    assert state.claims == [f"{dead_owner}/{posted.file_name}"]
    assert state.processed == [posted.file_name]
    before = (mailbox.processed / posted.file_name).read_bytes()

    consumer, handled = _restart(mailbox, ledger)
    assert consumer.stats.adopted == 1, consumer.stats
    assert consumer.stats.handled == 0 and handled == []  # not delivered nor reported again
    assert ledger.ids() == [posted.id]
    _assert_all_archived(mailbox, {posted.id})
    assert (mailbox.processed / posted.file_name).read_bytes() == before  # first metadata
    metadata = read_metadata(mailbox.processed / posted.file_name)
    assert metadata is not None and metadata["consumer"] == dead_owner


# -- 4. several consumers, one mailbox ------------------------------------------------------


def test_three_cli_consumers_share_a_mailbox(tmp_path: Path) -> None:
    mailbox = Mailbox(tmp_path)
    argvs = [cli_argv("mailbox", "consume", str(tmp_path), "--json", "--scan-interval", "0.5")
             for _ in range(3)]
    out = tmp_path / "out"
    out.mkdir()
    with Fleet(argvs, out, name="consumer", counts=_is_handled) as consumers:
        posted = _post(mailbox, 300, "shared")
        consumers.wait_for(lambda: consumers.counted >= len(posted), 60,
                           "300 signals handled")
        assert consumers.terminate(DEADLINE) == [130] * 3, consumers.summary()
    assert all(not e for e in consumers.errors), consumers.summary()
    records = _records(consumers)
    _assert_exactly_once(records, {s.id for s in posted})
    by_id = {s.id: s for s in posted}
    assert all(r["message"] == by_id[r["id"]].message and r["handled_by"] == "interlock"
               for r in records)
    _assert_all_archived(mailbox, set(by_id))


# -- 5. overflow ----------------------------------------------------------------------------


def test_inotify_overflow_is_noticed_and_rescanned(tmp_path: Path) -> None:
    """The consumer is frozen (SIGSTOP: its watchdog thread cannot drain the kernel queue;
    a blocked delivery would not do, watchdog reads on its own thread into an unbounded
    queue). Signals posted now are announced; then more events than the queue holds (a
    burst of hidden files created and removed in inputs/, which no consumer takes) make
    the kernel drop the rest and queue an overflow; signals posted after that are never
    announced. Periodic scans are off (an hour apart), so only the overflow's rescan can
    find them. (Watchdog 6.0.0 drops the kernel's IN_Q_OVERFLOW without a word: there,
    this test fails.)"""
    limit = max_queued_events()
    if limit > 200_000:
        pytest.skip(f"fs.inotify.max_queued_events is {limit}: too many events to overflow")
    mailbox = Mailbox(tmp_path)
    out = tmp_path / "out"
    out.mkdir()
    argv = signal_agent_argv("consume", str(tmp_path), "--scan-interval", "3600", "--no-fsync")
    with Fleet([argv], out, name="consumer", counts=_is_handled) as fleet:
        fleet.wait_for(lambda: bool(fleet.lines[0]), DEADLINE, "the consumer ready")
        pid = fleet.children[0].pid
        os.kill(pid, signal.SIGSTOP)
        wait_stopped(pid)
        announced = _post(mailbox, 50, "before the overflow")
        # Each hidden file: IN_CREATE, IN_CLOSE_WRITE, then IN_DELETE (at least two).
        for n in range(limit // 2 + 100):
            noise = mailbox.inputs / f".noise-{n}"
            noise.touch()
            noise.unlink()
        dropped = _post(mailbox, 50, "after the overflow")
        os.kill(pid, signal.SIGCONT)
        posted = announced + dropped
        fleet.wait_for(lambda: fleet.counted >= len(posted), 60,
                       "every signal handled after the overflow")
        assert fleet.terminate(DEADLINE) == [0], fleet.summary()
    assert not fleet.errors[0], fleet.summary()
    stats = _agent_line(fleet, 0, "stats")
    assert stats["overflows"] >= 1, f"the overflow went unnoticed: {stats}"
    assert stats["handled"] == len(posted), stats
    _assert_exactly_once(_records(fleet), {s.id for s in posted})
    _assert_all_archived(mailbox, {s.id for s in posted})


# -- 6. a signal no consumer here wants ----------------------------------------------------


class _CountingMailbox(Mailbox):
    """Counts how often the consumer peeks at each name; ``busy`` is set at the 10th peek
    of one name."""

    def __init__(self, session_dir: Path) -> None:
        super().__init__(session_dir)
        self.peeks: Counter[str] = Counter()
        self.seen = threading.Event()
        self.busy = threading.Event()

    def peek(self, name: str, limit: int) -> bytes | None:
        self.peeks[name] += 1
        self.seen.set()
        if self.peeks[name] >= 10:
            self.busy.set()
        return super().peek(name, limit)


QUIET = 1.0  # how long an idle consumer is watched for peeks: the measurement, not a pace


def test_a_signal_left_in_inputs_is_not_peeked_over_and_over(tmp_path: Path) -> None:
    """A signal for another consumer stays in inputs/. Reading it (the peek) makes inotify
    report IN_CLOSE_NOWRITE on inputs/; taken as a hint, that event brings the consumer
    back to the same file, whose reading makes another event: a busy loop (a CPU core) for
    as long as the signal waits there. Once looked at on its arrival, it must be left
    alone until the next scan (an hour away here)."""
    mailbox = _CountingMailbox(tmp_path)
    consumer = Consumer(scan_interval=3600)
    consumer.add(Subscription(mailbox, lambda s, at: "ok"))
    with consumer:  # watching once started
        [unwanted] = _post(mailbox, 1, "for another consumer", target="Ralph-Executor")
        assert mailbox.seen.wait(DEADLINE), "the signal's arrival went unnoticed"
        busy = mailbox.busy.wait(QUIET)
    assert consumer.error is None
    assert census(mailbox.root).inputs == [unwanted.file_name]
    assert not busy, (f"the unwanted signal was peeked {mailbox.peeks[unwanted.file_name]} "
                      f"times within {QUIET}s of its arrival: each read wakes the consumer")
