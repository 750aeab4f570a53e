"""Fan-out (``invoke: each:``) with real processes and a real SQLite store: at most
``concurrency`` children at once, each child's event with its item and index, one
``done.invoke.<id>.all`` with every outcome in item order, errors, child machines,
leaving the state, an empty list, a list that is not one, Ctrl-C and resume."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from interlock.runtime.engine.runner import Runner
from interlock.runtime.store.sqlite import SqliteStore

from support.fanout_helpers import fanout_spec, most_at_once, resume_fanout, times
from support.invoke_helpers import (
    agent_argv,
    group_gone,
    open_runner,
    outcome,
    pids,
    run_until,
    wait_for,
)
from support.machine_helpers import Machines, child_spec, fanout_parent, open_parent


def run_fanout(store: SqliteStore, tmp_path: Path, spec: str) -> Runner:
    runner = open_runner(store, spec, tmp_path)
    try:
        run_until(runner, lambda: runner.session.is_final)
    finally:
        runner.close()
    return runner


def context(store: SqliteStore, session_id: str = "s1") -> dict[str, Any]:
    return dict(store.get(session_id).snapshot["context"])


def test_five_items_two_at_once_five_done_events_and_all_once_in_item_order(
        store: SqliteStore, tmp_path: Path) -> None:
    (tmp_path / "pair").mkdir()  # the first two wait for each other: they overlap
    items = ["a", "b", "c", "d", "e"]
    spec = fanout_spec(tmp_path, items, args=["--pair", str(tmp_path / "pair")])
    runner = run_fanout(store, tmp_path, spec)
    assert runner.session.active == ("passed",)
    assert most_at_once(tmp_path) == 2  # never more than the concurrency, and it was used
    assert sorted(times(tmp_path)) == [0, 1, 2, 3, 4]  # each item ran once
    seen = context(store)["seen"]
    assert sorted(index for _, index in seen) == [0, 1, 2, 3, 4]
    assert {event for event, _ in seen} == {"done.invoke.work"}
    journal = store.journal("s1", after_seq=-1)
    events = [e for e in journal if e.kind == "event"]
    assert [e.event for e in events] == ["done.invoke.work"] * 5 + ["done.invoke.work.all"]
    for entry in events[:5]:  # a child's event: a single invoke's data, its item and index
        data = entry.data
        assert data["item"] == items[data["index"]]
        assert data["answer"] == {"v": "done", "item": data["item"], "index": data["index"],
                                  "prompt": f"Do {data['item']} ({data['index']} of 5)"}
    every = outcome(store)
    assert [o["index"] for o in every["outcomes"]] == [0, 1, 2, 3, 4]
    assert [o["item"] for o in every["outcomes"]] == items
    assert {(o["event"], o["ok"]) for o in every["outcomes"]} == {("done.invoke.work", True)}
    assert (every["items"], every["done"], every["failed"]) == (items, 5, 0)
    [fanout] = store.fanouts("s1")
    assert (fanout.items, fanout.concurrency, fanout.outcome) == (tuple(items), 2, "done")
    assert every["invocation"] == fanout.id
    rows = store.invocations("s1")
    assert sorted(r.index for r in rows if r.index is not None) == [0, 1, 2, 3, 4]
    assert {(r.fanout, r.outcome) for r in rows} == {(fanout.id, "done")}
    assert [r.result["data"]["invocation"] for r in rows if r.result] == [r.id for r in rows]
    kinds = [e.kind for e in journal]
    assert kinds.count("fanout") == 1 and kinds.count("invoked") == 5
    assert all(group_gone(pid) for pid in pids(tmp_path / "pids"))


def test_failing_children_raise_error_with_item_and_index_and_all_counts_them(
        store: SqliteStore, tmp_path: Path) -> None:
    spec = fanout_spec(tmp_path, ["a", "b", "c"], concurrency="{{ context.parallel }}",
                       args=["--exit={{ 3 if index == 1 else 0 }}"])
    run_fanout(store, tmp_path, spec)
    seen = sorted(context(store)["seen"], key=lambda s: s[1])
    assert seen == [["done.invoke.work", 0], ["error.invoke.work", 1], ["done.invoke.work", 2]]
    every = outcome(store)
    failed = every["outcomes"][1]
    assert (failed["event"], failed["ok"], failed["reason"]) == ("error.invoke.work", False,
                                                                  "exit_nonzero")
    assert (failed["item"], failed["index"]) == ("b", 1)
    assert [o["ok"] for o in every["outcomes"]] == [True, False, True]
    assert (every["done"], every["failed"]) == (2, 1)
    assert store.fanouts("s1")[0].concurrency == 2  # the template gave it


def test_machine_children_see_their_item_and_the_all_event_carries_their_outputs(
        store: SqliteStore, tmp_path: Path) -> None:
    machines = Machines(child_spec(agent_argv()))
    spec = fanout_parent(concurrency=1, topic="{{ item.id }} #{{ index }}")
    runner = open_parent(store, tmp_path, machines, spec=spec)
    try:
        run_until(runner, lambda: runner.session.is_final)
    finally:
        runner.close()
    assert runner.session.active == ("passed",)
    events = [(e.event, e.data.get("index"), e.data.get("item", {}).get("id"))
              for e in store.journal("p1", after_seq=-1) if e.kind == "event"]
    assert events == [("done.invoke.step.answered", 0, "T1"),
                      ("done.invoke.step.answered", 1, "T2"),
                      ("done.invoke.step.answered", 2, "T3"), ("done.invoke.step.all", None, None)]
    outcomes = context(store, "p1")["seen"]["outcomes"]
    assert [(o["event"], o["state"], o["index"]) for o in outcomes] == [
        ("done.invoke.step.answered", "answered", i) for i in range(3)]
    assert [o["output"]["answer"]["prompt"] for o in outcomes] == [
        "Topic T1 #0 task T1", "Topic T2 #1 task T2", "Topic T3 #2 task T3"]
    assert [o["output"]["task"] for o in outcomes] == [  # a mapping stays a mapping
        {"id": "T1", "n": 0}, {"id": "T2", "n": 1}, {"id": "T3", "n": 2}]
    sessions = [o["session"] for o in outcomes]
    assert sessions == ["p1.0001-step", "p1.0002-step", "p1.0003-step"]
    # the resolver is told which item each child session is for
    assert [(r.session_id, r.item.index, r.item.value["id"]) for r in machines.requests
            if r.item is not None] == [(s, i, f"T{i + 1}") for i, s in enumerate(sessions)]
    assert all(store.get(child).status == "finished" for child in sessions)


def test_between_two_children_no_agent_runs_yet_the_session_is_working(
        store: SqliteStore, tmp_path: Path) -> None:
    """The next child starts when the session takes the last one's event: until then no
    agent runs, but the session is not idle (the idle-only inbox poller asks)."""
    runner = open_runner(store, fanout_spec(tmp_path, ["a", "b"], concurrency=1), tmp_path)
    try:
        assert len(runner.invocations_in_flight()) == 1 and runner.working()
        wait_for(lambda: runner.invocations_in_flight() == [])  # "a" ended, not yet taken
        assert runner.working()  # "b" is to come
        run_until(runner, lambda: runner.session.is_final)
        assert runner.session.active == ("passed",)
        assert not runner.working()
    finally:
        runner.close()


def test_leaving_the_state_cancels_every_child_and_starts_no_more(
        store: SqliteStore, tmp_path: Path) -> None:
    runner = open_runner(store, fanout_spec(tmp_path, [1, 2, 3, 4], args=["--hang"]),
                         tmp_path)
    try:
        wait_for(lambda: len(pids(tmp_path / "pids")) == 2)
        running = runner.invocations_in_flight()
        assert sorted(r.index for r in running if r.index is not None) == [0, 1]
        runner.send("leave")
        assert runner.session.active == ("left",)
        assert all(group_gone(r.pgid or 0) for r in running)  # stopped within the step
        assert runner.invocations_in_flight() == []
        runner.pump()
    finally:
        runner.close()
    assert len(pids(tmp_path / "pids")) == 2  # the two not yet started never start
    wait_for(lambda: {r.outcome for r in store.invocations("s1")} == {"cancelled"})
    assert len(store.invocations("s1")) == 2
    wait_for(lambda: store.fanouts("s1")[0].outcome == "cancelled")
    kinds = [e.kind for e in store.journal("s1", after_seq=-1)]
    assert kinds.count("cancelled") == 2 and "done.invoke.work.all" not in str(kinds)


def test_an_empty_list_raises_all_at_once(store: SqliteStore, tmp_path: Path) -> None:
    runner = run_fanout(store, tmp_path, fanout_spec(tmp_path, []))
    assert runner.session.active == ("passed",)
    every = outcome(store)
    assert (every["outcomes"], every["items"], every["done"], every["failed"]) == ([], [], 0, 0)
    assert store.invocations("s1") == []
    assert store.fanouts("s1")[0].outcome == "done"


@pytest.mark.parametrize(("each", "words"), [
    ("{{ context.parallel }}", "gave int 2, not a list"),
    ("{{ context.nope }}", "undefined variable 'nope'"),
])
def test_a_list_that_is_not_one_raises_error_and_no_all(store: SqliteStore, tmp_path: Path,
                                                        each: str, words: str) -> None:
    runner = open_runner(store, fanout_spec(tmp_path, [1], each=each), tmp_path)
    try:
        run_until(runner, lambda: bool(context(store)["seen"]))
        runner.pump()
    finally:
        runner.close()
    assert runner.session.active == ("working",)  # its transition is targetless
    [error] = [e for e in store.journal("s1", after_seq=-1) if e.kind == "event"]
    assert error.event == "error.invoke.work"
    assert (error.data["reason"], error.data["index"], error.data["item"]) == (
        "spawn_error", None, None)
    assert words in error.data["message"]
    assert store.invocations("s1") == []
    assert store.fanouts("s1")[0].outcome == "error"


def test_ctrl_c_then_resume_goes_on_without_running_an_ended_child_again(
        store: SqliteStore, tmp_path: Path) -> None:
    release = tmp_path / "release"
    spec = fanout_spec(tmp_path, ["a", "b", "c", "d"], args=[
        "--wait-file={{ '' if index == 0 else '" + str(release) + "' }}"])
    runner = open_runner(store, spec, tmp_path)
    try:  # a ended; b and c wait
        run_until(runner, lambda: len(pids(tmp_path / "pids")) == 3)
    finally:
        runner.close()  # Ctrl-C: b and c are stopped, journaled interrupted
    assert sorted(times(tmp_path)) == [0]
    interrupted = [r for r in store.invocations("s1") if r.outcome == "interrupted"]
    assert sorted(r.index for r in interrupted if r.index is not None) == [1, 2]
    assert store.fanouts("s1", in_flight=True)  # the fan-out goes on when resumed
    resume_fanout(store, tmp_path)
    ran = times(tmp_path)
    assert {index: len(runs) for index, runs in ran.items()} == {0: 1, 1: 1, 2: 1, 3: 1}
    assert [o["item"] for o in outcome(store)["outcomes"]] == ["a", "b", "c", "d"]
