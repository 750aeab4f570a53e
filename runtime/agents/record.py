"""The recorder: runs one agent and appends what it did to a cassette, as a process.

``python -m interlock.runtime.agents.record [--root DIR] CASSETTE SEQ NAME DIGEST -- ARGV...``
passes its stdin (the prompt) to the agent ``ARGV``, passes the agent's stdout and stderr
through as they come (the dispatcher reading it sees the agent itself), keeps every chunk
with its offset from the start, and when the agent ends appends the record (its exit
code, the files it changed under ``--root``) to CASSETTE. Stopped by SIGTERM while the
agent runs (its invoke was cancelled), it stops the agent and records it as stopped (no
exit code), which the replayer plays back by lingering until it is stopped too; an agent
that had already exited (the dispatcher stops the group once an answer is complete) is
recorded as exited. The record is written whole either way.
"""

from __future__ import annotations

import argparse
import os
import selectors
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from types import FrameType

from interlock.runtime.agents.cassette import (
    Chunk,
    RecordedInvocation,
    Stream,
    append_record,
    changed_files,
    folder_state,
    portable,
)

READ_SIZE = 65536


class _Stopped(Exception):
    """SIGTERM: the invoke was cancelled."""


def _stop(_signum: int, _frame: FrameType | None) -> None:
    raise _Stopped


def record(cassette: Path, seq: int, name: str, digest: str, argv: Sequence[str],
           root: Path | None) -> int:
    """Run ``argv`` as described in the module docstring; its exit code."""
    before = folder_state(root) if root is not None else None
    prompt = sys.stdin.buffer.read() if not sys.stdin.closed else b""
    start = time.monotonic()
    chunks: list[Chunk] = []
    exit_code: int | None = None
    signal.signal(signal.SIGTERM, _stop)
    try:
        agent = subprocess.Popen(list(argv), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                 stderr=subprocess.PIPE)
    except OSError as exc:
        sys.stderr.write(f"record: cannot start {argv[0]}: {exc.strerror or exc}\n")
        return 127
    try:
        assert agent.stdin is not None and agent.stdout is not None and agent.stderr is not None
        try:
            agent.stdin.write(prompt)
            agent.stdin.close()
        except BrokenPipeError:
            pass
        _pump(agent, chunks, start, root)
        exit_code = agent.wait()
    except _Stopped:
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        code = agent.poll()
        if code is None or code < 0:  # running, or stopped by the same TERM to the group
            agent.terminate()
            try:
                agent.wait(timeout=5)
            except subprocess.TimeoutExpired:
                agent.kill()
                agent.wait()
        else:  # it had answered and exited: the dispatcher stops the group after an answer
            _pump(agent, chunks, start, root)  # what its pipes still hold
            exit_code = code
    # The record is written whole even when the dispatcher stops the group now (it does
    # once the answer is complete and the output fell silent): a TERM here would lose it.
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    files = changed_files(root, before) if root is not None and before is not None else []
    append_record(cassette, RecordedInvocation(
        seq=seq, name=name, prompt_sha256=digest, argv=tuple(argv), chunks=tuple(chunks),
        exit_code=exit_code, ended_at=time.monotonic() - start,
        status="exited" if exit_code is not None else "stopped",
        completion_method="exit" if exit_code is not None else None, files=tuple(files)))
    if exit_code is None:
        return 128 + signal.SIGTERM
    return exit_code if exit_code >= 0 else 128 - exit_code


def _pump(agent: subprocess.Popen[bytes], chunks: list[Chunk], start: float,
          root: Path | None) -> None:
    """Pass the agent's output through until both its streams close, keeping the chunks."""
    assert agent.stdout is not None and agent.stderr is not None
    outs: dict[int, tuple[Stream, int]] = {
        agent.stdout.fileno(): ("stdout", sys.stdout.fileno()),
        agent.stderr.fileno(): ("stderr", sys.stderr.fileno())}
    with selectors.DefaultSelector() as selector:
        for fd in outs:
            selector.register(fd, selectors.EVENT_READ)
        while outs:
            for key, _ in selector.select():
                fd = int(key.fd)
                data = os.read(fd, READ_SIZE)
                if not data:
                    selector.unregister(fd)
                    del outs[fd]
                    continue
                stream, target = outs[fd]
                chunks.append(Chunk(stream, time.monotonic() - start, portable(data, root)))
                view = memoryview(data)
                while view:
                    view = view[os.write(target, view):]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m interlock.runtime.agents.record",
                                     description="Run an agent and record it to a cassette.")
    parser.add_argument("cassette", type=Path)
    parser.add_argument("seq", type=int)
    parser.add_argument("name")
    parser.add_argument("digest")
    parser.add_argument("--root", type=Path, default=None)
    parser.add_argument("agent", nargs=argparse.REMAINDER)
    args = parser.parse_args(argv)
    command = args.agent[1:] if args.agent[:1] == ["--"] else args.agent
    if not command:
        parser.error("the agent's argv goes after --")
    return record(args.cassette, args.seq, args.name, args.digest, command, args.root)


if __name__ == "__main__":
    sys.exit(main())
