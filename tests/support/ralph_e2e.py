"""Ralph sessions end to end: `interlock ralph ...` as real processes in a project folder,
the demo agents (or fake CLIs) as real processes, signals as real files. Waits are on
files, bounded; nothing sleeps for time."""

from __future__ import annotations

import contextlib
import os
import signal as signal_module
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

from interlock import runtime
from interlock.runtime.config.role_names import ROLES

INTERLOCK = [sys.executable, "-m", "interlock.runtime.cli"]
#: An executor slow enough for a signal to arrive while it runs (0.3 s a line of answer).
SLOW = "executor: {cli: demo, delay: 300ms}"


def cli(root: Path, *args: str, timeout: float = 90) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*INTERLOCK, *args], cwd=root, capture_output=True, text=True,
                          timeout=timeout)


def start(root: Path, *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen([*INTERLOCK, *args], cwd=root, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)


def finish(proc: subprocess.Popen[str], timeout: float = 90) -> tuple[int, str]:
    _, err = proc.communicate(timeout=timeout)
    return proc.returncode, err


def wait_until(check: Callable[[], bool], timeout: float = 45.0, what: str = "",
               proc: subprocess.Popen[str] | None = None) -> None:
    """Until ``check()``; with ``proc`` (a ``ralph run`` started by :func:`start`), a run
    that ends first or a timeout fails with the run's own output."""
    deadline = time.monotonic() + timeout
    while not check():
        ended = proc is not None and proc.poll() is not None
        if ended or time.monotonic() > deadline:
            why = "the run ended" if ended else "timed out"
            if proc is not None:
                if not ended:
                    proc.kill()
                _, err = proc.communicate(timeout=30)
                why += f"; its stderr:\n{err[-4000:]}"
            raise AssertionError(f"waiting for {what}: {why}")
        time.sleep(0.02)


def session(root: Path, ident: str = "s") -> Path:
    return root / ".ralph-sessions" / ident


def meta(root: Path, ident: str = "s") -> dict[str, Any]:
    path = session(root, ident) / "metadata.yaml"
    return (yaml.safe_load(path.read_text()) or {}) if path.exists() else {}


def state(root: Path, ident: str = "s") -> str | None:
    return (meta(root, ident).get("orchestrator") or {}).get("state")


def progress(root: Path, n: int = 1, ident: str = "s") -> str:
    path = session(root, ident) / "iterations" / str(n) / "progress.md"
    return path.read_text() if path.exists() else ""


def invocation(root: Path, name: str, n: int = 1, ident: str = "s") -> str:
    """iterations/<n>/invocations/<name>.md (``002-executor``)."""
    return (session(root, ident) / "iterations" / str(n) / "invocations" / f"{name}.md"
            ).read_text()


def invocations(root: Path, role: str, n: int = 1, ident: str = "s") -> list[str]:
    folder = session(root, ident) / "iterations" / str(n) / "invocations"
    return [p.read_text() for p in sorted(folder.glob(f"*-{role}.md"))]


def processed(root: Path, ident: str = "s") -> list[dict[str, Any]]:
    """The archived signals, oldest first, each with its handling metadata."""
    folder = session(root, ident) / "signals" / "processed"
    return [yaml.safe_load(p.read_text()) for p in sorted(folder.glob("*.yaml"))]


def pending(root: Path, ident: str = "s") -> list[str]:
    folder = session(root, ident) / "signals" / "inputs"
    return sorted(p.name for p in folder.glob("*.yaml")) if folder.is_dir() else []


def project(root: Path, agents: str = "", ralph: str = "",
            request: str = "write the parser; write the report\ntest it") -> None:
    """interlock.yaml (a short knowledge approval unless ``ralph`` sets one) and
    ``ralph init --id s``. ``agents`` lines configure roles; every role they leave out
    plays the demo agent (a project with an ``agents:`` section names each role)."""
    if "knowledge_approval_timeout" not in ralph:
        ralph = f"knowledge_approval_timeout: 100ms\n  {ralph}"
    text = f"ralph:\n  {ralph}\n"
    if agents:
        named = {line.split(":", 1)[0].strip() for line in agents.splitlines()}
        lines = [*agents.splitlines(),
                 *(f"{role}: {{cli: demo}}" for role in ROLES if role not in named)]
        text += "agents:\n" + "".join(f"  {line}\n" for line in lines)
    (root / "interlock.yaml").write_text(text)
    # through the façade, not a process: `ralph init` on the command line has its own tests
    # (test_ralph_parallel, test_ralph_instant), and this runs before most Ralph e2e
    assert runtime.ralph_init(request, session_id="s", root=root) == "s"


def signal(root: Path, kind: str, message: str = "", *extra: str) -> None:
    """``interlock signal s KIND MESSAGE ...`` (a process of its own)."""
    done = cli(root, "signal", "s", kind, *([message] if message else []), *extra)
    assert done.returncode == 0, done.stderr


def post(root: Path, kind: str, message: str = "", target: str = "ALL") -> None:
    """The same signal through the Python façade, in this process: no interpreter start-up
    between seeing an agent run and the signal landing (``interlock signal`` costs a few
    hundred milliseconds, which a busy machine can stretch past a short agent call)."""
    from interlock import runtime

    runtime.post_signal("s", kind, message or None, target=target, root=root)


def processes_in(root: Path) -> list[int]:
    """Live processes whose working folder is ``root`` (agents left behind)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            if (entry / "cwd").readlink() == root:
                stat = (entry / "stat").read_text()
                if stat.rsplit(")", 1)[1].split()[0] != "Z":
                    found.append(int(entry.name))
        except OSError:
            continue
    return found


def kill_leftovers(root: Path) -> None:
    for pid in processes_in(root):
        with contextlib.suppress(OSError):
            os.kill(pid, signal_module.SIGKILL)
