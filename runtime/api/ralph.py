"""Ralph sessions through the façade: init, run, resume, status, poll (seed 004).

A Ralph session is an orchestrator session (``ralph_orchestrator``) in the normal store
whose folder is ``.ralph-sessions/<ID>/`` in the working directory; its mailbox is that
folder's ``signals/``. Without ``interlock.yaml`` every role runs its offline demo agent.
"""

from __future__ import annotations

import asyncio
import secrets
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from interlock.runtime.api.common import opened_store, root_of, translated
from interlock.runtime.api.errors import AgentsNotReady, Conflict, NotFound, UsageError
from interlock.runtime.host.project_file import PROJECT_FILE
from interlock.runtime.ralph.config import (
    IDENTITIES,
    RalphConfigError,
    load_ralph_config,
)
from interlock.runtime.ralph.feed import take_signals
from interlock.runtime.ralph.folder import RalphFolder, now_iso
from interlock.runtime.ralph.runner import RalphResult, RalphRun
from interlock.runtime.signals.model import SignalError, check_identifier

__all__ = [
    "RalphResult",
    "ralph_corrected",
    "ralph_folder",
    "ralph_init",
    "ralph_poll",
    "ralph_resume",
    "ralph_run",
    "ralph_status",
    "ralph_task_report",
    "ralph_watch",
]


def _folder(session_id: str, root: Path | str | None) -> RalphFolder:
    try:
        check_identifier(session_id, "Ralph session id")
    except SignalError as exc:
        raise UsageError(str(exc)) from None
    folder = RalphFolder(root_of(root), session_id)
    if not folder.exists():
        raise NotFound(f"no Ralph session {session_id!r} in {folder.path.parent} "
                       "(interlock ralph init --request TEXT makes one)")
    return folder


def ralph_folder(session_id: str, *, root: Path | str | None = None) -> Path:
    """The folder ``.ralph-sessions/<ID>/`` of an existing Ralph session."""
    return _folder(session_id, root).path


def ralph_init(request: str, *, session_id: str | None = None,
               root: Path | str | None = None) -> str:
    """Create ``.ralph-sessions/<ID>/`` for ``request``; returns the ID."""
    if not request.strip():
        raise UsageError("the request is empty (--request TEXT or --request-file F)")
    ident = session_id or (f"ralph-{datetime.now(UTC):%y%m%d-%H%M%S}-"
                           f"{secrets.token_hex(2)}")
    try:
        check_identifier(ident, "--id")
    except SignalError as exc:
        raise UsageError(str(exc)) from None
    folder = RalphFolder(root_of(root), ident)
    if folder.exists():
        raise Conflict(f"Ralph session {ident!r} exists already in {folder.path}")
    folder.create(request)
    return ident


async def ralph_run(session_id: str, *, max_iterations: int | None = None,
                    max_runtime: float | None = None, max_cost: float | None = None,
                    record: Path | str | None = None, replay: Path | str | None = None,
                    store: str | None = None,
                    root: Path | str | None = None, stop: asyncio.Event | None = None,
                    on_note: Callable[[str], None] | None = None,
                    on_review: Callable[[list[str]], bool] | None = None,
                    wait: bool = False) -> RalphResult:
    """Run the session until COMPLETE (completed or aborted), a limit, or ``stop``. A
    session paused by a signal waits here; one paused because a subagent's agent failed
    (not logged in, a refused permission: ``paused_for`` in metadata.yaml) ends the run
    with outcome ``paused`` unless ``wait``, and a later run tries that call again.
    ``record``/``replay``: a cassette file that every agent
    invocation is recorded to or replayed from (docs/ralph.md). ``on_review``: the review
    menu for rejected tasks (``ralph.review_rejections``), called in a worker thread with
    their ids; each review ends with :func:`ralph_corrected`; False stops the run."""
    folder = _folder(session_id, root)
    try:
        config = load_ralph_config(folder.root / PROJECT_FILE).with_overrides(
            max_iterations=max_iterations, max_runtime=max_runtime, max_cost=max_cost)
    except RalphConfigError as exc:
        raise UsageError(str(exc)) from None
    wrap = None
    if record is not None or replay is not None:
        from interlock.runtime.agents.cassette import CassetteError, cassette

        try:
            continued = "limits" in folder.metadata()  # it ran before: go on from there
            tape = cassette(record=record, replay=replay, root=folder.root,
                            continued=continued)
        except (ValueError, CassetteError) as exc:
            raise UsageError(str(exc)) from None
        wrap = tape.wrap if tape is not None else None
    meta = folder.metadata()
    if meta.get("status") in ("completed", "aborted"):
        return RalphResult(session_id, str(meta["status"]))
    if replay is None:  # a replayed session calls no agent
        await _check_roles(folder.root, on_note)
    if meta.get("paused_for") and meta.get("state") == "PAUSED":  # fixed since, or not
        with opened_store(store, folder.root) as opened, translated():
            opened.enqueue(session_id, "resume", {"message": None}, time.time())
    with translated():
        return await RalphRun(folder.root, session_id, config, store_url=store,
                              agents=wrap, on_note=on_note, on_review=on_review,
                              wait=wait).run(stop)


async def _check_roles(root: Path, on_note: Callable[[str], None] | None) -> None:
    """``interlock agents check --ralph`` before the first call: each role's line goes to
    ``on_note`` (which agent it uses); AgentsNotReady (exit 4) naming every problem."""
    from interlock.runtime.api.agents import agents_check

    checks = await asyncio.to_thread(agents_check, root=root, roles=True)
    for check in checks:
        if on_note is not None:
            on_note(check.line())
    problems = [check.line().lstrip("✗ ") for check in checks if not check.ok]
    if problems:
        more = f" (and {len(problems) - 1} more role(s))" if len(problems) > 1 else ""
        raise AgentsNotReady(f"{problems[0]}{more}: fix it, then run again "
                             "(`interlock agents check --ralph` lists every role)")


async def ralph_resume(session_id: str, *, message: str | None = None,
                       store: str | None = None, root: Path | str | None = None) -> bool:
    """Queue the spec's ``resume`` event (clears a PAUSE; ``message`` goes to the
    subagent re-invoked). Returns whether a live runner holds the session (else the
    caller starts one: :func:`ralph_run`)."""
    folder = _folder(session_id, root)
    with opened_store(store, folder.root) as opened, translated():
        try:
            opened.get(session_id)
        except Exception:
            raise Conflict(f"Ralph session {session_id} has not run yet: "
                           f"interlock ralph run {session_id}") from None
        opened.enqueue(session_id, "resume", {"message": message}, time.time())
    from interlock.runtime.api.sessions import status as session_status

    info = await session_status(session_id, store=store, root=folder.root)
    return info.status == "running"


def ralph_corrected(session_id: str, task_id: str, *, store: str | None = None,
                    root: Path | str | None = None) -> bool:
    """The human's review of rejected task ``task_id`` ended: when the session waits for
    its correction (``ralph.review_rejections``), queue ``corrected`` (noting whether a
    correction was staged for the task's next Executor). Returns whether it was queued."""
    from interlock.runtime.api.interview import task_node

    folder = _folder(session_id, root)
    if not str(folder.metadata().get("waiting_for") or "").startswith("corrections"):
        return False
    node = task_node(session_id, task_id)
    with opened_store(store, folder.root) as opened, translated():
        staged = opened.staged_config(node) is not None
        resolution = (f"correction staged (interlock staged {node})" if staged
                      else "reviewed, nothing staged")
        opened.enqueue(session_id, "corrected", {"task": task_id, "resolution": resolution},
                       time.time())
    return True


async def ralph_status(session_id: str, *, store: str | None = None,
                       root: Path | str | None = None) -> dict[str, Any]:
    """What ``ralph status --json`` prints and ``interlock watch`` reads: metadata, the
    engine state, the current iteration's tasks, pending signals, the invocations."""
    folder = _folder(session_id, root)
    meta = folder.metadata()
    n = int(meta.get("iteration", 1))
    from interlock.runtime.api.sessions import status as session_status

    engine: dict[str, Any] | None = None
    try:
        info = await session_status(session_id, store=store, root=folder.root)
        engine = info.to_json()
    except NotFound:
        engine = None
    invocations = sorted(p.name for p in (folder.iteration(n) / "invocations").glob("*.md"))
    context = (engine or {}).get("context") or {}
    invocation = context.get("invocation") or None
    stop = meta.get("stop")
    status = str(meta.get("status") or "running")
    state = str((meta.get("orchestrator") or {}).get("state") or "PLANNING")
    if state == "PAUSED" and status == "running":
        status = "paused"
    if stop is None and status in ("completed", "aborted"):
        stop = {"reason": status, "detail": ""}
    elif stop is None and meta.get("stop_reason"):
        stop = {"reason": "stopped", "detail": str(meta["stop_reason"])}
        status = "stopped" if status == "running" and (engine or {}).get(
            "status") != "running" else status
    limits = meta.get("limits") or {}
    return {
        # the fields of interlock.runtime.ralph.watch.RalphStatus (interlock watch)
        "session_id": session_id, "state": state, "status": status, "iteration": n,
        "max_iterations": meta.get("max_iterations"), "batch": (int(context["batch"]) + 1
                                          if "batch" in context else None),
        "batches": len(context.get("batches") or []) or None,
        "tasks": [{"id": t.id, "title": t.title, "marker": t.marker, "note": t.reason}
                  for t in folder.progress(n)],
        "agent": None if not invocation else {
            "role": IDENTITIES.get(str(invocation.get("role")), str(invocation.get("role"))),
            "task": (invocation.get("task") or {}).get("id"),
            **await asyncio.to_thread(_running_agent, session_id, store, folder.root)},
        "signals": _signals(folder),
        "spend": {"cost_usd": (context.get("cost_usd") if context.get("cost_usd")
                               is not None else limits.get("cost_usd"))},
        "elapsed": _elapsed(meta, limits, status),
        "stop": stop,
        "inbox": (engine or {}).get("inbox"),
        # and more for scripts
        "id": session_id, "folder": str(folder.path), "stop_reason": meta.get("stop_reason"),
        "pending_signals": folder.mailbox().pending(), "invocations": invocations,
        "waiting_for": meta.get("waiting_for"), "paused_for": meta.get("paused_for"),
        "to_correct": _rejected(folder, n),
        "questions": (context.get("questions") or []) if meta.get("waiting_for") else [],
        "engine": engine,
    }


def _running_agent(session_id: str, store: str | None, root: Path) -> dict[str, Any]:
    """The agent the running subagent session invoked: seconds since it started, its
    try, and the last lines it printed (read from its spool)."""
    from interlock.runtime.engine.invoke_machine import child_session_id, is_machine
    from interlock.runtime.ralph.watch import LAST_LINES

    try:
        with opened_store(store, root, create=False) as opened:
            children = [child_session_id(session_id, r.spool)
                        for r in opened.invocations(session_id, in_flight=True)
                        if is_machine(r)]
            agents = [r for child in children
                      for r in opened.invocations(child, in_flight=True)
                      if not is_machine(r)]
            tries = [int(opened.get(child).snapshot["context"].get("attempts") or 0) + 1
                     for child in children]
    except Exception:  # nothing is running, or the store is busy: nothing to show
        return {}
    if not agents:
        return {}
    agent = agents[-1]
    try:
        data = (Path(agent.spool) / "stdout").read_bytes()[-8192:]
    except OSError:
        data = b""
    lines = [ln for ln in data.decode("utf-8", "replace").splitlines() if ln.strip()]
    return {"elapsed": max(0.0, time.time() - agent.started_at),
            "attempt": tries[-1] if tries else 1, "last_lines": lines[-LAST_LINES:]}


def _rejected(folder: RalphFolder, n: int) -> list[str]:
    """Tasks a Reviewer rejected and no later iteration has done: a correction for each
    can be staged with ``interlock ralph review ID TASK``."""
    rejected: dict[str, None] = {}
    for k in range(1, n + 1):
        for task in folder.progress(k):
            if str(task.reason or "").startswith("review:"):
                rejected[task.id] = None
            elif task.marker == "x":
                rejected.pop(task.id, None)
    return list(rejected)


def _elapsed(meta: dict[str, Any], limits: dict[str, Any], status: str) -> float | None:
    """Seconds since the session started; for one that has ended, until it ended."""
    if "started_at" not in limits:
        return None
    started = float(limits["started_at"])
    ended = meta.get("ended_at") or meta.get("completed_at")
    if status != "running" and status != "paused" and isinstance(ended, str):
        at = _timestamp(ended)
        if at is not None:
            return max(0.0, at - started)
    return max(0.0, time.time() - started)


def _timestamp(text: str) -> float | None:
    try:
        return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


def _signals(folder: RalphFolder) -> list[dict[str, Any]]:
    from interlock.runtime.ralph.folder import read_yaml

    lines = []
    for path in sorted(folder.mailbox().processed.glob("*.yaml"))[-10:]:
        data = read_yaml(path)
        handling = data.get("handling_metadata") or {}
        lines.append({"type": str(data.get("type", "?")), "message": str(
            data.get("message") or ""), "target": str(data.get("target") or "ALL"),
            "action": handling.get("action_taken"), "at": handling.get("handled_at")})
    return lines


def ralph_task_report(session_id: str, task_id: str, *, root: Path | str | None = None
                      ) -> tuple[Path, str]:
    """The Executor's report on ``task_id`` (in the latest iteration that has one) and the
    node its review stages a correction under (``<session>-<task>``): what ``interlock
    ralph review ID TASK`` opens the review menu on. The next Executor invocation for
    that task shows the staged correction in its prompt, and takes it."""
    from interlock.runtime.api.interview import task_node

    folder = _folder(session_id, root)
    node = task_node(session_id, task_id)
    reports = sorted(folder.path.glob(f"iterations/*/tasks/{task_id}.md"),
                     key=lambda p: int(p.parent.parent.name)
                     if p.parent.parent.name.isdigit() else 0)
    if not reports:
        known = sorted({p.stem for p in folder.path.glob("iterations/*/tasks/*.md")})
        hint = f"; tasks with a report: {', '.join(known)}" if known else \
            "; no task has a report yet"
        raise NotFound(f"Ralph session {session_id} has no report on task {task_id!r}{hint}")
    return reports[-1], node


def ralph_poll(session_id: str, *, role: str, root: Path | str | None = None
               ) -> list[dict[str, Any]]:
    """What a running agent calls at its step boundaries: the universal signals (STEER,
    INFO, PAUSE, ABORT) targeted at ALL or its role's identity are taken (archived in
    ``processed/``) and returned, oldest first."""
    folder = _folder(session_id, root)
    identity = IDENTITIES.get(role.lower().removeprefix("ralph-"), role)
    if identity not in IDENTITIES.values():
        raise UsageError(f"--as {role!r}: one of {', '.join(IDENTITIES.values())} "
                         f"(or planner, executor, ...)")
    from interlock.runtime.host.owners import default_owner

    taken = take_signals(folder.mailbox(), identity, default_owner("poll"),
                         action=f"taken by {identity} (ralph poll)")
    return [{"id": s.id, "type": s.type, "target": s.target, "message": s.message,
             "handled_by": identity, "handled_at": now_iso()} for s in taken]


def ralph_watch(session_id: str, *, interval: float = 0.5, store: str | None = None) -> None:
    """The live terminal view of a Ralph session (Rich), following it until it ends."""
    from interlock.runtime.ralph.watch import RalphStatus, follow

    def read() -> RalphStatus:
        return RalphStatus.model_validate(asyncio.run(ralph_status(session_id, store=store)))

    follow(read, interval)
