"""-h and --help on every command and sub-command; --version."""

from __future__ import annotations

from importlib.metadata import version

import pytest
import typer

from interlock.runtime.cli.app import app

from support.cli import Cli


def _command_paths() -> list[tuple[str, ...]]:
    paths: list[tuple[str, ...]] = [()]
    stack: list[tuple[tuple[str, ...], object]] = [((), typer.main.get_command(app))]
    while stack:
        path, command = stack.pop()
        for name, sub in getattr(command, "commands", {}).items():
            paths.append((*path, name))
            stack.append(((*path, name), sub))
    return sorted(paths)


def test_every_command_is_listed() -> None:
    paths = _command_paths()
    assert {("run",), ("dispatch",), ("signal",), ("mailbox", "consume")} <= set(paths)


@pytest.mark.parametrize("path", _command_paths(), ids=lambda p: " ".join(p) or "interlock")
def test_h_and_help_print_the_same_help(cli: Cli, path: tuple[str, ...]) -> None:
    short = cli(*path, "-h")
    assert short.returncode == 0, short.stderr
    assert "Usage: interlock" in short.stdout
    assert cli(*path, "--help").stdout == short.stdout


def test_version(cli: Cli) -> None:
    shown = cli("--version")
    assert (shown.returncode, shown.stdout) == (0, f"interlock {version('interlock')}\n")
