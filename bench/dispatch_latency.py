"""Time from a sub-agent's answer (or exit) to the dispatch result, against the seed's design.

All in this one process, each run a real subprocess, one run at a time:

(a) the agent answers, then hangs: ``bench/agents/stamped_answer.py`` writes a compact-YAML
    review of more than 100 bytes (so the seed's minimum length holds), one write per line,
    its last byte ``--answer-at`` (0.5 s) after the spawn, then sleeps 180 s without a
    byte more and without exiting (the seed's failure). Measured: last answer byte -> result.

    * interlock, default config (pollingInterval 1 s, minSilenceCycles 2: silence counted
      from the last stdout byte, a 2 s window); target: window + 50 ms;
    * interlock, the answer closed by an explicit ``...`` line (``--end-marker``); target:
      20 ms, as for an exit (a few ms are expected);
    * interlock running the real ``interlock demo-agent --delay 0.1 --linger 180``: that
      agent does not stamp its writes, so its last byte is the dispatcher's own capture
      (``buffer.streams["stdout"].last_at``, read on the loop's clock); a cross-check;
    * the seed's design, simulated: a fixed 1 s poll grid from the spawn, each poll reading
      the pipe without blocking; complete after 2 polls in a row with no new output once a
      ``v:`` line has been seen. A plain loop that sleeps: it is the baseline;
    * a fixed 180 s wait: 180 s minus the answer time, computed, not waited for.

(b) the agent answers, then exits at once (``os._exit(0)``): process exit -> result, for
    interlock (target <= 20 ms), the seed's design (the exit is seen at the next 1 s poll:
    "process exited but output collected") and the fixed wait (computed).

The agent stamps its last write (just before it, so a result can never seem to precede it)
and its exit on CLOCK_MONOTONIC, which on Linux is system-wide and is the clock of asyncio's
loop, so the stamps compare directly with the moment ``Dispatch.run()`` returns. Interlock's
time includes stopping the agent's process group (SIGTERM, wait until gone); "decided" is
when the machine reached its final state (the run then only stops the group and builds the
result). The seed loop takes its time at detection and kills its child's process group
afterwards, so that cost is not counted for it. A target passes when every repeat meets it.
After every run the bench checks that no process of the agent's group is left (and kills
any, reporting it).

Run: ``python bench/dispatch_latency.py [--repeats 3] [--exit-repeats 20]`` (about 40 s).
Exit status 0 unless the bench itself fails; a missed target is printed as FAIL.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import math
import os
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path

from interlock.runtime.dispatch import (
    AgentCommand,
    Dispatch,
    DispatchResult,
    PollingConfiguration,
    parse_dispatch_config,
)
from interlock.runtime.dispatch.process import kill_group_now
from interlock.runtime.host.procfs import group_members

AGENT = Path(__file__).resolve().parent / "agents" / "stamped_answer.py"
FIXED_WAIT = 180.0  # seconds: the wait the seed set out to remove
LINGER = 180.0  # seconds the hanging agent stays silent after answering
SEED_INTERVAL = 1.0  # the seed's poll period
SEED_CYCLES = 2  # the seed's "no new output for 2 consecutive polls"
SEED_LIMIT = 30.0  # the simulated seed loop gives up after this long (a bench bug, then)
EVENT_TARGET = 0.020  # seconds from an exit (or an end marker) to the result
SILENCE_SLACK = 0.050  # allowed beyond the silence window
V_LINE = re.compile(rb"^v:", re.MULTILINE)

LEFT_RUNNING: list[str] = []  # agent process groups found alive after a run


@dataclass
class Sample:
    """One run: seconds from the agent's last byte (or exit) to the result, and context."""

    latency: float
    answer_at: float  # seconds from the spawn to the last byte (or the exit)
    decided: float | None = None  # seconds from the last byte (or exit) to the final state
    read_lag: float | None = None  # dispatcher's capture of the last byte minus its write
    problem: str | None = None  # the run did not end the expected way


@dataclass
class Row:
    scenario: str
    method: str
    samples: list[Sample]
    target: float | None = None
    computed: bool = False
    notes: list[str] = field(default_factory=list)

    @property
    def latencies(self) -> list[float]:
        """Of the runs that could be measured (a run without a stamp is a problem)."""
        return [s.latency for s in self.samples if math.isfinite(s.latency)]

    @property
    def median(self) -> float:
        return statistics.median(self.latencies) if self.latencies else math.nan

    @property
    def worst(self) -> float:
        return max(self.latencies, default=math.nan)

    @property
    def problems(self) -> list[str]:
        return [s.problem for s in self.samples if s.problem]

    @property
    def passed(self) -> bool | None:
        if self.target is None:
            return None
        return not self.problems and self.worst <= self.target


# -- runs -------------------------------------------------------------------------------------


def _check_group_gone(pgid: int, label: str) -> None:
    members = list(group_members(pgid))
    if members:
        LEFT_RUNNING.append(f"{label}: process group {pgid} still had {members}; killed")
        kill_group_now(pgid)


def _read_stamps(path: Path) -> dict[str, float]:
    stamps: dict[str, float] = {}
    with contextlib.suppress(FileNotFoundError):
        for line in path.read_text().splitlines():
            key, _, value = line.partition(" ")
            stamps[key] = float(value)
    return stamps


def _agent_argv(stamp: Path, t0: float, answer_at: float, *flags: str) -> tuple[str, ...]:
    return (sys.executable, str(AGENT), str(stamp), repr(t0), repr(answer_at), *flags,
            "--linger", repr(LINGER))


class _TimedDispatch(Dispatch):
    """A Dispatch that notes when its machine reached a final state: ``run()`` goes on to
    stop the agent's process group right then (bench instrumentation only)."""

    decided_at: float | None = None

    async def _stop_process(self) -> None:
        self.decided_at = asyncio.get_running_loop().time()
        await super()._stop_process()


async def _dispatch(argv: tuple[str, ...], config: PollingConfiguration
                    ) -> tuple[_TimedDispatch, DispatchResult, float]:
    run = _TimedDispatch(AgentCommand(argv, name="bench"), config)
    result = await run.run()
    return run, result, asyncio.get_running_loop().time()


def _run_interlock(argv: tuple[str, ...], config: PollingConfiguration
                   ) -> tuple[_TimedDispatch, DispatchResult, float]:
    run, result, done = asyncio.run(_dispatch(argv, config))
    if run.process is not None:
        _check_group_gone(run.process.pgid, "interlock")
    return run, result, done


def _problem(result: DispatchResult, method: str) -> str | None:
    polling = result.polling
    if polling.status == "completed" and polling.completion_method == method:
        return None
    return (f"ended {polling.status}/{polling.completion_method}, expected completed/{method}"
            + (f" ({result.error})" if result.error else ""))


def interlock_stamped(tmp: Path, config: PollingConfiguration, answer_at: float, *,
                      end_marker: bool = False, exits: bool = False) -> Sample:
    stamp = tmp / f"{uuid.uuid4().hex}.stamps"
    flags = (("--end-marker",) if end_marker else ()) + (("--exit",) if exits else ())
    t0 = time.monotonic()
    run, result, done = _run_interlock(_agent_argv(stamp, t0, answer_at, *flags), config)
    stamps = _read_stamps(stamp)
    ref = stamps.get("exit" if exits else "last")
    if ref is None:
        return Sample(float("nan"), float("nan"), problem="the agent wrote no stamp")
    last_at = run.buffer.streams["stdout"].last_at
    return Sample(
        latency=done - ref, answer_at=ref - t0,
        decided=None if run.decided_at is None else run.decided_at - ref,
        read_lag=None if last_at is None or "last" not in stamps else last_at - stamps["last"],
        problem=_problem(result, "exit" if exits else "marker"))


def interlock_demo_agent(config: PollingConfiguration) -> Sample:
    argv = (sys.executable, "-m", "interlock.runtime.cli", "demo-agent", "--role", "TECHLEAD",
            "--prompt", "bench", "--delay", "0.1", "--linger", repr(LINGER))
    t0 = time.monotonic()
    run, result, done = _run_interlock(argv, config)
    last_at = run.buffer.streams["stdout"].last_at
    if last_at is None:
        return Sample(float("nan"), float("nan"), problem="no stdout captured")
    return Sample(latency=done - last_at, answer_at=last_at - t0,
                  decided=None if run.decided_at is None else run.decided_at - last_at,
                  problem=_problem(result, "marker"))


def _read_available(fd: int) -> bytes:
    data = b""
    while True:
        try:
            chunk = os.read(fd, 65536)
        except BlockingIOError:
            return data
        if not chunk:
            return data
        data += chunk


def _exited(pid: int) -> bool:
    """Whether the child has exited, without reaping it (its pid, and so its process group
    id, stays taken until we wait for it)."""
    return os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None


def seed_poll(argv: tuple[str, ...], t0: float) -> tuple[str, float]:
    """The seed's loop: poll every SEED_INTERVAL on a fixed grid from ``t0`` (the spawn).
    Returns how it completed and when it knew (before killing the child's group)."""
    proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                            stderr=subprocess.DEVNULL, start_new_session=True)
    assert proc.stdout is not None
    fd = proc.stdout.fileno()
    os.set_blocking(fd, False)
    output, silent, k = b"", 0, 0
    try:
        while True:
            k += 1
            time.sleep(max(0.0, t0 + k * SEED_INTERVAL - time.monotonic()))
            new = _read_available(fd)
            exited = _exited(proc.pid)
            if new:
                output += new
                silent = 0
            elif V_LINE.search(output):
                silent += 1
            if exited:
                return "exit", time.monotonic()
            if silent >= SEED_CYCLES:
                return "marker", time.monotonic()
            if k * SEED_INTERVAL >= SEED_LIMIT:
                return "timeout", time.monotonic()
    finally:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        proc.stdout.close()
        _check_group_gone(proc.pid, "seed loop")


def seed_stamped(tmp: Path, answer_at: float, *, exits: bool = False) -> Sample:
    stamp = tmp / f"{uuid.uuid4().hex}.stamps"
    t0 = time.monotonic()
    argv = _agent_argv(stamp, t0, answer_at, *(("--exit",) if exits else ()))
    method, done = seed_poll(argv, t0)
    ref = _read_stamps(stamp).get("exit" if exits else "last")
    if ref is None:
        return Sample(float("nan"), float("nan"), problem="the agent wrote no stamp")
    expected = "exit" if exits else "marker"
    problem = None if method == expected else f"ended by {method}, expected {expected}"
    return Sample(latency=done - ref, answer_at=ref - t0, problem=problem)


def fixed_wait(answered: list[Sample]) -> list[Sample]:
    """The fixed wait, computed: it returns FIXED_WAIT after the spawn, whatever happens."""
    return [Sample(latency=FIXED_WAIT - s.answer_at, answer_at=s.answer_at) for s in answered]


# -- report -----------------------------------------------------------------------------------


def _ms(seconds: float) -> str:
    return f"{seconds * 1000:,.1f}" if math.isfinite(seconds) else "-"


def _ratio(base: float, value: float) -> str:
    return f"{base / value:.2f}x" if math.isfinite(base / value) and value > 0 else "-"


def print_table(rows: list[Row], seed: dict[str, Row], fixed: dict[str, Row]) -> None:
    header = (f"{'scenario':<18}{'method':<40}{'median ms':>12}{'max ms':>12}"
              f"{'target ms':>12}  {'result':<8}{'vs seed':>9}{'vs 180 s':>11}")
    print(header)
    print("-" * len(header))
    for row in rows:
        target = "-" if row.target is None else f"<= {_ms(row.target)}"
        verdict = {None: "-", True: "pass", False: "FAIL"}[row.passed]
        vs_seed = _ratio(seed[row.scenario].median, row.median)
        vs_fixed = _ratio(fixed[row.scenario].median, row.median)
        worst = "-" if row.computed else _ms(row.worst)
        print(f"{row.scenario:<18}{row.method:<40}{_ms(row.median):>12}{worst:>12}"
              f"{target:>12}  {verdict:<8}{vs_seed:>9}{vs_fixed:>11}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3,
                        help="runs per method for scenario (a), and for the seed loop in (b)")
    parser.add_argument("--exit-repeats", type=int, default=20,
                        help="interlock runs for scenario (b)")
    parser.add_argument("--answer-at", type=float, default=0.5,
                        help="seconds from the spawn to the agent's last answer byte")
    args = parser.parse_args(argv)
    if args.repeats < 1 or args.exit_repeats < 1:
        parser.error("repeats must be at least 1")

    config = parse_dispatch_config({"dispatchTimeout": 200, "pollingInterval": 1})
    window = config.polling_interval * config.completion_markers.min_silence_cycles
    hang, gone = "(a) answer, hang", "(b) answer, exit"
    print(f"python {sys.version.split()[0]}, {os.cpu_count()} CPUs; answer "
          f"~{args.answer_at:g} s after spawn; interlock: pollingInterval "
          f"{config.polling_interval:g} s, minSilenceCycles "
          f"{config.completion_markers.min_silence_cycles} (window {window:g} s), "
          f"dispatchTimeout {config.dispatch_timeout:g} s")
    print(f"(a) {args.repeats} runs per method, (b) {args.exit_repeats} interlock runs and "
          f"{args.repeats} seed-loop runs; times from the agent's last answer byte (a) or its "
          "exit (b) to the result\n")

    with tempfile.TemporaryDirectory(prefix="interlock-bench-") as tmp_name:
        tmp = Path(tmp_name)
        n = args.repeats
        default = [interlock_stamped(tmp, config, args.answer_at) for _ in range(n)]
        marker = [interlock_stamped(tmp, config, args.answer_at, end_marker=True)
                  for _ in range(n)]
        demo = [interlock_demo_agent(config) for _ in range(n)]
        seed_a = [seed_stamped(tmp, args.answer_at) for _ in range(n)]
        exits = [interlock_stamped(tmp, config, args.answer_at, exits=True)
                 for _ in range(args.exit_repeats)]
        seed_b = [seed_stamped(tmp, args.answer_at, exits=True) for _ in range(n)]

    seed = {hang: Row(hang, "seed design: 1 s poll grid, 2 silent", seed_a),
            gone: Row(gone, "seed design: exit seen at next 1 s poll", seed_b)}
    fixed = {hang: Row(hang, "fixed 180 s wait (computed, not run)", fixed_wait(default),
                       computed=True),
             gone: Row(gone, "fixed 180 s wait (computed, not run)", fixed_wait(exits),
                       computed=True)}
    rows = [
        Row(hang, f"interlock, default ({window:g} s window)", default,
            target=window + SILENCE_SLACK),
        Row(hang, "interlock, `...` end marker", marker, target=EVENT_TARGET),
        Row(hang, "interlock, real demo-agent (cross-check)", demo,
            target=window + SILENCE_SLACK),
        seed[hang], fixed[hang],
        Row(gone, "interlock (exit via pidfd)", exits, target=EVENT_TARGET),
        seed[gone], fixed[gone],
    ]
    print_table(rows, seed, fixed)

    print("\nvs seed / vs 180 s: that method's median / this row's median (higher is faster).")
    print("The fixed 180 s wait is computed as 180 s minus the measured answer (or exit) time "
          "of the interlock runs; the bench does not wait for it.")
    for label, samples in (("default", default), ("end marker", marker),
                           ("demo-agent", demo), ("exit", exits)):
        decided = [s.decided for s in samples if s.decided is not None]
        if decided:
            print(f"interlock {label}: decided {_ms(statistics.median(decided))} ms "
                  f"(median) after the last byte/exit, the rest is stopping the agent's group")
    lags = [s.read_lag for s in default + marker + exits if s.read_lag is not None]
    if lags:
        print(f"dispatcher captured the agent's last write {_ms(min(lags))}..{_ms(max(lags))} ms "
              "after the agent's stamp (a negative value would mean the clocks disagree)")
    for label, samples in (("stamped agent", default + marker + seed_a),
                           ("demo-agent", demo)):
        answered = [s.answer_at for s in samples if math.isfinite(s.answer_at)]
        if answered:
            print(f"answer time (spawn -> last byte), {label}: {_ms(min(answered))}.."
                  f"{_ms(max(answered))} ms")

    failed = False
    for row in rows:
        for problem in row.problems:
            print(f"FAIL: {row.scenario} / {row.method}: {problem}")
            failed = True
        if row.passed is False and not row.problems:
            assert row.target is not None
            print(f"FAIL: {row.scenario} / {row.method}: max {_ms(row.worst)} ms > target "
                  f"{_ms(row.target)} ms")
            failed = True
    for leak in LEFT_RUNNING:
        print(f"FAIL: agent left running: {leak}")
        failed = True
    print("\nall targets met" if not failed else "\nFAIL: see above")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
