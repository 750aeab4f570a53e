"""``ralph_subagent``'s runtime side: its bindings (:mod:`interlock.runtime.ralph.subagent`),
for ``interlock run ralph_subagent [--demo]`` and for the orchestrator's ``invoke:
machine: ralph_subagent`` through the façade.

A subagent session works in the Ralph session named by its ``session`` context field;
run on its own (``--demo``) it makes one, ``.ralph-sessions/<session id>/``, whose
progress holds the demo task, and its Implement invokes the role's agent as always (the
offline demo executor without an interlock.yaml), so the lifecycle runs Step 0 to Verify
for real and ends ``completed``.
"""

from __future__ import annotations

from interlock.machines.bindings import Bindings
from interlock.runtime.config.ralph import load_ralph_config
from interlock.runtime.engine.builtin import Builtin, BuiltinSetup, DemoDriver
from interlock.runtime.ralph.folder import RalphFolder, Task
from interlock.runtime.ralph.subagent import subagent_bindings

DEMO_TASK = {"id": "T1", "title": "write the parser"}


def _bindings(setup: BuiltinSetup) -> Bindings:
    if setup.demo:
        folder = RalphFolder(setup.root, setup.session_id)
        if not folder.exists():
            folder.create(DEMO_TASK["title"])
            folder.open_iteration(1)
            folder.write_progress(1, [Task(DEMO_TASK["id"], DEMO_TASK["title"])])
    return subagent_bindings(setup.root, load_ralph_config(setup.root),
                             default_session=setup.session_id)


async def _demo(driver: DemoDriver) -> None:
    """Nothing to stand in for: the demo executor answers."""
    await driver.wait_for("completed", "paused", "blocked", "failed", timeout=600.0)


BUILTIN = Builtin(
    name="ralph_subagent",
    bindings=_bindings,
    demo_context={"task": DEMO_TASK},
    demo=_demo,
)
