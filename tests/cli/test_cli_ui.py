"""``interlock ui`` as a real process: the URL it prints, the token it makes for any host
but the loopback, a port in use said in one line, Ctrl-C."""

from __future__ import annotations

import signal
import socket
import subprocess
import sys
from pathlib import Path

import httpx

from support.paths import ROOT

INTERLOCK = [sys.executable, "-m", "interlock.runtime.cli"]


def _start(root: Path, *args: str) -> tuple[subprocess.Popen[str], str]:
    proc = subprocess.Popen([*INTERLOCK, "ui", "--port", "0", *args], cwd=root,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    line = proc.stdout.readline()
    assert line.startswith("interlock ui: http://"), (line, proc.stderr.read())
    return proc, line.split(": ", 1)[1].strip()


def _stop(proc: subprocess.Popen[str]) -> tuple[int, str]:
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=15)
    return proc.returncode, err


def test_another_host_gets_a_token_that_every_request_needs(tmp_path: Path) -> None:
    proc, url = _start(tmp_path, "--host", "0.0.0.0")
    try:
        assert "?token=" in url
        token = url.split("?token=", 1)[1]
        port = url.split(":")[2].split("/")[0]
        local = f"http://127.0.0.1:{port}"
        assert httpx.get(local + "/").status_code == 401
        assert httpx.get(local + "/api/sessions").status_code == 401
        ok = httpx.get(f"{local}/?token={token}", follow_redirects=True)
        assert ok.status_code == 200 and "Sessions" in ok.text
    finally:
        code, err = _stop(proc)
    assert f"token: {token}" in err
    assert code == 0 and "Traceback" not in err


UI_EXAMPLE = "$ interlock ui --host 0.0.0.0 --port 8642\n"


def test_the_example_of_docs_ui_is_current(tmp_path: Path) -> None:
    """docs/ui.md's output of `interlock ui --host 0.0.0.0`, with this run's port and
    token in place of the page's."""
    block = (ROOT / "docs" / "ui.md").read_text().split(UI_EXAMPLE, 1)[1]
    shown = block.split("```", 1)[0].splitlines()
    proc, url = _start(tmp_path, "--host", "0.0.0.0")
    _, err = _stop(proc)
    port, token = url.split(":")[2].split("/")[0], url.split("?token=", 1)[1]
    said = [f"interlock ui: {url}", *err.splitlines()]
    page_token = shown[0].split("?token=", 1)[1]
    assert [line.replace(token, page_token).replace(f":{port}/", ":8642/")
            for line in said] == shown


def test_the_loopback_needs_no_token(tmp_path: Path) -> None:
    proc, url = _start(tmp_path)
    try:
        assert url.startswith("http://127.0.0.1:") and "token" not in url
        assert httpx.get(url).status_code == 200
    finally:
        code, err = _stop(proc)
    assert code == 0 and "token" not in err


def test_a_port_in_use_is_one_line(tmp_path: Path) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        done = subprocess.run([*INTERLOCK, "ui", "--port", str(port)], cwd=tmp_path,
                              capture_output=True, text=True, timeout=30)
    assert done.returncode == 1
    assert done.stderr.strip() == (f"error: port {port} is in use on 127.0.0.1: pick another "
                                   "with --port (or --port 0 for any free one)")
    assert done.stdout == ""
