"""Acting from a page: every action is a POST of a JSON body (the guard has checked it is
this server's own page's) and answers what happened, as ``{"outcome", "detail"}``:
``taken`` (done, or handled by the session), ``queued`` (waiting for the session or its
next run) or ``rejected`` (and why).

Signals are posted into the session's mailbox through :func:`interlock.runtime.post_signal`
exactly as ``interlock signal`` posts them (type, message, target, iteration, task), then their
receipt is waited for a moment; events go through :func:`interlock.runtime.send`;
cancel, resume, the Questioner's answers (``ralph resume --message``), the review of a
rejected task (the review menu's questions) and the inbox's ack/done/failed through
their façade calls.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from interlock import runtime
from interlock.runtime.ui.launch import Outcome, Said, start_runner

if TYPE_CHECKING:
    from interlock.runtime.ui.reviews import Reviews
    from interlock.runtime.ui.server import UiConfig

__all__ = ["RECEIPT_WAIT", "ROUTES", "answers_message"]

RECEIPT_WAIT = 2.0  # seconds a signal's receipt (or an event's taking) is waited for
Body = dict[str, Any]
Handler = Callable[["Ctx", str, Body], Awaitable[Said]]


class BadInput(ValueError):
    """A body that does not say what it must (400)."""


@dataclass(frozen=True, slots=True)
class Ctx:
    """What an action works with: the server's configuration and its reviews."""

    config: UiConfig
    reviews: Reviews

    @property
    def where(self) -> dict[str, Any]:
        return self.config.where


def _said(outcome: Outcome, detail: str, **more: Any) -> JSONResponse:
    return JSONResponse({"outcome": outcome, "detail": detail, **more})


def _text(body: Body, key: str, *, required: bool = False) -> str | None:
    value = body.get(key)
    if value is None or (isinstance(value, str) and not value.strip()):
        if required:
            raise BadInput(f"{key} is missing")
        return None
    if not isinstance(value, str):
        raise BadInput(f"{key} must be text")
    return value


async def _signal(ctx: Ctx, session_id: str, body: Body) -> Said:
    kind = (_text(body, "type", required=True) or "").strip().upper()
    iteration_text = body.get("iteration")
    iteration = None
    if iteration_text not in (None, ""):
        try:
            iteration = int(str(iteration_text))
        except ValueError:
            raise BadInput(f"iteration {iteration_text!r} is not a whole number") from None
    posted = await asyncio.to_thread(
        runtime.post_signal, session_id, kind, _text(body, "message"),
        target=(_text(body, "target") or "ALL").strip(), iteration=iteration,
        task=(_text(body, "task") or "").strip() or None, **ctx.where)
    receipt = await asyncio.to_thread(runtime.wait_for_receipt, posted, RECEIPT_WAIT)
    name = f"{kind} {posted.id}"
    if receipt is None:
        return "queued", (f"{name} waits in {posted.inputs}: nothing has taken it yet "
                          "(a state that takes it, or a runner, has to come)"), \
            {"signal": posted.id}
    if receipt.handled:
        meta = receipt.metadata or {}
        return "taken", (f"{name} handled by {meta.get('handled_by', '?')}: "
                         f"{meta.get('action_taken', 'taken')}"), {"signal": posted.id}
    return "rejected", f"{name} rejected: {receipt.reason}", {"signal": posted.id}


async def _send(ctx: Ctx, session_id: str, body: Body) -> Said:
    event = _text(body, "event", required=True) or ""
    data_text = _text(body, "data")
    try:
        data = json.loads(data_text) if data_text else {}
    except json.JSONDecodeError as exc:
        raise BadInput(f"data is not JSON: {exc.msg} (line {exc.lineno}, column "
                       f"{exc.colno})") from None
    if not isinstance(data, Mapping):
        raise BadInput("data must be a JSON object")
    receipt = await runtime.send(session_id, event.strip(), dict(data), wait=RECEIPT_WAIT,
                                 **ctx.where)
    active = ", ".join(receipt.active)
    if receipt.outcome == "taken":
        return "taken", f"{event}: taken -> [{active}]", {}
    if receipt.outcome == "rejected":
        return "rejected", (f"{event}: rejected in [{active}]; it takes: "
                            f"{', '.join(receipt.accepts) or 'none'}"), {}
    return "queued", f"{event}: queued ({receipt.note})", {}


async def _cancel(ctx: Ctx, session_id: str, body: Body) -> Said:
    info = await runtime.cancel(session_id, reason=_text(body, "reason") or "cancelled "
                                "from interlock ui", **ctx.where)
    if info.status == "cancelled":
        return "taken", f"session {session_id} is cancelled", {}
    return "queued", (f"session {session_id} is {info.status}: its runner was asked to "
                      "cancel it"), {}


async def _is_ralph(config: UiConfig, session_id: str) -> bool:
    try:
        await asyncio.to_thread(runtime.ralph_folder, session_id, root=config.root)
    except runtime.NotFound:
        return False
    return True


async def _resume(ctx: Ctx, session_id: str, body: Body) -> Said:
    message = _text(body, "message")
    if await _is_ralph(ctx.config, session_id):
        return await _resume_ralph(ctx, session_id, message, "resume")
    info = await runtime.status(session_id, **ctx.where)
    if info.status == "running":
        return "rejected", f"session {session_id} is running: there is nothing to resume", {}
    if info.status in ("finished", "cancelled"):
        return "rejected", f"session {session_id} is {info.status}: nothing to resume", {}
    return await start_runner(ctx.config, session_id, ["resume", session_id])


async def _resume_ralph(ctx: Ctx, session_id: str, message: str | None,
                        what: str) -> Said:
    live = await runtime.ralph_resume(session_id, message=message, **ctx.where)
    if live:
        return "taken", f"{what}: queued for the running session, which goes on", {}
    outcome, detail, more = await start_runner(ctx.config, session_id,
                                               ["ralph", "run", session_id])
    return outcome, f"{what}: queued; {detail}", more


def answers_message(questions: list[Mapping[str, Any]], answers: Mapping[str, Any]) -> str:
    """The Questioner's questions answered, as the one message ``ralph resume --message``
    gives the replanning Planner: ``q1 (prompt): answer`` per line, an option's key with
    its label. ProtocolError (a ValueError) for an answer that does not fit."""
    lines = []
    for raw in questions:
        question = runtime.Question.model_validate(
            {k: raw[k] for k in ("id", "kind", "prompt", "options") if k in raw})
        given = answers.get(question.id)
        if given is None or given == "" or given == []:
            raise BadInput(f"question {question.id} has no answer")
        answer = question.check(given)
        shown = ", ".join(f"{key} ({question.label(key)})" if question.options else key
                          for key in ([answer] if isinstance(answer, str) else answer))
        lines.append(f"{question.id} ({question.prompt}): {shown}")
    return "\n".join(lines)


async def _answers(ctx: Ctx, session_id: str, body: Body) -> Said:
    status = await runtime.ralph_status(session_id, **ctx.where)
    questions = list(status.get("questions") or [])
    if not questions:
        return "rejected", f"session {session_id} asks no questions now", {}
    given = body.get("answers")
    if not isinstance(given, Mapping):
        raise BadInput("answers must be an object: question id -> answer")
    message = answers_message(questions, given)
    return await _resume_ralph(ctx, session_id, message, "answers")


async def _review(ctx: Ctx, session_id: str, body: Body) -> Said:
    task = _text(body, "task", required=True) or ""
    review = ctx.reviews.start(session_id, task)
    return "taken", f"reviewing {task}", {"state": await review.next_state()}


async def _review_answer(ctx: Ctx, review_id: str, body: Body) -> Said:
    review = ctx.reviews.get(review_id)
    if review is None:
        raise runtime.NotFound(f"no review {review_id}")
    if body.get("abort"):
        review.abort()
        return "taken", "review stopped", {"state": await review.next_state()}
    question = _text(body, "id", required=True) or ""
    state = await review.answer(question, body.get("answer"))
    return "taken", f"{question} answered", {"state": state}


async def _inbox(ctx: Ctx, message_id: str, body: Body) -> Said:
    store = runtime.project_inbox(root=ctx.config.root)
    if store is None:
        return "rejected", "no inbox here: interlock.yaml has no inbox: section", {}
    status = _text(body, "status", required=True) or ""
    try:
        message = await asyncio.to_thread(runtime.mark_message, message_id, status,
                                          reason=_text(body, "reason"), store=store)
    except (runtime.InboxError, runtime.InboxConfigError, runtime.BadRequest) as exc:
        return "rejected", str(exc), {}
    return "taken", f"message {message_id} is {message.status}", {}


async def _act(request: Request, handler: Handler, key: str) -> Response:
    state = request.app.state
    if "application/json" not in request.headers.get("content-type", ""):
        return JSONResponse({"error": "send the action as JSON (application/json)"}, 415)
    try:
        body = await request.json()
    except (json.JSONDecodeError, UnicodeDecodeError):
        return JSONResponse({"error": "the body is not JSON"}, 400)
    if not isinstance(body, dict):
        return JSONResponse({"error": "the body must be a JSON object"}, 400)
    try:
        outcome, detail, more = await handler(Ctx(state.config, state.reviews), key, body)
    except BadInput as exc:
        return JSONResponse({"outcome": "rejected", "detail": str(exc)}, 400)
    except runtime.NotFound as exc:
        return JSONResponse({"outcome": "rejected", "detail": str(exc)}, 404)
    except (runtime.InterlockError, ValueError) as exc:
        return _said("rejected", str(exc))
    return _said(outcome, detail, **more)


def _action(handler: Handler, key: str) -> Callable[[Request], Awaitable[Response]]:
    async def endpoint(request: Request) -> Response:
        return await _act(request, handler, request.path_params[key])

    return endpoint


ROUTES = [
    *(Route(f"/s/{{session}}/{name}", _action(handler, "session"), methods=["POST"])
      for name, handler in (("signal", _signal), ("send", _send), ("cancel", _cancel),
                            ("resume", _resume), ("answers", _answers),
                            ("review", _review))),
    Route("/reviews/{review}", _action(_review_answer, "review"), methods=["POST"]),
    Route("/inbox/{message}", _action(_inbox, "message"), methods=["POST"]),
]
