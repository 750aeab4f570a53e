"""Running a Ralph session: the orchestrator spec in the engine, its subagents beside it.

The orchestrator is an ordinary engine session (``specs/ralph_orchestrator.yaml``, its
snapshot journaled in the normal store under the Ralph session id, its lease held while a
runner lives). Beside the engine's :class:`~interlock.runtime.engine.runner.Runner` one
coroutine, :class:`RalphRun`, does what the spec asks of the outside world:

- at a checkpoint (a state that takes ``polled``), in PAUSED and in KNOWLEDGE_APPROVAL, it
  polls ``signals/inputs/`` for the signals the configuration accepts, targeted at ALL or
  Ralph-Orchestrator (STEER/INFO targeted at one subagent are taken too and buffered for
  that subagent's next invocation), claims each by an atomic rename, offers it to the
  session keyed by the signal id (so a signal re-read after a crash is never applied
  twice) and archives it in ``processed/``; then, when nothing more is accepted, it sends
  ``polled``;
- when the session asks for an invocation (``context.invocation``), it runs that
  subagent's lifecycle (:class:`~interlock.runtime.ralph.subagent.Subagent`) and reports
  back with ``subagent.<status>`` keyed by the invocation's number; an invocation the
  session left (ABORT) is cancelled, its process group stopped. After a crash the
  invocation in flight is restarted (its files are rewritten whole; no task is doubled).
- it enforces the limits (iterations, runtime, cost): the session stops, resumable, with
  the stop reason in ``metadata.yaml``.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from interlock.runtime.builtin.specs import builtin_spec_dir
from interlock.runtime.engine.context import SessionContext, with_session
from interlock.runtime.engine.runner import Runner
from interlock.runtime.host.owners import default_owner, owner_is_dead
from interlock.runtime.ralph.agent_call import AGENTS_DIR, Caller, reap_agents
from interlock.runtime.ralph.bindings import ORCHESTRATOR, make_bindings
from interlock.runtime.ralph.config import RalphConfig, role_agents
from interlock.runtime.ralph.folder import RalphFolder, now_iso
from interlock.runtime.ralph.limits import SessionLimits, progress_digest
from interlock.runtime.ralph.subagent import Outcome, Subagent
from interlock.runtime.signals.mailbox import Mailbox
from interlock.runtime.signals.model import SignalError, parse_signal
from interlock.runtime.store import Store, open_store
from interlock.runtime.store.base import SessionNotFound

SPEC_NAME = "ralph_orchestrator"
TICK = 0.02  # seconds between looks at the mailbox while the session waits
RALPH_STATES = ("PLANNING", "EXECUTING_BATCH", "REVIEWING_BATCH", "REPLANNING",
                "KNOWLEDGE_APPROVAL", "PAUSED", "ABORTING", "COMPLETE")
Notify = Callable[[str], None]


def spec_path() -> Path:
    return builtin_spec_dir() / f"{SPEC_NAME}.yaml"


def ralph_state(active: tuple[str, ...]) -> str:
    """The seed's state name for an engine configuration."""
    for state in active:
        if state in RALPH_STATES:
            return state
    return active[-1] if active else "?"


@dataclass(frozen=True, slots=True)
class RalphResult:
    """How ``ralph run`` ended: ``completed``, ``aborted``, ``failed``, ``limit`` (see
    ``reason``) or ``stopped`` (Ctrl-C; resumable)."""

    session_id: str
    outcome: str
    reason: str | None = None

    @property
    def exit_code(self) -> int:
        return {"completed": 0, "limit": 3, "stopped": 130}.get(self.outcome, 1)


def recover_claims(mailbox: Mailbox) -> None:
    """Signals a dead consumer claimed but did not archive go back to ``inputs/`` (or are
    dropped when already in ``processed/``)."""
    for owner in mailbox.owners_with_claims():
        if not owner_is_dead(owner):
            continue
        for name in list(mailbox.claimed(owner)):
            path = mailbox.claims / owner / name
            if mailbox.is_finished(name):
                path.unlink(missing_ok=True)
            else:
                with contextlib.suppress(FileNotFoundError):
                    path.rename(mailbox.inputs / name)


class RalphRun:
    """One runner of one Ralph session (see the module docstring)."""

    def __init__(self, root: Path, session_id: str, config: RalphConfig, *,
                 store_url: str | None = None, caller: Caller | None = None,
                 on_note: Notify | None = None) -> None:
        self.root = root
        self.folder = RalphFolder(root, session_id)
        self.config = config
        self.agents = role_agents(root)
        self.store_url = store_url
        self.caller = caller
        self.note = on_note or (lambda _text: None)
        self.mailbox = self.folder.mailbox()
        self.owner = default_owner("ralph")
        self.started = time.monotonic()
        self.task: asyncio.Task[Outcome] | None = None
        self.task_seq: int | None = None
        self.limit: str | None = None
        self.stop_info: dict[str, Any] | None = None
        saved = self.folder.metadata().get("limits")
        self.limits = (SessionLimits.from_json(config, saved) if isinstance(saved, dict)
                       else SessionLimits(config, time.time()))
        self.state = ""
        self._changed = asyncio.Event()
        self._clear_seq = -1  # the last step after which the mailbox held nothing accepted

    # -- opening ------------------------------------------------------------------------

    def _open(self, store: Store) -> Runner:
        bindings = with_session(make_bindings(self.folder),
                                SessionContext.of(self.folder.id, self.folder.path))
        context = {"session_id": self.folder.id,
                   "knowledge_approval_timeout": self.config.knowledge_approval_timeout}
        spec_text: str | None = None
        try:
            store.get(self.folder.id)
        except SessionNotFound:
            spec_text = spec_path().read_text(encoding="utf-8")
        runner, _ = Runner.open(store, spec_text, str(spec_path()), session_id=self.folder.id,
                                bindings=bindings, context=context)
        return runner

    async def run(self, stop: asyncio.Event | None = None) -> RalphResult:
        stop = stop or asyncio.Event()
        agents = self.folder.path / "agents"
        for pid in reap_agents(agents):
            self.note(f"stopped agent process group {pid} left by a dead runner")
        AGENTS_DIR.set(agents)
        recover_claims(self.mailbox)
        store = open_store(self.store_url, self.root)
        queue = open_store(self.store_url, self.root)
        try:
            runner = await asyncio.to_thread(self._open, store)
            runner.mailbox_clear = lambda seq: self._clear_seq >= seq
            self.folder.update_metadata(status="running", stop_reason=None, stop=None)
            self.note(f"ralph session {self.folder.id} [{ralph_state(runner.active)}]")
            changed = asyncio.Event()
            changed.set()
            self._changed = changed

            def stepped(_step: Any) -> None:
                changed.set()

            engine = asyncio.create_task(runner.run(stop, on_step=stepped, poll=0.25))
            try:
                while not engine.done():
                    await self._tick(runner, queue, stop)
                    if stop.is_set():
                        break
                    with contextlib.suppress(TimeoutError):
                        await asyncio.wait_for(changed.wait(), TICK)
                    changed.clear()
                ended = await engine
            finally:
                stop.set()
                await self._cancel_task()
                if not engine.done():
                    engine.cancel()
                    with contextlib.suppress(asyncio.CancelledError, Exception):
                        await engine
                runner.close()
            return self._result(runner, ended.kind,
                                str(ended.failure) if ended.failure else ended.reason)
        finally:
            store.close()
            queue.close()

    def _result(self, runner: Runner, kind: str, reason: str | None) -> RalphResult:
        meta = self.folder.metadata()
        if runner.session.is_final:
            outcome = "aborted" if meta.get("status") == "aborted" else "completed"
            return RalphResult(self.folder.id, outcome)
        if self.limit is not None:
            self.folder.update_metadata(stop=self.stop_info, stop_reason=self.limit)
            return RalphResult(self.folder.id, "limit", self.limit)
        if kind == "failed":
            self.folder.update_metadata(status="failed", stop_reason=reason)
            return RalphResult(self.folder.id, "failed", reason)
        self.folder.update_metadata(stop_reason=f"runner stopped ({kind})")
        return RalphResult(self.folder.id, "stopped", reason)

    # -- one look -----------------------------------------------------------------------

    async def _tick(self, runner: Runner, queue: Store, stop: asyncio.Event) -> None:
        active = runner.active
        ctx = runner.session.context
        state = ralph_state(active)
        if state != self.state:
            self.state = state
            if state != "COMPLETE":
                self.folder.update_metadata(state=state, iteration=ctx.get("iteration", 1))
            self.note(f"{now_iso()} {state}")
        if self._over_limit(ctx):
            stop.set()
            return
        invocation = ctx.get("invocation")
        invoking = any(s.startswith("invoking_") or s == "promoting" for s in active)
        if self.task is not None:
            if not invoking or not invocation or invocation.get("seq") != self.task_seq:
                await self._cancel_task()
            elif self.task.done():
                outcome = self.task.result()
                n = int(ctx.get("iteration", 1))
                digest = await asyncio.to_thread(
                    progress_digest, self.root, self.folder.iteration(n) / "progress.md")
                self.limits.invocation_done(digest, outcome.cost_usd)
                self.folder.update_metadata(limits=self.limits.to_json())
                seq = self.task_seq or 0
                self.task = None
                await asyncio.to_thread(queue.offer, self.folder.id, outcome.event(),
                                        outcome.data(seq), time.time(), f"invocation-{seq}")
                runner.wake()
            return
        if invoking and invocation and self.task_seq != invocation.get("seq"):
            if not await asyncio.to_thread(queue.inbox, self.folder.id):
                self._start(invocation, ctx)
            return
        if invoking:
            return
        if await asyncio.to_thread(queue.inbox, self.folder.id):
            return  # let the session take what is queued first
        seq = runner.seq
        offered = await asyncio.to_thread(self._poll_signals, runner, queue)
        if not offered and self._clear_seq < seq:
            self._clear_seq = seq  # the engine raises `polled` now (Runner.mailbox_clear)
        runner.wake()

    def _over_limit(self, ctx: Any) -> bool:
        """The engine's limits (:mod:`interlock.runtime.ralph.limits`), checked before
        every invocation: the session stops, resumable, with ``stop:`` in metadata.yaml."""
        self.limits.iterations_done = max(0, int(ctx.get("iteration", 1)) - 1)
        reason = self.limits.check(time.time())
        if reason is not None:
            self.limit = reason.detail
            self.stop_info = reason.to_json()
        return reason is not None
    def _start(self, invocation: dict[str, Any], ctx: Any) -> None:
        role = str(invocation["role"])
        agent = self.agents[role]
        sub = Subagent(self.folder, role, agent, self.config, invocation, dict(ctx),
                       caller=self.caller, on_note=self.note)
        self.task_seq = int(invocation["seq"])
        self.task = asyncio.create_task(sub.run())
        self.task.add_done_callback(lambda _task: self._changed.set())
        target = invocation.get("task") or {}
        self.note(f"{now_iso()}   invoke {sub.identity}"
                  + (f" on {target.get('id')} {target.get('title')}" if target else "")
                  + f" (#{self.task_seq})")

    async def _cancel_task(self) -> None:
        task, self.task = self.task, None
        if task is not None and not task.done():
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task

    def _poll_signals(self, runner: Runner, queue: Store) -> int:
        """The orchestrator's Poll-Signals: offer what the configuration accepts."""
        offered = 0
        for name in self.mailbox.pending():
            raw = self.mailbox.peek(name, 64 * 1024)
            if raw is None:
                continue
            try:
                signal = parse_signal(raw, name)
            except SignalError as exc:
                self.mailbox.reject(name, str(exc))
                continue
            mine = signal.target in ("ALL", ORCHESTRATOR)
            buffered = not mine and signal.type in ("STEER", "INFO")
            if not (mine or buffered) or not runner.accepts(signal.event):
                continue
            claim = self.mailbox.claim(name, self.owner)
            if claim is None:
                continue
            queue.offer(self.folder.id, signal.event, signal.event_data(), time.time(),
                        signal.id)
            action = (f"buffered for {signal.target}'s next invocation" if buffered else
                      f"delivered as {signal.event} in {ralph_state(runner.active)}")
            self.mailbox.finish(claim, {"handled_by": ORCHESTRATOR, "handled_at": now_iso(),
                                        "action_taken": action})
            self.note(f"{now_iso()}   {signal.type} ({signal.target}) "
                      f"{signal.message or ''}: {action}")
            offered += 1
            break  # one at a time: the next may depend on the state this one leads to
        return offered
