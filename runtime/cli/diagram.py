"""``interlock diagram``: draw a spec as Mermaid, DOT, SVG or PNG."""

from __future__ import annotations

import sys
from collections.abc import Callable
from enum import StrEnum
from pathlib import Path

from interlock.machines import SpecError, load_checked
from interlock.runtime.builtin.specs import resolve_spec
from interlock.runtime.cli.output import (
    EXIT_ERRORS,
    EXIT_OK,
    EXIT_USAGE,
    err,
    fail,
    print_diagnostics,
)
from interlock.runtime.cli.validate import expand_paths


class Format(StrEnum):
    MERMAID = "mermaid"
    DOT = "dot"
    SVG = "svg"
    PNG = "png"


def _render(path: Path, fmt: Format, text: str | None = None,
            active: frozenset[str] = frozenset()) -> bytes:
    from interlock.machines.render import render_dot, render_mermaid
    from interlock.runtime.diagrams.graphviz import render_with_dot

    ir = load_checked(path) if text is None else load_checked(text, file=str(path))
    if fmt is Format.MERMAID:
        return render_mermaid(ir, active).encode()
    source = render_dot(ir, active)
    if fmt is Format.DOT:
        return source.encode()
    return render_with_dot(source, "svg" if fmt is Format.SVG else "png")


def run_diagram_session(session_id: str, store_url: str | None, fmt: Format,
                        out: Path | None) -> int:
    """Draw a session's own spec (the text it runs) with its active states filled."""
    from interlock.runtime.engine.snapshot import Snapshot
    from interlock.runtime.store import StoreError, open_store

    try:
        store = open_store(store_url, Path.cwd())
        try:
            row = store.get(session_id)
        finally:
            store.close()
    except StoreError as exc:
        return fail(str(exc))
    active = frozenset(Snapshot.from_json(row.snapshot).configuration)
    return _emit(lambda: _render(Path(row.spec_path), fmt, row.spec_text, active), fmt, out)


def run_diagram(spec: str, fmt: Format, out: Path | None) -> int:
    path = resolve_spec(spec)
    return _emit(lambda: _render(path, fmt), fmt, out, str(path))


def _emit(render: Callable[[], bytes], fmt: Format, out: Path | None,
          name: str = "spec") -> int:
    """Render, then write to ``out`` or stdout; errors become messages."""
    from interlock.runtime.diagrams.graphviz import GraphvizError

    if fmt is Format.PNG and out is None and sys.stdout.isatty():
        return fail("PNG is binary; write it to a file with -o FILE.png", EXIT_USAGE)
    try:
        data = render()
    except SpecError as exc:
        print_diagnostics(exc.diagnostics)
        return fail(f"{name}: not drawn, the spec has errors")
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
    from interlock.runtime.diagrams.files import sync_diagrams
    from interlock.runtime.diagrams.graphviz import GraphvizError

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
