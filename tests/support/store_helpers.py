"""Rows, entries and process workers shared by the store tests (fixtures: store_fixtures)."""

from __future__ import annotations

import sqlite3
from multiprocessing.synchronize import Barrier
from pathlib import Path
from typing import Any
from urllib.parse import quote

import psycopg

from interlock.runtime.store import JournalEntry, SessionRow, StoreError, open_store


def with_params(url: str, **params: str) -> str:
    """``url`` with query parameters added."""
    query = "&".join(f"{key}={quote(value, safe='')}" for key, value in params.items())
    return url + ("&" if "?" in url else "?") + query


def raw_execute(target: str, sql: str) -> None:
    """Run SQL on the store's database behind its back."""
    if target.startswith("sqlite://"):
        conn = sqlite3.connect(target.removeprefix("sqlite://"), isolation_level=None)
        try:
            conn.execute(sql)
        finally:
            conn.close()
    else:
        with psycopg.connect(target, autocommit=True) as pg:
            pg.execute(sql.encode())


def row(session_id: str = "s1", created_at: float = 1.0, **changes: Any) -> SessionRow:
    fields: dict[str, Any] = {
        "id": session_id, "spec_name": "polling_state", "spec_path": "/specs/polling.yaml",
        "spec_hash": "abc123", "spec_text": "machine: polling_state\n", "status": "active",
        "seq": 0, "snapshot": {"active": ["pending"], "context": {"poll_count": 0}},
        "created_at": created_at, "updated_at": created_at,
    }
    fields.update(changes)
    return SessionRow(**fields)


def created(at: float = 1.0) -> JournalEntry:
    return JournalEntry(0, at, "created", after=("pending",))


def step(seq: int, event: str = "start", **changes: Any) -> JournalEntry:
    fields: dict[str, Any] = {"seq": seq, "at": 10.0 + seq, "kind": "event", "event": event,
                              "before": ("pending",), "after": ("active",)}
    fields.update(changes)
    return JournalEntry(**fields)


# -- workers for real processes (spawned: they import this module by name) ----------------


def open_worker(url: str, barrier: Barrier) -> None:
    barrier.wait(timeout=30)
    open_store(url, Path.cwd()).close()


def enqueue_worker(url: str, session_id: str, worker: int, count: int, barrier: Barrier) -> None:
    store = open_store(url, Path.cwd())
    try:
        barrier.wait(timeout=30)
        for n in range(count):
            store.enqueue(session_id, "tick", {"worker": worker, "n": n}, float(n))
    finally:
        store.close()


def commit_worker(url: str, session_id: str, worker: int, token: int, rounds: int,
                  barrier: Barrier, results: Any) -> None:
    """Race the other worker for each step: both commit with the same expected_seq."""
    store = open_store(url, Path.cwd())
    try:
        for seq in range(rounds):
            barrier.wait(timeout=30)
            try:
                store.commit_step(
                    session_id, expected_seq=seq, lease_token=token,
                    entries=[step(seq + 1, note=f"worker {worker}")],
                    snapshot={"winner": worker, "step": seq + 1}, status="active",
                    consumed=[], now=100.0,
                )
                results.put((seq, worker, "won"))
            except StoreError as error:
                results.put((seq, worker, type(error).__name__))
    finally:
        store.close()
