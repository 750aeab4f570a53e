"""--bindings: a module importable from the working directory, or a file; clear errors."""

from __future__ import annotations

import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from interlock.runtime.engine.bindings_loader import BindingsError, load_bindings

GOOD = "BINDINGS = {'ok': lambda call: True}\n"


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """A working directory; modules imported from it are forgotten afterwards."""
    monkeypatch.chdir(tmp_path)
    before = set(sys.modules)
    path = list(sys.path)
    yield tmp_path
    for name in set(sys.modules) - before:
        del sys.modules[name]
    sys.path[:] = path


def test_a_module_in_the_working_directory(project: Path) -> None:
    (project / "mine_cwd.py").write_text(GOOD)
    assert set(load_bindings("mine_cwd")) == {"ok"}
    assert not (project / "__pycache__").exists()


def test_a_package_module_and_an_attribute(project: Path) -> None:
    (project / "pkg_b").mkdir()
    (project / "pkg_b" / "__init__.py").write_text("")
    (project / "pkg_b" / "rules.py").write_text("MY = {'g': len}\n")
    assert set(load_bindings("pkg_b.rules:MY")) == {"g"}


def test_a_file_path(project: Path) -> None:
    (project / "sub").mkdir()
    (project / "sub" / "b.py").write_text("bindings = {'a': print}\n")
    assert set(load_bindings("sub/b.py")) == {"a"}
    assert set(load_bindings(str(project / "sub" / "b.py"))) == {"a"}


@pytest.mark.parametrize(("files", "reference", "message"), [
    ({}, "nope_mod", "bindings module 'nope_mod' not found (looked in "),
    ({}, "nope.py", "bindings file nope.py not found"),
    ({"d/x": ""}, "d/", "bindings file d/ is a folder, not a Python file"),
    ({"bad_syn.py": "BINDINGS = {\n  'a': ,\n}\n"}, "bad_syn",
     "bad_syn.py:2:6: syntax error in the bindings: "),
    ({"boom_mod.py": "raise RuntimeError('no\\ndatabase')\n"}, "boom_mod",
     "importing bindings boom_mod failed: RuntimeError: no database"),
    ({"dep_mod.py": "import not_installed_x\n"}, "dep_mod",
     "importing bindings dep_mod failed: ModuleNotFoundError: No module named "
     "'not_installed_x'"),
    ({"exits_mod.py": "import sys\nsys.exit(3)\n"}, "exits_mod",
     "importing bindings exits_mod failed: it called sys.exit(3)"),
    ({"empty_mod.py": "X = 1\n"}, "empty_mod",
     "bindings empty_mod define none of: BINDINGS, bindings"),
    ({"attr_mod.py": "X = 1\n"}, "attr_mod:MINE", "bindings attr_mod define none of: MINE"),
    ({"list_mod.py": "BINDINGS = [print]\n"}, "list_mod",
     "list_mod:BINDINGS is a list, not a mapping of names to callables"),
    ({"val_mod.py": "BINDINGS = {'a': 1, 'b': print}\n"}, "val_mod",
     "val_mod:BINDINGS: not callable: a (int)"),
    ({"key_mod.py": "BINDINGS = {1: print}\n"}, "key_mod",
     "key_mod:BINDINGS: keys must be guard/action names, got 1"),
    ({}, ":X", "--bindings ':X': name a module or a .py file"),
])
def test_mistakes_are_one_clear_line(project: Path, files: dict[str, str], reference: str,
                                     message: str) -> None:
    for name, text in files.items():
        (project / name).parent.mkdir(parents=True, exist_ok=True)
        (project / name).write_text(text)
    with pytest.raises(BindingsError) as caught:
        load_bindings(reference)
    text = str(caught.value)
    assert message in text
    assert "\n" not in text
