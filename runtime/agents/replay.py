"""The replayer: plays one recorded invocation of a cassette as a process.

``python -m interlock.runtime.agents.replay CASSETTE SEQ [--speed X] [--root DIR]``
reads its stdin to the end (the prompt), writes the recorded files under ``--root``
(the recorded folder's placeholder in files and output becomes ``--root``),
prints the recorded stdout and stderr chunks at their recorded offsets (divided by
``--speed``), then waits until the recorded end and exits with the recorded code, or,
when the agent had been stopped by the dispatcher (no exit code), lingers until it is
stopped again.
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from interlock.runtime.agents.cassette import (
    CassetteError,
    RecordedInvocation,
    apply_changes,
    localized,
    read_cassette,
)

LINGER_STEP = 3600.0


def play(record: RecordedInvocation, *, speed: float = 1.0, root: Path | None = None,
         sleep: Callable[[float], None] = time.sleep,
         clock: Callable[[], float] = time.monotonic) -> int | None:
    """Play ``record`` on this process's stdout/stderr; returns its exit code (None: the
    agent never exited on its own)."""
    if root is not None:
        apply_changes(root, record.files)
    start = clock()
    fds = {"stdout": sys.stdout.fileno(), "stderr": sys.stderr.fileno()}
    for chunk in record.chunks:
        wait = start + chunk.at / speed - clock()
        if wait > 0:
            sleep(wait)
        view = memoryview(localized(chunk.data, root))
        while view:
            written = os.write(fds[chunk.stream], view)
            view = view[written:]
    if record.exit_code is None:
        return None
    wait = start + record.ended_at / speed - clock()
    if wait > 0:
        sleep(wait)
    return record.exit_code


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m " + __spec__.name if __spec__ else None,
                                     description="Replay one invocation of a cassette.")
    parser.add_argument("cassette", type=Path)
    parser.add_argument("seq", type=int)
    parser.add_argument("--speed", type=float, default=1.0)
    parser.add_argument("--root", type=Path, default=None)
    args = parser.parse_args(argv)
    if not sys.stdin.closed:
        sys.stdin.buffer.read()  # the prompt: drained, never needed
    try:
        records = read_cassette(args.cassette)
    except CassetteError as exc:
        print(f"replay: {exc}", file=sys.stderr)
        return 2
    if not 1 <= args.seq <= len(records) or args.speed <= 0:
        print(f"replay: {args.cassette}: no invocation {args.seq} "
              f"(it holds {len(records)}) or a bad --speed", file=sys.stderr)
        return 2
    code = play(records[args.seq - 1], speed=args.speed, root=args.root)
    if code is None:
        while True:  # stopped by the dispatcher, as the recorded agent was
            time.sleep(LINGER_STEP)
    if code < 0:  # the agent died of a signal: so does its replay
        os.kill(os.getpid(), -code)
        signal.pause()
    return code


if __name__ == "__main__":
    sys.exit(main())
