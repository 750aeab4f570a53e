"""The inbox adapter contract, run against SQLite, PostgreSQL, HTTP (the real Starlette
server over SQLite) and the FAKE ArangoDB alike."""

from __future__ import annotations

import pytest

from interlock.runtime.inbox.base import InboxAdapter
from interlock.runtime.inbox.model import (
    OPERATOR,
    REAPER,
    BadRequest,
    InvalidTransition,
    StaleLease,
    Status,
    UnknownMessage,
)

from support.inbox_helpers import Backend

LEASE = 5.0


def post(inbox: InboxAdapter, n: int = 1) -> list[str]:
    return [inbox.post("task", "alice", f"body {i}") for i in range(n)]


def test_post_then_get_list_and_fetch(backend: Backend) -> None:
    inbox = backend.inbox
    message_id = inbox.post("review", "alice", "look at PR 7", correlation_id="c-1",
                            payload_ref="s3://bucket/7")
    message = inbox.get(message_id)
    assert (message.id, message.type, message.sender, message.status, message.body,
            message.correlation_id, message.payload_ref, message.lease_until) == (
        message_id, "review", "alice", Status.QUEUED, "look at PR 7", "c-1",
        "s3://bucket/7", None)
    assert message.to_json()["from"] == "alice"
    assert [m.id for m in inbox.list()] == [message_id]
    assert [m.id for m in inbox.list(Status.DONE)] == []
    assert [m.id for m in inbox.fetch_queued(10)] == [message_id]


def test_fetch_is_oldest_first_and_limited(backend: Backend) -> None:
    ids = []
    for _ in range(5):
        ids.extend(post(backend.inbox))
        backend.clock.advance(1)
    assert [m.id for m in backend.inbox.fetch_queued(3)] == ids[:3]


def test_claim_sets_lease_and_only_once(backend: Backend) -> None:
    inbox = backend.inbox
    (message_id,) = post(inbox)
    lease = inbox.claim(message_id, "w1", LEASE)
    assert lease is not None
    assert lease.lease_until == pytest.approx(backend.clock.now() + LEASE)
    message = inbox.get(message_id)
    assert (message.status, message.owner) == (Status.IN_PROGRESS, "w1")
    assert message.lease_until == pytest.approx(lease.lease_until)
    assert inbox.claim(message_id, "w2", LEASE) is None
    assert inbox.fetch_queued(10) == []


def test_worker_path_acked_then_done_is_journaled(backend: Backend) -> None:
    inbox = backend.inbox
    (message_id,) = post(inbox)
    lease = inbox.claim(message_id, "w1", LEASE)
    assert lease is not None
    assert inbox.update_status(message_id, Status.ACKED, lease.token).status is Status.ACKED
    backend.clock.advance(1)
    done = inbox.update_status(message_id, Status.DONE, lease.token, reason="merged")
    assert done.status is Status.DONE and done.lease_until is None
    entries = inbox.journal(message_id)
    assert [(e.before, e.after, e.actor, e.reason) for e in entries] == [
        (Status.IN_PROGRESS, Status.ACKED, "w1", None),
        (Status.ACKED, Status.DONE, "w1", "merged")]


def test_in_progress_to_failed_directly(backend: Backend) -> None:
    inbox = backend.inbox
    (message_id,) = post(inbox)
    lease = inbox.claim(message_id, "w1", LEASE)
    assert lease is not None
    assert inbox.update_status(message_id, Status.FAILED, lease.token).status is Status.FAILED


def test_expired_lease_is_fetchable_and_reclaimed_by_another(backend: Backend) -> None:
    inbox = backend.inbox
    (message_id,) = post(inbox)
    old = inbox.claim(message_id, "w1", LEASE)
    assert old is not None
    backend.clock.advance(LEASE - 0.5)
    assert inbox.fetch_queued(10) == []
    backend.clock.advance(1)
    assert [m.id for m in inbox.fetch_queued(10)] == [message_id]
    new = inbox.claim(message_id, "w2", LEASE)
    assert new is not None and new.token != old.token
    with pytest.raises(StaleLease):
        inbox.update_status(message_id, Status.DONE, old.token)
    message = inbox.get(message_id)
    assert (message.status, message.owner) == (Status.IN_PROGRESS, "w2")
    assert inbox.journal(message_id) == []
    assert inbox.update_status(message_id, Status.DONE, new.token).status is Status.DONE


def test_expired_acked_lease_is_fetchable_too(backend: Backend) -> None:
    inbox = backend.inbox
    (message_id,) = post(inbox)
    lease = inbox.claim(message_id, "w1", LEASE)
    assert lease is not None
    inbox.update_status(message_id, Status.ACKED, lease.token)
    backend.clock.advance(LEASE + 1)
    assert [m.id for m in inbox.fetch_queued(10)] == [message_id]


def test_reclaim_expired_requeues_and_journals(backend: Backend) -> None:
    inbox = backend.inbox
    first, second = post(inbox, 2)
    assert inbox.claim(first, "w1", LEASE) is not None
    assert inbox.claim(second, "w1", LEASE * 10) is not None
    backend.clock.advance(LEASE + 1)
    assert inbox.reclaim_expired() == 1
    message = inbox.get(first)
    assert (message.status, message.lease_until, message.owner) == (Status.QUEUED, None, None)
    assert [(e.after, e.actor) for e in inbox.journal(first)] == [(Status.QUEUED, REAPER)]
    assert inbox.get(second).status is Status.IN_PROGRESS


def test_finished_messages_are_final(backend: Backend) -> None:
    inbox = backend.inbox
    (message_id,) = post(inbox)
    lease = inbox.claim(message_id, "w1", LEASE)
    assert lease is not None
    inbox.update_status(message_id, Status.DONE, lease.token)
    backend.clock.advance(LEASE * 2)
    assert inbox.fetch_queued(10) == []
    assert inbox.claim(message_id, "w2", LEASE) is None
    with pytest.raises(InvalidTransition, match="already done"):
        inbox.update_status(message_id, Status.FAILED, lease.token)
    with pytest.raises(InvalidTransition, match="already done"):
        inbox.update_status(message_id, Status.FAILED)
    assert inbox.get(message_id).status is Status.DONE


def test_operator_acts_without_token_and_is_journaled(backend: Backend) -> None:
    inbox = backend.inbox
    queued, claimed = post(inbox, 2)
    inbox.update_status(queued, Status.DONE, reason="handled by hand")
    assert [(e.before, e.after, e.actor, e.reason) for e in inbox.journal(queued)] == [
        (Status.QUEUED, Status.DONE, OPERATOR, "handled by hand")]
    assert inbox.claim(claimed, "w1", LEASE) is not None
    inbox.update_status(claimed, Status.ACKED)
    inbox.update_status(claimed, Status.FAILED, reason="bad input")
    assert [e.actor for e in inbox.journal(claimed)] == [OPERATOR, OPERATOR]
    assert inbox.get(claimed).status is Status.FAILED


def test_bad_transitions_change_nothing(backend: Backend) -> None:
    inbox = backend.inbox
    (message_id,) = post(inbox)
    with pytest.raises(StaleLease):  # a token on a message nobody claimed
        inbox.update_status(message_id, Status.DONE, "0" * 32)
    with pytest.raises(InvalidTransition, match="queued -> queued"):
        inbox.update_status(message_id, Status.QUEUED)
    lease = inbox.claim(message_id, "w1", LEASE)
    assert lease is not None
    with pytest.raises(InvalidTransition, match="in_progress"):
        inbox.update_status(message_id, Status.IN_PROGRESS, lease.token)
    inbox.update_status(message_id, Status.ACKED, lease.token)
    with pytest.raises(InvalidTransition, match="acked"):
        inbox.update_status(message_id, Status.ACKED, lease.token)
    message = inbox.get(message_id)
    assert (message.status, message.owner) == (Status.ACKED, "w1")
    assert len(inbox.journal(message_id)) == 1


def test_bad_and_unknown_ids(backend: Backend) -> None:
    inbox = backend.inbox
    for call in (lambda: inbox.get("nope"), lambda: inbox.claim("x; DROP", "w", LEASE),
                 lambda: inbox.update_status("12", Status.DONE)):
        with pytest.raises(BadRequest, match="bad message id"):
            call()
    missing = "f" * 32
    with pytest.raises(UnknownMessage):
        inbox.get(missing)
    with pytest.raises(UnknownMessage):
        inbox.claim(missing, "w", LEASE)
    with pytest.raises(UnknownMessage):
        inbox.update_status(missing, Status.DONE)


def test_bad_requests(backend: Backend) -> None:
    inbox = backend.inbox
    with pytest.raises(BadRequest, match="type"):
        inbox.post("", "alice")
    with pytest.raises(BadRequest, match="sender"):
        inbox.post("t", " ")
    (message_id,) = post(inbox)
    with pytest.raises(BadRequest, match="lease_seconds"):
        inbox.claim(message_id, "w", 0)
    with pytest.raises(BadRequest, match="limit"):
        inbox.fetch_queued(0)
    assert inbox.get(message_id).status is Status.QUEUED


def test_settings_round_trip(backend: Backend) -> None:
    inbox = backend.inbox
    assert inbox.settings() == {}
    inbox.set_setting("enabled", False)
    inbox.set_setting("interval", 12.5)
    inbox.set_setting("enabled", True)
    assert inbox.settings() == {"enabled": True, "interval": 12.5}
    with pytest.raises(BadRequest, match="unknown setting"):
        inbox.set_setting("colour", "red")
    with pytest.raises(BadRequest, match="interval"):
        inbox.set_setting("interval", -1)


def test_claim_next_takes_the_oldest_fetchable(backend: Backend) -> None:
    inbox = backend.inbox
    ids = []
    for _ in range(4):
        ids.extend(post(inbox))
        backend.clock.advance(1)
    first = inbox.claim(ids[0], "w0", LEASE)
    assert first is not None
    claims = inbox.claim_next("w1", LEASE, limit=2)
    assert [c.message.id for c in claims] == ids[1:3]
    for claim in claims:
        assert claim.message.status is Status.IN_PROGRESS and claim.message.owner == "w1"
        assert inbox.get(claim.message.id).lease_until == pytest.approx(claim.lease.lease_until)
    backend.clock.advance(LEASE + 0.5)  # every lease but none of the queued one ran out
    again = inbox.claim_next("w2", LEASE, limit=10)
    assert sorted(c.message.id for c in again) == sorted(ids)
    with pytest.raises(StaleLease):
        inbox.update_status(ids[1], Status.DONE, claims[0].lease.token)
    token = {c.message.id: c.lease.token for c in again}[ids[1]]
    assert inbox.update_status(ids[1], Status.DONE, token).status is Status.DONE
    assert inbox.claim_next("w3", LEASE) == []
