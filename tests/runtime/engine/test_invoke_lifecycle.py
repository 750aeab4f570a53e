"""Invokes and the session lifecycle: a cancel request, a failed step and a rolled-back
entry leave no agent running, and say so in the journal and the invocations table."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from interlock.machines import Call
from interlock.runtime.agents.invoke import process_handlers
from interlock.runtime.engine.faults import UnhandledFault
from interlock.runtime.engine.lifecycle import cancel
from interlock.runtime.engine.runner import Runner
from interlock.runtime.store.sqlite import SqliteStore

from support.invoke_helpers import agent_argv, group_gone, run_until, wait_for


def explode(call: Call) -> None:
    raise RuntimeError("boom")


def faulty_spec(*, handled: bool) -> str:
    """working (invokes `review`) --boom [explode]--> next (invokes `second`); with
    ``handled``, error.execution leads to `rescued`."""
    hang = json.dumps(agent_argv("--hang"))
    rescue = "\n      error.execution: rescued" if handled else ""
    return f"""
machine: faulty
initial: working
states:
  working:
    invoke: {{id: review, command: {hang}, timeout: 30s}}
    on:
      boom: {{target: next, actions: [explode]}}{rescue}
  next:
    invoke: {{id: second, command: {hang}, timeout: 30s}}
    on: {{finish: finished}}
  rescued: {{on: {{finish: finished}}}}
  finished: {{type: final}}
"""


def open_faulty(store: SqliteStore, tmp_path: Path, *, handled: bool) -> Runner:
    runner, _ = Runner.open(store, faulty_spec(handled=handled), str(tmp_path / "spec.yaml"),
                            session_id="s1", bindings={"explode": explode},
                            folder=tmp_path / "session", invokers=process_handlers())
    return runner


def test_a_cancel_request_stops_the_agent_journaled_cancelled(store: SqliteStore,
                                                              tmp_path: Path) -> None:
    runner = open_faulty(store, tmp_path, handled=False)
    try:
        [record] = store.invocations("s1")
        assert record.pid is not None and record.outcome is None
        assert cancel(store, "s1", "enough", time.time()).action == "requested"
        run_until(runner, lambda: False)
        assert runner.outcome is not None and runner.outcome.kind == "cancelled"
    finally:
        runner.close()
    [record] = store.invocations("s1")
    assert record.outcome == "cancelled"
    assert group_gone(record.pgid or 0)
    kinds = [(e.kind, e.data.get("invocation")) for e in store.journal("s1", after_seq=-1)]
    assert kinds[-2:] == [("cancelled", record.id), ("cancelled", None)]
    assert store.get("s1").status == "cancelled"


def test_a_failed_step_stops_the_agent_journaled_interrupted(store: SqliteStore,
                                                             tmp_path: Path) -> None:
    runner = open_faulty(store, tmp_path, handled=False)
    try:
        with pytest.raises(UnhandledFault):
            runner.send("boom")
    finally:
        runner.close()
    [record] = store.invocations("s1")  # the rolled-back entry into `next` started none
    assert (record.invoke, record.outcome) == ("review", "interrupted")
    assert group_gone(record.pgid or 0)
    journal = store.journal("s1", after_seq=-1)
    assert [e.kind for e in journal][-2:] == ["error", "interrupted"]
    assert store.get("s1").status == "failed"


def test_a_handled_fault_starts_no_agent_for_the_rolled_back_entry(store: SqliteStore,
                                                                   tmp_path: Path) -> None:
    runner = open_faulty(store, tmp_path, handled=True)
    try:
        step = runner.send("boom")
        assert step.event == "error.execution" and runner.session.active == ("rescued",)
        wait_for(lambda: store.invocations("s1")[0].outcome is not None)
    finally:
        runner.close()
    [record] = store.invocations("s1")
    assert (record.invoke, record.outcome) == ("review", "cancelled")  # its state was left
    assert group_gone(record.pgid or 0)
