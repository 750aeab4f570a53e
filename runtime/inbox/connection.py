"""``connect(url)``: the adapter a store URL names, its configuration checked first."""

from __future__ import annotations

from pathlib import Path

from interlock.runtime.config.inbox_store import StoreUrl, parse_store_url
from interlock.runtime.engine.clock import Clock
from interlock.runtime.inbox.base import DEFAULT_TIMEOUT, InboxAdapter


def connect(url: str | None = None, *, timeout: float = DEFAULT_TIMEOUT,
            clock: Clock | None = None, root: Path | None = None) -> InboxAdapter:
    """Open the inbox at ``url`` (see :mod:`interlock.runtime.config.inbox`; None: the
    default SQLite file under ``root``). ``timeout`` bounds each HTTP or Arango request.
    Raises InboxConfigError for a bad URL and InboxUnavailable when the store cannot be
    opened."""
    return open_store(parse_store_url(url, root), timeout=timeout, clock=clock)


def open_store(store: StoreUrl, *, timeout: float = DEFAULT_TIMEOUT,
               clock: Clock | None = None) -> InboxAdapter:
    if store.kind == "sqlite":
        from interlock.runtime.inbox.sqlite import SqliteInbox

        assert store.path is not None
        return SqliteInbox(store.path, clock)
    if store.kind == "postgresql":
        from interlock.runtime.inbox.postgres import PostgresInbox

        return PostgresInbox(store.url, clock=clock, connect_timeout=max(1, round(timeout)),
                             statement_timeout=timeout)
    if store.kind == "http":
        from interlock.runtime.inbox.http import HttpInbox

        assert store.base_url is not None
        return HttpInbox(store.base_url, timeout=timeout)
    from arango.client import ArangoClient

    from interlock.runtime.inbox.arango import ArangoInbox

    assert store.base_url and store.database and store.collection
    client = ArangoClient(hosts=store.base_url, request_timeout=timeout)
    db = client.db(store.database, username=store.username or "root",
                   password=store.password or "")
    return ArangoInbox(db, store.collection, clock=clock,
                       where=f"ArangoDB at {store.base_url}/{store.database}")
