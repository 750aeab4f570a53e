"""Session stores: SQLite (the embedded default) and PostgreSQL, behind one contract."""

from __future__ import annotations

from pathlib import Path

from interlock.runtime.store.base import (
    AgentRecord,
    CancelRequest,
    DeadLetter,
    InboxItem,
    InvocationRecord,
    JournalEntry,
    Lease,
    SessionExists,
    SessionNotFound,
    SessionRow,
    StaleSession,
    Store,
    StoreError,
    StoreUnavailable,
    redact_url,
)

__all__ = [
    "DEFAULT_PATH",
    "AgentRecord",
    "CancelRequest",
    "DeadLetter",
    "InboxItem",
    "InvocationRecord",
    "JournalEntry",
    "Lease",
    "SessionExists",
    "SessionNotFound",
    "SessionRow",
    "StaleSession",
    "Store",
    "StoreError",
    "StoreUnavailable",
    "open_store",
    "redact_url",
]

DEFAULT_PATH = Path(".interlock") / "state.db"  # under the working directory
ACCEPTED = (
    "accepted stores: nothing (SQLite at ./.interlock/state.db), sqlite:///ABS/PATH.db,"
    " a file path ending in .db, or postgresql://USER:PASSWORD@HOST:PORT/DBNAME"
)


def open_store(url: str | None, cwd: Path) -> Store:
    """The store ``url`` names; None is SQLite at ``cwd/.interlock/state.db``.
    A relative .db path is taken from ``cwd``. StoreError for anything else."""
    if url is None:
        return _sqlite(cwd / DEFAULT_PATH)
    if url.startswith(("postgresql://", "postgres://")):
        from interlock.runtime.store.postgres import PostgresStore

        return PostgresStore(url)
    if url.startswith("sqlite://"):
        path = url.removeprefix("sqlite://")
        if not path.startswith("/"):
            raise StoreError(f"a sqlite:// URL takes an absolute path: {url!r}; {ACCEPTED}")
        return _sqlite(Path(path))
    if "://" not in url and url.endswith(".db"):
        return _sqlite(cwd / Path(url).expanduser())
    raise StoreError(f"unknown store {redact_url(url)!r}; {ACCEPTED}")


def _sqlite(path: Path) -> Store:
    from interlock.runtime.store.sqlite import SqliteStore

    return SqliteStore(path)
