"""The status of a Ralph session: what ``interlock ralph status --json`` prints and
``interlock watch`` draws (:mod:`interlock.runtime.ralph.watch`), one model, and
:func:`build_status`, which builds it from the session folder (metadata.yaml, progress,
signals), the orchestrator's journaled context (iteration, batch, the spend the agents
reported: :class:`~interlock.runtime.ralph.state.OrchestratorContext`) and the store (the
agent running now). The façade only opens the store and hands it over.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from interlock.runtime.config.ralph import IDENTITIES
from interlock.runtime.engine.machine_ids import child_session_id, is_machine
from interlock.runtime.ralph.folder import RalphFolder, read_yaml
from interlock.runtime.ralph.review import rejected_tasks
from interlock.runtime.ralph.state import OrchestratorContext, Spend, SubagentContext

if TYPE_CHECKING:
    from interlock.runtime.store import Store

__all__ = ["FINISHED", "LAST_LINES", "InboxLine", "Marker", "RalphStatus", "RunningAgent",
           "SignalLine", "Spend", "StopInfo", "TaskLine", "WorktreeLine", "build_status",
           "running_agent"]

Marker = Literal[" ", "/", "x", "F"]
#: Statuses after which nothing more happens: ``watch.follow`` stops on them.
FINISHED = frozenset({"complete", "completed", "failed", "aborted", "stopped", "cancelled"})
LAST_LINES = 5  # of the running agent's output


class _Model(BaseModel):
    model_config = ConfigDict(frozen=True, extra="ignore")


class TaskLine(_Model):
    """One task of progress.md: its id, title, marker and a note (a failure's reason)."""

    id: str
    title: str = ""
    marker: Marker = " "
    note: str | None = None


class RunningAgent(_Model):
    """The agent invocation in flight: its role, the task it works on, seconds since it
    started, its attempt (retries), and the last lines it printed."""

    role: str
    task: str | None = None
    elapsed: float = 0.0
    attempt: int = 1
    last_lines: tuple[str, ...] = ()


class SignalLine(_Model):
    """A signal the session handled (or holds): its type, target, message, and what was
    done with it."""

    type: str
    message: str = ""
    target: str = "ALL"
    action: str | None = None
    at: str | None = None


class InboxLine(_Model):
    """The session's inbox count (SessionInfo.inbox): messages delivered to it as INFO
    context, and those not yet taken."""

    delivered: int = 0
    pending: int = 0


class WorktreeLine(_Model):
    """A task's git worktree in a parallel batch (metadata.yaml's ``worktrees``): its
    branch, folder and where its merge stands (working, merging, conflicted, merged,
    failed)."""

    task: str
    branch: str
    path: str
    state: str = "working"
    conflicts: tuple[str, ...] = ()


class StopInfo(_Model):
    """Why the session ended: ``reason`` (``max_iterations``, ``max_runtime``,
    ``max_cost``, ``no_progress``, ``completed``, ``aborted``...) and a readable detail."""

    reason: str
    detail: str = ""


class RalphStatus(_Model):
    """Everything ``interlock watch`` shows and ``ralph status --json`` prints."""

    session_id: str
    state: str  # the orchestrator's state path, e.g. "EXECUTING_BATCH"
    status: str = "running"
    iteration: int = 1
    max_iterations: int | None = None
    batch: int | None = None
    batches: int | None = None
    tasks: tuple[TaskLine, ...] = ()
    agent: RunningAgent | None = None
    signals: tuple[SignalLine, ...] = ()
    spend: Spend = Field(default_factory=Spend)
    elapsed: float | None = None  # seconds since the session started
    stop: StopInfo | None = None
    inbox: InboxLine | None = None  # None: no inbox message reached the session
    workers: tuple[RunningAgent, ...] = ()  # a parallel batch's Executors running now
    merge_queue: tuple[str, ...] = ()  # approved tasks waiting to merge, the one merging first
    integration: str | None = None  # the branch parallel batches merge into (ralph/<ID>)
    worktrees: tuple[WorktreeLine, ...] = ()  # the tasks' worktrees not yet removed
    paused_for: str | None = None  # why it pauses when an agent failed (the CLI's words)
    # and more for scripts (``ralph status --json``); the view does not draw them
    id: str | None = None  # the session id again
    folder: str | None = None  # .ralph-sessions/<ID>/
    stop_reason: str | None = None  # metadata.yaml's line on why the last run stopped
    pending_signals: tuple[str, ...] = ()  # signal files not yet taken
    invocations: tuple[str, ...] = ()  # this iteration's invocation records
    waiting_for: str | None = None  # answers to questions, or corrections of tasks
    to_correct: tuple[str, ...] = ()  # rejected tasks whose review can stage a correction
    questions: tuple[dict[str, Any], ...] = ()  # the Questioner's, while it waits for them
    engine: dict[str, Any] | None = None  # the orchestrator session (SessionInfo's JSON)

    @property
    def finished(self) -> bool:
        return self.status in FINISHED

    def to_json(self) -> dict[str, Any]:
        """The document ``interlock ralph status --json`` prints."""
        return self.model_dump(mode="json")


# -- building it --------------------------------------------------------------------------


def build_status(folder: RalphFolder, engine: Mapping[str, Any] | None,
                 store: Store | None = None, *, now: float | None = None) -> RalphStatus:
    """The status of the Ralph session in ``folder``. ``engine``: its orchestrator
    session as ``interlock status --json`` shows it (``SessionInfo.to_json()``; None: it
    has not run yet), for its journaled context, its status and its inbox count;
    ``store``: where the running agent is looked up (None: none shown)."""
    at = time.time() if now is None else now
    meta = folder.metadata()
    n = int(meta.get("iteration", 1))
    context = OrchestratorContext.model_validate((engine or {}).get("context") or {})
    stop = meta.get("stop")
    status = str(meta.get("status") or "running")
    state = str((meta.get("orchestrator") or {}).get("state") or "PLANNING")
    if state == "PAUSED" and status == "running":
        status = "paused"
    if stop is None and status in ("completed", "aborted"):
        stop = {"reason": status, "detail": ""}
    elif stop is None and meta.get("stop_reason"):
        stop = {"reason": "stopped", "detail": str(meta["stop_reason"])}
    if stop is not None and status == "running" and (engine or {}).get("status") != "running":
        status = "stopped"  # by a limit, or its runner stopped: nothing runs it now
    invocation = context.invocation
    agent = None if invocation is None else {
        "role": IDENTITIES.get(invocation.role, invocation.role),
        "task": invocation.task.id if invocation.task is not None else None,
        **(running_agent(store, folder.id, at) if store is not None else {})}
    workers = running_workers(store, folder.id, at) if store is not None and context.workers \
        else ()
    merging = [context.merging.task] if context.merging is not None else []
    engine_context = (engine or {}).get("context") or {}
    return RalphStatus.model_validate({
        "session_id": folder.id, "state": state, "status": status, "iteration": n,
        "max_iterations": meta.get("max_iterations"),
        "batch": context.batch + 1 if "batch" in engine_context else None,
        "batches": len(context.batches) or None,
        "tasks": [{"id": t.id, "title": t.title, "marker": t.marker, "note": t.reason}
                  for t in folder.progress(n)],
        "agent": agent, "signals": _signals(folder),
        "spend": context.spend if engine is not None else Spend(),
        "elapsed": _elapsed(meta, status, at), "stop": stop,
        "inbox": (engine or {}).get("inbox"), "paused_for": meta.get("paused_for"),
        "integration": meta.get("integration"), "workers": workers,
        "merge_queue": [*merging, *context.merge_queue],
        "worktrees": [{"task": task, **(line if isinstance(line, dict) else {})}
                      for task, line in (meta.get("worktrees") or {}).items()],
        "id": folder.id, "folder": str(folder.path), "stop_reason": meta.get("stop_reason"),
        "pending_signals": folder.mailbox().pending(),
        "invocations": sorted(p.name for p in (folder.iteration(n) / "invocations").glob(
            "*.md")),
        "waiting_for": meta.get("waiting_for"), "to_correct": rejected_tasks(folder, n),
        "questions": context.questions if meta.get("waiting_for") else [],
        "engine": dict(engine) if engine is not None else None,
    })


def running_workers(store: Store, session_id: str, now: float) -> tuple[RunningAgent, ...]:
    """Each Executor of the parallel batch running now: its task, seconds since it
    started, its last lines (the subagent sessions the fan-out started and their agents);
    () when the store cannot say."""
    try:
        children = [(child_session_id(session_id, r.spool), r.started_at)
                    for r in store.invocations(session_id, in_flight=True)
                    if is_machine(r) and r.invoke == "executors"]
        found = []
        for child, started in children:
            context = SubagentContext.model_validate(store.get(child).snapshot["context"])
            agents = [r for r in store.invocations(child, in_flight=True) if not is_machine(r)]
            found.append(RunningAgent(
                role=IDENTITIES["executor"],
                task=context.task.id if context.task is not None else None,
                elapsed=max(0.0, now - started), attempt=context.attempts + 1,
                last_lines=_last_lines(agents[-1].spool) if agents else ()))
    except Exception:  # nothing is running, or the store is busy: nothing to show
        return ()
    return tuple(found)


def _last_lines(spool: str) -> tuple[str, ...]:
    try:
        data = (Path(spool) / "stdout").read_bytes()[-8192:]
    except OSError:
        return ()
    lines = [ln for ln in data.decode("utf-8", "replace").splitlines() if ln.strip()]
    return tuple(lines[-LAST_LINES:])


def running_agent(store: Store, session_id: str, now: float) -> dict[str, Any]:
    """The agent the running subagent session invoked: seconds since it started, its
    try, and the last lines it printed (read from its spool); {} when none runs or the
    store cannot say."""
    try:
        children = [child_session_id(session_id, r.spool)
                    for r in store.invocations(session_id, in_flight=True) if is_machine(r)]
        agents = [r for child in children
                  for r in store.invocations(child, in_flight=True) if not is_machine(r)]
        tries = [SubagentContext.model_validate(store.get(child).snapshot["context"])
                 .attempts + 1 for child in children]
    except Exception:  # nothing is running, or the store is busy: nothing to show
        return {}
    if not agents:
        return {}
    agent = agents[-1]
    return {"elapsed": max(0.0, now - agent.started_at),
            "attempt": tries[-1] if tries else 1, "last_lines": _last_lines(agent.spool)}


def _elapsed(meta: Mapping[str, Any], status: str, now: float) -> float | None:
    """Seconds since the session started; for one that has ended, until it ended."""
    limits = meta.get("limits") or {}
    if "started_at" not in limits:
        return None
    started = float(limits["started_at"])
    ended = meta.get("ended_at") or meta.get("completed_at")
    if status != "running" and status != "paused" and isinstance(ended, str):
        at = _timestamp(ended)
        if at is not None:
            return max(0.0, at - started)
    return max(0.0, now - started)


def _timestamp(text: str) -> float | None:
    try:
        return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


def _signals(folder: RalphFolder) -> list[dict[str, Any]]:
    """The last signals handled (signals/processed/), oldest first."""
    lines = []
    for path in sorted(folder.mailbox().processed.glob("*.yaml"))[-10:]:
        data = read_yaml(path)
        handling = data.get("handling_metadata") or {}
        lines.append({"type": str(data.get("type", "?")), "message": str(
            data.get("message") or ""), "target": str(data.get("target") or "ALL"),
            "action": handling.get("action_taken"), "at": handling.get("handled_at")})
    return lines
