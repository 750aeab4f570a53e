"""What a dead runner left of its invocations, settled without an invoker: stopping them
for a cancel or a removal, cancelling a session no live runner holds, finding the child
sessions of a session. The rows of ``agent:`` and ``command:`` invokes are alike (a
spooled process group); a ``machine:`` invoke's row names a child session.
"""

from __future__ import annotations

import contextlib
import time

from interlock.runtime.engine.machine_ids import child_session_id, is_machine
from interlock.runtime.host.owners import default_owner
from interlock.runtime.host.procfs import stop_group
from interlock.runtime.store.base import (
    InvocationRecord,
    JournalEntry,
    SessionNotFound,
    StaleSession,
    Store,
)


def stop_leftover(store: Store, session_id: str, record: InvocationRecord, why: str,
                  at: float, grace: float) -> None:
    """Stop what a dead runner left of one invocation of ``session_id``: its process group
    (if still ours; TERM, KILL after ``grace``), or its child machine's session (cancelled
    with ``why``, with that session's own invocations)."""
    if is_machine(record):
        _cancel_child(store, child_session_id(session_id, record.spool), why, at, grace)
    else:
        stop_group(record.pid, record.start_ticks, record.id, grace, time.sleep)


def stop_invocations(store: Store, session_id: str, *, at: float, grace: float = 5.0,
                     outcome_kind: str = "cancelled") -> list[InvocationRecord]:
    """Stop every agent a session's dead runner left in flight (pid + start time or
    INTERLOCK_DISPATCH_ID checked first; TERM, KILL after ``grace``) and end its row with
    ``outcome_kind``, a fan-out's children included (the fan-outs end too): for cancelling
    or removing a session that no runner holds. Returns the rows it ended. Never call it
    while a live runner holds the session."""
    ended: list[InvocationRecord] = []
    for fanout in store.fanouts(session_id, in_flight=True):  # none of its children starts
        store.end_fanout(fanout.id, outcome_kind, at)
    for record in store.invocations(session_id, in_flight=True):
        stop_leftover(store, session_id, record, f"its parent session {session_id} was stopped",
                      at, grace)
        if store.end_invocation(record.id, outcome_kind, None, at):
            ended.append(record)
    return ended


def cancel_offline(store: Store, session_id: str, reason: str | None, at: float, *,
                   ttl: float = 30.0, grace: float = 5.0, was: str | None = None) -> bool:
    """Cancel a session no live runner holds (its dead runner's lease is taken over): its
    invocations are stopped first (:func:`stop_invocations`, child machines included),
    then ``cancelled`` is journaled with the reason (and the status it ``was``). False when
    a live runner holds it or it is over already (nothing is done); StaleSession when it
    changed meanwhile."""
    from interlock.runtime.host.owners import owner_is_dead

    holder = store.holder(session_id)
    dead = holder.owner if holder is not None and owner_is_dead(holder.owner) else None
    lease = store.acquire(session_id, default_owner("cancel"), ttl, at, take_from=dead)
    if lease is None:
        return False
    try:
        row = store.get(session_id)
        if row.status in ("finished", "cancelled"):
            return False
        active = tuple(row.snapshot.get("configuration") or ())
        note = f"reason: {reason}" if reason else "no reason given"
        stopped = stop_invocations(store, session_id, at=at, grace=grace)
        if stopped:
            note += f"; invocations stopped: {', '.join(r.id for r in stopped)}"
        if was is not None:
            note += f"; was {was}"
        store.commit_step(
            session_id, expected_seq=row.seq, lease_token=lease.token,
            entries=[JournalEntry(row.seq + 1, at, "cancelled", before=active, after=active,
                                  note=note)],
            snapshot=row.snapshot, status="cancelled", consumed=[], now=at)
        return True
    finally:
        store.release(lease)


def _cancel_child(store: Store, session_id: str, reason: str, at: float,
                  grace: float) -> None:
    """Cancel a child machine's session that its parent's dead runner left (nothing when
    it is gone, over, or held by a live runner)."""
    with contextlib.suppress(SessionNotFound, StaleSession):
        cancel_offline(store, session_id, reason, at, grace=grace)


def child_sessions(store: Store, session_id: str) -> list[str]:
    """The ids of the child machine sessions a session invoked (that still exist)."""
    found = []
    for record in store.invocations(session_id):
        if is_machine(record):
            child = child_session_id(session_id, record.spool)
            try:
                store.get(child)
            except SessionNotFound:
                continue
            found.append(child)
    return found
