"""What every façade module shares: opening the store, translating errors, the root."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path

from interlock.machines.diagnostics import SpecError
from interlock.runtime.api.errors import (
    Conflict,
    InterlockError,
    NotFound,
    StepFailed,
    UsageError,
)
from interlock.runtime.store import (
    BadStoreURL,
    SessionNotFound,
    Store,
    StoreError,
    StoreMissing,
    open_store,
)


@contextlib.contextmanager
def translated() -> Iterator[None]:
    """The engine's and the store's exceptions as the façade's (SpecError passes: its
    diagnostics are for printing; so do the façade's own)."""
    try:
        yield
    except (SpecError, InterlockError):
        raise
    except Exception as exc:
        answer = _facade_error(exc)
        if answer is None:
            raise
        raise answer from None


def _facade_error(exc: Exception) -> InterlockError | None:
    """The façade's exception for one of the engine's or the store's, None for any other.
    The engine's classes are looked up only when an exception is raised: a call that
    runs no engine code (posting a signal) does not import the engine to be ready for
    one (about 60 ms of such a call)."""
    if isinstance(exc, SessionNotFound):
        return NotFound(str(exc))
    if isinstance(exc, BadStoreURL):
        return UsageError(str(exc))
    if isinstance(exc, StoreError):
        return InterlockError(str(exc))
    from interlock.runtime.engine.bindings_loader import BindingsError
    from interlock.runtime.engine.faults import UnhandledFault
    from interlock.runtime.engine.lifecycle import SessionOver, SessionRunning
    from interlock.runtime.engine.runner import SessionBusy, SessionClosed, SpecChanged
    from interlock.runtime.engine.session import SessionError
    from interlock.runtime.engine.snapshot import SnapshotError
    from interlock.runtime.signals.model import SignalError

    if isinstance(exc, UnhandledFault):
        return StepFailed(str(exc))
    if isinstance(exc, (SessionBusy, SpecChanged, SessionRunning, SessionOver, SessionClosed)):
        return Conflict(str(exc))
    if isinstance(exc, (BindingsError, SignalError)):
        return UsageError(str(exc))
    if isinstance(exc, (SessionError, SnapshotError)):
        return InterlockError(str(exc))
    return None


@contextlib.contextmanager
def opened_store(store: str | None, root: Path, *, create: bool = True,
                 session_id: str | None = None) -> Iterator[Store]:
    """The store, closed afterwards. ``create=False`` (read-only calls) never makes the
    SQLite file or its folder: a missing one is NotFound (``no session 'ID': no session
    store at PATH: nothing has run here yet`` when ``session_id`` is given)."""
    with translated():
        try:
            opened = open_store(store, root, create=create)
        except StoreMissing as exc:
            prefix = f"no session {session_id!r}: " if session_id is not None else ""
            raise NotFound(f"{prefix}{exc}") from None
        try:
            yield opened
        finally:
            opened.close()


def root_of(root: Path | str | None) -> Path:
    return Path(root) if root is not None else Path.cwd()
