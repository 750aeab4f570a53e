"""``interlock validate``: load and lint spec files, report every diagnostic."""

from __future__ import annotations

from pathlib import Path

from interlock import runtime
from interlock.runtime.cli.output import (
    EXIT_ERRORS,
    EXIT_OK,
    err,
    fail,
    print_diagnostics,
    print_json,
)


def run_validate(paths: list[Path], strict: bool, as_json: bool,
                 bindings_ref: str | None = None) -> int:
    try:
        found = runtime.validate(paths, bindings=bindings_ref)
    except runtime.InterlockError as exc:
        return fail(str(exc), exc.exit_code)
    for path in found.skipped:
        err.print(f"skipped {path}: not a spec (no `machine:` key)")
    if as_json:
        print_json(found.diagnostics)
    else:
        print_diagnostics(found.diagnostics)
        plural = "s" if len(found.files) != 1 else ""
        err.print(f"checked {len(found.files)} spec{plural}: {found.errors} error(s), "
                  f"{found.warnings} warning(s)"
                  + (" (--strict: warnings count as errors)" if strict and found.warnings
                     else ""))
    failed = found.errors > 0 or (strict and found.warnings > 0)
    return EXIT_ERRORS if failed else EXIT_OK
