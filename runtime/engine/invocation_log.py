"""What a session's invocations were: each row of the store's ``invocations`` joined with
the journal entry that ended it and the prompt and output its spool folder holds.

For a page or a report (``interlock ui``): an agent's rendered prompt (its spool's
``stdin``), its answer, usage and error (the ``done.invoke``/``error.invoke`` data,
docs/invoke.md), how it ended; a child machine's session id and the agent calls it
reported (a Ralph subagent's ``output.calls``). Nothing here writes.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from interlock.runtime.engine.machine_ids import child_session_id, is_machine
from interlock.runtime.store.base import (
    InvocationRecord,
    InvocationStore,
    JournalEntry,
    SessionNotFound,
    SessionStore,
)

__all__ = ["SPOOL_LIMIT", "InvocationView", "invocation_views"]

SPOOL_LIMIT = 64 * 1024  # bytes of a prompt (its head) or an output (its tail) shown
_ENDINGS = ("done.invoke.", "error.invoke.")


class _Store(SessionStore, InvocationStore, Protocol):
    """What reading invocations needs of a store."""


@dataclass(frozen=True, slots=True)
class InvocationView:
    """One invocation as a page shows it. ``kind``: ``process`` (an agent or command) or
    ``machine`` (a child session, ``child``); ``outcome`` None while it runs; ``event``
    the ``done.invoke``/``error.invoke`` event that ended it (None: none was delivered);
    ``prompt``/``output``: the spool's stdin (head) and stdout (tail), up to
    :data:`SPOOL_LIMIT` bytes each; ``calls``: a child machine's agent calls as it
    reported them (prompt, text, usage, error)."""

    session: str
    id: str
    invoke: str
    state: str
    kind: str
    argv: tuple[str, ...]
    started_at: float
    ended_at: float | None = None
    outcome: str | None = None
    reason: str | None = None
    event: str | None = None
    prompt: str | None = None
    output: str | None = None
    answer: Any = None
    usage: Mapping[str, Any] | None = None
    error: str | None = None
    completion: str | None = None
    child: str | None = None
    calls: tuple[Mapping[str, Any], ...] = field(default=())

    def to_json(self) -> dict[str, Any]:
        return {"session": self.session, "id": self.id, "invoke": self.invoke,
                "state": self.state, "kind": self.kind, "argv": list(self.argv),
                "started_at": self.started_at, "ended_at": self.ended_at,
                "outcome": self.outcome, "reason": self.reason, "event": self.event,
                "prompt": self.prompt, "output": self.output, "answer": self.answer,
                "usage": dict(self.usage) if self.usage is not None else None,
                "error": self.error, "completion": self.completion, "child": self.child,
                "calls": [dict(c) for c in self.calls]}


def _read(path: Path, tail: bool) -> str | None:
    """Up to SPOOL_LIMIT bytes of ``path`` (its head, or its tail), as text."""
    try:
        with path.open("rb") as handle:
            if tail:
                size = handle.seek(0, 2)
                handle.seek(max(0, size - SPOOL_LIMIT))
            data = handle.read(SPOOL_LIMIT)
    except OSError:
        return None
    return data.decode("utf-8", "replace")


def _endings(journal: list[JournalEntry]) -> dict[str, JournalEntry]:
    """The journal entry that delivered each invocation's end, by invocation id."""
    found: dict[str, JournalEntry] = {}
    for entry in journal:
        if entry.event is not None and entry.event.startswith(_ENDINGS):
            invocation = entry.data.get("invocation") if isinstance(entry.data, Mapping) \
                else None
            if isinstance(invocation, str):
                found[invocation] = entry
    return found


def _calls(output: Any) -> tuple[Mapping[str, Any], ...]:
    calls = output.get("calls") if isinstance(output, Mapping) else None
    return tuple(c for c in calls if isinstance(c, Mapping)) if isinstance(calls, list) else ()


def _view(session_id: str, record: InvocationRecord, end: JournalEntry | None,
          bodies: bool) -> InvocationView:
    data: Mapping[str, Any] = end.data if end is not None else {}
    machine = is_machine(record)
    result = data.get("result")
    usage = data.get("usage")
    error = data.get("message") if end is not None and end.event is not None \
        and end.event.startswith("error.") else None
    spool = Path(record.spool)
    spooled = bodies and not machine
    return InvocationView(
        session=session_id, id=record.id, invoke=record.invoke, state=record.state,
        kind="machine" if machine else "process", argv=record.argv,
        started_at=record.started_at, ended_at=record.ended_at, outcome=record.outcome,
        reason=record.reason or (data.get("reason") if isinstance(data.get("reason"), str)
                                 else None),
        event=end.event if end is not None else None,
        prompt=_read(spool / "stdin", tail=False) if spooled else None,
        output=_read(spool / "stdout", tail=True) if spooled else None,
        answer=data.get("answer"), usage=usage if isinstance(usage, Mapping) else None,
        error=str(error) if error else None,
        completion=(str(result.get("completionMethod")) if isinstance(result, Mapping)
                    and result.get("completionMethod") else None),
        child=child_session_id(session_id, record.spool) if machine else None,
        calls=_calls(data.get("output")) if machine else ())


def invocation_views(store: _Store, session_id: str, *, children: bool = True,
                     bodies: bool = True) -> list[InvocationView]:
    """The invocations of ``session_id`` by start time (SessionNotFound if there is no
    such session); with ``children``, those of the child machine sessions it invoked
    too, each after the invocation that started its session. Without ``bodies`` the
    spool files are not read (no ``prompt``, no ``output``)."""
    records = store.invocations(session_id)
    ends = _endings(store.journal(session_id, -1))
    views: list[InvocationView] = []
    for record in records:
        view = _view(session_id, record, ends.get(record.id), bodies)
        views.append(view)
        if children and view.child is not None:
            try:
                views.extend(invocation_views(store, view.child, bodies=bodies))
            except SessionNotFound:  # not created yet, or removed
                continue
    return views
