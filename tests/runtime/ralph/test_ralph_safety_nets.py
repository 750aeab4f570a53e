"""The safety nets together, on the offline demo agents as real processes under the real
dispatcher: a loop that never finishes stops at max_iterations, one that changes nothing
stops for no progress, a hanging agent is killed by the invocation timeout, and one that
fails transiently twice is retried to success. Each ends with its reason. The clock that
counts the session's runtime is a ManualClock; backoff waits are recorded, not slept."""

from __future__ import annotations

import asyncio
import time
from pathlib import Path

from interlock.runtime.agents.config import AgentConfig
from interlock.runtime.engine.clock import ManualClock
from interlock.runtime.ralph.config import RalphConfig, RetryPolicy
from interlock.runtime.ralph.invocation import InvocationOutcome, invoke_agent
from interlock.runtime.ralph.limits import SessionLimits, StopReason, progress_digest


def _executor(tmp_path: Path, script: str | None = None) -> AgentConfig:
    settings: dict[str, object] = {"cli": "demo", "role": "executor"}
    if script is not None:
        path = tmp_path / "executor.script.yaml"
        path.write_text(script)
        settings["script"] = str(path)
    return AgentConfig.model_validate(settings)


def _run(agent: AgentConfig, prompt: str, config: RalphConfig,
         waits: list[float] | None = None) -> InvocationOutcome:
    async def record(seconds: float) -> None:
        (waits if waits is not None else []).append(seconds)

    return asyncio.run(invoke_agent(agent, prompt, config, name="executor", sleep=record))


def _loop(project: Path, agent: AgentConfig, config: RalphConfig, prompt_of: object
          ) -> tuple[StopReason, int]:
    """A minimal Ralph loop: one executor invocation per iteration, the limits checked by
    the engine before each one."""
    clock = ManualClock()
    progress = project / ".ralph-sessions" / "s1" / "iterations" / "1" / "progress.md"
    progress.parent.mkdir(parents=True)
    progress.write_text("- [/] T1 the task that never ends\n")
    limits = SessionLimits(config, clock.now(), digest=progress_digest(project, progress))
    invocations = 0
    while (reason := limits.check(clock.now())) is None:
        assert callable(prompt_of)
        outcome = _run(agent, prompt_of(limits.iterations_done + 1), config)
        assert outcome.ok, outcome.failure
        invocations += 1
        limits.invocation_done(progress_digest(project, progress))
        limits.iteration_done()  # the task is still [/]: the agent never finishes it
        clock.advance(30)
    return reason, invocations


def test_an_agent_that_never_finishes_stops_at_max_iterations(tmp_path: Path) -> None:
    config = RalphConfig(max_iterations=3, no_progress_limit=None)
    work = tmp_path / "work"

    def prompt(n: int) -> str:  # each call writes a new file: progress, never completion
        return f"Task: T{n} part {n} of the endless task\nWorkdir: {work}\n"

    reason, invocations = _loop(tmp_path, _executor(tmp_path), config, prompt)
    assert (reason.kind, invocations) == ("max_iterations", 3)
    assert reason.detail == "reached max_iterations: 3 iterations done, the limit is 3"
    assert {"T1.md", "T2.md", "T3.md"} <= {p.name for p in work.iterdir()}


def test_an_agent_that_changes_nothing_stops_for_no_progress(tmp_path: Path) -> None:
    config = RalphConfig(max_iterations=6, no_progress_limit=2)
    project = tmp_path / "project"  # the script and its call counter stay outside it
    project.mkdir()
    agent = _executor(tmp_path, "default: {status: blocked, blockers: [cannot start]}\n")
    reason, invocations = _loop(project, agent, config,
                                lambda n: f"Task: T1 the task\nWorkdir: {project / 'w'}\n")
    assert (reason.kind, invocations) == ("no_progress", 2)
    assert reason.to_json()["reason"] == "no_progress"


def test_a_hanging_agent_is_killed_by_the_invocation_timeout(tmp_path: Path) -> None:
    agent = _executor(tmp_path, "hang: true\n")
    began = time.monotonic()
    outcome = _run(agent, "Task: T1 x\n", RalphConfig(invocation_timeout=1.0))
    assert time.monotonic() - began < 20
    assert outcome.timed_out and outcome.result.polling.status == "timeout"
    assert outcome.failure == "killed by the invocation timeout (1s)"


def test_a_transient_failure_twice_then_success_is_retried(tmp_path: Path) -> None:
    agent = _executor(tmp_path, "fail_times: 2\nexit_code: 75\n"
                      "fail_message: 'No messages returned'\n")
    config = RalphConfig(retry=RetryPolicy(exit_codes=(75,), attempts=3, base_delay=1,
                                           max_delay=8))
    waits: list[float] = []
    outcome = _run(agent, f"Task: T1 the task\nWorkdir: {tmp_path / 'w'}\n", config, waits)
    assert outcome.ok
    assert [a.result.polling.exit_code for a in outcome.attempts[:2]] == [75, 75]
    assert outcome.result.polling.success and len(outcome.attempts) == 3
    assert len(waits) == 2 and 0 <= waits[0] <= 1 and 0 <= waits[1] <= 2
    assert "status: done" in outcome.result.polling.stdout
    assert (tmp_path / "w" / "T1.md").exists()
