"""``interlock diagram``: draw a spec as Mermaid, DOT, SVG or PNG."""

from __future__ import annotations

import sys
from enum import StrEnum
from pathlib import Path

from interlock.machines import SpecError, build_ir, lint, load
from interlock.runtime.builtin import resolve_spec

from .output import EXIT_ERRORS, EXIT_OK, EXIT_USAGE, err, fail, print_diagnostics
from .validate import expand_paths


class Format(StrEnum):
    MERMAID = "mermaid"
    DOT = "dot"
    SVG = "svg"
    PNG = "png"


def _render(path: Path, fmt: Format) -> bytes:
    from interlock.machines.render import render_dot, render_mermaid
    from interlock.runtime.graphviz import render_with_dot

    ir = build_ir(load(path))
    errors = [d for d in lint(ir) if d.is_error]
    if errors:
        raise SpecError(errors)
    if fmt is Format.MERMAID:
        return render_mermaid(ir).encode()
    source = render_dot(ir)
    if fmt is Format.DOT:
        return source.encode()
    return render_with_dot(source, "svg" if fmt is Format.SVG else "png")


def run_diagram(spec: str, fmt: Format, out: Path | None) -> int:
    from interlock.runtime.graphviz import GraphvizError

    path = resolve_spec(spec)
    if fmt is Format.PNG and out is None and sys.stdout.isatty():
        return fail("PNG is binary; write it to a file with -o FILE.png", EXIT_USAGE)
    try:
        data = _render(path, fmt)
    except SpecError as exc:
        print_diagnostics(exc.diagnostics)
        return fail(f"{path}: not drawn, the spec has errors")
    except GraphvizError as exc:
        return fail(str(exc))
    if out is None:
        sys.stdout.buffer.write(data)
        sys.stdout.flush()
    else:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_bytes(data)
        err.print(f"wrote {out}")
    return EXIT_OK


def run_diagram_all(spec_dir: Path, out_dir: Path) -> int:
    from interlock.runtime.diagrams import sync_diagrams
    from interlock.runtime.graphviz import GraphvizError

    files, missing = expand_paths([spec_dir])
    if missing or not files:
        return fail(f"no spec files in {spec_dir}", EXIT_USAGE)
    try:
        written = sync_diagrams(files, out_dir)
    except SpecError as exc:
        print_diagnostics(exc.diagnostics)
        return fail("diagrams not written: a spec has errors", EXIT_ERRORS)
    except (GraphvizError, ValueError) as exc:
        return fail(str(exc))
    for path in written:
        err.print(f"wrote {path}")
    return EXIT_OK
