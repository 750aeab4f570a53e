"""The python-statemachine backend: every IR feature, driven by YAML through loads()."""

from __future__ import annotations

import pytest
from statemachine import StateChart

from interlock.machines import Call, SpecError, UnboundNameError, build_ir, compile, loads
from interlock.machines.backends.statemachine import (
    StateChartInstance,
    compile_statemachine,
    native_state_id,
)

from support.backend_features import (  # noqa: F401  (shared tests, run here for this target)
    test_after_transitions_are_timer_events,
    test_atomic_self_transition_exits_and_reenters,
    test_atomic_transitions_and_initial_configuration,
    test_binding_errors_propagate,
    test_call_carries_data_context_source_and_target,
    test_candidates_are_tried_in_order_and_negated_guards_invert,
    test_compound_enters_initial_child_and_reports_ancestors,
    test_compound_self_transition_restarts_at_initial_child,
    test_context_starts_from_defaults_and_is_per_instance,
    test_dotted_event_matches_by_dotted_prefix,
    test_final_state_inside_compound_does_not_terminate,
    test_instances_are_independent,
    test_leaving_parallel_exits_every_region_in_reverse_document_order,
    test_names_that_clash_with_library_attributes_work,
    test_parallel_enters_every_region_in_document_order,
    test_parallel_region_moves_alone,
    test_parent_transition_applies_in_child_and_exits_in_reverse_document_order,
    test_raised_events_run_before_the_next_external_event,
    test_targetless_transition_runs_actions_without_exit_or_entry,
    test_top_level_final_terminates_and_ignores_later_events,
    test_unbound_names_compile_and_raise_when_reached,
    test_unhandled_and_unknown_events_are_ignored,
)
from support.backend_helpers import build, config, start


@pytest.fixture
def target() -> str:
    return "statemachine"


HISTORY = """
machine: player
initial: playing
states:
  playing:
    initial: intro
    on: {pause: paused}
    states:
      memory: {type: history, history: {depth}, default: verse}
      intro: {on: {next: verse}}
      verse:
        initial: line1
        on: {next: chorus}
        states:
          line1: {on: {line: line2}}
          line2: {}
      chorus: {}
  paused:
    on: {resume: memory}
"""


@pytest.mark.parametrize(
    ("depth", "expected"),
    [("shallow", ["line1", "playing", "verse"]), ("deep", ["line2", "playing", "verse"])],
)
def test_history_restores_what_was_active(depth: str, expected: list[str]) -> None:
    m, _ = start(HISTORY.replace("{depth}", depth))
    m.send("next")
    m.send("line")
    assert config(m) == ["line2", "playing", "verse"]
    m.send("pause")
    assert config(m) == ["paused"]
    m.send("resume")
    assert config(m) == expected


def test_history_takes_its_default_when_nothing_is_recorded() -> None:
    text = HISTORY.replace("{depth}", "shallow").replace("initial: playing", "initial: paused")
    m, _ = start(text)
    m.send("resume")
    assert config(m) == ["line1", "playing", "verse"]


ALWAYS = """
machine: router
initial: idle
states:
  idle: {on: {job: route}}
  route:
    entry: [routing]
    always:
      - {guard: urgent, target: fast, actions: [took_fast]}
      - {target: slow}
  fast: {}
  slow:
    always: {guard: "!waiting", target: done}
  done: {type: final}
"""


@pytest.mark.parametrize(
    ("urgent", "waiting", "expected"),
    [(True, False, ["fast"]), (False, True, ["slow"]), (False, False, ["done"])],
)
def test_eventless_transitions_run_to_completion(
    urgent: bool, waiting: bool, expected: list[str]
) -> None:
    m, rec = start(ALWAYS, guards={"urgent": urgent, "waiting": waiting})
    m.send("job")
    assert config(m) == expected
    assert rec.names()[0] == "routing"
    assert rec.log[-1][1] in ("job", None)


def test_one_event_in_two_regions_is_one_microstep() -> None:
    text = """
    machine: par
    initial: both
    states:
      both:
        type: parallel
        states:
          left:
            initial: l1
            states:
              l1: {exit: [exit_l1], on: {go: {target: l2, actions: [act_l]}}}
              l2: {entry: [enter_l2]}
          right:
            initial: r1
            states:
              r1: {exit: [exit_r1], on: {go: {target: r2, actions: [act_r]}}}
              r2: {entry: [enter_r2]}
    """
    m, rec = start(text)
    m.send("go")
    assert config(m) == ["both", "l2", "left", "r2", "right"]
    assert rec.names() == ["exit_r1", "exit_l1", "act_l", "act_r", "enter_l2", "enter_r2"]


def test_wildcard_event_descriptor() -> None:
    text = """
    machine: wild
    initial: a
    states:
      a: {on: {job.*: b}}
      b: {}
    """
    m, _ = start(text)
    m.send("jobs")
    assert config(m) == ["a"]
    m.send("job.anything.at.all")
    assert config(m) == ["b"]


def test_transition_to_descendant_is_external() -> None:
    text = """
    machine: ext
    initial: outer
    states:
      outer:
        entry: [enter_outer]
        exit: [exit_outer]
        initial: a
        on: {jump: b}
        states:
          a: {exit: [exit_a]}
          b: {entry: [enter_b]}
    """
    m, rec = start(text)
    rec.log.clear()
    m.send("jump")
    assert rec.names() == ["exit_a", "exit_outer", "enter_outer", "enter_b"]


def test_deep_nesting_enters_in_document_order() -> None:
    # python-statemachine numbers document_order per nesting level; interlock renumbers.
    text = """
    machine: deep
    initial: p
    states:
      p:
        type: parallel
        entry: [e_p]
        states:
          r1:
            entry: [e_r1]
            initial: x
            states:
              x:
                entry: [e_x]
                initial: x1
                states:
                  x1: {entry: [e_x1]}
          r2:
            entry: [e_r2]
            initial: z
            states:
              z: {entry: [e_z]}
    """
    _, rec = start(text)
    assert rec.names() == ["e_p", "e_r1", "e_x", "e_x1", "e_r2", "e_z"]


def test_native_is_a_statechart_with_prefixed_events_and_safe_state_ids() -> None:
    from support.backend_features import CLASHES

    compiled, _ = build(CLASHES)
    chart = compiled.native
    assert issubclass(chart, StateChart)
    assert compiled.target == "statemachine"
    assert {e.id for e in chart.events} >= {"ev_events", "ev_send", "ev_on_enter_send"}
    assert {e.name for e in chart.events} >= {"events", "send", "on_enter_send"}
    assert set(chart.states_map) == {"st:send", "st:configuration", "st:exit", "st:initial",
                                     "st:states", "st:model"}
    assert native_state_id("send") == "st:send"
    assert native_state_id("waiting") == "waiting"
    assert native_state_id("ev_poll") == "st:ev_poll"
    instance = compiled.new()
    assert isinstance(instance, StateChartInstance)
    assert isinstance(instance.native, chart)


def test_compiled_class_name_comes_from_machine_name() -> None:
    compiled, _ = build("""
    machine: polling_state
    initial: a
    states: {a: {}}
    """)
    assert compiled.native.__name__ == "PollingState"


def test_backend_refuses_final_state_with_transitions_when_lint_is_skipped() -> None:
    ir = build_ir(loads("machine: m\ninitial: a\nstates:\n  a: {type: final, on: {x: a}}\n",
                        file="f.yaml"))
    with pytest.raises(SpecError) as info:
        compile_statemachine(ir)
    assert [d.code for d in info.value.diagnostics] == ["M207"]


def test_compile_refuses_lint_errors() -> None:
    spec = loads("machine: m\ninitial: a\nstates:\n  a: {on: {go: nowhere}}\n", file="m.yaml")
    with pytest.raises(SpecError) as info:
        compile(spec)
    assert "M201" in {d.code for d in info.value.diagnostics}


def test_compile_lets_warnings_through() -> None:
    # `b` is unreachable: a warning (M205), not an error.
    compiled = compile(loads("machine: m\ninitial: a\nstates:\n  a: {}\n  b: {}\n"))
    assert config(compiled.new()) == ["a"]


def test_compile_rejects_unknown_targets() -> None:
    spec = loads("machine: m\ninitial: a\nstates:\n  a: {}\n")
    with pytest.raises(ValueError, match="statemachine, transitions"):
        compile(spec, "xstate")  # type: ignore[arg-type]


def test_compile_accepts_ir_and_partial_bindings_on_backend() -> None:
    ir = build_ir(loads("machine: m\ninitial: a\nstates:\n  a: {on: {go: {actions: [x, y]}}}\n"))
    seen: list[str] = []

    def x(call: Call) -> None:
        seen.append(call.name)

    m = compile_statemachine(ir, {"x": x}).new()
    with pytest.raises(UnboundNameError, match="transition action 'y'"):
        m.send("go")
    assert seen == ["x"]


CREW = """
machine: crew
initial: working
states:
  working:
    invoke: {id: work, agent: executor, prompt: "Task: {{ context.task }}", timeout: 10m}
    on:
      done.invoke.work: {target: reviewing, actions: [record]}
      error.invoke.work: failed
  reviewing:
    type: parallel
    on: {error.invoke: failed}
    states:
      security:
        initial: checking
        states:
          checking:
            invoke: {agent: reviewer}
            on: {done.invoke.checking: passed}
          passed: {type: final}
      style:
        initial: linting
        states:
          linting:
            invoke: {command: [ruff, check]}
            on: {done.invoke.linting: clean}
          clean: {type: final}
  failed: {type: final}
"""


def test_a_spec_with_invokes_compiles_and_hears_their_events() -> None:
    compiled, recorder = build(CREW)
    assert [i.id for i in compiled.ir.invokes] == ["work", "checking", "linting"]
    m = compiled.new()
    assert config(m) == ["working"]
    m.send("done.invoke.work", success=True)
    assert recorder.log == [("record", "done.invoke.work", "working", "reviewing")]
    assert recorder.calls[0].data == {"success": True}
    assert config(m) == ["checking", "linting", "reviewing", "security", "style"]
    m.send("done.invoke.checking")
    assert config(m) == ["linting", "passed", "reviewing", "security", "style"]
    m.send("done.invoke.work")  # its state was left: nothing listens any more
    assert config(m) == ["linting", "passed", "reviewing", "security", "style"]
    m.send("error.invoke.linting", reason="timeout")  # heard by the parallel state
    assert config(m) == ["failed"]


def test_an_invoke_failure_takes_the_error_transition() -> None:
    m, _ = start(CREW)
    m.send("error.invoke.work", reason="runner_lost")
    assert config(m) == ["failed"]


def test_one_chart_class_per_ir_and_each_instance_calls_its_own_bindings() -> None:
    ir = build_ir(loads("machine: m\ninitial: a\nstates:\n  a: {on: {go: {target: b, "
                        "actions: [act]}}}\n  b: {}\n", file="m.yaml"))
    seen: list[str] = []
    first = compile_statemachine(ir, {"act": lambda call: seen.append("first")})
    second = compile_statemachine(ir, {"act": lambda call: seen.append("second")})
    assert first.native is second.native  # built once for the IR
    unbound = compile_statemachine(ir, {})
    for compiled in (second, first):
        instance = compiled.new()
        instance.send("go")
        assert instance.configuration == {"b"}
    assert seen == ["second", "first"]
    with pytest.raises(UnboundNameError, match="'act' is not bound"):
        unbound.new().send("go")
    other = build_ir(loads("machine: m\ninitial: a\nstates:\n  a: {}\n", file="m.yaml"))
    assert compile_statemachine(other).native is not first.native  # another IR, its own class
