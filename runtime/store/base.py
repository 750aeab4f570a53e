"""The store contract: where sessions, their journal, their event queue and their leases
live, and the agent process groups dispatchers started (so orphans can be found after a
crash).

"Inbox" is not a store word: it names the seed-002 message inbox (runtime/inbox). Events
waiting for a session's runner are its *event queue* (``enqueue``, ``offer``,
``queued_events``).

One protocol per concern, for code that needs only that concern: :class:`SessionStore`
(sessions, journal, step commits, cancel requests), :class:`EventQueue` (queued events,
delivery keys, dead letters), :class:`LeaseStore`, :class:`AgentProcessStore`,
:class:`InvocationStore`, :class:`StagedConfigStore`; :class:`Store` is all of them. Two
implementations (SQLite, the embedded default; PostgreSQL by URL), one contract test suite
run against both (tests/runtime/store/test_store_contract.py).

A step is committed atomically: journal entries appended, the snapshot replaced, the
sequence number bumped and the queued events it consumed deleted, in one transaction. The
commit is fenced twice: by the sequence number the runner last saw (``expected_seq``) and
by its lease token, so a runner that lost its lease can never overwrite a newer state.

Time is always passed in (``now``, ``at``): the store never reads a clock of its own, so
lease expiry follows the runner's clock and tests drive it without sleeping.
"""

from __future__ import annotations

import builtins
from dataclasses import dataclass, field
from typing import Any, Protocol


class StoreError(Exception):
    """Base of every store failure; the message is fit for a user."""


class SessionNotFound(StoreError):
    pass


class SessionExists(StoreError):
    pass


class StaleSession(StoreError):
    """A commit was fenced off: another runner moved the session on, or took the lease."""


class StoreUnavailable(StoreError):
    """The database cannot be reached or stays locked after bounded retries."""


@dataclass(frozen=True, slots=True)
class SessionRow:
    id: str
    spec_name: str
    spec_path: str
    spec_hash: str
    spec_text: str
    status: str  # STORED_STATUSES: "active" | "failed" | "finished" | "cancelled"
    seq: int  # number of the last committed step; 0 right after create
    snapshot: dict[str, Any]
    created_at: float
    updated_at: float


@dataclass(frozen=True, slots=True)
class SpecSource:
    """The spec a session runs: where it was read from, its text, and its digest."""

    path: str
    text: str
    digest: str


@dataclass(frozen=True, slots=True)
class JournalEntry:
    """One line of a session's append-only journal."""

    seq: int  # the step it belongs to
    at: float  # wall-clock seconds
    kind: str  # "created" | "event" | "timer" | "rejected" | "resumed" | "error" ...
    event: str | None = None
    data: dict[str, Any] = field(default_factory=dict)
    before: tuple[str, ...] = ()  # active states before the step
    after: tuple[str, ...] = ()  # active states after it
    note: str | None = None


@dataclass(frozen=True, slots=True)
class QueuedEvent:
    """An event in a session's event queue, waiting for its runner to take it."""

    id: int  # increasing per store: the delivery order
    session_id: str
    event: str
    data: dict[str, Any]
    enqueued_at: float


@dataclass(frozen=True, slots=True)
class Lease:
    session_id: str
    owner: str
    token: int  # increases on every acquisition: the fencing token
    expires_at: float
    # When this holder took it (None: not recorded); not part of a lease's identity.
    acquired_at: float | None = field(default=None, compare=False)


@dataclass(frozen=True, slots=True)
class DeadLetter:
    """An event whose step failed (an action or guard raised), kept out of the event queue.

    ``kind`` is "event" (a queued event or a direct send) or "timer" (an ``after`` timer
    event that fired). ``id`` increases per store: the order the letters were buried in;
    when handing new letters to ``commit_step`` it is ignored (the store assigns it).
    """

    id: int
    session_id: str
    kind: str
    event: str
    data: dict[str, Any]
    failed_at: float
    error: str  # one line: what raised, where


@dataclass(frozen=True, slots=True)
class CancelRequest:
    """Someone asked the session's live runner to cancel it."""

    reason: str | None
    at: float


@dataclass(frozen=True, slots=True)
class AgentRecord:
    """A sub-agent process group a dispatcher started and has not yet seen stopped."""

    id: str  # dispatch id (hex); also set as INTERLOCK_DISPATCH_ID in the agent's environment
    pgid: int
    pid: int
    owner: str  # the dispatcher process, "host:pid:tag" (same shape as lease owners)
    argv: tuple[str, ...]
    started_at: float
    session_id: str | None = None


@dataclass(frozen=True, slots=True)
class InvocationRecord:
    """One agent an invoking state started (runtime/engine/invoke.py): what ran, where its
    output is spooled, and how it ended. ``pid``/``pgid``/``start_ticks`` are set once the
    process runs (pid + start time name it for good); ``outcome`` is None while it is in
    flight, then ``done``, ``error``, ``cancelled``, ``interrupted`` or ``dropped``.

    A child of a fan-out (``each:``) names its :class:`FanoutRecord` (``fanout``) and its
    item's ``index``; ``result`` is the event it raised (``{"event": name, "data": {...}}``),
    kept for the fan-out's ``done.invoke.<id>.all``."""

    id: str  # also INTERLOCK_DISPATCH_ID in the agent's environment
    session_id: str
    invoke: str  # the InvokeIR id
    state: str
    argv: tuple[str, ...]
    spool: str  # the folder holding the agent's stdin, stdout, stderr and exit status
    started_at: float
    pid: int | None = None
    pgid: int | None = None
    start_ticks: str | None = None
    outcome: str | None = None
    reason: str | None = None
    ended_at: float | None = None
    fanout: str | None = None
    index: int | None = None
    result: dict[str, Any] | None = field(default=None, hash=False)


@dataclass(frozen=True, slots=True)
class FanoutRecord:
    """One run of a fan-out (an invoke with ``each:``, runtime/engine/invoke_fanout.py): the
    items its children run over, as evaluated when its state was entered, and at most how
    many run at once (``concurrency``; None: all). Its children are invocations naming it.
    ``outcome`` is None while it runs, then ``done`` (its ``.all`` event was taken),
    ``dropped``, ``delivered`` (its ``.all`` was offered before a crash), ``error`` (its
    list could not be evaluated) or ``cancelled``."""

    id: str  # also the delivery key of its done.invoke.<id>.all
    session_id: str
    invoke: str
    state: str
    items: tuple[Any, ...] = field(hash=False)
    concurrency: int | None
    started_at: float
    outcome: str | None = None
    ended_at: float | None = None


# What a session row's ``status`` holds. Whether an active session is running or stopped
# is not stored: it depends on its lease (see runtime/engine/lifecycle.py).
STORED_STATUSES = ("active", "failed", "finished", "cancelled")


class StoreConnection(Protocol):
    """What every store protocol below has: where the store is, and closing it.

    Every method of every store protocol is safe to call from several processes at once.
    Methods that name a session raise SessionNotFound when it does not exist, except
    ``renew`` (None) and ``release`` (no-op). Transient failures (a locked database, a
    lost connection) are retried with bounded exponential backoff, then StoreUnavailable.
    ``owner`` strings must be unique per runner process (e.g. host:pid:random).
    """

    url: str  # where the store is, fit for messages: a password is masked (redact_url)

    def close(self) -> None: ...


class SessionStore(StoreConnection, Protocol):
    """Sessions: their rows, their append-only journal, the step commit, cancel requests."""

    def create(self, row: SessionRow, entry: JournalEntry) -> None:
        """Insert a new session (no lease) with its first journal entry; SessionExists if
        the id is taken. ValueError if ``entry.seq`` is not ``row.seq``."""

    def get(self, session_id: str) -> SessionRow:
        """SessionNotFound if there is none."""

    def list(self) -> list[SessionRow]:
        """All sessions, oldest first."""

    def commit_step(
        self,
        session_id: str,
        *,
        expected_seq: int,
        lease_token: int,
        entries: builtins.list[JournalEntry],
        snapshot: dict[str, Any],
        status: str,
        consumed: builtins.list[int],
        now: float,
        spec: SpecSource | None = None,
        buried: builtins.list[DeadLetter] | None = None,
        revived: builtins.list[int] | None = None,
    ) -> int:
        """Atomically append ``entries``, replace the snapshot and status (and the spec,
        when ``spec`` is given: a migration), delete the
        ``consumed`` queued events (ids not queued for this session are ignored), add the
        ``buried`` dead letters (their ids and session ids are assigned here), delete the
        ``revived`` dead letters (ids of other sessions are ignored), and set
        seq to ``expected_seq + 1`` (returned) and updated_at to ``now``.
        StaleSession if the stored seq is not ``expected_seq`` or ``lease_token`` is not
        the session's current lease, unexpired at ``now``; then nothing is written.
        ValueError if an entry's seq is not ``expected_seq + 1``."""

    def journal(self, session_id: str, after_seq: int = 0) -> builtins.list[JournalEntry]:
        """Entries with seq > after_seq, in order."""

    def delete(self, session_id: str) -> None:
        """Delete the session with its journal, event queue, dead letters, delivery keys and
        lease. A runner still holding it finds SessionNotFound on its next commit."""

    def request_cancel(self, session_id: str, reason: str | None, at: float) -> None:
        """Ask the session's live runner to cancel it (it looks at least every 0.1 s)."""

    def cancel_request(self, session_id: str) -> CancelRequest | None:
        """The pending cancel request, if any (kept until the session is deleted)."""


class EventQueue(StoreConnection, Protocol):
    """Events waiting for a session's runner (taken by ``SessionStore.commit_step``'s
    ``consumed``), delivery keys, and the dead letters of steps that failed."""

    def enqueue(self, session_id: str, event: str, data: dict[str, Any], at: float) -> int:
        """Queue an event for the session's runner; returns the item id."""

    def offer(self, session_id: str, event: str, data: dict[str, Any], at: float,
              key: str, *, wake: bool = True) -> int | None:
        """Queue an event like ``enqueue``, at most once per (session, ``key``), ever: for
        deliveries that may be repeated (a signal re-sent after a crash), keyed by the
        sender's id for it. Returns the new item's id, or None when ``key`` was offered to
        this session before: None means the key's item is in the session's event queue or
        was consumed into its journal, by this caller or another. The key and the item are
        written in one transaction, so neither exists without the other; concurrent offers
        of one key queue one item and none fails. A call that had to be retried returns its
        own item's id if its first attempt did land (never a second item). StoreError for
        an empty ``key``. Keys are forgotten only with their session. ``wake=False``: the
        caller wakes the session's runner itself (it runs in the caller's process), so
        the store's own wake-up (SQLite's doorbell) is not rung."""

    def delivered(self, session_id: str, key: str) -> bool:
        """Whether ``key`` was ever offered to the session (its item may be consumed)."""

    def queued_events(self, session_id: str) -> builtins.list[QueuedEvent]:
        """The session's queued events, oldest first."""

    def dead_letters(self, session_id: str) -> builtins.list[DeadLetter]:
        """The session's dead letters, in the order they were buried."""


class LeaseStore(StoreConnection, Protocol):
    """Who runs a session: one owner at a time, fenced by an increasing token."""

    def acquire(self, session_id: str, owner: str, ttl: float, now: float,
                take_from: str | None = None) -> Lease | None:
        """Take the session's lease if it is free, expired at ``now``, already
        ``owner``'s, or held by ``take_from`` (a holder the caller knows is dead); the
        token always goes up (so an earlier holder is fenced off). None if another owner
        holds a live one."""

    def holder(self, session_id: str) -> Lease | None:
        """The lease as it stands (possibly expired), or None when nobody holds it."""

    def renew(self, lease: Lease, ttl: float, now: float) -> Lease | None:
        """Extend a lease still held (same owner and token, not taken over or released,
        even if it expired meanwhile) to ``now + ttl``; None if it was lost."""

    def release(self, lease: Lease) -> None:
        """Give the lease up; the token is kept, so the next holder's is higher.
        No-op if it was lost."""


class AgentProcessStore(StoreConnection, Protocol):
    """Agent process groups dispatchers started, so orphans can be stopped after a crash."""

    def record_agent(self, record: AgentRecord) -> None:
        """Remember a started agent process group (before it can outlive its dispatcher);
        StoreError if ``record.id`` is already recorded. ``session_id`` need not name a
        session."""

    def forget_agent(self, agent_id: str) -> None:
        """Drop the record once the group is seen stopped; no-op if there is none."""

    def agents(self) -> builtins.list[AgentRecord]:
        """Every record, by started_at then id: after a crash, the groups to stop."""


class InvocationStore(StoreConnection, Protocol):
    """The agents invoking states started (runtime/engine/invoke.py) and how they ended."""

    def record_invocation(self, record: InvocationRecord) -> None:
        """Remember an invocation before its process starts; StoreError if ``record.id``
        is taken, SessionNotFound if its session does not exist."""

    def invocation_started(self, invocation_id: str, pid: int, pgid: int,
                           start_ticks: str) -> None:
        """Note the process an invocation runs as (a restart of it may note another);
        no-op if there is no such invocation."""

    def end_invocation(self, invocation_id: str, outcome: str, reason: str | None,
                       at: float) -> bool:
        """Set the outcome of an invocation still in flight; False (nothing written) if it
        already has one or does not exist: the first outcome stands."""

    def invocations(self, session_id: str, *,
                    in_flight: bool = False) -> builtins.list[InvocationRecord]:
        """The session's invocations by started_at then id (only those without an
        outcome when ``in_flight``); SessionNotFound if there is no such session."""

    def invocation_result(self, invocation_id: str, result: dict[str, Any]) -> None:
        """Keep the event a fan-out's child raised (``{"event": ..., "data": ...}``) on its
        row, before the event is offered; no-op if there is no such invocation."""

    def record_fanout(self, record: FanoutRecord) -> None:
        """Remember a fan-out before any of its children starts; StoreError if
        ``record.id`` is taken, SessionNotFound if its session does not exist."""

    def end_fanout(self, fanout_id: str, outcome: str, at: float) -> bool:
        """Set the outcome of a fan-out still running; False (nothing written) if it
        already has one or does not exist: the first outcome stands."""

    def fanouts(self, session_id: str, *,
                in_flight: bool = False) -> builtins.list[FanoutRecord]:
        """The session's fan-outs by started_at then id (only those without an outcome
        when ``in_flight``); SessionNotFound if there is no such session."""


class StagedConfigStore(StoreConnection, Protocol):
    """``staged_configs`` (seed 000): one pending configuration per node."""

    def stage_config(self, node: str, config: dict[str, Any], at: float) -> None:
        """Write ``staged_configs[node]`` (seed 000), replacing any earlier one, atomically.
        ``node`` need not name a session."""

    def staged_config(self, node: str) -> dict[str, Any] | None:
        """``staged_configs[node]``, or None when nothing is staged for it."""

    def consume_staged_config(self, node: str) -> dict[str, Any] | None:
        """Return ``staged_configs[node]`` and remove it in one transaction (None when
        nothing is staged): of two consumers, exactly one gets it."""


class Store(SessionStore, EventQueue, LeaseStore, AgentProcessStore, InvocationStore,
            StagedConfigStore, Protocol):
    """The whole store, every concern: for code that opens one and needs them all. Code
    that needs less takes the narrowest protocol above (a function that only reads
    invocations takes an :class:`InvocationStore`)."""


