"""docs/builtin-specs.md names every event, guard, action and state of each built-in spec."""

from __future__ import annotations

import re

import pytest

from interlock.machines import build_ir, load

from support.paths import ROOT, builtin_spec_paths

DOC = (ROOT / "docs" / "builtin-specs.md").read_text()


def _section(name: str) -> str:
    match = re.search(rf"^## `{name}`.*?(?=^## |\Z)", DOC, re.S | re.M)
    assert match, f"docs/builtin-specs.md has no section for {name}"
    return match.group(0)


@pytest.mark.parametrize("path", builtin_spec_paths(), ids=lambda p: p.stem)
def test_every_name_a_runtime_binds_is_documented(path) -> None:  # type: ignore[no-untyped-def]
    ir = build_ir(load(path))
    section = _section(ir.name)
    names = [*ir.events, *ir.guards, *ir.actions, *ir.states]
    missing = [n for n in names if f"`{n}`" not in section and not re.search(
        rf"`[^`]*\b{re.escape(n)}\b[^`]*`", section)]
    assert not missing, f"{ir.name}: not named in docs/builtin-specs.md: {missing}"
