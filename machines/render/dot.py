"""Render a machine as Graphviz DOT (for ``dot -Tsvg`` / ``-Tpng``).

Conventions, the same as :mod:`.mermaid` where the two languages allow:

* compound states are ``subgraph "cluster_<id>"`` boxes; parallel states are dashed
  clusters whose regions are clusters inside them;
* every cluster holds an invisible anchor node (``"::anchor:<id>"``) so a transition can
  start or end at the cluster: the edge attaches to the anchor and is clipped at the
  cluster's border with ``ltail``/``lhead`` (``compound=true``);
* the initial state of the machine and of each compound state is marked by a filled dot
  (``"::initial"``, ``"::initial:<id>"``); final states have a double border
  (``peripheries=2``: a double circle would grow huge around a name and its actions);
  history states are small circles labelled ``H`` / ``H*`` with a dashed edge to their
  default;
* edge labels read ``event [guard] / a, b``, ``after 3m``, ``always`` or ``[guard]``
  (long ones break before ``/ a, b``);
  entry/exit actions, the invoke (``invoke / agent executor``) and internal transitions
  are listed under the name, and so is the
  description with ``descriptions=True``; descriptions are always the SVG tooltip;
* ``active`` states are filled; transitions to states the machine lacks go to a red,
  dashed node so a broken spec still draws.

All labels are HTML-like (``label=<...>``), so any text is safe after XML escaping; ids
that are not plain (``[A-Za-z0-9_][A-Za-z0-9_.-]*``) are replaced by ``"::state:<n>"``.
Output is deterministic: document order throughout, no set iteration.
"""

from __future__ import annotations

import re
from dataclasses import replace
from html import escape

from interlock.machines.ir import MachineIR, StateIR, StateKind, TransitionIR
from interlock.machines.render._labels import (
    check_active,
    detail_lines,
    history_label,
    is_container,
    transition_label,
)

__all__ = ["dot_ids", "render_dot"]

FONT = "Helvetica"
ACTIVE_FILL = "#ffe082"
ACTIVE_CLUSTER_FILL = "#fff8e1"
ACTIVE_PEN = "#e65100"
UNKNOWN_COLOR = "#c62828"
EDGE_LABEL_WIDTH = 28

_PLAIN_ID = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.\-]*")

Attrs = list[tuple[str, str]]


def _html(text: str) -> str:
    """Escape text for an HTML-like label; drop what XML cannot carry."""
    text = "".join(ch if ch.isprintable() else " " for ch in text)
    return escape(text, quote=True)


def _quote(text: str) -> str:
    """A DOT quoted string whose escString reading is ``text`` (``\\N`` and co. stay literal).

    DOT cannot end a quoted string with a backslash, so a trailing one gets a space.
    """
    text = "".join(ch if ch.isprintable() else " " for ch in text)
    quoted = text.replace("\\", "\\\\").replace('"', '\\"')
    return f'"{quoted} "' if text.endswith("\\") else f'"{quoted}"'


def _attrs(attrs: Attrs) -> str:
    """``[k="v", label=<...>]``: labels are always HTML-like, everything else quoted."""
    return "[" + ", ".join(f"{k}={v if k == 'label' else _quote(v)}" for k, v in attrs) + "]"


def dot_ids(ir: MachineIR) -> dict[str, str]:
    """The DOT node id of every state the diagram mentions (plain ids are kept)."""
    refs = dict.fromkeys(ir.states)
    for state in ir.states.values():
        for ref in (state.initial, state.default, *(t.target for t in state.transitions)):
            if ref is not None:
                refs.setdefault(ref, None)
    if ir.initial is not None:
        refs.setdefault(ir.initial, None)
    return {sid: sid if _PLAIN_ID.fullmatch(sid) else f"::state:{n}"
            for n, sid in enumerate(refs)}


def _edge_label(t: TransitionIR) -> str:
    """The transition label, with ``/ actions`` on a second line when it is long."""
    label = transition_label(t)
    if not label:
        return ""
    if len(label) > EDGE_LABEL_WIDTH and t.actions:
        bare = transition_label(replace(t, actions=()))
        if bare:
            rest = label[len(bare):].strip()
            return f"<{_html(bare)}<BR/>{_html(rest)}>"
    return f"<{_html(label)}>"


def _title_label(name: str, details: list[str]) -> str:
    """``<B>name</B>`` over a ruled compartment of detail lines (UML style)."""
    title = f"<B>{_html(name)}</B>"
    if not details:
        return f"<{title}>"
    body = "<BR/>".join(_html(line) for line in details)
    return ('<<TABLE BORDER="0" CELLBORDER="0" CELLSPACING="0" CELLPADDING="2">'
            f"<TR><TD>{title}</TD></TR><HR/>"
            f'<TR><TD ALIGN="LEFT" BALIGN="LEFT"><FONT POINT-SIZE="9">{body}</FONT></TD></TR>'
            "</TABLE>>")


class _Writer:
    def __init__(self, ir: MachineIR, active: frozenset[str], descriptions: bool) -> None:
        self.ir = ir
        self.active = active
        self.descriptions = descriptions
        self.ids = dot_ids(ir)
        self.lines: list[str] = []
        self.edges: list[str] = []
        self.declared: set[str] = set()

    # -- ids ---------------------------------------------------------------------------
    def node_id(self, state_id: str) -> str:
        return self.ids[state_id]

    def anchor(self, state_id: str) -> str:
        return f"::anchor:{self.ids[state_id]}"

    def cluster(self, state_id: str) -> str:
        return f"cluster_{self.ids[state_id]}"

    def drawn_as_cluster(self, state_id: str) -> bool:
        state = self.ir.states.get(state_id)
        return state is not None and is_container(state)

    def inside(self, state_id: str, container: str) -> bool:
        """``state_id`` is ``container`` or one of its descendants."""
        if state_id == container:
            return True
        return state_id in self.ir.states and container in self.ir.ancestors(state_id)

    # -- edges -------------------------------------------------------------------------
    def edge(self, tail: str | None, head: str, attrs: Attrs, tail_node: str = "") -> None:
        """An edge between states (clusters resolved to anchors), or from a pseudo node."""
        extra: Attrs = []
        if tail is not None:
            tail_node = self.node_id(tail)
            if self.drawn_as_cluster(tail):
                tail_node = self.anchor(tail)
                if not self.inside(head, tail):
                    extra.append(("ltail", self.cluster(tail)))
        head_node = self.node_id(head)
        if self.drawn_as_cluster(head):
            head_node = self.anchor(head)
            if tail is None or not self.inside(tail, head):
                extra.append(("lhead", self.cluster(head)))
        all_attrs = extra + attrs
        suffix = f" {_attrs(all_attrs)}" if all_attrs else ""
        self.edges.append(f'  "{tail_node}" -> "{head_node}"{suffix};')

    def transition(self, t: TransitionIR) -> None:
        assert t.target is not None
        label = _edge_label(t)
        attrs: Attrs = [("label", label)] if label else []
        description = " ".join((t.description or "").split())
        if description:
            attrs.append(("tooltip", description))
        self.edge(t.source, t.target, attrs)

    # -- nodes -------------------------------------------------------------------------
    def details(self, state: StateIR) -> list[str]:
        return detail_lines(state, descriptions=self.descriptions)

    def tooltip(self, state: StateIR) -> Attrs:
        text = " ".join((state.description or "").split())
        return [("tooltip", text)] if text else []

    def initial(self, pad: str, owner: str | None, target: str | None) -> None:
        if target is None:
            return
        pseudo = "::initial" if owner is None else f"::initial:{self.ids[owner]}"
        self.lines.append(f'{pad}"{pseudo}" [shape=point, width=0.15];')
        self.edge(None, target, [], tail_node=pseudo)

    def node(self, pad: str, state: StateIR) -> None:
        attrs: Attrs
        is_active = state.id in self.active
        if state.is_history:
            attrs = [("shape", "circle"), ("label", f"<{history_label(state)}>"),
                     ("width", "0.35"), ("fixedsize", "true"), ("fontsize", "10"),
                     ("style", "filled" if is_active else "solid"),
                     ("fillcolor", ACTIVE_FILL if is_active else "white")]
        else:
            attrs = [("label", _title_label(state.id, self.details(state)))]
            if state.is_final:
                attrs.append(("peripheries", "2"))
            if is_active:
                attrs += [("style", "rounded,filled"), ("fillcolor", ACTIVE_FILL)]
        if is_active:
            attrs += [("color", ACTIVE_PEN), ("penwidth", "2")]
        attrs += self.tooltip(state)
        self.lines.append(f'{pad}"{self.node_id(state.id)}" {_attrs(attrs)};')

    def state(self, state: StateIR, depth: int) -> None:
        if state.id in self.declared:  # a malformed tree lists a child twice
            return
        self.declared.add(state.id)
        pad = "  " * depth
        if not is_container(state):
            self.node(pad, state)
            return
        inner = pad + "  "
        is_active = state.id in self.active
        style = ["dashed", "rounded"] if state.kind is StateKind.PARALLEL else ["rounded"]
        if is_active:
            style.append("filled")
        self.lines.append(f'{pad}subgraph "{self.cluster(state.id)}" {{')
        name = history_label(state) if state.is_history else state.id
        self.lines.append(f"{inner}label={_title_label(name, self.details(state))};")
        self.lines.append(f"{inner}style={_quote(','.join(style))};")
        # Set on every cluster: a nested cluster would inherit an active parent's pen.
        if is_active:
            self.lines.append(f"{inner}fillcolor={_quote(ACTIVE_CLUSTER_FILL)};")
        pen = (ACTIVE_PEN, "2") if is_active else ("black", "1")
        self.lines.append(f"{inner}color={_quote(pen[0])}; penwidth={pen[1]};")
        self.lines.extend(f"{inner}{key}={_quote(value)};" for key, value in self.tooltip(state))
        self.lines.append(f'{inner}"{self.anchor(state.id)}" '
                          "[shape=point, style=invis, width=0.01, height=0.01];")
        if state.kind is not StateKind.PARALLEL:
            self.initial(inner, state.id, self._known(state.initial))
        for child in state.children:
            if child in self.ir.states and self.ir.states[child].parent == state.id:
                self.state(self.ir.states[child], depth + 1)
        self.lines.append(f"{pad}}}")

    def _known(self, target: str | None) -> str | None:
        """``target`` if it is a state of the machine (an unknown initial is not drawn)."""
        return target if target is not None and target in self.ir.states else None

    def render(self) -> str:
        name = self.ir.name if _PLAIN_ID.fullmatch(self.ir.name) else "machine"
        head = [
            f'digraph "{name}" {{',
            f'  graph [compound=true, rankdir=TB, fontname="{FONT}", fontsize=12, '
            f'labelloc=t, nodesep=0.35, ranksep=0.4, label=<<B>{_html(self.ir.name)}</B>>];',
            f'  node [fontname="{FONT}", fontsize=11, shape=box, style=rounded, '
            'margin="0.12,0.05"];',
            f'  edge [fontname="{FONT}", fontsize=9, arrowsize=0.7];',
        ]
        self.initial("  ", None, self._known(self.ir.initial))
        for sid in self.ir.top:
            state = self.ir.states.get(sid)
            if state is not None and state.parent is None:
                self.state(state, 1)
        for state in self.ir.states.values():
            for t in state.transitions:
                if t.target is not None:
                    self.transition(t)
            if state.is_history and state.default is not None:
                self.edge(state.id, state.default, [("style", "dashed")])
        unknown = [sid for sid in self.ids if sid not in self.ir.states]
        for sid in unknown:
            attrs: Attrs = [("label", f"<{_html(sid)}>"), ("style", "rounded,dashed"),
                            ("color", UNKNOWN_COLOR), ("fontcolor", UNKNOWN_COLOR),
                            ("tooltip", "not a state of this machine")]
            self.lines.append(f'  "{self.node_id(sid)}" {_attrs(attrs)};')
        return "\n".join([*head, *self.lines, *self.edges, "}"]) + "\n"


def render_dot(
    ir: MachineIR, active: frozenset[str] = frozenset(), *, descriptions: bool = False
) -> str:
    """Graphviz DOT source for ``ir``; ``active`` states are filled.

    ``descriptions`` adds each state's description under its name (it is the tooltip
    either way). Raises ValueError when ``active`` names a state the machine lacks.
    """
    check_active(ir, active)
    return _Writer(ir, active, descriptions).render()
