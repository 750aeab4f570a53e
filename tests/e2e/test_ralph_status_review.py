"""The Ralph status and the review protocol through the façade, on real sessions: the
demo agents as real processes, the engine, the store; the status is the builder's
(ralph/status.py), never a hand-made document."""

from __future__ import annotations

import asyncio
import dataclasses
from pathlib import Path

import pytest

from interlock import runtime
from interlock.runtime.agents.invoke import AgentResolver, ResolvedAgent
from interlock.runtime.config.ralph import load_ralph_config
from interlock.runtime.engine.agent_output import Usage
from interlock.runtime.ralph.runner import RalphRun
from interlock.runtime.ralph.watch import render_text
from interlock.runtime.store.sqlite import SqliteStore

from support.ralph_e2e import finish, meta, progress, project, session, start, wait_until

COST = 0.0125  # what each agent call reports spending (USD)
TOKENS = (1000, 40)


def _reporting(resolve: AgentResolver) -> AgentResolver:
    """The demo agents, each call reporting COST and TOKENS as a real CLI would."""

    def resolved(name: str, prompt: str) -> ResolvedAgent:
        agent = resolve(name, prompt)
        read = agent.read
        assert read is not None

        def reading(stdout: str, stderr: str):  # type: ignore[no-untyped-def]
            return dataclasses.replace(read(stdout, stderr),
                                       usage=Usage(TOKENS[0], TOKENS[1], COST))

        return dataclasses.replace(agent, read=reading)

    return resolved


def _reported(root: Path) -> list[dict[str, object]]:
    """The usage every agent call reported, from the subagent sessions' journals."""
    store = SqliteStore(root / ".interlock" / "state.db")
    try:
        children = [row.id for row in store.list() if row.id.startswith("s.")]
        return [dict(e.data.get("usage") or {}) for child in children
                for e in store.journal(child) if e.event == "done.invoke.agent"]
    finally:
        store.close()


def test_the_status_sums_the_cost_the_agents_reported(tmp_path: Path) -> None:
    project(tmp_path)
    config = load_ralph_config(tmp_path / "interlock.yaml")
    result = asyncio.run(RalphRun(tmp_path, "s", config, agents=_reporting).run())
    assert result.outcome == "completed"
    reported = _reported(tmp_path)
    assert len(reported) == 7  # planner, 3 executors, 3 reviewers
    status = runtime.sync.ralph_status("s", root=tmp_path)
    assert status["spend"]["cost_usd"] == pytest.approx(sum(float(u["costUsd"])  # type: ignore[arg-type]
                                                            for u in reported))
    assert status["spend"]["cost_usd"] == pytest.approx(7 * COST)
    assert (status["spend"]["input_tokens"], status["spend"]["output_tokens"]) == (
        7 * TOKENS[0], 7 * TOKENS[1])
    # the limits count the same total (metadata.yaml), not a sum of their own
    assert meta(tmp_path)["limits"]["cost_usd"] == pytest.approx(7 * COST)
    view = render_text(runtime.RalphStatus.model_validate(status))
    assert "7,000 in / 280 out tokens, $0.09" in " ".join(view.split())


def test_a_status_from_a_run_with_max_iterations_shows_it(tmp_path: Path) -> None:
    (tmp_path / "reject.yaml").write_text("default: {verdict: retry}\n")
    project(tmp_path, "reviewer: {cli: demo, script: reject.yaml}", request="write it")
    result = runtime.sync.ralph_run("s", max_iterations=2, root=tmp_path)
    assert result.outcome == "limit"
    status = runtime.RalphStatus.model_validate(runtime.sync.ralph_status("s", root=tmp_path))
    # two iterations done; the third is where the limit stopped it, before its Planner
    assert (status.max_iterations, status.iteration) == (2, 3)
    assert status.stop is not None and status.stop.reason == "max_iterations"
    assert status.to_correct == ("T1",) and status.finished
    assert "iteration 3 of 2" in " ".join(render_text(status).split())


def test_the_review_api_marks_a_task_corrected(tmp_path: Path) -> None:
    (tmp_path / "reject.yaml").write_text("answers:\n  - {verdict: retry}\n")
    project(tmp_path, "reviewer: {cli: demo, script: reject.yaml}",
            ralph="review_rejections: wait", request="write the parser")
    proc = start(tmp_path, "ralph", "run", "s")
    wait_until(lambda: str(meta(tmp_path).get("waiting_for", "")).startswith(
        "corrections of T1"), proc=proc, what="waiting for the correction of T1")
    seen: list[runtime.TaskReview] = []

    def stopped(item: runtime.TaskReview) -> bool:
        seen.append(item)
        return False  # the human left the menu: nothing is marked

    [first] = runtime.ralph_review("s", stopped, root=tmp_path)  # the rejected tasks
    assert (first.task, first.reviewed, first.stopped, first.corrected) == (
        "T1", True, True, False)
    assert seen[0].report == session(tmp_path) / "iterations/1/tasks/T1.md"
    assert seen[0].node == "s-T1" and seen[0].unit == "Ralph-Executor (s)"
    assert proc.poll() is None  # still waiting

    [done] = runtime.ralph_review("s", lambda item: True, ["T1"], root=tmp_path)
    assert (done.task, done.reviewed, done.stopped, done.corrected) == (
        "T1", True, False, True)
    code, err = finish(proc)
    assert code == 0, err
    corrections = (session(tmp_path) / "iterations/2/corrections.md").read_text()
    assert "- T1: reviewed, nothing staged" in corrections
    assert "[x] T1" in progress(tmp_path, 2)
    # nothing waits any more: a review ends without marking anything
    [again] = runtime.sync.ralph_review("s", lambda item: True, ["T1"], root=tmp_path)
    assert (again.reviewed, again.corrected) == (True, False)


def test_a_task_without_a_report_is_marked_all_the_same(tmp_path: Path) -> None:
    project(tmp_path)
    told: list[str | None] = []
    [result] = runtime.ralph_review("s", lambda item: told.append(item.missing) or True,
                                    ["T9"], root=tmp_path)
    assert (result.reviewed, result.corrected) == (False, False)
    assert told == ["Ralph session s has no report on task 'T9'; no task has a report yet"]
    with pytest.raises(runtime.NotFound):
        runtime.ralph_review("nope", lambda item: True, root=tmp_path)
