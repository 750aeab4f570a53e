"""A FAKE ArangoDB database, in process: no ArangoDB server can run here.

It stands in for python-arango's ``StandardDatabase`` with the documented behaviour the
inbox adapter relies on: documents keyed by ``_key`` with a ``_rev`` that changes on
every write; ``insert`` of an existing key raises ``DocumentInsertError``; ``update``
with ``check_rev=True`` and a stale ``_rev`` raises ``DocumentRevisionError`` (HTTP 412);
``get`` of a missing key returns None. AQL is not interpreted: ``aql.execute`` answers
only the adapter's own queries (``FETCH_QUERY``, ``LIST_QUERY``, ``JOURNAL_QUERY``),
evaluated in Python, and raises for anything else. ``down = True`` makes every call
raise ``ArangoServerError`` as an unreachable server would.
"""

from __future__ import annotations

import itertools
import threading
from collections.abc import Iterator
from typing import Any

from arango.exceptions import (
    AQLQueryExecuteError,
    DocumentInsertError,
    DocumentRevisionError,
    ServerConnectionError,
)
from arango.request import Request
from arango.response import Response

from interlock.runtime.inbox.arango import FETCH_QUERY, JOURNAL_QUERY, LIST_QUERY


def _response(code: int, message: str) -> Response:
    response = Response(method="post", url="http://fake-arango:8529", headers={},
                        status_code=code, status_text=message, raw_body="{}")
    response.error_message = message
    response.error_code = code
    return response


def _request() -> Request:
    return Request(method="post", endpoint="/_api/fake")


class FakeCollection:
    def __init__(self, db: FakeArangoDatabase, name: str) -> None:
        self.db = db
        self.name = name
        self.docs: dict[str, dict[str, Any]] = {}

    def insert(self, document: dict[str, Any]) -> dict[str, Any]:
        with self.db.lock:
            self.db.check_up()
            key = str(document.get("_key") or next(self.db.keys))
            if key in self.docs:
                raise DocumentInsertError(_response(409, "unique constraint violated"),
                                          _request())
            doc = {**document, "_key": key, "_rev": self.db.new_rev()}
            self.docs[key] = doc
            return {"_key": key, "_rev": doc["_rev"]}

    def get(self, document: str) -> dict[str, Any] | None:
        with self.db.lock:
            self.db.check_up()
            doc = self.docs.get(document)
            return None if doc is None else dict(doc)

    def update(self, document: dict[str, Any], check_rev: bool = True) -> dict[str, Any]:
        with self.db.lock:
            self.db.check_up()
            key = document["_key"]
            current = self.docs[key]
            if check_rev and "_rev" in document and document["_rev"] != current["_rev"]:
                raise DocumentRevisionError(_response(412, "conflict, _rev values do not "
                                                      "match"), _request())
            changes = {k: v for k, v in document.items() if k not in ("_key", "_rev")}
            current.update(changes)
            current["_rev"] = self.db.new_rev()
            return {"_key": key, "_rev": current["_rev"]}


class FakeAql:
    def __init__(self, db: FakeArangoDatabase) -> None:
        self.db = db

    def execute(self, query: str, *, bind_vars: dict[str, Any]) -> Iterator[dict[str, Any]]:
        with self.db.lock:
            self.db.check_up()
            if query == FETCH_QUERY:
                docs = self.db.collections[bind_vars["@messages"]].docs.values()
                found = [d for d in docs if d["status"] == "queued" or (
                    d["status"] in bind_vars["leased"] and d["lease_until"] is not None
                    and d["lease_until"] <= bind_vars["now"])]
            elif query == LIST_QUERY:
                docs = self.db.collections[bind_vars["@messages"]].docs.values()
                found = [d for d in docs if bind_vars["status"] is None
                         or d["status"] == bind_vars["status"]]
            elif query == JOURNAL_QUERY:
                docs = self.db.collections[bind_vars["@journal"]].docs.values()
                found = [d for d in docs if d["message_id"] == bind_vars["id"]]
                return iter(sorted((dict(d) for d in found), key=lambda d: d["at"]))
            else:
                raise AQLQueryExecuteError(_response(400, "the fake runs only the inbox "
                                                     "adapter's queries"), _request())
            found.sort(key=lambda d: (d["created_at"], d["_key"]))
            return iter([dict(d) for d in found[:bind_vars["limit"]]])


class FakeArangoDatabase:
    """In-process stand-in for ``arango.database.StandardDatabase`` (see module doc)."""

    def __init__(self) -> None:
        self.lock = threading.RLock()
        self.collections: dict[str, FakeCollection] = {}
        self.keys = (str(n) for n in itertools.count(1))
        self._revs = itertools.count(1)
        self.down = False
        self.aql = FakeAql(self)

    def check_up(self) -> None:
        if self.down:
            raise ServerConnectionError(_response(503, "connection refused"), _request(),
                                        "fake ArangoDB: connection refused")

    def new_rev(self) -> str:
        return f"_r{next(self._revs)}"

    def has_collection(self, name: str) -> bool:
        self.check_up()
        return name in self.collections

    def create_collection(self, name: str) -> FakeCollection:
        self.check_up()
        return self.collections.setdefault(name, FakeCollection(self, name))

    def collection(self, name: str) -> FakeCollection:
        return self.collections[name]
