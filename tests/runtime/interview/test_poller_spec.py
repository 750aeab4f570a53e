"""specs/poller_interview.yaml around its invoke, fed the engine's own events by hand (no
runner, so no agent process): the poller's replies are checked by the question protocol's
parser, a reply out of shape is asked for again (a new invocation: asking_again, then
consulting) and then reported, and every error.invoke reason ends in a typed failure. The
same paths with real agent processes are in test_review.py and tests/cli."""

from __future__ import annotations

from typing import Any

import pytest

from interlock.machines import build_ir, compile, load
from interlock.runtime.engine.builtin_specs import resolve_spec
from interlock.runtime.engine.clock import ManualClock
from interlock.runtime.engine.session import Session
from interlock.runtime.interview.bindings import poller_bindings

DONE, ERROR = "done.invoke.poller", "error.invoke.poller"
CATEGORY = {"questions": [{"id": "whatever", "kind": "select", "prompt": "What's wrong?",
                           "options": [{"key": "A", "label": "Too shallow"},
                                       {"key": "B", "label": "Wrong facts"}]}]}
RADIO = {"questions": [{"id": "q1", "kind": "radio", "prompt": "Why"}]}


def start(**context: Any) -> Session:
    ir = build_ir(load(resolve_spec("poller_interview")))
    compiled = compile(ir, bindings=poller_bindings(lambda node, config: None))
    return Session.start(compiled, ManualClock(), {"trigger": "retry", **context})


def reply(session: Session, event: str, **data: Any) -> None:
    step = session.send(event, {"invocation": "i", **data}, internal=True)
    assert step.accepted, step.note


def test_the_interview_starts_with_the_agent_at_work_and_shows_its_question() -> None:
    session = start()
    assert session.active == ("interview", "consulting")
    assert session.context["stage"] == "category"
    reply(session, DONE, answer=CATEGORY)
    assert session.active == ("interview", "questions", "category_question")
    question = session.context["question"]
    assert (question["id"], question["back"]) == ("category", [])  # the top has no Back
    session.send("answer", {"answer": "B"})
    assert "consulting" in session.active and session.context["stage"] == "narrow"
    assert session.context["category"] == "Wrong facts"


def test_a_reply_out_of_shape_is_asked_for_again_then_reported() -> None:
    session = start()
    for attempt in (1, 2):
        reply(session, DONE, answer=RADIO)
        assert "asking_again" in session.active  # a state of its own: a new invocation
        assert session.context["attempts"] == attempt
        session.fire_due()  # retry_delay 0s, by the session clock
        assert "consulting" in session.active
    reply(session, DONE, answer=RADIO)
    assert session.active == ("failed",)
    failure = session.context["failure"]
    assert failure["reason"] == "invalid_answer"
    assert failure["message"].startswith(
        "the poller agent answered out of shape 3 times (category): the poller's answer is "
        "malformed at questions.0.kind")
    assert "radio" not in failure["message"]  # the raw reply is never shown


def test_a_reply_that_fits_resets_the_count() -> None:
    session = start()
    reply(session, ERROR, reason="invalid_answer", message="not a complete document")
    session.fire_due()
    reply(session, DONE, answer=CATEGORY)
    assert session.context["attempts"] == 0 and session.context["failure"] is None


@pytest.mark.parametrize("reason", ["spawn_error", "timeout", "exit_nonzero", "runner_lost"])
def test_an_agent_error_is_a_typed_failure_at_once(reason: str) -> None:
    session = start()
    reply(session, ERROR, reason=reason, message=f"what happened ({reason})",
          result={"stderr": "first\nthe last line of stderr\n"})
    assert session.active == ("failed",)
    failure = session.context["failure"]
    assert failure["reason"] == reason and "\n" not in failure["message"]
    assert failure["message"].startswith(f"the poller agent failed ({reason}, category): "
                                         f"what happened ({reason})")
    shown_stderr = "the last line of stderr" in failure["message"]
    assert shown_stderr == (reason == "exit_nonzero")


def test_an_interpretation_stage_wants_an_interpretation() -> None:
    session = start(max_attempts=1)
    reply(session, DONE, answer=CATEGORY)
    session.send("answer", {"answer": "A"})
    reply(session, DONE, answer={"questions": [{"id": "n", "kind": "text", "prompt": "More?"}]})
    session.send("answer", {"answer": "anything"})  # a text question: the section
    assert session.context["stage"] == "suggest"
    reply(session, DONE, answer=CATEGORY)  # a question where an interpretation is due
    assert session.active == ("failed",)
    assert "(suggest): the suggest reply holds no interpretation" in \
        session.context["failure"]["message"]


def test_abort_while_the_agent_works_ends_aborted() -> None:
    session = start()
    session.send("abort")
    assert session.active == ("aborted",)  # leaving consulting cancels the invocation
