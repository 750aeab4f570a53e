"""The poller beside a real session (runner, SQLite store, SQLite inbox): the idle gate
against a real invoked agent, exactly-once offers, the INFO shape for Ralph, opt-in.
The poller's timers run on a ManualClock (no sleeping); waits are on the runner."""

from __future__ import annotations

import asyncio
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from interlock.machines.bindings import Call
from interlock.runtime.agents.invoke import process_handlers
from interlock.runtime.config.inbox import PollerConfig
from interlock.runtime.engine.clock import ManualClock
from interlock.runtime.engine.runner import Runner
from interlock.runtime.inbox.deliveries import InboxCount, inbox_count
from interlock.runtime.inbox.model import Message, MessageLease, Status
from interlock.runtime.inbox.session import (
    SessionInbox,
    attach_inbox,
    info_event,
    mark_delivered,
)
from interlock.runtime.inbox.sqlite import SqliteInbox
from interlock.runtime.store import Store, open_store

INTERVAL = 30.0
WAITER = """\
import pathlib, sys, time
gate = pathlib.Path(sys.argv[1])
deadline = time.monotonic() + 60
while not gate.exists() and time.monotonic() < deadline:
    time.sleep(0.01)
"""


class RecordingInbox(SqliteInbox):
    """A real SQLite inbox that records the adapter calls made to it."""

    def __init__(self, path: Path, clock: ManualClock) -> None:
        super().__init__(path, clock)
        self.calls: list[str] = []

    def fetch_queued(self, limit: int = 100) -> list[Message]:
        self.calls.append("fetch_queued")
        return super().fetch_queued(limit)

    def claim(self, message_id: str, owner: str, lease_seconds: float = 300.0) -> Any:
        self.calls.append("claim")
        return super().claim(message_id, owner, lease_seconds)


def _keep(call: Call) -> None:
    call.context["got"].append(call.data.get("id") or call.data.get("signal_id"))


async def _until(check: Callable[[], bool], what: str, timeout: float = 30.0) -> None:
    """Wait (bounded) on the runner or its agent process, not on time."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not check():
        if loop.time() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.01)


def _taken(store: Store, event: str = "inbox.message") -> list[dict[str, Any]]:
    return [dict(e.data or {}) for e in store.journal("s1", -1)
            if e.event == event and e.kind == "event"]


def _inbox(runner: Runner, tmp_path: Path, clock: ManualClock,
           **options: Any) -> tuple[SessionInbox, RecordingInbox]:
    adapter = RecordingInbox(tmp_path / "inbox.db", clock)
    inbox = SessionInbox(runner, open_store(None, tmp_path),
                         PollerConfig(interval=INTERVAL, lease=600), adapter=adapter,
                         clock=clock, owner="host:1:test", **options)
    return inbox, adapter


def _advance_to_next(inbox: SessionInbox, clock: ManualClock) -> float:
    deadline = inbox.poller.next_deadline()
    assert deadline is not None
    waited = deadline - clock.now()
    clock.advance(waited)
    inbox.poller.tick()
    return waited


def test_idle_gate_no_fetch_while_an_agent_is_invoked(tmp_path: Path) -> None:
    gate = tmp_path / "agent-may-exit"
    (tmp_path / "wait.py").write_text(WAITER)
    spec = tmp_path / "gate.yaml"
    spec.write_text(f"""\
machine: inbox_gate
initial: working
context:
  got: {{type: list, default: []}}
states:
  working:
    invoke:
      id: work
      command: [{sys.executable!r}, {str(tmp_path / 'wait.py')!r}, {str(gate)!r}]
    on:
      done.invoke.work: idle
      inbox.message: {{actions: [keep]}}
  idle:
    on:
      inbox.message: {{actions: [keep]}}
      finish: done
  done:
    type: final
""")
    clock = ManualClock()
    store = open_store(None, tmp_path)

    async def main() -> None:
        runner, _ = await asyncio.to_thread(
            Runner.open, store, spec.read_text(), str(spec), session_id="s1",
            bindings={"keep": _keep}, folder=tmp_path / "session",
            invokers=process_handlers())
        stop = asyncio.Event()
        running = asyncio.create_task(runner.run(stop))
        inbox, adapter = _inbox(runner, tmp_path, clock)
        message_id = adapter.post("review", "alice", "PR 7")
        try:
            await asyncio.to_thread(inbox.poller.start)
            await _until(lambda: len(runner.invocations_in_flight()) == 1, "the agent to start")
            for _ in range(5):  # polls fall due while the agent works: no adapter call
                await asyncio.to_thread(_advance_to_next, inbox, clock)
            assert "fetch_queued" not in adapter.calls and "claim" not in adapter.calls
            assert inbox.poller.state == ("enabled", "healthy", "waiting")
            assert _taken(store) == []
            gate.touch()  # the invocation ends between two polls
            await _until(lambda: runner.active == ("idle",), "done.invoke.work")
            assert runner.invocations_in_flight() == [] and not runner.working()
            ended = clock.now()
            clock.advance(3.0)
            waited = await asyncio.to_thread(_advance_to_next, inbox, clock)
            assert waited <= INTERVAL and clock.now() - ended <= INTERVAL
            assert adapter.calls == ["fetch_queued", "claim"]
            await _until(lambda: bool(_taken(store)), "inbox.message in the journal")
            taken = _taken(store)
            assert [t["id"] for t in taken] == [message_id]
            assert taken[0]["type"] == "review" and taken[0]["from"] == "alice"
            assert taken[0]["lease_token"] and taken[0]["status"] == "in_progress"
            assert runner.session.context["got"] == [message_id]
            assert adapter.get(message_id).status is Status.IN_PROGRESS  # never auto-acked
            assert inbox_count(store, "s1") == InboxCount(1, 0)
            # the session's own binding finishes it, fenced by the token it was given
            done = mark_delivered(adapter, taken[0], "done", reason="handled")
            assert done.status is Status.DONE
        finally:
            stop.set()
            await running
            await inbox.stop()
            runner.close()

    try:
        asyncio.run(main())
    finally:
        store.close()


LISTENER = """\
machine: listener
initial: listening
context:
  got: {type: list, default: []}
states:
  listening:
    on:
      inbox.message: {actions: [keep]}
      signal.INFO: {actions: [keep]}
      finish: finished
  finished:
    type: final
"""


def _listener(tmp_path: Path, store: Store) -> Runner:
    spec = tmp_path / "listener.yaml"
    spec.write_text(LISTENER)
    runner, _ = Runner.open(store, LISTENER, str(spec), session_id="s1",
                            bindings={"keep": _keep})
    return runner


def test_each_message_offered_once_even_by_a_second_poller(tmp_path: Path) -> None:
    clock = ManualClock()
    store = open_store(None, tmp_path)
    runner = _listener(tmp_path, store)
    try:
        first, adapter = _inbox(runner, tmp_path, clock)
        ids = [adapter.post("t", "alice", str(i)) for i in range(3)]
        first.poller.start()
        _advance_to_next(first, clock)
        assert first.delivered == 3
        # A restarted runner's poller: the leases ran out, the messages are fetchable
        # again, but they were delivered to this session already: never claimed again.
        clock.advance(601)
        second, again = _inbox(runner, tmp_path, clock)
        second.poller.start()
        _advance_to_next(second, clock)
        assert second.delivered == 0 and "claim" not in again.calls
        assert [i.event for i in store.queued_events("s1")] == ["inbox.message"] * 3
        assert inbox_count(store, "s1") == InboxCount(3, 3)
        runner.pump()
        assert sorted(runner.session.context["got"]) == sorted(ids)
        assert inbox_count(store, "s1") == InboxCount(3, 0)
        # the first claim's token is still the current one: the session can finish it
        assert mark_delivered(adapter, _taken(store)[0], Status.DONE).status is Status.DONE
        first.poller.stop()
        second.poller.stop()
        first.poller.adapter.close()
        second.poller.adapter.close()
        first.store.close()
        second.store.close()
    finally:
        runner.close()
        store.close()


def test_info_shape_for_a_ralph_session(tmp_path: Path) -> None:
    clock = ManualClock()
    store = open_store(None, tmp_path)
    runner = _listener(tmp_path, store)
    busy = [True]
    try:
        inbox, adapter = _inbox(runner, tmp_path, clock, shape=info_event,
                                is_idle=lambda: not busy[0])
        message_id = adapter.post("question", "bob", "Is staging back?",
                                  correlation_id="c-9")
        inbox.poller.start()
        _advance_to_next(inbox, clock)
        assert adapter.calls == []  # a subagent in flight: no poll
        busy[0] = False
        _advance_to_next(inbox, clock)
        runner.pump()
        infos = _taken(store, "signal.INFO")
        assert len(infos) == 1
        assert infos[0]["target"] == "ALL" and infos[0]["signal_id"] == f"inbox-{message_id}"
        assert infos[0]["message"] == ("[inbox question from bob] Is staging back? "
                                       "(correlation_id: c-9)")
        assert infos[0]["inbox"]["id"] == message_id
        assert inbox_count(store, "s1") == InboxCount(1, 0)
        assert mark_delivered(adapter, infos[0], "acked").status is Status.ACKED
        inbox.poller.stop()
        inbox.poller.adapter.close()
        inbox.store.close()
    finally:
        runner.close()
        store.close()


def test_nothing_claimed_while_the_session_does_not_listen(tmp_path: Path) -> None:
    clock = ManualClock()
    store = open_store(None, tmp_path)
    runner = _listener(tmp_path, store)
    try:
        inbox, adapter = _inbox(runner, tmp_path, clock)
        adapter.post("t", "alice")
        runner.send("finish")  # final: takes no inbox.message
        inbox.poller.start()
        _advance_to_next(inbox, clock)
        assert adapter.calls == [] and inbox_count(store, "s1") is None
        inbox.poller.stop()
        inbox.poller.adapter.close()
        inbox.store.close()
    finally:
        runner.close()
        store.close()


def test_opt_in_and_bad_config(tmp_path: Path) -> None:
    store = open_store(None, tmp_path)
    runner = _listener(tmp_path, store)
    try:
        assert attach_inbox(runner, None, tmp_path) is None  # no interlock.yaml
        (tmp_path / "interlock.yaml").write_text("agents: {}\n")
        assert attach_inbox(runner, None, tmp_path) is None  # no inbox: section
        (tmp_path / "interlock.yaml").write_text("inbox:\n  store: inbox.db\n")
        attached = attach_inbox(runner, None, tmp_path)
        assert attached is not None and attached.event == "inbox.message"
        asyncio.run(attached.stop())
        (tmp_path / "interlock.yaml").write_text("inbox:\n  interval: soon\n")
        from interlock.machines.diagnostics import SpecError

        with pytest.raises(SpecError) as raised:
            attach_inbox(runner, None, tmp_path)
        assert "inbox.interval" in str(raised.value)
        assert "interlock.yaml:2" in str(raised.value)
    finally:
        runner.close()
        store.close()


def test_info_event_without_refs() -> None:
    message = Message("a" * 32, "note", "carol", Status.IN_PROGRESS, body="hi")
    event, data = info_event(message, MessageLease("tok", 1.0))
    assert event == "signal.INFO" and data["message"] == "[inbox note from carol] hi"
    assert data["inbox"]["lease_token"] == "tok"
