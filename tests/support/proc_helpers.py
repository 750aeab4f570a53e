"""Run a child in its own session and read its pipes line by line, with deadlines, no sleeps."""

from __future__ import annotations

import contextlib
import os
import select
import signal
import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import IO, Literal

AGENTS = Path(__file__).resolve().parent / "agents"
DEADLINE = 20.0  # a safety net against hanging tests, never a pace to wait for

Stream = Literal["stdout", "stderr"]


def agent_argv(name: str, *args: str) -> list[str]:
    """``python tests/support/agents/NAME.py ARGS...``."""
    return [sys.executable, str(AGENTS / f"{name}.py"), *args]


def cli_argv(*args: str) -> list[str]:
    """``python -m interlock.runtime.cli ARGS...``."""
    return [sys.executable, "-m", "interlock.runtime.cli", *args]


class Child:
    """A process group leader whose stdout/stderr are read from the raw pipes.

    Use as a context manager: leaving it SIGKILLs the whole process group and reaps the child,
    so no grandchild outlives the test.
    """

    def __init__(self, argv: Sequence[str], *, stdin: int | None = subprocess.DEVNULL,
                 env: Mapping[str, str] | None = None) -> None:
        self.proc = subprocess.Popen(
            list(argv), stdin=stdin, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            start_new_session=True, env=env,
        )
        self._pending: dict[Stream, bytes] = {"stdout": b"", "stderr": b""}
        self._eof: dict[Stream, bool] = {"stdout": False, "stderr": False}

    def __enter__(self) -> Child:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.kill_group()
        for pipe in (self.proc.stdin, self.proc.stdout, self.proc.stderr):
            if pipe is not None:
                pipe.close()

    @property
    def pid(self) -> int:
        return self.proc.pid

    def _pipe(self, stream: Stream) -> IO[bytes]:
        pipe = self.proc.stdout if stream == "stdout" else self.proc.stderr
        assert pipe is not None
        return pipe

    def _fill(self, stream: Stream, timeout: float | None) -> bool:
        """Read once from the pipe if data or EOF arrives within ``timeout``; False if not."""
        fd = self._pipe(stream).fileno()
        ready, _, _ = select.select([fd], [], [], timeout)
        if not ready:
            return False
        chunk = os.read(fd, 65536)
        if chunk:
            self._pending[stream] += chunk
        else:
            self._eof[stream] = True
        return True

    def readline(self, stream: Stream = "stdout", timeout: float = DEADLINE) -> bytes:
        """The next line with its newline; at EOF the rest (b"" when nothing is left)."""
        while b"\n" not in self._pending[stream] and not self._eof[stream]:
            if not self._fill(stream, timeout):
                raise TimeoutError(f"no line on {stream} within {timeout}s")
        line, sep, rest = self._pending[stream].partition(b"\n")
        self._pending[stream] = rest
        return line + sep

    def lines_until(self, last: str, stream: Stream = "stdout") -> list[str]:
        """Read lines as they arrive until one equals ``last``; returns them without newlines."""
        lines: list[str] = []
        while not lines or lines[-1] != last:
            raw = self.readline(stream)
            if not raw:
                raise AssertionError(f"EOF before {last!r}; got {lines!r}")
            lines.append(raw.decode().rstrip("\n"))
        return lines

    def nothing_pending(self, stream: Stream = "stdout") -> bool:
        """True when no data and no EOF is readable right now (the writer is silent)."""
        return not self._pending[stream] and not self._eof[stream] \
            and not self._fill(stream, 0)

    def drain(self, stream: Stream = "stdout") -> bytes:
        """Everything readable right now, without waiting."""
        while self._fill(stream, 0) and not self._eof[stream]:
            pass
        data, self._pending[stream] = self._pending[stream], b""
        return data

    def read_to_eof(self, stream: Stream = "stdout", timeout: float = DEADLINE) -> bytes:
        """Everything until EOF (all writers closed the pipe)."""
        while not self._eof[stream]:
            if not self._fill(stream, timeout):
                raise TimeoutError(f"no EOF on {stream} within {timeout}s")
        data, self._pending[stream] = self._pending[stream], b""
        return data

    def communicate(self, timeout: float = DEADLINE) -> tuple[bytes, bytes, int]:
        """Read both pipes to EOF and reap the child: (stdout, stderr, returncode)."""
        while not (self._eof["stdout"] and self._eof["stderr"]):
            streams: tuple[Stream, ...] = ("stdout", "stderr")
            fds = {self._pipe(s).fileno(): s for s in streams if not self._eof[s]}
            ready, _, _ = select.select(list(fds), [], [], timeout)
            if not ready:
                raise TimeoutError(f"pipes still open after {timeout}s")
            for fd in ready:
                self._fill(fds[fd], 0)
        code = self.proc.wait(timeout)
        out, err = self._pending["stdout"], self._pending["stderr"]
        self._pending = {"stdout": b"", "stderr": b""}
        return out, err, code

    def kill_group(self) -> None:
        """SIGKILL the child's whole process group (grandchildren too) and reap the child."""
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.proc.pid, signal.SIGKILL)
        self.proc.wait(DEADLINE)
