"""The CLI's messages: plain text where a program reads them, rich's styles on a terminal.
Text is never markup: a name with brackets in it is printed as it is, both ways."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pexpect

ODD = "missing [red]x[/] and [bold].yaml"


def test_a_message_to_a_pipe_is_its_plain_text_and_loads_no_rich(tmp_path: Path) -> None:
    code = ("import json, sys\n"
            "from interlock.runtime.cli.app import main\n"
            "try:\n"
            f"    main(['validate', {ODD!r}])\n"
            "except SystemExit as exc:\n"
            "    print(json.dumps([exc.code, sorted(m for m in sys.modules\n"
            "                                       if m.split('.')[0] == 'rich')]))\n")
    env = {k: v for k, v in os.environ.items() if k not in ("FORCE_COLOR", "TTY_COMPATIBLE")}
    done = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=env,
                          capture_output=True, text=True, check=True)
    assert done.stderr == f"error: no such file or directory: {ODD}\n"
    assert json.loads(done.stdout) == [2, []]


def test_force_color_styles_a_message_even_to_a_pipe(tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, "-m", "interlock.runtime.cli", "validate", ODD],
                          cwd=tmp_path, env={**os.environ, "FORCE_COLOR": "1"},
                          capture_output=True, text=True)
    assert done.returncode == 2
    assert done.stderr.startswith("\x1b[1;31merror:\x1b[0m no such file or directory: ")
    assert ODD in done.stderr


def test_a_terminal_gets_the_style_and_the_brackets_as_they_are(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items()
           if k not in ("FORCE_COLOR", "TTY_COMPATIBLE", "NO_COLOR")}
    child = pexpect.spawn(sys.executable, ["-m", "interlock.runtime.cli", "validate", ODD],
                          cwd=str(tmp_path), env={**env, "TERM": "xterm-256color"},
                          dimensions=(24, 200), encoding="utf-8", timeout=30)
    child.expect(pexpect.EOF)
    child.close()
    assert child.exitstatus == 2
    shown = child.before or ""
    assert "\x1b[1;31merror:\x1b[0m" in shown
    assert ODD in shown
