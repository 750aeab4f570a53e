"""The ``interlock`` command line."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Annotated

import typer

from .diagram import Format, run_diagram, run_diagram_all
from .output import EXIT_USAGE, err, fail
from .validate import run_validate

app = typer.Typer(
    name="interlock",
    help="Workflow engine built on explicit state machines: validate, draw and run YAML specs.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


@app.command()
def validate(
    paths: Annotated[list[Path], typer.Argument(help="Spec files or folders of specs.")],
    strict: Annotated[bool, typer.Option("--strict", help="Treat warnings as errors.")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print diagnostics as JSON.")] = False,
    bindings: Annotated[str | None, typer.Option(
        "--bindings", metavar="MODULE[:ATTR]",
        help="Also report guards/actions this module's BINDINGS mapping does not bind.")] = None,
) -> None:
    """Check specs; print FILE:LINE:COL: error|warning CODE: message for each finding.

    Exit 0 when clean (warnings alone: 0 unless --strict), 1 on errors, 2 on usage errors.
    """
    raise typer.Exit(run_validate(paths, strict, as_json, bindings))


@app.command()
def schema(
    out: Annotated[Path | None, typer.Option("-o", "--output", help="Write to a file.")] = None,
) -> None:
    """Print the JSON Schema of spec files (for editors: yaml-language-server)."""
    from interlock.machines.schema import spec_json_schema

    text = json.dumps(spec_json_schema(), indent=2, sort_keys=True) + "\n"
    if out is None:
        sys.stdout.write(text)
    else:
        out.write_text(text, encoding="utf-8")
        err.print(f"wrote {out}")


@app.command()
def diagram(
    spec: Annotated[str | None, typer.Argument(help="A spec file or built-in spec name.")] = None,
    fmt: Annotated[Format, typer.Option("-f", "--format", help="Output format.")] = Format.MERMAID,
    out: Annotated[Path | None, typer.Option("-o", "--output", help="Output file (or folder "
                                             "with --all).")] = None,
    all_dir: Annotated[Path | None, typer.Option("--all", help="Draw every spec in this folder "
                                                 "into the -o folder (Markdown+Mermaid and SVG)."
                                                 )] = None,
) -> None:
    """Draw a spec. Mermaid and DOT are text; SVG and PNG need Graphviz's `dot`."""
    if all_dir is not None:
        if spec is not None or out is None:
            raise typer.Exit(fail("use: interlock diagram --all SPEC_DIR -o OUT_DIR", EXIT_USAGE))
        raise typer.Exit(run_diagram_all(all_dir, out))
    if spec is None:
        raise typer.Exit(fail("name a spec to draw, or use --all SPEC_DIR -o OUT_DIR",
                              EXIT_USAGE))
    raise typer.Exit(run_diagram(spec, fmt, out))


@app.command()
def specs() -> None:
    """List the built-in specs and where they live."""
    from interlock.runtime.builtin import builtin_specs

    for path in builtin_specs():
        print(f"{path.stem:24} {path}")


@app.command()
def demo(
    workdir: Annotated[Path, typer.Option("--dir", help="Where to write the demo's files.")] = Path(
        "interlock-demo"),
) -> None:
    """Run the offline demo on the built-in specs (no network, no real agent)."""
    from .demo import run_demo

    raise typer.Exit(run_demo(workdir))


def main() -> None:
    """Console entry point: user mistakes end with a message and an exit code, never a trace."""
    try:
        app()
    except KeyboardInterrupt:
        err.print("interrupted")
        sys.exit(130)
    except BrokenPipeError:
        sys.exit(0)
