"""diagrams/ is current with specs/: the committed diagrams are what the specs generate.

Checks the Markdown (Mermaid) pages and the index byte for byte, and each SVG by the hash
of the DOT source stamped into it (so it holds on any Graphviz version; no `dot` needed).
"""

from __future__ import annotations

from interlock.runtime.diagrams.files import REGENERATE, stale_diagrams

from support.paths import DIAGRAMS, builtin_spec_paths


def test_diagrams_are_current() -> None:
    specs = builtin_spec_paths()
    assert specs, "specs/ holds no spec"
    stale = stale_diagrams(specs, DIAGRAMS)
    assert not stale, (
        f"diagrams/ is out of date with specs/: {', '.join(stale)}.\n"
        f"Regenerate them with:  {REGENERATE}\n"
        "(a listed file whose spec no longer exists is to be deleted)"
    )
