"""The ArangoDB adapter (python-arango): messages are documents keyed by id.

Claims and updates are optimistic: read the document, check the move, write it back with
``check_rev=True``; a revision conflict (another worker wrote first) means the claim is
lost, or, for an update, a re-read and a second check. Queries are the AQL constants
below. Journal entries and settings live in the collections ``<messages>_journal`` and
``<messages>_settings``. ArangoDB has no multi-document atomicity without a stream
transaction, so a journal entry is written right after its update, not with it.
"""

from __future__ import annotations

import builtins
import time
from collections.abc import Callable
from dataclasses import replace
from typing import Any, Protocol, TypeVar

from interlock.runtime.engine.clock import Clock, SystemClock
from interlock.runtime.inbox._rows import (
    LEASED_NAMES,
    check_lease,
    check_limit,
    new_id,
    new_token,
)
from interlock.runtime.inbox.base import DEFAULT_LEASE, check_setting
from interlock.runtime.inbox.model import (
    REAPER,
    Claim,
    InboxUnavailable,
    Message,
    MessageLease,
    Status,
    StatusChange,
    UnknownMessage,
    check_id,
    check_post,
    fetchable,
    move_for,
)

T = TypeVar("T")
UPDATE_TRIES = 20

FETCH_QUERY = ("FOR m IN @@messages FILTER m.status == 'queued' OR "
               "(m.status IN @leased AND m.lease_until <= @now) "
               "SORT m.created_at, m._key LIMIT @limit RETURN m")
LIST_QUERY = ("FOR m IN @@messages FILTER @status == null OR m.status == @status "
              "SORT m.created_at, m._key LIMIT @limit RETURN m")
JOURNAL_QUERY = ("FOR e IN @@journal FILTER e.message_id == @id SORT e.at, e._key "
                 "RETURN e")


class ArangoCollection(Protocol):
    """The part of python-arango's ``StandardCollection`` the adapter uses."""

    def insert(self, document: dict[str, Any]) -> Any: ...

    def get(self, document: str) -> Any: ...

    def update(self, document: dict[str, Any], check_rev: bool = True) -> Any: ...


class ArangoAql(Protocol):
    def execute(self, query: str, *, bind_vars: dict[str, Any]) -> Any: ...


class ArangoDatabase(Protocol):
    """The part of python-arango's ``StandardDatabase`` the adapter uses."""

    @property
    def aql(self) -> Any: ...

    def has_collection(self, name: str) -> Any: ...

    def create_collection(self, name: str) -> Any: ...

    def collection(self, name: str) -> Any: ...


def _message(doc: dict[str, Any]) -> Message:
    return Message(id=doc["_key"], type=doc["type"], sender=doc["from"],
                   status=Status(doc["status"]), body=doc.get("body", ""),
                   correlation_id=doc.get("correlation_id"),
                   payload_ref=doc.get("payload_ref"), lease_until=doc.get("lease_until"),
                   owner=doc.get("owner"), created_at=doc["created_at"],
                   updated_at=doc["updated_at"])


class ArangoInbox:
    """An inbox in ``db``'s collection ``messages`` (created when missing)."""

    def __init__(self, db: ArangoDatabase, messages: str, *, clock: Clock | None = None,
                 where: str = "ArangoDB") -> None:
        from arango.exceptions import ArangoError, DocumentRevisionError

        self._error: type[Exception] = ArangoError
        self._conflict: type[Exception] = DocumentRevisionError
        self.db = db
        self.where = where
        self.names = {"messages": messages, "journal": f"{messages}_journal",
                      "settings": f"{messages}_settings"}
        self.clock = clock or SystemClock()

        def create() -> None:
            for name in self.names.values():
                if not db.has_collection(name):
                    db.create_collection(name)

        self._run(create)
        self._messages: ArangoCollection = db.collection(messages)
        self._journal: ArangoCollection = db.collection(self.names["journal"])
        self._settings: ArangoCollection = db.collection(self.names["settings"])

    def __repr__(self) -> str:
        return f"ArangoInbox({self.where!r}, {self.names['messages']!r})"

    def _run(self, body: Callable[[], T]) -> T:
        try:
            return body()
        except self._conflict:
            raise
        except self._error as exc:
            raise InboxUnavailable(f"{self.where}: {exc}") from None
        except OSError as exc:  # requests' connection errors are OSErrors
            raise InboxUnavailable(f"cannot reach {self.where}: {exc}") from None

    def _doc(self, message_id: str) -> dict[str, Any]:
        doc = self._run(lambda: self._messages.get(check_id(message_id)))
        if doc is None:
            raise UnknownMessage(f"no message {message_id}")
        return dict(doc)

    def _query(self, query: str, bind_vars: dict[str, Any]) -> builtins.list[dict[str, Any]]:
        return self._run(lambda: [dict(d) for d in self.db.aql.execute(query,
                                                                        bind_vars=bind_vars)])

    def _journal_entry(self, message_id: str, before: str, after: str, actor: str,
                       reason: str | None, at: float) -> None:
        self._run(lambda: self._journal.insert({
            "message_id": message_id, "at": at, "before": before, "after": after,
            "actor": actor, "reason": reason, "n": time.monotonic_ns()}))

    # -- messages ---------------------------------------------------------------------

    def post(self, type: str, sender: str, body: str = "", *,
             correlation_id: str | None = None, payload_ref: str | None = None) -> str:
        check_post(type, sender)
        message_id = new_id()
        now = self.clock.now()
        self._run(lambda: self._messages.insert({
            "_key": message_id, "type": type, "from": sender, "status": "queued",
            "body": body, "correlation_id": correlation_id, "payload_ref": payload_ref,
            "lease_until": None, "lease_token": None, "owner": None, "created_at": now,
            "updated_at": now}))
        return message_id

    def get(self, message_id: str) -> Message:
        return _message(self._doc(message_id))

    def list(self, status: Status | None = None, limit: int = 1000) -> builtins.list[Message]:
        docs = self._query(LIST_QUERY, {"@messages": self.names["messages"],
                                        "status": None if status is None else str(status),
                                        "limit": check_limit(limit)})
        return [_message(d) for d in docs]

    def fetch_queued(self, limit: int = 100) -> builtins.list[Message]:
        docs = self._query(FETCH_QUERY, {"@messages": self.names["messages"],
                                         "leased": list(LEASED_NAMES), "now": self.clock.now(),
                                         "limit": check_limit(limit)})
        return [_message(d) for d in docs]

    def claim(self, message_id: str, owner: str,
              lease_seconds: float = DEFAULT_LEASE) -> MessageLease | None:
        seconds = check_lease(lease_seconds)
        doc = self._doc(message_id)
        now = self.clock.now()
        if not fetchable(_message(doc), now):
            return None
        lease = MessageLease(new_token(), now + seconds)
        try:
            self._run(lambda: self._messages.update({
                "_key": message_id, "_rev": doc["_rev"], "status": "in_progress",
                "lease_token": lease.token, "lease_until": lease.lease_until, "owner": owner,
                "updated_at": now}, check_rev=True))
        except self._conflict:
            return None  # another worker wrote first
        return lease

    def claim_next(self, owner: str, lease_seconds: float = DEFAULT_LEASE,
                   limit: int = 1) -> builtins.list[Claim]:
        """Fetch, then claim each in turn (ArangoDB has no SKIP LOCKED: a message another
        worker wrote first is skipped on its revision conflict)."""
        claims = []
        for message in self.fetch_queued(check_limit(limit)):
            lease = self.claim(message.id, owner, lease_seconds)
            if lease is not None:
                claims.append(Claim(replace(message, status=Status.IN_PROGRESS,
                                            lease_until=lease.lease_until, owner=owner),
                                    lease))
        return claims

    def update_status(self, message_id: str, status: Status, token: str | None = None, *,
                      reason: str | None = None) -> Message:
        move = move_for(status, token)
        for _ in range(UPDATE_TRIES):
            doc = self._doc(message_id)
            before = _message(doc)
            now = self.clock.now()
            after = move.apply(before, token, doc.get("lease_token"), now)  # or raises
            changes = {"_key": message_id, "_rev": doc["_rev"], "status": str(after.status),
                       "updated_at": now, "lease_until": after.lease_until}
            try:
                self._run(lambda changes=changes: self._messages.update(changes,  # type: ignore[misc]
                                                                        check_rev=True))
            except self._conflict:
                continue  # written meanwhile: check again
            self._journal_entry(message_id, str(before.status), str(after.status),
                                move.actor(before.owner), reason, now)
            return after  # the revision check: nothing else changed since the read
        raise InboxUnavailable(f"message {message_id} kept changing while it was updated; "
                               "try again")

    def reclaim_expired(self) -> int:
        count = 0
        for doc in self._query(FETCH_QUERY, {"@messages": self.names["messages"],
                                             "leased": list(LEASED_NAMES),
                                             "now": self.clock.now(), "limit": 1_000_000}):
            if doc["status"] == "queued":
                continue
            now = self.clock.now()
            try:
                self._run(lambda doc=doc, now=now: self._messages.update({  # type: ignore[misc]
                    "_key": doc["_key"], "_rev": doc["_rev"], "status": "queued",
                    "lease_token": None, "lease_until": None, "owner": None,
                    "updated_at": now}, check_rev=True))
            except self._conflict:
                continue
            self._journal_entry(doc["_key"], doc["status"], "queued", REAPER, "lease expired",
                                now)
            count += 1
        return count

    def journal(self, message_id: str) -> builtins.list[StatusChange]:
        self._doc(message_id)
        docs = self._query(JOURNAL_QUERY, {"@journal": self.names["journal"],
                                           "id": message_id})
        docs.sort(key=lambda d: (d["at"], d.get("n", 0)))
        return [StatusChange(d["message_id"], d["at"], Status(d["before"]),
                             Status(d["after"]), d["actor"], d.get("reason")) for d in docs]

    # -- settings ---------------------------------------------------------------------

    def settings(self) -> dict[str, Any]:
        found = {}
        for key in ("enabled", "interval"):
            doc = self._run(lambda key=key: self._settings.get(key))  # type: ignore[misc]
            if doc is not None:
                found[key] = doc["value"]
        return found

    def set_setting(self, key: str, value: Any) -> None:
        check_setting(key, value)
        self._run(lambda: self._settings.insert({"_key": key, "value": value})
                  if self._settings.get(key) is None
                  else self._settings.update({"_key": key, "value": value}, check_rev=False))

    def close(self) -> None:
        """python-arango holds no connection to close."""
