"""The SQLite store's doorbells: a write a session's runner must react to rings its bell
(real files, real inotify through watchdog), unless the writer wakes the runner itself."""

from __future__ import annotations

import threading
import time
from pathlib import Path

from interlock.runtime.store.sqlite import SqliteStore
from interlock.runtime.store.wakeup import on_session_bell

from support.store_helpers import created, row


def _store_with(tmp_path: Path, *sessions: str) -> SqliteStore:
    store = SqliteStore(tmp_path / "state.db")
    for sid in sessions:
        store.create(row(sid), created())
    return store


def test_a_queued_event_rings_the_sessions_bell_and_wakes_its_watcher(tmp_path: Path) -> None:
    store = _store_with(tmp_path, "s1", "s2")
    rang = threading.Event()
    unwatch = on_session_bell(store, "s1", rang.set)
    assert unwatch is not None
    try:
        store.enqueue("s2", "go", {}, time.time())  # another session's bell
        assert (store.bells / "s2").exists() and not (store.bells / "s1").exists()
        store.enqueue("s1", "go", {}, time.time())
        assert rang.wait(10)  # a safety net, not a pace: inotify answers in milliseconds
    finally:
        unwatch()
        store.close()


def test_an_offer_whose_sender_wakes_the_runner_rings_no_bell(tmp_path: Path) -> None:
    store = _store_with(tmp_path, "s1", "s2")
    try:
        assert store.offer("s1", "done.invoke.a", {}, time.time(), "k1", wake=False) == 1
        assert not (store.bells / "s1").exists()  # the runner was woken in-process
        assert store.offer("s2", "done.invoke.a", {}, time.time(), "k1") == 2
        assert (store.bells / "s2").exists()
    finally:
        store.close()
