"""The guards and actions of ``review_menu`` and ``poller_interview``.

The machines hold the interview's state in their context; the front ends only show
``context.question`` and send the answer back as an event (see
:mod:`interlock.runtime.interview.driver`). Nothing here talks to an agent: the poller
agent is invoked by the spec's ``consulting`` state, and its reply comes back as
``done.invoke.poller`` (checked by the ``*_fits`` guards with the question protocol's
parser) or ``error.invoke.poller``. ``stage_config`` writes ``staged_configs[node]`` to the
store in one transaction (an upsert: asking it twice stages the same config).
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from interlock.machines.bindings import Bindings, Call
from interlock.runtime.interview.poller import Stage, check_reply
from interlock.runtime.interview.protocol import (
    BACK,
    CLOSE_MENU,
    ISSUES,
    MULTI_SELECT,
    PollerReply,
    ProtocolError,
    Question,
    echo_question,
)

StageConfig = Callable[[str, dict[str, Any]], None]
MESSAGE_LIMIT = 300  # characters of an agent's error shown in the one-line failure


def now_iso(call: Call) -> str:
    seconds = call.session.now() if call.session is not None else datetime.now(UTC).timestamp()
    return datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _label(question: dict[str, Any] | None, answer: Any) -> str:
    """What an answer said, in words (the option's label), for the agent and the echo."""
    if question is None:
        return str(answer)
    parsed = Question.model_validate(question)
    if isinstance(answer, list):
        return ", ".join(parsed.label(a) for a in answer)
    return parsed.label(str(answer)) if parsed.options else str(answer)


def _reply(call: Call, *stages: str) -> PollerReply | None:
    """The reply of a ``done.invoke.poller`` event if it fits the stage asked for (one of
    ``stages``), else None. Pure: guards call it on a copy of the context."""
    stage = str(call.context.get("stage") or "")
    if stage not in stages:
        return None
    try:
        return check_reply(stage, call.data.get("answer"))
    except ProtocolError:
        return None


def _one_line(text: Any) -> str:
    line = " ".join(str(text or "").split())
    return line if len(line) <= MESSAGE_LIMIT else line[:MESSAGE_LIMIT - 3] + "..."


def _malformed(call: Call) -> bool:
    """A reply out of shape: a done event (its reply did not fit), or an error event whose
    reason is ``invalid_answer`` (the agent printed no complete document)."""
    return bool(call.event and call.event.startswith("done.")) or \
        call.data.get("reason") == "invalid_answer"


def _failure(call: Call, attempts: int) -> dict[str, str]:
    """The typed failure of a done/error event of the poller: reason and one line."""
    stage = str(call.context.get("stage") or "")
    data = call.data
    if call.event and call.event.startswith("done."):
        try:
            check_reply(stage, data.get("answer"))
            problem = "the reply fits no stage asked for"
        except ProtocolError as exc:
            problem = str(exc)
        return {"reason": "invalid_answer",
                "message": _one_line(f"the poller agent answered out of shape {attempts} "
                                     f"times ({stage}): {problem}")}
    reason = str(data.get("reason") or "error")
    message = str(data.get("message") or reason)
    if reason == "invalid_answer":
        return {"reason": reason,
                "message": _one_line(f"the poller agent answered out of shape {attempts} "
                                     f"times ({stage}): {message}")}
    result = data.get("result") if isinstance(data.get("result"), dict) else {}
    stderr = [line for line in str((result or {}).get("stderr") or "").splitlines()
              if line.strip() and not line.startswith("interlock: ")]
    if reason == "exit_nonzero" and stderr:
        message += f": {stderr[-1].strip()}"
    return {"reason": reason,
            "message": _one_line(f"the poller agent failed ({reason}, {stage}): {message}")}


def poller_bindings(stage: StageConfig) -> Bindings:
    """Bindings of ``poller_interview`` around a staging function. Quick and free of I/O
    but for ``stage_config``: the poller agent runs as the spec's invoke."""

    def ask_for(call: Call, which: Stage) -> None:
        call.context.update(stage=which, attempts=0)

    def present(call: Call, which: Stage) -> None:
        call.context["question"] = (call.context.get("questions") or {}).get(which)

    def has_question(call: Call, which: Stage) -> bool:
        return which in (call.context.get("questions") or {})

    def keep_question(call: Call) -> None:
        ctx = call.context
        which = str(ctx.get("stage"))
        reply = check_reply(which, call.data.get("answer"))
        back = (BACK,) if which == "narrow" else ()  # the top question has no Back
        question = reply.questions[0].model_copy(update={"id": which, "back": back})
        ctx["questions"] = {**(ctx.get("questions") or {}), which: question.to_json()}
        ctx.update(attempts=0, failure=None)

    def keep_interpretation(call: Call) -> None:
        ctx = call.context
        which = str(ctx.get("stage"))
        reply = check_reply(which, call.data.get("answer"))
        ctx["interpretation"] = reply.interpretation
        if which == "suggest":
            ctx["corrections"] = list(reply.corrections)
            ctx["context_additions"] = list(reply.context_additions)
        else:
            ctx["corrections"] = [*(ctx.get("corrections") or []),
                                  *(c for c in reply.corrections
                                    if c not in (ctx.get("corrections") or []))]
            ctx["context_additions"] = [*(ctx.get("context_additions") or []),
                                        *(c for c in reply.context_additions
                                          if c not in (ctx.get("context_additions") or []))]
        ctx.update(attempts=0, failure=None)

    def can_ask_again(call: Call) -> bool:
        attempts = int(call.context.get("attempts") or 0) + 1  # counting this reply
        return _malformed(call) and attempts < int(call.context.get("max_attempts") or 1)

    def note_failure(call: Call) -> None:
        ctx = call.context
        attempts = int(ctx.get("attempts") or 0) + (1 if _malformed(call) else 0)
        ctx.update(attempts=attempts, failure=_failure(call, attempts))

    def record(call: Call, key: str) -> None:
        ctx = call.context
        answer = call.data.get("answer")
        ctx["answers"] = {**(ctx.get("answers") or {}), key: answer}
        ctx[key if key != "narrow" else "section"] = _label(ctx["questions"].get(key), answer)

    def show(call: Call, question: Question) -> None:
        call.context["question"] = question.to_json()

    def record_issue(call: Call) -> None:
        key = next(k for k, v in ISSUES.items() if v == call.event)
        call.context["answers"] = {**(call.context.get("answers") or {}), "close": key}
        call.context["selected_issues"] = [call.event]

    def toggle_issue(call: Call) -> None:
        issue = str(call.data.get("issue"))
        if issue not in ISSUES.values():
            raise ValueError(f"toggle: unknown issue {issue!r} (one of "
                             f"{', '.join(ISSUES.values())})")
        ticked = list(call.context.get("selected_issues") or [])
        call.context["selected_issues"] = ([i for i in ticked if i != issue]
                                           if issue in ticked else [*ticked, issue])

    def combination(call: Call) -> None:
        call.context["answers"] = {**(call.context.get("answers") or {}), "close": "D"}
        call.context["selected_issues"] = []

    def stage_config(call: Call) -> None:
        ctx = call.context
        node = str(ctx.get("source_node") or "")
        config = {"action": ctx.get("trigger") or "retry",
                  "corrections": list(ctx.get("corrections") or []),
                  "context_additions": list(ctx.get("context_additions") or []),
                  "resolved_at": now_iso(call),
                  "poller_id": ctx.get("poller_id") or (call.session.id if call.session else "")}
        stage(node, config)
        ctx["staged_configs"] = {**(ctx.get("staged_configs") or {}), node: config}

    def discard(call: Call) -> None:
        ctx = call.context
        ctx.update(interpretation=None, corrections=[], context_additions=[],
                   selected_issues=[])

    def count_round(call: Call) -> None:
        call.context["round_count"] = int(call.context.get("round_count") or 0) + 1

    def over_limit(call: Call) -> bool:
        return int(call.context.get("round_count") or 0) > int(call.context.get("max_rounds")
                                                               or 0)

    def report(call: Call) -> None:
        call.context["question"] = None

    return {
        "present_category_question": lambda call: present(call, "category"),
        "present_narrow_question": lambda call: present(call, "narrow"),
        "has_category_question": lambda call: has_question(call, "category"),
        "has_narrow_question": lambda call: has_question(call, "narrow"),
        "ask_category_question": lambda call: ask_for(call, "category"),
        "ask_narrow_question": lambda call: ask_for(call, "narrow"),
        "suggest_fix": lambda call: ask_for(call, "suggest"),
        "refine": lambda call: ask_for(call, "refine"),
        "category_reply_fits": lambda call: _reply(call, "category") is not None,
        "narrow_reply_fits": lambda call: _reply(call, "narrow") is not None,
        "interpretation_fits": lambda call: _reply(call, "suggest", "refine") is not None,
        "can_ask_again": can_ask_again,
        "keep_question": keep_question,
        "keep_interpretation": keep_interpretation,
        "note_failure": note_failure,
        "record_category": lambda call: record(call, "category"),
        "record_section": lambda call: record(call, "narrow"),
        "present_close_menu": lambda call: show(call, CLOSE_MENU),
        "present_multi_select": lambda call: show(call, MULTI_SELECT),
        "echo_interpretation": lambda call: show(
            call, echo_question(str(call.context.get("interpretation") or ""))),
        "record_issue": record_issue,
        "toggle_issue": toggle_issue,
        "clear_selection": combination,
        "has_selection": lambda call: bool(call.context.get("selected_issues")),
        "stage_config": stage_config,
        "discard_interpretation": discard,
        "count_round": count_round,
        "round_limit_reached": over_limit,
        "report_resolved": report,
        "report_unresolved": report,
    }


def new_poller_id(node: str, taken: Callable[[str], bool]) -> str:
    """``poller-<node>-NNN`` (seed 000: poller-14-001), the first number not yet taken."""
    short = node.removeprefix("node_") or "node"
    number = 1
    while taken(f"poller-{short}-{number:03d}"):
        number += 1
    return f"poller-{short}-{number:03d}"


def menu_bindings(stage: StageConfig, fork: Callable[[Call], str] | None = None) -> Bindings:
    """Bindings of ``review_menu``: the fork names the poller (``fork`` returns its id),
    config and route are recorded; running the unit is the unit's job (no-ops here)."""

    def fork_poller(call: Call) -> None:
        ctx = call.context
        ctx["poller_context"] = {"trigger": call.event, "source_node": ctx.get("node_id"),
                                 "unit": ctx.get("unit")}
        ctx["poller_id"] = fork(call) if fork is not None else f"poller-{call.event}"

    def stage_config_change(call: Call) -> None:
        ctx = call.context
        node = str(ctx.get("node_id") or "")
        config = {"action": "config", "corrections": [], "context_additions": [],
                  "model": call.data.get("model"), "harness": call.data.get("harness"),
                  "tools": list(call.data.get("tools") or []),
                  "resolved_at": now_iso(call), "poller_id": None}
        stage(node, config)
        ctx["staged_configs"] = {**(ctx.get("staged_configs") or {}), node: config}

    def note_outcome(call: Call) -> None:
        call.context["poller_id"] = None

    def nothing(call: Call) -> None:
        return None

    return {
        "fork_poller": fork_poller,
        "cancel_poller": note_outcome,
        "note_poller_outcome": note_outcome,
        "stage_config_change": stage_config_change,
        "mark_complete": lambda call: call.context.__setitem__("completed", True),
        "forward_output": lambda call: call.context.__setitem__(
            "routed_to", call.data.get("node")),
        "apply_staged_config": nothing,  # the unit applies it on its next invocation
        "run_unit": nothing,
        "record_unit_error": nothing,
    }
