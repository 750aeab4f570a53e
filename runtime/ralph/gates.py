"""Backpressure gates: commands (tests, lint) that must exit 0 before a task is ``[x]``.

Each gate runs in the project folder as a real process leading its own process group; at
its timeout the whole group is killed. Its output (stdout and stderr together, in order)
is kept up to a cap, tail first, because the end of a test run is where the failure is.
:func:`gate_decision` is the attempts policy: a failing report goes back to the Executor
with its output until the attempts are spent, then the task is ``[F]``.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from interlock.runtime.ralph.config import Gate

OUTPUT_CAP = 16_000  # characters of a gate's output kept (its tail)
TIMEOUT_EXIT = -9  # the exit recorded for a gate killed at its timeout
KILL_WAIT = 5.0


@dataclass(frozen=True, slots=True)
class GateResult:
    """One gate's run: its exit code (None: it could not start), the tail of its output,
    and how long it took. ``timed_out``: killed at its timeout."""

    name: str
    exit_code: int | None
    output: str
    elapsed: float
    timed_out: bool = False

    @property
    def passed(self) -> bool:
        return self.exit_code == 0 and not self.timed_out

    def summary(self) -> str:
        if self.timed_out:
            return f"gate {self.name!r} timed out after {self.elapsed:.1f}s"
        if self.exit_code is None:
            return f"gate {self.name!r} could not start"
        verdict = "passed" if self.passed else f"failed (exit {self.exit_code})"
        return f"gate {self.name!r} {verdict} in {self.elapsed:.1f}s"


@dataclass(frozen=True, slots=True)
class GateReport:
    """Every gate's result, in the configured order; ``passed`` when all passed (an empty
    list of gates passes)."""

    results: tuple[GateResult, ...]

    @property
    def passed(self) -> bool:
        return all(r.passed for r in self.results)

    @property
    def failed(self) -> tuple[GateResult, ...]:
        return tuple(r for r in self.results if not r.passed)

    def feedback(self) -> str:
        """What the Executor is told about the failing gates: each one's summary and the
        tail of its output."""
        parts = []
        for result in self.failed:
            parts.append(f"## {result.summary()}\n\n{result.output.rstrip()}\n")
        return "\n".join(parts)

    def to_json(self) -> dict[str, object]:
        return {"passed": self.passed, "results": [
            {"name": r.name, "exit": r.exit_code, "passed": r.passed, "timedOut": r.timed_out,
             "elapsed": round(r.elapsed, 3), "output": r.output} for r in self.results]}


def _tail(data: bytes, cap: int) -> str:
    text = data.decode("utf-8", errors="replace")
    if len(text) <= cap:
        return text
    return "[... output cut ...]\n" + text[-cap:]


def _kill_group(pgid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGKILL)


def run_gate(gate: Gate, project: Path, *, env: Mapping[str, str] | None = None,
             output_cap: int = OUTPUT_CAP) -> GateResult:
    """Run one gate in ``project`` (or its ``cwd`` under it) to its exit or its timeout."""
    cwd = project / gate.cwd if gate.cwd else project
    started = time.monotonic()
    try:
        process = subprocess.Popen(
            gate.argv, cwd=cwd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT, start_new_session=True,
            env={**os.environ, **(env or {})})
    except OSError as exc:
        reason = exc.strerror or str(exc)
        return GateResult(gate.name, None, f"cannot run {gate.argv[0]!r}: {reason}\n",
                          time.monotonic() - started)
    try:
        output, _ = process.communicate(timeout=gate.timeout)
    except subprocess.TimeoutExpired:
        _kill_group(process.pid)
        try:
            output, _ = process.communicate(timeout=KILL_WAIT)
        except subprocess.TimeoutExpired:  # a grandchild holds the pipe open
            output = b""
            process.kill()
            process.wait()
        elapsed = time.monotonic() - started
        text = _tail(output or b"", output_cap)
        text += f"\n[interlock: gate killed after its timeout of {gate.timeout:g}s]\n"
        return GateResult(gate.name, TIMEOUT_EXIT, text, elapsed, timed_out=True)
    finally:
        _kill_group(process.pid)  # nothing the gate started outlives it
    return GateResult(gate.name, process.returncode, _tail(output, output_cap),
                      time.monotonic() - started)


def run_gates(gates: Sequence[Gate], project: Path | str, *,
              env: Mapping[str, str] | None = None, stop_at_first: bool = False,
              output_cap: int = OUTPUT_CAP) -> GateReport:
    """Run ``gates`` one after another in ``project``; with ``stop_at_first`` the gates
    after the first failure are not run."""
    results: list[GateResult] = []
    for gate in gates:
        result = run_gate(gate, Path(project), env=env, output_cap=output_cap)
        results.append(result)
        if stop_at_first and not result.passed:
            break
    return GateReport(tuple(results))


GateAction = Literal["accept", "retry", "fail"]


@dataclass(frozen=True, slots=True)
class GateDecision:
    """What to do with a task after its gates ran: ``accept`` (mark ``[x]``), ``retry``
    (back to the Executor with ``feedback``), or ``fail`` (mark ``[F]`` with ``reason``)."""

    action: GateAction
    feedback: str = ""
    reason: str = ""


def gate_decision(report: GateReport, attempt: int, attempts: int) -> GateDecision:
    """The attempts policy. ``attempt`` counts gate runs of this task, from 1; a task
    whose gates fail ``attempts`` times is failed.

    >>> ok = GateReport((GateResult("t", 0, "", 0.1),))
    >>> gate_decision(ok, 1, 2).action
    'accept'
    >>> bad = GateReport((GateResult("t", 1, "boom", 0.1),))
    >>> gate_decision(bad, 1, 2).action, gate_decision(bad, 2, 2).action
    ('retry', 'fail')
    """
    if attempt < 1 or attempts < 1:
        raise ValueError("attempt and attempts count from 1")
    if report.passed:
        return GateDecision("accept")
    names = ", ".join(r.name for r in report.failed)
    if attempt >= attempts:
        return GateDecision("fail", report.feedback(),
                            f"gates failed {attempt} time(s): {names}")
    return GateDecision("retry", report.feedback(),
                        f"gates failed (attempt {attempt} of {attempts}): {names}")
