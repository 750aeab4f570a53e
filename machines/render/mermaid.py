"""Render a machine as a Mermaid ``stateDiagram-v2`` (the diagram GitHub draws in markdown).

Conventions (see also :mod:`.dot`, which draws the same things):

* a compound state is ``state X { [*] --> initial ... }``; parallel regions are separated
  by ``--``; a final state ``F`` gets ``F --> [*]`` inside its parent;
* a history state is a node labelled ``H`` (shallow) or ``H*`` (deep) with an unlabelled
  edge to its default;
* edge labels read ``event [guard] / a, b``, ``after 3m``, ``after <context_key>``,
  ``always`` (or just ``[guard]`` for a guarded eventless transition);
* targetless (internal) transitions, entry/exit actions and the state's invoke
  (``invoke / agent executor``, ``invoke / command sh``) are listed under the state's
  name, UML style (``X : chunk / buffer_chunk``); for compound and parallel states they go
  into the box's title. State descriptions join them with ``descriptions=True`` (off by
  default: the specs' prose would swamp the drawing);
* a transition is written inside the block of its source's parent when source and target
  are siblings, otherwise at the top level: Mermaid moves a state into whichever block
  mentions it, so a cross-boundary edge written inside a block would move its far end;
* ids that Mermaid cannot take as they are (keywords such as ``end``, ``state``,
  ``note``, ``default``; anything but ``[A-Za-z_][A-Za-z0-9_]*``) get an alias
  ``state "original" as s_original``.

Output is deterministic: document order throughout, no set iteration.
"""

from __future__ import annotations

import re

from interlock.machines.ir import MachineIR, StateIR, StateKind, TransitionIR
from interlock.machines.render._labels import (
    check_active,
    detail_lines,
    history_label,
    is_container,
    transition_label,
)

__all__ = ["ACTIVE_STYLE", "MERMAID_RESERVED", "mermaid_ids", "mermaid_text", "render_mermaid"]

ACTIVE_STYLE = "fill:#ffe082,stroke:#e65100,stroke-width:3px,color:#000"
HISTORY_STYLE = "fill:#ffffff,stroke:#616161,font-weight:bold"

# Words the stateDiagram lexer takes as keywords where an id is expected (it matches them
# case-insensitively), plus names that Mermaid uses for its own nodes.
MERMAID_RESERVED = frozenset({
    "accdescr", "acctitle", "as", "choice", "class", "classdef", "click", "default",
    "direction", "divider", "end", "fork", "hide", "href", "join", "left", "note", "of",
    "right", "root", "scale", "state", "statediagram", "style", "width",
})

_PLAIN_ID = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_UNSAFE_ID_CHARS = re.compile(r"[^A-Za-z0-9_]")
# Characters written as Mermaid entity codes (#58; and so on) in labels.
_ESCAPED = frozenset('#;:"%<>{}[]\\`*&|=~')
# A lone underscore next to a non-word character could start markdown emphasis.
_LOOSE_UNDERSCORE = re.compile(r"(?<![A-Za-z0-9])_|_(?![A-Za-z0-9])")
# `direction TB` anywhere on a line is read as a layout statement by Mermaid's lexer.
_DIRECTION = re.compile(r"(?i)d(?=irection\s)")


def mermaid_text(text: str) -> str:
    """Escape text for a Mermaid label (``state "..."``, ``X : ...``, ``a --> b : ...``)."""
    text = " ".join(text.split())  # no newlines or tabs inside one label line
    loose = {m.start() for m in _LOOSE_UNDERSCORE.finditer(text)}
    out = []
    for i, ch in enumerate(text):
        if ch in _ESCAPED or not ch.isprintable() or i in loose:
            out.append(f"#{ord(ch)};")
        else:
            out.append(ch)
    # Entity codes hold '#', digits and ';' only, so the direction guard cannot break them.
    return _DIRECTION.sub(lambda m: f"#{ord(m.group(0))};", "".join(out))


def _plain(state_id: str) -> bool:
    return bool(_PLAIN_ID.fullmatch(state_id)) and state_id.lower() not in MERMAID_RESERVED


def _referenced_ids(ir: MachineIR) -> list[str]:
    """Every state id a diagram mentions, in document order: declared first, then dangling."""
    seen = dict.fromkeys(ir.states)
    for state in ir.states.values():
        for ref in (state.initial, state.default, *(t.target for t in state.transitions)):
            if ref is not None and ref not in seen:
                seen[ref] = None
    if ir.initial is not None and ir.initial not in seen:
        seen[ir.initial] = None
    return list(seen)


def mermaid_ids(ir: MachineIR) -> dict[str, str]:
    """The Mermaid id of every state the diagram mentions (most keep their own id)."""
    ids = _referenced_ids(ir)
    taken = {i for i in ids if _plain(i)}
    out: dict[str, str] = {}

    def alias(state_id: str) -> str:
        base = "s_" + _UNSAFE_ID_CHARS.sub("_", state_id)
        name, n = base, 1
        while name in taken or name.lower() in MERMAID_RESERVED:
            n += 1
            name = f"{base}_{n}"
        taken.add(name)
        return name

    for state_id in ids:
        out[state_id] = state_id if _plain(state_id) else alias(state_id)
    # Mermaid names the [*] of a block "<block>_start" / "<block>_end" ("root" at the top):
    # a state already called that would be merged with the pseudo-state.
    while True:
        pseudo = {"root_start", "root_end"}
        for state in ir.states.values():
            if is_container(state):
                pseudo.update({f"{out[state.id]}_start", f"{out[state.id]}_end"})
        clash = [sid for sid in ids if out[sid] in pseudo]
        if not clash:
            return out
        taken.update(pseudo)
        for sid in clash:
            out[sid] = alias(sid)


class _Writer:
    def __init__(self, ir: MachineIR, active: frozenset[str], descriptions: bool) -> None:
        self.ir = ir
        self.active = active
        self.descriptions = descriptions
        self.ids = mermaid_ids(ir)
        self.lines: list[str] = ["stateDiagram-v2"]
        self.written: set[tuple[str, int]] = set()  # (source, index) of placed transitions
        self.defaults_written: set[str] = set()  # history states whose default edge is placed
        self.declared: set[str] = set()

    def mid(self, state_id: str) -> str:
        return self.ids[state_id]

    def edge(self, pad: str, source: str, target: str, label: str = "") -> None:
        line = f"{pad}{self.mid(source)} --> {self.mid(target)}"
        self.lines.append(f"{line} : {label}" if label else line)

    def transition(self, pad: str, index: int, t: TransitionIR) -> None:
        assert t.target is not None
        self.written.add((t.source, index))
        self.edge(pad, t.source, t.target, transition_label(t, mermaid_text))

    def default_edge(self, pad: str, history: StateIR) -> None:
        assert history.default is not None
        self.defaults_written.add(history.id)
        self.edge(pad, history.id, history.default)

    def block(self, parent: StateIR | None, children: tuple[str, ...], depth: int) -> None:
        pad = "  " * depth
        parent_id = parent.id if parent is not None else None
        # Only children whose (first) declaration is here; duplicates are lint's business.
        kids = [c for c in dict.fromkeys(children)
                if c in self.ir.states and self.ir.states[c].parent == parent_id]
        if parent is not None and parent.kind is StateKind.PARALLEL:
            for n, child in enumerate(kids):
                if n:
                    self.lines.append(f"{pad}--")
                self.state(self.ir.states[child], depth)
            return
        initial = self.ir.initial if parent is None else parent.initial
        if initial in kids:
            self.lines.append(f"{pad}[*] --> {self.mid(initial)}")
        for child in kids:
            self.state(self.ir.states[child], depth)
        siblings = set(kids)
        for child in kids:
            state = self.ir.states[child]
            for index, t in enumerate(state.transitions):
                if t.target in siblings:
                    self.transition(pad, index, t)
            if state.is_history and state.default in siblings:
                self.default_edge(pad, state)
        for child in kids:
            if self.ir.states[child].is_final:
                self.lines.append(f"{pad}{self.mid(child)} --> [*]")

    def state(self, state: StateIR, depth: int) -> None:
        if state.id in self.declared:  # a malformed tree lists a child twice
            return
        self.declared.add(state.id)
        pad = "  " * depth
        mid = self.mid(state.id)
        if state.is_history and not is_container(state):
            self.lines.append(f'{pad}state "{history_label(state)}" as {mid}')
            return
        name = history_label(state) if state.is_history else mermaid_text(state.id)
        details = detail_lines(state, mermaid_text, self.descriptions)
        if is_container(state):
            if details or name != mid:
                title = "<br/>".join([name, *details])
                self.lines.append(f'{pad}state "{title}" as {mid} {{')
            else:
                self.lines.append(f"{pad}state {mid} {{")
            self.block(state, state.children, depth + 1)
            self.lines.append(f"{pad}}}")
            return
        if not details and name == mid:
            self.lines.append(f"{pad}{mid}")
            return
        self.lines.append(f'{pad}state "{name}" as {mid}')
        self.lines.extend(f"{pad}{mid} : {line}" for line in details)

    def render(self) -> str:
        self.block(None, self.ir.top, 1)
        # Whatever crosses a block boundary goes at the top level, in document order.
        for state in self.ir.states.values():
            for index, t in enumerate(state.transitions):
                if t.target is not None and (state.id, index) not in self.written:
                    self.transition("  ", index, t)
        for state in self.ir.states.values():
            if (state.is_history and state.default is not None
                    and state.id not in self.defaults_written):
                self.default_edge("  ", state)
        history = [self.mid(s.id) for s in self.ir.states.values() if s.is_history]
        if history:
            self.lines.append(f"  classDef history {HISTORY_STYLE}")
            self.lines.append(f"  class {','.join(history)} history")
        marked = [self.mid(s.id) for s in self.ir.states.values() if s.id in self.active]
        if marked:
            self.lines.append(f"  classDef active {ACTIVE_STYLE}")
            self.lines.append(f"  class {','.join(marked)} active")
        return "\n".join(self.lines) + "\n"


def render_mermaid(
    ir: MachineIR, active: frozenset[str] = frozenset(), *, descriptions: bool = False
) -> str:
    """A Mermaid ``stateDiagram-v2`` for ``ir``; ``active`` states are highlighted.

    ``descriptions`` adds each state's description under its name. Raises ValueError
    when ``active`` names a state the machine does not have.
    """
    check_active(ir, active)
    return _Writer(ir, active, descriptions).render()
