"""An invoked agent's process: its streams spooled to files, so another runner can adopt it.

A dispatch (``runtime/dispatch``) reads its agent through pipes, which die with the
dispatcher. An invoked agent must outlive a crashed runner and be read on by the next
one, so here stdin, stdout and stderr are files in the invocation's spool folder, and
the agent runs under a tiny ``sh`` shim (the process group leader) that writes the
agent's exit status to a file: a runner that is not the parent can still learn it.
:func:`spooled_dispatch` is the dispatcher's :class:`Dispatch` (the polling_state
machine, completion detection, the result) with its process side a
:class:`SpooledDriver`: reads tail the spool files, the exit comes from a pidfd. Nothing
is signalled unless its pid and start time (or its INTERLOCK_DISPATCH_ID) show it is still
our agent.

:class:`ProcessHandler` is what ``command:`` and ``agent:`` invokes share as invoke
handlers (``invoke_command.py``, ``invoke_agents.py``): start the process, adopt it by pid
and start time after a restart, stop it, read its outcome (:func:`outcome`).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import os
import shutil
import subprocess
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from interlock.machines.ir import InvokeIR
from interlock.runtime.config.dispatch import PollingConfiguration
from interlock.runtime.dispatch.output import Stream
from interlock.runtime.dispatch.polling import Dispatch
from interlock.runtime.dispatch.process import READ_SIZE, AgentProcess, SpawnError, working_folder
from interlock.runtime.dispatch.result import DispatchResult
from interlock.runtime.dispatch.types import AgentCommand, ProcessRun
from interlock.runtime.engine.agent_output import AgentOutput, Usage
from interlock.runtime.engine.invoke_handler import (
    START_WAIT,
    Flight,
    InvokeError,
    InvokeHost,
    Item,
    Stopped,
    names_of,
    spawn_error_data,
    time_left,
)
from interlock.runtime.engine.prompts import PromptError, render_prompt
from interlock.runtime.host.procfs import (
    DISPATCH_ID_VAR,
    carries_dispatch_id,
    find_unnoted,
    group_members,
    is_exiting,
    start_ticks,
)

# Seconds between reads of the spool files while the agent runs: often at first (an
# offline agent answers within a second), then less (a real agent works for minutes, and
# its exit is heard at once through its pidfd, which drains the spools).
TAIL_INTERVAL = 0.01
TAIL_INTERVAL_LATER = 0.05
TAIL_FAST_FOR = 1.0  # seconds from the start
# The group leader: run the agent, then write its exit status where any runner can read it.
SHIM = 'status=$1; shift; "$@"; code=$?; printf "%s\\n" "$code" > "$status"; exit "$code"'


@dataclass(frozen=True, slots=True)
class Spool:
    """The files of one invocation, under the session folder."""

    folder: Path

    @property
    def stdin(self) -> Path:
        return self.folder / "stdin"

    @property
    def stdout(self) -> Path:
        return self.folder / "stdout"

    @property
    def stderr(self) -> Path:
        return self.folder / "stderr"

    @property
    def status(self) -> Path:
        return self.folder / "exit"

    def exit_code(self) -> int | None:
        """What the shim wrote: the agent's exit status, or None (killed, or running)."""
        try:
            return int(self.status.read_text().strip())
        except (OSError, ValueError):
            return None


def runnable(program: str, cwd: str | None, env: Mapping[str, str] | None) -> bool:
    """Whether ``program`` names an executable (a path, relative to ``cwd``, or a name on
    the agent's PATH)."""
    if "/" in program:
        path = Path(program)
        if not path.is_absolute() and cwd is not None:
            path = Path(cwd) / path
        return path.is_file() and os.access(path, os.X_OK)
    search = {**os.environ, **(env or {})}.get("PATH", os.defpath)
    return shutil.which(program, path=search) is not None


class SpooledAgent(AgentProcess):
    """An invoked agent: started here (:meth:`spawn`) or adopted by pid and start time
    (:meth:`adopt`). ``fds`` are the spool files opened for reading."""

    def __init__(self, argv: Sequence[str], dispatch_id: str, spool: Spool, pid: int,
                 ticks: str | None, popen: subprocess.Popen[bytes] | None) -> None:
        # AgentProcess.__init__ starts a piped process; this class has files instead.
        self.argv = tuple(argv)
        self.dispatch_id = dispatch_id
        self.spool = spool
        self.pid = pid
        self.pgid = pid
        self.ticks = ticks
        self.returncode: int | None = None
        self._popen_child = popen
        self._exited = False
        self.stdin_fd: int | None = None
        self.pidfd = -1  # -1: the process was gone when we looked
        if ticks is not None:
            with contextlib.suppress(ProcessLookupError):
                pidfd = os.pidfd_open(pid)
                if start_ticks(pid) == ticks:  # the pidfd names our agent, not a reused pid
                    self.pidfd = pidfd
                else:
                    os.close(pidfd)
        if self.pidfd < 0:
            self._exited = True
        self.fds: dict[Stream, int] = {
            "stdout": os.open(spool.stdout, os.O_RDONLY | os.O_CREAT, 0o600),
            "stderr": os.open(spool.stderr, os.O_RDONLY | os.O_CREAT, 0o600),
        }

    @classmethod
    def spawn(cls, argv: Sequence[str], dispatch_id: str, spool: Spool, prompt: str | None,
              env: Mapping[str, str] | None, cwd: str | None) -> SpooledAgent:
        if not argv:
            raise SpawnError("no command given")
        if not runnable(argv[0], cwd, env):
            raise SpawnError(f"command not found: {argv[0]!r}")
        spool.folder.mkdir(parents=True, exist_ok=True, mode=0o700)
        if prompt is not None:
            spool.stdin.write_text(prompt, encoding="utf-8")
        environment = {**os.environ, **working_folder(cwd), **(env or {}),
                       "PYTHONUNBUFFERED": "1", DISPATCH_ID_VAR: dispatch_id}
        with contextlib.ExitStack() as files:
            stdin: Any = (files.enter_context(spool.stdin.open("rb")) if prompt is not None
                          else subprocess.DEVNULL)
            stdout = files.enter_context(spool.stdout.open("wb"))
            stderr = files.enter_context(spool.stderr.open("wb"))
            try:
                popen = subprocess.Popen(
                    ["/bin/sh", "-c", SHIM, "interlock-invoke", str(spool.status), *argv],
                    stdin=stdin, stdout=stdout, stderr=stderr, cwd=cwd, env=environment,
                    start_new_session=True, close_fds=True)
            except OSError as exc:
                raise SpawnError(f"cannot start {argv[0]!r}: {exc.strerror or exc}") from None
        return cls(argv, dispatch_id, spool, popen.pid, start_ticks(popen.pid), popen)

    @classmethod
    def adopt(cls, argv: Sequence[str], dispatch_id: str, spool: Spool, pid: int,
              ticks: str) -> SpooledAgent:
        """Reattach to a running (or finished) agent another runner started."""
        return cls(argv, dispatch_id, spool, pid, ticks, None)

    # -- output -----------------------------------------------------------------------

    def read(self, stream: Stream) -> bytes | None:
        fd = self.fds.get(stream)
        if fd is None:
            return None
        return os.read(fd, READ_SIZE)  # b"": nothing new yet (a file has no end while written)

    def close_stream(self, stream: Stream) -> None:
        fd = self.fds.pop(stream, None)
        if fd is not None:
            os.close(fd)

    def write_prompt(self) -> bool:
        return True  # the prompt is the stdin file

    # -- exit -------------------------------------------------------------------------

    def leader_is_ours(self) -> bool:
        """The shim still runs as the process we started (pid and start time agree)."""
        return self.ticks is not None and start_ticks(self.pid) == self.ticks

    def poll(self) -> int | None:
        if self.returncode is not None:
            return self.returncode
        if self._popen_child is not None:
            code = self._popen_child.poll()
            if code is None:
                return None
            self._exited = True
        elif not self._exited and self.leader_is_ours():
            return None
        self._exited = True
        self.returncode = self.spool.exit_code()
        return self.returncode

    @property
    def exited(self) -> bool:
        self.poll()
        return self._exited

    def _ours(self) -> list[int]:
        return [pid for pid in group_members(self.pgid)
                if carries_dispatch_id(pid, self.dispatch_id)]

    def signal_group(self, signum: int) -> None:
        """Signal the group only while it is provably ours."""
        if self.leader_is_ours() or self._ours():
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.pgid, signum)

    def group_alive(self) -> bool:
        if not self.exited:
            return True
        try:  # one syscall for the usual case: nothing at all is left of the group
            os.killpg(self.pgid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            pass
        # something is: a live member of ours, one exiting (its environment reads empty
        # before it is a zombie), or only zombies
        return bool(self._ours()) or any(is_exiting(pid) for pid in group_members(self.pgid))

    def detach(self) -> None:
        """Let go of the agent without stopping it (another runner now owns it)."""
        self._popen_child = None
        for stream in list(self.fds):
            self.close_stream(stream)
        if self.pidfd >= 0:
            with contextlib.suppress(OSError):
                os.close(self.pidfd)
            self.pidfd = -1

    def close(self) -> None:
        for stream in list(self.fds):
            self.close_stream(stream)
        if self.pidfd >= 0:
            with contextlib.suppress(OSError):
                os.close(self.pidfd)
            self.pidfd = -1
        if self._popen_child is not None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                self._popen_child.wait(timeout=1)


class SpooledDriver:
    """The process side of an invoked agent's dispatch (a
    :class:`~interlock.runtime.dispatch.types.ProcessDriver`): the agent spawned on spool
    files, or adopted when ``adopt`` = (pid, start ticks); its output read by tailing the
    files, its exit heard through a pidfd. With :attr:`detached` set before the run is
    cancelled, the agent is left running (another runner owns it now)."""

    def __init__(self, spool: Spool, adopt: tuple[int, str] | None = None) -> None:
        self.spool = spool
        self.adopt = adopt
        self.agent: SpooledAgent | None = None
        self.detached = False
        self._tail_fast_until = 0.0  # loop time until which the spools are read often

    def spawn(self, run: ProcessRun) -> SpooledAgent:
        command = run.command
        if self.adopt is not None:
            agent = SpooledAgent.adopt(command.argv, run.dispatch_id, self.spool, *self.adopt)
        else:
            options = command.options
            env = dict(options.env) if options.env is not None else None
            cwd = str(options.cwd) if options.cwd is not None else None
            agent = SpooledAgent.spawn(command.argv, run.dispatch_id, self.spool,
                                       command.prompt, env, cwd)
        self.agent = agent
        return agent

    def watch(self, run: ProcessRun, process: AgentProcess) -> None:
        agent = self._ours(process)
        loop = run.loop
        if agent.pidfd >= 0:
            loop.add_reader(agent.pidfd, run.guarded, self._exited, run, agent)
        else:
            loop.call_soon(run.guarded, self._exited, run, agent)
        self._tail_fast_until = loop.time() + TAIL_FAST_FOR
        run.arm("tail", loop.time() + TAIL_INTERVAL, lambda: self._tail(run))

    async def stop(self, run: ProcessRun, process: AgentProcess) -> None:
        agent = self._ours(process)
        if not self.detached:
            await run.terminate(agent)
            return
        if agent.pidfd >= 0:
            run.loop.remove_reader(agent.pidfd)
        agent.detach()

    def _ours(self, process: AgentProcess) -> SpooledAgent:
        assert process is self.agent and self.agent is not None
        return self.agent

    def _tail(self, run: ProcessRun) -> None:
        run.drain()
        if not run.finished():
            now = run.loop.time()
            wait = TAIL_INTERVAL if now < self._tail_fast_until else TAIL_INTERVAL_LATER
            run.arm("tail", now + wait, lambda: self._tail(run))

    @staticmethod
    def _exited(run: ProcessRun, agent: SpooledAgent) -> None:
        if agent.pidfd >= 0:
            run.loop.remove_reader(agent.pidfd)
        run.exited(agent.poll())


class StartedHook:
    """An :class:`~interlock.runtime.dispatch.types.AgentRegistry` that hands the spooled
    agent to ``on_started`` before any of its output is read (the invoker journals it)."""

    def __init__(self, on_started: Callable[[SpooledAgent], None]) -> None:
        self.on_started = on_started

    def started(self, dispatch_id: str, process: AgentProcess, started_at: float) -> None:
        assert isinstance(process, SpooledAgent)
        self.on_started(process)

    def stopped(self, dispatch_id: str) -> None:
        """Nothing to forget: the invocation's row records the outcome."""


def spooled_dispatch(command: AgentCommand, config: PollingConfiguration, *, spool: Spool,
                     invocation_id: str, adopt: tuple[int, str] | None = None,
                     timeout: float | None = None, read: Callable[[str], str] | None = None,
                     on_started: Callable[[SpooledAgent], None] | None = None
                     ) -> tuple[Dispatch, SpooledDriver]:
    """The dispatcher's run of one invoked agent on spool files, and its driver: spawned,
    or adopted when ``adopt`` = (pid, start ticks). ``on_started`` sees the process before
    any output is read; ``timeout`` replaces dispatchTimeout (and bounds idleTimeout);
    ``read`` turns raw stdout into the answer text (an adapter's reading)."""
    if timeout is not None:
        limit = max(timeout, 0.001)
        config = config.model_copy(update={"dispatch_timeout": limit,
                                           "idle_timeout": min(config.idle_timeout, limit)})
    driver = SpooledDriver(spool, adopt)
    dispatch = Dispatch(command, config, spill_dir=spool.folder / "spill",
                        dispatch_id=invocation_id, driver=driver, answer=read,
                        registry=StartedHook(on_started) if on_started is not None else None)
    return dispatch, driver


# -- the handler agent and command invokes share ------------------------------------------

# An adapter's read: (stdout, stderr) -> the answer, usage and the CLI's reported error.
Reader = Callable[[str, str], AgentOutput]


@dataclass(frozen=True, slots=True)
class ProcessCommand:
    """What a process invoke runs: the command, how its output reads (an adapter's
    ``read``; None: stdout is the answer), and its dispatch settings (None: the
    invoker's)."""

    command: AgentCommand
    read: Reader | None = None
    config: PollingConfiguration | None = None


@dataclass(frozen=True, slots=True)
class SpooledRun:
    """A process invoke's work: the dispatch following it, its driver, its reader."""

    dispatch: Dispatch
    driver: SpooledDriver
    read: Reader | None


class ProcessHandler:
    """The :class:`~interlock.runtime.engine.invoke_handler.InvokeHandler` of invokes
    whose work is one spooled process (``command:`` and ``agent:``): a kind says what
    to run (:meth:`command`); starting, adopting by pid and start time, stopping and
    reading the outcome are the same for both."""

    def __init__(self, host: InvokeHost) -> None:
        self.host = host
        self.spec_dir = Path(host.spec_path).parent

    def command(self, invoke: InvokeIR, context: Mapping[str, Any],
                item: Item | None = None) -> ProcessCommand:
        """What ``invoke`` runs now (for a fan-out's ``item``). Raises
        :class:`InvokeError`."""
        raise NotImplementedError

    def prompt(self, invoke: InvokeIR, context: Mapping[str, Any],
               item: Item | None = None) -> str | None:
        """The invoke's rendered prompt (``prompt:`` or ``prompt_file:``), or None."""
        template: str | Path | None = invoke.prompt
        if template is None and invoke.prompt_file is not None:
            template = self.spec_dir / invoke.prompt_file
        try:
            return None if template is None else render_prompt(
                template, context=context, input=invoke.input, scope=names_of(item))
        except PromptError as exc:
            raise InvokeError(f"invoke {invoke.id!r} prompt: {exc}") from None

    def start(self, invoke: InvokeIR, context: Mapping[str, Any],
              item: Item | None = None) -> tuple[Flight, str | None]:
        try:
            built: ProcessCommand | None = self.command(invoke, context, item)
            error = None
        except InvokeError as exc:
            built, error = None, str(exc)
        flight = self.host.open_flight(invoke, built.command.argv if built else (), item)
        if built is None:
            self.host.spawn_failed(flight, error or "")
            return flight, f"spawn_error: {error}"
        self._launch(flight, built, context)
        flight.started.wait(START_WAIT)
        return flight, None

    def adopt(self, flight: Flight, context: Mapping[str, Any]) -> str | None:
        record = flight.record
        if record.pid is None and (found := find_unnoted(record.id)) is not None:
            # the runner died between starting the agent and noting its pid: note it now
            self.host.store.invocation_started(record.id, found[0], found[0], found[1])
            record = flight.record = dataclasses.replace(
                record, pid=found[0], pgid=found[0], start_ticks=found[1])
        if record.pid is None or not record.start_ticks:
            return None
        try:
            built: ProcessCommand | None = self.command(flight.invoke, context, flight.item)
        except InvokeError:
            built = None
        self._launch(flight, ProcessCommand(AgentCommand(record.argv, None, record.invoke),
                                            built.read if built else None,
                                            built.config if built else None),
                     context, adopt=(record.pid, record.start_ticks))
        return f"pid {record.pid}"

    def stop(self, flight: Flight, outcome_kind: str) -> Stopped:
        run = flight.work
        if outcome_kind == "detached" and isinstance(run, SpooledRun):
            run.driver.detached = True

        async def stop() -> None:
            task = flight.task
            if task is None:
                return
            task.cancel()
            with contextlib.suppress(BaseException):
                await task

        flight.started.wait(START_WAIT)
        asyncio.run_coroutine_threadsafe(stop(), self.host.loop).result(timeout=30)
        return Stopped()

    def _launch(self, flight: Flight, built: ProcessCommand, context: Mapping[str, Any], *,
                adopt: tuple[int, str] | None = None) -> None:
        host, record, read = self.host, flight.record, built.read
        timeout = time_left(flight.invoke, context, record, host.clock)

        def started(agent: SpooledAgent) -> None:
            if adopt is None and agent.ticks is not None:
                host.store.invocation_started(record.id, agent.pid, agent.pgid, agent.ticks)
                flight.record = dataclasses.replace(record, pid=agent.pid, pgid=agent.pgid,
                                                    start_ticks=agent.ticks)
            flight.started.set()

        dispatch, driver = spooled_dispatch(
            built.command, built.config or host.config, spool=Spool(Path(record.spool)),
            invocation_id=record.id, adopt=adopt, timeout=timeout, on_started=started,
            read=(lambda text: read(text, "").answer) if read is not None else None)
        flight.work = SpooledRun(dispatch, driver, read)

        def schedule() -> None:
            task = host.loop.create_task(dispatch.run())
            flight.task = task
            task.add_done_callback(lambda t: self._finished(flight, t))

        host.loop.call_soon_threadsafe(schedule)

    def _finished(self, flight: Flight, task: asyncio.Future[DispatchResult]) -> None:
        """On the invoker's loop: deliver the outcome, unless a cancel came first."""
        flight.started.set()
        if task.cancelled() or not self.host.settle(flight):
            return
        # The outcome is written to the invocations table by the runner as it takes the
        # event (Runner.pump -> Invoker.ended), so this thread does not compete with it
        # for the store between the offer and the step; recover() settles one taken by
        # nobody.
        error = task.exception()
        if error is not None:
            data = spawn_error_data(flight.record, f"{type(error).__name__}: {error}")
            self.host.deliver(flight, data, "spawn_error")
            return
        run = flight.work
        assert isinstance(run, SpooledRun)
        data, reason = outcome(task.result(), run.dispatch, run.read, flight.record.id)
        self.host.deliver(flight, data, reason)


def outcome(result: DispatchResult, dispatch: Dispatch, read: Reader | None,
            invocation_id: str) -> tuple[dict[str, Any], str | None]:
    """The event data of a finished dispatch and its failure reason (None: done). Where
    the CLI said what went wrong (its adapter's reading), its words are the message and
    its reason (``auth``, ``rate_limited``, ...) the reason; tool calls it refused are
    listed as ``denials``."""
    polling = result.polling
    json = polling.to_json()
    check = dispatch.check()
    output = read(polling.stdout, polling.stderr) if read is not None else None
    usage = output.usage if output is not None else Usage()
    answer = check.document if check.complete else None
    data: dict[str, Any] = {"result": json, "answer": answer, "verdict": json["verdict"],
                            "usage": usage.to_json(), "invocation": invocation_id}
    if output is not None and output.denials:
        data["denials"] = list(output.denials)
    said = output.error if output is not None else None
    reason: str | None = None
    message: str | None = None
    if polling.status == "timeout":
        reason, message = "timeout", f"no answer within the timeout ({polling.completion_method})"
    elif polling.status == "error":
        if polling.completion_method == "spawn":
            reason, message = "spawn_error", result.error or "the agent could not be started"
        else:
            reason = (output.reason if output is not None else None) or "exit_nonzero"
            message = said or _exit_message(polling.exit_code, polling.stderr)
    elif said is not None:  # the CLI reported a failure, yet exited 0
        reason = (output.reason if output is not None else None) or "agent_error"
        message = said
    elif answer is None and dispatch.answer_text().strip():
        reason, message = "invalid_answer", f"the answer is not a complete document: {check.reason}"
    if reason is not None:
        data["result"] = {**json, "success": False}
        data["reason"] = reason
        data["message"] = message
    return data, reason


def _exit_message(code: int | None, stderr: str) -> str:
    """``the agent exited with N``, and the last line it wrote on stderr."""
    tail = [line.strip() for line in stderr.splitlines() if line.strip()]
    return f"the agent exited with {code}" + (f": {tail[-1]}" if tail else "")
