"""The runtime side of ``poller_interview``: staging into the store. The poller agent is
the spec's invoke (``agent: poller``: the ``poller`` agent of interlock.yaml, else the demo
questioner), resolved by the runner; ``--demo`` answers the seed's path: category A,
narrow A, Close, D (combination: wrong metric + too specific), Correct."""

from __future__ import annotations

from typing import Any

from interlock.machines.bindings import Bindings
from interlock.runtime.engine.builtin import Builtin, BuiltinSetup, DemoDriver
from interlock.runtime.interview.bindings import StageConfig, poller_bindings


def stager(setup: BuiltinSetup) -> StageConfig:
    """Write staged_configs[node] to the session's store (the default one at the root,
    unless the setup's options name a store URL)."""
    from interlock.runtime.store import open_store

    url = setup.options.get("store")

    def stage(node: str, config: dict[str, Any]) -> None:
        import time

        store = open_store(url if isinstance(url, str) else None, setup.root)
        try:
            store.stage_config(node, dict(config), time.time())
        finally:
            store.close()

    return stage


def bindings(setup: BuiltinSetup) -> Bindings:
    return poller_bindings(stager(setup))


# (state to wait for, event, data): the seed's path through the interview
SEED_PATH: tuple[tuple[str, str, dict[str, object]], ...] = (
    ("category_question", "answer", {"answer": "A"}),
    ("narrow_question", "answer", {"answer": "A"}),
    ("echo", "close", {}),
    ("close_menu", "combination", {}),
    ("multi_select", "toggle", {"issue": "wrong_metric"}),
    ("multi_select", "toggle", {"issue": "too_specific"}),
    ("multi_select", "confirm", {}),
    ("echo", "correct", {}),
)


async def play(driver: DemoDriver) -> None:
    """The player of seed 000, answering each question once it is on screen."""
    for state, event, data in SEED_PATH:
        await driver.wait_for(state, timeout=60)
        driver.send(event, data)
        if event in ("answer", "close", "combination", "toggle"):
            await _until_taken(driver, state, event)


async def _until_taken(driver: DemoDriver, state: str, event: str) -> None:
    """Wait until the session has moved on from ``state`` (or, for a toggle, until the
    toggle is in the context), so that the next wait_for sees the next screen."""
    import asyncio

    loop = asyncio.get_running_loop()
    deadline = loop.time() + 60
    before = list(driver.context.get("selected_issues") or [])
    while loop.time() < deadline:
        if event == "toggle":
            if list(driver.context.get("selected_issues") or []) != before:
                return
        elif state not in driver.active:
            return
        await asyncio.sleep(0.01)
    raise TimeoutError(f"the demo's {event} was not taken in {state}")


BUILTIN = Builtin(
    name="poller_interview", bindings=bindings,
    demo_context={"trigger": "retry", "source_node": "node_14", "unit": "rif",
                  "output": "A sprite-sheet design without performance numbers."},
    demo=play,
)
