"""The project file, ``interlock.yaml``: read it, parse it, take one section.

Every configuration section (``agents:``, ``dispatch:``, ``ralph:``, ``inbox:``) is read
the same way; each loader turns a :class:`~interlock.machines.diagnostics.SpecError` from
here into its own error class and validates its section itself.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from interlock.machines.diagnostics import Mark, SpecError, error
from interlock.machines.yamlsrc import SourceMap, parse_yaml

PROJECT_FILE = "interlock.yaml"


def read_project_file(path: Path) -> bytes:
    """The file's bytes; SpecError ``Y011`` (at ``FILE:1:1``) when it cannot be read."""
    try:
        return path.read_bytes()
    except OSError as exc:
        reason = "is a directory" if path.is_dir() else f"cannot be read: {exc.strerror or exc}"
        raise SpecError([error("Y011", f"the project file {reason}",
                               Mark(str(path), 1, 1))]) from None


def project_section(raw: bytes, file: str, section: str) -> tuple[Any, SourceMap]:
    """The value under ``section`` (None when absent) and the file's source map, for
    located diagnostics; SpecError for YAML that does not parse."""
    document = parse_yaml(raw, file)
    data = document.data.get(section) if isinstance(document.data, Mapping) else None
    return data, document.source
