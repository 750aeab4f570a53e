"""Diagram renderers: pure functions from a :class:`~interlock.machines.ir.MachineIR` to text.

>>> from interlock.machines import build_ir, loads
>>> ir = build_ir(loads("machine: door\\ninitial: closed\\nstates:\\n"
...                     "  closed: {on: {open: opened}}\\n  opened: {on: {close: closed}}\\n"))
>>> print(render_mermaid(ir), end="")
stateDiagram-v2
  [*] --> closed
  closed
  opened
  closed --> opened : open
  opened --> closed : close
>>> render_dot(ir).splitlines()[0]
'digraph "door" {'
"""

from interlock.machines.render.dot import render_dot
from interlock.machines.render.mermaid import render_mermaid

__all__ = ["render_dot", "render_mermaid"]
