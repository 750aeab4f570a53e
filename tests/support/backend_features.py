"""Behaviour every compile target must have, as tests taking a ``target`` fixture.

test_backend_statemachine.py and test_backend_transitions.py import these tests and
provide ``target``; each file adds what only its backend does (or refuses).
"""

from __future__ import annotations

import pytest

from interlock.machines import Call, UnboundNameError, compile, loads

from support.backend_helpers import build, config, start

SIMPLE = """
machine: door
initial: closed
states:
  closed:
    exit: [leave_closed]
    on: {open: {target: opened, actions: [swing]}}
  opened:
    entry: [arrive_opened]
    on: {close: closed}
"""


def test_atomic_transitions_and_initial_configuration(target: str) -> None:
    door, rec = start(SIMPLE, target)
    assert config(door) == ["closed"]
    door.send("open")
    assert config(door) == ["opened"]
    assert rec.names() == ["leave_closed", "swing", "arrive_opened"]
    door.send("close")
    assert config(door) == ["closed"]
    assert not door.is_terminated


def test_unhandled_and_unknown_events_are_ignored(target: str) -> None:
    door, rec = start(SIMPLE, target)
    door.send("close")          # declared, but not from `closed`
    door.send("no_such_event")  # never declared
    assert config(door) == ["closed"]
    assert rec.log == []


COMPOUND = """
machine: nest
initial: outer
states:
  outer:
    entry: [enter_outer]
    exit: [exit_outer]
    initial: first
    on: {reset: done}
    states:
      first:
        entry: [enter_first]
        exit: [exit_first]
        on: {next: second}
      second:
        entry: [enter_second]
  done: {type: final, entry: [enter_done]}
"""


def test_compound_enters_initial_child_and_reports_ancestors(target: str) -> None:
    m, rec = start(COMPOUND, target)
    assert config(m) == ["first", "outer"]
    assert rec.log == [("enter_outer", None, None, "outer"), ("enter_first", None, None, "first")]
    m.send("next")
    assert config(m) == ["outer", "second"]


def test_parent_transition_applies_in_child_and_exits_in_reverse_document_order(
    target: str,
) -> None:
    m, rec = start(COMPOUND, target)
    rec.log.clear()
    m.send("reset")
    assert rec.log == [
        ("exit_first", "reset", "first", None),
        ("exit_outer", "reset", "outer", None),
        ("enter_done", "reset", None, "done"),
    ]
    assert config(m) == ["done"]


def test_top_level_final_terminates_and_ignores_later_events(target: str) -> None:
    m, _ = start(COMPOUND, target)
    m.send("reset")
    assert m.is_terminated
    m.send("next")
    assert config(m) == ["done"]


NESTED_FINAL = """
machine: nested_final
initial: work
states:
  work:
    initial: busy
    on: {leave: out}
    states:
      busy: {on: {finish: finished}}
      finished: {type: final}
  out: {type: final}
"""


def test_final_state_inside_compound_does_not_terminate(target: str) -> None:
    m, _ = start(NESTED_FINAL, target)
    m.send("finish")
    assert config(m) == ["finished", "work"]
    assert not m.is_terminated
    m.send("leave")
    assert m.is_terminated


PARALLEL = """
machine: par
initial: both
states:
  both:
    type: parallel
    entry: [enter_both]
    on: {stop: end}
    states:
      left:
        initial: l1
        states:
          l1: {entry: [enter_l1], exit: [exit_l1], on: {l: l2}}
          l2: {entry: [enter_l2], exit: [exit_l2]}
      right:
        initial: r1
        states:
          r1: {entry: [enter_r1], exit: [exit_r1], on: {r: r2}}
          r2: {entry: [enter_r2], exit: [exit_r2]}
  end: {type: final}
"""


def test_parallel_enters_every_region_in_document_order(target: str) -> None:
    m, rec = start(PARALLEL, target)
    assert config(m) == ["both", "l1", "left", "r1", "right"]
    assert rec.names() == ["enter_both", "enter_l1", "enter_r1"]


def test_parallel_region_moves_alone(target: str) -> None:
    m, _ = start(PARALLEL, target)
    m.send("r")
    assert config(m) == ["both", "l1", "left", "r2", "right"]
    m.send("l")
    assert config(m) == ["both", "l2", "left", "r2", "right"]


def test_leaving_parallel_exits_every_region_in_reverse_document_order(target: str) -> None:
    m, rec = start(PARALLEL, target)
    m.send("r")
    rec.log.clear()
    m.send("stop")
    assert rec.names() == ["exit_r2", "exit_l1"]
    assert config(m) == ["end"]
    assert m.is_terminated


GUARDS = """
machine: guarded
initial: idle
states:
  idle:
    on:
      go:
        - {guard: fast, target: quick, actions: [took_fast]}
        - {guard: "!blocked", target: slow, actions: [took_slow]}
        - {actions: [refused]}
  quick: {on: {back: idle}}
  slow: {on: {back: idle}}
"""


@pytest.mark.parametrize(
    ("fast", "blocked", "expected", "action"),
    [
        (True, True, "quick", "took_fast"),
        (False, False, "slow", "took_slow"),
        (False, True, "idle", "refused"),
    ],
)
def test_candidates_are_tried_in_order_and_negated_guards_invert(
    target: str, fast: bool, blocked: bool, expected: str, action: str
) -> None:
    m, rec = start(GUARDS, target, guards={"fast": fast, "blocked": blocked})
    m.send("go")
    assert config(m) == [expected]
    assert rec.names() == [action]


SELF = """
machine: self_and_internal
initial: active
states:
  active:
    entry: [enter_active]
    exit: [exit_active]
    initial: inner
    on:
      tick: {actions: [count]}
      restart: {target: active, actions: [restarting]}
    states:
      inner:
        entry: [enter_inner]
        exit: [exit_inner]
        on:
          again: {target: inner, actions: [again]}
          move: other
      other: {}
"""


def test_targetless_transition_runs_actions_without_exit_or_entry(target: str) -> None:
    m, rec = start(SELF, target)
    m.send("move")
    rec.log.clear()
    m.send("tick")
    assert rec.log == [("count", "tick", "active", None)]
    assert config(m) == ["active", "other"]


def test_atomic_self_transition_exits_and_reenters(target: str) -> None:
    m, rec = start(SELF, target)
    rec.log.clear()
    m.send("again")
    assert rec.names() == ["exit_inner", "again", "enter_inner"]


def test_compound_self_transition_restarts_at_initial_child(target: str) -> None:
    m, rec = start(SELF, target)
    m.send("move")
    rec.log.clear()
    m.send("restart")
    assert rec.names() == ["exit_active", "restarting", "enter_active", "enter_inner"]
    assert config(m) == ["active", "inner"]


TIMERS = """
machine: timers
initial: waiting
states:
  waiting:
    after:
      30s: {target: late, actions: [too_late]}
      1m: gone
    on: {arrive: here}
  late: {on: {arrive: here}}
  here: {type: final}
  gone: {type: final}
"""


def test_after_transitions_are_timer_events(target: str) -> None:
    compiled, _ = build(TIMERS, target)
    assert compiled.ir.timer_events == ("after.waiting.0", "after.waiting.1")
    m = compiled.new()
    m.send("after.waiting.0")
    assert config(m) == ["late"]
    m.send("after.waiting.1")  # the timer of a state no longer active
    assert config(m) == ["late"]
    other = compiled.new()
    other.send("after.waiting.1")
    assert config(other) == ["gone"]


DOTTED = """
machine: dotted
initial: running
states:
  running:
    on:
      job.done: {target: finished, actions: [record]}
      job.failed: failed
  finished: {type: final}
  failed: {type: final}
"""


def test_dotted_event_matches_by_dotted_prefix(target: str) -> None:
    m, rec = start(DOTTED, target)
    m.send("job")            # shorter than the descriptor: no match
    m.send("job.donenot")    # not a token prefix: no match
    assert config(m) == ["running"]
    m.send("job.done.ok", code=0)
    assert config(m) == ["finished"]
    assert rec.log == [("record", "job.done.ok", "running", "finished")]
    assert rec.calls[0].data == {"code": 0}


def test_call_carries_data_context_source_and_target(target: str) -> None:
    seen: list[Call] = []

    def spy(call: Call) -> bool:
        seen.append(call)
        call.context["visits"] = call.context.get("visits", 0) + 1
        return True

    m, _ = start(GUARDS, target, extra={"fast": spy}, context={"who": "me"})
    # Keys that python-statemachine's send() would take for itself reach the binding intact.
    m.send("go", delay=5, event="x", source="s", internal=True, send_id="i")
    assert len(seen) == 1
    call = seen[0]
    assert (call.name, call.event, call.source, call.target) == ("fast", "go", "idle", "quick")
    assert dict(call.data) == {"delay": 5, "event": "x", "source": "s", "internal": True,
                               "send_id": "i"}
    assert m.context == {"who": "me", "visits": 1}
    assert config(m) == ["quick"]


CONTEXT = """
machine: counter
context:
  count: {type: int, default: 0}
  tags: {type: list, default: []}
initial: on
states:
  on: {on: {bump: {actions: [bump]}}}
"""


def test_context_starts_from_defaults_and_is_per_instance(target: str) -> None:
    def bump(call: Call) -> None:
        call.context["count"] += call.data.get("by", 1)
        call.context["tags"].append(call.event)

    compiled, _ = build(CONTEXT, target, extra={"bump": bump})
    a, b = compiled.new(), compiled.new({"count": 10})
    a.send("bump", by=2)
    b.send("bump")
    assert a.context == {"count": 2, "tags": ["bump"]}
    assert b.context == {"count": 11, "tags": ["bump"]}


RAISING = """
machine: raising
initial: a
states:
  a: {on: {go: {target: b, actions: [kick]}}}
  b: {on: {kicked: {target: c, actions: [note]}, later: {actions: [note]}}}
  c: {on: {later: {actions: [note]}}}
"""


def test_raised_events_run_before_the_next_external_event(target: str) -> None:
    def kick(call: Call) -> None:
        call.raise_event("kicked", why="test")

    m, rec = start(RAISING, target, extra={"kick": kick})
    m.send("go")
    assert config(m) == ["c"]
    assert rec.log == [("note", "kicked", "b", "c")]
    assert dict(rec.calls[0].data) == {"why": "test"}
    m.send("later")
    assert rec.log[-1] == ("note", "later", "c", None)


CLASHES = """
machine: clashes
initial: send
states:
  send:
    on: {events: configuration, send: states}
  configuration:
    initial: exit
    on: {on_enter_send: model}
    states:
      exit: {on: {name: initial}}
      initial: {on: {transitions: send}}
  states: {on: {configuration: model}}
  model: {type: final}
"""


def test_names_that_clash_with_library_attributes_work(target: str) -> None:
    m, _ = start(CLASHES, target)
    assert config(m) == ["send"]
    m.send("events")
    assert config(m) == ["configuration", "exit"]
    m.send("name")
    assert config(m) == ["configuration", "initial"]
    m.send("transitions")
    assert config(m) == ["send"]
    m.send("send")
    assert config(m) == ["states"]
    m.send("configuration")
    assert config(m) == ["model"]
    assert m.is_terminated


def test_binding_errors_propagate(target: str) -> None:
    def broken(call: Call) -> None:
        raise RuntimeError("boom")

    m, _ = start(SIMPLE, target, extra={"swing": broken})
    with pytest.raises(RuntimeError, match="boom"):
        m.send("open")


def test_unbound_names_compile_and_raise_when_reached(target: str) -> None:
    compiled = compile(loads(GUARDS, file="guards.yaml"), target)  # type: ignore[arg-type]
    m = compiled.new()
    with pytest.raises(UnboundNameError) as info:
        m.send("go")
    error = info.value
    assert (error.name, error.role.value) == ("fast", "guard")
    assert (error.mark.file, error.mark.line, error.mark.column) == ("guards.yaml", 8, 19)
    assert "guard 'fast' is not bound" in str(error)
    assert str(error).startswith("guards.yaml:8:19: guard ")


def test_instances_are_independent(target: str) -> None:
    compiled, _ = build(SIMPLE, target)
    a, b = compiled.new(), compiled.new()
    a.send("open")
    assert (config(a), config(b)) == (["opened"], ["closed"])
