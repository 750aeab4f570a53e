"""load_checked(): load -> IR -> lint -> SpecError, the one path to a usable machine."""

from __future__ import annotations

import doctest
import importlib
from pathlib import Path

import pytest

from interlock.machines import Diagnostic, SpecError, check_ir, load_checked, loads

DOOR = ("machine: door\ninitial: closed\nstates:\n"
        "  closed: {on: {open: opened}}\n  opened: {on: {close: closed}}\n")
BROKEN = "machine: m\ninitial: a\nstates:\n  a: {on: {go: nowhere}}\n"
GUARDED = ("machine: g\ninitial: a\nstates:\n  a: {on: {go: {target: b, guard: ok}}}\n"
           "  b: {type: final}\n")


@pytest.mark.parametrize("module", ["interlock.machines", "interlock.machines.checked",
                                    "interlock.machines.compile",
                                    "interlock.machines.durations",
                                    "interlock.machines.settings",
                                    "interlock.machines.templates",
                                    "interlock.machines.yamlsrc"])
def test_doctests(module: str) -> None:
    result = doctest.testmod(importlib.import_module(module), optionflags=doctest.ELLIPSIS)
    assert result.failed == 0 and result.attempted > 0


def test_text_and_path_give_the_same_machine(tmp_path: Path) -> None:
    path = tmp_path / "door.yaml"
    path.write_text(DOOR)
    named = str(path)
    assert load_checked(path) == load_checked(DOOR, file=named)
    assert load_checked(DOOR.encode(), file=named) == load_checked(path)
    assert load_checked(DOOR).file == "<string>"


def test_lint_errors_raise_with_the_file_named(tmp_path: Path) -> None:
    with pytest.raises(SpecError) as text_error:
        load_checked(BROKEN, file="m.yaml")
    assert [d.code for d in text_error.value.diagnostics] == ["M201"]
    assert text_error.value.diagnostics[0].mark.file == "m.yaml"
    path = tmp_path / "m.yaml"
    path.write_text(BROKEN)
    with pytest.raises(SpecError) as file_error:
        load_checked(path)
    assert file_error.value.diagnostics[0].mark.file == str(path)


def test_load_errors_raise_too(tmp_path: Path) -> None:
    with pytest.raises(SpecError) as exc:
        load_checked(tmp_path / "missing.yaml")
    assert exc.value.diagnostics[0].code == "Y011"
    with pytest.raises(SpecError):
        load_checked("machine: [unclosed\n")


def test_bindings_make_unbound_names_errors_and_warnings_are_collected() -> None:
    load_checked(GUARDED)  # no bindings: names are not checked
    with pytest.raises(SpecError) as exc:
        load_checked(GUARDED, bindings={})
    assert [d.code for d in exc.value.diagnostics] == ["M211"]
    load_checked(GUARDED, bindings={"ok": lambda call: True})
    warnings: list[Diagnostic] = []
    load_checked(DOOR, warnings=warnings)
    assert all(not d.is_error for d in warnings)


def test_check_ir_takes_a_spec_or_an_ir() -> None:
    spec = loads(DOOR)
    assert check_ir(spec) == check_ir(load_checked(DOOR))
