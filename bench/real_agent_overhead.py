"""interlock's overhead per REAL claude call, against the same ``claude -p`` from bash.

The real Claude Code CLI (tests/tools/agent-clis, installed by ``make test``) answers
from the scripted model server of :mod:`interlock.testing`, which replies at once, so
what remains is the CLI's own start-up and interlock's work around it. Both run here, one
after the other, in one run of this script, against one server:

* interlock: ``interlock run`` of a spec whose state invokes ``agent: helper`` (claude,
  ``interlock.yaml``) CALLS times (40) in a loop (an ``always`` back to the invoking state),
  every step journaled in SQLite, each call a process group spooled, read by the claude
  adapter, its usage summed;
* baseline: a bash ``for`` loop running the same ``claude -p --output-format stream-json
  --verbose --permission-mode default`` CALLS times, the prompt on stdin.

    overhead per call = (interlock wall time - bash wall time) / CALLS

The two alternate ROUNDS times (the CLI's own time varies by tens of milliseconds a
call); the median round's overhead is the result. It includes the interpreter's start-up,
the store, the invoker and the adapter. Goal: <= 50 ms. Run: ``python
bench/real_agent_overhead.py [--calls 40] [--rounds 3]`` (needs the CLIs: ``bash
tests/tools/install_agent_clis.sh``).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from interlock.testing import ModelServer, say
from interlock.testing.clis import cli_env

ROOT = Path(__file__).resolve().parents[1]
CLI_BIN = Path(os.environ.get("INTERLOCK_AGENT_CLIS", ROOT / ".cache" / "agent-clis")
               ) / "node_modules" / ".bin"
GOAL_MS = 50.0

SPEC = """\
machine: claude_loop
context:
  done: {type: int, default: 0}
  calls: {type: int, default: 20}
initial: asking
states:
  asking:
    invoke: {id: ask, agent: helper, prompt: "Answer ok ({{ context.done }})", timeout: 60s}
    on:
      done.invoke.ask: {target: counted, actions: [count]}
      error.invoke.ask: failed
  counted:
    always:
      - {guard: more, target: asking}
      - {target: finished}
  finished: {type: final}
  failed: {type: final}
"""

BINDINGS = """\
def count(call):
    call.context["done"] += 1

def more(call):
    return call.context["done"] < call.context["calls"]

BINDINGS = {"count": count, "more": more}
"""


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=40)
    parser.add_argument("--rounds", type=int, default=3,
                        help="interlock and bash alternate this many times (median kept)")
    args = parser.parse_args()
    if not (CLI_BIN / "claude").exists():
        print(f"the real claude is not installed in {CLI_BIN}: "
              "bash tests/tools/install_agent_clis.sh", file=sys.stderr)
        return 2
    calls = args.calls
    path = os.pathsep.join([str(CLI_BIN), os.environ.get("PATH", os.defpath)])
    overheads: list[float] = []
    with tempfile.TemporaryDirectory() as tmp, \
            ModelServer(lambda _request: say("v: ok")) as server:  # the answer document
        root = Path(tmp)
        env = cli_env("claude", server.url, root / "home", path=path)
        (root / "loop.yaml").write_text(SPEC)
        (root / "loop_bindings.py").write_text(BINDINGS)
        (root / "interlock.yaml").write_text(
            f"agents:\n  helper: {{cli: claude, env: {json.dumps(env)}}}\n")
        (root / "prompt.txt").write_text("Answer ok (0)")
        loop = (f"for i in $(seq 1 {calls}); do claude -p --output-format stream-json "
                f"--verbose --permission-mode default < prompt.txt > /dev/null || exit 1; done")
        for round_ in range(1, args.rounds + 1):
            asked = len(server.requests)
            started = time.monotonic()
            done = subprocess.run(
                [sys.executable, "-m", "interlock.runtime.cli", "run", "loop.yaml",
                 "--session", f"bench{round_}", "--no-signals", "--bindings",
                 "loop_bindings.py", "--context", json.dumps({"calls": calls})],
                cwd=root, capture_output=True, text=True, timeout=60 + 30 * calls)
            engine = time.monotonic() - started
            if done.returncode != 0 or "finished in [finished]" not in done.stdout:
                print(done.stdout[-2000:], done.stderr[-2000:], file=sys.stderr)
                return 1
            assert len(server.requests) - asked == calls, "interlock made other calls"
            started = time.monotonic()
            subprocess.run(["bash", "-c", loop], cwd=root, env={**os.environ, **env},
                           check=True, timeout=60 + 30 * calls)
            bash = time.monotonic() - started
            overheads.append((engine - bash) / calls * 1000)
            print(f"round {round_}: interlock run {engine:.2f} s "
                  f"({engine / calls * 1000:.0f} ms/call), bash loop {bash:.2f} s "
                  f"({bash / calls * 1000:.0f} ms/call), ratio {engine / bash:.3f}x, "
                  f"overhead {overheads[-1]:.1f} ms/call")
    overhead_ms = statistics.median(overheads)
    print(f"real claude calls: {calls} a round through interlock and from a bash loop")
    print(f"median overhead per call {overhead_ms:.1f} ms (goal <= {GOAL_MS:.0f} ms): "
          f"{'ok' if overhead_ms <= GOAL_MS else 'FAIL'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
