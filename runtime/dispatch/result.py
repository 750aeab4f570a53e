"""The result of a dispatch: seed 001's PollingResult, and the DispatchResult around it."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from interlock.runtime.dispatch.verdict import Verdict

__all__ = [
    "COMPLETION_METHODS",
    "POLLING_STATUSES",
    "DispatchResult",
    "PollingResult",
    "PollingStatus",
]

PollingStatus = Literal["pending", "active", "completed", "timeout", "error"]

POLLING_STATUSES: tuple[str, ...] = ("pending", "active", "completed", "timeout", "error")
COMPLETION_METHODS: tuple[str, ...] = ("marker", "exit", "timeout", "idle", "spawn")


@dataclass(frozen=True)
class PollingResult:
    """Result of one sub-agent dispatch (seed 001), plus the parsed :class:`Verdict`.

    Validation: ``status`` is a PollingStatus, ``completion_method`` one of
    :data:`COMPLETION_METHODS` or None, counts and times are non-negative. The seed's "if
    success then exitCode == 0" contradicts marker completion (the process still runs and is
    terminated by us, so exitCode is null); the rule enforced instead is: success implies
    ``status == "completed"`` and (``exit_code == 0`` or ``completion_method == "marker"``).
    """

    success: bool
    stdout: str = ""
    stderr: str = ""
    exit_code: int | None = None
    elapsed_time: float = 0
    poll_count: int = 0
    status: PollingStatus = "completed"
    completion_method: str | None = None
    verdict: Verdict | None = field(default=None)

    def __post_init__(self) -> None:
        if self.status not in POLLING_STATUSES:
            raise ValueError(f"status must be one of {POLLING_STATUSES}, not {self.status!r}")
        if self.completion_method is not None and self.completion_method not in (
            COMPLETION_METHODS
        ):
            raise ValueError(
                f"completionMethod must be one of {COMPLETION_METHODS} or null, "
                f"not {self.completion_method!r}"
            )
        if self.exit_code is not None and (
            isinstance(self.exit_code, bool) or not isinstance(self.exit_code, int)
        ):
            raise ValueError(f"exitCode must be an int or null, not {self.exit_code!r}")
        if self.elapsed_time < 0:
            raise ValueError("elapsedTime must be >= 0")
        if self.poll_count < 0:
            raise ValueError("pollCount must be >= 0")
        if self.success:
            if self.status != "completed":
                raise ValueError(f"success requires status 'completed', not {self.status!r}")
            if self.exit_code != 0 and self.completion_method != "marker":
                raise ValueError(
                    "success requires exitCode 0 or completionMethod 'marker' "
                    f"(got exitCode {self.exit_code!r}, completionMethod "
                    f"{self.completion_method!r})"
                )

    def to_json(self) -> dict[str, Any]:
        """The seed's camelCase fields, plus ``verdict`` (null when none was parsed)."""
        return {
            "success": self.success,
            "stdout": self.stdout,
            "stderr": self.stderr,
            "exitCode": self.exit_code,
            "elapsedTime": self.elapsed_time,
            "pollCount": self.poll_count,
            "status": self.status,
            "completionMethod": self.completion_method,
            "verdict": None if self.verdict is None else self.verdict.to_json(),
        }


@dataclass(frozen=True)
class DispatchResult:
    """A :class:`PollingResult` plus where the whole output is when memory held only its
    tail, and what went wrong when the command could not start."""

    polling: PollingResult
    dispatch_id: str
    name: str | None
    argv: tuple[str, ...]
    stdout_bytes: int
    stderr_bytes: int
    stdout_file: str | None = None
    stderr_file: str | None = None
    error: str | None = None

    @property
    def status(self) -> str:
        return self.polling.status

    def to_json(self) -> dict[str, Any]:
        """The seed's PollingResult fields, then ``name``, ``dispatchId``, ``argv``,
        ``error`` and ``output`` (byte counts; the spill file of a stream whose text above
        is only its tail)."""
        return {
            **self.polling.to_json(),
            "name": self.name,
            "dispatchId": self.dispatch_id,
            "argv": list(self.argv),
            "error": self.error,
            "output": {
                "stdoutBytes": self.stdout_bytes,
                "stderrBytes": self.stderr_bytes,
                "stdoutFile": self.stdout_file,
                "stderrFile": self.stderr_file,
            },
        }
