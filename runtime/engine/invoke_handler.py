"""The invoker's protocol: what one kind of invocation (agent, command, machine) does.

After python-statemachine's ``statemachine/invoke.py``: the manager
(:class:`~interlock.runtime.engine.invoke.Invoker`) owns the invocations of a session: their
rows, the journal notes, reconciling with the active states, recovering after a crash,
delivering outcomes; an :class:`InvokeHandler` per kind starts, adopts and stops the
invocation's work (a spooled process: ``dispatch/invoke_command.py``, ``agents/invoke.py`` over
``dispatch/invoke_process.py``, given to the engine from above as :data:`InvokeHandlers`;
a child session: ``invoke_machine.py``), reaching the manager
through the small :class:`InvokeHost` it is given.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from interlock.machines.durations import parse_duration
from interlock.machines.ir import InvokeIR
from interlock.runtime.config.dispatch import PollingConfiguration
from interlock.runtime.engine.agent_output import FAILURE_REASONS, Usage
from interlock.runtime.engine.clock import Clock
from interlock.runtime.store.base import InvocationRecord, Store

REASONS = ("spawn_error", "exit_nonzero", "timeout", "invalid_answer", "runner_lost",
           "machine_failed", "machine_cancelled", "agent_error", *FAILURE_REASONS)
START_WAIT = 10.0  # longest wait for an invocation's work to be started and recorded

#: The kinds of invocation, one handler each.
InvokeKind = Literal["agent", "command", "machine"]


def kind_of(invoke: InvokeIR) -> InvokeKind:
    """Which handler runs ``invoke``: its ``machine:``, its ``command:``, else its ``agent:``."""
    if invoke.machine is not None:
        return "machine"
    return "command" if invoke.command is not None else "agent"


class InvokeError(Exception):
    """An invoke cannot be started as written (a template error, an unknown agent)."""


@dataclass(frozen=True, slots=True)
class InvokeNote:
    """A journal line the runner writes for the invoker: ``kind`` is one of invoked,
    adopted, restarted, cancelled, interrupted, dropped, lost."""

    kind: str
    invoke: str
    data: Mapping[str, Any]
    note: str | None = None


@dataclass(frozen=True, slots=True)
class Item:
    """A child of a fan-out (``each:``): its fan-out's id, its item's index in the list,
    and the item."""

    fanout: str
    index: int
    value: Any

    @property
    def names(self) -> dict[str, Any]:
        """What the child's templates see besides ``context``: ``item`` and ``index``."""
        return {"item": self.value, "index": self.index}


def names_of(item: Item | None) -> dict[str, Any] | None:
    """The template names of a fan-out's child (None for a single invocation)."""
    return item.names if item is not None else None


@dataclass
class Flight:
    """One invocation the manager follows: its row, its invoke, the task its handler runs
    on the manager's loop (whose result the handler reads), and ``work``, the handler's
    own handle on it (a dispatch, a child run); ``item`` for a fan-out's child."""

    record: InvocationRecord
    invoke: InvokeIR
    task: asyncio.Future[Any] | None = None
    work: object | None = None
    finished: bool = False
    started: threading.Event = field(default_factory=threading.Event)
    item: Item | None = None


@dataclass(frozen=True, slots=True)
class Stopped:
    """What a handler's stop leaves the manager to journal: whether the invocation's row
    ends with the outcome, and the note's text."""

    ends_row: bool = True
    note: str | None = None


class InvokeHost(Protocol):
    """What a handler may use of its manager."""

    @property
    def store(self) -> Store: ...

    @property
    def session_id(self) -> str: ...

    @property
    def clock(self) -> Clock: ...

    @property
    def config(self) -> PollingConfiguration: ...

    @property
    def spec_path(self) -> str: ...

    @property
    def loop(self) -> asyncio.AbstractEventLoop: ...

    def open_flight(self, invoke: InvokeIR, argv: tuple[str, ...],
                    item: Item | None = None) -> Flight:
        """Write a new invocation's row (with ``argv``; a fan-out's child with its item)
        and follow it."""

    def settle(self, flight: Flight) -> bool:
        """Mark the flight finished; False if it already was (a cancel or an outcome won)."""

    def deliver(self, flight: Flight, data: dict[str, Any], reason: str | None,
                suffix: str | None = None) -> None:
        """Offer the flight's done (``reason`` None) or error event to the session."""

    def spawn_failed(self, flight: Flight, message: str) -> None:
        """The invocation could not start: its row ends, ``error.invoke`` (spawn_error)."""


class InvokeHandler(Protocol):
    """One kind of invocation. Called by the manager, its lock held; nothing here waits
    for the work to end except :meth:`stop`."""

    def start(self, invoke: InvokeIR, context: Mapping[str, Any],
              item: Item | None = None) -> tuple[Flight, str | None]:
        """Open the invocation (``host.open_flight``, with ``item`` for a fan-out's child,
        whose templates then see ``item`` and ``index``) and start its work; the flight and
        the journal note's text. A failure to start is delivered, not raised."""

    def adopt(self, flight: Flight, context: Mapping[str, Any]) -> str | None:
        """Take over, after a restart, the work a dead runner left for ``flight`` (a row
        found in flight; ``flight.item`` for a fan-out's child); the journal note's text,
        or None when there is nothing to adopt (the manager then applies on_resume's
        fallback)."""

    def stop(self, flight: Flight, outcome_kind: str) -> Stopped:
        """Stop the flight's work and wait for it: ``cancelled`` (its state was left),
        ``interrupted`` (the runner stops), ``detached`` (only stop following it)."""


#: Makes one kind's handler for a session's invoker (the handler's :class:`InvokeHost`).
HandlerFactory = Callable[[InvokeHost], InvokeHandler]
#: The handlers a session's invoker may use, by kind: given to ``Runner.open(invokers=...)``
#: from above the engine (``agent:`` and ``command:`` run processes: runtime/agents,
#: runtime/dispatch); ``machine:`` invokes are the engine's own.
InvokeHandlers = Mapping[InvokeKind, HandlerFactory]


def missing_handlers(ir_invokes: Sequence[InvokeIR], handlers: Collection[str]) -> list[str]:
    """The kinds of ``ir_invokes`` (besides ``machine``) that no handler is given for."""
    return sorted({kind for invoke in ir_invokes
                   if (kind := kind_of(invoke)) != "machine" and kind not in handlers})


def invoke_cwd(invoke: InvokeIR, context: Mapping[str, Any],
               item: Item | None = None) -> str | None:
    """The folder an agent or command invoke runs in (its ``cwd:`` rendered), or None
    (absent, or rendered empty: the agent's own settings, else the runner's folder)."""
    if invoke.cwd is None:
        return None
    folder = templated(invoke.cwd, context, f"invoke {invoke.id!r} cwd", item).strip()
    return folder or None


def templated(text: str, context: Mapping[str, Any], what: str,
              item: Item | None = None) -> str:
    """An agent name or an argv item: a Jinja2 template over ``context`` (and a fan-out
    child's ``item`` and ``index``) when it holds ``{{``, else the text itself. Raises
    :class:`InvokeError`."""
    if "{{" not in text and "{%" not in text:
        return text
    from interlock.runtime.engine.prompts import PromptError, render_input  # Jinja2

    try:
        return str(render_input({"value": text}, context=context,
                                scope=names_of(item))["value"])
    except PromptError as exc:
        raise InvokeError(f"{what}: {exc}") from None


def timeout_of(invoke: InvokeIR, context: Mapping[str, Any]) -> float | None:
    """The invoke's ``timeout:`` in seconds (a duration, or a context key holding one);
    None: the dispatch settings decide."""
    delay = invoke.timeout
    if delay is None:
        return None
    if delay.seconds is not None:
        return delay.seconds
    value = context.get(delay.context_key or "")
    if value is None or isinstance(value, bool):
        return None
    try:
        return parse_duration(value)
    except (ValueError, TypeError):
        return None


def time_left(invoke: InvokeIR, context: Mapping[str, Any], record: InvocationRecord,
              clock: Clock) -> float | None:
    """The invoke's timeout less the time since its invocation started (None: no limit)."""
    timeout = timeout_of(invoke, context)
    if timeout is not None:
        timeout -= max(0.0, clock.now() - record.started_at)
    return timeout


def base_data(record: InvocationRecord | str, result: dict[str, Any], answer: Any = None,
              verdict: Any = None, usage: Usage | None = None) -> dict[str, Any]:
    """The fields every invoke event's data has; ``record`` is the invocation (or, for a
    fan-out's own events, the fan-out's id)."""
    invocation = record if isinstance(record, str) else record.id
    return {"result": result, "answer": answer, "verdict": verdict,
            "usage": (usage or Usage()).to_json(), "invocation": invocation}


def empty_result(status: str, method: str | None, stderr: str) -> dict[str, Any]:
    """A PollingResult of an invocation whose work never ran (or whose run was lost)."""
    return {"success": False, "stdout": "", "stderr": stderr, "exitCode": None,
            "elapsedTime": 0.0, "pollCount": 0, "status": status,
            "completionMethod": method, "verdict": None}


def spawn_error_data(record: InvocationRecord, message: str) -> dict[str, Any]:
    """The data of an ``error.invoke`` whose work could not be started."""
    data = base_data(record, empty_result("error", "spawn", f"interlock: {message}\n"))
    return {**data, "reason": "spawn_error", "message": message}


def lost_data(record: InvocationRecord) -> dict[str, Any]:
    """The data of an ``error.invoke`` whose runner died (on_resume: fail)."""
    message = "the runner died while the agent ran (on_resume: fail)"
    data = base_data(record, empty_result("error", None, f"interlock: {message}\n"))
    return {**data, "reason": "runner_lost", "message": message}
