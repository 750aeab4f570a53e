"""The review menu and the poller interview through the façade (seed 000).

``review`` shows a unit's output and the menu (accept, retry, deepen, redirect, config,
route); retry, deepen and redirect fork a poller interview that stages a correction in
``staged_configs[node]``. ``staged`` reads it; ``consume_staged`` returns it and removes it
in one transaction, so the unit applies a correction exactly once. Front ends: the terminal
UI (default), a list of answers, or JSON lines (:mod:`interlock.runtime.interview`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from interlock.runtime.api.common import opened_store, root_of, translated
from interlock.runtime.api.errors import NotFound, UsageError
from interlock.runtime.engine.clock import Clock, SystemClock
from interlock.runtime.interview.driver import (
    EXIT_CODES,
    FrontEnd,
    Machines,
    Outcome,
    ReviewRequest,
)
from interlock.runtime.interview.driver import resume_interview as _resume
from interlock.runtime.interview.driver import review as _review
from interlock.runtime.interview.frontends import (
    AnswersError,
    JsonLines,
    QueuedAnswers,
    ScriptedAnswers,
)
from interlock.runtime.interview.frontends import load_answers as _load_answers
from interlock.runtime.interview.poller import PollerFailed, choose_agent
from interlock.runtime.interview.protocol import AnswerValue, Question
from interlock.runtime.signals.model import SignalError
from interlock.runtime.signals.staged import staged_prompt as staged_prompt
from interlock.runtime.signals.staged import task_node as staged_task_node

__all__ = ["EXIT_CODES", "FrontEnd", "JsonLines", "Outcome", "Question", "QueuedAnswers",
           "ScriptedAnswers", "consume_staged", "load_answers", "resume_review", "review", "staged",
           "staged_prompt", "task_node", "terminal_ui"]


def load_answers(path: Path | str) -> list[AnswerValue]:
    """The answers of a ``--answers`` file; UsageError naming FILE:LINE:COL if unusable."""
    try:
        return _load_answers(Path(path))
    except AnswersError as exc:
        raise UsageError(str(exc)) from None


def terminal_ui() -> FrontEnd:
    """The terminal front end (arrow keys and letter keys; the echo in a Rich panel)."""
    from interlock.runtime.interview.terminal import TerminalUI

    return TerminalUI()


def _poller(agent: str | None, base: Path) -> str | None:
    """``agent`` if interlock.yaml (or the demo roles) has it; UsageError otherwise. The
    agent itself is resolved again at each of its calls (the spec's invoke)."""
    from interlock.runtime.config.agents import AgentConfigError

    try:
        choose_agent(agent, base)
    except AgentConfigError as exc:
        raise UsageError(str(exc.diagnostics[0])) from None
    except PollerFailed as exc:
        raise UsageError(str(exc)) from None
    return agent


def _front(front: FrontEnd | None, answers: Sequence[AnswerValue] | None) -> FrontEnd:
    if front is not None:
        return front
    if answers is not None:
        return ScriptedAnswers(answers)
    from interlock.runtime.interview.terminal import TerminalUI

    return TerminalUI()


def _check_node(node: str) -> str:
    from interlock.runtime.api.sessions import check_session_id

    if not node:
        raise UsageError("--node names the node whose output is reviewed (e.g. node_14)")
    return check_session_id(node)


def review_blocking(
    output: str, node: str, *, front: FrontEnd | None = None,
    answers: Sequence[AnswerValue] | None = None, agent: str | None = None, unit: str = "",
    store: str | None = None, root: Path | str | None = None, clock: Clock | None = None,
    max_rounds: int = 8, answer_timeout: float = 600.0, menu_id: str | None = None,
) -> Outcome:
    """:func:`review` in the caller's thread (the terminal UI wants the main thread)."""
    base = root_of(root)
    _check_node(node)
    poller = _poller(agent, base)
    request = ReviewRequest(node, output, unit, max_rounds, answer_timeout, menu_id)
    with opened_store(store, base) as opened, translated():
        machines = Machines(opened, base, poller, clock or SystemClock())
        return _review(request, _front(front, answers), machines)


def resume_blocking(
    poller_id: str, *, front: FrontEnd | None = None,
    answers: Sequence[AnswerValue] | None = None, agent: str | None = None,
    store: str | None = None, root: Path | str | None = None, clock: Clock | None = None,
) -> Outcome:
    """:func:`resume_review` in the caller's thread."""
    from interlock.runtime.api.sessions import check_session_id

    base = root_of(root)
    check_session_id(poller_id)
    poller = _poller(agent, base) if agent is not None else None  # None: the one it kept
    with opened_store(store, base) as opened, translated():
        machines = Machines(opened, base, poller, clock or SystemClock())
        if not machines.taken(poller_id):
            raise NotFound(f"no poller interview {poller_id!r} in {opened.url}")
        if opened.get(poller_id).spec_name != "poller_interview":
            raise UsageError(f"{poller_id} is not a poller interview session")
        return _resume(poller_id, _front(front, answers), machines)


async def review(output: str, node: str, **options: Any) -> Outcome:
    """Review ``output`` (the unit's output text) of ``node``: the menu, then the poller
    interview on retry/deepen/redirect. Options: ``front`` (a FrontEnd) or ``answers``
    (a list, in the order asked), ``agent`` (the poller agent's name in interlock.yaml;
    default ``poller``, else the demo questioner), ``unit``, ``store``, ``root``,
    ``clock``, ``max_rounds``, ``answer_timeout`` (seconds), ``menu_id``. The outcome's
    ``exit_code`` says which way it ended."""
    return await asyncio.to_thread(lambda: review_blocking(output, node, **options))


async def resume_review(poller_id: str, **options: Any) -> Outcome:
    """Continue a killed or stopped poller interview at its next unanswered question."""
    return await asyncio.to_thread(lambda: resume_blocking(poller_id, **options))


async def staged(node: str, *, store: str | None = None,
                 root: Path | str | None = None) -> dict[str, Any] | None:
    """``staged_configs[node]``, or None when nothing is staged."""
    _check_node(node)
    with opened_store(store, root_of(root)) as opened, translated():
        return await asyncio.to_thread(opened.staged_config, node)


async def consume_staged(node: str, *, store: str | None = None,
                         root: Path | str | None = None) -> dict[str, Any] | None:
    """Return ``staged_configs[node]`` and remove it, in one transaction (None: nothing
    staged, or another consumer took it first)."""
    _check_node(node)
    with opened_store(store, root_of(root)) as opened, translated():
        return await asyncio.to_thread(opened.consume_staged_config, node)


def task_node(session_id: str, task_id: str) -> str:
    """The node a Ralph task's review stages under: ``<session>-<task>``
    (:func:`interlock.runtime.signals.staged.task_node`); UsageError for ids that do not
    make a valid node."""
    try:
        return staged_task_node(session_id, task_id)
    except SignalError as exc:
        raise UsageError(str(exc)) from None
