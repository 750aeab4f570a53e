"""Session stores: SQLite (the embedded default) and PostgreSQL, behind one contract."""

from __future__ import annotations

from pathlib import Path

from interlock.runtime.config.urls import redact_url
from interlock.runtime.store.base import (
    AgentProcessStore,
    AgentRecord,
    CancelRequest,
    DeadLetter,
    EventQueue,
    FanoutRecord,
    InvocationRecord,
    InvocationStore,
    JournalEntry,
    Lease,
    LeaseStore,
    QueuedEvent,
    SessionExists,
    SessionNotFound,
    SessionRow,
    SessionStore,
    StagedConfigStore,
    StaleSession,
    Store,
    StoreConnection,
    StoreError,
    StoreUnavailable,
)

__all__ = [
    "DEFAULT_PATH",
    "AgentProcessStore",
    "AgentRecord",
    "BadStoreURL",
    "CancelRequest",
    "DeadLetter",
    "EventQueue",
    "FanoutRecord",
    "InvocationRecord",
    "InvocationStore",
    "JournalEntry",
    "Lease",
    "LeaseStore",
    "QueuedEvent",
    "SessionExists",
    "SessionNotFound",
    "SessionRow",
    "SessionStore",
    "StagedConfigStore",
    "StaleSession",
    "Store",
    "StoreConnection",
    "StoreError",
    "StoreMissing",
    "StoreUnavailable",
    "open_store",
    "redact_url",
]

DEFAULT_PATH = Path(".interlock") / "state.db"  # under the working directory
ACCEPTED = (
    "accepted stores: nothing (SQLite at ./.interlock/state.db), sqlite:///ABS/PATH.db,"
    " a file path ending in .db, or postgresql://USER:PASSWORD@HOST:PORT/DBNAME"
)


class BadStoreURL(StoreError):
    """``--store`` names no kind of store interlock knows (a usage error, exit 2)."""


class StoreMissing(StoreError):
    """``open_store(..., create=False)`` found no SQLite file: nothing has run there yet.

    Read-only commands answer it as an empty store (``status``: no sessions) or as the
    thing not being found (``log ID``: unknown session), never by creating the file."""

    def __init__(self, path: Path) -> None:
        self.path = path
        super().__init__(f"no session store at {path}: nothing has run here yet")


def open_store(url: str | None, cwd: Path, *, create: bool = True) -> Store:
    """The store ``url`` names; None is SQLite at ``cwd/.interlock/state.db``.
    A relative .db path is taken from ``cwd``. StoreError for anything else.

    ``create=False`` (read-only commands: status, log, sessions, diagram --session, signal)
    opens an existing store only: a missing SQLite file raises :class:`StoreMissing` and
    no file or folder is made. A PostgreSQL database must exist either way; its tables are
    created on first use whatever ``create`` says (that makes no file here)."""
    if url is None:
        return _sqlite(cwd / DEFAULT_PATH, create)
    if url.startswith(("postgresql://", "postgres://")):
        from interlock.runtime.store.postgres import PostgresStore

        return PostgresStore(url)
    if url.startswith("sqlite://"):
        path = url.removeprefix("sqlite://")
        if not path.startswith("/"):
            raise BadStoreURL(f"a sqlite:// URL takes an absolute path: {url!r} (--store); "
                              f"{ACCEPTED}")
        return _sqlite(Path(path), create)
    if "://" not in url and url.endswith(".db"):
        return _sqlite(cwd / Path(url).expanduser(), create)
    raise BadStoreURL(f"unknown store {redact_url(url)!r} (--store); {ACCEPTED}")


def _sqlite(path: Path, create: bool) -> Store:
    from interlock.runtime.store.sqlite import SqliteStore

    if not create and not path.is_file():
        raise StoreMissing(path)
    return SqliteStore(path)
