"""Spawn a sleeping grandchild that inherits stdout/stderr, print an answer, exit 0 at once."""

import subprocess
import sys
import time

ANSWER = "p: TECHLEAD\nv: GO\ni: []\n"

if __name__ == "__main__":
    if sys.argv[1:] == ["--grandchild"]:
        while True:
            time.sleep(3600)
    # Same process group and the same pipes; never waited for.
    grandchild = subprocess.Popen([sys.executable, __file__, "--grandchild"])
    sys.stderr.write(f"grandchild pid {grandchild.pid}\n")
    sys.stdout.write(ANSWER)
    sys.stdout.flush()
    sys.stderr.flush()
