"""What a cheap ``interlock`` call costs: ``interlock status`` against the bare interpreter.

Every row is a fresh process, run ``--calls`` times (20) one after the other in this
script; the median wall time and the median CPU time (user + system, from
``resource.getrusage(RUSAGE_CHILDREN)``) are printed:

1. ``python -c pass``: the interpreter alone (the floor, and the baseline of the ratio);
2. ``python -c "import interlock.runtime.cli.app"``: the CLI's own imports;
3. ``interlock status ID`` (a finished session of a two-state spec, embedded SQLite
   store), ending as Python ends a process: ``main(["status", ID])`` called from
   ``python -c``, so the interpreter's last garbage collection walks every object left;
4. the same call as the ``interlock`` command makes it, which skips that collection
   (``runtime/cli/app.py:_skip_final_collection``);
5. ``interlock validate door.yaml``: the call a user makes most while writing a spec.

Row 3 minus row 4 is what skipping the last collection saves on every call; row 4 over
row 1 is the ratio printed.

Run: ``python bench/cli_call.py [--calls 20]``
"""

from __future__ import annotations

import argparse
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

SPEC = """\
machine: door
initial: closed
states:
  closed: {always: opened}
  opened: {type: final}
"""
IMPORT = "import interlock.runtime.cli.app"
PYTHON_EXIT = "from interlock.runtime.cli.app import main; main(['status', 's1'])"


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def measure(command: list[str], cwd: Path, calls: int) -> tuple[float, float]:
    """Median wall and CPU seconds of ``calls`` runs of ``command``."""
    walls: list[float] = []
    cpus: list[float] = []
    for _ in range(calls):
        cpu, started = _children_cpu(), time.perf_counter()
        subprocess.run(command, cwd=cwd, check=True, capture_output=True)
        walls.append(time.perf_counter() - started)
        cpus.append(_children_cpu() - cpu)
    return statistics.median(walls), statistics.median(cpus)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=20)
    args = parser.parse_args()
    python = sys.executable
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        (root / "door.yaml").write_text(SPEC)
        interlock = [python, "-m", "interlock.runtime.cli"]
        subprocess.run([*interlock, "run", "door.yaml", "--session", "s1"],
                       cwd=root, check=True, capture_output=True)
        rows = {
            "python -c pass": [python, "-c", "pass"],
            "import the CLI": [python, "-c", IMPORT],
            "status s1, Python's exit": [python, "-c", PYTHON_EXIT],
            "interlock status s1": [*interlock, "status", "s1"],
            "interlock validate door.yaml": [*interlock, "validate", "door.yaml"],
        }
        results = {name: measure(command, root, args.calls) for name, command in rows.items()}
    for name, (wall, cpu) in results.items():
        print(f"{name:34} wall {wall * 1000:6.1f} ms   cpu {cpu * 1000:6.1f} ms")
    floor, status = results["python -c pass"], results["interlock status s1"]
    python_exit = results["status s1, Python's exit"]
    print(f"the last collection skipped: {(python_exit[1] - status[1]) * 1000:.1f} ms of CPU "
          "a call")
    print(f"interlock status / bare interpreter: {status[1] / floor[1]:.1f}x CPU")
    return 0


if __name__ == "__main__":
    sys.exit(main())
