"""Bad input for the stores: locked or unreachable databases, lost connections, bad URLs."""

from __future__ import annotations

import multiprocessing
import socket
import sqlite3
import stat
import time
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from psycopg.conninfo import conninfo_to_dict

from interlock.runtime.store import (
    SessionExists,
    StoreError,
    StoreUnavailable,
    open_store,
)
from interlock.runtime.store._retry import Backoff
from interlock.runtime.store.base import AgentRecord
from interlock.runtime.store.postgres import PostgresStore
from interlock.runtime.store.sqlite import MIGRATIONS, SqliteStore

from support.pg_proxy import Proxy
from support.store_helpers import created, open_worker, row, step, with_params

QUICK = Backoff(attempts=3, first=0.01, cap=0.02)


class Retries:
    """An on_retry hook that counts, and can act on the first retry."""

    def __init__(self, first: object = None) -> None:
        self.count = 0
        self.first = first

    def __call__(self, attempt: int, pause: float, error: Exception) -> None:
        self.count += 1
        if self.count == 1 and callable(self.first):
            self.first()


# -- open_store ---------------------------------------------------------------------------


def test_the_default_store_is_sqlite_in_a_private_folder(tmp_path: Path) -> None:
    store = open_store(None, tmp_path)
    try:
        assert isinstance(store, SqliteStore)
        assert store.url == f"sqlite://{tmp_path}/.interlock/state.db"
        folder = tmp_path / ".interlock"
        assert stat.S_IMODE(folder.stat().st_mode) == 0o700
        with sqlite3.connect(folder / "state.db") as conn:
            assert conn.execute("PRAGMA journal_mode").fetchone() == ("wal",)
            assert conn.execute("SELECT version FROM schema_version").fetchall() == [
                (len(MIGRATIONS),)]
    finally:
        store.close()


@pytest.mark.parametrize(("given", "where"), [
    ("sqlite://{tmp}/abs/state.db", "abs/state.db"),
    ("{tmp}/plain/state.db", "plain/state.db"),
    ("relative/state.db", "relative/state.db"),
])
def test_sqlite_urls_and_paths(tmp_path: Path, given: str, where: str) -> None:
    store = open_store(given.format(tmp=tmp_path), tmp_path)
    store.close()
    assert (tmp_path / where).is_file()


@pytest.mark.parametrize("given", [
    "mysql://me:s3cret@db.example/x", "sqlite://relative.db", "state.sqlite", "",
])
def test_unknown_stores_are_refused_with_the_accepted_forms(tmp_path: Path, given: str) -> None:
    with pytest.raises(StoreError, match="accepted stores") as caught:
        open_store(given, tmp_path)
    assert "s3cret" not in str(caught.value)


def test_postgres_urls_open_a_postgres_store(pg_url: str, tmp_path: Path) -> None:
    for url in (pg_url, pg_url.replace("postgresql://", "postgres://", 1)):
        store = open_store(url, tmp_path)
        try:
            assert isinstance(store, PostgresStore)
            password = conninfo_to_dict(pg_url)["password"]
            assert password not in store.url and password not in repr(store)
            store.list()
        finally:
            store.close()


# -- SQLite: locks and files ----------------------------------------------------------------


@pytest.fixture
def locked(tmp_path: Path) -> Iterator[tuple[Path, sqlite3.Connection]]:
    """A store file with a session, and another connection holding it exclusively."""
    path = tmp_path / "state.db"
    SqliteStore(path).create(row(), created())
    holder = sqlite3.connect(path, isolation_level=None)
    holder.execute("BEGIN EXCLUSIVE")
    yield path, holder
    holder.close()


def test_a_locked_sqlite_store_gives_up_after_bounded_retries(
        locked: tuple[Path, sqlite3.Connection]) -> None:
    path, holder = locked
    retries = Retries()
    store = SqliteStore(path, busy_timeout=0.05, backoff=QUICK, on_retry=retries)
    began = time.monotonic()
    with pytest.raises(StoreUnavailable, match="stayed locked") as caught:
        store.enqueue("s1", "start", {}, 1.0)
    assert time.monotonic() - began < 2.0
    assert str(path) in str(caught.value) and retries.count == QUICK.attempts - 1
    assert store.queued_events("s1") == []  # WAL: readers are not blocked by the writer
    holder.execute("ROLLBACK")
    assert [item.event for item in store.queued_events("s1")] == []  # nothing half-written
    store.close()


def test_a_lock_released_within_the_retry_window_is_waited_out(
        locked: tuple[Path, sqlite3.Connection]) -> None:
    path, holder = locked
    retries = Retries(first=lambda: holder.execute("ROLLBACK"))
    store = SqliteStore(path, busy_timeout=0.05, backoff=QUICK, on_retry=retries)
    item = store.enqueue("s1", "start", {}, 1.0)
    assert retries.count == 1
    assert [i.id for i in store.queued_events("s1")] == [item]
    store.close()


def test_processes_opening_a_new_file_at_once_all_get_the_schema(tmp_path: Path) -> None:
    url = f"sqlite://{tmp_path / 'new' / 'state.db'}"
    spawn = multiprocessing.get_context("spawn")
    barrier = spawn.Barrier(4)
    procs = [spawn.Process(target=open_worker, args=(url, barrier)) for _ in range(4)]
    for proc in procs:
        proc.start()
    for proc in procs:
        proc.join(timeout=60)
    assert [proc.exitcode for proc in procs] == [0] * 4
    with sqlite3.connect(tmp_path / "new" / "state.db") as conn:
        assert conn.execute("SELECT version FROM schema_version").fetchall() == [
            (len(MIGRATIONS),)]


def test_a_file_that_is_not_a_store_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    path.write_text("not a database, just text " * 100)
    with pytest.raises(StoreError, match="not a database"):
        SqliteStore(path)


def test_a_schema_newer_than_this_interlock_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "state.db"
    SqliteStore(path).close()
    with sqlite3.connect(path) as conn:
        conn.execute("UPDATE schema_version SET version = 99")
    with pytest.raises(StoreError, match="upgrade interlock"):
        SqliteStore(path)


# -- PostgreSQL: reachability, locks, lost connections -----------------------------------------


@pytest.fixture
def pg(pg_url: str) -> str:
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute("TRUNCATE sessions, journal, event_queue, agents, deliveries, dead_letters,"
                     " invocations, fanouts RESTART IDENTITY")
    return pg_url


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def test_an_unreachable_postgres_is_reported_in_bounded_time_without_the_password() -> None:
    port = closed_port()
    retries = Retries()
    began = time.monotonic()
    with pytest.raises(StoreUnavailable) as caught:
        PostgresStore(f"postgresql://me:s3cret@127.0.0.1:{port}/db", backoff=QUICK,
                      on_retry=retries)
    assert time.monotonic() - began < 5.0
    message = str(caught.value)
    assert f"127.0.0.1:{port}" in message and "s3cret" not in message
    assert retries.count == QUICK.attempts - 1


def test_a_wrong_password_is_not_retried_and_not_shown(pg: str) -> None:
    password = conninfo_to_dict(pg)["password"]
    wrong = pg.replace(f":{password}@", ":wr0ng-pw@", 1)
    retries = Retries()
    with pytest.raises(StoreUnavailable, match="password authentication failed") as caught:
        PostgresStore(wrong, backoff=QUICK, on_retry=retries)
    assert "wr0ng-pw" not in str(caught.value) and retries.count == 0


def test_a_held_row_lock_times_out_then_is_waited_out(pg: str) -> None:
    setup = PostgresStore(pg)
    setup.create(row(), created())
    lease = setup.acquire("s1", "runner-a", 30.0, now=100.0)
    assert lease is not None
    setup.close()

    def commit(store: PostgresStore) -> int:
        return store.commit_step("s1", expected_seq=0, lease_token=lease.token,
                                 entries=[step(1)], snapshot={}, status="active",
                                 consumed=[], now=101.0)

    with psycopg.connect(pg) as holder:
        holder.execute("SELECT 1 FROM sessions WHERE id = 's1' FOR UPDATE")
        store = PostgresStore(pg, lock_timeout=0.05, backoff=QUICK)
        with pytest.raises(StoreUnavailable, match="lock timeout"):
            commit(store)
        assert store.journal("s1") == []
        store.on_retry = Retries(first=holder.rollback)
        assert commit(store) == 1
        store.close()


def test_a_killed_connection_is_replaced_transparently(pg: str) -> None:
    retries = Retries()
    store = PostgresStore(with_params(pg, application_name="interlock-victim"),
                          backoff=QUICK, on_retry=retries)
    store.create(row(), created())
    with psycopg.connect(pg, autocommit=True) as admin:
        killed = admin.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
                               " WHERE application_name = 'interlock-victim'").fetchall()
    assert killed == [(True,)]
    assert store.get("s1").id == "s1"
    assert retries.count == 1
    store.close()


@pytest.fixture
def proxied(pg: str) -> Iterator[tuple[Proxy, PostgresStore]]:
    params = conninfo_to_dict(pg)
    proxy = Proxy(str(params["host"]), int(params["port"]))
    url = pg.replace(f"@{params['host']}:{params['port']}/", f"@127.0.0.1:{proxy.port}/", 1)
    store = PostgresStore(with_params(url, sslmode="disable"), backoff=QUICK)
    yield proxy, store
    store.close()
    proxy.close()


@pytest.mark.parametrize("cut", ["commit", "answer"])
def test_a_commit_step_cut_off_at_commit_finds_out_and_lands_once(
        proxied: tuple[Proxy, PostgresStore], cut: str) -> None:
    proxy, store = proxied
    store.create(row(), created())
    lease = store.acquire("s1", "runner-a", 30.0, now=100.0)
    assert lease is not None
    item = store.enqueue("s1", "start", {}, 50.0)
    store.on_retry = retries = Retries()
    proxy.lose(cut)  # type: ignore[arg-type]
    seq = store.commit_step("s1", expected_seq=0, lease_token=lease.token, entries=[step(1)],
                            snapshot={"step": 1}, status="active", consumed=[item], now=101.0)
    assert proxy.fired.is_set() and retries.count == 1
    assert seq == 1 and store.get("s1").seq == 1
    assert store.journal("s1") == [step(1)] and store.queued_events("s1") == []


def test_a_create_whose_answer_was_lost_finds_its_own_row(
        proxied: tuple[Proxy, PostgresStore]) -> None:
    proxy, store = proxied
    proxy.lose("answer")
    store.create(row(), created())
    assert proxy.fired.is_set() and store.get("s1") == row()
    with pytest.raises(SessionExists):
        store.create(row(), created())


def test_an_enqueue_whose_answer_was_lost_says_the_outcome_is_unknown(
        proxied: tuple[Proxy, PostgresStore]) -> None:
    proxy, store = proxied
    store.create(row(), created())
    proxy.lose("answer")
    with pytest.raises(StoreUnavailable, match="may or may not"):
        store.enqueue("s1", "start", {}, 1.0)
    assert [item.event for item in store.queued_events("s1")] == ["start"]  # it was, once


@pytest.mark.parametrize("cut", ["commit", "answer"])
def test_a_record_agent_cut_off_at_commit_lands_once(
        proxied: tuple[Proxy, PostgresStore], cut: str) -> None:
    proxy, store = proxied
    store.forget_agent("a1")  # the module's schema outlives the test
    record = AgentRecord("a1", pgid=7, pid=7, owner="host:1:x", argv=("agent",), started_at=1.0)
    store.on_retry = retries = Retries()
    proxy.lose(cut)  # type: ignore[arg-type]
    store.record_agent(record)
    assert proxy.fired.is_set() and retries.count == 1
    assert store.agents() == [record]
    with pytest.raises(StoreError, match="already exists"):
        store.record_agent(record)
    store.forget_agent("a1")


@pytest.mark.parametrize("cut", ["commit", "answer"])
def test_an_offer_cut_off_at_commit_lands_once_and_returns_its_id(
        proxied: tuple[Proxy, PostgresStore], cut: str) -> None:
    proxy, store = proxied
    store.create(row(), created())
    store.on_retry = retries = Retries()
    proxy.lose(cut)  # type: ignore[arg-type]
    got = store.offer("s1", "signal", {"n": 1}, 5.0, key="sig-1")
    assert proxy.fired.is_set() and retries.count == 1
    items = store.queued_events("s1")
    assert got is not None and [(i.id, i.event, i.data) for i in items] == [
        (got, "signal", {"n": 1})]  # one item, and the caller was told its id
    assert store.delivered("s1", "sig-1")
    assert store.offer("s1", "signal", {"n": 1}, 6.0, key="sig-1") is None
    assert [i.id for i in store.queued_events("s1")] == [got]


def test_an_offer_cut_off_after_another_took_its_key_says_none(
        proxied: tuple[Proxy, PostgresStore], pg: str) -> None:
    proxy, store = proxied
    store.create(row(), created())
    other = PostgresStore(pg)
    try:
        taken = other.offer("s1", "signal", {"by": "other"}, 4.0, key="sig-1")
    finally:
        other.close()
    store.on_retry = retries = Retries()
    proxy.lose("answer")
    assert store.offer("s1", "signal", {"by": "us"}, 5.0, key="sig-1") is None
    assert proxy.fired.is_set() and retries.count == 1
    assert [(i.id, i.data) for i in store.queued_events("s1")] == [(taken, {"by": "other"})]
