"""Every Python block in the README, docs/python-api.md and docs/agents.md runs, top to
bottom, in a fresh folder (one namespace per document, so later blocks use what earlier
ones defined)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from support.paths import ROOT

DOCS = ["README.md", "docs/python-api.md", "docs/agents.md"]
BLOCK = re.compile(r"^```python\n(.*?)^```$", re.S | re.M)


def python_blocks(doc: str) -> list[str]:
    return BLOCK.findall((ROOT / doc).read_text(encoding="utf-8"))


@pytest.mark.parametrize("doc", DOCS)
def test_every_python_block_runs(doc: str, tmp_path: Path,
                                 monkeypatch: pytest.MonkeyPatch) -> None:
    blocks = python_blocks(doc)
    assert blocks, f"{doc} has no Python block"
    monkeypatch.chdir(tmp_path)
    if doc == "docs/agents.md":  # its interlock.testing example runs the real claude
        from support.real_clis import cli_path, require_cli

        require_cli("claude")
        monkeypatch.setenv("PATH", cli_path())
    namespace: dict[str, object] = {"__name__": f"doc_{Path(doc).stem}"}
    for number, block in enumerate(blocks, 1):
        code = compile(block, f"{doc} (python block {number})", "exec")
        exec(code, namespace)  # the documentation's own code, as a reader would run it
