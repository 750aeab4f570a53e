"""One agent invocation under the engine's safety nets: a per-invocation timeout the
engine enforces whatever the agent's own settings, and retries of transient failures
with capped, jittered backoff.

The timeout is a watchdog around the real dispatcher: when it fires, the dispatch is
cancelled, which stops the agent's whole process group (TERM, then KILL), and the
result is a ``timeout`` :class:`DispatchResult` holding what the agent printed so far.
A failed attempt whose exit code or output the ``retry:`` policy calls transient is run
again after :func:`~interlock.runtime.ralph.limits.backoff_delay`; the wait goes through
an injectable ``sleep`` (tests pass one that only records).

The agent is run by a :class:`Runner`: :func:`dispatch_runner` (the real dispatcher), or
a cassette's recorder/player (:mod:`interlock.runtime.agents.cassette`).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from interlock.machines.durations import format_duration
from interlock.runtime.agents.adapters import agent_command, polling_for
from interlock.runtime.agents.config import AgentConfig
from interlock.runtime.dispatch import AgentCommand, Dispatch, DispatchResult
from interlock.runtime.dispatch.config import PollingConfiguration
from interlock.runtime.dispatch.polling import AgentRegistry
from interlock.runtime.dispatch.result import PollingResult
from interlock.runtime.ralph.config import RalphConfig
from interlock.runtime.ralph.limits import Random, backoff_delay, is_transient


class Runner(Protocol):
    """Runs one prepared :class:`Dispatch` to its result (the real dispatcher, or a
    cassette recorder wrapping it)."""

    async def __call__(self, dispatch: Dispatch) -> DispatchResult: ...


async def dispatch_runner(dispatch: Dispatch) -> DispatchResult:
    """The real dispatcher."""
    return await dispatch.run()


def timed_out_result(dispatch: Dispatch, timeout: float, elapsed: float) -> DispatchResult:
    """The result of a dispatch the engine's watchdog cancelled: status ``timeout``,
    with the output the agent had printed."""
    stdout = dispatch.buffer.streams["stdout"]
    stderr = dispatch.buffer.streams["stderr"]
    note = f"interlock: invocation timeout ({format_duration(timeout)}) reached; agent killed\n"
    polling = PollingResult(success=False, stdout=stdout.text(), stderr=stderr.text() + note,
                            exit_code=None, elapsed_time=round(elapsed, 6),
                            status="timeout", completion_method="timeout")
    return DispatchResult(polling=polling, dispatch_id=dispatch.dispatch_id,
                          name=dispatch.command.name, argv=dispatch.command.argv,
                          stdout_bytes=stdout.total_bytes, stderr_bytes=stderr.total_bytes,
                          error=f"invocation timeout ({format_duration(timeout)}) reached")


async def run_with_timeout(dispatch: Dispatch, timeout: float | None,
                           runner: Runner = dispatch_runner) -> tuple[DispatchResult, bool]:
    """Run ``dispatch``; past ``timeout`` seconds (None: no watchdog) cancel it, which
    stops the agent's process group. Returns the result and whether the watchdog fired."""
    started = time.monotonic()
    if timeout is None:
        return await runner(dispatch), False
    try:
        return await asyncio.wait_for(runner(dispatch), timeout), False
    except TimeoutError:
        return timed_out_result(dispatch, timeout, time.monotonic() - started), True


@dataclass(frozen=True, slots=True)
class Attempt:
    """One try: its result, whether the watchdog killed it, whether its failure was
    transient, and the backoff waited after it (0 for the last)."""

    result: DispatchResult
    timed_out: bool
    transient: bool
    delay_after: float = 0.0


@dataclass(frozen=True, slots=True)
class InvocationOutcome:
    """Every try of one invocation; ``result`` is the last one's. ``failure`` is None on
    success, else a line saying why the invocation failed."""

    attempts: tuple[Attempt, ...]
    failure: str | None

    @property
    def result(self) -> DispatchResult:
        return self.attempts[-1].result

    @property
    def ok(self) -> bool:
        return self.failure is None

    @property
    def timed_out(self) -> bool:
        return self.attempts[-1].timed_out


def _failure(attempt: Attempt, tries: int, timeout: float | None) -> str | None:
    polling = attempt.result.polling
    if polling.success:
        return None
    if attempt.timed_out and timeout is not None:
        return f"killed by the invocation timeout ({format_duration(timeout)})"
    what = (f"exit {polling.exit_code}" if polling.exit_code is not None
            else f"status {polling.status}")
    if attempt.transient:
        return f"transient failure ({what}) persisted after {tries} attempts"
    return f"agent failed ({what})"


async def invoke(command: AgentCommand, polling: PollingConfiguration, config: RalphConfig, *,
                 runner: Runner = dispatch_runner,
                 sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
                 rng: Random | None = None, spill_dir: Path | None = None,
                 registry: AgentRegistry | None = None) -> InvocationOutcome:
    """Run ``command`` under ``config``'s invocation timeout and retry policy."""
    policy = config.retry
    attempts: list[Attempt] = []
    for number in range(1, policy.attempts + 1):
        dispatch = Dispatch(command, polling, spill_dir=spill_dir, registry=registry)
        result, timed_out = await run_with_timeout(dispatch, config.invocation_timeout, runner)
        p = result.polling
        transient = (not p.success and not timed_out
                     and is_transient(p.exit_code, p.stdout + p.stderr, policy))
        attempt = Attempt(result, timed_out, transient)
        if not transient or number == policy.attempts:
            attempts.append(attempt)
            break
        delay = backoff_delay(number, policy, rng)
        attempts.append(Attempt(result, timed_out, transient, delay))
        await sleep(delay)
    return InvocationOutcome(tuple(attempts),
                             _failure(attempts[-1], len(attempts), config.invocation_timeout))


async def invoke_agent(agent: AgentConfig, prompt: str, config: RalphConfig, *,
                       name: str | None = None, base: PollingConfiguration | None = None,
                       runner: Runner = dispatch_runner,
                       sleep: Callable[[float], Awaitable[None]] = asyncio.sleep,
                       rng: Random | None = None, spill_dir: Path | None = None,
                       registry: AgentRegistry | None = None) -> InvocationOutcome:
    """:func:`invoke` for a configured agent and its prompt (``agent_command`` and
    ``polling_for`` of the agents room); read the answer with
    ``adapters.read_result(agent, outcome.result)``."""
    return await invoke(agent_command(agent, prompt, name=name), polling_for(agent, base),
                        config, runner=runner, sleep=sleep, rng=rng, spill_dir=spill_dir,
                        registry=registry)
