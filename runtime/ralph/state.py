"""The Ralph state, typed: the orchestrator's and the subagent's context as pydantic models.

The engine keeps a session's context as a JSON dict (journal, snapshots) and the specs'
expressions read its keys (``context.invocation.seq``), so the wire format stays the dict
the specs declare (specs/ralph_orchestrator.yaml, specs/ralph_subagent.yaml). The bindings
meet it at their edges only: :func:`typed` validates the dict into the model before an
action (:meth:`~pydantic.BaseModel.model_validate`) and writes the model back after it
(``model_dump(mode="json")``); :func:`guard` validates for a guard, which never writes.
Nested values keep their shape: a key that was not in the dict is not added to it.

>>> ctx = {"iteration": 2, "plan_tasks": [{"id": 1, "title": "parse"}]}
>>> state = OrchestratorContext.model_validate(ctx)
>>> state.iteration, state.plan_tasks[0].id, state.batches
(2, '1', [])
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, MutableMapping
from typing import Any, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field

from interlock.machines.bindings import Call

#: A duration as a spec's context holds it: seconds, or text such as ``10m``.
Delay = float | int | str
#: A signal's message (a signal may come without one).
Message = str | None


class _Part(BaseModel):
    """A value inside the context: unknown keys are kept as they are."""

    model_config = ConfigDict(extra="allow", coerce_numbers_to_str=True)


class _Context(BaseModel):
    """A session's context: unknown keys are left in the dict, untouched."""

    model_config = ConfigDict(extra="ignore", coerce_numbers_to_str=True)

    @classmethod
    def read(cls: type[C], context: Mapping[str, Any]) -> C:
        """The typed view of ``context`` (every field counts as given, so a default
        filled in here is written back by :meth:`write`)."""
        state = cls.model_validate(context)
        state.__pydantic_fields_set__.update(type(state).model_fields)
        return state

    def write(self, context: MutableMapping[str, Any]) -> None:
        """Write the fields back into ``context`` (its other keys stay)."""
        context.update(self.model_dump(mode="json", by_alias=True, exclude_unset=True))


C = TypeVar("C", bound=_Context)


class Spend(BaseModel):
    """Tokens and cost so far, as the agents reported them (None: not reported)."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    input_tokens: int | None = None
    output_tokens: int | None = None
    cost_usd: float | None = None

    @classmethod
    def of_usage(cls, usage: Mapping[str, Any]) -> Spend:
        """One agent call's usage as the invoke reports it (``inputTokens``,
        ``outputTokens``, ``costUsd``: ``interlock.runtime.engine.agent_output.Usage``)."""
        return cls(input_tokens=_number(usage.get("inputTokens"), int),
                   output_tokens=_number(usage.get("outputTokens"), int),
                   cost_usd=_number(usage.get("costUsd"), float))

    def plus(self, other: Spend) -> Spend:
        """Both together; a figure neither reported stays None.

        >>> Spend(cost_usd=0.5).plus(Spend(input_tokens=10, cost_usd=0.25))
        Spend(input_tokens=10, output_tokens=None, cost_usd=0.75)
        """
        return Spend(input_tokens=_add(self.input_tokens, other.input_tokens),
                     output_tokens=_add(self.output_tokens, other.output_tokens),
                     cost_usd=_add(self.cost_usd, other.cost_usd))


N = TypeVar("N", int, float)


def _add(a: N | None, b: N | None) -> N | None:
    return b if a is None else a if b is None else a + b


def _number(value: Any, kind: type[N]) -> N | None:
    try:
        return None if value is None else kind(value)
    except (TypeError, ValueError):
        return None



# -- the parts ------------------------------------------------------------------------


class TaskRef(_Part):
    """A task of the plan: ``{id, title}``."""

    id: str
    title: str = ""


class TaskResult(_Part):
    """A task's outcome in this iteration."""

    status: Literal["completed", "blocked", "failed"] | str
    report: Any = None
    blockers: list[Any] = Field(default_factory=list)


class Buffered(_Part):
    """A STEER or INFO targeted at a subagent, kept for its next invocation."""

    type: Literal["STEER", "INFO"]
    message: Message = None


class Replan(_Part):
    """What iteration N+1's Planner replans (``from``: iteration N)."""

    model_config = ConfigDict(populate_by_name=True)

    from_: int = Field(alias="from")
    remaining: list[TaskRef] = Field(default_factory=list)
    blockers: list[Any] = Field(default_factory=list)
    rejected: list[str] = Field(default_factory=list)

    @classmethod
    def of(cls, start: int, remaining: list[TaskRef], blockers: list[Any],
           rejected: list[str] | None = None) -> Replan:
        """The replan from iteration ``start`` (``rejected`` left out when None)."""
        data: dict[str, Any] = {"from": start, "remaining": remaining, "blockers": blockers}
        if rejected is not None:
            data["rejected"] = rejected
        return cls.model_validate(data)


class Brief(_Part):
    """What a role needs besides its task: the replan, the human's answers, the blockers
    to ask about, the APPROVE message."""

    replan: Replan | None = None
    answers: str = ""
    blockers: list[Any] = Field(default_factory=list)
    approval: str = ""
    conflicts: list[str] = Field(default_factory=list)  # for the Merger


class Invocation(_Part):
    """The subagent invocation being made: the input of the state's invoke."""

    seq: int
    role: str
    mode: str
    task: TaskRef | None = None
    iteration: int = 1
    steers: list[Message] = Field(default_factory=list)
    infos: list[Message] = Field(default_factory=list)
    brief: Brief = Field(default_factory=Brief)
    workdir: str = ""  # where the agent works ("": the project folder)


class Merge(_Part):
    """The merge of an approved task of a parallel batch under way: the files git left in
    conflict (empty: none)."""

    task: str
    conflicts: list[str] = Field(default_factory=list)


class CallRecord(_Part):
    """One agent call of a subagent: its prompt, the answer's text, the usage the agent
    reported (``inputTokens``, ``outputTokens``, ``costUsd``), how it ended."""

    prompt: str = ""
    text: str = ""
    usage: dict[str, Any] = Field(default_factory=dict)
    exit: int | None = None
    elapsed: float | None = None
    method: str | None = None
    attempt: int = 1
    error: str | None = None


def spent(calls: Iterable[CallRecord]) -> Spend:
    """What ``calls`` cost together, as their agents reported it: the one place usage
    is added up (a subagent's own total, the session's in the orchestrator)."""
    total = Spend()
    for call in calls:
        total = total.plus(Spend.of_usage(call.usage))
    return total


# -- the orchestrator -----------------------------------------------------------------


class OrchestratorContext(_Context):
    """specs/ralph_orchestrator.yaml's context (the descriptions are the spec's)."""

    session_id: str = ""
    agent: str = "Ralph-Orchestrator"
    iteration: int = 1
    batch: int = 0
    current_task: TaskRef | None = None
    steer_messages: list[Message] = Field(default_factory=list)
    info_messages: list[Message] = Field(default_factory=list)
    pause_message: str | None = None
    blockers: list[Any] = Field(default_factory=list)
    status: str = "running"
    plan_tasks: list[TaskRef] = Field(default_factory=list)
    batches: list[list[str]] = Field(default_factory=list)
    task_queue: list[str] = Field(default_factory=list)
    review_queue: list[str] = Field(default_factory=list)
    results: dict[str, TaskResult] = Field(default_factory=dict)
    rejected: list[str] = Field(default_factory=list)
    buffered: dict[str, list[Buffered]] = Field(default_factory=dict)
    invocation: Invocation | None = None
    pause_pending: bool = False
    questions: list[dict[str, Any]] = Field(default_factory=list)
    answers: str | None = None
    invocation_seq: int = 0
    cost_usd: float = 0.0
    input_tokens: int | None = None
    output_tokens: int | None = None
    replan: Replan | None = None
    corrected: list[str] = Field(default_factory=list)
    approval: str | None = None
    knowledge: str | None = None
    knowledge_approval_timeout: Delay = "1h"
    parallel: int = 1
    workers: list[Invocation] = Field(default_factory=list)
    merge_queue: list[str] = Field(default_factory=list)
    merging: Merge | None = None
    pause_after_batch: bool = False

    @property
    def spend(self) -> Spend:
        """What the session's agents reported spending so far."""
        return Spend(input_tokens=self.input_tokens, output_tokens=self.output_tokens,
                     cost_usd=self.cost_usd)

    @staticmethod
    def spend_in(context: Mapping[str, Any]) -> Spend:
        """:attr:`spend` read from a context dict without validating the rest of it (the
        runner's limits look at it often)."""
        return Spend.model_validate({key: context.get(key) for key in (
            "input_tokens", "output_tokens", "cost_usd")})

    def add_spend(self, more: Spend) -> None:
        total = self.spend.plus(more)
        self.input_tokens, self.output_tokens = total.input_tokens, total.output_tokens
        self.cost_usd = total.cost_usd or 0.0

    def task(self, ident: str) -> TaskRef:
        """The plan's task ``ident`` (a bare one when the plan has none)."""
        for task in self.plan_tasks:
            if task.id == ident:
                return task.model_copy()
        return TaskRef(id=ident, title=ident)

    def to_correct(self) -> list[str]:
        """The tasks Reviewers rejected in the last iteration whose correction the human
        has not given yet (``corrected`` lists those done)."""
        done = set(self.corrected)
        return [t for t in (self.replan.rejected if self.replan else []) if t not in done]


# -- the subagent ---------------------------------------------------------------------


class SubagentContext(_Context):
    """specs/ralph_subagent.yaml's context (the descriptions are the spec's); the
    orchestrator reads it as the ``output`` of the subagent's ``done.invoke``."""

    session: str = ""
    role: str = "executor"
    agent: str = "Ralph-Executor"
    mode: str = "execute"
    seq: int = 1
    iteration: int = 1
    task: TaskRef | None = None
    brief: Brief = Field(default_factory=Brief)
    steer_messages: list[Message] = Field(default_factory=list)
    info_messages: list[Message] = Field(default_factory=list)
    learned: list[Message] = Field(default_factory=list)
    pause_message: str | None = None
    pause_held: bool = False
    held_message: str | None = None
    steer_branch: str | None = None
    prompt: str = ""
    steer_prompt: str = ""
    continuing: bool = False
    correction: str | None = None
    invocation_timeout: Delay = "10m"
    gates_timeout: Delay = "10m"
    retry_delay: Delay = "0s"
    attempts: int = 0
    restarts: int = 0
    gate_runs: int = 0
    gate_feedback: str = ""
    gate_reports: list[dict[str, Any]] = Field(default_factory=list)
    calls: list[CallRecord] = Field(default_factory=list)
    answer: dict[str, Any] | None = None
    verified: bool = False
    gates_failed: bool = False
    cost_usd: float = 0.0
    blockers: list[Any] = Field(default_factory=list)
    blocked_reason: str | None = None
    error: str | None = None
    error_reason: str | None = None
    python: str = "python3"
    workdir: str = "."

    @property
    def task_id(self) -> str | None:
        return self.task.id if self.task is not None else None

    @property
    def executor_task(self) -> str | None:
        """The task an Executor works on (None for the other roles)."""
        return self.task_id if self.role == "executor" else None


# -- the edges ------------------------------------------------------------------------


def typed(model: type[C], action: Callable[[Call, C], None]) -> Callable[[Call], None]:
    """A binding that runs ``action`` on the typed context and writes it back."""

    def run(c: Call) -> None:
        state = model.read(c.context)
        action(c, state)
        state.write(c.context)

    run.__name__ = getattr(action, "__name__", "action")
    return run


def guard(model: type[C], test: Callable[[Call, C], bool]) -> Callable[[Call], bool]:
    """A guard that reads the typed context (a guard never writes)."""

    def run(c: Call) -> bool:
        return bool(test(c, model.model_validate(c.context)))

    run.__name__ = getattr(test, "__name__", "guard")
    return run
