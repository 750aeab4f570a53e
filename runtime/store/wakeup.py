"""Wake-ups from the store, so that nothing polls it: one watchdog observer per process.

* A session's runner watches its **doorbell** (:func:`on_session_bell`): the SQLite store
  closes ``<db>.bells/<session id>`` after each write the runner must react to (an event
  queued or offered, a cancel request, the session deleted), by any process; not for an
  ``offer(wake=False)``, whose sender wakes the runner in its own process. An event
  sent by ``interlock send`` or a cancel request from another process is seen at once,
  and no other session's commits wake the runner.
* A waiter for anything else (the runner took an event, released its lease, journaled a
  step: ``engine/lifecycle``) watches the database itself (:func:`on_store_change`):
  every SQLite commit, by any process, writes to the write-ahead log ``<db>-wal``. Only
  writes count: a connection opened or closed (a reader's) creates, opens and closes
  that file too, and would wake every waiter, the reader's own included.

Both are hints: the watchers still look on a slow backstop interval, for file systems
without inotify. Stores with no wake-up (PostgreSQL) return None: their users poll.
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from interlock.runtime.store.base import Store

if TYPE_CHECKING:
    from watchdog.events import FileSystemEvent

Unsubscribe = Callable[[], None]


class _Folder:
    """The subscribers of the databases in one folder, and its watch."""

    def __init__(self) -> None:
        self.watch: Any = None
        self.subscribers: dict[int, tuple[frozenset[str], bool, Callable[[], None]]] = {}

    def dispatch(self, event: FileSystemEvent) -> None:
        from watchdog.events import FileModifiedEvent

        if event.is_directory:
            return
        name = Path(os.fsdecode(event.src_path)).name
        written = isinstance(event, FileModifiedEvent)
        for names, writes_only, callback in list(self.subscribers.values()):
            if name in names and (written or not writes_only):
                callback()


class StoreWatch:
    """The process's watch over its SQLite databases (see the module docstring)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._observer: Any = None
        self._folders: dict[Path, _Folder] = {}
        self._next = 0

    def subscribe(self, folder: Path, names: frozenset[str], callback: Callable[[], None],
                  *, writes_only: bool = False) -> Unsubscribe:
        """Call ``callback`` (on watchdog's thread) whenever a file of ``folder`` named in
        ``names`` is created, modified or closed after writing (``writes_only``: only
        modified, i.e. written to)."""
        from watchdog.events import (
            FileClosedEvent,
            FileCreatedEvent,
            FileModifiedEvent,
            FileSystemEventHandler,
        )
        from watchdog.observers import Observer

        folder_path = folder.resolve()
        with self._lock:
            if self._observer is None:
                self._observer = Observer()
                self._observer.daemon = True
                self._observer.start()
            watched = self._folders.get(folder_path)
            if watched is None:
                watched = self._folders[folder_path] = _Folder()
                handler = FileSystemEventHandler()
                handler.on_any_event = watched.dispatch  # type: ignore[method-assign]
                watched.watch = self._observer.schedule(
                    handler, str(folder_path), recursive=False,
                    event_filter=[FileModifiedEvent, FileCreatedEvent, FileClosedEvent])
            token = self._next
            self._next += 1
            watched.subscribers[token] = (names, writes_only, callback)

        def unsubscribe() -> None:
            with self._lock:
                watched.subscribers.pop(token, None)
                if not watched.subscribers and self._folders.get(folder_path) is watched:
                    del self._folders[folder_path]
                    # the folder went away: so did its watch
                    with contextlib.suppress(KeyError, OSError):
                        self._observer.unschedule(watched.watch)

        return unsubscribe


_watch = StoreWatch()


def on_store_change(store: Store, callback: Callable[[], None]) -> Unsubscribe | None:
    """Call ``callback`` when ``store`` may hold something new; None when the store gives
    no wake-ups (the caller polls)."""
    from interlock.runtime.store.sqlite import SqliteStore

    if not isinstance(store, SqliteStore):
        return None
    try:
        return _watch.subscribe(store.path.parent,
                                frozenset({store.path.name, f"{store.path.name}-wal"}),
                                callback, writes_only=True)
    except OSError:  # no inotify (or out of watches): poll instead
        return None


def on_session_bell(store: Store, session_id: str, callback: Callable[[], None]
                    ) -> Unsubscribe | None:
    """Call ``callback`` when something for session ``session_id`` was written to
    ``store`` (its doorbell rang); None when the store gives no wake-ups."""
    from interlock.runtime.store.sqlite import SqliteStore

    if not isinstance(store, SqliteStore):
        return None
    try:
        store.bells.mkdir(mode=0o700, exist_ok=True)
        return _watch.subscribe(store.bells, frozenset({session_id}), callback)
    except OSError:
        return None


class StoreChanges:
    """Waiting for a store to change, in a thread that reads it between waits: each
    :meth:`wait` returns once the store may have changed since the previous one (or its
    :meth:`clear`), or after ``timeout``, or after ``poll`` seconds where the store gives
    no wake-ups."""

    def __init__(self, store: Store, *, poll: float = 0.05, backstop: float = 1.0) -> None:
        self._changed = threading.Event()
        self._unsubscribe = on_store_change(store, self._changed.set)
        self.interval = poll if self._unsubscribe is None else backstop

    def clear(self) -> None:
        """Forget the changes so far (call it before reading the store)."""
        self._changed.clear()

    @property
    def watched(self) -> bool:
        """Whether the store gives wake-ups (else :meth:`wait` only times out)."""
        return self._unsubscribe is not None

    def wait(self, timeout: float) -> bool:
        """Whether a wake-up ended the wait (False: ``timeout`` or ``poll`` passed)."""
        woken = self._changed.wait(max(0.0, min(timeout, self.interval)))
        self._changed.clear()
        return woken

    def close(self) -> None:
        if self._unsubscribe is not None:
            self._unsubscribe()
            self._unsubscribe = None

    def __enter__(self) -> StoreChanges:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
