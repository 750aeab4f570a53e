"""The machine resolver of ``machine:`` invokes started through the façade.

``machine: NAME`` is a built-in spec (``ralph_subagent``, ``polling_state``, ...), run with
that built-in's own bindings; ``machine: steps/review.yaml`` (a ``.yaml``/``.yml`` name or
a path) is a spec file relative to the parent's spec file, linted like any spec and run
with the bindings given to the parent session. Each child session's bindings see their
own session (``call.session``: the child's id and folder).
"""

from __future__ import annotations

from pathlib import Path

from interlock.machines import SpecError, load_checked
from interlock.machines.bindings import Bindings
from interlock.machines.diagnostics import did_you_mean
from interlock.machines.lint_invoke import machine_file
from interlock.runtime.builtin.machines import builtin_for, builtin_names
from interlock.runtime.engine.builtin import BuiltinSetup
from interlock.runtime.engine.builtin_specs import builtin_spec_dir
from interlock.runtime.engine.context import SessionContext, with_session
from interlock.runtime.engine.invoke_machine import (
    ChildMachine,
    MachineError,
    MachineRequest,
    MachineResolver,
)


def machine_resolver(root: Path, bindings: Bindings | None = None, *,
                     demo: bool = False) -> MachineResolver:
    """Resolve ``machine:`` names (see the module docstring); ``bindings`` serve spec-file
    children, ``demo`` is handed to built-in children's bindings."""

    def resolve(request: MachineRequest) -> ChildMachine:
        if machine_file(request.name):
            path = Path(request.parent_spec).parent / request.name
            text = _read(path, request.name)
            child_bindings = dict(bindings or {})
        else:
            path = builtin_spec_dir() / f"{request.name}.yaml"
            if not path.is_file():
                names = list(builtin_names())
                hint = did_you_mean(request.name, names) or (
                    f"the built-in specs are {', '.join(names)}; a spec file is named by "
                    "its path, relative to the parent spec (steps/review.yaml)")
                raise MachineError(f"no built-in spec {request.name!r}: {hint}")
            text = _read(path, request.name)
            builtin = builtin_for(request.name)
            setup = BuiltinSetup(request.session_id, root, request.folder, demo)
            child_bindings = dict(builtin.bindings(setup)) if builtin is not None else {}
        try:
            ir = load_checked(text, file=str(path))
        except SpecError as exc:
            raise MachineError(f"{path} is not a valid spec: {exc}") from None
        missing = sorted(n for n in (*ir.guards, *ir.actions) if n not in child_bindings)
        if missing:
            raise MachineError(f"{path}: {', '.join(missing)} not bound (a spec file child "
                               "runs with the parent session's bindings)")
        context = SessionContext.of(request.session_id, request.folder)
        return ChildMachine(text, str(path), with_session(child_bindings, context))

    return resolve


def _read(path: Path, name: str) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise MachineError(f"machine {name!r}: {path} cannot be read: {exc}") from None
