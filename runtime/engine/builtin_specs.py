"""The built-in specs shipped inside the wheel (``interlock.specs``)."""

from __future__ import annotations

from importlib.resources import files
from pathlib import Path


def builtin_spec_dir() -> Path:
    return Path(str(files("interlock.specs")))


def builtin_specs() -> list[Path]:
    """Every built-in spec file, sorted by name."""
    return sorted(builtin_spec_dir().glob("*.yaml"))


def resolve_spec(name_or_path: str) -> Path:
    """A spec path as given, or the built-in spec of that name (``polling_state``)."""
    path = Path(name_or_path)
    if path.exists() or path.suffix in (".yaml", ".yml") or "/" in name_or_path:
        return path
    builtin = builtin_spec_dir() / f"{name_or_path}.yaml"
    return builtin if builtin.exists() else path
