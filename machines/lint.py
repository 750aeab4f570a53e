"""Lint: every check on a spec's machine, each a Diagnostic with a source mark. (stub)"""

from __future__ import annotations

from collections.abc import Mapping

from .diagnostics import Diagnostic
from .ir import MachineIR, build_ir
from .spec import Spec


def lint(target: Spec | MachineIR, bindings: Mapping[str, object] | None = None) -> list[Diagnostic]:
    ir = build_ir(target) if isinstance(target, Spec) else target
    del ir, bindings
    return []
