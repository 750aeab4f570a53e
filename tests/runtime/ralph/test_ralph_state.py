"""The typed Ralph state: the context models read the session's JSON dict and write it
back in the same shape (the journal's wire format), and usage is added up in one place."""

from __future__ import annotations

import copy
import doctest

import pytest
from pydantic import ValidationError

from interlock.machines import loads
from interlock.machines.bindings import Call
from interlock.runtime.engine.builtin_specs import builtin_spec_dir
from interlock.runtime.ralph import state as state_module
from interlock.runtime.ralph.state import (
    CallRecord,
    OrchestratorContext,
    Spend,
    SubagentContext,
    spent,
    typed,
)

CONTEXT = {
    "session_id": "s", "agent": "Ralph-Orchestrator", "iteration": 2, "batch": 0,
    "current_task": {"id": "T1", "title": "parse"}, "steer_messages": [None, "use bar"],
    "results": {"T1": {"status": "failed", "blockers": ["boom"]},
                "T2": {"status": "completed", "report": None, "blockers": []}},
    "replan": {"from": 1, "remaining": [{"id": "T1", "title": "parse"}], "blockers": []},
    "invocation": {"seq": 3, "role": "executor", "mode": "execute",
                   "task": {"id": "T1", "title": "parse"}, "iteration": 2, "steers": [],
                   "infos": ["i"], "brief": {}},
    "buffered": {"Ralph-Executor": [{"type": "STEER", "message": "m"}]},
    "knowledge_approval_timeout": "100ms", "something_else": {"kept": True},
}


def _spec_keys(name: str) -> set[str]:
    spec = loads((builtin_spec_dir() / f"{name}.yaml").read_text(encoding="utf-8"))
    return set(spec.context)


@pytest.mark.parametrize(("model", "spec"), [(OrchestratorContext, "ralph_orchestrator"),
                                             (SubagentContext, "ralph_subagent")])
def test_the_models_have_the_specs_keys(model: type, spec: str) -> None:
    assert set(model.model_fields) == _spec_keys(spec)


def test_a_context_is_written_back_in_its_own_shape() -> None:
    context = copy.deepcopy(CONTEXT)
    OrchestratorContext.read(context).write(context)
    for key, value in CONTEXT.items():  # nested values keep their keys, no more
        assert context[key] == value, key
    assert context["corrected"] == [] and context["input_tokens"] is None  # defaults


def test_an_action_on_the_typed_context() -> None:
    def take(c: Call, s: OrchestratorContext) -> None:
        s.corrected.append("T1")
        s.add_spend(Spend(cost_usd=0.5, input_tokens=10))

    context: dict[str, object] = {"iteration": 1}  # an old session: keys missing
    typed(OrchestratorContext, take)(Call("take", None, {}, context))
    assert context["corrected"] == ["T1"]
    assert (context["cost_usd"], context["input_tokens"], context["output_tokens"]) == (
        0.5, 10, None)


def test_a_wrong_value_is_refused() -> None:
    with pytest.raises(ValidationError, match="iteration"):
        OrchestratorContext.model_validate({"iteration": "two"})


def test_usage_is_added_once() -> None:
    calls = [CallRecord(usage={"inputTokens": 100, "outputTokens": 5, "costUsd": 0.25}),
             CallRecord(usage={}),  # a call a signal stopped
             CallRecord(usage={"inputTokens": None, "outputTokens": 7, "costUsd": 0.5})]
    assert spent(calls) == Spend(input_tokens=100, output_tokens=12, cost_usd=0.75)
    assert spent([]) == Spend()
    assert OrchestratorContext.spend_in({"cost_usd": 0.75}) == Spend(cost_usd=0.75)


def test_docstring_examples() -> None:
    result = doctest.testmod(state_module)
    assert result.attempted > 0 and result.failed == 0
