"""What both backends share besides their SQL (store/_sql.py): row shapes, JSON encoding
and the fencing rules."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from typing import Any

from interlock.runtime.store.base import (
    AgentRecord,
    DeadLetter,
    FanoutRecord,
    InvocationRecord,
    JournalEntry,
    Lease,
    QueuedEvent,
    SessionNotFound,
    SessionRow,
    StaleSession,
    StoreError,
)

Decode = Callable[[Any], Any]  # a JSON column as the driver returns it -> Python


def dumps(value: Any) -> str:
    """JSON text for a column; NaN and infinities are refused on both backends alike."""
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False, allow_nan=False)


def session_params(row: SessionRow) -> tuple[Any, ...]:
    return (
        row.id, row.spec_name, row.spec_path, row.spec_hash, row.spec_text, row.status,
        row.seq, dumps(row.snapshot), row.created_at, row.updated_at,
    )


def journal_params(session_id: str, entry: JournalEntry) -> tuple[Any, ...]:
    return (
        session_id, entry.seq, entry.at, entry.kind, entry.event, dumps(entry.data),
        dumps(list(entry.before)), dumps(list(entry.after)), entry.note,
    )


def session_from(values: Sequence[Any], decode: Decode) -> SessionRow:
    return SessionRow(
        id=values[0], spec_name=values[1], spec_path=values[2], spec_hash=values[3],
        spec_text=values[4], status=values[5], seq=int(values[6]),
        snapshot=decode(values[7]), created_at=float(values[8]), updated_at=float(values[9]),
    )


def entry_from(values: Sequence[Any], decode: Decode) -> JournalEntry:
    return JournalEntry(
        seq=int(values[0]), at=float(values[1]), kind=values[2], event=values[3],
        data=decode(values[4]), before=tuple(decode(values[5])),
        after=tuple(decode(values[6])), note=values[7],
    )


def queued_from(values: Sequence[Any], decode: Decode) -> QueuedEvent:
    return QueuedEvent(
        id=int(values[0]), session_id=values[1], event=values[2], data=decode(values[3]),
        enqueued_at=float(values[4]),
    )


def agent_params(record: AgentRecord) -> tuple[Any, ...]:
    return (
        record.id, record.pgid, record.pid, record.owner, dumps(list(record.argv)),
        record.started_at, record.session_id,
    )


def agent_from(values: Sequence[Any]) -> AgentRecord:
    """An AgentRecord from AGENT_COLUMNS; argv is JSON text on both backends."""
    return AgentRecord(
        id=values[0], pgid=int(values[1]), pid=int(values[2]), owner=values[3],
        argv=tuple(json.loads(values[4])), started_at=float(values[5]), session_id=values[6],
    )


def invocation_params(record: InvocationRecord) -> tuple[Any, ...]:
    return (
        record.id, record.session_id, record.invoke, record.state, dumps(list(record.argv)),
        record.spool, record.started_at, record.pid, record.pgid, record.start_ticks,
        record.outcome, record.reason, record.ended_at, record.fanout, record.index,
        None if record.result is None else dumps(record.result),
    )


def _optional(value: Any, kind: Callable[[Any], Any]) -> Any:
    return None if value is None else kind(value)


def invocation_from(values: Sequence[Any]) -> InvocationRecord:
    """An InvocationRecord from INVOCATION_COLUMNS; argv and result are JSON text on both
    backends."""
    return InvocationRecord(
        id=values[0], session_id=values[1], invoke=values[2], state=values[3],
        argv=tuple(json.loads(values[4])), spool=values[5], started_at=float(values[6]),
        pid=_optional(values[7], int), pgid=_optional(values[8], int), start_ticks=values[9],
        outcome=values[10], reason=values[11], ended_at=_optional(values[12], float),
        fanout=values[13], index=_optional(values[14], int),
        result=_optional(values[15], json.loads),
    )


def fanout_params(record: FanoutRecord) -> tuple[Any, ...]:
    return (
        record.id, record.session_id, record.invoke, record.state, dumps(list(record.items)),
        record.concurrency, record.started_at, record.outcome, record.ended_at,
    )


def fanout_from(values: Sequence[Any]) -> FanoutRecord:
    """A FanoutRecord from FANOUT_COLUMNS; items is JSON text on both backends."""
    return FanoutRecord(
        id=values[0], session_id=values[1], invoke=values[2], state=values[3],
        items=tuple(json.loads(values[4])), concurrency=_optional(values[5], int),
        started_at=float(values[6]), outcome=values[7], ended_at=_optional(values[8], float),
    )


def fanout_exists(fanout_id: str) -> StoreError:
    return StoreError(f"a fan-out {fanout_id!r} already exists")


def invocation_exists(invocation_id: str) -> StoreError:
    return StoreError(f"an invocation {invocation_id!r} already exists")


def agent_exists(agent_id: str) -> StoreError:
    return StoreError(f"an agent process record {agent_id!r} already exists")


def check_key(key: str) -> None:
    """StoreError unless ``key`` (an ``offer`` key) is a non-empty string."""
    if not key:
        raise StoreError(f"a delivery key must be a non-empty string, not {key!r}")


def check_entries(entries: Sequence[JournalEntry], seq: int) -> None:
    """ValueError unless every entry belongs to step ``seq``."""
    wrong = [entry.seq for entry in entries if entry.seq != seq]
    if wrong:
        raise ValueError(f"journal entries for step {seq} carry seq {wrong}")


def check_ttl(ttl: float) -> None:
    if not ttl > 0:
        raise ValueError(f"lease ttl must be positive, not {ttl}")


def fence(
    session_id: str,
    stored: Sequence[Any] | None,
    *,
    expected_seq: int,
    lease_token: int,
    now: float,
) -> None:
    """Refuse a commit unless ``stored`` = (seq, lease_owner, lease_token, lease_expires_at)
    shows the runner's view is current and its lease is live."""
    if stored is None:
        raise not_found(session_id)
    seq, owner, token, expires_at = stored
    if seq != expected_seq:
        raise StaleSession(
            f"session {session_id!r} moved on: it is at step {seq}, the commit expected"
            f" {expected_seq}"
        )
    if owner is None or token != lease_token:
        holder = "nobody" if owner is None else f"{owner!r} (token {token})"
        raise StaleSession(
            f"session {session_id!r}: lease token {lease_token} is no longer current;"
            f" the lease is held by {holder}"
        )
    if expires_at <= now:
        raise StaleSession(
            f"session {session_id!r}: lease token {lease_token} expired at {expires_at:.3f}"
            f" (now {now:.3f})"
        )


def lease_from(session_id: str, owner: str, values: Sequence[Any]) -> Lease:
    """A Lease from (lease_token, lease_expires_at[, lease_acquired_at])."""
    acquired = values[2] if len(values) > 2 else None
    return Lease(session_id=session_id, owner=owner, token=int(values[0]),
                 expires_at=float(values[1]),
                 acquired_at=None if acquired is None else float(acquired))


def dead_params(session_id: str, letter: DeadLetter) -> tuple[Any, ...]:
    """Values for (session_id, kind, event, data, failed_at, error)."""
    return (session_id, letter.kind, letter.event, dumps(letter.data), letter.failed_at,
            letter.error)


def dead_from(values: Sequence[Any], decode: Decode) -> DeadLetter:
    return DeadLetter(id=int(values[0]), session_id=values[1], kind=values[2],
                      event=values[3], data=decode(values[4]), failed_at=float(values[5]),
                      error=values[6])


def not_found(session_id: str) -> SessionNotFound:
    return SessionNotFound(f"no session {session_id!r}")
