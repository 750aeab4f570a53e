"""Faults become states: rollback, error.execution, failed sessions, dead letters, retry."""

from __future__ import annotations

import asyncio
import copy
import re
import subprocess
import sys
from pathlib import Path

import pytest

from interlock.runtime.engine.clock import ManualClock
from interlock.runtime.engine.faults import UnhandledFault
from interlock.runtime.engine.lifecycle import status_of
from interlock.runtime.engine.runner import Runner, RunOutcome
from interlock.runtime.engine.session import Session, StepFault
from interlock.runtime.store.sqlite import SqliteStore

from support.paths import TESTS

FAULTS = TESTS / "support" / "faults"
sys.path.insert(0, str(FAULTS))
import faults_bindings  # noqa: E402

RECORDER = (FAULTS / "recorder.yaml").read_text(encoding="utf-8")
HANDLED = (FAULTS / "handled.yaml").read_text(encoding="utf-8")
RECORDER_PATH = str(FAULTS / "recorder.yaml")
ONE_LINE = (re.escape(f"action 'record' ({RECORDER_PATH}:11:")
            + r"\d+\) raised ValueError: boom on event 'record'")


@pytest.fixture
def store(tmp_path: Path) -> SqliteStore:
    s = SqliteStore(tmp_path / "state.db")
    yield s  # type: ignore[misc]
    s.close()


def run(runner: Runner) -> RunOutcome:
    """Run until the session fails or finishes (every test queues a way to end)."""
    return asyncio.run(asyncio.wait_for(runner.run(poll=0.01), timeout=20))


def open_recorder(store: SqliteStore, clock: ManualClock, **kwargs: object) -> Runner:
    runner, _ = Runner.open(store, RECORDER, RECORDER_PATH, session_id="r1", clock=clock,
                            **{"bindings": faults_bindings.BINDINGS, **kwargs})  # type: ignore[arg-type]
    return runner


def queue(store: SqliteStore, *numbers: int, then_done: bool = True) -> None:
    for n in numbers:
        store.enqueue("r1", "record", {"n": n}, 1.0)
    if then_done:
        store.enqueue("r1", "done", {}, 1.0)


def test_an_action_raising_on_the_third_event_fails_the_session(store: SqliteStore) -> None:
    clock = ManualClock()
    runner = open_recorder(store, clock)
    queue(store, 1, 2, 3, 4)
    outcome = run(runner)
    assert outcome.kind == "failed" and outcome.failure is not None
    failure = outcome.failure
    assert (failure.binding, failure.error_type, failure.message) == ("record", "ValueError",
                                                                      "boom")
    assert failure.mark is not None and failure.mark.startswith(f"{RECORDER_PATH}:11:")
    assert "\n" not in str(failure)
    assert re.fullmatch(ONE_LINE, str(failure))
    row = store.get("r1")
    assert row.status == "failed" and status_of(store, row, clock.now()).status == "failed"
    assert row.snapshot["context"]["seen"] == [1, 2]  # the failed step was rolled back
    assert store.holder("r1") is None  # the lease is released
    error = [e for e in store.journal("r1") if e.kind == "error"]
    assert len(error) == 1 and error[0].event == "record"
    assert "Traceback" in error[0].data["traceback"] and "boom" in error[0].data["traceback"]
    assert error[0].data["binding"] == "record" and error[0].data["mark"] == failure.mark
    (letter,) = store.dead_letters("r1")
    assert (letter.kind, letter.event, letter.data) == ("event", "record", {"n": 3})
    assert [i.event for i in store.queued_events("r1")] == ["record", "done"]  # n=4 still queued


def test_resume_continues_without_the_failed_event(store: SqliteStore) -> None:
    clock = ManualClock()
    runner = open_recorder(store, clock)
    queue(store, 1, 2, 3, 4)
    assert run(runner).kind == "failed"
    resumed = open_recorder(store, clock)
    assert store.get("r1").status == "active"
    assert run(resumed).kind == "finished"
    row = store.get("r1")
    assert row.status == "finished" and row.snapshot["context"]["seen"] == [1, 2, 4]
    assert [d.data for d in store.dead_letters("r1")] == [{"n": 3}]  # kept for inspection
    notes = [e.note or "" for e in store.journal("r1") if e.kind == "resumed"]
    assert "dead letters: skipped 1" in notes[-1]


def test_resume_with_retry_and_fixed_bindings_applies_it_first(store: SqliteStore) -> None:
    clock = ManualClock()
    queue_later = open_recorder(store, clock)
    queue(store, 1, 2, 3, 4)
    assert run(queue_later).kind == "failed"
    retried = open_recorder(store, clock, bindings=faults_bindings.FIXED, retry=True)
    assert run(retried).kind == "finished"
    row = store.get("r1")
    assert row.snapshot["context"]["seen"] == [1, 2, 3, 4]  # in order: the letter first
    assert store.dead_letters("r1") == []
    notes = [e.note or "" for e in store.journal("r1") if e.kind == "resumed"]
    assert "dead letters: retried 1" in notes[-1]


def test_a_retry_that_fails_again_fails_again_with_one_letter(store: SqliteStore) -> None:
    clock = ManualClock()
    runner = open_recorder(store, clock)
    queue(store, 3)
    assert run(runner).kind == "failed"
    again = open_recorder(store, clock, retry=True)
    assert run(again).kind == "failed"
    assert [d.data for d in store.dead_letters("r1")] == [{"n": 3}]


def test_a_spec_handling_error_execution_goes_on(store: SqliteStore) -> None:
    clock = ManualClock()
    runner, _ = Runner.open(store, HANDLED, "handled.yaml", session_id="h1", clock=clock,
                            bindings=faults_bindings.BINDINGS)
    for n in (1, 2, 3, 4):
        store.enqueue("h1", "record", {"n": n}, 1.0)
    steps = runner.pump()
    assert [(s.kind, s.event) for s in steps] == [
        ("event", "record"), ("event", "record"), ("error", "record"),
        ("event", "error.execution"), ("rejected", "record")]  # `broken` takes no record
    assert steps[2].note is not None and "raised ValueError: boom" in steps[2].note
    row = store.get("h1")
    assert row.status == "active" and runner.outcome is None
    assert row.snapshot["configuration"] == ["broken"]
    (error,) = row.snapshot["context"]["errors"]
    assert error == {"binding": "record", "state": "idle", "event": "record",
                     "error_type": "ValueError", "message": "boom"}
    assert row.snapshot["context"]["seen"] == [1, 2]
    kinds = [(e.kind, e.event) for e in store.journal("h1")]
    assert ("error", "record") in kinds and ("event", "error.execution") in kinds
    assert store.dead_letters("h1") == [] and store.queued_events("h1") == []


def test_a_failing_timer_goes_to_the_dead_letters_and_retry_refires_it(
        store: SqliteStore) -> None:
    clock = ManualClock()
    bindings = {**faults_bindings.BINDINGS, "tick": _raise}
    runner = open_recorder(store, clock, bindings=bindings)
    clock.advance(3600)
    assert [s.kind for s in runner.pump()] == ["error"] and runner.outcome is not None
    (letter,) = store.dead_letters("r1")
    assert (letter.kind, letter.event) == ("timer", "after.idle.0")
    assert store.get("r1").snapshot["timers"] == []  # dropped: it does not fire again
    retried = open_recorder(store, clock, bindings=bindings, retry=True)  # fails again
    retried.pump()
    assert retried.outcome is not None and retried.outcome.kind == "failed"
    fixed = open_recorder(store, clock, retry=True)
    steps = fixed.pump()
    assert [s.event for s in steps] == ["after.idle.0"] and fixed.outcome is None
    assert store.dead_letters("r1") == []


def _raise(call: object) -> None:
    raise RuntimeError("tick broke")


def test_internal_sends_may_use_reserved_names_external_ones_may_not(
        store: SqliteStore) -> None:
    runner, _ = Runner.open(store, HANDLED, "handled.yaml", session_id="h1",
                            clock=ManualClock(), bindings=faults_bindings.BINDINGS)
    data = {"binding": None, "state": "idle", "event": None, "error_type": "X", "message": ""}
    assert runner.send("error.execution", data).kind == "rejected"
    assert runner.send("error.execution", data, internal=True).after == ("broken",)


def test_a_fault_on_start_creates_nothing(store: SqliteStore) -> None:
    spec = RECORDER.replace("  idle:\n", "  idle:\n    entry: [boom]\n", 1)
    with pytest.raises(UnhandledFault, match=r"^action 'boom' \(boom.yaml:8:\d+\) raised "
                       "RuntimeError: tick broke on start$"):
        Runner.open(store, spec, "boom.yaml", session_id="b1", clock=ManualClock(),
                    bindings={**faults_bindings.BINDINGS, "boom": _raise})
    assert store.list() == []


def test_session_send_rolls_back_context_and_timers(store: SqliteStore) -> None:
    runner = open_recorder(store, ManualClock())
    session: Session = runner.session
    before = copy.deepcopy(session.snapshot().to_json())
    with pytest.raises(StepFault) as caught:
        session.send("record", {"n": 3})
    assert session.snapshot().to_json() == before
    assert caught.value.fault.binding == "record"


def test_a_real_runner_process_exits_1_with_one_line(tmp_path: Path) -> None:
    db = tmp_path / "state.db"
    store = SqliteStore(db)
    drive = [sys.executable, str(FAULTS / "drive.py"), str(db), RECORDER_PATH, "r1"]
    try:
        first = subprocess.Popen(drive, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                 text=True)
        assert first.stdout is not None and first.stdout.readline() == "ready\n"
        queue(store, 1, 2, 3, 4)
        out, err = first.communicate(timeout=30)
        assert first.returncode == 1 and out == "failed\n"
        assert re.fullmatch(ONE_LINE + "\n", err), err  # one line, no traceback
        assert status_of(store, store.get("r1"), 0.0).status == "failed"
        resumed = subprocess.run([*drive, "--retry", "--fixed"], capture_output=True,
                                 text=True, timeout=30)
        assert resumed.returncode == 0, resumed.stderr
        assert resumed.stdout.splitlines()[-1] == "finished"
        assert store.get("r1").snapshot["context"]["seen"] == [1, 2, 3, 4]
        kinds = [e.kind for e in store.journal("r1", after_seq=-1)]
        assert kinds.count("error") == 1 and kinds.count("event") == 5  # nothing lost
    finally:
        store.close()


async def _async_boom(call: object) -> None:
    await asyncio.sleep(0)
    raise KeyError("missing")


def test_an_async_action_that_raises_fails_the_session_the_same_way(
        store: SqliteStore) -> None:
    runner = open_recorder(store, ManualClock(),
                           bindings={**faults_bindings.BINDINGS, "record": _async_boom})
    queue(store, 1)
    outcome = run(runner)
    assert outcome.kind == "failed" and outcome.failure is not None
    assert (outcome.failure.binding, outcome.failure.error_type) == ("record", "KeyError")
    assert [d.data for d in store.dead_letters("r1")] == [{"n": 1}]


def test_a_handler_that_raises_too_fails_the_session(store: SqliteStore) -> None:
    bindings = {**faults_bindings.BINDINGS, "note_error": _raise}
    runner, _ = Runner.open(store, HANDLED, "handled.yaml", session_id="h1",
                            clock=ManualClock(), bindings=bindings)
    with pytest.raises(UnhandledFault, match=r"action 'note_error' .* raised RuntimeError"):
        runner.send("record", {"n": 3})
    row = store.get("h1")
    assert row.status == "failed" and row.snapshot["configuration"] == ["idle"]
    errors = [e.event for e in store.journal("h1") if e.kind == "error"]
    assert errors == ["record", "error.execution"]
    assert [(d.event, d.data) for d in store.dead_letters("h1")] == [("record", {"n": 3})]


def test_a_stop_ends_the_run_as_stopped_and_keeps_the_session_active(
        store: SqliteStore) -> None:
    runner = open_recorder(store, ManualClock())

    async def stopped_soon() -> RunOutcome:
        stop = asyncio.Event()
        asyncio.get_running_loop().call_later(0.05, stop.set)
        return await runner.run(stop, poll=0.01)

    assert asyncio.run(stopped_soon()).kind == "stopped"
    runner.close()
    assert store.get("r1").status == "active"
