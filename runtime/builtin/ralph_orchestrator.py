"""``ralph_orchestrator``'s runtime side for ``interlock run ralph_orchestrator [--demo]``.

Its bindings are the Ralph session's (:mod:`interlock.runtime.ralph.bindings`), on the
folder ``.ralph-sessions/<session id>/`` (made with the demo request when missing). Its
invoking states run ``ralph_subagent`` sessions through the façade's machine resolver
(that built-in's bindings) and their agents through the façade's agent resolver: with no
interlock.yaml the offline demo roles. So ``--demo`` needs no stand-in: the session runs
to COMPLETE by itself (a two-task request; the knowledge approval times out, so staged
knowledge is carried forward). ``interlock ralph run`` runs the same spec with the Ralph
session's mailbox and limits.
"""

from __future__ import annotations

from interlock.machines.bindings import Bindings
from interlock.runtime.builtin.machines import Builtin, BuiltinSetup, DemoDriver
from interlock.runtime.ralph.bindings import make_bindings
from interlock.runtime.ralph.folder import RalphFolder

DEMO_REQUEST = "write the parser; test the parser"


def _bindings(setup: BuiltinSetup) -> Bindings:
    folder = RalphFolder(setup.root, setup.session_id)
    if not folder.exists():
        folder.create(DEMO_REQUEST)
    return make_bindings(folder)


async def _demo(driver: DemoDriver) -> None:
    """Nothing to stand in for: the demo agents answer every invocation."""
    await driver.wait_for("COMPLETE", timeout=600.0)


BUILTIN = Builtin(
    name="ralph_orchestrator",
    bindings=_bindings,
    demo_context={"knowledge_approval_timeout": "500ms"},
    demo=_demo,
)
