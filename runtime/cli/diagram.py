"""``interlock diagram``: draw a spec as Mermaid, DOT, SVG or PNG."""

from __future__ import annotations

import sys
from collections.abc import Callable
from enum import StrEnum
from pathlib import Path

from interlock import runtime
from interlock.machines import SpecError
from interlock.runtime.cli.output import (
    EXIT_ERRORS,
    EXIT_OK,
    EXIT_USAGE,
    err,
    fail,
    print_diagnostics,
    report_diagnostics,
)


class Format(StrEnum):
    MERMAID = "mermaid"
    DOT = "dot"
    SVG = "svg"
    PNG = "png"


def run_diagram_session(session_id: str, store_url: str | None, fmt: Format,
                        out: Path | None) -> int:
    """Draw a session's own spec (the text it runs) with its active states filled."""
    import asyncio  # the command tree does not load it (tests/cli/test_startup.py)

    return _emit(lambda: asyncio.run(runtime.draw_session(session_id, fmt.value,
                                                          store=store_url)), fmt, out)


def run_diagram(spec: str, fmt: Format, out: Path | None) -> int:
    return _emit(lambda: runtime.draw(spec, fmt.value), fmt, out)


def _emit(render: Callable[[], bytes], fmt: Format, out: Path | None) -> int:
    """Render, then write to ``out`` or stdout; errors become messages."""
    if fmt is Format.PNG and out is None and sys.stdout.isatty():
        return fail("PNG is binary; write it to a file with -o FILE.png", EXIT_USAGE)
    try:
        data = render()
    except SpecError as exc:  # stdout is the drawing: the findings go to stderr, alone
        report_diagnostics(exc.diagnostics)
        return EXIT_ERRORS
    except runtime.InterlockError as exc:
        return fail(str(exc), exc.exit_code)
    if out is None:
        sys.stdout.buffer.write(data)
        sys.stdout.flush()
    else:
        try:
            out.parent.mkdir(parents=True, exist_ok=True)
            out.write_bytes(data)
        except OSError as exc:
            return fail(f"-o {out}: cannot write: {exc.strerror or exc}")
        err.print(f"wrote {out}")
    return EXIT_OK


def run_diagram_all(spec_dir: Path, out_dir: Path) -> int:
    try:
        written = runtime.draw_all(spec_dir, out_dir)
    except SpecError as exc:
        print_diagnostics(exc.diagnostics)
        return fail("diagrams not written: a spec has errors", EXIT_ERRORS)
    except runtime.InterlockError as exc:
        return fail(str(exc), exc.exit_code)
    for path in written:
        err.print(f"wrote {path}")
    return EXIT_OK
