"""``ralph_subagent``'s runtime side for ``interlock run ralph_subagent [--demo]``.

The bindings keep the lifecycle's context: STEER and INFO are taken into the constraints
and facts, a STEER is classified by its first word like the demo executor does (``redo:``
invalidates the work, ``scope:`` changes the scope, anything else adds), blockers are
recorded with their reason. The ``--demo`` stand-in plays the outside world of one
Executor invocation: it answers every step with ``step_done`` (the engine raises
``polled`` at every boundary), so the lifecycle runs Step 0 to Verify and ends
``completed``. (``interlock ralph run`` runs the same lifecycle in-process:
:mod:`interlock.runtime.ralph.subagent`.)
"""

from __future__ import annotations

import asyncio

from interlock.machines.bindings import Bindings, Call
from interlock.runtime.agents.roles import classify_steer
from interlock.runtime.builtin.machines import Builtin, BuiltinSetup, DemoDriver

STEPS = ("reading_context", "marking_wip", "implementing", "verifying")


def _bindings(setup: BuiltinSetup) -> Bindings:
    def message(c: Call) -> str:
        return str((c.data or {}).get("message") or "")

    def ingest_steer(c: Call) -> None:
        c.context["steer_messages"].append(message(c))

    def ingest_info(c: Call) -> None:
        c.context["info_messages"].append(message(c))

    def note_restart(c: Call) -> None:
        c.context["restarts"] += 1

    def record_scope_blocker(c: Call) -> None:
        c.context["blockers"].append(f"STEER scope change: {message(c)}")
        c.context["blocked_reason"] = "scope_change"

    def record_abort_blocker(c: Call) -> None:
        c.context["blockers"].append("Aborted by signal")
        c.context["blocked_reason"] = "aborted"

    def record_failure_blocker(c: Call) -> None:
        c.context["blockers"].append(str((c.data or {}).get("error") or "a step failed"))
        c.context["blocked_reason"] = "failed"

    def steer_changes_scope(c: Call) -> bool:
        return classify_steer(message(c)) == "scope"

    def steer_invalidates_work(c: Call) -> bool:
        return classify_steer(message(c)) == "invalidated"

    def noop(c: Call) -> None:
        return None

    return {
        "ingest_steer": ingest_steer, "ingest_info": ingest_info, "note_restart": note_restart,
        "record_scope_blocker": record_scope_blocker,
        "record_abort_blocker": record_abort_blocker,
        "record_failure_blocker": record_failure_blocker,
        "steer_changes_scope": steer_changes_scope,
        "steer_invalidates_work": steer_invalidates_work,
        **dict.fromkeys(("mark_in_progress_tasks_failed", "save_progress", "implement",
                         "mark_wip", "read_context", "verify", "write_report",
                         "record_verification"), noop),
    }


async def _demo(driver: DemoDriver) -> None:
    last: tuple[str, ...] | None = None
    while True:
        active = driver.active
        if any(s in active for s in ("completed", "paused", "blocked")):
            return
        if active != last:
            last = active
            if any(s in active for s in STEPS):
                driver.send("step_done")
        await asyncio.sleep(0.01)


BUILTIN = Builtin(
    name="ralph_subagent",
    bindings=_bindings,
    demo_context={"task": {"id": "T1", "title": "write the parser"}},
    demo=_demo,
)
