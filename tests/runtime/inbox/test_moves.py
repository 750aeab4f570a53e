"""The transition core every adapter shares (model.Move), as pure functions."""

from __future__ import annotations

import pytest

from interlock.runtime.inbox.model import (
    OPERATOR,
    InvalidTransition,
    Message,
    StaleLease,
    Status,
    move_for,
)

Q, P, A, D, F = (Status.QUEUED, Status.IN_PROGRESS, Status.ACKED, Status.DONE,
                 Status.FAILED)


@pytest.mark.parametrize(("new", "worker", "sources"), [
    (A, True, (P,)), (D, True, (A, P)), (F, True, (A, P)), (Q, True, ()), (P, True, ()),
    (A, False, (P, Q)), (D, False, (A, P, Q)), (F, False, (A, P, Q)), (Q, False, ()),
    (P, False, ()),
])
def test_sources_follow_the_worker_and_operator_moves(new: Status, worker: bool,
                                                       sources: tuple[Status, ...]) -> None:
    assert move_for(new, "t" if worker else None).sources == sources


def test_actor_and_lease() -> None:
    assert move_for(D, "t").actor("w1") == "w1"
    assert move_for(D, "t").actor(None) == OPERATOR
    assert move_for(D, None).actor("w1") == OPERATOR
    assert move_for(A, "t").keeps_lease and not move_for(F, "t").keeps_lease


def test_apply_moves_or_refuses() -> None:
    held = Message("a" * 32, "t", "s", P, lease_until=50.0, owner="w1")
    acked = move_for(A, "tok").apply(held, "tok", "tok", 10.0)
    assert (acked.status, acked.lease_until, acked.updated_at) == (A, 50.0, 10.0)
    done = move_for(D, "tok").apply(acked, "tok", "tok", 11.0)
    assert (done.status, done.lease_until, done.owner) == (D, None, "w1")
    with pytest.raises(StaleLease):
        move_for(D, "old").apply(held, "old", "new", 12.0)
    with pytest.raises(InvalidTransition, match="already done"):
        move_for(F, None).apply(done, None, "tok", 12.0)
    with pytest.raises(ValueError):
        move_for("finished", None)
