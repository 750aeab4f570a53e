"""The polling loop: one sub-agent dispatch, a process driven by output, timers and the
``polling_state`` machine.

The dispatcher owns the process and the clock; the machine (``specs/polling_state.yaml``,
run as an in-memory :class:`~interlock.runtime.engine.session.Session`) owns every decision. The
dispatcher feeds it events as things happen, on one asyncio loop, with no fixed sleep:

* ``chunk`` for every read from stdout or stderr (the bytes go to the output buffer
  first, whatever the machine's state, so nothing is ever dropped);
* ``marker`` when new stdout holds an end pattern (``...``, ``---``, a fence, ``}`` +
  newline): the machine's ``document_ended`` guard then parses the output;
* ``poll`` every ``pollingInterval`` from the start (counted as pollCount);
* ``silence`` every ``pollingInterval`` of stdout silence, measured from the last byte:
  ``minSilenceCycles`` of them after a complete document finish the run, so the wait
  after an answer is that window and not up to one more poll period;
* ``exited`` the moment the child exits (a pidfd), after draining what its pipes hold;
* the machine's own ``after`` timers (dispatch and idle timeouts).

When the machine reaches a final state the process group is stopped (TERM, then KILL
after ``terminateGrace``) and a :class:`DispatchResult` is built.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import signal
import tempfile
import time
import uuid
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from interlock.machines import Call, MachineIR, compile, ir_of
from interlock.machines.backends.base import CompiledMachine
from interlock.runtime.config.dispatch import PollingConfiguration
from interlock.runtime.dispatch.document import DocumentCheck, check_document
from interlock.runtime.dispatch.output import STREAMS, OutputBuffer, OutputChunk, Stream
from interlock.runtime.dispatch.process import AgentProcess, SpawnError
from interlock.runtime.dispatch.result import DispatchResult, PollingResult
from interlock.runtime.dispatch.types import (
    AgentCommand,
    AgentRegistry,
    ProcessDriver,
    ProcessRun,
)
from interlock.runtime.dispatch.verdict import parse_verdict
from interlock.runtime.engine.builtin_specs import resolve_spec
from interlock.runtime.engine.session import Session

__all__ = ["Dispatch", "PipeDriver", "dispatch", "dispatch_all", "new_dispatch_id"]

STOP_WAIT_FIRST = 0.0005  # first wait for a signalled group to be gone; doubles each time
STOP_WAIT_STEP = 0.01  # the longest wait between checks
KILL_WAIT = 5.0  # longest wait for a SIGKILLed group to vanish
_ALWAYS_HINTS = ("```",)  # a closing code fence also ends a document


class _LoopClock:
    """The session's clock: the event loop's monotonic time, so timers and the loop agree."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop

    def now(self) -> float:
        return self._loop.time()


@functools.lru_cache(maxsize=1)
def _polling_spec_path() -> Path:
    return resolve_spec("polling_state")


@functools.lru_cache(maxsize=1)
def _polling_ir() -> MachineIR:
    """The built-in polling_state machine, parsed once per process."""
    path = _polling_spec_path()
    return ir_of(path.read_text(encoding="utf-8"), str(path))


def new_dispatch_id() -> str:
    return uuid.uuid4().hex


class PipeDriver:
    """The dispatcher's own process side: the agent started here with pipes
    (:class:`AgentProcess`), read as its pipes become readable, its exit heard through a
    pidfd, the prompt written as its stdin pipe takes it."""

    def spawn(self, run: ProcessRun) -> AgentProcess:
        command = run.command
        prompt = None if command.prompt is None else command.prompt.encode()
        return AgentProcess(command.argv, run.dispatch_id, prompt, command.options)

    def watch(self, run: ProcessRun, process: AgentProcess) -> None:
        loop = run.loop
        for stream, fd in process.fds.items():
            loop.add_reader(fd, run.guarded, run.read_output, stream)
        loop.add_reader(process.pidfd, run.guarded, self._exited, run, process)
        if process.stdin_fd is not None and not process.write_prompt():
            loop.add_writer(process.stdin_fd, run.guarded, self._writable, run, process)

    @staticmethod
    def _writable(run: ProcessRun, process: AgentProcess) -> None:
        fd = process.stdin_fd
        if process.write_prompt() and fd is not None:
            run.loop.remove_writer(fd)

    @staticmethod
    def _exited(run: ProcessRun, process: AgentProcess) -> None:
        run.loop.remove_reader(process.pidfd)
        run.exited(process.poll())

    async def stop(self, run: ProcessRun, process: AgentProcess) -> None:
        await run.terminate(process)


class Dispatch:
    """One run of one agent command. Use :meth:`run` once, inside an event loop.

    ``driver`` is its process side (default: :class:`PipeDriver`); ``answer`` turns stdout
    into the answer text that completion detection reads (an adapter's reading; default:
    stdout as is)."""

    def __init__(self, command: AgentCommand, config: PollingConfiguration, *,
                 spill_dir: Path | None = None, registry: AgentRegistry | None = None,
                 dispatch_id: str | None = None, driver: ProcessDriver | None = None,
                 answer: Callable[[str], str] | None = None) -> None:
        self.command = command
        self.config = config
        self.driver: ProcessDriver = driver or PipeDriver()
        self.answer = answer
        self.dispatch_id = dispatch_id or new_dispatch_id()
        base = spill_dir or Path(tempfile.gettempdir()) / "interlock-dispatch"
        self.spill_dir = base / self.dispatch_id
        self.registry = registry
        self.buffer = OutputBuffer(config.output_memory_cap, self.spill_dir)
        self.process: AgentProcess | None = None
        self.error: str | None = None
        self.session: Session | None = None
        self._check: tuple[int, DocumentCheck] | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._final: asyncio.Future[None] | None = None
        self._timers: dict[str, asyncio.TimerHandle] = {}
        self._start = 0.0
        self._last_stdout: float | None = None
        self._silence_k = 0
        self._poll_n = 0
        self._hint_tail = b""
        markers = config.completion_markers
        patterns = (*markers.yaml_markers, *markers.json_markers, *_ALWAYS_HINTS)
        self._hints = tuple(dict.fromkeys(p.encode() for p in patterns))
        self._hint_keep = max(len(p) for p in self._hints) - 1

    # -- the machine ------------------------------------------------------------------

    def _compile(self) -> CompiledMachine:
        return compile(_polling_ir(), bindings=self._bindings())

    def _context(self) -> dict[str, Any]:
        c = self.config
        m = c.completion_markers
        return {
            "dispatch_timeout": c.dispatch_timeout, "polling_interval": c.polling_interval,
            "idle_timeout": c.idle_timeout, "min_silence_cycles": m.min_silence_cycles,
            "min_output_length": c.min_output_length, "output_format": c.output_format,
            "completion_markers": {"yaml": list(m.yaml_markers), "json": list(m.json_markers),
                                   "required_field": m.required_field},
        }

    def answer_text(self) -> str:
        """The answer text in stdout so far (``answer``'s reading of it)."""
        text = self.buffer.stdout_text()
        return self.answer(text) if self.answer is not None else text

    def check(self) -> DocumentCheck:
        """check_document on the answer text so far, cached until more stdout arrives.

        minOutputLength is not a completion threshold here: seed 001 defines it as the
        output that makes the sub-agent "started" (the ``started`` guard), and a short
        answer such as ``p: QA / v: GO / i: []`` is complete at 19 bytes."""
        size = self.buffer.streams["stdout"].total_bytes
        if self._check is None or self._check[0] != size:
            c = self.config
            m = c.completion_markers
            self._check = (size, check_document(
                self.answer_text(), output_format=c.output_format,
                required_field=m.required_field, min_output_length=0,
                yaml_markers=m.yaml_markers, json_markers=m.json_markers))
        return self._check[1]

    def _bindings(self) -> dict[str, Callable[[Call], Any]]:
        def setter(key: str, value: Any) -> Callable[[Call], None]:
            def action(call: Call) -> None:
                call.context[key] = value
            return action

        def spawn(call: Call) -> None:
            try:
                self._spawn()
            except SpawnError as exc:
                self.error = str(exc)
                call.raise_event("spawn_failed", message=str(exc))

        def count_poll(call: Call) -> None:
            call.context["poll_count"] += 1
            call.context["elapsed_time"] = call.data.get("elapsed", 0.0)

        def record_exit(call: Call) -> None:
            call.context["exit_code"] = call.data.get("exit_code")
            call.context["completion_method"] = "exit"

        def count_silence(call: Call) -> None:
            call.context["silence_cycles"] += 1

        def buffer_chunk(call: Call) -> None:
            if call.data.get("stream") == "stdout":
                call.context["silence_cycles"] = 0

        def silence_reached(call: Call) -> bool:
            """This silent poll (not yet counted: guards run before actions) makes
            min_silence_cycles in a row."""
            context = call.context
            return bool(context["silence_cycles"] + 1 >= context["min_silence_cycles"])

        def stop_clock(call: Call) -> None:
            call.context["elapsed_time"] = self._now() - self._start

        return {
            "spawn_subagent": spawn,
            "start_clock": lambda call: call.context.__setitem__("start_time", time.time()),
            "stop_clock": stop_clock,
            "count_poll": count_poll,
            "exit_ok": lambda call: call.data.get("exit_code") == 0,
            "record_exit": record_exit,
            "record_spawn_error": setter("completion_method", "spawn"),
            "buffer_chunk": buffer_chunk,
            "started": lambda call: self._output_bytes() >= self.config.min_output_length,
            "is_stdout": lambda call: call.data.get("stream") == "stdout",
            "document_complete": lambda call: self.check().complete,
            "document_ended": lambda call: self.check().ended_by_marker,
            "mark_completion_detected": setter("completion_detected", True),
            "clear_completion_detected": setter("completion_detected", False),
            "count_silence": count_silence,
            "silence_reached": silence_reached,
            "document_confirmed": lambda call: (
                silence_reached(call) and self.check().complete),
            "note_marker_completion": setter("completion_method", "marker"),
            "note_dispatch_timeout": setter("completion_method", "timeout"),
            "note_idle_timeout": setter("completion_method", "idle"),
            "terminate_subagent": lambda call: None,  # done by run() once the machine is final
            "build_result": lambda call: None,  # likewise: the result needs the stopped process
        }

    def _output_bytes(self) -> int:
        return sum(s.total_bytes for s in self.buffer.streams.values())

    def _send(self, event: str, data: dict[str, Any] | None = None) -> None:
        assert self.session is not None
        self.session.send(event, data)
        self._after_step()

    def _after_step(self) -> None:
        assert self.session is not None and self._final is not None
        if self.session.is_final:
            if not self._final.done():
                self._final.set_result(None)
            return
        self.arm("session", self.session.next_deadline(), self._fire_timers)

    def _fire_timers(self) -> None:
        assert self.session is not None
        self.session.fire_due()
        self._after_step()

    # -- timers -------------------------------------------------------------------------

    def _now(self) -> float:
        assert self._loop is not None
        return self._loop.time()

    @property
    def loop(self) -> asyncio.AbstractEventLoop:
        """The event loop of the run (set by :meth:`run`)."""
        assert self._loop is not None
        return self._loop

    def guarded(self, callback: Callable[..., object], *args: Any) -> None:
        """Run a loop callback; an exception ends the run (raised by :meth:`run`) instead
        of being logged and forgotten by the loop."""
        try:
            callback(*args)
        except BaseException as exc:
            if self._final is not None and not self._final.done():
                self._final.set_exception(exc)
            if not isinstance(exc, Exception):
                raise

    def arm(self, name: str, when: float | None, callback: Callable[[], None]) -> None:
        """Call ``callback`` at loop time ``when`` (None: never), replacing the timer of
        that name; every timer ends with the run."""
        old = self._timers.pop(name, None)
        if old is not None:
            old.cancel()
        if when is not None:
            assert self._loop is not None
            self._timers[name] = self._loop.call_at(when, self.guarded, callback)

    def _poll(self) -> None:
        self._poll_n += 1
        self.arm("poll", self._start + (self._poll_n + 1) * self.config.polling_interval,
                  self._poll)
        self._send("poll", {"elapsed": self._now() - self._start})

    def _silence(self) -> None:
        self._silence_k += 1
        self._arm_silence()
        self._send("silence", {"cycle": self._silence_k})

    def _arm_silence(self) -> None:
        assert self._last_stdout is not None
        interval = self.config.polling_interval
        self.arm("silence", self._last_stdout + (self._silence_k + 1) * interval,
                  self._silence)

    # -- the process (its driver calls these) -------------------------------------------

    def _spawn(self) -> None:
        """Start the agent through the driver, record it, and start hearing it."""
        process = self.driver.spawn(self)
        self.process = process
        if self.registry is not None:
            try:
                self.registry.started(self.dispatch_id, process, time.time())
            except BaseException:
                process.signal_group(signal.SIGKILL)
                process.close()
                raise
        self.driver.watch(self, process)

    def read_output(self, stream: Stream) -> bool:
        """One read of ``stream`` into the buffer and the machine; False when it had
        nothing (no data now, or end of file)."""
        assert self.process is not None and self._loop is not None
        fd = self.process.fds.get(stream)
        if fd is None:
            return False
        data = self.process.read(stream)
        if data is None:
            self._loop.remove_reader(fd)
            return False
        if not data:
            return False
        now = self._now()
        self.buffer.add(OutputChunk(stream, now, data))
        self._send("chunk", {"stream": stream, "bytes": len(data)})
        if stream == "stdout":
            self._last_stdout = now
            self._silence_k = 0
            if not self.finished():
                self._arm_silence()
            window = self._hint_tail + data
            self._hint_tail = window[-self._hint_keep:] if self._hint_keep else b""
            if any(h in window for h in self._hints):
                self._send("marker")
        return True

    def finished(self) -> bool:
        """Whether the machine has reached a final state (no more silence ticks)."""
        return self.session is None or self.session.is_final

    def drain(self) -> None:
        """Everything the process's output holds right now (after an exit or a stop)."""
        assert self.process is not None
        for stream in STREAMS:
            while self.read_output(stream):
                pass

    def exited(self, code: int | None) -> None:
        """The agent exited with ``code``: read what it left, then tell the machine."""
        self.drain()
        if not self.finished():
            self._send("exited", {"exit_code": code})

    async def _stop_process(self) -> None:
        """Stop the agent through the driver; the registry forgets it."""
        if self.process is None:
            return
        await self.driver.stop(self, self.process)
        if self.registry is not None:
            self.registry.stopped(self.dispatch_id)

    async def terminate(self, process: AgentProcess) -> None:
        """TERM the group, KILL it after the grace, wait until none of it is left, read
        what it left, and release it."""
        if process.group_alive():
            process.signal_group(signal.SIGTERM)
            if not await self._wait_gone(process, self.config.terminate_grace):
                process.signal_group(signal.SIGKILL)
                await self._wait_gone(process, KILL_WAIT)
        self.drain()
        loop = self.loop
        for fd in process.fds.values():
            loop.remove_reader(fd)
        with contextlib.suppress(ValueError, OSError):
            loop.remove_reader(process.pidfd)
        if process.stdin_fd is not None:
            loop.remove_writer(process.stdin_fd)
        process.close()

    async def _wait_gone(self, process: AgentProcess, seconds: float) -> bool:
        deadline = self._now() + seconds
        step = STOP_WAIT_FIRST
        while process.group_alive():
            if self._now() >= deadline:
                return False
            await asyncio.sleep(step)
            step = min(step * 2, STOP_WAIT_STEP)  # most agents are gone within a millisecond
        return True

    # -- running ------------------------------------------------------------------------

    async def run(self) -> DispatchResult:
        """Start the agent, follow it to a final state, stop it, and report."""
        self._loop = asyncio.get_running_loop()
        self._final = self._loop.create_future()
        compiled = self._compile()
        self._start = self._now()
        self.session = Session.start(compiled, _LoopClock(self._loop), self._context())
        try:
            self._send("start")
            if not self.session.is_final:
                self.arm("poll", self._start + self.config.polling_interval, self._poll)
            await self._final
        finally:
            for handle in self._timers.values():
                handle.cancel()
            self._timers.clear()
            await asyncio.shield(self._stop_process())
            self.buffer.close()
        return self._result()

    def _result(self) -> DispatchResult:
        assert self.session is not None
        return self.result_of(self.session.active[0], self.session.context)

    def result_of(self, status: str, context: Mapping[str, Any]) -> DispatchResult:
        """The result of this run, the machine having ended in the top-level state
        ``status`` with ``context``; any status but completed or timeout is an error."""
        if status not in ("completed", "timeout", "error"):
            status = "error"
        check = self.check()
        verdict = parse_verdict(check.document) if check.complete and check.document else None
        stdout = self.buffer.streams["stdout"]
        stderr = self.buffer.streams["stderr"]
        stderr_text = stderr.text()
        if self.error is not None:
            stderr_text = f"{stderr_text}interlock: {self.error}\n"
        polling = PollingResult(
            success=status == "completed",
            stdout=stdout.text(),
            stderr=stderr_text,
            exit_code=context.get("exit_code"),
            elapsed_time=round(self._now() - self._start, 6),
            poll_count=context.get("poll_count", 0),
            status=status,  # type: ignore[arg-type]
            completion_method=context.get("completion_method"),
            verdict=verdict,
        )
        return DispatchResult(
            polling=polling, dispatch_id=self.dispatch_id, name=self.command.name,
            argv=self.command.argv, stdout_bytes=stdout.total_bytes,
            stderr_bytes=stderr.total_bytes,
            stdout_file=str(stdout.spill_path) if stdout.spilled else None,
            stderr_file=str(stderr.spill_path) if stderr.spilled else None,
            error=self.error,
        )


async def dispatch_all(commands: Sequence[AgentCommand], config: PollingConfiguration, *,
                       spill_dir: Path | None = None, registry: AgentRegistry | None = None
                       ) -> list[DispatchResult]:
    """Run every command at once (the seed's four reviewers in parallel); one result each,
    in the order given."""
    runs = [Dispatch(c, config, spill_dir=spill_dir, registry=registry) for c in commands]
    return list(await asyncio.gather(*(r.run() for r in runs)))


def dispatch(command: AgentCommand, config: PollingConfiguration, *,
             spill_dir: Path | None = None, registry: AgentRegistry | None = None
             ) -> DispatchResult:
    """Run one command to its result, on a fresh event loop."""
    return asyncio.run(Dispatch(command, config, spill_dir=spill_dir,
                                registry=registry).run())
