"""Print the answer with default block buffering (no flush), report on stderr, then linger."""

import sys
import time

ANSWER = "p: TECHLEAD\nv: GO\ni: []\n"

if __name__ == "__main__":
    # To a pipe, stdout is block-buffered: the answer stays in this process's memory and is
    # lost on SIGTERM/SIGKILL, unless PYTHONUNBUFFERED=1 (or stdbuf/a pty) changes buffering.
    print(ANSWER, end="")
    sys.stderr.write("answer printed to stdout (not flushed); lingering\n")
    sys.stderr.flush()
    while True:
        time.sleep(3600)
