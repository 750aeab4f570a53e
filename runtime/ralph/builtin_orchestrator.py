"""``ralph_orchestrator``'s runtime side for ``interlock run ralph_orchestrator [--demo]``.

Its bindings are the Ralph session's (:mod:`interlock.runtime.ralph.bindings`), on the
folder ``.ralph-sessions/<session id>/`` (made with the demo request when missing). Its
invoking states run ``ralph_subagent`` sessions through the façade's machine resolver
(that built-in's bindings) and their agents through the façade's agent resolver: with no
interlock.yaml the offline demo roles. So ``--demo`` needs no stand-in: the session runs
to COMPLETE by itself (a two-task request; the knowledge approval times out, so staged
knowledge is carried forward).

The session is assembled as ``interlock ralph run`` assembles it
(:meth:`~interlock.runtime.ralph.runner.RalphRun.open`): the same mailbox and feed for the
orchestrator and its subagents, the limits and staged corrections of the project's
``ralph:`` settings; a subagent whose agent fails pauses the session, which then waits
(``interlock ralph resume ID``).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping
from typing import Any

from interlock.machines.bindings import Bindings
from interlock.runtime.config.project_file import PROJECT_FILE
from interlock.runtime.config.ralph import load_ralph_config
from interlock.runtime.engine.builtin import Builtin, BuiltinSetup, DemoDriver
from interlock.runtime.engine.errors import SessionError
from interlock.runtime.engine.host import SessionHost
from interlock.runtime.engine.session import Step
from interlock.runtime.ralph.bindings import make_bindings
from interlock.runtime.ralph.folder import RalphFolder
from interlock.runtime.ralph.runner import RalphRun
from interlock.runtime.ralph.worktrees import GitError
from interlock.runtime.store import Store

DEMO_REQUEST = "write the parser; test the parser"


def _folder(setup: BuiltinSetup) -> RalphFolder:
    folder = RalphFolder(setup.root, setup.session_id)
    if not folder.exists():
        folder.create(DEMO_REQUEST)
    return folder


def _bindings(setup: BuiltinSetup) -> Bindings:
    """The orchestrator's bindings alone (a session run with bindings of its caller's)."""
    return make_bindings(_folder(setup))


async def _open_host(setup: BuiltinSetup, store: Store, *,
                     context: Mapping[str, Any] | None, stop: asyncio.Event | None,
                     on_step: Callable[[Step], None] | None,
                     on_note: Callable[[str], None] | None) -> SessionHost:
    _folder(setup)
    config = load_ralph_config(setup.root / PROJECT_FILE)
    run = RalphRun(setup.root, setup.session_id, config, store_url=setup.store_url,
                   on_note=on_note, wait=True)
    try:
        return await run.open(store, context=context, stop=stop, on_step=on_step)
    except GitError as exc:  # ralph.parallel > 1 where the tasks cannot be isolated
        raise SessionError(str(exc)) from None


async def _demo(driver: DemoDriver) -> None:
    """Nothing to stand in for: the demo agents answer every invocation."""
    await driver.wait_for("COMPLETE", timeout=600.0)


BUILTIN = Builtin(
    name="ralph_orchestrator",
    bindings=_bindings,
    demo_context={"knowledge_approval_timeout": "500ms"},
    demo=_demo,
    open_host=_open_host,
)
