"""One line of BYTES (argv[1], default 4 MiB) with no newline until its end, then an answer."""

import sys

CHUNK = 64 * 1024
ANSWER = b"p: ARCHITECT\nv: GO\ni: []\n"

if __name__ == "__main__":
    remaining = int(sys.argv[1]) if len(sys.argv) > 1 else 4 * 1024 * 1024
    out = sys.stdout.buffer
    while remaining > 0:
        out.write(b"x" * min(CHUNK, remaining))
        out.flush()
        remaining -= CHUNK
    out.write(b"\n" + ANSWER)
    out.flush()
