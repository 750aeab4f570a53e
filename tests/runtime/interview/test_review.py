"""The review menu and the poller interview through the façade, answered by a script: the
seed's path, Back at every level, Not at all, and every way out (abort, timeout with an
injected clock, round limit, a poller that answers out of shape), config, route, accept."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import pytest

from interlock import runtime
from interlock.runtime.engine.clock import ManualClock
from interlock.runtime.interview.frontends import ScriptedAnswers
from interlock.runtime.interview.protocol import Question

from support.interview import SEED_ANSWERS, SEED_IDS, calls, gone, use_fake_poller

OUTPUT = "# Sprite sheet\nA design for 36 hex renders.\n"


def review(root: Path, answers: list[Any], **options: Any
           ) -> tuple[runtime.Outcome, ScriptedAnswers]:
    front = ScriptedAnswers(answers)
    outcome = runtime.review_blocking(OUTPUT, "node_14", front=front, root=root, **options)
    return outcome, front


def ids(front: ScriptedAnswers) -> list[str]:
    return [question.id for _, question, _ in front.asked]


def test_the_seed_path_stages_the_correction(tmp_path: Path) -> None:
    outcome, front = review(tmp_path, SEED_ANSWERS)
    assert (outcome.resolution, outcome.exit_code) == ("resolved", 0)
    assert ids(front) == SEED_IDS
    sessions = [session for session, _, _ in front.asked]
    assert sessions[0] == outcome.menu_id and set(sessions[1:]) == {"poller-14-001"}
    staged = runtime.sync.staged("node_14", root=tmp_path)
    assert staged == outcome.staged and staged is not None
    assert staged["action"] == "retry" and staged["poller_id"] == "poller-14-001"
    assert staged["corrections"] == [
        "Add a 'Performance' section: Performance benchmarks for the sprite sheet",
        "Focus on 36-hex render time specifically",
        "Give higher-level guidance, not exact numbers"]
    assert staged["context_additions"] == ["wiki/research/sprite-formats.md#performance"]
    assert set(staged) == {"action", "corrections", "context_additions", "resolved_at",
                           "poller_id"}
    poller = runtime.sync.status("poller-14-001", root=tmp_path)
    assert poller.status == "finished" and poller.active == ("resolved",)
    menu = runtime.sync.status(str(outcome.menu_id), root=tmp_path)
    assert menu.active == ("rerunning",)  # the unit re-runs with it; the menu is done
    log = runtime.sync.log("poller-14-001", root=tmp_path)
    done = "done.invoke.poller"  # the poller agent's reply: category, narrow, suggest, refine
    assert [e.event for e in log if e.kind == "event"] == [
        done, "answer", done, "answer", done, "close", "combination", "toggle", "toggle",
        "confirm", done, "correct"]
    assert [e.kind for e in log if e.kind in ("invoked", "cancelled", "interrupted")] == [
        "invoked"] * 4  # one agent per stage, each finished before its state was left


def test_back_at_every_level_keeps_the_answers(tmp_path: Path) -> None:
    answers = ["retry", "B", "<",        # category B, narrow: Back -> category again
               "A", "A", "B",            # category A, narrow A, echo: Back -> narrow
               "A", "X", "<",            # narrow A, echo: Close, Close menu: Back -> echo
               "X", "D", "<",            # Close, D, multi-select: Back -> Close menu
               "D", ["B", "C"], "A"]     # D, multi {B, C} confirmed, echo: Correct
    outcome, front = review(tmp_path, answers)
    asked = [(q.id, default) for _, q, default in front.asked]
    assert asked == [
        ("menu", None), ("category", None), ("narrow", None),
        ("category", "B"),              # Back: its answer is kept
        ("narrow", None), ("echo", None),
        ("narrow", "A"),                # echo Back: the question shown last, answer kept
        ("echo", None), ("close", None),
        ("echo", None),                 # Close menu Back: the same echo
        ("close", None), ("combination", None),
        ("close", "D"),                 # multi-select Back: the Close menu, D kept
        ("combination", None), ("echo", None)]
    assert outcome.resolution == "resolved"
    assert outcome.staged is not None and len(outcome.staged["corrections"]) == 3


def test_not_at_all_restarts_from_the_top(tmp_path: Path) -> None:
    outcome, front = review(tmp_path, ["retry", "A", "A", "Y", "C", "B", "A"])
    assert ids(front) == ["menu", "category", "narrow", "echo", "category", "narrow", "echo"]
    questions = [q for _, q, _ in front.asked]
    assert questions[1] == questions[4]  # the same question, the same id
    assert outcome.staged is not None
    assert outcome.staged["corrections"] == ["Add a 'Worked' section: Worked examples"]


def test_abort_stages_nothing(tmp_path: Path) -> None:
    outcome, _ = review(tmp_path, ["deepen", "A", "abort"])
    assert (outcome.resolution, outcome.exit_code, outcome.staged) == ("aborted", 3, None)
    assert runtime.sync.staged("node_14", root=tmp_path) is None
    menu = runtime.sync.status(str(outcome.menu_id), root=tmp_path)
    assert menu.active == ("reviewing",)  # back to the menu, nothing staged
    poller = runtime.sync.status("poller-14-001", root=tmp_path)
    assert poller.active == ("aborted",)


def test_running_out_of_answers_aborts(tmp_path: Path) -> None:
    outcome, _ = review(tmp_path, ["redirect"])
    assert outcome.resolution == "aborted"


def test_an_unanswered_question_times_out_by_the_clock(tmp_path: Path) -> None:
    clock = ManualClock()
    seen: list[float | None] = []

    def late(question: Question, deadline: float | None) -> None:
        seen.append(deadline)
        if question.id == "narrow":
            clock.advance(61)  # no answer for longer than the answer timeout

    front = ScriptedAnswers(["retry", "A", "!noanswer"], on_ask=late)
    outcome = runtime.review_blocking(OUTPUT, "node_14", front=front, root=tmp_path,
                                      clock=clock, answer_timeout=60)
    assert (outcome.resolution, outcome.exit_code) == ("timed_out", 4)
    assert seen[1] == 1_700_000_000.0 + 60  # the deadline each question waits for
    assert runtime.sync.staged("node_14", root=tmp_path) is None


def test_the_round_limit_ends_the_interview(tmp_path: Path) -> None:
    outcome, front = review(tmp_path, ["retry", "A", "A", "X", "A", "X", "A"], max_rounds=2)
    assert (outcome.resolution, outcome.exit_code) == ("round_limit", 5)
    assert ids(front) == ["menu", "category", "narrow", "echo", "close", "echo", "close"]
    assert runtime.sync.staged("node_14", root=tmp_path) is None


def test_accept_route_and_config(tmp_path: Path) -> None:
    outcome, _ = review(tmp_path, ["accept"])
    assert (outcome.resolution, outcome.exit_code) == ("accepted", 0)
    assert runtime.sync.status(str(outcome.menu_id), root=tmp_path).active == ("accepted",)
    outcome, _ = review(tmp_path, ["route", "node_15"])
    menu = runtime.sync.status(str(outcome.menu_id), root=tmp_path)
    assert outcome.resolution == "routed" and menu.context["routed_to"] == "node_15"
    outcome, _ = review(tmp_path, ["config", "opus", "claude", "Read, Grep"])
    assert outcome.resolution == "configured"
    staged = runtime.sync.consume_staged("node_14", root=tmp_path)
    assert staged is not None and outcome.staged == staged
    assert (staged["action"], staged["model"], staged["harness"], staged["tools"]) == (
        "config", "opus", "claude", ["Read", "Grep"])
    assert runtime.sync.consume_staged("node_14", root=tmp_path) is None


def test_a_poller_that_answers_out_of_shape_is_retried_then_reported(tmp_path: Path) -> None:
    script = tmp_path / "bad_poller.py"
    # Count the call before answering: the answer ends in the "..." end marker, and the
    # dispatcher may stop the agent as soon as it has read it.
    script.write_text("import sys\nsys.stdin.read()\n"
                      "with open('calls', 'a') as calls:\n    calls.write('x')\n"
                      "print('questions:\\n- {id: q1, kind: radio, prompt: Why}\\n...',"
                      " flush=True)\n")
    (tmp_path / "interlock.yaml").write_text(
        f"agents:\n  poller: {{cli: command, command: [{sys.executable}, {script}], "
        f"cwd: {tmp_path}}}\n")
    outcome, front = review(tmp_path, ["retry", "A"])
    assert (outcome.resolution, outcome.exit_code) == ("failed", 1)
    assert outcome.message is not None and "\n" not in outcome.message
    assert "out of shape 3 times" in outcome.message and "kind" in outcome.message
    assert (tmp_path / "calls").read_text() == "xxx"  # asked again, then reported
    assert ids(front) == ["menu"]  # never shown raw


def test_a_poller_agent_that_fails_ends_the_interview_failed(tmp_path: Path) -> None:
    calls_file = use_fake_poller(tmp_path, "--fail", "narrow")  # exits 3 at the 2nd call
    outcome, front = review(tmp_path, ["retry", "A"])
    assert (outcome.resolution, outcome.exit_code, outcome.staged) == ("failed", 1, None)
    assert outcome.message is not None and "\n" not in outcome.message
    assert "(exit_nonzero, narrow)" in outcome.message and "boom" in outcome.message
    assert ids(front) == ["menu", "category"]
    assert [stage for stage, _ in calls(calls_file)] == ["category", "narrow"]  # not retried
    assert all(gone(pid) for _, pid in calls(calls_file))
    poller = runtime.sync.status("poller-14-001", root=tmp_path)
    assert poller.active == ("failed",)
    assert poller.context["failure"]["reason"] == "exit_nonzero"
    menu = runtime.sync.status(str(outcome.menu_id), root=tmp_path)
    assert menu.active == ("reviewing",)  # back to the menu, nothing staged


def test_a_poller_agent_that_cannot_start_is_a_spawn_error(tmp_path: Path) -> None:
    (tmp_path / "interlock.yaml").write_text(
        f"agents:\n  poller: {{cli: command, command: [{tmp_path / 'no-such-agent'}]}}\n")
    outcome, front = review(tmp_path, ["redirect"])
    assert (outcome.resolution, outcome.exit_code) == ("failed", 1)
    assert outcome.message is not None and "(spawn_error, category)" in outcome.message
    assert ids(front) == ["menu"]


def test_an_agent_named_with_agent_plays_the_poller_and_is_kept_for_resume(
        tmp_path: Path) -> None:
    use_fake_poller(tmp_path)
    text = (tmp_path / "interlock.yaml").read_text().replace("  poller:", "  asker:")
    (tmp_path / "interlock.yaml").write_text(text)

    class Killed(Exception):
        pass

    def die(question: Question, deadline: float | None) -> None:
        if question.id == "echo":
            raise Killed  # the process dies at the first echo

    with pytest.raises(Killed):
        runtime.review_blocking(OUTPUT, "node_14", root=tmp_path, agent="asker",
                                front=ScriptedAnswers(SEED_ANSWERS, on_ask=die))
    assert runtime.sync.status("poller-14-001", root=tmp_path).context["agent"] == "asker"
    outcome = runtime.resume_blocking("poller-14-001", answers=SEED_ANSWERS[3:], root=tmp_path)
    assert outcome.resolution == "resolved"
    assert [stage for stage, _ in calls(tmp_path / "calls")] == [
        "category", "narrow", "suggest", "refine"]  # asker again after the resume
    with pytest.raises(runtime.UsageError, match="no agent 'nobody'"):
        review(tmp_path, ["retry"], agent="nobody")


def test_resume_asks_the_next_unanswered_question(tmp_path: Path) -> None:
    class Killed(Exception):
        pass

    def die(question: Question, deadline: float | None) -> None:
        if question.id == "close":
            raise Killed  # the process dies here; every answer so far is committed

    with pytest.raises(Killed):
        runtime.review_blocking(OUTPUT, "node_14", root=tmp_path,
                                front=ScriptedAnswers(SEED_ANSWERS, on_ask=die))
    front = ScriptedAnswers(SEED_ANSWERS[4:])
    outcome = runtime.resume_blocking("poller-14-001", front=front, root=tmp_path)
    assert ids(front) == SEED_IDS[4:]
    assert outcome.resolution == "resolved" and outcome.staged is not None
    other = tmp_path / "uninterrupted"
    other.mkdir()
    whole, _ = review(other, SEED_ANSWERS)
    assert whole.staged is not None
    assert {**outcome.staged, "resolved_at": ""} == {**whole.staged, "resolved_at": ""}
    menu = runtime.sync.status(str(outcome.menu_id), root=tmp_path)
    assert menu.active == ("rerunning",)


def test_resume_of_an_unknown_interview_is_not_found(tmp_path: Path) -> None:
    with pytest.raises(runtime.NotFound):
        runtime.resume_blocking("poller-9-001", answers=[], root=tmp_path)


def test_the_unit_consumes_a_staged_correction_into_its_prompt(tmp_path: Path) -> None:
    node = runtime.task_node("ralph-1a2b", "T3")
    assert node == "ralph-1a2b-T3"
    runtime.review_blocking(OUTPUT, node, answers=SEED_ANSWERS, root=tmp_path)
    config = runtime.sync.consume_staged(node, root=tmp_path)
    assert config is not None and runtime.sync.consume_staged(node, root=tmp_path) is None
    prompt = runtime.staged_prompt(config)
    assert prompt.startswith("Previous output was corrected by the player (action: retry")
    assert "Correction: Focus on 36-hex render time specifically" in prompt
    assert "Additional context: wiki/research/sprite-formats.md#performance" in prompt


def test_json_lines_time_out_by_the_clock_and_eof_aborts(tmp_path: Path) -> None:
    import io
    import json
    import os

    clock = ManualClock()

    class Screen(io.StringIO):
        def write(self, text: str) -> int:
            if '"id": "narrow"' in text:
                clock.advance(120)  # the player walks away at the narrowing question
            return super().write(text)

    read, write = os.pipe()
    os.write(write, b'{"id": "menu", "answer": "retry"}\n{"id": "category", "answer": "A"}\n')
    out = Screen()
    with os.fdopen(read) as stdin:
        front = runtime.JsonLines(stdin=stdin, stdout=out, clock=clock)
        outcome = runtime.review_blocking(OUTPUT, "node_14", front=front, root=tmp_path,
                                          clock=clock, answer_timeout=60)
        os.close(write)
    assert (outcome.resolution, outcome.exit_code) == ("timed_out", 4)
    last = json.loads(out.getvalue().splitlines()[-1])
    assert last == {"resolution": "timed_out", "poller_id": "poller-14-001", "staged": None}

    read, write = os.pipe()
    os.close(write)  # EOF at once: abort
    with os.fdopen(read) as stdin:
        front = runtime.JsonLines(stdin=stdin, stdout=io.StringIO())
        assert runtime.review_blocking(OUTPUT, "node_15", front=front,
                                       root=tmp_path).resolution == "aborted"
