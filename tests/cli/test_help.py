"""-h and --help on every command and sub-command; --version."""

from __future__ import annotations

import json
import subprocess
import sys
from importlib.metadata import version
from typing import Any

import pytest
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


@pytest.fixture(scope="module")
def pages() -> dict[str, dict[str, dict[str, Any]]]:
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


@pytest.mark.parametrize("path", _command_paths(), ids=lambda p: " ".join(p) or "interlock")
def test_h_and_help_print_the_same_help(pages: dict[str, dict[str, dict[str, Any]]],
                                        path: tuple[str, ...]) -> None:
    short, long = pages[" ".join(path)]["-h"], pages[" ".join(path)]["--help"]
    assert short["code"] == 0, short["stderr"]
    assert "Usage: interlock" in short["stdout"]
    assert long == short


@pytest.mark.parametrize("path", [(), ("run",), ("inbox", "ack")],
                         ids=lambda p: " ".join(p) or "interlock")
def test_a_process_of_its_own_prints_the_same_pages(
        cli: Cli, pages: dict[str, dict[str, dict[str, Any]]], path: tuple[str, ...]) -> None:
    for flag in ("-h", "--help"):
        shown = cli(*path, flag)
        assert (shown.returncode, shown.stdout, shown.stderr) == (
            0, pages[" ".join(path)][flag]["stdout"], ""), flag


def test_version(cli: Cli) -> None:
    shown = cli("--version")
    assert (shown.returncode, shown.stdout) == (0, f"interlock {version('interlock')}\n")
