"""The Ralph feed's hand-over: a signal offered to a subagent session that ended before
taking it reaches the orchestrator at its next boundary, once it accepts it (real
runners, a real SQLite store, a real mailbox folder, the consumer's scans run inline)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from interlock.machines.bindings import Call
from interlock.runtime.agents.invoke import process_handlers
from interlock.runtime.engine.runner import Runner
from interlock.runtime.host.owners import default_owner
from interlock.runtime.ralph.feed import ORCHESTRATOR, RalphFeed
from interlock.runtime.signals.mailbox import Mailbox
from interlock.runtime.store.sqlite import SqliteStore

ORCHESTRATOR_SPEC = """\
machine: orchestrator
initial: invoking
context:
  infos: {type: list, default: []}
states:
  invoking:
    on: {done: checkpoint}
  checkpoint:
    on:
      signal.INFO: {actions: [take]}
"""
SUBAGENT_SPEC = """\
machine: subagent
initial: working
states:
  working:
    on:
      signal.INFO: {actions: [take]}
      answered: done
  done: {type: final}
"""


def take(call: Call) -> None:
    call.context.setdefault("infos", []).append(call.data.get("message"))


@pytest.fixture
def store(tmp_path: Path) -> Iterator[SqliteStore]:
    s = SqliteStore(tmp_path / "state.db")
    yield s
    s.close()


def open_session(store: SqliteStore, tmp_path: Path, spec: str, session_id: str) -> Runner:
    runner, _ = Runner.open(store, spec, str(tmp_path / f"{session_id}.yaml"),
                            session_id=session_id, bindings={"take": take},
                            folder=tmp_path / session_id, invokers=process_handlers())
    return runner


def test_a_signal_a_subagent_ended_before_taking_goes_to_the_orchestrator(
        store: SqliteStore, tmp_path: Path) -> None:
    orchestrator = open_session(store, tmp_path, ORCHESTRATOR_SPEC, "s")
    subagent = open_session(store, tmp_path, SUBAGENT_SPEC, "s.0001-executor")
    feed = RalphFeed(Mailbox(tmp_path / "signals"), store, default_owner("test"),
                     watch=False)  # scanned inline below
    feed.attach(orchestrator, ORCHESTRATOR)
    detach = feed.attach(subagent, "Ralph-Executor")
    # the race: the feed offers INFO to the working subagent, whose agent answers first
    store.enqueue(subagent.session_id, "answered", {}, 0.0)
    store.offer(subagent.session_id, "signal.INFO",
                {"signal_id": "sig-1", "target": "ALL", "message": "read on phones"}, 0.0,
                "sig-1")
    subagent.pump()
    assert subagent.session.is_final and "infos" not in subagent.session.context
    detach()
    subagent.close()
    assert not orchestrator.mailbox_clear(orchestrator.seq)  # no scan since: one is asked
    feed.consumer.run_once()
    assert orchestrator.mailbox_clear(orchestrator.seq)  # `invoking` takes no INFO: kept
    store.enqueue("s", "done", {}, 0.0)
    orchestrator.pump()  # done; at the boundary the mailbox is not known to be clear
    assert orchestrator.session.context["infos"] == []
    feed.consumer.run_once()  # the scan hands the INFO over, before any `polled`
    orchestrator.pump()
    assert orchestrator.session.context["infos"] == ["read on phones"]
    feed.consumer.run_once()
    assert orchestrator.mailbox_clear(orchestrator.seq)  # handed over once: nothing left
    orchestrator.pump()
    assert orchestrator.session.context["infos"] == ["read on phones"]
    orchestrator.close()
