"""One call of an agent process for a subagent: launch, timeout, cancel, retry, record.

The agent runs in a process group of its own (``start_new_session``), its prompt on stdin;
the call ends when it exits. A timeout or a cancel (ABORT, a STEER that restarts the step)
stops the whole group at once (SIGKILL), so nothing is left behind. A non-zero exit or a
spawn error is transient: retried per the :class:`RetryPolicy` with capped, jittered
exponential backoff. Which adapter builds the argv and reads the answer is the agents
room's business (:func:`interlock.runtime.agents.adapters.adapter_for`).
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import os
import signal
import time
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from interlock.runtime.agents.adapters import adapter_for
from interlock.runtime.agents.base import Usage
from interlock.runtime.agents.config import AgentConfig
from interlock.runtime.host.procfs import start_ticks
from interlock.runtime.ralph.config import RalphConfig, RetryPolicy
from interlock.runtime.ralph.limits import backoff_delay, is_transient


@dataclass(slots=True)
class AgentCall:
    """What one agent call gave: the parsed answer (a mapping, or None when unreadable),
    the answer text, usage, exit code, error, attempts and the seconds it took."""

    prompt: str
    answer: dict[str, Any] | None = None
    text: str = ""
    usage: Usage = field(default_factory=Usage)
    exit_code: int | None = None
    error: str | None = None
    attempts: int = 0
    elapsed: float = 0.0
    output: str = ""  # stdout and stderr of a failed call, for the retry policy

    @property
    def ok(self) -> bool:
        return self.error is None and self.answer is not None


#: Where the agents running for this Ralph session are listed (``<pid>-<start ticks>``),
#: so that a runner started after a crash stops those its dead predecessor left.
AGENTS_DIR: contextvars.ContextVar[Path | None] = contextvars.ContextVar("ralph_agents",
                                                                         default=None)


def _listed(pid: int) -> Path | None:
    folder = AGENTS_DIR.get()
    ticks = start_ticks(pid)
    if folder is None or ticks is None:
        return None
    folder.mkdir(parents=True, exist_ok=True)
    entry = folder / f"{pid}-{ticks}"
    entry.touch()
    return entry


def reap_agents(folder: Path) -> list[int]:
    """Stop the process groups of agents listed in ``folder`` that still run (a dead
    runner's); returns their pids."""
    stopped = []
    for entry in sorted(folder.glob("*-*")) if folder.is_dir() else []:
        pid_text, _, ticks = entry.name.partition("-")
        if pid_text.isdigit() and start_ticks(int(pid_text)) == ticks:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(int(pid_text), signal.SIGKILL)
                stopped.append(int(pid_text))
        entry.unlink(missing_ok=True)
    return stopped


Caller = Callable[[AgentConfig, str, float | None, RetryPolicy], Coroutine[Any, Any, AgentCall]]


def parse_answer(text: str) -> dict[str, Any] | None:
    """The first YAML (or JSON) document of ``text`` when it is a mapping."""
    try:
        for doc in yaml.safe_load_all(text):
            return doc if isinstance(doc, dict) else None
    except yaml.YAMLError:
        return None
    return None


def _kill_group(proc: asyncio.subprocess.Process) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)


async def run_once(config: AgentConfig, prompt: str, timeout: float | None) -> AgentCall:
    """One attempt; CancelledError after the process group is stopped."""
    adapter = adapter_for(config)
    launch = adapter.launch(config, prompt)
    call = AgentCall(prompt, attempts=1)
    started = time.monotonic()
    try:
        proc = await asyncio.create_subprocess_exec(
            *launch.argv, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE, start_new_session=True,
            env={**os.environ, **launch.env}, cwd=launch.cwd)
    except OSError as exc:
        call.error = f"cannot start {launch.argv[0]}: {exc.strerror or exc}"
        return call
    listed = _listed(proc.pid)
    try:
        out, err = await asyncio.wait_for(
            proc.communicate((launch.stdin or "").encode("utf-8")), timeout)
    except TimeoutError:
        _kill_group(proc)
        await proc.wait()
        call.error = f"timed out after {timeout or 0:g}s (process group killed)"
        call.exit_code = proc.returncode
        call.elapsed = time.monotonic() - started
        return call
    except asyncio.CancelledError:
        _kill_group(proc)
        with contextlib.suppress(Exception):
            await asyncio.shield(proc.wait())
        raise
    finally:
        if proc.returncode is None:
            _kill_group(proc)
        if listed is not None:
            listed.unlink(missing_ok=True)
    _kill_group(proc)  # anything the agent left running in its group
    call.elapsed = time.monotonic() - started
    call.exit_code = proc.returncode
    output = adapter.read(out.decode("utf-8", "replace"))
    call.text, call.usage = output.answer, output.usage
    if proc.returncode != 0 or output.error:
        call.output = out.decode("utf-8", "replace") + err.decode("utf-8", "replace")
        tail = err.decode("utf-8", "replace").strip().splitlines()
        call.error = output.error or (f"exit {proc.returncode}" +
                                      (f": {tail[-1]}" if tail else ""))
        return call
    call.answer = parse_answer(output.answer)
    if call.answer is None:
        call.error = "the answer is not a YAML or JSON mapping"
    return call


async def call_agent(config: AgentConfig, prompt: str, timeout: float | None,
                     retry: RetryPolicy) -> AgentCall:
    """Call the agent, retrying the failures the ``retry:`` policy calls transient (exit
    code or output pattern; :func:`~interlock.runtime.ralph.limits.is_transient`) after a
    capped, jittered backoff (:func:`~interlock.runtime.ralph.limits.backoff_delay`). A
    timeout is never retried: a hung agent would hang again."""
    attempt = 0
    while True:
        attempt += 1
        call = await run_once(config, prompt, timeout)
        call.attempts = attempt
        timed_out = call.error is not None and call.error.startswith("timed out")
        transient = (call.error is not None and not timed_out
                     and is_transient(call.exit_code, call.output, retry))
        if not transient or attempt >= retry.attempts:
            return call
        await asyncio.sleep(backoff_delay(attempt, retry))


def dispatch_caller(config: RalphConfig, runner: Any) -> Caller:
    """A :data:`Caller` through the real dispatcher and the engine's safety nets
    (:func:`interlock.runtime.ralph.invocation.invoke_agent`), with ``runner`` in front of
    it: a cassette's recorder or player (:mod:`interlock.runtime.agents.cassette`), so
    ``ralph run --record/--replay`` records or replays every agent call."""
    from interlock.runtime.agents.adapters import read_result
    from interlock.runtime.ralph.invocation import invoke_agent

    async def call(agent: AgentConfig, prompt: str, timeout: float | None,
                   retry: RetryPolicy) -> AgentCall:
        started = time.monotonic()
        outcome = await invoke_agent(agent, prompt, config, runner=runner)
        result = outcome.result
        output = read_result(agent, result)
        made = AgentCall(prompt, text=output.answer, usage=output.usage,
                         exit_code=result.polling.exit_code, error=outcome.failure,
                         attempts=len(outcome.attempts), elapsed=time.monotonic() - started)
        if made.error is None:
            made.answer = parse_answer(output.answer)
            if made.answer is None:
                made.error = "the answer is not a YAML or JSON mapping"
        return made

    return call
