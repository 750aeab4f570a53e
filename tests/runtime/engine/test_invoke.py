"""Invoke with real processes: done/error events for each reason, cancel on leaving the
state, parallel regions, timers while an agent works, Ctrl-C (interrupted)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from interlock.machines import Call
from interlock.runtime.agents.invoke import ResolvedAgent, process_handlers
from interlock.runtime.config.agents import AgentLaunch
from interlock.runtime.config.dispatch import PollingConfiguration
from interlock.runtime.engine.agent_output import AgentOutput, Usage
from interlock.runtime.engine.clock import ManualClock
from interlock.runtime.engine.runner import Runner
from interlock.runtime.engine.session import SessionError
from interlock.runtime.store.sqlite import SqliteStore

from support.invoke_helpers import (
    BINDINGS,
    agent_argv,
    group_gone,
    one_invoke_spec,
    open_runner,
    outcome,
    pids,
    run_until,
    wait_for,
)


def test_a_finished_agent_raises_done_with_its_answer(store: SqliteStore, tmp_path: Path
                                                      ) -> None:
    runner = open_runner(store, one_invoke_spec(agent_argv()), tmp_path)
    try:
        run_until(runner, lambda: runner.session.is_final)
    finally:
        runner.close()
    assert runner.session.active == ("passed",)
    data = outcome(store)
    assert data["answer"]["v"] == "GO"
    assert data["answer"]["prompt"] == "Review tests"  # the rendered prompt on stdin
    assert data["result"]["success"] is True
    assert data["result"]["status"] == "completed"
    assert data["verdict"] is not None
    assert data["usage"] == {"inputTokens": None, "outputTokens": None, "costUsd": None}
    [record] = store.invocations("s1")
    assert record.outcome == "done" and data["invocation"] == record.id
    assert Path(record.spool, "stdout").read_text().startswith("v: GO")
    journal = store.journal("s1", after_seq=-1)
    assert [e.kind for e in journal][:3] == ["created", "invoked", "event"]
    invoked = journal[1].data
    assert (invoked["invocation"], invoked["pid"], invoked["startTicks"], invoked["spool"]) \
        == (record.id, record.pid, record.start_ticks, record.spool)
    assert invoked["argv"] == agent_argv() and invoked["invoke"] == "review"
    assert group_gone(record.pgid or 0)


@pytest.mark.parametrize(("args", "reason"), [
    (["--quiet", "--exit", "3"], "exit_nonzero"),
    (["--invalid"], "invalid_answer"),
    (["--hang"], "timeout"),
])
def test_a_failing_agent_raises_error_with_the_reason(store: SqliteStore, tmp_path: Path,
                                                      args: list[str], reason: str) -> None:
    spec = one_invoke_spec(agent_argv(*args), timeout="1s")
    runner = open_runner(store, spec, tmp_path)
    try:
        run_until(runner, lambda: runner.session.is_final)
    finally:
        runner.close()
    assert runner.session.active == ("failed",)
    data = outcome(store)
    assert data["reason"] == reason
    assert data["result"]["success"] is False
    [record] = store.invocations("s1")
    assert (record.outcome, record.reason) == ("error", reason)
    assert group_gone(record.pgid or 0)


def test_a_missing_command_raises_spawn_error(store: SqliteStore, tmp_path: Path) -> None:
    runner = open_runner(store, one_invoke_spec(["no-such-agent-xyz"]), tmp_path)
    try:
        run_until(runner, lambda: runner.session.is_final)
    finally:
        runner.close()
    data = outcome(store)
    assert data["reason"] == "spawn_error"
    assert "no-such-agent-xyz" in data["result"]["stderr"]


def test_a_template_error_raises_spawn_error(store: SqliteStore, tmp_path: Path) -> None:
    spec = one_invoke_spec(agent_argv(), prompt="{{ context.nope }}")
    runner = open_runner(store, spec, tmp_path)
    try:
        run_until(runner, lambda: runner.session.is_final)
    finally:
        runner.close()
    data = outcome(store)
    assert data["reason"] == "spawn_error"
    assert "nope" in data["message"]


def test_leaving_the_state_cancels_the_agent(store: SqliteStore, tmp_path: Path) -> None:
    started = tmp_path / "pids"
    runner = open_runner(store, one_invoke_spec(agent_argv("--pids", str(started),
                                                           "--delay", "8")), tmp_path)
    try:
        wait_for(lambda: len(pids(started)) == 1)
        [record] = runner.invocations_in_flight()
        assert record.pid is not None and not group_gone(record.pid)
        runner.send("leave")
        assert runner.session.active == ("left",)
        assert group_gone(record.pid)  # stopped before send returned
        assert runner.invocations_in_flight() == []
    finally:
        runner.close()
    [stored] = store.invocations("s1")
    assert stored.outcome == "cancelled"
    assert "cancelled" in [e.kind for e in store.journal("s1", after_seq=-1)]


def test_a_completion_after_the_state_was_left_is_dropped(store: SqliteStore, tmp_path: Path
                                                          ) -> None:
    runner = open_runner(store, one_invoke_spec(agent_argv()), tmp_path)
    try:
        [record] = runner.invocations_in_flight()
        wait_for(lambda: store.delivered("s1", record.id))  # done, not yet taken
        runner.send("pause")
        steps = runner.pump()
        assert [s.kind for s in steps] == ["dropped"]
        assert runner.session.active == ("idle",)
        runner.send("resume")  # entered again: a new invocation, whose answer is taken
        [second] = runner.invocations_in_flight()
        assert second.id != record.id
        run_until(runner, lambda: runner.session.is_final)
    finally:
        runner.close()
    assert runner.session.active == ("passed",)
    assert outcome(store)["invocation"] == second.id
    assert "dropped" in [e.kind for e in store.journal("s1", after_seq=-1)]


def test_timers_fire_while_an_agent_works(store: SqliteStore, tmp_path: Path) -> None:
    clock = ManualClock()
    started = tmp_path / "pids"
    spec = one_invoke_spec(agent_argv("--pids", str(started), "--delay", "1.5"),
                           after="1s")
    # the `after` transition re-enters `working` (self-transition): the agent keeps running
    runner = open_runner(store, spec, tmp_path, clock=clock)

    def advance() -> None:
        if runner.session.context["ticks"] < 3:
            clock.advance(1)
            runner.wake()

    try:
        run_until(runner, lambda: runner.session.is_final, during=advance)
    finally:
        runner.close()
    assert runner.session.context["ticks"] == 3
    assert runner.session.active == ("passed",)
    assert len(pids(started)) == 1
    assert [r.outcome for r in store.invocations("s1")] == ["done"]  # none cancelled


PARALLEL = """
machine: reviewers
initial: reviewing
context:
  results: {{type: dict, default: {{}}}}
states:
  reviewing:
    type: parallel
    states:
      qa:
        initial: qa_running
        states:
          qa_running:
            invoke: {{id: qa, command: {qa}}}
            on: {{done.invoke.qa: {{target: qa_done, actions: [note]}}}}
          qa_done: {{}}
      security:
        initial: sec_running
        states:
          sec_running:
            invoke: {{id: security, command: {security}}}
            on: {{done.invoke.security: {{target: sec_done, actions: [note]}}}}
          sec_done: {{}}
    on:
      stop: done
  done: {{type: final}}
"""


def test_parallel_regions_each_invoke(store: SqliteStore, tmp_path: Path) -> None:
    def note(call: Call) -> None:
        call.context["results"][call.data["invocation"]] = call.data["answer"]["pid"]

    spec = PARALLEL.format(qa=json.dumps(agent_argv("--delay", "0.3")),
                           security=json.dumps(agent_argv("--delay", "0.1")))
    runner, _ = Runner.open(store, spec, str(tmp_path / "r.yaml"), session_id="s1",
                            bindings={"note": note}, folder=tmp_path / "session",
                            invokers=process_handlers())
    try:
        assert len(runner.invocations_in_flight()) == 2
        run_until(runner, lambda: len(runner.session.context["results"]) == 2)
        assert set(runner.session.active) >= {"qa_done", "sec_done"}
    finally:
        runner.close()
    results = runner.session.context["results"]
    assert len(results) == 2 and len(set(results.values())) == 2
    assert sorted(r.invoke for r in store.invocations("s1")) == ["qa", "security"]


def test_closing_the_runner_interrupts_agents_and_resume_starts_one_anew(
        store: SqliteStore, tmp_path: Path) -> None:
    started = tmp_path / "pids"
    spec = one_invoke_spec(agent_argv("--pids", str(started), "--delay", "8"))
    runner = open_runner(store, spec, tmp_path)
    wait_for(lambda: len(pids(started)) == 1)
    [record] = runner.invocations_in_flight()
    runner.close()
    assert record.pid is not None and group_gone(record.pid)
    assert store.invocations("s1")[0].outcome == "interrupted"
    again = open_runner(store, None, tmp_path)  # type: ignore[arg-type]
    try:
        wait_for(lambda: len(pids(started)) == 2)
        [second] = again.invocations_in_flight()
        assert second.id != record.id
    finally:
        again.close()
    assert all(group_gone(p) for p in pids(started))


AGENT_SPEC = """
machine: agents
initial: asking
context:
  outcome: {type: dict, default: {}}
states:
  asking:
    invoke:
      id: ask
      agent: reviewer
      prompt_file: prompt.j2
      input: {focus: "{{ context.area }}"}
    on:
      done.invoke.ask: {target: answered, actions: [keep]}
      error.invoke.ask: {target: answered, actions: [keep]}
  answered: {type: final}
"""


def test_an_agent_invoke_goes_through_the_resolver(store: SqliteStore, tmp_path: Path) -> None:
    """The resolver seam: a name and the rendered prompt in, a launch and a reader out
    (here a stand-in for an adapter whose CLI wraps its answer and reports usage)."""
    (tmp_path / "prompt.j2").write_text("Look at {{ input.focus }}\n")
    seen: list[tuple[str, str]] = []

    def resolve(name: str, prompt: str) -> ResolvedAgent:
        seen.append((name, prompt))

        def read(stdout: str, stderr: str) -> AgentOutput:
            return AgentOutput(stdout, Usage(input_tokens=12, output_tokens=3, cost_usd=0.01))

        return ResolvedAgent(AgentLaunch(tuple(agent_argv()), stdin=prompt), read)

    runner, _ = Runner.open(store, AGENT_SPEC, str(tmp_path / "agents.yaml"), session_id="s1",
                            bindings=BINDINGS, context={"area": "the cache"},
                            folder=tmp_path / "session", invokers=process_handlers(resolve))
    try:
        run_until(runner, lambda: runner.session.is_final)
    finally:
        runner.close()
    assert seen == [("reviewer", "Look at the cache\n")]
    data = outcome(store)
    assert data["answer"]["prompt"] == "Look at the cache"
    assert data["usage"] == {"inputTokens": 12, "outputTokens": 3, "costUsd": 0.01}


def test_an_agent_invoke_without_a_resolver_is_a_spawn_error(store: SqliteStore,
                                                             tmp_path: Path) -> None:
    (tmp_path / "prompt.j2").write_text("hi\n")
    runner, _ = Runner.open(store, AGENT_SPEC, str(tmp_path / "agents.yaml"), session_id="s1",
                            bindings=BINDINGS, context={"area": "x"},
                            folder=tmp_path / "session", invokers=process_handlers())
    try:
        run_until(runner, lambda: runner.session.is_final)
    finally:
        runner.close()
    data = outcome(store)
    assert data["reason"] == "spawn_error" and "resolver" in data["message"]


def test_an_invoke_of_a_kind_without_a_handler_fails_at_open(store: SqliteStore,
                                                            tmp_path: Path) -> None:
    """The engine runs no process itself: a spec with an ``agent:`` invoke opened without
    the handlers for it (Runner.open(invokers=...)) is refused, naming the kind."""
    (tmp_path / "prompt.j2").write_text("hi\n")
    with pytest.raises(SessionError, match=r"agent invokes.*no handler for agent invokes"):
        Runner.open(store, AGENT_SPEC, str(tmp_path / "agents.yaml"), session_id="s1",
                    bindings=BINDINGS, context={"area": "x"}, folder=tmp_path / "session")
    assert store.holder("s1") is None  # the lease is given back
    with pytest.raises(SessionError, match=r"no handler for agent invokes"):
        Runner.open(store, AGENT_SPEC, str(tmp_path / "agents.yaml"), session_id="s2",
                    bindings=BINDINGS, context={"area": "x"}, folder=tmp_path / "session",
                    invokers={"command": process_handlers()["command"]})


def test_an_agents_own_dispatch_settings_apply(store: SqliteStore, tmp_path: Path) -> None:
    """A resolved agent's PollingConfiguration replaces the invoker's: here its required
    field is one the answer lacks, so the answer is not a complete document."""
    config = PollingConfiguration.model_validate({"completionMarkers": {"requiredField": "x"}})
    (tmp_path / "prompt.j2").write_text("hi\n")

    def resolve(name: str, prompt: str) -> ResolvedAgent:
        return ResolvedAgent(AgentLaunch(tuple(agent_argv()), stdin=prompt), config=config)

    runner, _ = Runner.open(store, AGENT_SPEC, str(tmp_path / "agents.yaml"), session_id="s1",
                            bindings=BINDINGS, context={"area": "x"},
                            folder=tmp_path / "session", invokers=process_handlers(resolve))
    try:
        run_until(runner, lambda: runner.session.is_final)
    finally:
        runner.close()
    assert outcome(store)["reason"] == "invalid_answer"


def test_a_runner_that_lost_its_lease_leaves_the_agent_to_its_successor(
        store: SqliteStore, tmp_path: Path) -> None:
    clock = ManualClock()
    started = tmp_path / "pids"
    # The agent outlives the test by far (the second runner interrupts it), and its invoke
    # timeout lies well past the 31 s the clock jumps for the lease to expire: with a short
    # delay a loaded machine let it finish by itself before the check that it still runs.
    spec = one_invoke_spec(agent_argv("--pids", str(started), "--delay", "120"),
                           timeout="10m")
    first = open_runner(store, spec, tmp_path, clock=clock, owner="elsewhere:1:a")
    try:
        wait_for(lambda: len(pids(started)) == 1)
        [record] = first.invocations_in_flight()
        clock.advance(31)  # the first runner's lease expires
        second = open_runner(store, None, tmp_path, clock=clock,  # type: ignore[arg-type]
                             owner="elsewhere:2:b")
    finally:
        first.close()
    try:
        [adopted] = second.invocations_in_flight()
        assert (adopted.id, adopted.pid) == (record.id, record.pid)
        assert record.pid is not None and not group_gone(record.pid)  # not killed by first
    finally:
        second.close()
    assert group_gone(record.pid)
    assert len(pids(started)) == 1  # adopted, never started twice
    assert store.invocations("s1")[0].outcome == "interrupted"  # by the second runner


def test_an_invoking_state_left_and_entered_in_one_step_invokes_anew(
        store: SqliteStore, tmp_path: Path) -> None:
    """SCXML: leaving a state cancels its invoke, entering it starts one. An `always`
    back into the invoking state (a loop) is both in one step: three calls, not one."""
    spec = f"""
machine: loop
context:
  done: {{type: int, default: 0}}
initial: asking
states:
  asking:
    invoke: {{id: ask, command: {json.dumps(agent_argv())}, timeout: 30s}}
    on:
      done.invoke.ask: {{target: counted, actions: [count]}}
  counted:
    always:
      - {{guard: more, target: asking}}
      - {{target: finished}}
  finished: {{type: final}}
"""

    def count(call: Call) -> None:
        call.context["done"] += 1

    runner, _ = Runner.open(store, spec, str(tmp_path / "loop.yaml"), session_id="s1",
                            bindings={"count": count,
                                      "more": lambda call: call.context["done"] < 3},
                            folder=tmp_path / "session", invokers=process_handlers())
    try:
        run_until(runner, lambda: runner.session.is_final)
    finally:
        runner.close()
    assert runner.session.context["done"] == 3
    records = store.invocations("s1")
    assert len(records) == 3 and {r.outcome for r in records} == {"done"}
