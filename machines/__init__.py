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

from __future__ import annotations

from typing import TYPE_CHECKING

import lazy_loader

# Names are imported on first use: an agent process that needs one module (diagnostics,
# the YAML reader) does not pay for pydantic's spec models, the IR and the linter.
__getattr__, __dir__, __all__ = lazy_loader.attach(__name__, submod_attrs={
    "backends.calls": ["UnboundNameError"],
    "bindings": ["Binding", "Bindings", "Call"],
    "checked": ["check_ir", "ir_of", "load_checked"],
    "compile": ["compile"],
    "context": ["Problem", "check_context", "context_message"],
    "diagnostics": ["Diagnostic", "Mark", "Severity", "SpecError"],
    "ir": ["MachineIR", "StateIR", "TransitionIR", "build_ir"],
    "lint": ["lint"],
    "loader": ["load", "loads"],
    "spec": ["Spec"],
})

if TYPE_CHECKING:
    from interlock.machines.backends.calls import UnboundNameError as UnboundNameError
    from interlock.machines.bindings import Binding as Binding
    from interlock.machines.bindings import Bindings as Bindings
    from interlock.machines.bindings import Call as Call
    from interlock.machines.checked import check_ir as check_ir
    from interlock.machines.checked import ir_of as ir_of
    from interlock.machines.checked import load_checked as load_checked
    from interlock.machines.compile import compile as compile
    from interlock.machines.context import Problem as Problem
    from interlock.machines.context import check_context as check_context
    from interlock.machines.context import context_message as context_message
    from interlock.machines.diagnostics import Diagnostic as Diagnostic
    from interlock.machines.diagnostics import Mark as Mark
    from interlock.machines.diagnostics import Severity as Severity
    from interlock.machines.diagnostics import SpecError as SpecError
    from interlock.machines.ir import MachineIR as MachineIR
    from interlock.machines.ir import StateIR as StateIR
    from interlock.machines.ir import TransitionIR as TransitionIR
    from interlock.machines.ir import build_ir as build_ir
    from interlock.machines.lint import lint as lint
    from interlock.machines.loader import load as load
    from interlock.machines.loader import loads as loads
    from interlock.machines.spec import Spec as Spec
