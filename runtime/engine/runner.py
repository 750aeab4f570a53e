"""Runner: drives one Session from the store, one committed step at a time.

A runner owns its session through a lease (one owner at a time; a dead owner's lease
expires and the session can be taken over). Every step, whether an inbox event or a due
timer, is committed in one store transaction: journal entry, snapshot, and the inbox
item it consumed. A crash before the commit leaves the event in the inbox and the
previous snapshot in place, so the step is redone once, never applied twice. Actions'
effects outside the context (files, processes) are at-least-once across a crash.

The session runs the spec text it was created with (kept in the store), so editing the
spec file does not change a running session behind its back: resuming with a changed
file is refused unless the caller asks to migrate.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from interlock.machines import SpecError, compile, loads
from interlock.machines.backends.base import CompiledMachine
from interlock.machines.bindings import Bindings
from interlock.machines.ir import INVOKE_DONE_PREFIX, INVOKE_ERROR_PREFIX
from interlock.runtime.dispatch.config import PollingConfiguration
from interlock.runtime.engine.async_bindings import LoopRef, bridge
from interlock.runtime.engine.clock import Clock, SystemClock
from interlock.runtime.engine.invoke import AgentResolver, InvokeNote, Invoker
from interlock.runtime.engine.session import Session, SessionError, Step
from interlock.runtime.engine.snapshot import Snapshot
from interlock.runtime.host.owners import default_owner, owner_is_dead
from interlock.runtime.store.base import (
    InboxItem,
    InvocationRecord,
    JournalEntry,
    Lease,
    SessionNotFound,
    SessionRow,
    SpecSource,
    StaleSession,
    Store,
    StoreError,
)

_INVOKE_EVENTS = (INVOKE_DONE_PREFIX + ".", INVOKE_ERROR_PREFIX + ".")
LEASE_TTL = 30.0
INBOX_POLL = 0.1  # seconds between inbox checks while idle


class SessionBusy(SessionError):
    """Another live runner owns the session."""


class SpecChanged(SessionError):
    """The spec file differs from the one the session was started with."""


def spec_digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def new_session_id(machine: str) -> str:
    return f"{machine}-{uuid.uuid4().hex[:8]}"


@dataclass(frozen=True, slots=True)
class Opened:
    """How a runner came to hold its session."""

    created: bool
    resumed_from_seq: int


class Runner:
    def __init__(self, store: Store, row: SessionRow, session: Session, lease: Lease,
                 clock: Clock, ttl: float = LEASE_TTL, loop_ref: LoopRef | None = None) -> None:
        self.store = store
        self.loop_ref = loop_ref or LoopRef()
        self.session_id = row.id
        self.spec_path = row.spec_path
        self.session = session
        self.lease = lease
        self.clock = clock
        self.ttl = ttl
        self.seq = row.seq
        self.active: tuple[str, ...] = session.active  # as of the last committed step
        self._wake: asyncio.Event | None = None
        self._wake_loop: asyncio.AbstractEventLoop | None = None
        self.invoker: Invoker | None = None  # set when the spec has invoke: states

    # -- opening ----------------------------------------------------------------------

    @classmethod
    def open(
        cls,
        store: Store,
        spec_text: str | None,
        spec_path: str,
        *,
        session_id: str | None = None,
        bindings: Bindings | None = None,
        clock: Clock | None = None,
        context: Mapping[str, Any] | None = None,
        owner: str | None = None,
        ttl: float = LEASE_TTL,
        migrate: bool = False,
        folder: Path | None = None,
        agents: AgentResolver | None = None,
        invoke_config: PollingConfiguration | None = None,
    ) -> tuple[Runner, Opened]:
        """Create the session (when new) or resume it, holding its lease.

        ``spec_text`` is the spec file's current text; None resumes with the stored one.
        A changed spec is refused unless ``migrate``: then the session's saved state is
        restored into the new spec (every active and remembered state must still exist)
        and the switch is journaled as a ``migrated`` step.

        Invokes (docs/invoke.md): ``folder`` is the session folder (default
        ``.interlock/sessions/<id>`` beside a SQLite store, else under the working
        folder) where agents' output is spooled; ``agents`` resolves ``agent:`` invokes;
        ``invoke_config`` is their dispatch settings. The active states' invokes start
        (or, on resume, are adopted, restarted or failed) before this returns.
        """
        runner, opened = cls._open(store, spec_text, spec_path, session_id=session_id,
                                   bindings=bindings, clock=clock, context=context,
                                   owner=owner, ttl=ttl, migrate=migrate)
        if runner.session.ir.invokes:
            try:
                runner._start_invoker(folder, agents, invoke_config, resumed=not opened.created)
            except BaseException:
                runner.close()
                raise
        return runner, opened

    @classmethod
    def _open(
        cls,
        store: Store,
        spec_text: str | None,
        spec_path: str,
        *,
        session_id: str | None,
        bindings: Bindings | None,
        clock: Clock | None,
        context: Mapping[str, Any] | None,
        owner: str | None,
        ttl: float,
        migrate: bool,
    ) -> tuple[Runner, Opened]:
        clock = clock or SystemClock()
        owner = owner or default_owner()
        ref = LoopRef()
        bindings = bridge(bindings, ref) if bindings is not None else None
        existing = _get(store, session_id) if session_id else None
        if existing is None:
            if spec_text is None:
                raise SessionNotFound(f"no session {session_id!r} in {store.url}")
            return cls._create(store, spec_text, spec_path, session_id, bindings, clock,
                               context, owner, ttl, ref)
        changed = spec_text is not None and spec_digest(spec_text) != existing.spec_hash
        if changed and not migrate:
            raise SpecChanged(
                f"{spec_path} changed since session {existing.id!r} started; it keeps "
                "running the spec it started with: resume it without the spec "
                f"(`interlock resume {existing.id}`), move it to the new spec with "
                "--migrate, or start a new session"
            )
        lease = _acquire(store, existing.id, owner, ttl, clock)
        source = (SpecSource(spec_path, spec_text, spec_digest(spec_text))
                  if changed and spec_text is not None else None)
        text, path = (source.text, source.path) if source else (existing.spec_text,
                                                                existing.spec_path)
        compiled = _compile(text, path, bindings)
        try:
            session = Session.restore(compiled, clock, Snapshot.from_json(existing.snapshot))
        except SessionError as exc:
            store.release(lease)
            raise SessionError(f"cannot migrate session {existing.id!r}: {exc}") from None
        runner = cls(store, existing, session, lease, clock, ttl, ref)
        if source is not None:
            runner._commit([], kind="migrated", spec=source,
                           note=f"spec {existing.spec_hash[:12]} -> {source.digest[:12]}")
        runner._commit([], kind="resumed", note=f"owner {owner}")
        return runner, Opened(False, existing.seq)

    @classmethod
    def _create(cls, store: Store, spec_text: str, spec_path: str, session_id: str | None,
                bindings: Bindings | None, clock: Clock, context: Mapping[str, Any] | None,
                owner: str, ttl: float, ref: LoopRef) -> tuple[Runner, Opened]:
        compiled = _compile(spec_text, spec_path, bindings)
        session_id = session_id or new_session_id(compiled.ir.name)
        session = Session.start(compiled, clock, context)
        now = clock.now()
        row = SessionRow(
            id=session_id, spec_name=compiled.ir.name, spec_path=spec_path,
            spec_hash=spec_digest(spec_text), spec_text=spec_text,
            status=_status(session), seq=0, snapshot=session.snapshot().to_json(),
            created_at=now, updated_at=now,
        )
        store.create(row, JournalEntry(0, now, "created", after=session.active,
                                       note=f"owner {owner}"))
        lease = _acquire(store, session_id, owner, ttl, clock)
        return cls(store, row, session, lease, clock, ttl, ref), Opened(True, 0)

    # -- stepping ---------------------------------------------------------------------

    def pump(self) -> list[Step]:
        """One pass over the inbox, in order; before each event, the timers already due
        fire (they are older news than the event being taken now)."""
        self._keep_lease()
        steps = self._fire_due()
        for item in self.store.inbox(self.session_id):
            if self.session.is_final:
                break
            step = self._take(item)
            self._commit([step], consumed=[item.id])
            if self.invoker is not None and item.event.startswith(_INVOKE_EVENTS):
                self.invoker.ended(item.event, item.data, step.kind != "dropped")
            steps.append(step)
            steps += self._fire_due()
        return steps

    def _take(self, item: InboxItem) -> Step:
        """Send an inbox item; an invoke's done/error event goes in as the engine's own
        when it answers the state's current invocation, and is dropped when that state
        was left meanwhile (or the item did not come from the invoker)."""
        prefix = next((p for p in _INVOKE_EVENTS if item.event.startswith(p)), None)
        if prefix is None:
            return self.session.send(item.event, item.data)
        invoke_id = item.event[len(prefix):]
        invocation = item.data.get("invocation")
        if (self.invoker is not None and invocation is not None
                and self.invoker.current(invoke_id) == invocation):
            return self.session.send(item.event, item.data, internal=True)
        active = self.session.active
        return Step("dropped", item.event, dict(item.data), active, active, self.clock.now(),
                    note=f"invocation {invocation!r} of invoke {invoke_id!r} is not current:"
                         " its state was left")

    def _fire_due(self) -> list[Step]:
        steps = self.session.fire_due()
        for step in steps:
            self._commit([step])
        return steps

    def send(self, event: str, data: Mapping[str, Any] | None = None) -> Step:
        """Deliver one event directly (a live runner's own API)."""
        self._keep_lease()
        step = self.session.send(event, data)
        self._commit([step])
        return step

    def wake(self) -> None:
        """Look at the inbox now instead of at the next poll (thread-safe; for a signal
        consumer that has just queued an event)."""
        loop, wake = self._wake_loop, self._wake
        if loop is not None and wake is not None:
            loop.call_soon_threadsafe(wake.set)

    def accepts(self, event: str) -> bool:
        """Whether the session's active states take ``event`` (thread-safe: reads the
        configuration as of the last committed step)."""
        return self.session.accepts(event, self.active)

    async def run(self, stop: asyncio.Event | None = None, poll: float = INBOX_POLL,
                  on_step: Callable[[Step], None] | None = None) -> None:
        """Pump until the session is final or ``stop`` is set; ``on_step`` sees each step.

        Steps run in a worker thread, so that while an action works (a sub-agent for
        minutes), this loop keeps the lease renewed, hears ``stop`` and serves async
        bindings. A stop lets the step under way finish and commit first.
        """
        stop = stop or asyncio.Event()
        self.loop_ref.attach(asyncio.get_running_loop())
        self._wake = asyncio.Event()
        self._wake_loop = asyncio.get_running_loop()
        renewer = asyncio.create_task(self._renew_until_cancelled())
        try:
            await self._loop(stop, poll, on_step, renewer)
        finally:
            renewer.cancel()
            with contextlib.suppress(asyncio.CancelledError, SessionBusy):
                await renewer

    async def _renew_until_cancelled(self) -> None:
        while True:
            await asyncio.sleep(self.ttl / 3)
            await asyncio.to_thread(self._keep_lease)

    async def _loop(self, stop: asyncio.Event, poll: float,
                    on_step: Callable[[Step], None] | None, renewer: asyncio.Task[None]) -> None:
        while not stop.is_set():
            if renewer.done():
                renewer.result()  # the lease was lost: raise SessionBusy
            for step in await asyncio.to_thread(self.pump):
                if on_step is not None:
                    on_step(step)
            if self.session.is_final:
                break
            wait = poll
            deadline = self.session.next_deadline()
            if deadline is not None:
                wait = max(0.0, min(wait, deadline - self.clock.now()))
            await self._idle(stop, wait)

    async def _idle(self, stop: asyncio.Event, seconds: float) -> None:
        """Wait until ``stop``, a :meth:`wake`, or ``seconds`` have passed."""
        wake = self._wake
        assert wake is not None
        waiters = [asyncio.ensure_future(stop.wait()), asyncio.ensure_future(wake.wait())]
        try:
            await asyncio.wait(waiters, timeout=seconds, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for waiter in waiters:
                waiter.cancel()
            wake.clear()

    def close(self) -> None:
        """Stop the agents still running (journaled ``interrupted``), give up the lease.
        A runner that lost its lease leaves the agents to the runner that took over."""
        if self.invoker is not None:
            invoker, self.invoker = self.invoker, None
            ours = self._holds_lease()
            notes = invoker.shutdown(interrupt=ours)
            if ours:
                with contextlib.suppress(SessionBusy, StoreError):
                    self._journal(notes)
        self.store.release(self.lease)

    def _holds_lease(self) -> bool:
        try:
            holder = self.store.holder(self.session_id)
        except SessionNotFound:
            return True  # the session is gone: nobody else will stop its agents
        except StoreError:
            return True
        return holder is not None and (holder.owner, holder.token) == (self.lease.owner,
                                                                       self.lease.token)

    # -- invokes ----------------------------------------------------------------------

    def invocations_in_flight(self) -> list[InvocationRecord]:
        """The invoked agents running now (thread-safe): empty means the session is idle
        as far as agents go."""
        invoker = self.invoker
        return invoker.in_flight() if invoker is not None else []

    def _start_invoker(self, folder: Path | None, agents: AgentResolver | None,
                       config: PollingConfiguration | None, *, resumed: bool) -> None:
        self.invoker = Invoker(
            self.store, self.session_id, self.session.ir, spec_path=self.spec_path,
            folder=folder or _session_folder(self.store, self.session_id), clock=self.clock,
            wake=self.wake, config=config, resolver=agents)
        active, context = self.session.active, self.session.context
        self._journal(self.invoker.recover(active, context) if resumed
                      else self.invoker.reconcile(active, context))

    def _reconcile(self) -> None:
        """After a committed step: cancel the invokes of states left, start those of
        states entered."""
        if self.invoker is not None:
            self._journal(self.invoker.reconcile(self.session.active, self.session.context))

    def _journal(self, notes: list[InvokeNote]) -> None:
        if not notes:
            return
        seq, now, active = self.seq + 1, self.clock.now(), self.session.active
        self._commit_entries([
            JournalEntry(seq, now, n.kind, None, {"invoke": n.invoke, **n.data}, active,
                         active, n.note) for n in notes])

    # -- persistence ------------------------------------------------------------------

    def _commit(self, steps: list[Step], *, consumed: list[int] | None = None,
                kind: str | None = None, note: str | None = None,
                spec: SpecSource | None = None) -> None:
        seq = self.seq + 1
        now = self.clock.now()
        entries = [JournalEntry(seq, step.at, step.kind, step.event, dict(step.data),
                                step.before, step.after, step.note) for step in steps]
        if kind is not None:
            active = self.session.active
            entries.append(JournalEntry(seq, now, kind, before=active, after=active, note=note))
        self._commit_entries(entries, consumed=consumed, spec=spec)
        if any(step.before != step.after for step in steps):
            self._reconcile()

    def _commit_entries(self, entries: list[JournalEntry], *,
                        consumed: list[int] | None = None,
                        spec: SpecSource | None = None) -> None:
        now = self.clock.now()
        try:
            self.seq = self.store.commit_step(
                self.session_id, expected_seq=self.seq, lease_token=self.lease.token,
                entries=entries, snapshot=self.session.snapshot().to_json(),
                status=_status(self.session), consumed=consumed or [], now=now, spec=spec,
            )
        except StaleSession as exc:
            raise SessionBusy(f"session {self.session_id!r} was taken over by another "
                              f"runner; this one stops ({exc})") from None
        self.active = self.session.active

    def _keep_lease(self) -> None:
        now = self.clock.now()
        if self.lease.expires_at - now > self.ttl / 2:
            return
        renewed = self.store.renew(self.lease, self.ttl, now)
        if renewed is None:
            raise SessionBusy(f"lost the lease on session {self.session_id!r}")
        self.lease = renewed


def _get(store: Store, session_id: str) -> SessionRow | None:
    try:
        return store.get(session_id)
    except SessionNotFound:
        return None


def _acquire(store: Store, session_id: str, owner: str, ttl: float, clock: Clock) -> Lease:
    lease = store.acquire(session_id, owner, ttl, clock.now())
    if lease is None:
        # A runner killed on this host cannot renew; waiting out its lease would stall a
        # crash recovery for nothing. Take over from it (still fenced by the token).
        current = store.holder(session_id)
        if current is not None and owner_is_dead(current.owner):
            lease = store.acquire(session_id, owner, ttl, clock.now(), take_from=current.owner)
    if lease is None:
        raise SessionBusy(f"session {session_id!r} is being run by another runner; a "
                          "session has one runner at a time (its lease expires "
                          f"{ttl:g}s after that runner stops renewing it)")
    return lease


def _compile(spec_text: str, spec_path: str, bindings: Bindings | None) -> CompiledMachine:
    try:
        return compile(loads(spec_text, spec_path), bindings=bindings)
    except SpecError:
        raise
    except ValueError as exc:
        raise SessionError(str(exc)) from None


def _session_folder(store: Store, session_id: str) -> Path:
    """``.interlock/sessions/<id>``: beside a SQLite store's file, else in the working
    folder."""
    path = getattr(store, "path", None)
    base = path.parent if isinstance(path, Path) else Path.cwd() / ".interlock"
    return base / "sessions" / session_id


def _status(session: Session) -> str:
    return "final" if session.is_final else "running"
