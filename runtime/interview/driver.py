"""One interview machine, any front end: the loop that shows questions and sends answers.

The review menu and the poller interview are real sessions of ``review_menu`` and
``poller_interview`` (journaled in the store, each with its own id), stepped here in the
caller's thread. After every step the session's ``context.question`` is the question on
screen; the front end returns an answer (or raises :class:`Aborted` / :class:`NoAnswer`)
and :func:`answer_events` turns it into the machine's events. Killed half-way, the poller
session is where its last committed step left it: :func:`resume_interview` asks the next
unanswered question with the earlier answers kept.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, Protocol

from interlock.machines.bindings import Bindings
from interlock.runtime.engine.clock import Clock, SystemClock
from interlock.runtime.engine.context import SessionContext, with_session
from interlock.runtime.engine.runner import Runner
from interlock.runtime.interview.bindings import menu_bindings, new_poller_id, poller_bindings
from interlock.runtime.interview.poller import Poller
from interlock.runtime.interview.protocol import (
    CLOSE_EVENTS,
    ECHO_EVENTS,
    ISSUES,
    MENU,
    AnswerValue,
    Option,
    ProtocolError,
    Question,
)
from interlock.runtime.store import SessionNotFound, Store

Resolution = Literal["resolved", "aborted", "timed_out", "round_limit", "accepted",
                     "configured", "routed", "failed"]
FINAL_RESOLUTIONS: tuple[str, ...] = ("resolved", "aborted", "timed_out", "round_limit")
EXIT_CODES: dict[str, int] = {"resolved": 0, "accepted": 0, "configured": 0, "routed": 0,
                              "failed": 1, "aborted": 3, "timed_out": 4, "round_limit": 5}
HARNESSES = ("claude", "codex", "opencode", "gemini", "command", "demo")


class Aborted(Exception):
    """The player aborted (Esc, Ctrl-C, EOF on stdin)."""


class NoAnswer(Exception):
    """No answer came before the question's deadline."""


class FrontEnd(Protocol):
    def show_output(self, node: str, text: str) -> None:
        """Show the unit's output before the menu."""

    def ask(self, question: Question, *, session: str, default: AnswerValue | None,
            deadline: float | None) -> AnswerValue:
        """An answer that fits ``question`` (or one of its ``back`` keys); Aborted or
        NoAnswer (``deadline``: wall-clock seconds by the session clock)."""

    def finish(self, outcome: Outcome) -> None:
        """The interview is over."""


@dataclass(frozen=True)
class Outcome:
    """How a review ended: ``resolution`` (its exit code in :data:`EXIT_CODES`), the
    poller's id when one was forked, what was staged (None: nothing)."""

    resolution: Resolution
    poller_id: str | None = None
    staged: Mapping[str, Any] | None = None
    menu_id: str | None = None
    message: str | None = None
    answers: Mapping[str, Any] = field(default_factory=dict)

    @property
    def exit_code(self) -> int:
        return EXIT_CODES[self.resolution]

    def to_json(self) -> dict[str, Any]:
        shown: dict[str, Any] = {"resolution": self.resolution, "poller_id": self.poller_id,
                                 "staged": dict(self.staged) if self.staged else None}
        if self.message:
            shown["message"] = self.message
        return shown


@dataclass
class Machines:
    """Where the specs are and how sessions are stepped."""

    store: Store
    root: Path
    poller: Poller
    clock: Clock = field(default_factory=SystemClock)
    ttl: float = 3600.0

    def stage(self, node: str, config: dict[str, Any]) -> None:
        self.store.stage_config(node, config, self.clock.now())

    def open(self, spec: str, session_id: str, bindings: Bindings,
             context: Mapping[str, Any] | None = None) -> Runner:
        """A runner holding the session: created with ``context``, or (None) resumed."""
        from interlock.runtime.builtin.specs import resolve_spec
        from interlock.runtime.signals.session_feed import session_dir

        path = resolve_spec(spec)
        text = path.read_text(encoding="utf-8") if context is not None else None
        folder = session_dir(self.root, session_id)
        bound = with_session(bindings, SessionContext.of(session_id, folder, self.clock))
        runner, _ = Runner.open(self.store, text, str(path), session_id=session_id,
                                bindings=bound, clock=self.clock, context=context,
                                ttl=self.ttl)
        return runner

    def taken(self, session_id: str) -> bool:
        try:
            self.store.get(session_id)
        except SessionNotFound:
            return False
        return True


# -- answers -> events -------------------------------------------------------------------


def answer_events(state: str, question: Question, answer: AnswerValue,
                  ticked: list[str]) -> list[tuple[str, dict[str, Any]]]:
    """The ``poller_interview`` events one answer to the question of ``state`` sends."""
    if question.is_back(answer):
        return [("back", {})]
    if state == "echo":
        return [(ECHO_EVENTS[str(answer)], {"answer": answer})]
    if state == "close_menu":
        return [(CLOSE_EVENTS[str(answer)], {"answer": answer})]
    if state == "multi_select":
        wanted = [ISSUES[k] for k in answer] if isinstance(answer, list) else []
        toggles = [i for i in ticked if i not in wanted] + [i for i in wanted if i not in ticked]
        return [*(("toggle", {"issue": i}) for i in toggles), ("confirm", {})]
    return [("answer", {"answer": answer})]


def _default(state: str, question: Question, context: Mapping[str, Any]) -> AnswerValue | None:
    if state == "multi_select":
        keys = [k for k, v in ISSUES.items() if v in (context.get("selected_issues") or [])]
        return keys or None
    found = (context.get("answers") or {}).get(question.id)
    return found if isinstance(found, str | list) else None


QUESTION_STATES = ("category_question", "narrow_question", "close_menu", "multi_select", "echo")


def _state(runner: Runner) -> str:
    return next((s for s in runner.session.active if s in QUESTION_STATES), "")


def drive_interview(runner: Runner, front: FrontEnd) -> Outcome:
    """Ask until the poller session is final; returns its outcome (no ``finish`` call)."""
    from interlock.runtime.engine.faults import StepFailed

    try:
        while not runner.session.is_final:
            ctx = runner.session.context
            question = Question.model_validate(ctx["question"])
            state = _state(runner)
            try:
                answer = front.ask(question, session=runner.session_id,
                                   default=_default(state, question, ctx),
                                   deadline=runner.session.next_deadline())
            except NoAnswer:
                runner.pump()  # the idle timer fires once its deadline has passed
                continue
            except Aborted:
                runner.send("abort")
                break
            answer = question.check(answer)
            for event, data in answer_events(state, question, answer,
                                             list(ctx.get("selected_issues") or [])):
                runner.send(event, data)
    except StepFailed as exc:
        return Outcome("failed", runner.session_id, None, message=str(exc))
    ctx = runner.session.context
    final = next((s for s in runner.session.active if s in FINAL_RESOLUTIONS), "aborted")
    node = str(ctx.get("source_node") or "")
    staged = (ctx.get("staged_configs") or {}).get(node) if final == "resolved" else None
    return Outcome(final, runner.session_id, staged,  # type: ignore[arg-type]
                   answers=dict(ctx.get("answers") or {}))


# -- the review menu ---------------------------------------------------------------------

ROUTE = Question(id="route", kind="text", prompt="Send the output to which node?")
MODEL = Question(id="model", kind="text", prompt="Model (e.g. sonnet, gpt-5):")
HARNESS = Question(id="harness", kind="select", prompt="Harness:",
                   options=tuple(Option(key=h, label=h) for h in HARNESSES))
TOOLS = Question(id="tools", kind="text",
                 prompt="Tools, comma-separated (or - for the harness's defaults):")


def _ask(front: FrontEnd, question: Question, session: str) -> AnswerValue:
    while True:
        answer = front.ask(question, session=session, default=None, deadline=None)
        try:
            return question.check(answer)
        except ProtocolError:
            continue


@dataclass(frozen=True)
class ReviewRequest:
    """What to review: a node's output (text), and the unit that owns the node."""

    node: str
    output: str
    unit: str = ""
    max_rounds: int = 8
    idle_timeout: float = 600.0
    menu_id: str | None = None


def review(request: ReviewRequest, front: FrontEnd, machines: Machines) -> Outcome:
    """Show the output, then the menu; fork the poller on retry, deepen or redirect."""
    import uuid

    menu_id = request.menu_id or f"review-{request.node}-{uuid.uuid4().hex[:6]}"
    forked: list[str] = []

    def fork(call: Any) -> str:
        forked.append(new_poller_id(request.node, machines.taken))
        return forked[-1]

    menu = machines.open("review_menu", menu_id, menu_bindings(machines.stage, fork),
                         {"node_id": request.node, "unit": request.unit,
                          "output": request.output})
    try:
        front.show_output(request.node, request.output)
        try:
            choice = str(_ask(front, MENU, menu_id))
            outcome = _menu_choice(choice, request, front, machines, menu)
        except Aborted:
            outcome = Outcome("aborted", None, None)
    finally:
        menu.close()
    outcome = Outcome(outcome.resolution, outcome.poller_id, outcome.staged, menu_id,
                      outcome.message, outcome.answers)
    front.finish(outcome)
    return outcome


def _menu_choice(choice: str, request: ReviewRequest, front: FrontEnd, machines: Machines,
                 menu: Runner) -> Outcome:
    node = request.node
    if choice == "accept":
        menu.send("accept")
        return Outcome("accepted")
    if choice == "route":
        menu.send("route")
        target = str(_ask(front, ROUTE, menu.session_id))
        menu.send("routed", {"node": target})
        return Outcome("routed")
    if choice == "config":
        menu.send("config")
        model = str(_ask(front, MODEL, menu.session_id))
        harness = str(_ask(front, HARNESS, menu.session_id))
        tools = str(_ask(front, TOOLS, menu.session_id))
        menu.send("config_selected", {
            "model": model, "harness": harness,
            "tools": [t.strip() for t in tools.split(",") if t.strip() and t.strip() != "-"]})
        return Outcome("configured", None, menu.session.context["staged_configs"].get(node))
    from interlock.runtime.engine.faults import StepFailed

    menu.send(choice)
    poller_id = str(menu.session.context["poller_id"])
    try:
        poller = machines.open("poller_interview", poller_id,
                               poller_bindings(machines.poller, machines.stage),
                               {"trigger": choice, "source_node": node, "unit": request.unit,
                                "poller_id": poller_id, "output": request.output,
                                "max_rounds": request.max_rounds,
                                "idle_timeout": request.idle_timeout,
                                "menu_session": menu.session_id})
    except StepFailed as exc:  # the first question could not be had from the agent
        menu.send("aborted")
        return Outcome("failed", poller_id, None, message=str(exc))
    try:
        outcome = drive_interview(poller, front)
    finally:
        poller.close()
    if outcome.resolution != "failed":
        menu.send("resolved" if outcome.resolution == "resolved" else "aborted")
    return outcome


def resume_interview(poller_id: str, front: FrontEnd, machines: Machines) -> Outcome:
    """Continue a poller interview where its last committed step left it, then tell its
    review menu how it ended."""
    poller = machines.open("poller_interview", poller_id,
                           poller_bindings(machines.poller, machines.stage))
    try:
        outcome = drive_interview(poller, front)
        menu_id = str(poller.session.context.get("menu_session") or "")
    finally:
        poller.close()
    if menu_id and machines.taken(menu_id) and outcome.resolution != "failed":
        menu = machines.open("review_menu", menu_id, menu_bindings(machines.stage))
        try:
            if "interviewing" in menu.session.active:
                menu.send("resolved" if outcome.resolution == "resolved" else "aborted")
        finally:
            menu.close()
    outcome = Outcome(outcome.resolution, outcome.poller_id, outcome.staged, menu_id or None,
                      outcome.message, outcome.answers)
    front.finish(outcome)
    return outcome
