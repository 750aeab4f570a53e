"""The status of a Ralph session: what ``interlock ralph status --json`` prints and
``interlock watch`` draws (:mod:`interlock.runtime.ralph.watch`), one model.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from interlock.runtime.ralph.state import Spend

__all__ = ["FINISHED", "InboxLine", "Marker", "RalphStatus", "RunningAgent", "SignalLine",
           "Spend", "StopInfo", "TaskLine"]

Marker = Literal[" ", "/", "x", "F"]
#: Statuses after which nothing more happens: ``watch.follow`` stops on them.
FINISHED = frozenset({"complete", "completed", "failed", "aborted", "stopped", "cancelled"})


class _Model(BaseModel):
    model_config = ConfigDict(frozen=True, extra="ignore")


class TaskLine(_Model):
    """One task of progress.md: its id, title, marker and a note (a failure's reason)."""

    id: str
    title: str = ""
    marker: Marker = " "
    note: str | None = None


class RunningAgent(_Model):
    """The agent invocation in flight: its role, the task it works on, seconds since it
    started, its attempt (retries), and the last lines it printed."""

    role: str
    task: str | None = None
    elapsed: float = 0.0
    attempt: int = 1
    last_lines: tuple[str, ...] = ()


class SignalLine(_Model):
    """A signal the session handled (or holds): its type, target, message, and what was
    done with it."""

    type: str
    message: str = ""
    target: str = "ALL"
    action: str | None = None
    at: str | None = None


class InboxLine(_Model):
    """The session's inbox count (SessionInfo.inbox): messages delivered to it as INFO
    context, and those not yet taken."""

    delivered: int = 0
    pending: int = 0


class StopInfo(_Model):
    """Why the session ended: ``reason`` (``max_iterations``, ``max_runtime``,
    ``max_cost``, ``no_progress``, ``completed``, ``aborted``...) and a readable detail."""

    reason: str
    detail: str = ""


class RalphStatus(_Model):
    """Everything ``interlock watch`` shows and ``ralph status --json`` prints."""

    session_id: str
    state: str  # the orchestrator's state path, e.g. "EXECUTING_BATCH"
    status: str = "running"
    iteration: int = 1
    max_iterations: int | None = None
    batch: int | None = None
    batches: int | None = None
    tasks: tuple[TaskLine, ...] = ()
    agent: RunningAgent | None = None
    signals: tuple[SignalLine, ...] = ()
    spend: Spend = Field(default_factory=Spend)
    elapsed: float | None = None  # seconds since the session started
    stop: StopInfo | None = None
    inbox: InboxLine | None = None  # None: no inbox message reached the session
    paused_for: str | None = None  # why it pauses when an agent failed (the CLI's words)

    @property
    def finished(self) -> bool:
        return self.status in FINISHED
