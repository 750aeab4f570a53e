"""``interlock validate``: load and lint spec files, report every diagnostic."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path

from interlock.machines import SpecError, build_ir, lint, load
from interlock.machines.diagnostics import Diagnostic, Mark, error, sort_diagnostics
from interlock.runtime.cli.output import (
    EXIT_ERRORS,
    EXIT_OK,
    EXIT_USAGE,
    err,
    fail,
    print_diagnostics,
    print_json,
)
from interlock.runtime.engine.bindings_loader import BindingsError, load_bindings

SPEC_SUFFIXES = (".yaml", ".yml")


SKIPPED_DIRS = ("node_modules", "__pycache__")


def _skipped(relative: Path) -> bool:
    """Folders a search for specs never enters: hidden ones (.venv, .git) and caches."""
    return any(part.startswith(".") or part in SKIPPED_DIRS for part in relative.parts[:-1])


def expand_paths(paths: Iterable[Path]) -> tuple[list[Path], list[str]]:
    """Files as given, and the spec files under each directory; plus paths that don't exist."""
    files: list[Path] = []
    missing: list[str] = []
    for path in paths:
        if path.is_dir():
            files.extend(sorted(p for p in path.rglob("*") if p.suffix in SPEC_SUFFIXES
                                and p.is_file() and not _skipped(p.relative_to(path))))
        elif path.exists() or path.is_symlink():
            files.append(path)
        else:
            missing.append(str(path))
    return files, missing


def check_file(path: Path, bindings: Mapping[str, object] | None = None) -> list[Diagnostic]:
    """Every diagnostic for one spec file: load errors, or lint findings."""
    try:
        spec = load(path)
    except SpecError as exc:
        return exc.diagnostics
    except RecursionError:
        return [error("Y008", "the spec is nested too deeply to check", Mark(str(path), 1, 1))]
    return lint(build_ir(spec), bindings)


def run_validate(paths: list[Path], strict: bool, as_json: bool,
                 bindings_ref: str | None = None) -> int:
    bindings = None
    if bindings_ref is not None:
        try:
            bindings = load_bindings(bindings_ref)
        except BindingsError as exc:
            return fail(str(exc), EXIT_USAGE)
    files, missing = expand_paths(paths)
    if missing:
        return fail("no such file or directory: " + ", ".join(missing), EXIT_USAGE)
    if not files:
        return fail("no spec files (*.yaml, *.yml) found in: "
                    + ", ".join(map(str, paths)), EXIT_USAGE)
    diagnostics = sort_diagnostics(d for f in files for d in check_file(f, bindings))
    if as_json:
        print_json(diagnostics)
    else:
        print_diagnostics(diagnostics)
    errors = sum(d.is_error for d in diagnostics)
    warnings = len(diagnostics) - errors
    if not as_json:
        plural = "s" if len(files) != 1 else ""
        err.print(f"checked {len(files)} spec{plural}: {errors} error(s), {warnings} warning(s)"
                  + (" (--strict: warnings count as errors)" if strict and warnings else ""))
    failed = errors > 0 or (strict and warnings > 0)
    return EXIT_ERRORS if failed else EXIT_OK
