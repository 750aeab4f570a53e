"""Backpressure gates: commands (tests, lint) that must exit 0 before a task is ``[x]``.

The subagent lifecycle runs them as an invoke (specs/ralph_subagent.yaml, state
``gating``): ``python -m interlock.runtime.ralph.gates PROJECT`` runs the gates of
PROJECT/interlock.yaml one after another and prints the report as one YAML document (with
seed 001's verdict field, ``v: GO`` or ``v: NO-GO``); stopped (an ABORT), it stops the
gate running first.

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
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from types import FrameType
from typing import Any, Literal

import yaml

from interlock.runtime.config.ralph import Gate, RalphConfigError, load_ralph_config

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

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> GateReport:
        """The report :meth:`to_json` wrote (the gates process's answer)."""
        return cls(tuple(
            GateResult(str(r["name"]), None if r.get("exit") is None else int(r["exit"]),
                       str(r.get("output") or ""), float(r.get("elapsed") or 0.0),
                       bool(r.get("timedOut")))
            for r in data.get("results") or ()))


def _tail(data: bytes, cap: int) -> str:
    text = data.decode("utf-8", errors="replace")
    if len(text) <= cap:
        return text
    return "[... output cut ...]\n" + text[-cap:]


def _kill_group(pgid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGKILL)


_running: set[int] = set()  # process groups of the gates running now (for a stop)
_stoppable = False  # set by main(): SIGTERM stops the gate running, then this process


def run_gate(gate: Gate, project: Path, *, env: Mapping[str, str] | None = None,
             output_cap: int = OUTPUT_CAP) -> GateResult:
    """Run one gate in ``project`` (or its ``cwd`` under it) to its exit or its timeout."""
    cwd = project / gate.cwd if gate.cwd else project
    started = time.monotonic()
    # In the gates process a stop (SIGTERM) must not come between the gate's start and
    # its being known, or the gate would outlive it: held until the gate is listed.
    held = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGTERM}) if _stoppable \
        else None
    try:
        process = subprocess.Popen(
            gate.argv, cwd=cwd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT, start_new_session=True,
            env={**os.environ, **(env or {})},
            preexec_fn=None if held is None else lambda: signal.pthread_sigmask(
                signal.SIG_SETMASK, held))
        _running.add(process.pid)
    except OSError as exc:
        reason = exc.strerror or str(exc)
        return GateResult(gate.name, None, f"cannot run {gate.argv[0]!r}: {reason}\n",
                          time.monotonic() - started)
    finally:
        if held is not None:
            signal.pthread_sigmask(signal.SIG_SETMASK, held)
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
        _running.discard(process.pid)
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


def _stopped(signum: int, _frame: FrameType | None) -> None:
    """Stopped (the invoke was cancelled): the running gate's group goes first."""
    for pgid in list(_running):
        _kill_group(pgid)
    os._exit(128 + signum)


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m interlock.runtime.ralph.gates PROJECT``: run PROJECT's gates, print the
    report (a YAML document closed by ``...``); exit 0 (the report says whether they
    passed), 2 when the configuration is unreadable."""
    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) != 1:
        sys.stderr.write("usage: python -m interlock.runtime.ralph.gates PROJECT\n")
        return 2
    project = Path(args[0])
    try:
        config = load_ralph_config(project)
    except RalphConfigError as exc:
        sys.stderr.write(f"{exc}\n")
        return 2
    global _stoppable
    _stoppable = True
    signal.signal(signal.SIGTERM, _stopped)
    report = run_gates(config.gates, project)
    # ``v`` (seed 001's verdict field) is what a command invoke's answer carries by default
    answer = {"v": "GO" if report.passed else "NO-GO", **report.to_json()}
    sys.stdout.write(yaml.safe_dump(answer, sort_keys=False) + "...\n")
    sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
