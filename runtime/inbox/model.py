"""Inbox messages (seed 002): the record, its lease, its statuses and the errors.

Transitions::

    queued ──claim──▶ in_progress ──▶ acked ──▶ done | failed
                          └──────────────────▶ done | failed

A live lease belongs to the worker that claimed the message; an expired one (status
``in_progress`` or ``acked``) puts the message back in the fetchable set, and the next
claim gives it a new token. ``done`` and ``failed`` are final. A worker's update carries
its lease token; the operator (``/poll``, ``interlock inbox``) acts without one.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, replace
from enum import StrEnum
from typing import Any

from interlock.runtime.config.inbox_store import InboxError

OPERATOR = "operator"  # the actor of a token-less update (the /poll commands)
REAPER = "reaper"  # the actor of reclaim_expired


class Status(StrEnum):
    QUEUED = "queued"
    IN_PROGRESS = "in_progress"
    ACKED = "acked"
    DONE = "done"
    FAILED = "failed"


FINAL = frozenset({Status.DONE, Status.FAILED})
LEASED = frozenset({Status.IN_PROGRESS, Status.ACKED})
# Updates a worker (with its lease token) may make, and those the operator may make.
WORKER_MOVES: dict[Status, frozenset[Status]] = {
    Status.IN_PROGRESS: frozenset({Status.ACKED, Status.DONE, Status.FAILED}),
    Status.ACKED: frozenset({Status.DONE, Status.FAILED}),
}
OPERATOR_MOVES: dict[Status, frozenset[Status]] = {
    Status.QUEUED: frozenset({Status.ACKED, Status.DONE, Status.FAILED}),
    **WORKER_MOVES,
}


class UnknownMessage(InboxError):
    kind = "unknown_message"


class InvalidTransition(InboxError):
    kind = "invalid_transition"


class StaleLease(InboxError):
    """The token is not the message's current lease: it expired and another worker
    claimed the message. Nothing was changed."""

    kind = "stale_lease"


class BadRequest(InboxError):
    kind = "bad_request"


class InboxUnavailable(InboxError):
    """The store cannot be reached (connection refused, timed out, lost)."""

    kind = "unavailable"


ERRORS: dict[str, type[InboxError]] = {
    cls.kind: cls for cls in (InboxError, UnknownMessage, InvalidTransition, StaleLease,
                              BadRequest, InboxUnavailable)
}


@dataclass(frozen=True, slots=True)
class MessageLease:
    """A claim: updates must carry ``token`` until ``lease_until`` (epoch seconds)."""

    token: str
    lease_until: float


@dataclass(frozen=True, slots=True)
class Message:
    """One queued message. ``sender`` is the seed's ``from``."""

    id: str
    type: str
    sender: str
    status: Status
    body: str = ""
    correlation_id: str | None = None
    payload_ref: str | None = None
    lease_until: float | None = None
    owner: str | None = None
    created_at: float = 0.0
    updated_at: float = 0.0

    def to_json(self) -> dict[str, Any]:
        """The wire form: ``from`` instead of ``sender``."""
        data = asdict(self)
        data["from"] = data.pop("sender")
        data["status"] = str(self.status)
        return data

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Message:
        fields = dict(data)
        fields["sender"] = fields.pop("from")
        fields["status"] = Status(fields["status"])
        return cls(**fields)


@dataclass(frozen=True, slots=True)
class Claim:
    """A message taken by ``claim_next``, with its lease (status is in_progress)."""

    message: Message
    lease: MessageLease


@dataclass(frozen=True, slots=True)
class StatusChange:
    """One line of a message's journal: a status change and who made it (a worker's owner
    id, ``operator`` or ``reaper``)."""

    message_id: str
    at: float
    before: Status
    after: Status
    actor: str
    reason: str | None = None

    def to_json(self) -> dict[str, Any]:
        return {"message_id": self.message_id, "at": self.at, "before": str(self.before),
                "after": str(self.after), "actor": self.actor, "reason": self.reason}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> StatusChange:
        return cls(data["message_id"], data["at"], Status(data["before"]),
                   Status(data["after"]), data["actor"], data.get("reason"))


def parse_status(value: str) -> Status:
    """A status from text, or BadRequest naming the valid ones."""
    try:
        return Status(value)
    except ValueError:
        names = ", ".join(s.value for s in Status)
        raise BadRequest(f"unknown status {value!r} (one of: {names})") from None


def check_update(message: Message, new: Status, token: str | None,
                 current_token: str | None) -> None:
    """Raise unless ``new`` may follow ``message``'s status for this caller.

    A token must be the current lease's (else StaleLease, whatever the status); without
    a token the operator's moves apply. A message whose lease expired is still the
    lease holder's to finish until another worker claims it.
    """
    if token is not None and token != current_token:
        raise StaleLease(f"message {message.id}: the lease token is stale (the lease "
                         "expired and the message was claimed again, or it was never "
                         "this token's); nothing changed")
    if message.status not in move_for(new, token).sources:
        if message.status in FINAL:
            why = f"it is already {message.status} (final)"
        elif token is not None:
            why = f"a worker cannot move it from {message.status} to {new}"
        else:
            why = f"{message.status} -> {new} is not a transition"
        raise InvalidTransition(f"message {message.id}: cannot mark {new}: {why}")


@dataclass(frozen=True, slots=True)
class Move:
    """One kind of status update, the transition core every adapter shares: to ``new``,
    by a worker (``by_worker``: it carries its lease token) or by the operator.

    ``sources`` are the statuses it may start from (none: it is never allowed). An
    adapter either checks first and writes (``apply``, under its own lock or revision
    check), or writes conditionally on ``sources`` and the token, in one statement, and
    asks ``check_update`` why when nothing was written.
    """

    new: Status
    by_worker: bool
    sources: tuple[Status, ...]

    @property
    def keeps_lease(self) -> bool:
        """acked keeps the lease running; done and failed end it (lease_until NULL)."""
        return self.new is Status.ACKED

    def actor(self, owner: str | None) -> str:
        """Who the journal names: the lease holder for a worker's update, else the
        operator."""
        return owner if self.by_worker and owner else OPERATOR

    def apply(self, message: Message, token: str | None, current_token: str | None,
              now: float) -> Message:
        """``message`` after this move at ``now``; raises the InboxError that refuses it
        (StaleLease, InvalidTransition)."""
        check_update(message, self.new, token, current_token)
        return replace(message, status=self.new, updated_at=now,
                       lease_until=message.lease_until if self.keeps_lease else None)


MOVES: dict[tuple[Status, bool], Move] = {
    (new, by_worker): Move(new, by_worker, tuple(sorted(
        (s for s, targets in (WORKER_MOVES if by_worker else OPERATOR_MOVES).items()
         if new in targets), key=lambda s: s.value)))
    for new in Status for by_worker in (True, False)
}


def move_for(status: Status | str, token: str | None) -> Move:
    """The move to ``status`` for a caller with (a worker) or without (the operator) a
    lease token; ValueError for an unknown status."""
    return MOVES[Status(status), token is not None]


def fetchable(message: Message, now: float) -> bool:
    """Queued, or leased with the lease run out."""
    if message.status is Status.QUEUED:
        return True
    return (message.status in LEASED and message.lease_until is not None
            and message.lease_until <= now)


_ID = re.compile(r"[0-9a-f]{32}")


def check_id(message_id: str) -> str:
    """An id as the stores issue them (32 hex digits), else BadRequest."""
    if not isinstance(message_id, str) or _ID.fullmatch(message_id) is None:
        raise BadRequest(f"bad message id {message_id!r}: ids are 32 lowercase hex digits")
    return message_id


def check_post(type_: str, sender: str) -> None:
    if not type_ or not type_.strip():
        raise BadRequest("a message needs a type")
    if not sender or not sender.strip():
        raise BadRequest("a message needs a sender (from)")
