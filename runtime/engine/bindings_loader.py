"""Load user bindings (guard/action callables) named on the command line.

``--bindings`` names a module importable from the working directory (``mybindings``,
``pkg.bindings``) or a Python file (``bindings.py``, ``tools/bindings.py``), optionally
with ``:ATTR``; the attribute (default ``BINDINGS``, then ``bindings``) is a mapping from
guard/action names to callables that take one :class:`interlock.machines.Call`.

Every way this can go wrong is a :class:`BindingsError` with one line that says which:
the module or file is missing, it has a syntax error (``FILE:LINE:COL``), it raised while
importing, it defines no such attribute, the attribute is not a mapping, or some of its
values are not callable. Loading writes no ``__pycache__`` (``validate`` creates nothing).
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from types import ModuleType
from typing import Any

DEFAULT_ATTRS = ("BINDINGS", "bindings")


class BindingsError(Exception):
    """The bindings named by the user cannot be loaded; the message says why."""


def _is_file_reference(target: str) -> bool:
    return target.endswith(".py") or "/" in target or "\\" in target


@contextmanager
def _no_bytecode() -> Iterator[None]:
    before = sys.dont_write_bytecode
    sys.dont_write_bytecode = True
    try:
        yield
    finally:
        sys.dont_write_bytecode = before


def _import_file(target: str) -> ModuleType:
    path = Path(target)
    if not path.is_file():
        what = "is a folder, not a Python file" if path.is_dir() else "not found"
        raise BindingsError(f"bindings file {target} {what}")
    spec = importlib.util.spec_from_file_location(f"_interlock_bindings_{path.stem}", path)
    if spec is None or spec.loader is None:
        raise BindingsError(f"cannot import bindings from {target}: not a Python file")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        del sys.modules[spec.name]
        raise
    return module


def _import_module(target: str, cwd: Path) -> ModuleType:
    if str(cwd) not in sys.path:  # `interlock` runs from .venv/bin: cwd is not on the path
        sys.path.insert(0, str(cwd))
    importlib.invalidate_caches()
    try:
        return importlib.import_module(target)
    except ModuleNotFoundError as exc:
        missing = exc.name or ""
        if target == missing or target.startswith(f"{missing}."):
            raise BindingsError(
                f"bindings module {target!r} not found (looked in {cwd} and on sys.path; "
                "name a module, or a file such as bindings.py)") from None
        raise  # the module itself imports something missing: reported by the caller


def _syntax_error(exc: SyntaxError, target: str) -> BindingsError:
    where = exc.filename or target
    if exc.lineno:
        where += f":{exc.lineno}:{exc.offset or 1}"
    return BindingsError(f"{where}: syntax error in the bindings: {exc.msg}")


def load_bindings(reference: str, cwd: Path | None = None) -> Mapping[str, Any]:
    """The bindings mapping that ``MODULE[:ATTR]`` or ``FILE.py[:ATTR]`` names; a module
    is looked up in ``cwd`` (default: the working directory) first."""
    target, _, attr = reference.partition(":")
    if not target:
        raise BindingsError(f"--bindings {reference!r}: name a module or a .py file")
    where = Path.cwd() if cwd is None else cwd
    try:
        with _no_bytecode():
            if _is_file_reference(target):
                module = _import_file(target if cwd is None else str(where / target))
            else:
                module = _import_module(target, where)
    except BindingsError:
        raise
    except SyntaxError as exc:
        raise _syntax_error(exc, target) from None
    except Exception as exc:  # the user's module raised while importing
        text = " ".join(str(exc).split())
        raise BindingsError(f"importing bindings {target} failed: "
                            f"{type(exc).__name__}: {text}") from None
    except SystemExit as exc:
        raise BindingsError(f"importing bindings {target} failed: it called "
                            f"sys.exit({exc.code!r})") from None
    return _bindings_of(module, target, attr)


def _bindings_of(module: ModuleType, target: str, attr: str) -> Mapping[str, Any]:
    names = (attr,) if attr else DEFAULT_ATTRS
    for name in names:
        value = getattr(module, name, None)
        if value is None:
            continue
        if not isinstance(value, Mapping):
            raise BindingsError(f"{target}:{name} is a {type(value).__name__}, "
                                "not a mapping of names to callables")
        bad_keys = [repr(k) for k in value if not isinstance(k, str)]
        if bad_keys:
            raise BindingsError(f"{target}:{name}: keys must be guard/action names, got "
                                f"{', '.join(bad_keys)}")
        bad = [f"{k} ({type(v).__name__})" for k, v in value.items() if not callable(v)]
        if bad:
            raise BindingsError(f"{target}:{name}: not callable: {', '.join(bad)}")
        return value
    raise BindingsError(f"bindings {target} define none of: {', '.join(names)} "
                        "(a mapping of guard/action names to callables)")
