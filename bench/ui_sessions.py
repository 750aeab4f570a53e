"""``interlock ui`` with a big store: the sessions page's load time with 1,000 sessions, and
the server's idle CPU with 10 pages open.

A store of ``--sessions`` (1,000) stopped sessions (made through the façade) and one live
Ralph session held PAUSED by its runner (``interlock ralph run``, instant ``command``
agents: a runner that renews its lease, as a live session does); ``interlock ui`` serves
it (a real process); Debian's headless Chromium, driven by Playwright, opens the pages.

1. **Load**: a fresh page of the sessions, from ``goto`` until its table holds every
   session, ``--loads`` (5) times (target: under 1 s each). The baseline is
   ``interlock sessions`` listing the same store in a terminal (a process of its own).
2. **Idle**: 10 pages open (the sessions page, the Ralph session's page, 8 sessions'
   pages), each with its live stream; the server's CPU time (user + system, threads
   included, from /proc through psutil) over ``--idle-seconds`` (60) while nothing
   happens but the runner's lease renewals, as a share of one core (target <= 0.5 %).
   The baseline is the same server with no page open, over the same time.

Run: ``python bench/ui_sessions.py [--sessions 1000] [--idle-seconds 60]`` (about 3
minutes, most of it making the sessions).
"""

from __future__ import annotations

import argparse
import asyncio
import importlib
import statistics
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

import psutil

from interlock import runtime

# beside this file (run as `python bench/ui_sessions.py`), as bench/signal_latency.py does
start_paused_ralph = importlib.import_module("live_sessions").start_paused_ralph
_ui = importlib.import_module("ui_latency")
INTERLOCK, chromium, header, ui_server, wait = (
    _ui.INTERLOCK, _ui.chromium, _ui.header, _ui.ui_server, _ui.wait)

LOAD_TARGET = 1.0  # seconds
CPU_TARGET = 0.5  # percent of one core
PAGES = 10
DOOR = ("machine: door\ninitial: closed\nstates:\n  closed: {on: {open: opened}}\n"
        "  opened: {on: {close: closed}}\n")


def make_store(root: Path, sessions: int) -> subprocess.Popen[bytes]:
    """``sessions`` stopped sessions, and a Ralph session PAUSED by its live runner."""
    (root / "door.yaml").write_text(DOOR)

    async def create() -> None:
        for n in range(sessions):
            await runtime.create(root / "door.yaml", session_id=f"d{n:04d}", root=root)

    asyncio.run(create())
    run: subprocess.Popen[bytes]
    run, paused = start_paused_ralph(root, "r")
    wait("PAUSED", paused)
    return run


def loads(browser: Any, url: str, rows: int, times: int) -> list[float]:
    """Seconds from ``goto`` until the sessions page lists ``rows`` sessions."""
    found = []
    for _ in range(times):
        page = browser.new_page()
        start = time.perf_counter()
        page.goto(url + "/")
        page.wait_for_function(f"document.querySelectorAll('#sessions tbody tr').length >= "
                               f"{rows}", timeout=60_000)
        found.append(time.perf_counter() - start)
        page.close()
    return found


def cli_list(root: Path) -> float:
    start = time.perf_counter()
    subprocess.run([*INTERLOCK, "sessions"], cwd=root, check=True, capture_output=True)
    return time.perf_counter() - start


def cpu(process: psutil.Process) -> float:
    times = process.cpu_times()
    return times.user + times.system


def idle(server: psutil.Process, seconds: float) -> float:
    """The server's CPU over ``seconds``, as a percentage of one core."""
    start, began = cpu(server), time.monotonic()
    time.sleep(seconds)
    return 100.0 * (cpu(server) - start) / (time.monotonic() - began)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sessions", type=int, default=1000)
    parser.add_argument("--loads", type=int, default=5)
    parser.add_argument("--idle-seconds", type=float, default=60.0)
    args = parser.parse_args(argv)
    header("ui sessions", f"{args.sessions} sessions + a PAUSED Ralph session, {PAGES} "
           f"pages, {args.idle_seconds:g} s idle")
    with tempfile.TemporaryDirectory(prefix="interlock-ui-sessions-") as tmp:
        root = Path(tmp)
        made = time.perf_counter()
        run = make_store(root, args.sessions)
        print(f"made the store in {time.perf_counter() - made:.1f} s")
        try:
            with ui_server(root) as (proc, url), chromium() as browser:
                server = psutil.Process(proc.pid)
                times = loads(browser, url, args.sessions + 1, args.loads)
                listing = statistics.median(cli_list(root) for _ in range(3))
                time.sleep(2.0)
                quiet = idle(server, args.idle_seconds)
                pages = [browser.new_page() for _ in range(PAGES)]
                paths = ["/", "/s/r", *(f"/s/d{n:04d}" for n in range(PAGES - 2))]
                for page, path in zip(pages, paths, strict=True):
                    page.goto(url + path)
                time.sleep(5.0)  # every page has loaded and streams
                busy = idle(server, args.idle_seconds)
        finally:
            run.terminate()
            run.wait(30)
    median, worst = statistics.median(times), max(times)
    load_ok, cpu_ok = worst < LOAD_TARGET, busy <= CPU_TARGET
    print(f"{'measure':<44}{'value':>10}{'target':>10}{'baseline':>12}{'ratio':>8}")
    print(f"{'sessions page load, median (worst) of ' + str(len(times)):<44}"
          f"{median:>9.3f}s{'< 1 s':>10}{listing:>11.3f}s{listing / median:>7.1f}x"
          f"  ({worst:.3f} s) {'PASS' if load_ok else 'FAIL'}")
    print(f"{'server CPU, ' + str(PAGES) + ' pages open, idle':<44}{busy:>9.3f}%"
          f"{'<= 0.5%':>10}{quiet:>11.3f}%{'':>8}  {'PASS' if cpu_ok else 'FAIL'}")
    print("\nload: goto -> every session in the table; baseline: `interlock sessions` on the "
          "same store (a process); idle: the ui process's CPU time over the quiet period / "
          "its length; baseline: the same server with no page open")
    return 0 if load_ok and cpu_ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
