"""-h and --help on every command and sub-command; --version."""

from __future__ import annotations

import json
import subprocess
import sys
from importlib.metadata import version
from typing import Any

import typer

from interlock.runtime.cli.app import app

from support.cli import Cli
from support.paths import TESTS

HELP_PAGES = TESTS / "support" / "help_pages.py"


def _command_paths() -> list[tuple[str, ...]]:
    paths: list[tuple[str, ...]] = [()]
    stack: list[tuple[tuple[str, ...], object]] = [((), typer.main.get_command(app))]
    while stack:
        path, command = stack.pop()
        for name, sub in getattr(command, "commands", {}).items():
            paths.append((*path, name))
            stack.append(((*path, name), sub))
    return sorted(paths)


def _pages() -> dict[str, dict[str, dict[str, Any]]]:
    """What `-h` and `--help` print and exit with, for every command: one process runs the
    CLI's entry point for each (starting 80 processes took most of this module's time)."""
    result = subprocess.run([sys.executable, str(HELP_PAGES), json.dumps(_command_paths())],
                            capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    found: dict[str, dict[str, dict[str, Any]]] = json.loads(result.stdout)
    return found


def test_every_command_is_listed() -> None:
    paths = _command_paths()
    assert {("run",), ("dispatch",), ("signal",), ("mailbox", "consume")} <= set(paths)


def test_h_and_help_print_the_same_help_and_a_process_of_its_own_too(cli: Cli) -> None:
    """One test, so that the pages are rendered once (a fixture would render them again
    in every test worker that runs one of its tests)."""
    pages = _pages()
    for path in _command_paths():
        name = " ".join(path) or "interlock"
        short, long = pages[" ".join(path)]["-h"], pages[" ".join(path)]["--help"]
        assert short["code"] == 0, f"{name}: {short['stderr']}"
        assert "Usage: interlock" in short["stdout"], name
        assert long == short, name
    for path in [(), ("run",), ("inbox", "ack")]:  # the pages a real `interlock` prints
        for flag in ("-h", "--help"):
            shown = cli(*path, flag)
            assert (shown.returncode, shown.stdout, shown.stderr) == (
                0, pages[" ".join(path)][flag]["stdout"], ""), (path, flag)


def test_version(cli: Cli) -> None:
    shown = cli("--version")
    assert (shown.returncode, shown.stdout) == (0, f"interlock {version('interlock')}\n")
