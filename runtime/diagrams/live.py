"""A statechart for a live page: Graphviz's SVG of a spec, each drawn state marked with
its id and whether it is active, each transition with the states it joins.

``dot`` names each drawn node and cluster in a ``<title>`` (the DOT node id of
:func:`interlock.machines.render.dot_ids`, ``cluster_<id>`` for a compound state, the
invisible ``::anchor:<id>`` where an edge meets a cluster). :func:`annotate_svg` reads
those names back and sets, on each state's ``<g>``:

* ``data-state``: the state id, ``data-active``: ``true`` or ``false``,
  ``data-kind``: ``state`` or ``compound`` (a cluster), and an ``aria-label`` (``ID`` or
  ``ID, active``) for screen readers;

and on each transition's ``<g class="edge">`` ``data-from`` and ``data-to`` (state ids;
absent for the initial pseudo-state's arrow). The active states are not filled by
``dot``: a page lights them from ``data-active`` with CSS, and moves the light as the
session steps. The SVG is also made safe to inline into a page: no scripts, no event
handler attributes, no links out, no fixed size (it scales to its box).
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from collections.abc import Collection

from interlock.machines.ir import MachineIR
from interlock.machines.render.dot import dot_ids

__all__ = ["annotate_svg"]

SVG = "http://www.w3.org/2000/svg"
XLINK = "http://www.w3.org/1999/xlink"
ET.register_namespace("", SVG)
ET.register_namespace("xlink", XLINK)

_DROPPED = {f"{{{SVG}}}script", f"{{{SVG}}}foreignObject", "script", "foreignObject"}
_HREFS = {"href", f"{{{XLINK}}}href"}


def _names(ir: MachineIR) -> dict[str, str]:
    """DOT name (node, cluster, anchor) -> state id, for the machine's own states."""
    names: dict[str, str] = {}
    for state_id, dot_id in dot_ids(ir).items():
        if state_id in ir.states:
            names[dot_id] = names[f"cluster_{dot_id}"] = names[f"::anchor:{dot_id}"] = state_id
    return names


def _title(group: ET.Element) -> ET.Element | None:
    return group.find(f"{{{SVG}}}title")


def _clean(element: ET.Element) -> None:
    """No scripts, handlers or links out anywhere under ``element``."""
    for parent in element.iter():
        for child in list(parent):
            if child.tag in _DROPPED:
                parent.remove(child)
        for name in list(parent.attrib):
            local = name.rsplit("}", 1)[-1].lower()
            if local.startswith("on") or (name in _HREFS
                                          and not parent.attrib[name].startswith("#")):
                del parent.attrib[name]


def annotate_svg(svg: bytes | str, ir: MachineIR, active: Collection[str] = (),
                 label: str | None = None) -> str:
    """``svg`` (``dot -Tsvg`` of ``render_dot(ir)``) with every drawn state marked
    (``data-state``, ``data-active``, ``data-kind``) and every transition's ends
    (``data-from``, ``data-to``), made safe to inline; ``label`` names it for screen
    readers (default: ``statechart of <machine>``). Returned without an XML prolog."""
    root = ET.fromstring(svg)
    names = _names(ir)
    live = set(active)
    for group in root.iter(f"{{{SVG}}}g"):
        kind = group.get("class")
        title = _title(group)
        if kind not in ("node", "cluster", "edge") or title is None or title.text is None:
            continue
        name = title.text
        if kind == "edge":
            arrow = name.find("->")
            ends = (names.get(name[:arrow]), names.get(name[arrow + 2:])) if arrow > 0 \
                else (None, None)
            if ends[1] is not None:
                if ends[0] is not None:
                    group.set("data-from", ends[0])
                    title.text = f"{ends[0]} -> {ends[1]}"
                group.set("data-to", ends[1])
            continue
        state = names.get(name)
        if state is None or name.startswith("::anchor:"):
            continue
        title.text = state
        group.set("data-state", state)
        group.set("data-active", "true" if state in live else "false")
        group.set("data-kind", "compound" if kind == "cluster" else "state")
        group.set("role", "img")
        group.set("aria-label", f"{state}, active" if state in live else state)
    _clean(root)
    for size in ("width", "height"):
        root.attrib.pop(size, None)
    root.set("role", "group")
    root.set("aria-label", label or f"statechart of {ir.name}")
    root.set("class", "statechart")
    return ET.tostring(root, encoding="unicode")
