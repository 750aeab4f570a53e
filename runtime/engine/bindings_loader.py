"""Load user bindings (guard/action callables) named on the command line.

``--bindings MODULE`` names an importable module or a ``.py`` file, optionally with
``:ATTR``; the attribute (default ``BINDINGS``, then ``bindings``) is a mapping from
guard/action names to callables that take one :class:`interlock.machines.Call`.
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
from collections.abc import Mapping
from pathlib import Path
from types import ModuleType
from typing import Any

DEFAULT_ATTRS = ("BINDINGS", "bindings")


class BindingsError(Exception):
    """The bindings named by the user cannot be loaded; the message says why."""


def _import(target: str) -> ModuleType:
    if target.endswith(".py") or "/" in target:
        path = Path(target)
        if not path.is_file():
            raise BindingsError(f"bindings file not found: {target}")
        spec = importlib.util.spec_from_file_location(f"_interlock_bindings_{path.stem}", path)
        if spec is None or spec.loader is None:
            raise BindingsError(f"cannot import bindings from {target}")
        module = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = module
        spec.loader.exec_module(module)
        return module
    try:
        return importlib.import_module(target)
    except ModuleNotFoundError as exc:
        raise BindingsError(f"bindings module not found: {target} ({exc})") from None


def load_bindings(reference: str) -> Mapping[str, Any]:
    """The bindings mapping that ``MODULE[:ATTR]`` or ``FILE.py[:ATTR]`` names."""
    target, _, attr = reference.partition(":")
    try:
        module = _import(target)
    except BindingsError:
        raise
    except Exception as exc:  # the user's module raised while importing
        raise BindingsError(f"importing {target} failed: {type(exc).__name__}: {exc}") from None
    names = (attr,) if attr else DEFAULT_ATTRS
    for name in names:
        value = getattr(module, name, None)
        if value is None:
            continue
        if not isinstance(value, Mapping):
            raise BindingsError(f"{target}:{name} is a {type(value).__name__}, "
                                "not a mapping of names to callables")
        bad = [k for k, v in value.items() if not isinstance(k, str) or not callable(v)]
        if bad:
            raise BindingsError(f"{target}:{name}: not callable: {', '.join(map(str, bad))}")
        return value
    raise BindingsError(f"{target} defines none of: {', '.join(names)}")
