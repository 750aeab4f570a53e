"""Invoke tests: a spec around the fixture agent, a runner driven until a condition, and
process checks through /proc."""

from __future__ import annotations

import asyncio
import json
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from interlock.machines import Call
from interlock.runtime.agents.invoke import process_handlers
from interlock.runtime.engine.clock import Clock
from interlock.runtime.engine.runner import Runner
from interlock.runtime.engine.session import Step
from interlock.runtime.host.procfs import group_members, start_ticks
from interlock.runtime.store.base import Store

AGENT = Path(__file__).resolve().parent / "invoke" / "agent.py"
DEADLINE = 20.0  # a safety net, never a pace


def agent_argv(*args: str) -> list[str]:
    return [sys.executable, str(AGENT), *args]


def one_invoke_spec(argv: Sequence[str], *, on_resume: str = "adopt", timeout: str = "30s",
                    after: str | None = None, prompt: str = "Review {{ context.topic }}"
                    ) -> str:
    """working (invokes `review`) -> passed | failed | left (on `leave`) | idle (on
    `pause`, back on `resume`)."""
    timer = f"\n    after: {{{after}: {{actions: [tick], target: working}}}}" if after else ""
    return f"""
machine: invoking
initial: working
context:
  topic: {{type: str, default: tests}}
  ticks: {{type: int, default: 0}}
  outcome: {{type: dict, default: {{}}}}
states:
  working:
    invoke:
      id: review
      command: {json.dumps(list(argv))}
      prompt: {json.dumps(prompt)}
      timeout: {timeout}
      on_resume: {on_resume}{timer}
    on:
      done.invoke.review: {{target: passed, actions: [keep]}}
      error.invoke.review: {{target: failed, actions: [keep]}}
      leave: left
      pause: idle
  idle:
    on: {{resume: working}}
  passed: {{type: final}}
  failed: {{type: final}}
  left: {{type: final}}
"""


def keep(call: Call) -> None:
    call.context["outcome"] = dict(call.data)


def tick(call: Call) -> None:
    call.context["ticks"] += 1


def note(call: Call) -> None:
    """Write down a fan-out child's event: [event, index] (context field ``seen``)."""
    call.context["seen"] = [*call.context["seen"], [call.event, call.data.get("index")]]


BINDINGS: dict[str, Callable[[Call], None]] = {"keep": keep, "tick": tick, "note": note}


def open_runner(store: Store, spec: str, folder: Path, *, clock: Clock | None = None,
                session_id: str = "s1", owner: str | None = None) -> Runner:
    runner, _ = Runner.open(store, spec, str(folder / "spec.yaml"), session_id=session_id,
                            bindings=BINDINGS, clock=clock, owner=owner,
                            folder=folder / "session", invokers=process_handlers())
    return runner


def run_to_the_end(runner: Runner, store: Store) -> None:
    """What the crash-test runner scripts do once open: say "running", run the session
    until it is final (or the process is killed), close."""
    print("running", flush=True)
    try:
        asyncio.run(runner.run(poll=0.01))
    finally:
        runner.close()
        store.close()


def run_until(runner: Runner, done: Callable[[], bool], *, deadline: float = DEADLINE,
              during: Callable[[], None] | None = None) -> list[Step]:
    """Run the runner's loop until ``done()`` (checked after each step and every 5 ms) or
    the session is final; ``during`` runs on the loop every 5 ms."""
    steps: list[Step] = []

    async def main() -> None:
        stop = asyncio.Event()
        task = asyncio.create_task(runner.run(stop, poll=0.01, on_step=steps.append))
        limit = time.monotonic() + deadline
        while not done() and not task.done():
            if time.monotonic() > limit:
                stop.set()
                await task
                raise AssertionError(f"not done within {deadline}s; steps: {steps}")
            if during is not None:
                during()
            await asyncio.sleep(0.005)
        stop.set()
        await task

    asyncio.run(main())
    return steps


def alive(pid: int, ticks: str | None) -> bool:
    return ticks is not None and start_ticks(pid) == ticks


def group_gone(pgid: int) -> bool:
    return not any(True for _ in group_members(pgid))


def wait_for(condition: Callable[[], bool], deadline: float = DEADLINE) -> None:
    limit = time.monotonic() + deadline
    while not condition():
        if time.monotonic() > limit:
            raise AssertionError("condition not met in time")
        time.sleep(0.01)


def pids(path: Path) -> list[int]:
    return [int(line) for line in path.read_text().split()] if path.exists() else []


def outcome(store: Store, session_id: str = "s1") -> dict[str, Any]:
    return dict(store.get(session_id).snapshot["context"]["outcome"])
