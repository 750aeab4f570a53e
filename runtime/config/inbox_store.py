"""Inbox store URLs, validated up front, and the inbox's errors (no pydantic: the command
line and the inbox's adapters import this without the ``inbox:`` section's model)::

    sqlite:///abs/path/inbox.db  or  a path ending in .db   the embedded default
    postgresql://user@host:5432/db                          FOR UPDATE SKIP LOCKED
    http://host:port                                        interlock inbox serve
    arango://user:pass@host:8529/DATABASE?messagesCollection=NAME   (arango+https:// for TLS)
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Literal
from urllib.parse import parse_qs, unquote, urlsplit

from interlock.runtime.config.urls import redact_url

DEFAULT_STORE = Path(".interlock") / "inbox.db"
_COLLECTION = re.compile(r"^[A-Za-z][A-Za-z0-9_-]{0,255}$")

Kind = Literal["sqlite", "postgresql", "http", "arango"]


class InboxError(Exception):
    """Something the inbox refuses; the message is fit for a user."""

    kind = "inbox_error"


class InboxConfigError(InboxError):
    """Bad inbox configuration; the message names the field or the URL part."""

    kind = "config"


@dataclass(frozen=True, slots=True)
class StoreUrl:
    """A validated store URL: what kind of store, and the parts its adapter needs."""

    kind: Kind
    url: str
    path: Path | None = None  # sqlite
    base_url: str | None = None  # http; arango: the server
    database: str | None = None  # arango
    collection: str | None = None  # arango
    username: str | None = None
    password: str | None = None


def parse_store_url(url: str | None, root: Path | None = None) -> StoreUrl:
    """Validate a store URL (None: the default SQLite file under ``root``, or cwd)."""
    base = root if root is not None else Path.cwd()
    if url is None or not url.strip():
        return StoreUrl("sqlite", str(base / DEFAULT_STORE), path=base / DEFAULT_STORE)
    url = url.strip()
    parts = urlsplit(url)
    scheme = parts.scheme.lower()
    if scheme == "sqlite":
        raw = url[len("sqlite://"):]
        if not raw:
            raise InboxConfigError(f"store URL {url!r}: the SQLite URL names no file "
                                   "(use sqlite:///path/to/inbox.db)")
        path = Path(raw)
        return StoreUrl("sqlite", url, path=path if path.is_absolute() else base / path)
    if not scheme and url.endswith(".db"):
        path = Path(url)
        return StoreUrl("sqlite", url, path=path if path.is_absolute() else base / path)
    if scheme in ("postgresql", "postgres"):
        if not parts.hostname and "host=" not in parts.query:
            raise InboxConfigError(f"store URL {redact_url(url)!r}: a PostgreSQL URL needs a host")
        return StoreUrl("postgresql", url)
    if scheme in ("http", "https"):
        return StoreUrl("http", url, base_url=_http_base(url))
    if scheme in ("arango", "arango+http", "arango+https"):
        return _arango(url)
    known = "sqlite:///PATH, postgresql://..., http://HOST:PORT, arango://HOST:PORT/DB"
    raise InboxConfigError(f"store URL {redact_url(url)!r}: unsupported scheme "
                           f"{parts.scheme or '(none)'!r}; use one of {known}")


def _http_base(url: str) -> str:
    parts = urlsplit(url)
    try:
        port = parts.port
    except ValueError:
        port = -1
    if not parts.hostname:
        raise InboxConfigError(f"HTTP baseUrl {url!r}: no host (use http://HOST:PORT)")
    if port == -1:
        raise InboxConfigError(f"HTTP baseUrl {url!r}: the port is not a number in 1..65535")
    return url.rstrip("/")


def _arango(url: str) -> StoreUrl:
    parts = urlsplit(url)
    shown = redact_url(url)
    try:
        port = parts.port
    except ValueError:
        raise InboxConfigError(f"Arango url {shown!r}: the port is not a number in 1..65535"
                               ) from None
    if not parts.hostname:
        raise InboxConfigError(f"Arango url {shown!r}: no host "
                               "(use arango://HOST:8529/DATABASE?messagesCollection=NAME)")
    database = unquote(parts.path.strip("/"))
    if not database or "/" in database:
        raise InboxConfigError(f"Arango url {shown!r}: database is missing (the URL path, "
                               "e.g. arango://HOST:8529/DATABASE?messagesCollection=NAME)")
    query = parse_qs(parts.query)
    collections = query.get("messagesCollection", [])
    if not collections:
        raise InboxConfigError(f"Arango url {shown!r}: messagesCollection is missing "
                               "(add ?messagesCollection=NAME)")
    collection = collections[0]
    if not _COLLECTION.match(collection):
        raise InboxConfigError(f"Arango url {shown!r}: messagesCollection {collection!r} is "
                               "not a valid collection name (a letter, then letters, digits,"
                               " _ or -)")
    tls = parts.scheme.lower() == "arango+https"
    host = parts.hostname if ":" not in parts.hostname else f"[{parts.hostname}]"
    server = f"{'https' if tls else 'http'}://{host}:{port or 8529}"
    return StoreUrl("arango", url, base_url=server, database=database, collection=collection,
                    username=unquote(parts.username) if parts.username else None,
                    password=unquote(parts.password) if parts.password else None)

