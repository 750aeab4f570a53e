"""Inbox test helpers: the real HTTP server, in a thread or as an `interlock inbox serve`
process, on 127.0.0.1 and a free port; both are stopped by the caller's context."""

from __future__ import annotations

import os
import selectors
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import psycopg
import uvicorn

from interlock.runtime.engine.clock import ManualClock
from interlock.runtime.inbox.base import InboxAdapter
from interlock.runtime.inbox.server import bind, create_app

START_TIMEOUT = 20.0


@dataclass
class Backend:
    """One store under test, and the clock its adapter reads."""

    name: str
    inbox: InboxAdapter
    clock: ManualClock


def empty_pg(url: str) -> None:
    """Empty the inbox tables of the schema ``url`` points at (if they exist yet)."""
    with psycopg.connect(url, autocommit=True) as conn:
        if conn.execute("SELECT to_regclass('inbox_messages')").fetchone() != (None,):
            conn.execute("TRUNCATE inbox_messages, inbox_journal, inbox_settings")


@contextmanager
def server_thread(adapter: InboxAdapter) -> Iterator[str]:
    """Serve ``adapter`` with uvicorn in a thread of this process; yields its base URL."""
    sock = bind("127.0.0.1", 0)
    port = sock.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(create_app(adapter), log_level="warning",
                                           access_log=False, lifespan="off"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + START_TIMEOUT
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            raise RuntimeError("the inbox server thread did not start")
        time.sleep(0.005)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(timeout=10)
        sock.close()


@contextmanager
def server_process(store: str, cwd: Path) -> Iterator[tuple[subprocess.Popen[str], str]]:
    """Run ``interlock inbox serve --store STORE --port 0``; yields (process, base URL)
    once it prints where it listens. SIGTERM, then SIGKILL, when the context ends."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "interlock.runtime.cli", "inbox", "serve", "--store", store,
         "--host", "127.0.0.1", "--port", "0"],
        cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"})
    try:
        assert proc.stdout is not None
        with selectors.DefaultSelector() as sel:
            sel.register(proc.stdout, selectors.EVENT_READ)
            if not sel.select(START_TIMEOUT):
                raise RuntimeError("inbox serve did not start within "
                                   f"{START_TIMEOUT} s")
        line = proc.stdout.readline().strip()
        if not line.startswith("listening on "):
            err = proc.stderr.read() if proc.stderr and proc.poll() is not None else ""
            raise RuntimeError(f"inbox serve said {line!r} {err}")
        yield proc, line.removeprefix("listening on ")
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=10)
        for stream in (proc.stdout, proc.stderr):
            if stream is not None:
                stream.close()
