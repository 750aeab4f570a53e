"""A review agent for bench/dispatch_latency.py that notes when it wrote its last byte.

``python bench/agents/stamped_answer.py STAMP_FILE T0 ANSWER_AT [--end-marker] [--exit]
[--linger S]``

Writes a compact-YAML answer (over 100 bytes, so the seed's minimum length holds) one
flushed line at a time, the last line at ``T0 + ANSWER_AT`` on CLOCK_MONOTONIC (``T0`` is
the caller's ``time.monotonic()`` taken just before the spawn; the clock is system-wide on
Linux, so the caller can compare stamps with its own clock). ``--end-marker`` makes that
last line YAML's ``...``. Just before writing that line it appends ``last <t>`` to STAMP_FILE
(before, because a dispatcher may stop it as soon as the bytes are in the pipe); with
``--exit`` it then appends ``exit <t>`` and calls ``os._exit(0)`` at once, otherwise it sleeps
``--linger`` seconds (default 180) without a byte more. Stdlib only.
"""

import os
import sys
import time

LINES = (
    "p: TECHLEAD",
    "v: CONDITIONAL",
    "i:",
    "  - H: the dispatch timeout is hard-coded instead of read from config",
    "  - H: no rollback step is planned for the config change",
)


def main(argv: list[str]) -> None:
    stamp_file, t0, answer_at = argv[0], float(argv[1]), float(argv[2])
    flags = argv[3:]
    linger = float(flags[flags.index("--linger") + 1]) if "--linger" in flags else 180.0
    lines = [*LINES, "..."] if "--end-marker" in flags else list(LINES)
    stamps = os.open(stamp_file, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
    for n, line in enumerate(lines, 1):
        pause = t0 + answer_at * n / len(lines) - time.monotonic()
        if pause > 0:
            time.sleep(pause)
        data = (line + "\n").encode()
        if n == len(lines):  # stamped just before the write: the reader may act (and
            # signal us) as soon as the bytes are in the pipe
            os.write(stamps, f"last {time.monotonic()!r}\n".encode())
        os.write(1, data)
    if "--exit" in flags:
        os.write(stamps, f"exit {time.monotonic()!r}\n".encode())
        os._exit(0)
    time.sleep(linger)


if __name__ == "__main__":
    main(sys.argv[1:])
