"""codex against the scripted server: to be written (see testing/clis/claude.py)."""

from __future__ import annotations

from pathlib import Path


def prepare(home: Path, url: str) -> dict[str, str]:
    raise NotImplementedError("codex: no scripted setup yet")
