"""Per-invocation overhead of ``interlock ralph run`` against a bash ``while`` loop.

Every role runs the same instant agent (``cli: command``: a bash script that reads its
prompt and prints a fixed answer for its role). One Ralph session over TASKS tasks makes
1 planner + TASKS executor + TASKS reviewer invocations; the baseline is a bash ``while``
loop that calls the same script the same number of times, prompt on stdin. Both run here,
one after the other, in one run of this script:

    overhead per invocation = (ralph run wall time - loop wall time) / invocations

It includes everything ``ralph run`` does around the agents (starting the interpreter,
opening the store, every journaled step, the mailbox polls, the rendered prompts and the
invocation records). Goal: <= 50 ms.

Run: ``python bench/ralph_overhead.py [--tasks N]``
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

AGENT = """\
cat > /dev/null
case "$1" in
  planner)
    echo "tasks:"
    for i in $(seq 1 "$2"); do echo "  - {id: T$i, title: task $i}"; done
    echo "batches:"
    for i in $(seq 1 2 "$2"); do
      j=$((i+1))
      if [ "$j" -le "$2" ]; then echo "  - [T$i, T$j]"; else echo "  - [T$i]"; fi
    done ;;
  executor) echo "status: done"; echo "report: done" ;;
  reviewer) echo "verdict: accept" ;;
  *) echo "mode: stage" ;;
esac
"""


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tasks", type=int, default=25)
    args = parser.parse_args()
    tasks = args.tasks
    calls = 1 + 2 * tasks
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        (root / "agent.sh").write_text(AGENT)
        roles = ("planner", "executor", "reviewer", "questioner", "librarian")
        lines = ["agents:"] + [
            f"  {role}: {{cli: command, command: [bash, {root / 'agent.sh'}, {role}, "
            f"'{tasks}']}}" for role in roles]
        (root / "interlock.yaml").write_text("\n".join(lines) + "\n")
        interlock = [sys.executable, "-m", "interlock.runtime.cli"]
        subprocess.run([*interlock, "ralph", "init", "--id", "b", "--request", "bench"],
                       cwd=root, check=True, capture_output=True)
        started = time.perf_counter()
        done = subprocess.run([*interlock, "ralph", "run", "b"], cwd=root,
                              capture_output=True, text=True)
        ralph = time.perf_counter() - started
        if done.returncode != 0:
            sys.stderr.write(done.stderr)
            return 1
        made = len(list((root / ".ralph-sessions/b/iterations/1/invocations").iterdir()))
        assert made == calls, (made, calls)
        loop = (f'i=0; while [ $i -lt {calls} ]; do echo prompt | bash {root / "agent.sh"} '
                f'executor {tasks} > /dev/null; i=$((i+1)); done')
        started = time.perf_counter()
        subprocess.run(["bash", "-c", loop], check=True)
        baseline = time.perf_counter() - started
    per = (ralph - baseline) / calls * 1000
    print(f"invocations: {calls} ({tasks} tasks)")
    print(f"interlock ralph run: {ralph:.3f}s   bash while loop: {baseline:.3f}s")
    print(f"overhead per invocation: {per:.1f} ms (goal <= 50 ms): "
          f"{'OK' if per <= 50 else 'over'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
