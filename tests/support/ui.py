"""``interlock ui`` under test: a real uvicorn server on a free port in a thread of the
test process, and Debian's Chromium driven by Playwright (Playwright's own browser download
is not used). Without Chromium or Playwright a browser test skips locally and fails in CI
(``scripts/bootstrap.sh`` installs Chromium, ``.[dev]`` Playwright)."""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import shutil
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

import pytest

from interlock import runtime
from interlock.runtime.engine.session import Step

from support.paths import IN_CI, ROOT

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-quic",
                 "--no-first-run", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync"]
SHOTS = ROOT / ".cache" / "ui-screenshots"
T = TypeVar("T")

ASK = """\
machine: ask
context:
  q: {type: str, default: "six by nine"}
initial: asking
states:
  asking:
    invoke:
      id: ask
      command: [sh, -c, "cat > /dev/null; cat '%s'"]
      prompt: "What is it? {{ context.q }}"
    on:
      done.invoke.ask: answered
      error.invoke.ask: failed
  answered: {on: {again: asking}}
  failed: {type: final}
"""
GOOD = "p: six times nine\nv: GO\n"


def ask_session(root: Path, output: str = GOOD, session_id: str = "a1") -> None:
    """Run ``ask.yaml`` in ``root`` (its command invoke prints ``output``) until the invoke
    ended: the session is left stopped in ``answered`` (or finished in ``failed``)."""
    answer = root / f"{session_id}.answer"
    answer.write_text(output)
    spec = root / "ask.yaml"
    spec.write_text(ASK.replace("%s", str(answer)))

    async def run() -> None:
        stop = asyncio.Event()

        def step(done: Step) -> None:
            if done.after in (("answered",), ("failed",)):
                stop.set()  # `answered` waits for `again`: the run ends here

        await runtime.start(spec, session_id=session_id, root=root, stop=stop,
                            signals=False, on_step=step)

    asyncio.run(run())


def in_thread(call: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    """``call(*args, **kwargs)`` in a thread of its own: Playwright's sync API keeps an
    event loop running in the test's thread, where ``runtime.sync`` cannot run one."""
    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        return pool.submit(call, *args, **kwargs).result()


def chromium() -> str:
    """Debian's chromium; skip without it (or without Playwright) locally, fail in CI."""
    found = shutil.which("chromium") or (CHROMIUM if Path(CHROMIUM).exists() else None)
    problem = None
    if found is None:
        problem = "Debian's chromium is not installed (scripts/bootstrap.sh installs it)"
    else:
        try:
            import playwright.sync_api  # noqa: F401
        except ImportError:
            problem = "Playwright for Python is not installed (pip install -e '.[dev]')"
    if problem is not None:
        if IN_CI:
            pytest.fail(problem)
        pytest.skip(problem)
    assert found is not None
    return found


@contextlib.contextmanager
def chromium_process() -> Iterator[str]:
    """Debian's headless Chromium with a fresh, empty profile, for as long as the block
    lasts; its DevTools endpoint (``ws://127.0.0.1:PORT/...``) for Playwright to connect
    to."""
    executable = chromium()
    # the profile is removed once chromium is gone (its last writes may race a cleanup)
    with tempfile.TemporaryDirectory(prefix="interlock-chromium-",
                                     ignore_cleanup_errors=True) as profile:
        proc = subprocess.Popen([executable, *CHROMIUM_ARGS, f"--user-data-dir={profile}",
                                 "--remote-debugging-port=0", "about:blank"],
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                                start_new_session=True)
        try:
            active = Path(profile) / "DevToolsActivePort"
            deadline = time.monotonic() + 30
            while not (active.exists() and len(active.read_text().split()) == 2):
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"chromium did not start (exit {proc.poll()})")
                time.sleep(0.05)
            port, path = active.read_text().split()
            yield f"ws://127.0.0.1:{port}{path}"
        finally:
            proc.terminate()
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


@contextlib.contextmanager
def browser_context(endpoint: str) -> Iterator[Any]:
    """A Playwright context of the Chromium at ``endpoint`` (its own cookies and pages).

    The pages' Content-Security-Policy is bypassed: what keeps an agent's markup from
    running is then the page's own escaping, which is what the tests are after (and
    Playwright's waits may evaluate their conditions). The policy itself is tested over
    HTTP (tests/runtime/ui/test_http.py).

    Playwright's sync API keeps an event loop running in this thread while it is
    connected: code that runs one of its own (``runtime.sync``) goes through
    :func:`in_thread` meanwhile."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.connect_over_cdp(endpoint)
        context = browser.new_context(viewport={"width": 1280, "height": 900},
                                      bypass_csp=True)
        try:
            yield context
        finally:
            context.close()
            browser.close()


class UiServer:
    """The web app of ``root`` served in a thread, on 127.0.0.1, by the server
    ``interlock ui`` runs (runtime/host/serving.py)."""

    def __init__(self, root: Path, *, token: str | None = None, store: str | None = None,
                 loopback: bool = True) -> None:
        import uvicorn

        from interlock.runtime.host.serving import Server, bind

        self.config = runtime.UiConfig(root=root, token=token, store=store,
                                       loopback=loopback, backstop=2.0)
        self.app = runtime.ui_app(self.config)
        self.sock = bind("127.0.0.1", 0)
        self.port = self.sock.getsockname()[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self.server = Server(uvicorn.Config(self.app, log_level="warning", access_log=False,
                                            lifespan="on", timeout_graceful_shutdown=1,
                                            ws="none"),
                             on_stop=lambda: self.app.state.stop_streams())
        self.thread = threading.Thread(target=self.server.run,
                                       kwargs={"sockets": [self.sock]}, daemon=True)

    def __enter__(self) -> UiServer:
        self.thread.start()
        deadline = time.monotonic() + 15
        while not self.server.started:
            if time.monotonic() > deadline or not self.thread.is_alive():
                raise RuntimeError("the ui server did not start")
            time.sleep(0.01)
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.stop()  # as Ctrl-C does: the open pages' streams end first
        self.thread.join(timeout=10)
        self.sock.close()

    @property
    def csrf(self) -> str:
        return self.config.csrf


def shot(page: Any, name: str, *, full_page: bool = True) -> Path:
    """Save a screenshot of ``page`` under .cache/ui-screenshots/ (``ralph-session.png``
    is the README's docs/ui.png: copy it there to refresh that)."""
    SHOTS.mkdir(parents=True, exist_ok=True)
    path = SHOTS / f"{name}.png"
    page.screenshot(path=str(path), full_page=full_page)
    return path
