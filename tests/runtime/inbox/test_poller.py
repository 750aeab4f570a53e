"""The poller (specs/inbox_poller.yaml run in memory) on a ManualClock: opt-in, the idle
gate, backoff with full jitter, degraded/recovered once per outage, dedup, settings."""

from __future__ import annotations

import asyncio
import logging
import random
from pathlib import Path
from typing import Any

import pytest

from interlock.runtime.config.inbox import PollerConfig
from interlock.runtime.engine.clock import ManualClock, SystemClock
from interlock.runtime.inbox import api
from interlock.runtime.inbox.model import InboxUnavailable, Message, Status
from interlock.runtime.inbox.poller import InboxPoller, backoff_bound
from interlock.runtime.inbox.sqlite import SqliteInbox

INTERVAL = 30.0


class RecordingInbox(SqliteInbox):
    """A real SQLite inbox that records the calls made to it and can be taken down."""

    def __init__(self, path: Path, clock: ManualClock) -> None:
        super().__init__(path, clock)
        self.calls: list[str] = []
        self.down = False
        self.claims_fail = False

    def _check(self, name: str) -> None:
        self.calls.append(name)
        if self.down:
            raise InboxUnavailable("cannot reach the inbox: connection refused")

    def fetch_queued(self, limit: int = 100) -> list[Message]:
        self._check("fetch_queued")
        return super().fetch_queued(limit)

    def claim(self, message_id: str, owner: str, lease_seconds: float = 300.0) -> Any:
        self._check("claim")
        if self.claims_fail:
            raise InboxUnavailable("claim timed out")
        return super().claim(message_id, owner, lease_seconds)


class Notices(logging.Handler):
    def __init__(self) -> None:
        super().__init__()
        self.records: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record.getMessage())

    def count(self, word: str) -> int:
        return sum(word in r for r in self.records)


@pytest.fixture
def clock() -> ManualClock:
    return ManualClock()


@pytest.fixture
def inbox(tmp_path: Path, clock: ManualClock) -> RecordingInbox:
    return RecordingInbox(tmp_path / "inbox.db", clock)


class Harness:
    def __init__(self, inbox: RecordingInbox, clock: ManualClock, **config: Any) -> None:
        self.busy = False
        self.delivered: list[Message] = []
        self.counts: list[int] = []
        self.notices = Notices()
        logger = logging.getLogger(f"test.inbox.{id(self)}")
        logger.setLevel(logging.DEBUG)
        logger.addHandler(self.notices)
        logger.propagate = False
        self.clock = clock
        self.poller = InboxPoller(
            inbox, clock=clock, is_idle=lambda: not self.busy, deliver=self.delivered.append,
            config=PollerConfig(interval=INTERVAL, backoff_base=1, backoff_max=60, lease=60,
                                **config),
            owner="host:1:test", rng=random.Random(7), logger=logger,
            on_count=self.counts.append)
        self.poller.start()

    def advance_to_next(self) -> float:
        """Move the clock to the next deadline and tick; the delay it waited."""
        deadline = self.poller.next_deadline()
        assert deadline is not None
        waited = deadline - self.clock.now()
        self.clock.advance(waited)
        self.poller.tick()
        return waited


def test_opt_in_off_makes_no_call(inbox: RecordingInbox, clock: ManualClock) -> None:
    inbox.post("t", "alice")
    h = Harness(inbox, clock, enabled=False)
    assert h.poller.state == ("disabled",) and h.poller.next_deadline() is None
    clock.advance(INTERVAL * 10)
    h.poller.tick()
    assert inbox.calls == [] and h.delivered == []
    assert h.notices.count("poller off") == 1


def test_idle_gate_no_fetch_while_busy_then_within_one_interval(
        inbox: RecordingInbox, clock: ManualClock) -> None:
    h = Harness(inbox, clock)
    h.busy = True
    message_id = inbox.post("review", "alice", "PR 7")
    for _ in range(5):
        h.advance_to_next()
    assert "fetch_queued" not in inbox.calls and h.delivered == []
    ended = clock.now() + 3.0
    clock.advance(3.0)
    h.busy = False  # the invocation ends between two polls
    waited = h.advance_to_next()
    assert clock.now() - ended <= INTERVAL and waited <= INTERVAL
    assert [m.id for m in h.delivered] == [message_id]
    assert inbox.get(message_id).status is Status.IN_PROGRESS  # claimed, never auto-acked
    assert h.poller.count == 1 and h.counts == [1] and h.poller.pending == 1


def test_backoff_escalates_to_cap_with_full_jitter_and_notices_once(
        inbox: RecordingInbox, clock: ManualClock) -> None:
    h = Harness(inbox, clock)
    inbox.down = True
    h.advance_to_next()  # the first poll fails
    delays = [h.advance_to_next() for _ in range(9)]
    rng = random.Random(7)
    expected = [rng.uniform(0, backoff_bound(n, 1, 60)) for n in range(1, 11)]
    assert delays == pytest.approx(expected[:9])
    assert [backoff_bound(n, 1, 60) for n in range(1, 11)][-4:] == [60, 60, 60, 60]
    assert all(d <= backoff_bound(n, 1, 60) for n, d in enumerate(delays, 1))
    assert h.notices.count("degraded") == 1 and h.notices.count("recovered") == 0
    inbox.down = False
    message_id = inbox.post("t", "alice")
    h.advance_to_next()
    assert [m.id for m in h.delivered] == [message_id]
    assert h.notices.count("degraded") == 1 and h.notices.count("recovered") == 1
    assert h.poller.session is not None
    assert h.poller.session.context["consecutive_failures"] == 0
    assert h.advance_to_next() == INTERVAL  # healthy pace again
    inbox.down = True  # a second outage: one more of each
    h.advance_to_next()
    h.advance_to_next()
    inbox.down = False
    h.advance_to_next()
    assert h.notices.count("degraded") == 2 and h.notices.count("recovered") == 2


def test_fetch_ok_but_claims_failing_keeps_degraded(inbox: RecordingInbox,
                                                    clock: ManualClock) -> None:
    h = Harness(inbox, clock)
    inbox.post("t", "alice")
    inbox.claims_fail = True
    for _ in range(4):
        h.advance_to_next()
    assert h.notices.count("degraded") == 1 and h.notices.count("recovered") == 0
    assert any("degraded" in s for s in h.poller.state)
    inbox.claims_fail = False
    h.advance_to_next()
    assert len(h.delivered) == 1 and h.notices.count("recovered") == 1


def test_two_pollers_never_deliver_a_message_twice(tmp_path: Path, clock: ManualClock) -> None:
    a = Harness(RecordingInbox(tmp_path / "shared.db", clock), clock)
    b = Harness(RecordingInbox(tmp_path / "shared.db", clock), clock)
    posted = {a.poller.adapter.post("t", "alice", str(i)) for i in range(6)}
    clock.advance(INTERVAL)
    a.poller.tick()
    b.poller.tick()
    got = [m.id for m in a.delivered] + [m.id for m in b.delivered]
    assert sorted(got) == sorted(posted)


def test_explicit_ack_and_done_carry_the_lease(inbox: RecordingInbox,
                                               clock: ManualClock) -> None:
    h = Harness(inbox, clock)
    message_id = inbox.post("t", "alice")
    h.advance_to_next()
    h.poller.ack(message_id)
    assert h.poller.pending == 1
    h.poller.done(message_id, reason="replied")
    assert h.poller.pending == 0
    assert [(e.after, e.actor) for e in inbox.journal(message_id)] == [
        (Status.ACKED, "host:1:test"), (Status.DONE, "host:1:test")]
    with pytest.raises(Exception, match="already done"):
        h.poller.failed(message_id)


def test_on_off_interval_follow_the_store(inbox: RecordingInbox, clock: ManualClock) -> None:
    h = Harness(inbox, clock)
    url = f"sqlite://{inbox.path}"
    api.set_enabled(False, store=url)
    h.poller.tick()
    assert h.poller.state == ("disabled",)
    inbox.post("t", "alice")
    clock.advance(INTERVAL * 3)
    h.poller.tick()
    assert "fetch_queued" not in inbox.calls
    assert api.set_interval("5s", store=url) == 5.0
    api.set_enabled(True, store=url)
    h.poller.tick()
    assert h.poller.enabled
    assert h.advance_to_next() == 5.0
    assert len(h.delivered) == 1


def test_run_delivers_on_the_system_clock(tmp_path: Path) -> None:
    inbox = SqliteInbox(tmp_path / "inbox.db")
    inbox.post("t", "alice")
    got: asyncio.Queue[Message] = asyncio.Queue()

    async def main() -> Message:
        poller = InboxPoller(inbox, clock=SystemClock(), is_idle=lambda: True,
                             deliver=got.put_nowait,
                             config=PollerConfig(interval=0.05))
        task = asyncio.create_task(poller.run())
        try:
            return await asyncio.wait_for(got.get(), 10)
        finally:
            poller.stop()
            await asyncio.wait_for(task, 10)

    assert asyncio.run(main()).type == "t"


def test_from_config_opens_the_configured_store(tmp_path: Path) -> None:
    config = PollerConfig(store="x/inbox.db", interval=1)
    delivered: list[Message] = []
    clock = ManualClock()
    poller = InboxPoller.from_config(config, clock=clock, is_idle=lambda: True,
                                     deliver=delivered.append, root=tmp_path)
    message_id = api.post_message("t", "alice", store=str(tmp_path / "x" / "inbox.db"))
    poller.start()
    clock.advance(1)
    poller.tick()
    assert [m.id for m in delivered] == [message_id]
    poller.stop()
    assert poller.state == ("stopped",)
    poller.adapter.close()
