"""interlock.machines: the pure half of interlock.

Spec model, loader, lint, IR, compile backends and renderers. Nothing here touches the
clock, processes or databases; reading a spec file is the only I/O (``load``).

>>> from interlock.machines import loads, build_ir
>>> ir = build_ir(loads("machine: door\\ninitial: closed\\nstates:\\n"
...                      "  closed: {on: {open: opened}}\\n  opened: {on: {close: closed}}\\n"))
>>> ir.events
('close', 'open')

:func:`load_checked` is the path to a machine that may be used: load, IR, lint, and a
:class:`SpecError` for any error.
"""

from interlock.machines.backends.calls import UnboundNameError
from interlock.machines.bindings import Binding, Bindings, Call
from interlock.machines.checked import check_ir, ir_of, load_checked
from interlock.machines.compile import compile
from interlock.machines.context import Problem, check_context, context_message
from interlock.machines.diagnostics import Diagnostic, Mark, Severity, SpecError
from interlock.machines.ir import MachineIR, StateIR, TransitionIR, build_ir
from interlock.machines.lint import lint
from interlock.machines.loader import load, loads
from interlock.machines.spec import Spec

__all__ = [
    "Binding",
    "Bindings",
    "Call",
    "Diagnostic",
    "MachineIR",
    "Mark",
    "Problem",
    "Severity",
    "Spec",
    "SpecError",
    "StateIR",
    "TransitionIR",
    "UnboundNameError",
    "build_ir",
    "check_context",
    "check_ir",
    "compile",
    "context_message",
    "ir_of",
    "lint",
    "load",
    "load_checked",
    "loads",
]
