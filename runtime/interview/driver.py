"""One interview machine, any front end: the loop that shows questions and sends answers.

The review menu and the poller interview are real sessions of ``review_menu`` and
``poller_interview`` (journaled in the store, each with its own id). The menu has no
agent and is stepped here in the caller's thread. The poller interview invokes its agent
(``invoke:`` in ``consulting``), so its runner runs on its own (:class:`LiveSession`):
the front end waits until the session is at a question, shows ``context.question``, and
the answer goes into the session's event queue as the machine's events
(:func:`answer_events`). Killed half-way, the poller session is where its last committed
step left it: :func:`resume_interview` asks the next unanswered question with the earlier
answers kept, and an agent call in flight is adopted (``on_resume: adopt``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, Protocol

from interlock.machines.bindings import Bindings
from interlock.runtime.agents.invoke import process_handlers
from interlock.runtime.engine.clock import Clock, SystemClock
from interlock.runtime.engine.context import SessionContext, with_session
from interlock.runtime.engine.runner import Runner
from interlock.runtime.engine.snapshot import Snapshot
from interlock.runtime.interview.bindings import menu_bindings, new_poller_id, poller_bindings
from interlock.runtime.interview.live import LiveSession, View
from interlock.runtime.interview.poller import DEFAULT_AGENT, poller_resolver
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
FINAL_RESOLUTIONS: tuple[str, ...] = ("resolved", "aborted", "timed_out", "round_limit",
                                      "failed")
EXIT_CODES: dict[str, int] = {"resolved": 0, "accepted": 0, "configured": 0, "routed": 0,
                              "failed": 1, "aborted": 3, "timed_out": 4, "round_limit": 5}
HARNESSES = ("claude", "codex", "opencode", "gemini", "command", "demo")


class Aborted(Exception):
    """The player aborted (Esc, Ctrl-C, EOF on stdin)."""


class NoAnswer(Exception):
    """No answer came before the question's deadline."""


class Interrupted(KeyboardInterrupt):
    """Ctrl-C during a poller interview: its agent was stopped, and the session keeps its
    last committed step (``poller_id``: continue with ``interlock review --resume``)."""

    def __init__(self, poller_id: str) -> None:
        super().__init__(poller_id)
        self.poller_id = poller_id


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
    """Where the specs are, how sessions are opened, and which agent plays the poller
    (``agent``: a name from interlock.yaml; None: ``poller``, else the demo questioner)."""

    store: Store
    root: Path
    agent: str | None = None
    clock: Clock = field(default_factory=SystemClock)
    ttl: float = 3600.0

    def stage(self, node: str, config: dict[str, Any]) -> None:
        self.store.stage_config(node, config, self.clock.now())

    def open(self, spec: str, session_id: str, bindings: Bindings,
             context: Mapping[str, Any] | None = None, *, agent: str | None = None) -> Runner:
        """A runner holding the session: created with ``context``, or (None) resumed.
        ``agent`` plays its ``agent: poller`` invokes (default: :attr:`agent`)."""
        from interlock.runtime.engine.builtin_specs import resolve_spec
        from interlock.runtime.signals.addressing import session_dir

        path = resolve_spec(spec)
        text = path.read_text(encoding="utf-8") if context is not None else None
        folder = session_dir(self.root, session_id)
        bound = with_session(bindings, SessionContext.of(session_id, folder, self.clock))
        runner, _ = Runner.open(self.store, text, str(path), session_id=session_id,
                                bindings=bound, clock=self.clock, context=context,
                                ttl=self.ttl, folder=folder,
                                invokers=process_handlers(
                                    poller_resolver(self.root, agent or self.agent)))
        return runner

    def taken(self, session_id: str) -> bool:
        try:
            self.store.get(session_id)
        except SessionNotFound:
            return False
        return True

    def agent_of(self, session_id: str) -> str | None:
        """The agent a stored interview was started with (its context's ``agent``)."""
        context = Snapshot.from_json(self.store.get(session_id).snapshot).context
        found = context.get("agent")
        return found if isinstance(found, str) and found else None


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


def _state(active: tuple[str, ...]) -> str:
    return next((s for s in active if s in QUESTION_STATES), "")


def at_question(active: tuple[str, ...]) -> bool:
    """Whether the poller session waits for the player (not for its agent)."""
    return bool(_state(active))


def drive_interview(live: LiveSession, front: FrontEnd) -> Outcome:
    """Ask until the poller session is over; returns its outcome (no ``finish`` call)."""
    view = live.settle()
    while not (view.final or live.ended):
        question = Question.model_validate(view.context["question"])
        state = _state(view.active)
        try:
            answer = front.ask(question, session=live.session_id,
                               default=_default(state, question, view.context),
                               deadline=view.deadline)
        except NoAnswer:
            view = live.wait_for_step(view)  # the idle timer fires by the session clock
            continue
        except Aborted:
            view = live.send([("abort", {})])
            continue
        answer = question.check(answer)
        view = live.send(answer_events(state, question, answer,
                                       list(view.context.get("selected_issues") or [])))
    return _outcome(live, view)


def _outcome(live: LiveSession, view: View) -> Outcome:
    ctx = view.context
    answers = dict(ctx.get("answers") or {})
    ended = live.outcome
    if ended is not None and ended.kind == "failed":
        return Outcome("failed", live.session_id, None, message=str(ended.failure),
                       answers=answers)
    if ended is not None and ended.kind in ("cancelled", "removed"):
        return Outcome("aborted", live.session_id, None,
                       message=f"the interview was {ended.kind}"
                               + (f": {ended.reason}" if ended.reason else ""),
                       answers=answers)
    final = next((s for s in view.active if s in FINAL_RESOLUTIONS), "aborted")
    node = str(ctx.get("source_node") or "")
    staged = (ctx.get("staged_configs") or {}).get(node) if final == "resolved" else None
    failure = ctx.get("failure") if final == "failed" else None
    message = str(failure.get("message")) if isinstance(failure, dict) else None
    return Outcome(final, live.session_id, staged, message=message,  # type: ignore[arg-type]
                   answers=answers)


def run_interview(runner: Runner, front: FrontEnd) -> Outcome:
    """Run the poller session of ``runner`` with ``front`` asking, until it is over; the
    runner is closed afterwards (an agent still working is stopped)."""
    try:
        live = LiveSession(runner, at_question)
    except BaseException as exc:
        runner.close()
        if isinstance(exc, KeyboardInterrupt) and not isinstance(exc, Interrupted):
            raise Interrupted(runner.session_id) from None  # Ctrl-C before the first question
        raise
    try:
        return drive_interview(live, front)
    except KeyboardInterrupt as exc:
        if isinstance(exc, Interrupted):
            raise
        raise Interrupted(live.session_id) from None
    finally:
        live.close()  # an agent at work is stopped (journaled interrupted)


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
    from interlock.runtime.engine.faults import UnhandledFault

    menu.send(choice)
    poller_id = str(menu.session.context["poller_id"])
    try:
        poller = machines.open("poller_interview", poller_id, poller_bindings(machines.stage),
                               {"trigger": choice, "source_node": node, "unit": request.unit,
                                "poller_id": poller_id, "output": request.output,
                                "max_rounds": request.max_rounds,
                                "idle_timeout": request.idle_timeout,
                                "agent": machines.agent or DEFAULT_AGENT,
                                "menu_session": menu.session_id})
    except UnhandledFault as exc:  # the first step of the interview raised
        menu.send("aborted")
        return Outcome("failed", poller_id, None, message=str(exc))
    outcome = run_interview(poller, front)
    menu.send("resolved" if outcome.resolution == "resolved" else "aborted")
    return outcome


def resume_interview(poller_id: str, front: FrontEnd, machines: Machines) -> Outcome:
    """Continue a poller interview where its last committed step left it, then tell its
    review menu how it ended."""
    poller = machines.open("poller_interview", poller_id, poller_bindings(machines.stage),
                           agent=machines.agent or machines.agent_of(poller_id))
    outcome = run_interview(poller, front)
    menu_id = str(poller.session.context.get("menu_session") or "")
    if menu_id and machines.taken(menu_id):
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
