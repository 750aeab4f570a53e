"""Ignore SIGTERM, print an answer, then linger (echo 'alive' per stdin line; sleep at EOF)."""

import signal
import sys
import time

ANSWER = "p: SECURITY\nv: NO-GO\ni:\n  - C: agent ignores SIGTERM\n  - H: only SIGKILL stops it\n"

if __name__ == "__main__":
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    sys.stdout.write(ANSWER)
    sys.stdout.flush()
    for _line in sys.stdin:  # lets a test probe that it is still alive after SIGTERM
        sys.stdout.write("alive\n")
        sys.stdout.flush()
    while True:
        time.sleep(3600)
