"""A session takes the signals addressed to ALL and to its machine's own ``agent`` context
field (seed 004's target-aware routing), without --signals-as."""

from __future__ import annotations

import asyncio
from pathlib import Path

from interlock import runtime
from interlock.machines import Call

SPEC = """\
machine: executor
initial: working
context:
  agent: {type: str, default: Ralph-Executor}
  notes: {type: list, default: []}
states:
  working:
    on:
      signal.INFO: {actions: [note]}
      signal.ABORT: aborted
  aborted: {type: final}
"""


def note(call: Call) -> None:
    call.context["notes"].append(call.data["message"])


async def _wait_running(session_id: str, root: Path) -> None:
    for _ in range(200):
        listed = {s.id: s.status for s in await runtime.sessions(root=root)}
        if listed.get(session_id) == "running":
            return
        await asyncio.sleep(0.02)
    raise AssertionError("the session never ran")


def test_signals_for_the_machines_agent_are_taken_others_wait(tmp_path: Path) -> None:
    (tmp_path / "executor.yaml").write_text(SPEC)
    folder = tmp_path / ".interlock" / "sessions" / "x1"

    async def scenario() -> runtime.RunResult:
        run = asyncio.create_task(runtime.start(
            tmp_path / "executor.yaml", session_id="x1", bindings={"note": note},
            root=tmp_path))
        await _wait_running("x1", tmp_path)
        for target, message in (("Ralph-Planner", "not mine"), ("Ralph-Executor", "mine"),
                                ("ALL", "everyone's")):
            posted = runtime.post_signal(folder, "INFO", message, target=target)
            if target != "Ralph-Planner":
                assert runtime.wait_for_receipt(posted, 10) is not None
        runtime.post_signal(folder, "ABORT", target="Ralph-Executor")
        return await asyncio.wait_for(run, 20)

    result = asyncio.run(scenario())
    assert result.outcome == "finished" and result.active == ("aborted",)
    info = asyncio.run(runtime.status("x1", root=tmp_path))
    assert info.context["notes"] == ["mine", "everyone's"]
    waiting = [p.read_text() for p in (folder / "signals" / "inputs").glob("signal.*.yaml")]
    assert len(waiting) == 1 and "not mine" in waiting[0]
