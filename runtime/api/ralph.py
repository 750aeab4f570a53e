"""Ralph sessions through the façade: init, run, resume, status, poll (seed 004).

A Ralph session is an orchestrator session (``ralph_orchestrator``) in the normal store
whose folder is ``.ralph-sessions/<ID>/`` in the working directory; its mailbox is that
folder's ``signals/``. Without ``interlock.yaml`` every role runs its offline demo agent.
"""

from __future__ import annotations

import asyncio
import os
import secrets
import time
from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from interlock.machines import SpecError
from interlock.runtime.api.common import opened_store, root_of, translated
from interlock.runtime.api.errors import AgentsNotReady, Conflict, NotFound, UsageError
from interlock.runtime.config.inbox import load_poller_config
from interlock.runtime.config.project_file import PROJECT_FILE
from interlock.runtime.config.ralph import (
    IDENTITIES,
    ROOT_ENV,
    WORKER_ENV,
    load_ralph_config,
)
from interlock.runtime.engine.host import HostPlugin
from interlock.runtime.engine.lifecycle import status_of
from interlock.runtime.engine.runner import Runner
from interlock.runtime.inbox.session import attach_inbox
from interlock.runtime.ralph.feed import take_signals
from interlock.runtime.ralph.folder import RalphFolder, now_iso
from interlock.runtime.ralph.review import (
    Reviewer,
    ReviewResult,
    TaskReview,
    mark_corrected,
    review_tasks,
    task_review,
    waits_for_corrections,
)
from interlock.runtime.ralph.runner import RalphResult, RalphRun
from interlock.runtime.ralph.status import RalphStatus, build_status
from interlock.runtime.ralph.worktrees import GitError, Worktrees
from interlock.runtime.signals.mailbox import Mailbox
from interlock.runtime.signals.model import SignalError, check_identifier
from interlock.runtime.store import SessionNotFound, Store

__all__ = [
    "RALPH_TARGETS",
    "RalphResult",
    "RalphStatus",
    "ReviewResult",
    "TaskReview",
    "ralph_corrected",
    "ralph_folder",
    "ralph_init",
    "ralph_poll",
    "ralph_resume",
    "ralph_review",
    "ralph_run",
    "ralph_status",
    "ralph_task_report",
    "ralph_watch",
]


#: The targets a signal for a Ralph session may name: ALL, or one of its identities.
RALPH_TARGETS: tuple[str, ...] = ("ALL", *IDENTITIES.values())


def _folder(session_id: str, root: Path | str | None) -> RalphFolder:
    try:
        check_identifier(session_id, "Ralph session id")
    except SignalError as exc:
        raise UsageError(str(exc)) from None
    if root is None and os.environ.get(WORKER_ENV) == session_id:
        root = os.environ.get(ROOT_ENV)  # its agent, working in a task's worktree
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
                    parallel: int | None = None, record: Path | str | None = None,
                    replay: Path | str | None = None, store: str | None = None,
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
    their ids; each review ends with :func:`ralph_corrected`; False stops the run.
    ``parallel``: up to that many tasks of a batch at once (``ralph.parallel``). An agent
    that Ralph started cannot start a Ralph session of its own (:class:`Conflict`)."""
    worker = os.environ.get(WORKER_ENV)
    if worker:
        raise Conflict(f"this process is an agent of Ralph session {worker}: a worker "
                       "never starts a Ralph session of its own")
    folder = _folder(session_id, root)
    try:
        config = load_ralph_config(folder.root / PROJECT_FILE).with_overrides(
            max_iterations=max_iterations, max_runtime=max_runtime, max_cost=max_cost,
            parallel=parallel)
        load_poller_config(start=folder.root)  # a bad inbox: section, before anything runs
    except SpecError as exc:
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
        await _check_roles(folder.root, on_note, merger=config.parallel > 1)
    if meta.get("paused_for") and meta.get("state") == "PAUSED":  # fixed since, or not
        with opened_store(store, folder.root) as opened, translated():
            opened.enqueue(session_id, "resume", {"message": None}, time.time())
    with translated():
        try:
            return await RalphRun(folder.root, session_id, config, store_url=store,
                                  agents=wrap, on_note=on_note, on_review=on_review,
                                  wait=wait, more=_inbox(store, folder.root, on_note)
                                  ).run(stop)
        except GitError as exc:  # parallel batches in a folder that is not a repository
            raise UsageError(str(exc)) from None


def _inbox(store: str | None, root: Path, on_note: Callable[[str], None] | None
           ) -> Callable[[Runner, Mailbox], HostPlugin | None]:
    """The inbox poller of a Ralph session (when interlock.yaml has ``inbox:``): it posts
    each message into the session's mailbox as INFO."""

    def attach(runner: Runner, mailbox: Mailbox) -> HostPlugin | None:
        return attach_inbox(runner, store, root, on_note, mailbox=mailbox)

    return attach


async def _check_roles(root: Path, on_note: Callable[[str], None] | None, *,
                       merger: bool) -> None:
    """``interlock agents check --ralph`` before the first call: each role's line goes to
    ``on_note`` (which agent it uses); AgentsNotReady (exit 4) naming every problem."""
    from interlock.runtime.api.agents import agents_check

    checks = await asyncio.to_thread(agents_check, root=root, roles=True, merger=merger)
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
    correction was staged for the task's next Executor). Returns whether it was queued.
    :func:`ralph_review` runs the whole protocol (review, then this)."""
    folder = _folder(session_id, root)
    if not waits_for_corrections(folder):
        return False
    with opened_store(store, folder.root) as opened, translated():
        return mark_corrected(folder, opened, task_id)


def ralph_review(session_id: str, reviewer: Reviewer, tasks: Sequence[str] | None = None,
                 *, store: str | None = None, root: Path | str | None = None
                 ) -> list[ReviewResult]:
    """Review the tasks a Reviewer rejected, then mark each corrected: ``tasks`` (by
    default every rejected task no later iteration has done, ``ralph status``'s
    ``to_correct``) one after another. ``reviewer(item)`` is the review itself (a
    :class:`TaskReview`: the Executor's report, the node a correction is staged under;
    ``report`` None when the task has none), blocking, e.g. the review menu
    (:func:`review_blocking` on ``item.report`` with ``node=item.node``); it returns True
    when the review ended, False when the human stopped it (nothing more is reviewed).
    Each task whose review ended is marked corrected (:func:`ralph_corrected`) when the
    session waits for it. Returns one :class:`ReviewResult` per task taken."""
    folder = _folder(session_id, root)
    with opened_store(store, folder.root) as opened, translated():
        return review_tasks(folder, opened, reviewer, tasks)


async def ralph_status(session_id: str, *, store: str | None = None,
                       root: Path | str | None = None) -> dict[str, Any]:
    """What ``ralph status --json`` prints and ``interlock watch`` reads: the JSON of
    :class:`interlock.runtime.ralph.status.RalphStatus` (metadata, the engine state, the
    current iteration's tasks, the running agent, signals, spend, limits, inbox)."""
    return (await _status(session_id, store, root)).to_json()


async def _status(session_id: str, store: str | None, root: Path | str | None
                  ) -> RalphStatus:
    folder = _folder(session_id, root)
    from interlock.runtime.api.sessions import status as session_status

    try:
        engine: dict[str, Any] | None = (
            await session_status(session_id, store=store, root=folder.root)).to_json()
    except NotFound:
        engine = None

    def build() -> RalphStatus:
        if engine is None:
            return build_status(folder, None)
        with opened_store(store, folder.root, create=False) as opened:
            return build_status(folder, engine, opened)

    return await asyncio.to_thread(build)


def ralph_clean(session_id: str, *, force: bool = False, store: str | None = None,
                root: Path | str | None = None) -> list[str]:
    """Remove the session's task worktrees and branches (``interlock ralph clean``): the
    merged ones, and with ``force`` those holding unmerged work too; the integration
    branch stays. :class:`Conflict` while a runner holds the session, or (without
    ``force``) when unmerged work remains, naming it. Returns the tasks removed."""
    folder = _folder(session_id, root)
    with opened_store(store, folder.root) as opened, translated():
        if _running(opened, session_id):
            raise Conflict(f"Ralph session {session_id} is running: stop it first "
                           f"(Ctrl-C in its terminal, or interlock signal {session_id} ABORT)")
    try:
        trees = Worktrees(folder.root, session_id)
        removed = trees.clean(force=force)
        left = [t.task for t in trees.listed()]
    except GitError as exc:
        raise Conflict(str(exc)) from None
    folder.forget_worktrees(removed)
    if left:
        raise Conflict(f"unmerged work kept in {len(left)} worktree(s): "
                       f"{', '.join(str(trees.path_of(t)) for t in left)}; merge it, or "
                       f"interlock ralph clean {session_id} --force to drop it")
    return removed


def _running(opened: Store, session_id: str) -> bool:
    try:
        row = opened.get(session_id)
    except SessionNotFound:  # it never ran
        return False
    return status_of(opened, row, time.time()).status == "running"


def ralph_task_report(session_id: str, task_id: str, *, root: Path | str | None = None
                      ) -> tuple[Path, str]:
    """The Executor's report on ``task_id`` (in the latest iteration that has one) and the
    node its review stages a correction under (``<session>-<task>``): what ``interlock
    ralph review ID TASK`` opens the review menu on. The next Executor invocation for
    that task shows the staged correction in its prompt, and takes it."""
    item = task_review(_folder(session_id, root), task_id)
    if item.report is None:
        raise NotFound(str(item.missing))
    return item.report, item.node


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
    from interlock.runtime.ralph.watch import follow

    follow(lambda: asyncio.run(_status(session_id, store, None)), interval)
