"""Running a Ralph session: the orchestrator spec in the engine, the rest composed by it.

The orchestrator is an ordinary engine session (``specs/ralph_orchestrator.yaml``,
journaled in the normal store under the Ralph session id, its lease held while a runner
lives). Its invoking states run each subagent invocation as a child session of
``specs/ralph_subagent.yaml`` (``invoke: machine:``), whose ``implementing`` state invokes
the role's agent as a process and whose ``gating`` state invokes the gates: the engine
starts them on entry, cancels them on exit (ABORT stops the process group), journals
them, and adopts them after a crash (docs/invoke.md). The session runs in the engine's
:class:`~interlock.runtime.engine.host.SessionHost`, like every session; :class:`RalphRun`
opens it and is its plugin, giving that composition its outside world:

- the agent resolver (``interlock.yaml`` agents, else the offline demo roles; behind a
  cassette's recorder or player with ``--record``/``--replay``) and the machine resolver
  that binds ``ralph_subagent`` to this session folder;
- the mailbox (:class:`~interlock.runtime.ralph.feed.RalphFeed`): Poll-Signals for the
  orchestrator and the subagent running under it (with ``inbox:`` in interlock.yaml, the
  façade adds the inbox poller, which posts each message into it as INFO);
- the limits (iterations, runtime, cost, no progress), checked after every step of the
  orchestrator and at the runtime's deadline: the session stops, resumable, with the stop
  reason in ``metadata.yaml``;
- ``metadata.yaml``'s state and the notes people read;
- the review menu for rejected tasks (``ralph.review_rejections``) in ``ralph run``'s
  terminal, while the session waits in ``awaiting_corrections``.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from interlock.runtime.agents.invoke import (
    AgentResolver,
    ResolvedAgent,
    agent_resolver,
    process_handlers,
)
from interlock.runtime.config.ralph import ROOT_ENV, WORKER_ENV, RalphConfig
from interlock.runtime.engine.builtin_specs import builtin_spec_dir
from interlock.runtime.engine.context import SessionContext, with_session
from interlock.runtime.engine.host import HostPlugin, SessionHost
from interlock.runtime.engine.invoke_machine import (
    ChildMachine,
    MachineError,
    MachineRequest,
    MachineResolver,
)
from interlock.runtime.engine.runner import Runner, RunOutcome
from interlock.runtime.engine.session import Step
from interlock.runtime.host.owners import default_owner
from interlock.runtime.ralph.bindings import make_bindings, to_correct
from interlock.runtime.ralph.feed import RalphFeed
from interlock.runtime.ralph.folder import RalphFolder, now_iso
from interlock.runtime.ralph.isolation import Isolation
from interlock.runtime.ralph.limits import (
    FileFacts,
    SessionLimits,
    StopReason,
    check,
    progress_digest,
)
from interlock.runtime.ralph.state import OrchestratorContext
from interlock.runtime.ralph.subagent import StagedConfigs, subagent_bindings
from interlock.runtime.signals.mailbox import Mailbox
from interlock.runtime.store import Store, open_store
from interlock.runtime.store.base import SessionNotFound

SPEC_NAME = "ralph_orchestrator"
SUBAGENT = "ralph_subagent"
RALPH_STATES = ("PLANNING", "EXECUTING_BATCH", "REVIEWING_BATCH", "REPLANNING",
                "KNOWLEDGE_APPROVAL", "PAUSED", "ABORTING", "COMPLETE")
Notify = Callable[[str], None]
WrapAgents = Callable[[AgentResolver], AgentResolver]
# A plugin the caller adds to the session's host (the façade: the inbox poller, which
# posts its messages into the mailbox as INFO), given the runner and the mailbox.
MorePlugins = Callable[[Runner, Mailbox], HostPlugin | None]
# The review menu in ralph run's terminal, for the rejected tasks waiting for a
# correction (ralph.review_rejections); False: the human stopped it (the run stops).
Review = Callable[[list[str]], bool]
WAITING_FOR_CORRECTIONS = "awaiting_corrections"


def spec_path(name: str = SPEC_NAME) -> Path:
    return builtin_spec_dir() / f"{name}.yaml"


def ralph_state(active: tuple[str, ...]) -> str:
    """The seed's state name for an engine configuration."""
    for state in active:
        if state in RALPH_STATES:
            return state
    return active[-1] if active else "?"


@dataclass(frozen=True, slots=True)
class RalphResult:
    """How ``ralph run`` ended: ``completed``, ``aborted``, ``failed``, ``limit`` (see
    ``reason``), ``paused`` (a subagent's agent failed in a way to fix first: the reason
    says how; resumable) or ``stopped`` (Ctrl-C; resumable)."""

    session_id: str
    outcome: str
    reason: str | None = None

    @property
    def exit_code(self) -> int:
        return {"completed": 0, "limit": 3, "paused": 4, "stopped": 130}.get(self.outcome, 1)


def subagent_machines(root: Path, config: RalphConfig,
                      attach: Callable[[Runner], Callable[[], None] | None] | None = None,
                      staged: StagedConfigs | None = None) -> MachineResolver:
    """The machine resolver of a Ralph session: ``ralph_subagent`` bound to the sessions
    under ``root``; ``attach`` gives each subagent session its signals, ``staged`` the
    corrections reviews staged."""
    text = spec_path(SUBAGENT).read_text(encoding="utf-8")
    bindings = subagent_bindings(root, config, staged=staged)

    def resolve(request: MachineRequest) -> ChildMachine:
        if request.name != SUBAGENT:
            raise MachineError(f"a Ralph session invokes only {SUBAGENT}, not {request.name!r}")
        context = SessionContext.of(request.session_id, request.folder)
        return ChildMachine(text, str(spec_path(SUBAGENT)), with_session(bindings, context),
                            attach=attach)

    return resolve


class RalphRun(HostPlugin):
    """One run of one Ralph session (see the module docstring): it opens the
    orchestrator's :class:`~interlock.runtime.engine.host.SessionHost` (:meth:`open`) and
    is its plugin, with the session's :class:`RalphFeed`. ``agents`` wraps the agent
    resolver (a cassette's recorder or player)."""

    def __init__(self, root: Path, session_id: str, config: RalphConfig, *,
                 store_url: str | None = None, agents: WrapAgents | None = None,
                 on_note: Notify | None = None, on_review: Review | None = None,
                 wait: bool = False, more: MorePlugins | None = None) -> None:
        self.root = root
        self.more = more  # another plugin for its host, given the runner and the mailbox
        self.folder = RalphFolder(root, session_id)
        self.config = config
        self.store_url = store_url
        self.wrap_agents = agents
        self.note = on_note or (lambda _text: None)
        self.review = on_review
        self.wait = wait  # a session paused by a failed agent waits (else the run ends)
        self.failed: str | None = None  # why a failed agent paused it (the run ended)
        self._reviewing: asyncio.Task[bool] | None = None
        self.owner = default_owner("ralph")
        self.limit: str | None = None
        self.stop_info: dict[str, Any] | None = None
        saved = self.folder.metadata().get("limits")
        self.limits = (SessionLimits.from_json(config, saved) if isinstance(saved, dict)
                       else SessionLimits(config, time.time()))
        self.state = ""
        self._ended = 0  # invocations ended since the last look
        self._facts = FileFacts()  # file hashes and review verdicts, for progress digests
        self._host: SessionHost | None = None
        self._looks: asyncio.Queue[None] | None = None  # a look is due (a step, a deadline)
        self._moved: asyncio.Event | None = None  # the orchestrator committed a step
        self._worker: asyncio.Task[None] | None = None
        self._closing = False  # the run ended: the worker's last look is the stop's
        self._deadline: asyncio.TimerHandle | None = None
        self.feed: RalphFeed | None = None

    # -- opening ------------------------------------------------------------------------

    async def open(self, store: Store, *, context: Mapping[str, Any] | None = None,
                   stop: asyncio.Event | None = None,
                   on_step: Callable[[Step], None] | None = None) -> SessionHost:
        """The session's host: the orchestrator (created or resumed) with its bindings,
        agents and subagents, its mailbox feed and this run as plugins. ``context`` adds
        to a new session's context."""
        isolation = self.isolation()
        feed = RalphFeed(self.folder.mailbox(), open_store(self.store_url, self.root),
                         self.owner, self.note)
        bindings = with_session(make_bindings(self.folder, self._over_limit,
                                              self._asks_corrections, self.config.parallel,
                                              isolation),
                                SessionContext.of(self.folder.id, self.folder.path))
        agents = as_workers(agent_resolver(self.root), self.folder)
        if self.wrap_agents is not None:
            agents = self.wrap_agents(agents)

        def attach(child: Runner) -> Callable[[], None]:
            self.note(f"{now_iso()}   invoke {child.session.context.get('agent')}"
                      + _task_note(child.session.context.get("task"))
                      + f" (#{child.session.context.get('seq')}, {child.session_id})")
            return feed.attach(child, str(child.session.context.get("agent")))

        try:
            spec_text: str | None = None
            try:
                await asyncio.to_thread(store.get, self.folder.id)
            except SessionNotFound:
                spec_text = spec_path().read_text(encoding="utf-8")
            host = await SessionHost.open(
                store, spec_text, str(spec_path()), session_id=self.folder.id,
                bindings=bindings, owner=self.owner, stop=stop, on_step=on_step,
                on_note=self.note,
                context={"session_id": self.folder.id,
                         "knowledge_approval_timeout": self.config.knowledge_approval_timeout,
                         **(context or {})},
                invokers=process_handlers(agents),
                machines=subagent_machines(self.root, self.config, attach, staged=store))
            more = self.more(host.runner, feed.mailbox) if self.more is not None else None
        except BaseException:
            feed.store.close()
            raise
        self.feed = feed
        return host.add(self, feed, more)

    def isolation(self) -> Isolation:
        """Where the tasks of a parallel batch work (their git worktrees, once a run was
        parallel); a folder they cannot be isolated in is refused here, before anything
        runs (:class:`~interlock.runtime.ralph.worktrees.NotARepository`)."""
        forked = "integration" in self.folder.metadata()  # a parallel run came before
        isolation = Isolation(self.folder, worktrees=self.config.isolation == "worktree"
                              and (self.config.parallel > 1 or forked), note=self.note)
        if self.config.parallel > 1:
            isolation.check()
        return isolation

    async def run(self, stop: asyncio.Event | None = None) -> RalphResult:
        """Open the session's host and run it to its end (see :class:`RalphResult`)."""
        self.isolation()  # refused before the store is opened
        store = open_store(self.store_url, self.root)
        try:
            host = await self.open(store, stop=stop)
            ended = await host.run()
            return self.result(host.runner, ended)
        finally:
            store.close()

    def result(self, runner: Runner, ended: RunOutcome) -> RalphResult:
        """How the run ended, written to metadata.yaml."""
        kind = ended.kind
        reason = str(ended.failure) if ended.failure else ended.reason
        meta = self.folder.metadata()
        if runner.session.is_final:
            outcome = "aborted" if meta.get("status") == "aborted" else "completed"
            self.folder.update_metadata(limits=self.limits.to_json(),
                                        ended_at=meta.get("completed_at") or now_iso())
            return RalphResult(self.folder.id, outcome)
        ended_at = now_iso()
        if self.failed is not None:
            self.folder.update_metadata(stop_reason=self.failed, ended_at=ended_at)
            return RalphResult(self.folder.id, "paused", self.failed)
        if self.limit is not None:
            self.folder.update_metadata(stop=self.stop_info, stop_reason=self.limit,
                                        ended_at=ended_at)
            return RalphResult(self.folder.id, "limit", self.limit)
        if kind == "failed":
            self.folder.update_metadata(status="failed", stop_reason=reason, ended_at=ended_at)
            return RalphResult(self.folder.id, "failed", reason)
        self.folder.update_metadata(stop_reason=f"runner stopped ({kind})", ended_at=ended_at)
        return RalphResult(self.folder.id, "stopped", reason)

    # -- as the host's plugin -----------------------------------------------------------

    async def start(self, host: SessionHost) -> None:
        self._host = host
        self._looks = asyncio.Queue()
        self._moved = asyncio.Event()
        await asyncio.to_thread(self.folder.update_metadata, status="running",
                                stop_reason=None, stop=None, ended_at=None,
                                max_iterations=self.config.max_iterations)
        self.note(f"ralph session {self.folder.id} [{ralph_state(host.runner.active)}]")
        await self._look(host)  # the state it starts in (a pause to report, a limit)
        self._worker = asyncio.create_task(self._work())
        if self.config.max_runtime is not None:  # a look when the runtime runs out
            due = self.limits.started_at + self.config.max_runtime - time.time()
            self._deadline = asyncio.get_running_loop().call_later(
                max(0.0, due) + 0.01, self._look_soon)

    def on_step(self, step: Step) -> None:
        if step.event and step.event.startswith("done.invoke."):
            self._ended += 1
        if self._moved is not None:
            self._moved.set()
        self._look_soon()

    async def stop(self, outcome: RunOutcome | None) -> None:
        if self._deadline is not None:
            self._deadline.cancel()
        worker, self._worker = self._worker, None
        if worker is not None:  # the look under way finishes (its notes and metadata)
            self._closing = True
            self._look_soon()
            await worker
        reviewing, self._reviewing = self._reviewing, None
        if reviewing is not None:
            reviewing.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await reviewing
        if self._host is not None:
            await self._look(self._host, final=True)  # the last steps' notes and limits

    def _look_soon(self) -> None:
        if self._looks is not None:
            self._looks.put_nowait(None)

    async def _work(self) -> None:
        """One look at a time, after the steps (and deadlines) that asked for one."""
        looks, host = self._looks, self._host
        assert looks is not None and host is not None
        while not self._closing:
            await looks.get()
            while not looks.empty():  # the steps queued meanwhile: one look serves them
                looks.get_nowait()
            if not self._closing:
                try:
                    await self._look(host)
                except Exception as exc:  # a look that fails ends the run, saying why
                    self.note(f"{now_iso()} {type(exc).__name__}: {exc}")
                    host.stop.set()
                    return

    # -- one look -----------------------------------------------------------------------

    async def _look(self, host: SessionHost, *, final: bool = False) -> None:
        runner, stop = host.runner, host.stop
        ctx = runner.session.context
        state = ralph_state(runner.active)
        if state != self.state:
            self.state = state
            if state != "COMPLETE":
                await asyncio.to_thread(self.folder.update_metadata, state=state,
                                        iteration=ctx.get("iteration", 1))
            why = self.folder.metadata().get("paused_for") if state == "PAUSED" else None
            self.note(f"{now_iso()} {state}" + (f": {why}" if why else ""))
            if why and not self.wait and not final:  # a failure to fix first: end the run
                self.failed = str(why)
                stop.set()
                return
        if not final:
            await self._corrections(runner, stop)
        if self._ended:
            ended, self._ended = self._ended, 0
            n = int(ctx.get("iteration", 1))
            digest = await asyncio.to_thread(
                progress_digest, self.root, self.folder.iteration(n) / "progress.md",
                facts=self._facts, reviews=self.folder.iteration(n) / "reviews")
            self.limits.invocation_done(digest, invocations=ended)
            self.limits.cost_usd = _spent(ctx)  # the orchestrator's context keeps the total
            await asyncio.to_thread(self.folder.update_metadata, limits=self.limits.to_json())
        if runner.session.is_final or final:
            return
        if self._reached(ctx):
            stop.set()

    def _asks_corrections(self) -> bool:
        return self.config.asks_corrections(terminal=self.review is not None)

    async def _review_here(self, runner: Runner, tasks: list[str]) -> bool:
        """The review menu for ``tasks`` in this terminal (each review sends its task's
        ``corrected``); then wait until the session took them."""
        review = self.review
        assert review is not None
        loop = asyncio.get_running_loop()
        answered: asyncio.Future[bool] = loop.create_future()

        def ask() -> None:
            try:
                result = review(tasks)
            except Exception as exc:  # a broken menu stops the run (saved), not the loop
                self.note(f"{now_iso()} the review menu failed: {type(exc).__name__}: {exc}")
                result = False

            def answer() -> None:
                if not answered.done():
                    answered.set_result(result)

            with contextlib.suppress(RuntimeError):  # the run ended meanwhile
                loop.call_soon_threadsafe(answer)

        # a daemon thread: a run stopped from outside does not wait for the human
        threading.Thread(target=ask, name="ralph-review", daemon=True).start()
        if not await answered:
            return False
        return await self._waiting(runner, tasks)

    async def _corrections(self, runner: Runner, stop: asyncio.Event) -> None:
        """While the session waits for corrections: open the review menu for them in
        this terminal (once at a time); a session left waiting by an earlier run that
        now asks none (no terminal under ``auto``) goes on without."""
        if self._reviewing is not None and self._reviewing.done():
            stopped = not self._reviewing.result()
            self._reviewing = None
            if stopped:  # the human stopped the menu: the session stays waiting
                stop.set()
                return
        feed = self.feed
        assert feed is not None
        if self._reviewing is not None or stop.is_set() \
                or WAITING_FOR_CORRECTIONS not in runner.active \
                or await asyncio.to_thread(feed.queued, runner):  # a resume, say: first
            return
        tasks = to_correct(runner.session.context)
        if not self._asks_corrections() or not tasks:
            why = ("nothing left to review" if not tasks
                   else "review_rejections: off" if self.config.review_rejections == "off"
                   else "no terminal to review in")
            await asyncio.to_thread(feed.send, runner, "resume",
                                    {"message": None, "reason": why})
            self._reviewing = asyncio.create_task(self._waiting(runner))
        elif self.review is not None:
            self.note(f"{now_iso()} review of the rejected tasks: {', '.join(tasks)}")
            self._reviewing = asyncio.create_task(self._review_here(runner, tasks))
        else:
            self.note(f"{now_iso()} waiting for corrections of {', '.join(tasks)}: "
                      f"interlock ralph review {self.folder.id} TASK (or interlock ralph "
                      f"resume {self.folder.id} to go on without)")
            self._reviewing = asyncio.create_task(self._waiting(runner))
        self._reviewing.add_done_callback(lambda _task: self._look_soon())

    async def _waiting(self, runner: Runner, tasks: list[str] | None = None) -> bool:
        """Done when the session has left ``awaiting_corrections`` or, given ``tasks``,
        took their corrections (looked at after each of the orchestrator's steps)."""
        moved = self._moved
        assert moved is not None
        while True:
            moved.clear()
            if WAITING_FOR_CORRECTIONS not in runner.active or (
                    tasks is not None
                    and not set(tasks) & set(to_correct(runner.session.context))):
                return True
            await moved.wait()

    def _limit(self, ctx: Any) -> StopReason | None:
        """The first of the engine's limits (:mod:`interlock.runtime.ralph.limits`) the
        session has reached, its iterations counted from the orchestrator's context."""
        done = max(0, int(ctx.get("iteration", 1)) - 1)
        return check(replace(self.limits.snapshot(), iterations_done=done,
                             cost_usd=_spent(ctx)), self.config, time.time())

    def _over_limit(self, ctx: Any) -> bool:
        """The orchestrator's ``over_limit`` guard at every checkpoint, so no invocation
        starts past a limit. (A guard must not write: :meth:`_reached` keeps it.)"""
        return self._limit(ctx) is not None

    def _reached(self, ctx: Any) -> bool:
        """Whether the session must stop (resumable, ``stop:`` in metadata.yaml)."""
        reason = self._limit(ctx)
        self.limits.iterations_done = max(0, int(ctx.get("iteration", 1)) - 1)
        if reason is not None:
            self.limit = reason.detail
            self.stop_info = reason.to_json()
        return reason is not None


def _spent(ctx: Any) -> float:
    """What the session's agents reported spending (the orchestrator's one total)."""
    return OrchestratorContext.spend_in(ctx).cost_usd or 0.0


def _task_note(task: Any) -> str:
    return f" on {task.get('id')} {task.get('title')}" if isinstance(task, dict) else ""


def as_workers(resolve: AgentResolver, folder: RalphFolder) -> AgentResolver:
    """``resolve``, each launch's environment naming the Ralph session it works for
    (:data:`~interlock.runtime.config.ralph.WORKER_ENV`, ``ROOT_ENV``)."""
    env = {WORKER_ENV: folder.id, ROOT_ENV: str(folder.root.absolute())}

    def resolved(name: str, prompt: str) -> ResolvedAgent:
        agent = resolve(name, prompt)
        return replace(agent, launch=replace(agent.launch, env={**agent.launch.env, **env}))

    return resolved
