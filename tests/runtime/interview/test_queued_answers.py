"""QueuedAnswers: a review answered from another thread, as a web page does."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from interlock import runtime
from interlock.runtime.interview.driver import Aborted, NoAnswer
from interlock.runtime.interview.protocol import MENU, ProtocolError


def test_a_question_waits_for_its_answer_from_another_thread() -> None:
    answers = runtime.QueuedAnswers()
    got: list[object] = []
    asker = threading.Thread(target=lambda: got.append(
        answers.ask(MENU, session="m1", default=None, deadline=None)))
    asker.start()
    state = answers.wait_question(-1, 5)
    assert state["question"]["id"] == "menu" and state["question"]["session"] == "m1"
    with pytest.raises(ProtocolError):
        answers.answer("menu", "nonsense")
    with pytest.raises(ProtocolError):
        answers.answer("echo", "A")
    version = answers.answer("menu", "retry")
    asker.join(5)
    assert got == ["retry"]
    assert answers.state()["question"] is None
    assert answers.wait_question(version, 0.05)["question"] is None  # nothing new asked


def test_abort_and_deadline() -> None:
    answers = runtime.QueuedAnswers()
    threading.Timer(0.1, answers.abort).start()
    with pytest.raises(Aborted):
        answers.ask(MENU, session="m1", default=None, deadline=None)
    answers = runtime.QueuedAnswers()
    with pytest.raises(NoAnswer):
        answers.ask(MENU, session="m1", default=None, deadline=time.time() + 0.05)


def test_a_whole_review_through_queued_answers(tmp_path: Path) -> None:
    """The review menu answered question by question from another thread, as the page
    does: accept ends it, nothing staged."""
    answers = runtime.QueuedAnswers()
    outcome: list[runtime.Outcome] = []
    review = threading.Thread(target=lambda: outcome.append(runtime.review_blocking(
        "the output", "node_1", front=answers, root=tmp_path)))
    review.start()
    state = answers.wait_question(-1, 10)
    assert state["output"] == {"node": "node_1", "text": "the output"}
    answers.answer(state["question"]["id"], "accept")
    review.join(10)
    assert outcome[0].resolution == "accepted" and answers.over
    assert answers.state()["outcome"]["resolution"] == "accepted"
