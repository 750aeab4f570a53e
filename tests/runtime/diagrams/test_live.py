"""The live statechart: every drawn state of every built-in spec carries its id and
whether it is active; transitions their ends; nothing unsafe survives."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from interlock.machines import build_ir, load, loads
from interlock.machines.render import render_dot
from interlock.runtime.diagrams.graphviz import render_with_dot
from interlock.runtime.diagrams.live import SVG, annotate_svg

from support.paths import builtin_spec_paths, require_dot

G = f"{{{SVG}}}g"


def _marked(svg: str) -> dict[str, ET.Element]:
    return {g.get("data-state", ""): g for g in ET.fromstring(svg).iter(G)
            if g.get("data-state")}


@pytest.mark.parametrize("path", builtin_spec_paths(), ids=lambda p: p.stem)
def test_every_state_of_a_builtin_spec_is_marked(path: Path) -> None:
    require_dot()
    ir = build_ir(load(path))
    active = {ir.initial} if ir.initial else set()
    svg = annotate_svg(render_with_dot(render_dot(ir), "svg"), ir, active)
    marked = _marked(svg)
    drawn = {sid for sid, state in ir.states.items()}
    assert set(marked) == drawn
    assert {sid for sid, g in marked.items() if g.get("data-active") == "true"} == active
    for sid, g in marked.items():
        kind = "compound" if g.get("class") == "cluster" else "state"
        assert g.get("data-kind") == kind, sid
        assert g.get("aria-label") in (sid, f"{sid}, active")
    edges = [g for g in ET.fromstring(svg).iter(G) if g.get("class") == "edge"]
    assert edges and all(g.get("data-to") in ir.states for g in edges)
    assert all(g.get("data-from") in ir.states for g in edges if g.get("data-from"))


def test_ids_dot_renames_are_read_back_and_edges_know_their_ends() -> None:
    require_dot()
    ir = build_ir(loads("machine: m\ninitial: 'a b'\nstates:\n"
                        "  'a b': {on: {go: 'c:d'}}\n  'c:d':\n    initial: x\n"
                        "    states:\n      x: {on: {back: 'a b'}}\n", "m.yaml"))
    svg = annotate_svg(render_with_dot(render_dot(ir), "svg"), ir, ["c:d", "x"])
    marked = _marked(svg)
    assert set(marked) == {"a b", "c:d", "x"}
    assert marked["x"].get("data-active") == "true"
    assert marked["a b"].get("data-active") == "false"
    ends = {(g.get("data-from"), g.get("data-to")) for g in ET.fromstring(svg).iter(G)
            if g.get("class") == "edge"}
    assert ("a b", "c:d") in ends and ("x", "a b") in ends


def test_scripts_handlers_and_links_out_are_removed() -> None:
    ir = build_ir(loads("machine: m\ninitial: a\nstates:\n  a: {type: final}\n", "m.yaml"))
    hostile = (f'<svg xmlns="{SVG}" xmlns:xlink="http://www.w3.org/1999/xlink" '
               'width="10pt" height="10pt" viewBox="0 0 10 10" onload="alert(1)">'
               '<script>alert(2)</script><g class="node" onclick="alert(3)"><title>a</title>'
               '<a xlink:href="javascript:alert(4)"><path d="M0,0"/></a></g>'
               '<foreignObject><div>x</div></foreignObject></svg>')
    svg = annotate_svg(hostile, ir, ["a"])
    assert "alert" not in svg and "script" not in svg and "foreignObject" not in svg
    root = ET.fromstring(svg)
    assert root.get("width") is None and root.get("role") == "group"
    assert _marked(svg)["a"].get("data-active") == "true"
