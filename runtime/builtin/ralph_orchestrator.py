"""``ralph_orchestrator``'s runtime side for ``interlock run ralph_orchestrator [--demo]``.

Its bindings are the Ralph session's (:mod:`interlock.runtime.ralph.bindings`), on the
folder ``.ralph-sessions/<session id>/`` (made with the demo request when missing). The
``--demo`` stand-in does what ``interlock ralph run`` does beside the runner, in its
simplest form: it carries out each invocation the session asks for (the engine raises
``polled`` at checkpoints) with the offline demo agents, until COMPLETE (a two-task request; the
knowledge approval times out, so staged knowledge is carried forward).
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

from interlock.machines.bindings import Bindings
from interlock.runtime.builtin.machines import Builtin, BuiltinSetup, DemoDriver
from interlock.runtime.ralph.bindings import make_bindings
from interlock.runtime.ralph.config import RalphConfig, role_agents
from interlock.runtime.ralph.folder import RalphFolder
from interlock.runtime.ralph.subagent import Subagent

DEMO_REQUEST = "write the parser; test the parser"


def _bindings(setup: BuiltinSetup) -> Bindings:
    folder = RalphFolder(setup.root, setup.session_id)
    if not folder.exists():
        folder.create(DEMO_REQUEST)
    return make_bindings(folder)


async def _demo(driver: DemoDriver) -> None:
    folder: RalphFolder | None = None
    done: set[int] = set()
    while True:
        active = driver.active
        if "COMPLETE" in active:
            return
        ctx: dict[str, Any] = dict(driver.context)
        if folder is None:
            folder = RalphFolder(Path.cwd(), driver.session_id)
        invocation = ctx.get("invocation")
        if invocation and int(invocation["seq"]) not in done:
            done.add(int(invocation["seq"]))
            role = str(invocation["role"])
            sub = Subagent(folder, role, role_agents(folder.root)[role], RalphConfig(),
                           invocation, ctx)
            outcome = await sub.run()
            driver.send(outcome.event(), outcome.data(int(invocation["seq"])))
        await asyncio.sleep(0.02)


BUILTIN = Builtin(
    name="ralph_orchestrator",
    bindings=_bindings,
    demo_context={"knowledge_approval_timeout": "500ms"},
    demo=_demo,
)
