"""gemini against the scripted server: to be written (see testing/clis/claude.py)."""

from __future__ import annotations

from pathlib import Path


def prepare(home: Path, url: str) -> dict[str, str]:
    raise NotImplementedError("gemini: no scripted setup yet")
