"""The façade: every exported name resolves, and none is shadowed by a room's package."""

from __future__ import annotations

import inspect
import pkgutil
import subprocess
import sys
from pathlib import Path

import pytest

from interlock import runtime

from support.paths import ROOT

ROOMS = {m.name for m in pkgutil.iter_modules([str(Path(runtime.__file__).parent)])}


@pytest.mark.parametrize("name", runtime.__all__)
def test_every_exported_name_resolves_and_is_no_room(name: str) -> None:
    assert name not in ROOMS, f"runtime.{name} would be shadowed by the subpackage"
    assert getattr(runtime, name) is not None


def test_an_unknown_name_is_an_attribute_error() -> None:
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        runtime.nope  # noqa: B018


def test_sync_has_every_name_of_the_facade_blocking() -> None:
    assert set(runtime.sync.__all__) == set(runtime.__all__) - {"sync"}
    for name in runtime.sync.__all__:
        value, blocking = getattr(runtime, name), getattr(runtime.sync, name)
        asynchronous = inspect.iscoroutinefunction(value) or inspect.isasyncgenfunction(value)
        assert asynchronous == (blocking is not value), name
        assert not inspect.iscoroutinefunction(blocking), name
        assert not inspect.isasyncgenfunction(blocking), name


def test_sync_is_generated_from_the_facade() -> None:
    check = subprocess.run([sys.executable, str(ROOT / "scripts" / "generate_sync.py"),
                            "--check"], capture_output=True, text=True, check=False)
    assert check.returncode == 0, check.stderr


def test_sync_follow_is_a_generator_of_the_journal(tmp_path: Path) -> None:
    spec = tmp_path / "door.yaml"
    spec.write_text("machine: door\ninitial: closed\nstates:\n"
                    "  closed: {on: {open: opened}}\n  opened: {on: {close: closed}}\n")
    runtime.sync.create(spec, session_id="d1", root=tmp_path)
    runtime.sync.send("d1", "open", root=tmp_path)
    entries = runtime.sync.follow("d1", root=tmp_path)
    first = next(entries)
    entries.close()
    assert first.seq == 0
