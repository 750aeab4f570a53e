"""The runtime closes the seams: checkpoints advance by themselves (``polled``) once the
mailbox holds nothing more they accept, and "accepts" evaluates guards."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from pathlib import Path

from interlock import runtime
from interlock.runtime.engine.runner import Runner
from interlock.runtime.signals.addressing import session_dir
from interlock.runtime.signals.mailbox import Mailbox
from interlock.runtime.signals.model import make_signal
from interlock.runtime.signals.session_feed import SessionFeed
from interlock.runtime.store import Store, open_store

from support.paths import ROOT

HERE = ROOT / "tests" / "support" / "checkpoint"
CHECKPOINT = HERE / "checkpoint.yaml"
GATED = HERE / "gated.yaml"
BINDINGS = str(HERE / "bindings.py")


def _open(store: Store, spec: Path, session: str) -> Runner:
    from support.checkpoint.bindings import BINDINGS as bound

    runner, _ = Runner.open(store, spec.read_text(), str(spec), session_id=session,
                            bindings=bound)
    return runner


def _post(root: Path, session: str, kind: str, message: str | None = None) -> Mailbox:
    mailbox = Mailbox(session_dir(root, session))
    mailbox.post(make_signal(kind, message=message, now=datetime.now(UTC)))
    return mailbox


def _events(root: Path, session: str) -> list[str | None]:
    entries = asyncio.run(runtime.log(session, root=root))
    return [e.event for e in entries if e.kind == "event"]


# -- polled, step by step (the consumer run inline, no threads) ---------------------------


def test_a_waiting_steer_is_taken_first_then_polled(tmp_path: Path) -> None:
    _post(tmp_path, "c1", "STEER", "use bar")
    store = open_store(None, tmp_path)
    runner = _open(store, CHECKPOINT, "c1")
    feed = SessionFeed(runner, open_store(None, tmp_path), session_dir(tmp_path, "c1"))
    try:
        assert runner.pump() == []  # the STEER waits, unscanned: no polled
        feed.consumer.run_once()  # delivers the STEER
        steps = runner.pump()  # nothing waits any more: polled follows at once
        assert [(s.event, s.after) for s in steps] == [("signal.STEER", ("checkpoint",)),
                                                       ("polled", ("done",))]
        assert runner.session.context["steers"] == ["use bar"]
    finally:
        feed.stop()
        feed.store.close()
        runner.close()
        store.close()


def test_a_signal_left_waiting_holds_polled_until_a_scan_after_the_step(tmp_path: Path
                                                                        ) -> None:
    """An APPROVE the checkpoint does not take stays in inputs/: the mailbox is not idle,
    so polled waits for a scan that started after the STEER's step (the STEER might have
    made the APPROVE acceptable)."""
    _post(tmp_path, "c2", "STEER", "use bar")
    _post(tmp_path, "c2", "APPROVE")
    store = open_store(None, tmp_path)
    runner = _open(store, CHECKPOINT, "c2")
    feed = SessionFeed(runner, open_store(None, tmp_path), session_dir(tmp_path, "c2"))
    try:
        feed.consumer.run_once()  # delivers the STEER; the APPROVE stays
        assert [s.event for s in runner.pump()] == ["signal.STEER"]
        assert runner.session.active == ("checkpoint",)  # no scan since the step
        feed.consumer.run_once()  # scanned after the STEER: nothing more for it
        steps = runner.pump()
        assert [(s.event, s.after) for s in steps] == [("polled", ("done",))]
        assert len(feed.mailbox.pending()) == 1  # the APPROVE, for whoever takes it
    finally:
        feed.stop()
        feed.store.close()
        runner.close()
        store.close()


def test_polled_is_raised_once_per_configuration(tmp_path: Path) -> None:
    store = open_store(None, tmp_path)
    runner = _open(store, HERE / "idle.yaml", "i1")  # no feed: no mailbox to wait for
    try:
        assert [s.event for s in runner.pump()] == ["polled"]
        assert runner.pump() == []  # same configuration: not again
        runner.send("leave")
        assert runner.pump() == []  # `away` has no polled transition
        runner.send("back")
        assert [s.event for s in runner.pump()] == ["polled"]
        assert runner.session.context["polls"] == 2
    finally:
        runner.close()
        store.close()


# -- polled through the façade (the consumer thread, the runner loop) ---------------------


def test_without_a_mailbox_a_checkpoint_still_advances(tmp_path: Path) -> None:
    done = asyncio.run(runtime.start(CHECKPOINT, session_id="n1", bindings=BINDINGS,
                                     signals=False, root=tmp_path))
    assert done.outcome == "finished" and done.active == ("done",)
    assert _events(tmp_path, "n1") == ["polled"]


def test_with_a_mailbox_the_checkpoint_advances_once_it_is_scanned(tmp_path: Path) -> None:
    done = asyncio.run(runtime.start(CHECKPOINT, session_id="m1", bindings=BINDINGS,
                                     root=tmp_path))
    assert done.outcome == "finished" and done.active == ("done",)
    assert _events(tmp_path, "m1") == ["polled"]


def test_a_waiting_steer_goes_before_polled_in_a_live_run(tmp_path: Path) -> None:
    mailbox = _post(tmp_path, "m2", "STEER", "use bar")
    done = asyncio.run(runtime.start(CHECKPOINT, session_id="m2", bindings=BINDINGS,
                                     root=tmp_path))
    assert done.outcome == "finished"
    assert _events(tmp_path, "m2") == ["signal.STEER", "polled"]
    info = asyncio.run(runtime.status("m2", root=tmp_path))
    assert info.context["steers"] == ["use bar"]
    assert mailbox.pending() == []


# -- accepts evaluates guards ----------------------------------------------------------


def test_accepts_evaluates_guards_on_a_copy_of_the_committed_context(tmp_path: Path) -> None:
    store = open_store(None, tmp_path)
    runner = _open(store, GATED, "g1")
    try:
        assert runner.accepts("make_ready")
        assert not runner.accepts("signal.APPROVE")  # its only transition: guard false
        assert not runner.accepts("no_such_event")
        assert runner.session.context["looked"] == 0  # the guard ran on a copy
        runner.send("make_ready")
        assert runner.accepts("signal.APPROVE")
        assert runner.session.context["looked"] == 0
    finally:
        runner.close()
        store.close()


def test_a_signal_guarded_false_stays_in_inputs_until_its_guard_holds(tmp_path: Path) -> None:
    mailbox = _post(tmp_path, "g2", "APPROVE")
    store = open_store(None, tmp_path)
    runner = _open(store, GATED, "g2")
    feed = SessionFeed(runner, open_store(None, tmp_path), session_dir(tmp_path, "g2"))
    try:
        feed.consumer.run_once()
        assert len(mailbox.pending()) == 1  # not taken: ready is false
        assert runner.pump() == [] and runner.session.active == ("waiting",)
        runner.send("make_ready")
        feed.consumer.run_once()  # after the step: the guard holds now
        assert mailbox.pending() == []
        assert [(s.event, s.after) for s in runner.pump()] == [
            ("signal.APPROVE", ("approved",))]
    finally:
        feed.stop()
        feed.store.close()
        runner.close()
        store.close()
