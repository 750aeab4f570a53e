"""load_checked(): a spec's text or file -> Spec -> IR -> lint -> the IR, or SpecError.

The one path from a spec to a machine that may be run, drawn or compiled: load errors and
lint errors raise :class:`~interlock.machines.diagnostics.SpecError` (with every error
diagnostic), lint warnings do not block.

>>> from interlock.machines import load_checked
>>> door = load_checked("machine: door\\ninitial: closed\\nstates:\\n"
...                     "  closed: {on: {open: opened}}\\n  opened: {on: {close: closed}}\\n")
>>> door.events
('close', 'open')
>>> load_checked("machine: m\\ninitial: a\\nstates:\\n  a: {on: {go: nowhere}}\\n",
...              file="m.yaml")  # doctest: +ELLIPSIS
Traceback (most recent call last):
  ...
interlock.machines.diagnostics.SpecError: m.yaml:4:16: error M201: ...
"""

from __future__ import annotations

import functools
import os
from collections.abc import Mapping
from pathlib import Path

from interlock.machines.diagnostics import Diagnostic, SpecError
from interlock.machines.ir import MachineIR, build_ir
from interlock.machines.lint import lint
from interlock.machines.loader import load, loads
from interlock.machines.spec import Spec

__all__ = ["check_ir", "ir_of", "load_checked"]


@functools.lru_cache(maxsize=64)
def ir_of(text: str, file: str = "<string>") -> MachineIR:
    """The IR of a spec's text, built once per process for the same text and file name
    (parsing is most of the cost of compiling; the IR is frozen, so sharing it is safe).
    Raises :class:`SpecError` like :func:`~interlock.machines.loader.loads`."""
    return build_ir(loads(text, file))


def check_ir(
    target: Spec | MachineIR,
    bindings: Mapping[str, object] | None = None,
    *,
    warnings: list[Diagnostic] | None = None,
) -> MachineIR:
    """The IR of ``target`` once lint finds no error in it (with ``bindings``, unbound
    guards and actions are errors too). Raises :class:`SpecError` with the errors; lint's
    warnings are appended to ``warnings`` when it is given."""
    ir = build_ir(target) if isinstance(target, Spec) else target
    findings = lint(ir, bindings)
    errors = [d for d in findings if d.is_error]
    if errors:
        raise SpecError(errors)
    if warnings is not None:
        warnings.extend(findings)
    return ir


def load_checked(
    source: str | bytes | os.PathLike[str],
    *,
    file: str | None = None,
    bindings: Mapping[str, object] | None = None,
    warnings: list[Diagnostic] | None = None,
) -> MachineIR:
    """Load a spec, build its IR and lint it: the IR, or :class:`SpecError`.

    ``source`` is a path (``pathlib.Path`` or any ``os.PathLike``: the file is read) or
    the spec's text (``str``/``bytes``), whose diagnostics name ``file`` (default
    ``<string>``). ``bindings`` and ``warnings`` as for :func:`check_ir`.
    """
    if isinstance(source, str | bytes):
        spec = loads(source, file or "<string>")
    else:
        spec = load(Path(source))
    return check_ir(spec, bindings, warnings=warnings)
