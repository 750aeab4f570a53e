"""Runner: one owner per session, resume from the store, journaled steps, bad input."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from interlock.machines import Call
from interlock.runtime.engine.clock import ManualClock
from interlock.runtime.engine.runner import Runner, SessionBusy, SpecChanged, owner_is_dead
from interlock.runtime.engine.session import SessionError
from interlock.runtime.store import SessionNotFound
from interlock.runtime.store.sqlite import SqliteStore

DOOR = """
machine: door
initial: closed
context:
  opened: {type: int, default: 0}
states:
  closed:
    on: {open: {target: opened, actions: [count]}}
  opened:
    after: {30s: closed}
    on: {close: closed, lock: locked}
  locked: {type: final}
"""


def count(call: Call) -> None:
    call.context["opened"] += 1


BINDINGS = {"count": count}


@pytest.fixture
def store(tmp_path: Path) -> SqliteStore:
    s = SqliteStore(tmp_path / "state.db")
    yield s  # type: ignore[misc]
    s.close()


def open_door(store: SqliteStore, clock: ManualClock, **kwargs: object) -> Runner:
    runner, _ = Runner.open(store, DOOR, "door.yaml", session_id="d1", bindings=BINDINGS,
                            clock=clock, owner=str(kwargs.pop("owner", "me:1:a")),
                            **kwargs)  # type: ignore[arg-type]
    return runner


def test_steps_are_journaled_and_the_inbox_is_consumed(store: SqliteStore) -> None:
    clock = ManualClock()
    runner = open_door(store, clock)
    store.enqueue("d1", "open", {}, clock.now())
    store.enqueue("d1", "knock", {"who": "x"}, clock.now())  # not accepted in `opened`
    steps = runner.pump()
    assert [(s.kind, s.event) for s in steps] == [("event", "open"), ("rejected", "knock")]
    assert store.queued_events("d1") == []
    kinds = [(e.kind, e.event) for e in store.journal("d1", after_seq=-1)]
    assert kinds == [("created", None), ("event", "open"), ("rejected", "knock")]
    clock.advance(30)
    assert [s.event for s in runner.pump()] == ["after.opened.0"]
    assert store.get("d1").snapshot["configuration"] == ["closed"]


def test_a_second_runner_is_refused_while_the_first_holds_the_lease(store: SqliteStore) -> None:
    clock = ManualClock()
    first = open_door(store, clock)
    with pytest.raises(SessionBusy, match="one runner at a time"):
        open_door(store, clock, owner="other:2:b")
    first.close()
    second = open_door(store, clock, owner="other:2:b")
    assert second.session.active == ("closed",)


def test_an_expired_lease_is_taken_over_and_the_old_runner_is_fenced(store: SqliteStore) -> None:
    clock = ManualClock()
    first = open_door(store, clock)
    clock.advance(31)  # first stopped renewing: its 30 s lease has expired
    second = open_door(store, clock, owner="other:2:b")
    second.send("open")
    with pytest.raises(SessionBusy):
        first.send("open")
    assert store.get("d1").snapshot["context"]["opened"] == 1


def test_a_dead_local_owner_is_taken_over_at_once(store: SqliteStore) -> None:
    clock = ManualClock()
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True).stdout.strip()
    import socket

    owner = f"{socket.gethostname()}:{dead}:zz"
    assert owner_is_dead(owner)
    open_door(store, clock, owner=owner)  # never closed: as if SIGKILLed
    taken = open_door(store, clock, owner="me:1:a")
    assert taken.lease.token >= 2


def test_resume_restores_state_without_rerunning_entry(store: SqliteStore) -> None:
    clock = ManualClock()
    runner = open_door(store, clock)
    runner.send("open")
    runner.close()
    again, opened = Runner.open(store, None, "door.yaml", session_id="d1", bindings=BINDINGS,
                                clock=clock)
    assert not opened.created and opened.resumed_from_seq == 1
    assert again.session.active == ("opened",)
    assert again.session.context["opened"] == 1
    assert [t.event for t in again.session.timers] == ["after.opened.0"]


def test_a_changed_spec_is_refused(store: SqliteStore) -> None:
    clock = ManualClock()
    open_door(store, clock).close()
    with pytest.raises(SpecChanged, match="changed since session 'd1' started"):
        Runner.open(store, DOOR.replace("30s", "45s"), "door.yaml", session_id="d1",
                    bindings=BINDINGS, clock=clock)


def test_migrate_moves_a_session_to_the_edited_spec(store: SqliteStore) -> None:
    clock = ManualClock()
    runner = open_door(store, clock)
    runner.send("open")
    runner.close()
    edited = DOOR.replace("lock: locked", "lock: locked, jam: closed")
    migrated, _ = Runner.open(store, edited, "door.yaml", session_id="d1", bindings=BINDINGS,
                              clock=clock, migrate=True)
    assert migrated.session.active == ("opened",)
    assert migrated.send("jam").after == ("closed",)
    assert store.get("d1").spec_text == edited
    assert "migrated" in [e.kind for e in store.journal("d1")]


def test_migrate_refuses_a_spec_without_the_active_state(store: SqliteStore) -> None:
    clock = ManualClock()
    runner = open_door(store, clock)
    runner.send("open")
    runner.close()
    renamed = DOOR.replace("opened", "ajar")
    with pytest.raises(SessionError, match=r"cannot migrate session 'd1'.*opened"):
        Runner.open(store, renamed, "door.yaml", session_id="d1", bindings=BINDINGS,
                    clock=clock, migrate=True)
    assert store.get("d1").spec_text == DOOR
    assert store.holder("d1") is None  # the refused migration gave its lease back


def test_resuming_an_unknown_session_is_a_clear_error(store: SqliteStore) -> None:
    with pytest.raises(SessionNotFound, match="no session 'nope'"):
        Runner.open(store, None, "x.yaml", session_id="nope")


ASYNC_DOOR = DOOR.replace("open: {target: opened, actions: [count]}",
                          "open: {target: opened, guard: may_open, actions: [count]}")


def test_async_guards_and_actions_are_awaited_on_the_runner_loop(store: SqliteStore) -> None:
    import asyncio
    import threading

    seen: dict[str, object] = {}

    async def may_open(call: Call) -> bool:
        await asyncio.sleep(0)
        seen["guard_loop"] = asyncio.get_running_loop()
        return True

    async def count_async(call: Call) -> None:
        await asyncio.sleep(0)
        seen["action_thread"] = threading.get_ident()
        call.context["opened"] += 1

    clock = ManualClock()
    runner, _ = Runner.open(store, ASYNC_DOOR, "door.yaml", session_id="a1", clock=clock,
                            bindings={"may_open": may_open, "count": count_async})
    store.enqueue("a1", "open", {}, clock.now())
    store.enqueue("a1", "lock", {}, clock.now())

    async def main() -> None:
        seen["runner_loop"] = asyncio.get_running_loop()
        await runner.run()

    asyncio.run(main())
    assert runner.session.is_final and runner.session.context["opened"] == 1
    assert seen["guard_loop"] is seen["runner_loop"]
    assert seen["action_thread"] == threading.get_ident()  # the loop's thread, not a worker


def test_async_bindings_also_work_without_a_running_loop(store: SqliteStore) -> None:
    async def may_open(call: Call) -> bool:
        return True

    runner, _ = Runner.open(store, ASYNC_DOOR, "door.yaml", session_id="a2",
                            clock=ManualClock(), bindings={"may_open": may_open, "count": count})
    assert runner.send("open").after == ("opened",)


def test_the_lease_is_renewed_while_a_long_action_runs(store: SqliteStore) -> None:
    import asyncio
    import threading

    started, go = threading.Event(), threading.Event()

    def slow_count(call: Call) -> None:  # an action that works for "minutes"
        started.set()
        assert go.wait(10)
        call.context["opened"] += 1

    clock = ManualClock()
    runner, _ = Runner.open(store, DOOR, "door.yaml", session_id="l1", clock=clock, ttl=0.03,
                            bindings={"count": slow_count}, owner="me:1:a")
    first_expiry = runner.lease.expires_at
    store.enqueue("l1", "open", {}, clock.now())

    async def main() -> None:
        task = asyncio.create_task(runner.run())
        await asyncio.to_thread(started.wait, 10)
        clock.advance(0.025)  # most of the 30 ms lease is gone, the action still runs
        for _ in range(500):  # the renewer wakes every ttl/3 of real time
            holder = store.holder("l1")
            if holder is not None and holder.expires_at > first_expiry:
                break
            await asyncio.sleep(0.01)
        else:
            raise AssertionError("the lease was not renewed during the action")
        clock.advance(0.02)  # past the first expiry: only the renewal keeps it
        assert store.acquire("l1", "other:2:b", 0.03, clock.now()) is None
        go.set()
        store.enqueue("l1", "lock", {}, clock.now())
        await task

    asyncio.run(main())
    assert runner.session.is_final and runner.session.context["opened"] == 1
