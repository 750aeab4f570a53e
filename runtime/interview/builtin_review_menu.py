"""The runtime side of ``review_menu``: staging into the store, and a re-run that consumes
the staged config exactly once (``apply_staged_config``; running the unit itself is the
unit's job). ``--demo`` plays seed 000 end to end: the menu choice ``retry``, the forked
poller interview (a ``poller_interview`` session of its own, answered by the script: A, A,
Close, D, wrong metric + too specific, Correct), the re-run with the staged correction,
then ``accept``."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from interlock.machines.bindings import Bindings, Call
from interlock.runtime.engine.builtin import Builtin, BuiltinSetup, DemoDriver
from interlock.runtime.interview.bindings import menu_bindings
from interlock.runtime.interview.builtin_poller_interview import stager

DEMO_ANSWERS: tuple[Any, ...] = ("A", "A", "X", "D", ["B", "C"], "A")


def bindings(setup: BuiltinSetup) -> Bindings:
    from interlock.runtime.store import open_store

    url = setup.options.get("store")

    def fork(call: Call) -> str:
        return f"poller-{setup.session_id}"

    def apply_staged_config(call: Call) -> None:
        node = str(call.context.get("node_id") or "")
        store = open_store(url if isinstance(url, str) else None, setup.root)
        try:
            found = store.consume_staged_config(node)
        finally:
            store.close()
        if found is not None:
            call.context["applied"] = found

    bound = dict(menu_bindings(stager(setup), fork))
    bound["apply_staged_config"] = apply_staged_config
    return bound


def _interview(poller_id: str, context: dict[str, Any], root: Path) -> str:
    """Run the forked interview to its end with the scripted answers; its resolution."""
    from interlock.runtime.interview.bindings import poller_bindings
    from interlock.runtime.interview.driver import Machines, run_interview
    from interlock.runtime.interview.frontends import ScriptedAnswers
    from interlock.runtime.store import open_store

    store = open_store(None, root)
    try:
        machines = Machines(store, root)
        runner = machines.open("poller_interview", poller_id, poller_bindings(machines.stage),
                               context)
        return run_interview(runner, ScriptedAnswers(list(DEMO_ANSWERS))).resolution
    finally:
        store.close()


async def play(driver: DemoDriver) -> None:
    await driver.wait_for("reviewing")
    driver.send("retry")
    await driver.wait_for("interviewing")
    ctx = driver.context
    poller = dict(ctx.get("poller_context") or {})
    context = {"trigger": poller.get("trigger", "retry"), "source_node": ctx.get("node_id"),
               "unit": ctx.get("unit"), "poller_id": ctx.get("poller_id"),
               "output": ctx.get("output"), "menu_session": driver.session_id}
    resolution = await asyncio.to_thread(_interview, str(ctx.get("poller_id")), context,
                                         Path.cwd())
    driver.send("resolved" if resolution == "resolved" else "aborted")
    await driver.wait_for("rerunning")
    driver.send("output_ready")  # the unit re-ran with the staged correction
    while "rerunning" in driver.active:
        await asyncio.sleep(0.01)
    await driver.wait_for("reviewing")
    driver.send("accept")


BUILTIN = Builtin(
    name="review_menu", bindings=bindings,
    demo_context={"node_id": "node_14", "unit": "rif",
                  "output": "# Sprite sheet\nA design for 36 hex renders, no numbers yet.\n"},
    demo=play,
)
