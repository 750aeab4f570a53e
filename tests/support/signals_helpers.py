"""Helpers for the live-signal stress and crash tests: agent scripts, a ledger, a fleet of
consumer processes whose output is gathered as it arrives, and a census of a mailbox.

Nothing here sleeps to pace a test: waits block on pipes (select) or on processes, with a
deadline as a safety net only. No pytest import: tests/signals_agents/consume.py imports
:class:`Ledger` from here.
"""

from __future__ import annotations

import contextlib
import json
import os
import select
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import IO, Any

from support.proc_helpers import Child

SIGNAL_AGENTS = Path(__file__).resolve().parent / "signal_agents"


def signal_agent_argv(name: str, *args: str) -> list[str]:
    """``python tests/signals_agents/NAME.py ARGS...``."""
    return [sys.executable, str(SIGNAL_AGENTS / f"{name}.py"), *args]


def max_queued_events() -> int:
    """The kernel's per-instance inotify queue size (events beyond it are dropped)."""
    return int(Path("/proc/sys/fs/inotify/max_queued_events").read_text().strip())


class Ledger:
    """Applied signal ids, one per line, appended and fsynced: delivery idempotent by id,
    as the session store's keyed ``offer`` is. Single writer at a time."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def ids(self) -> list[str]:
        try:
            return self.path.read_text(encoding="utf-8").split()
        except FileNotFoundError:
            return []

    def apply(self, signal_id: str) -> bool:
        """Record ``signal_id``; False (nothing written) when it is recorded already."""
        if signal_id in self.ids():
            return False
        fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        try:
            os.write(fd, f"{signal_id}\n".encode())
            os.fsync(fd)
        finally:
            os.close(fd)
        return True


# -- a fleet of processes, their stdout gathered line by line ----------------------------


@dataclass
class _Stream:
    index: int
    name: str
    pipe: IO[bytes]
    sink: IO[bytes]
    pending: bytes = b""
    eof: bool = False


@dataclass
class Fleet:
    """Child processes (each its own process group, killed on exit) whose stdout lines are
    collected as they arrive, and also written to ``out_dir/<name>-<i>.out`` (stderr to
    ``.err``) for a post-mortem. ``counts`` says which stdout lines :attr:`counted` counts.
    """

    argvs: Sequence[Sequence[str]]
    out_dir: Path
    name: str = "child"
    counts: Callable[[str], bool] = lambda line: True
    stdin: int | None = subprocess.DEVNULL
    children: list[Child] = field(default_factory=list)
    lines: list[list[str]] = field(default_factory=list)
    errors: list[bytes] = field(default_factory=list)
    counted: int = 0
    _streams: dict[int, _Stream] = field(default_factory=dict)

    def __post_init__(self) -> None:
        for index, argv in enumerate(self.argvs):
            child = Child(argv, stdin=self.stdin)
            self.children.append(child)
            self.lines.append([])
            self.errors.append(b"")
            assert child.proc.stdout is not None and child.proc.stderr is not None
            for stream_name, pipe in (("out", child.proc.stdout), ("err", child.proc.stderr)):
                sink = (self.out_dir / f"{self.name}-{index}.{stream_name}").open("wb")
                self._streams[pipe.fileno()] = _Stream(index, stream_name, pipe, sink)

    def __enter__(self) -> Fleet:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        for child in self.children:
            child.__exit__(exc_type, exc, tb)
        for stream in self._streams.values():
            stream.sink.close()

    # -- reading ---------------------------------------------------------------------

    def _take(self, stream: _Stream, chunk: bytes) -> None:
        stream.sink.write(chunk)
        if stream.name == "err":
            self.errors[stream.index] += chunk
            return
        data = stream.pending + chunk
        *complete, stream.pending = data.split(b"\n")
        for raw in complete:
            line = raw.decode("utf-8")
            self.lines[stream.index].append(line)
            if self.counts(line):
                self.counted += 1

    def pump(self, timeout: float) -> bool:
        """Read whatever arrives within ``timeout`` seconds; False when nothing did."""
        open_fds = [fd for fd, s in self._streams.items() if not s.eof]
        if not open_fds:
            return False
        ready, _, _ = select.select(open_fds, [], [], timeout)
        for fd in ready:
            stream = self._streams[fd]
            chunk = os.read(fd, 1 << 20)
            if chunk:
                self._take(stream, chunk)
            else:
                stream.eof = True
                stream.sink.flush()
        return bool(ready)

    def wait_for(self, condition: Callable[[], bool], timeout: float, what: str) -> float:
        """Pump until ``condition()`` holds; the seconds it took. TimeoutError (with a
        summary) past ``timeout`` or when every pipe is closed first."""
        start = time.monotonic()
        deadline = start + timeout
        while not condition():
            left = deadline - time.monotonic()
            if left <= 0 or all(s.eof for s in self._streams.values()):
                raise TimeoutError(f"{what}: not reached after {time.monotonic() - start:.1f}s; "
                                   f"{self.summary()}")
            self.pump(left)
        return time.monotonic() - start

    def summary(self) -> str:
        parts = []
        for index, child in enumerate(self.children):
            err = self.errors[index].decode("utf-8", "replace")[-300:]
            parts.append(f"[{self.name}-{index} pid {child.pid} rc {child.proc.poll()} "
                         f"lines {len(self.lines[index])} stderr {err!r}]")
        return f"counted {self.counted}; " + " ".join(parts)

    def json_lines(self, index: int) -> list[dict[str, Any]]:
        return [json.loads(line) for line in self.lines[index]]

    # -- writing and stopping --------------------------------------------------------

    def send_all(self, text: str) -> None:
        for child in self.children:
            assert child.proc.stdin is not None
            child.proc.stdin.write(text.encode())
            child.proc.stdin.close()

    def terminate(self, timeout: float) -> list[int]:
        """SIGTERM every child, read their pipes to EOF, reap them: their exit codes."""
        for child in self.children:
            with contextlib.suppress(ProcessLookupError):
                os.kill(child.pid, signal.SIGTERM)
        return self.finish(timeout)

    def finish(self, timeout: float) -> list[int]:
        """Read every pipe to EOF and reap the children: their exit codes."""
        self.wait_for(lambda: all(s.eof for s in self._streams.values()), timeout,
                      f"{self.name}s closing their pipes")
        deadline = time.monotonic() + timeout
        return [child.proc.wait(max(0.1, deadline - time.monotonic()))
                for child in self.children]


def wait_stopped(pid: int) -> None:
    """Block until the child ``pid`` has stopped (after SIGSTOP); it is not reaped."""
    _, status = os.waitpid(pid, os.WUNTRACED)
    if not os.WIFSTOPPED(status):
        raise AssertionError(f"process {pid} did not stop: wait status {status:#x}")


# -- the state of a mailbox ---------------------------------------------------------------


@dataclass
class Census:
    """Every entry under ``signals/``, by folder; ``claims`` lists files (not folders)
    under ``processed/.claims/`` as ``owner/NAME``."""

    tmp: list[str]
    inputs: list[str]
    processed: list[str]
    processed_hidden: list[str]
    claims: list[str]
    rejected: list[str]


def census(root: Path) -> Census:
    """``root`` is the mailbox's ``signals/`` folder."""
    def names(folder: Path) -> list[str]:
        return sorted(entry.name for entry in folder.iterdir())

    processed = names(root / "processed")
    claims = [f"{owner}/{name}"
              for owner in names(root / "processed" / ".claims")
              for name in names(root / "processed" / ".claims" / owner)]
    return Census(tmp=names(root / "tmp"), inputs=names(root / "inputs"),
                  processed=[n for n in processed if not n.startswith(".")],
                  processed_hidden=[n for n in processed if n.startswith(".")
                                    and n != ".claims"],
                  claims=claims, rejected=names(root / "rejected"))


def unarchived(processed: Path, names: Sequence[str]) -> list[str]:
    """The processed files among ``names`` without handling_metadata for their own id.
    A byte check (a YAML parse of tens of thousands of files would take most of a minute):
    the metadata block is appended by ``Mailbox.finish`` as ``handling_metadata:`` with
    ``signal_id: ID`` inside."""
    bad = []
    for name in names:
        data = (processed / name).read_bytes()
        signal_id = name.removeprefix("signal.").removesuffix(".yaml")
        _, sep, block = data.partition(b"\nhandling_metadata:\n")
        if not sep or f"\n  signal_id: {signal_id}\n".encode() not in block:
            bad.append(name)
    return bad
