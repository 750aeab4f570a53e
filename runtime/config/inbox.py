"""Inbox configuration: store URLs (validated up front) and the ``inbox:`` project section.

Store URLs::

    sqlite:///abs/path/inbox.db  or  a path ending in .db   the embedded default
    postgresql://user@host:5432/db                          FOR UPDATE SKIP LOCKED
    http://host:port                                        interlock inbox serve
    arango://user:pass@host:8529/DATABASE?messagesCollection=NAME   (arango+https:// for TLS)

The ``inbox:`` section of interlock.yaml turns the poller on (absent: off)::

    inbox:
      store: postgresql://...      # default: .interlock/inbox.db
      interval: 30s                # between polls while healthy
      lease: 5m                    # lease taken on claim
      request_timeout: 10s         # per adapter request (HTTP)
      backoff_base: 1s
      backoff_max: 5m
      batch: 10                    # messages fetched per poll
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal
from urllib.parse import parse_qs, unquote, urlsplit

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from interlock.machines.diagnostics import SpecError, error
from interlock.machines.settings import Duration, Section, section_diagnostics
from interlock.machines.yamlsrc import SourceMap
from interlock.runtime.config.project_file import project_section, read_project_file
from interlock.runtime.config.urls import redact_url

SECTION = "inbox"
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
            raise InboxConfigError(f"store URL {_redact(url)!r}: a PostgreSQL URL needs a host")
        return StoreUrl("postgresql", url)
    if scheme in ("http", "https"):
        return StoreUrl("http", url, base_url=_http_base(url))
    if scheme in ("arango", "arango+http", "arango+https"):
        return _arango(url)
    known = "sqlite:///PATH, postgresql://..., http://HOST:PORT, arango://HOST:PORT/DB"
    raise InboxConfigError(f"store URL {_redact(url)!r}: unsupported scheme "
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
    shown = _redact(url)
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


def _redact(url: str) -> str:
    return redact_url(url)


# -- the inbox: section --------------------------------------------------------------


class PollerConfig(BaseModel):
    """The ``inbox:`` section: where the store is and how the poller paces itself."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    store: str | None = None
    enabled: bool = True
    interval: Duration = Field(default=30.0, gt=0)
    lease: Duration = Field(default=300.0, gt=0)
    request_timeout: Duration = Field(default=10.0, gt=0)
    backoff_base: Duration = Field(default=1.0, gt=0)
    backoff_max: Duration = Field(default=300.0, gt=0)
    batch: int = Field(default=10, ge=1, le=1000)

    @field_validator("store")
    @classmethod
    def _store(cls, value: str | None) -> str | None:
        if value is not None:
            try:
                parse_store_url(value)
            except InboxConfigError as exc:
                raise ValueError(str(exc)) from None
        return value


POLLER = Section(SECTION, PollerConfig, unknown_key="C002", invalid_value="C002",
                 invalid_duration="C002", missing="C002",
                 unknown_key_message="{name}: unknown key")


def parse_poller_config(data: Any, source: SourceMap | None = None) -> PollerConfig | None:
    """The poller config from the section's data; None when the section is absent (the
    poller is opt-in). Raises SpecError whose diagnostics point at FILE:LINE:COL."""
    source = source if source is not None else SourceMap("<string>")
    if data is None:
        return None
    if data is True or data == {}:
        return PollerConfig()
    if not isinstance(data, Mapping):
        raise SpecError([error("C001", f"inbox must be a mapping of settings, got "
                               f"{type(data).__name__}", source.value((SECTION,)))])
    try:
        return PollerConfig.model_validate(data)
    except ValidationError as exc:
        raise SpecError(section_diagnostics(exc, POLLER, source, (SECTION,))) from None


def load_poller_config(path: Path | None = None, *, start: Path | None = None
                       ) -> PollerConfig | None:
    """The ``inbox:`` section of the project file (found from ``start`` when no ``path``);
    None when there is no file or no section."""
    from interlock.runtime.config.dispatch import find_project_config

    if path is None:
        path = find_project_config(start)
        if path is None:
            return None
    data, source = project_section(read_project_file(path), str(path), SECTION)
    return parse_poller_config(data, source)
