"""The store contract (runtime/store/base.py), run against SQLite and PostgreSQL alike."""

from __future__ import annotations

import multiprocessing
import sqlite3
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest

from interlock.runtime.store import (
    JournalEntry,
    Lease,
    SessionExists,
    SessionNotFound,
    StaleSession,
    Store,
    StoreError,
    open_store,
)
from interlock.runtime.store import postgres as postgres_module
from interlock.runtime.store import sqlite as sqlite_module
from interlock.runtime.store.base import (
    AgentRecord,
    CancelRequest,
    DeadLetter,
    FanoutRecord,
    InvocationRecord,
    QueuedEvent,
)

from support.store_helpers import (
    commit_worker,
    created,
    enqueue_worker,
    raw_execute,
    row,
    step,
    with_params,
)

TTL = 30.0
SPAWN = multiprocessing.get_context("spawn")


def started(store: Store, session_id: str = "s1", owner: str = "runner-a") -> Lease:
    """A created session and its lease, taken at t=100."""
    store.create(row(session_id), created())
    lease = store.acquire(session_id, owner, TTL, now=100.0)
    assert lease is not None
    return lease


def commit(store: Store, lease: Lease, seq: int, *, now: float = 101.0,
           consumed: list[int] | None = None, snapshot: dict[str, object] | None = None) -> int:
    """Commit step seq+1 of ``lease``'s session."""
    return store.commit_step(
        lease.session_id, expected_seq=seq, lease_token=lease.token,
        entries=[step(seq + 1)], snapshot=snapshot or {"step": seq + 1}, status="active",
        consumed=consumed or [], now=now,
    )


# -- sessions ---------------------------------------------------------------------------


def test_create_get_list_round_trip(store: Store) -> None:
    first = row("s1", created_at=5.0, snapshot={"nested": {"ünï": [1, 2.5, None, True]}})
    second = row("s2", created_at=2.0, status="finished")
    store.create(first, created(5.0))
    store.create(second, created(2.0))
    assert store.get("s1") == first
    assert store.list() == [second, first]  # oldest first
    assert store.journal("s1") == [] and store.journal("s1", after_seq=-1) == [created(5.0)]


def test_create_refuses_a_taken_id_and_changes_nothing(store: Store) -> None:
    store.create(row("s1"), created())
    with pytest.raises(SessionExists, match="s1"):
        store.create(row("s1", spec_name="other"), created(9.0))
    assert store.get("s1") == row("s1")
    assert store.journal("s1", after_seq=-1) == [created()]


def test_create_wants_the_first_entry_of_the_row_s_step(store: Store) -> None:
    with pytest.raises(ValueError, match="seq"):
        store.create(row("s1"), step(1))
    assert store.list() == []


def test_unknown_sessions(store: Store) -> None:
    with pytest.raises(SessionNotFound, match="nope"):
        store.get("nope")
    for call in (
        lambda: store.journal("nope"),
        lambda: store.queued_events("nope"),
        lambda: store.enqueue("nope", "start", {}, 1.0),
        lambda: store.offer("nope", "start", {}, 1.0, key="k1"),
        lambda: store.delivered("nope", "k1"),
        lambda: store.acquire("nope", "runner-a", TTL, 100.0),
        lambda: store.commit_step("nope", expected_seq=0, lease_token=1, entries=[],
                                  snapshot={}, status="active", consumed=[], now=100.0),
    ):
        with pytest.raises(SessionNotFound):
            call()
    lost = Lease("nope", "runner-a", 1, 130.0)
    assert store.renew(lost, TTL, 100.0) is None
    store.release(lost)
    assert store.list() == []


# -- commit_step ------------------------------------------------------------------------


def test_commit_step_appends_replaces_and_consumes_in_one_go(store: Store) -> None:
    lease = started(store)
    taken = store.enqueue("s1", "start", {"by": "cli"}, 50.0)
    kept = store.enqueue("s1", "chunk", {}, 51.0)
    entries = [step(1), JournalEntry(1, 11.5, "timer", "dispatch_timeout", {"left": 0.0},
                                     ("active",), ("timeout",), "fired")]
    seq = store.commit_step("s1", expected_seq=0, lease_token=lease.token, entries=entries,
                            snapshot={"active": ["timeout"]}, status="finished",
                            consumed=[taken], now=102.0)
    assert seq == 1
    stored = store.get("s1")
    assert (stored.seq, stored.status, stored.snapshot, stored.updated_at) == (
        1, "finished", {"active": ["timeout"]}, 102.0)
    assert stored.created_at == 1.0
    assert store.journal("s1") == entries
    assert store.journal("s1", after_seq=-1) == [created(), *entries]
    assert [item.id for item in store.queued_events("s1")] == [kept]


def test_commit_step_can_switch_the_spec_with_the_step(store: Store) -> None:
    from interlock.runtime.store.base import SpecSource

    lease = started(store)
    new = SpecSource("specs/v2.yaml", "machine: v2\n", "d" * 64)
    store.commit_step("s1", expected_seq=0, lease_token=lease.token, entries=[step(1)],
                      snapshot={}, status="active", consumed=[], now=5.0, spec=new)
    stored = store.get("s1")
    assert (stored.spec_path, stored.spec_text, stored.spec_hash) == (new.path, new.text,
                                                                      new.digest)
    with pytest.raises(StaleSession):  # a fenced commit switches nothing
        store.commit_step("s1", expected_seq=0, lease_token=lease.token, entries=[step(1)],
                          snapshot={}, status="active", consumed=[], now=6.0,
                          spec=SpecSource("x", "y", "z"))
    assert store.get("s1").spec_path == new.path


def test_journal_after_seq_reads_only_later_steps(store: Store) -> None:
    lease = started(store)
    for seq in range(3):
        commit(store, lease, seq)
    assert [entry.seq for entry in store.journal("s1", after_seq=1)] == [2, 3]
    assert store.journal("s1", after_seq=3) == []


def test_a_stale_seq_is_fenced_off_and_writes_nothing(store: Store) -> None:
    lease = started(store)
    commit(store, lease, 0)
    item = store.enqueue("s1", "chunk", {}, 60.0)
    before = (store.get("s1"), store.journal("s1", after_seq=-1), store.queued_events("s1"))
    with pytest.raises(StaleSession, match="step 1"):
        commit(store, lease, 0, consumed=[item], snapshot={"lost": True})
    assert (store.get("s1"), store.journal("s1", after_seq=-1), store.queued_events("s1")) == before


def test_a_commit_that_fails_half_way_leaves_nothing_behind(store: Store) -> None:
    lease = started(store)
    item = store.enqueue("s1", "start", {}, 60.0)
    before = (store.get("s1"), store.journal("s1", after_seq=-1), store.queued_events("s1"))
    broken = JournalEntry(1, 12.0, kind=None)  # type: ignore[arg-type]  # NOT NULL, 2nd row
    with pytest.raises(StoreError):
        store.commit_step("s1", expected_seq=0, lease_token=lease.token,
                          entries=[step(1), broken], snapshot={"half": True},
                          status="active", consumed=[item], now=101.0)
    assert (store.get("s1"), store.journal("s1", after_seq=-1), store.queued_events("s1")) == before
    assert commit(store, lease, 0, consumed=[item]) == 1


def test_entries_must_belong_to_the_new_step(store: Store) -> None:
    lease = started(store)
    with pytest.raises(ValueError, match="seq"):
        store.commit_step("s1", expected_seq=0, lease_token=lease.token, entries=[step(2)],
                          snapshot={}, status="active", consumed=[], now=101.0)
    assert store.get("s1").seq == 0


def test_json_that_json_cannot_carry_is_refused_before_writing(store: Store) -> None:
    lease = started(store)
    with pytest.raises(ValueError):
        commit(store, lease, 0, snapshot={"x": float("nan")})
    assert store.get("s1").seq == 0


def test_consumed_ids_of_other_sessions_stay_queued(store: Store) -> None:
    lease = started(store, "s1")
    store.create(row("s2"), created())
    other = store.enqueue("s2", "start", {}, 60.0)
    commit(store, lease, 0, consumed=[other, 999_999])
    assert [item.id for item in store.queued_events("s2")] == [other]


def test_the_journal_is_append_only(store: Store, target: str) -> None:
    started(store)
    with pytest.raises(Exception, match="append-only"):
        raw_execute(target, "UPDATE journal SET kind = 'forged'")
    assert store.journal("s1", after_seq=-1) == [created()]


# -- offer: keyed, at most once ------------------------------------------------------------


def test_offer_queues_once_per_key(store: Store) -> None:
    store.create(row("s1"), created())
    assert not store.delivered("s1", "sig-1")
    first = store.offer("s1", "signal", {"path": "in/sig-1.json", "ünï": [1, None]}, 50.0,
                        key="sig-1")
    assert isinstance(first, int)
    assert store.queued_events("s1") == [
        QueuedEvent(first, "s1", "signal", {"path": "in/sig-1.json", "ünï": [1, None]}, 50.0)]
    assert store.offer("s1", "other", {"again": True}, 51.0, key="sig-1") is None
    assert [(i.id, i.event) for i in store.queued_events("s1")] == [(first, "signal")]
    assert store.delivered("s1", "sig-1") and not store.delivered("s1", "sig-2")
    second = store.offer("s1", "signal", {}, 52.0, key="sig-2")
    plain = store.enqueue("s1", "start", {}, 53.0)  # offers and enqueues share one order
    assert second is not None and first < second < plain
    assert [i.id for i in store.queued_events("s1")] == [first, second, plain]


def test_offer_keys_belong_to_their_session(store: Store) -> None:
    store.create(row("s1"), created())
    store.create(row("s2"), created())
    one = store.offer("s1", "signal", {}, 1.0, key="shared")
    two = store.offer("s2", "signal", {}, 2.0, key="shared")
    assert one is not None and two is not None and one != two
    assert [i.id for i in store.queued_events("s1")] == [one]
    assert [i.id for i in store.queued_events("s2")] == [two]
    assert store.offer("s2", "signal", {}, 3.0, key="shared") is None
    assert store.offer("s1", "signal", {}, 3.0, key="SHARED") is not None  # keys are exact


def test_an_offer_key_outlives_its_consumed_item(store: Store) -> None:
    lease = started(store)
    item = store.offer("s1", "signal", {"n": 1}, 50.0, key="sig-1")
    assert item is not None
    commit(store, lease, 0, consumed=[item])
    assert store.queued_events("s1") == []
    assert store.delivered("s1", "sig-1")
    assert store.offer("s1", "signal", {"n": 1}, 60.0, key="sig-1") is None
    assert store.queued_events("s1") == []


def test_an_offer_key_must_not_be_empty(store: Store) -> None:
    store.create(row("s1"), created())
    with pytest.raises(StoreError, match="key") as caught:
        store.offer("s1", "signal", {}, 1.0, key="")
    assert not isinstance(caught.value, SessionNotFound)
    assert store.queued_events("s1") == []


def test_an_offer_with_bad_data_records_no_key(store: Store) -> None:
    store.create(row("s1"), created())
    with pytest.raises(ValueError):
        store.offer("s1", "signal", {"x": float("nan")}, 1.0, key="sig-1")
    assert not store.delivered("s1", "sig-1") and store.queued_events("s1") == []
    assert store.offer("s1", "signal", {}, 1.0, key="sig-1") is not None


def test_an_offer_whose_item_cannot_be_written_records_no_key(store: Store) -> None:
    store.create(row("s1"), created())
    with pytest.raises(StoreError):  # event is NOT NULL: the item fails, so must the key
        store.offer("s1", None, {}, 1.0, key="sig-1")  # type: ignore[arg-type]
    assert not store.delivered("s1", "sig-1") and store.queued_events("s1") == []


# -- leases -----------------------------------------------------------------------------


def test_one_owner_at_a_time_and_takeover_after_expiry(store: Store) -> None:
    old = started(store, owner="runner-a")  # live until 130
    assert old.token == 1 and old.expires_at == 130.0
    assert store.acquire("s1", "runner-b", TTL, now=129.9) is None
    commit(store, old, 0, now=129.0)

    new = store.acquire("s1", "runner-b", TTL, now=130.0)
    assert new == Lease("s1", "runner-b", 2, 160.0)
    with pytest.raises(StaleSession, match="runner-b"):
        commit(store, old, 1, now=131.0)
    assert store.renew(old, TTL, now=131.0) is None
    store.release(old)  # a no-op: the lease is runner-b's
    assert store.acquire("s1", "runner-a", TTL, now=131.0) is None
    assert commit(store, new, 1, now=131.0) == 2
    assert [entry.seq for entry in store.journal("s1")] == [1, 2]


def test_the_same_owner_reacquires_with_a_fresh_token(store: Store) -> None:
    first = started(store, owner="runner-a")
    again = store.acquire("s1", "runner-a", TTL, now=110.0)
    assert again == Lease("s1", "runner-a", first.token + 1, 140.0)
    with pytest.raises(StaleSession):
        commit(store, first, 0)
    assert commit(store, again, 0, now=111.0) == 1


def test_an_expired_lease_cannot_commit_until_renewed(store: Store) -> None:
    lease = started(store)  # expires at 130
    with pytest.raises(StaleSession, match="expired"):
        commit(store, lease, 0, now=130.0)
    renewed = store.renew(lease, TTL, now=135.0)
    assert renewed == Lease("s1", "runner-a", lease.token, 165.0)
    assert commit(store, renewed, 0, now=136.0) == 1


def test_release_frees_the_session_and_fences_the_old_token(store: Store) -> None:
    lease = started(store)
    store.release(lease)
    with pytest.raises(StaleSession, match="nobody"):
        commit(store, lease, 0)
    assert store.renew(lease, TTL, now=101.0) is None
    nxt = store.acquire("s1", "runner-b", TTL, now=101.0)
    assert nxt is not None and nxt.token > lease.token


def test_lease_ttl_must_be_positive(store: Store) -> None:
    lease = started(store)
    with pytest.raises(ValueError):
        store.acquire("s1", "runner-a", 0, now=100.0)
    with pytest.raises(ValueError):
        store.renew(lease, -1, now=100.0)


# -- several store objects, several processes ------------------------------------------------


def test_reopening_sees_everything_and_keeps_the_schema(store: Store, target: str) -> None:
    lease = started(store)
    commit(store, lease, 0)
    again = open_store(target, Path.cwd())
    try:
        assert again.get("s1") == store.get("s1")
        assert again.acquire("s1", "runner-b", TTL, now=101.0) is None
    finally:
        again.close()


def test_enqueue_from_concurrent_processes_loses_nothing(store: Store, target: str) -> None:
    store.create(row("s1"), created())
    workers, count = 4, 200
    barrier = SPAWN.Barrier(workers)
    procs = [SPAWN.Process(target=enqueue_worker, args=(target, "s1", w, count, barrier))
             for w in range(workers)]
    for proc in procs:
        proc.start()
    for proc in procs:
        proc.join(timeout=60)
    assert [proc.exitcode for proc in procs] == [0] * workers
    items = store.queued_events("s1")
    assert len({item.id for item in items}) == len(items) == workers * count
    assert [item.id for item in items] == sorted(item.id for item in items)
    for w in range(workers):  # each writer's items in the order it queued them
        assert [i.data["n"] for i in items if i.data["worker"] == w] == list(range(count))


def test_offers_of_the_same_keys_from_concurrent_processes_queue_each_once(
        store: Store, target: str) -> None:
    # here, not above: the plugin is imported by then
    from support.store_fixtures import offer_worker

    store.create(row("s1"), created())
    workers, keys = 4, [f"sig-{n:02d}" for n in range(50)]
    barrier, results = SPAWN.Barrier(workers), SPAWN.Queue()
    procs = [SPAWN.Process(target=offer_worker, args=(target, "s1", w, keys, barrier, results))
             for w in range(workers)]
    for proc in procs:
        proc.start()
    reports = dict(results.get(timeout=120) for _ in range(workers))
    for proc in procs:
        proc.join(timeout=30)
    assert [proc.exitcode for proc in procs] == [0] * workers
    items = store.queued_events("s1")
    assert len(items) == len(keys)
    assert sorted(item.data["key"] for item in items) == keys
    won = {key: (w, got) for w, report in reports.items() for key, got in report
           if got is not None}
    assert sorted(won) == keys  # every key: exactly one offer got an id, the others None
    assert sum(got is not None for report in reports.values() for _, got in report) == 50
    for item in items:  # the id each winner was told is its item, carrying its data
        assert won[item.data["key"]] == (item.data["worker"], item.id)
    assert all(store.delivered("s1", key) for key in keys)


def test_concurrent_commits_of_one_step_have_one_winner(store: Store, target: str) -> None:
    lease = started(store)
    rounds = 15
    barrier, results = SPAWN.Barrier(2), SPAWN.Queue()
    procs = [SPAWN.Process(target=commit_worker,
                           args=(target, "s1", w, lease.token, rounds, barrier, results))
             for w in range(2)]
    for proc in procs:
        proc.start()
    outcomes = [results.get(timeout=60) for _ in range(2 * rounds)]
    for proc in procs:
        proc.join(timeout=30)
    assert [proc.exitcode for proc in procs] == [0, 0]
    for seq in range(rounds):
        got = sorted(outcome for s, _, outcome in outcomes if s == seq)
        assert got == ["StaleSession", "won"], (seq, got)
    winners = {s: w for s, w, outcome in outcomes if outcome == "won"}
    journal = store.journal("s1")
    assert [entry.seq for entry in journal] == list(range(1, rounds + 1))
    assert [entry.note for entry in journal] == [f"worker {winners[s]}" for s in range(rounds)]
    assert store.get("s1").snapshot == {"winner": winners[rounds - 1], "step": rounds}


# -- agent process records --------------------------------------------------------------------


def agent(agent_id: str = "a1", started_at: float = 5.0, **changes: Any) -> AgentRecord:
    fields: dict[str, Any] = {
        "id": agent_id, "pgid": 4242, "pid": 4242, "owner": "host:4000:ab12",
        "argv": ("claude", "-p", "fix the büg", ""), "started_at": started_at,
    }
    fields.update(changes)
    return AgentRecord(**fields)


@pytest.fixture
def agents_store(store: Store, target: str) -> Store:
    """``store`` with no agent records (``target`` empties only the session tables)."""
    raw_execute(target, "DELETE FROM agents")
    return store


def test_agent_records_round_trip(agents_store: Store) -> None:
    store = agents_store
    assert store.agents() == []
    loose = agent("a1", pgid=100, pid=101, argv=("sh", "-c", "sleep 9; echo 'x y'"))
    bound = agent("a2", started_at=6.5, session_id="no-such-session")  # no foreign key
    store.record_agent(loose)
    store.record_agent(bound)
    listed = store.agents()
    assert listed == [loose, bound]
    assert listed[0].session_id is None and listed[1].session_id == "no-such-session"
    assert isinstance(listed[0].argv, tuple) and listed[0].argv[2] == "sleep 9; echo 'x y'"
    assert (listed[0].pgid, listed[0].pid, listed[0].owner) == (100, 101, "host:4000:ab12")
    assert store.list() == []  # an agent record is no session


def test_agent_records_are_listed_by_start_time_then_id(agents_store: Store) -> None:
    store = agents_store
    for agent_id, at in [("9f", 3.0), ("c0", 1.0), ("0a", 3.0), ("a0", 2.0), ("0A", 3.0)]:
        store.record_agent(agent(agent_id, started_at=at))
    assert [(a.id, a.started_at) for a in store.agents()] == [
        ("c0", 1.0), ("a0", 2.0), ("0A", 3.0), ("0a", 3.0), ("9f", 3.0)]


def test_a_taken_agent_id_is_refused_and_changes_nothing(agents_store: Store) -> None:
    store = agents_store
    store.record_agent(agent("a1"))
    with pytest.raises(StoreError, match=r"agent.*'a1'.*already"):
        store.record_agent(agent("a1", pid=1, started_at=9.0))
    assert store.agents() == [agent("a1")]


def test_forget_agent_is_idempotent(agents_store: Store) -> None:
    store = agents_store
    store.forget_agent("never-recorded")
    store.record_agent(agent("a1"))
    store.record_agent(agent("a2", started_at=6.0))
    store.forget_agent("a1")
    store.forget_agent("a1")
    assert store.agents() == [agent("a2", started_at=6.0)]
    store.record_agent(agent("a1", started_at=7.0))  # a forgotten id may be recorded again
    assert [a.id for a in store.agents()] == ["a2", "a1"]


def test_agent_records_outlive_the_store_object(agents_store: Store, target: str) -> None:
    agents_store.record_agent(agent("a1", session_id="s1"))
    agents_store.close()
    again = open_store(target, Path.cwd())
    try:
        assert again.agents() == [agent("a1", session_id="s1")]
        again.forget_agent("a1")
    finally:
        again.close()
    third = open_store(target, Path.cwd())
    try:
        assert third.agents() == []
    finally:
        third.close()


@pytest.fixture(params=["sqlite", "postgres"])
def empty_target(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """Where a store could live, with no tables yet: a new file or a new schema."""
    if request.param == "sqlite":
        yield f"sqlite://{tmp_path / 'state.db'}"
        return
    # here, not above: the plugin is imported by then
    from support.store_fixtures import require_pg

    base = require_pg()
    schema = f"test_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(base, autocommit=True) as conn:
        conn.execute(f"CREATE SCHEMA {schema}")
    yield with_params(base, options=f"-c search_path={schema}")
    with psycopg.connect(base, autocommit=True) as conn:
        conn.execute(f"DROP SCHEMA {schema} CASCADE")


def schema_version(target: str) -> int:
    if target.startswith("sqlite://"):
        with sqlite3.connect(target.removeprefix("sqlite://")) as lite:
            found = lite.execute("SELECT version FROM schema_version").fetchall()
    else:
        with psycopg.connect(target) as pg:
            found = pg.execute("SELECT version FROM schema_version").fetchall()
    assert len(found) == 1
    return int(found[0][0])


# -- invocations ------------------------------------------------------------------------------


def invocation(invocation_id: str = "i1", started_at: float = 5.0,
               **changes: Any) -> InvocationRecord:
    values: dict[str, Any] = {
        "id": invocation_id, "session_id": "s1", "invoke": "review", "state": "reviewing",
        "argv": ("python", "agent.py", "--say", "it's"), "spool": "/tmp/x/1-review",
        "started_at": started_at,
    }
    values.update(changes)
    return InvocationRecord(**values)


def test_invocations_round_trip_and_end_once(store: Store) -> None:
    store.create(row("s1"), created())
    assert store.invocations("s1") == []
    store.record_invocation(invocation("i2", started_at=7.0))
    store.record_invocation(invocation("i1"))
    store.invocation_started("i1", pid=101, pgid=101, start_ticks="123456")
    store.invocation_started("nope", pid=1, pgid=1, start_ticks="1")  # no-op
    started = invocation("i1", pid=101, pgid=101, start_ticks="123456")
    assert store.invocations("s1") == [started, invocation("i2", started_at=7.0)]
    assert store.end_invocation("i1", "error", "timeout", 9.5)
    assert not store.end_invocation("i1", "done", None, 9.6)  # the first outcome stands
    assert not store.end_invocation("nope", "done", None, 9.6)
    ended = invocation("i1", pid=101, pgid=101, start_ticks="123456", outcome="error",
                       reason="timeout", ended_at=9.5)
    assert store.invocations("s1") == [ended, invocation("i2", started_at=7.0)]
    assert store.invocations("s1", in_flight=True) == [invocation("i2", started_at=7.0)]


def test_a_taken_invocation_id_or_a_missing_session_is_refused(store: Store) -> None:
    with pytest.raises(SessionNotFound):
        store.record_invocation(invocation())
    with pytest.raises(SessionNotFound):
        store.invocations("s1")
    store.create(row("s1"), created())
    store.record_invocation(invocation())
    with pytest.raises(StoreError, match="already exists"):
        store.record_invocation(invocation(state="other"))
    assert store.invocations("s1") == [invocation()]


def test_a_store_from_before_invocations_is_migrated(
        empty_target: str, monkeypatch: pytest.MonkeyPatch) -> None:
    module: Any = sqlite_module if empty_target.startswith("sqlite://") else postgres_module
    steps = module.MIGRATIONS
    monkeypatch.setattr(module, "MIGRATIONS", steps[:4])  # version 4: no invocations table
    old = open_store(empty_target, Path.cwd())
    try:
        old.create(row("s1"), created())
    finally:
        old.close()
    monkeypatch.setattr(module, "MIGRATIONS", steps)
    store = open_store(empty_target, Path.cwd())
    try:
        assert schema_version(empty_target) == len(steps) == 8
        assert store.get("s1") == row("s1")
        store.record_invocation(invocation())
        assert store.invocations("s1", in_flight=True) == [invocation()]
    finally:
        store.close()


def fanout(fanout_id: str = "f1", started_at: float = 5.0, **changes: Any) -> FanoutRecord:
    values: dict[str, Any] = {
        "id": fanout_id, "session_id": "s1", "invoke": "executors", "state": "executing",
        "items": ({"id": "T1", "title": "it's"}, "T2", 3), "concurrency": 2,
        "started_at": started_at,
    }
    values.update(changes)
    return FanoutRecord(**values)


def test_fanouts_and_their_children_round_trip_and_end_once(store: Store) -> None:
    with pytest.raises(SessionNotFound):
        store.record_fanout(fanout())
    store.create(row("s1"), created())
    assert store.fanouts("s1") == []
    store.record_fanout(fanout("f2", started_at=7.0, items=(), concurrency=None))
    store.record_fanout(fanout())
    with pytest.raises(StoreError, match="already exists"):
        store.record_fanout(fanout(state="other"))
    assert store.fanouts("s1") == [fanout(), fanout("f2", started_at=7.0, items=(),
                                                    concurrency=None)]
    assert store.end_fanout("f1", "done", 9.0)
    assert not store.end_fanout("f1", "cancelled", 9.1)  # the first outcome stands
    assert not store.end_fanout("nope", "done", 9.1)
    assert store.fanouts("s1", in_flight=True) == [fanout("f2", started_at=7.0, items=(),
                                                          concurrency=None)]
    assert store.fanouts("s1")[0] == fanout(outcome="done", ended_at=9.0)
    store.record_invocation(invocation("i1", fanout="f1", index=0))
    result = {"event": "done.invoke.executors", "data": {"item": "T2", "index": 1,
                                                         "answer": None}}
    store.invocation_result("i1", result)
    store.invocation_result("nope", result)  # no-op
    assert store.invocations("s1") == [invocation("i1", fanout="f1", index=0, result=result)]


def test_a_store_from_before_fanouts_is_migrated(
        empty_target: str, monkeypatch: pytest.MonkeyPatch) -> None:
    module: Any = sqlite_module if empty_target.startswith("sqlite://") else postgres_module
    steps = module.MIGRATIONS
    monkeypatch.setattr(module, "MIGRATIONS", steps[:7])  # version 7: no fan-outs
    old = open_store(empty_target, Path.cwd())
    try:
        old.create(row("s1"), created())
    finally:
        old.close()
    raw_execute(empty_target, "INSERT INTO invocations (id, session_id, invoke, state, argv,"
                " spool, started_at) VALUES ('i1', 's1', 'review', 'reviewing',"
                """ '["python", "agent.py", "--say", "it''s"]', '/tmp/x/1-review', 5.0)""")
    monkeypatch.setattr(module, "MIGRATIONS", steps)
    store = open_store(empty_target, Path.cwd())
    try:
        assert schema_version(empty_target) == len(steps)
        assert store.invocations("s1") == [invocation()]  # no fan-out, no index, no result
        store.record_fanout(fanout())
        assert store.fanouts("s1", in_flight=True) == [fanout()]
    finally:
        store.close()


def test_a_store_from_before_agent_records_is_migrated(
        empty_target: str, monkeypatch: pytest.MonkeyPatch) -> None:
    module: Any = sqlite_module if empty_target.startswith("sqlite://") else postgres_module
    steps = module.MIGRATIONS
    monkeypatch.setattr(module, "MIGRATIONS", steps[:1])  # version 1: no agents table
    old = open_store(empty_target, Path.cwd())
    try:
        old.create(row("s1", status="running"), created())  # a status of schema 1-3
    finally:
        old.close()
    assert schema_version(empty_target) == 1
    monkeypatch.setattr(module, "MIGRATIONS", steps)
    store = open_store(empty_target, Path.cwd())
    try:
        assert schema_version(empty_target) == len(steps)
        assert store.get("s1") == row("s1", status="active")  # renamed by schema 4
        assert store.journal("s1", after_seq=-1) == [created()]
        store.record_agent(agent("a1", session_id="s1"))
        assert store.agents() == [agent("a1", session_id="s1")]
    finally:
        store.close()


def test_a_store_from_before_deliveries_is_migrated(
        empty_target: str, monkeypatch: pytest.MonkeyPatch) -> None:
    module: Any = sqlite_module if empty_target.startswith("sqlite://") else postgres_module
    steps = module.MIGRATIONS
    monkeypatch.setattr(module, "MIGRATIONS", steps[:2])  # version 2: no deliveries table
    old = open_store(empty_target, Path.cwd())
    try:
        old.create(row("s1", status="running"), created())  # a status of schema 1-3
        old.record_agent(agent("a1", session_id="s1"))
    finally:
        old.close()
    queued = queue_in_inbox(empty_target, "s1", "start", '{"by": "cli"}', 5.0)
    assert schema_version(empty_target) == 2
    monkeypatch.setattr(module, "MIGRATIONS", steps)
    store = open_store(empty_target, Path.cwd())
    try:
        assert schema_version(empty_target) == len(steps) == 8
        assert store.get("s1") == row("s1", status="active")  # renamed by schema 4
        assert store.journal("s1", after_seq=-1) == [created()]
        assert store.queued_events("s1") == [QueuedEvent(queued, "s1", "start", {"by": "cli"}, 5.0)]
        assert store.agents() == [agent("a1", session_id="s1")]
        assert not store.delivered("s1", "sig-1")
        offered = store.offer("s1", "signal", {}, 6.0, key="sig-1")
        assert offered is not None and offered > queued
        assert store.offer("s1", "signal", {}, 7.0, key="sig-1") is None
        assert [item.id for item in store.queued_events("s1")] == [queued, offered]
    finally:
        store.close()


def test_a_store_from_before_the_lifecycle_is_migrated(
        empty_target: str, monkeypatch: pytest.MonkeyPatch) -> None:
    module: Any = sqlite_module if empty_target.startswith("sqlite://") else postgres_module
    steps = module.MIGRATIONS
    monkeypatch.setattr(module, "MIGRATIONS", steps[:3])  # version 3: old statuses
    old = open_store(empty_target, Path.cwd())
    try:
        old.create(row("s1", status="running"), created())
        old.create(row("s2", status="final", created_at=2.0), created(2.0))
        old.create(row("s3", status="failed", created_at=3.0), created(3.0))
    finally:
        old.close()
    monkeypatch.setattr(module, "MIGRATIONS", steps)
    store = open_store(empty_target, Path.cwd())
    try:
        assert schema_version(empty_target) == len(steps) == 8
        assert [r.status for r in store.list()] == ["active", "finished", "failed"]
        assert store.dead_letters("s1") == [] and store.cancel_request("s1") is None
        assert store.holder("s1") is None
    finally:
        store.close()


def queue_in_inbox(target: str, session_id: str, event: str, data: str, at: float,
                   key: str | None = None) -> int:
    """Queue an event as a store of schema 6 or older did (the table was ``inbox``, a
    delivery's column ``inbox_id``): this interlock's own SQL names them otherwise."""
    insert = ("INSERT INTO inbox (session_id, event, data, enqueued_at)"
              f" VALUES ('{session_id}', '{event}', '{data}', {at}) RETURNING id")
    if target.startswith("sqlite://"):
        with sqlite3.connect(target.removeprefix("sqlite://")) as lite:
            item = int(lite.execute(insert).fetchone()[0])
    else:
        with psycopg.connect(target, autocommit=True) as pg:
            found = pg.execute(insert.encode()).fetchone()
            assert found is not None
            item = int(found[0])
    if key is not None:
        raw_execute(target, "INSERT INTO deliveries (session_id, key, inbox_id, at)"
                            f" VALUES ('{session_id}', '{key}', {item}, {at})")
    return item


def table_names(target: str) -> set[str]:
    if target.startswith("sqlite://"):
        with sqlite3.connect(target.removeprefix("sqlite://")) as lite:
            rows = lite.execute("SELECT name FROM sqlite_master WHERE type = 'table'").fetchall()
    else:
        with psycopg.connect(target) as pg:
            rows = pg.execute("SELECT table_name FROM information_schema.tables"
                              " WHERE table_schema = current_schema()").fetchall()
    return {name for (name,) in rows}


def test_a_store_whose_event_queue_was_called_inbox_is_migrated(
        empty_target: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Schema 7 renames the table ``inbox`` to ``event_queue`` (and ``deliveries.inbox_id``
    to ``event_id``): what was queued stays queued, offered keys stay offered, and ids keep
    growing past those consumed before the rename."""
    module: Any = sqlite_module if empty_target.startswith("sqlite://") else postgres_module
    steps = module.MIGRATIONS
    monkeypatch.setattr(module, "MIGRATIONS", steps[:6])  # version 6: the table is "inbox"
    old = open_store(empty_target, Path.cwd())
    try:
        old.create(row("s1"), created())
    finally:
        old.close()
    waiting = queue_in_inbox(empty_target, "s1", "record", '{"n": 2}', 51.0)
    taken = queue_in_inbox(empty_target, "s1", "signal", '{"n": 1}', 50.0, key="sig-1")
    assert waiting < taken
    raw_execute(empty_target, f"DELETE FROM inbox WHERE id = {taken}")  # consumed: the
    # highest id is gone, and still not handed out again
    assert schema_version(empty_target) == 6 and "inbox" in table_names(empty_target)
    monkeypatch.setattr(module, "MIGRATIONS", steps)
    store = open_store(empty_target, Path.cwd())
    try:
        assert schema_version(empty_target) == len(steps) == 8
        tables = table_names(empty_target)
        assert "event_queue" in tables and "inbox" not in tables
        assert store.queued_events("s1") == [QueuedEvent(waiting, "s1", "record", {"n": 2}, 51.0)]
        assert store.delivered("s1", "sig-1")
        assert store.offer("s1", "signal", {"n": 1}, 52.0, key="sig-1") is None
        later = store.enqueue("s1", "record", {"n": 3}, 53.0)
        offered = store.offer("s1", "signal", {"n": 4}, 54.0, key="sig-2")
        assert offered is not None and taken < later < offered
        assert [i.id for i in store.queued_events("s1")] == [waiting, later, offered]
        lease = store.acquire("s1", "runner-a", TTL, now=100.0)
        assert lease is not None
        commit(store, lease, 0, consumed=[waiting, later, offered])
        assert store.queued_events("s1") == [] and store.delivered("s1", "sig-2")
    finally:
        store.close()


# -- lifecycle: dead letters, cancel requests, deletion, lease start ----------------------


def letter(event: str = "record", kind: str = "event", **data: Any) -> DeadLetter:
    return DeadLetter(0, "", kind, event, dict(data), 101.0, f"action 'x' raised on {event}")


def test_a_failed_step_buries_its_event_in_the_same_commit(store: Store) -> None:
    lease = started(store)
    item = store.enqueue("s1", "record", {"n": 3}, 50.0)
    store.commit_step("s1", expected_seq=0, lease_token=lease.token,
                      entries=[step(1, kind="error", event="record")], snapshot={},
                      status="failed", consumed=[item], now=101.0,
                      buried=[letter(n=3), letter("after.idle.0", kind="timer")])
    assert store.queued_events("s1") == []
    dead = store.dead_letters("s1")
    assert [(d.session_id, d.kind, d.event, d.data, d.failed_at) for d in dead] == [
        ("s1", "event", "record", {"n": 3}, 101.0), ("s1", "timer", "after.idle.0", {}, 101.0)]
    assert dead[0].id < dead[1].id and dead[0].error == "action 'x' raised on record"
    assert store.get("s1").status == "failed"


def test_revived_dead_letters_go_with_their_step(store: Store) -> None:
    lease = started(store)
    store.create(row("s2"), created())
    commit_seq = store.commit_step("s1", expected_seq=0, lease_token=lease.token,
                                   entries=[step(1)], snapshot={}, status="failed",
                                   consumed=[], now=101.0, buried=[letter("a"), letter("b")])
    first, second = store.dead_letters("s1")
    store.commit_step("s1", expected_seq=commit_seq, lease_token=lease.token,
                      entries=[step(2)], snapshot={}, status="active", consumed=[],
                      now=102.0, revived=[first.id])
    assert store.dead_letters("s1") == [second]
    other = store.acquire("s2", "runner-b", TTL, 100.0)
    assert other is not None
    store.commit_step("s2", expected_seq=0, lease_token=other.token, entries=[step(1)],
                      snapshot={}, status="active", consumed=[], now=102.0,
                      revived=[second.id])  # not s2's: ignored
    assert store.dead_letters("s1") == [second]


def test_a_fenced_commit_buries_nothing(store: Store) -> None:
    lease = started(store)
    with pytest.raises(StaleSession):
        store.commit_step("s1", expected_seq=5, lease_token=lease.token, entries=[step(6)],
                          snapshot={}, status="failed", consumed=[], now=101.0,
                          buried=[letter()])
    assert store.dead_letters("s1") == []


def test_cancel_requests(store: Store) -> None:
    store.create(row("s1"), created())
    assert store.cancel_request("s1") is None
    store.request_cancel("s1", "enough", 7.0)
    assert store.cancel_request("s1") == CancelRequest("enough", 7.0)
    store.request_cancel("s1", None, 8.0)
    assert store.cancel_request("s1") == CancelRequest(None, 8.0)
    with pytest.raises(SessionNotFound):
        store.request_cancel("nope", None, 1.0)
    with pytest.raises(SessionNotFound):
        store.cancel_request("nope")


def test_the_holder_says_when_its_lease_was_taken(store: Store) -> None:
    lease = started(store)  # at t=100
    renewed = store.renew(lease, TTL, 120.0)
    assert renewed is not None and renewed.acquired_at == 100.0
    holder = store.holder("s1")
    assert holder is not None and holder.acquired_at == 100.0 and holder.expires_at == 150.0
    store.release(lease)
    again = store.acquire("s1", "runner-b", TTL, 200.0)
    assert again is not None and again.acquired_at == 200.0


def test_delete_removes_the_session_and_everything_of_it(store: Store) -> None:
    lease = started(store)
    store.create(row("s2"), created())
    store.enqueue("s1", "start", {}, 50.0)
    store.offer("s1", "signal", {}, 51.0, key="k1")
    store.commit_step("s1", expected_seq=0, lease_token=lease.token, entries=[step(1)],
                      snapshot={}, status="failed", consumed=[], now=101.0, buried=[letter()])
    store.request_cancel("s1", "bye", 102.0)
    store.delete("s1")
    assert [r.id for r in store.list()] == ["s2"]
    for call in (lambda: store.get("s1"), lambda: store.journal("s1"),
                 lambda: store.queued_events("s1"), lambda: store.dead_letters("s1"),
                 lambda: store.holder("s1"), lambda: store.delete("s1")):
        with pytest.raises(SessionNotFound):
            call()
    with pytest.raises(SessionNotFound):  # its runner finds out on its next commit
        store.commit_step("s1", expected_seq=1, lease_token=lease.token, entries=[step(2)],
                          snapshot={}, status="active", consumed=[], now=103.0)
    assert store.renew(lease, TTL, 103.0) is None
    store.create(row("s1"), created())  # the id is free again, with nothing of the old one
    assert store.journal("s1") == [] and store.queued_events("s1") == []
    assert not store.delivered("s1", "k1") and store.dead_letters("s1") == []


# -- staged configs (seed 000: the poller writes, the unit reads once) --------------------


STAGED = {"action": "retry", "corrections": ["Add performance benchmarks section"],
          "context_additions": ["wiki/research/sprite-formats.md#performance"],
          "resolved_at": "2026-05-12T00:30:00Z", "poller_id": "poller-14-001"}


def test_a_staged_config_round_trips_and_is_replaced(store: Store) -> None:
    assert store.staged_config("node_14") is None
    store.stage_config("node_14", STAGED, at=5.0)
    assert store.staged_config("node_14") == STAGED
    assert store.staged_config("node_14") == STAGED  # reading leaves it
    newer = {**STAGED, "corrections": ["büg: focus on 36-hex render time"]}
    store.stage_config("node_14", newer, at=6.0)
    assert store.staged_config("node_14") == newer
    assert store.staged_config("node_15") is None


def test_a_staged_config_is_consumed_exactly_once(store: Store) -> None:
    store.stage_config("node_14", STAGED, at=5.0)
    store.stage_config("node_15", {**STAGED, "poller_id": "p-15"}, at=5.0)
    assert store.consume_staged_config("node_14") == STAGED
    assert store.consume_staged_config("node_14") is None
    assert store.staged_config("node_14") is None
    assert store.staged_config("node_15") == {**STAGED, "poller_id": "p-15"}


def test_two_stores_consume_a_staged_config_once(target: str) -> None:
    first, second = open_store(target, Path.cwd()), open_store(target, Path.cwd())
    try:
        first.stage_config("node_14", STAGED, at=5.0)
        got = [second.consume_staged_config("node_14"), first.consume_staged_config("node_14")]
        assert got == [STAGED, None]
    finally:
        first.close()
        second.close()
