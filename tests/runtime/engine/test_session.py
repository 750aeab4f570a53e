"""Session core: stepping, timers on an injected clock, snapshot and restore."""

from __future__ import annotations

import doctest
import json
from collections import Counter
from typing import Any

import pytest
from freezegun import freeze_time

from interlock.machines import Call, compile, loads
from interlock.machines.backends.base import CompiledMachine
from interlock.runtime.engine import session as session_module
from interlock.runtime.engine import snapshot as snapshot_module
from interlock.runtime.engine.clock import ManualClock, SystemClock
from interlock.runtime.engine.session import Session, SessionError
from interlock.runtime.engine.snapshot import Snapshot, SnapshotError

KETTLE = """
machine: kettle
initial: idle
context:
  boil_time: {type: duration, default: 3m}
  boiled: {type: int, default: 0}
states:
  idle:
    on: {switch_on: heating}
  heating:
    entry: [count_entry]
    after:
      boil_time: {target: boiled, actions: [note_boiled]}
      10s: {target: heating, guard: "!lid_closed"}
    on:
      switch_off: idle
      stir: heating
  boiled:
    type: final
"""


def kettle(calls: Counter[str] | None = None, lid_closed: bool = True) -> CompiledMachine:
    calls = calls if calls is not None else Counter()

    def count(name: str) -> Any:
        def action(call: Call) -> None:
            calls[name] += 1
        return action

    def note_boiled(call: Call) -> None:
        call.context["boiled"] += 1

    return compile(loads(KETTLE), bindings={
        "count_entry": count("heating"), "note_boiled": note_boiled,
        "lid_closed": lambda call: lid_closed,
    })


def roundtrip(session: Session) -> Snapshot:
    return Snapshot.from_json(json.loads(json.dumps(session.snapshot().to_json())))


def test_entering_a_timed_state_arms_its_timers_with_absolute_deadlines() -> None:
    clock = ManualClock()
    session = Session.start(kettle(), clock)
    assert session.timers == ()
    session.send("switch_on")
    deadlines = {t.event: t.deadline - clock.now() for t in session.timers}
    assert deadlines == {"after.heating.0": 180.0, "after.heating.1": 10.0}


def test_a_timer_fires_once_at_its_deadline_and_not_before() -> None:
    clock = ManualClock()
    session = Session.start(kettle(), clock)
    session.send("switch_on")
    clock.advance(179.9)
    steps = session.fire_due()
    assert [s.event for s in steps] == ["after.heating.1"]  # the 10s one, guard false
    assert session.active == ("heating",)
    clock.advance(0.1)
    steps = session.fire_due()
    assert [(s.kind, s.event, s.after) for s in steps] == [("timer", "after.heating.0",
                                                             ("boiled",))]
    assert session.context["boiled"] == 1
    assert session.fire_due() == []


def test_leaving_a_state_cancels_its_timers_and_reentry_restarts_them() -> None:
    clock = ManualClock()
    session = Session.start(kettle(), clock)
    session.send("switch_on")
    clock.advance(100)
    step = session.send("stir")  # heating -> heating: exit and re-enter
    assert set(step.cancelled) == {"after.heating.0", "after.heating.1"}
    assert {t.event: t.deadline for t in session.timers}["after.heating.0"] == clock.now() + 180
    session.send("switch_off")
    assert session.timers == ()
    clock.advance(1000)
    assert session.fire_due() == []


def test_unaccepted_event_is_rejected_and_changes_nothing() -> None:
    session = Session.start(kettle(), ManualClock())
    step = session.send("stir")
    assert step.kind == "rejected" and not step.accepted
    assert step.before == step.after == ("idle",)


def test_reserved_timer_events_cannot_be_sent_from_outside() -> None:
    clock = ManualClock()
    session = Session.start(kettle(), clock)
    session.send("switch_on")
    step = session.send("after.heating.0")  # would boil at once
    assert step.kind == "rejected" and "reserved" in (step.note or "")
    assert session.active == ("heating",) and session.context["boiled"] == 0


def test_restore_does_not_rerun_entry_actions_and_keeps_timers() -> None:
    calls: Counter[str] = Counter()
    clock = ManualClock()
    session = Session.start(kettle(calls), clock)
    session.send("switch_on")
    saved = roundtrip(session)
    assert calls["heating"] == 1
    restored = Session.restore(kettle(calls), clock, saved)
    assert calls["heating"] == 1
    assert restored.active == ("heating",)
    assert restored.timers == session.timers


def test_after_3m_fires_once_at_the_right_moment_across_a_restart() -> None:
    with freeze_time("2026-11-23 10:00:00") as frozen:
        clock = SystemClock()
        first = Session.start(kettle(), clock)
        first.send("switch_on")
        saved = roundtrip(first)
        del first  # the runner died
        frozen.tick(120)
        second = Session.restore(kettle(), clock, saved)
        assert [s.event for s in second.fire_due()] == ["after.heating.1"]
        frozen.tick(59)
        assert second.fire_due() == []
        saved = roundtrip(second)
        frozen.tick(1)
        third = Session.restore(kettle(), clock, saved)
        fired = third.fire_due()
        assert [s.event for s in fired] == ["after.heating.0"]
        assert third.active == ("boiled",) and third.context["boiled"] == 1
        frozen.tick(600)
        assert third.fire_due() == []
        fourth = Session.restore(kettle(), clock, roundtrip(third))
        assert fourth.is_final
        assert fourth.send("switch_on").kind == "rejected"


def test_a_timer_that_fell_due_while_down_fires_once_on_resume() -> None:
    clock = ManualClock()
    session = Session.start(kettle(lid_closed=False), clock)
    session.send("switch_on")
    saved = roundtrip(session)
    clock.advance(3600)
    restored = Session.restore(kettle(lid_closed=False), clock, saved)
    events = [s.event for s in restored.fire_due()]
    # Both were due; the soonest (10s) fires first and re-enters heating, which re-arms
    # both from now: the stale 3m deadline never fires.
    assert events == ["after.heating.1"]
    assert restored.active == ("heating",)


def test_history_memory_survives_a_snapshot() -> None:
    spec = """
machine: player
initial: playing
states:
  playing:
    initial: intro
    states:
      intro: {on: {next: verse}}
      verse: {on: {next: chorus}}
      chorus: {}
      resume_here: {type: history, default: intro}
    on: {pause: paused}
  paused:
    on: {play: resume_here}
"""
    machine = compile(loads(spec))
    session = Session.start(machine, ManualClock())
    session.send("next")
    session.send("pause")
    restored = Session.restore(machine, ManualClock(), roundtrip(session))
    restored.send("play")
    assert restored.active == ("playing", "verse")


def test_delay_from_a_context_field_that_is_not_a_duration_is_a_clear_error() -> None:
    session = Session.start(kettle(), ManualClock(), {"boil_time": "soon"})
    with pytest.raises(SessionError, match=r"cannot arm `after: boil_time`.*'soon'"):
        session.send("switch_on")


def test_context_that_is_not_json_cannot_be_snapshotted() -> None:
    session = Session.start(kettle(), ManualClock())
    session.context["boiled"] = object()
    with pytest.raises(SnapshotError, match="context field 'boiled' cannot be saved"):
        session.snapshot().to_json()


def test_snapshots_from_a_newer_interlock_are_refused() -> None:
    data = Session.start(kettle(), ManualClock()).snapshot().to_json()
    data["version"] = 99
    with pytest.raises(SnapshotError, match="newer than this interlock"):
        Snapshot.from_json(data)


def test_older_snapshots_are_migrated(monkeypatch: pytest.MonkeyPatch) -> None:
    data = Session.start(kettle(), ManualClock()).snapshot().to_json()

    def v1_to_v2(old: dict[str, Any]) -> dict[str, Any]:
        return {**old, "context": {**old["context"], "migrated": True}}

    monkeypatch.setattr(snapshot_module, "SNAPSHOT_VERSION", 2)
    monkeypatch.setitem(snapshot_module.MIGRATIONS, 1, v1_to_v2)
    assert Snapshot.from_json(data).context["migrated"] is True


def test_a_context_is_copied_deep_and_whole() -> None:
    """The copy a step rolls back to, or a guard reads: nothing shared with the original,
    types kept; what pickle cannot copy is deep-copied instead."""
    result = doctest.testmod(session_module)
    assert result.attempted > 0 and result.failed == 0
    context = {"tasks": [{"id": "T1", "tags": ["a"]}], "pair": (1, 2), "n": 1.5}
    twin = session_module.copied(context)
    twin["tasks"][0]["tags"].append("b")
    assert context["tasks"][0]["tags"] == ["a"] and twin["pair"] == (1, 2)
    odd = {"f": lambda: 1}  # not picklable: deepcopy keeps the same function
    assert session_module.copied(odd)["f"] is odd["f"]
