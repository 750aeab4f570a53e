"""Write BYTES (argv[1], default 8 MiB) of filler in 64 KiB writes, fast; then an answer."""

import sys

CHUNK = 64 * 1024
LINE = b"flood " * 10 + b"...\n"  # 64 bytes: a 64 KiB block is 1024 lines
ANSWER = b"p: QA\nv: GO\ni: []\n"

if __name__ == "__main__":
    remaining = int(sys.argv[1]) if len(sys.argv) > 1 else 8 * 1024 * 1024
    block = LINE * (CHUNK // len(LINE))
    out = sys.stdout.buffer
    while remaining > 0:
        out.write(block[:remaining])
        out.flush()
        remaining -= CHUNK
    out.write(ANSWER)
    out.flush()
