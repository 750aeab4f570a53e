"""The seed's failure: print a complete, flushed answer, then never exit (until signalled)."""

import sys
import time

ANSWER = "p: TECHLEAD\nv: CONDITIONAL\ni:\n  - H: retries are not bounded\n"

if __name__ == "__main__":
    sys.stdout.write(ANSWER)
    sys.stdout.flush()
    while True:
        time.sleep(3600)
