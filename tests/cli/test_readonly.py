"""Read-only commands create no file or folder, whatever they are asked (issue 9)."""

from __future__ import annotations

from pathlib import Path

import pytest

from support.cli import Cli

DOOR = ("machine: door\ninitial: closed\nstates:\n  closed: {on: {open: opened}}\n"
        "  opened: {on: {close: closed}}\n")
BINDINGS = "BINDINGS = {'ring': print}\n"


def _tree(root: Path) -> set[str]:
    return {str(p.relative_to(root)) for p in root.rglob("*")}


@pytest.mark.parametrize("args", [
    ("validate", "door.yaml"),
    ("validate", "."),
    ("validate", "--bindings", "door_bindings", "door.yaml"),
    ("validate", "--bindings", "door_bindings.py", "door.yaml"),
    ("validate", "nope.yaml"),
    ("diagram", "door.yaml"),
    ("diagram", "door.yaml", "-f", "dot"),
    ("diagram", "--session", "s1"),
    ("diagram", "--session", "s1", "--store", "other.db"),
    ("specs",),
    ("schema",),
    ("status",),
    ("status", "s1"),
    ("status", "--json"),
    ("log", "s1"),
    ("sessions",),
    ("--version",),
    ("-h",),
    ("run", "-h"),
])
def test_a_read_only_command_creates_nothing(cli: Cli, tmp_path: Path,
                                             args: tuple[str, ...]) -> None:
    (tmp_path / "door.yaml").write_text(DOOR)
    (tmp_path / "door_bindings.py").write_text(BINDINGS)
    before = _tree(tmp_path)
    result = cli(*args, cwd=tmp_path)
    assert "Traceback" not in result.stderr + result.stdout
    assert _tree(tmp_path) == before, result.stderr


@pytest.mark.parametrize("args", [("status",), ("status", "--json")])
def test_status_without_a_store_is_no_sessions(cli: Cli, tmp_path: Path,
                                               args: tuple[str, ...]) -> None:
    result = cli(*args, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert list(tmp_path.iterdir()) == []


def test_log_and_diagram_of_a_session_without_a_store_are_unknown(cli: Cli,
                                                                  tmp_path: Path) -> None:
    for args in (("log", "s1"), ("diagram", "--session", "s1"), ("status", "s1")):
        result = cli(*args, cwd=tmp_path)
        assert result.returncode == 1, (args, result.stderr)
        assert "'s1'" in result.stderr, result.stderr
        assert len(result.stderr.splitlines()) == 1, result.stderr
    assert list(tmp_path.iterdir()) == []
