"""``interlock demo``: the offline tour on the embedded defaults.

It validates and compiles every built-in spec on both targets and draws them (here); then
:func:`interlock.runtime.api.demo.run_demo` runs the main job offline
(:mod:`interlock.runtime.ralph.demo`): a full Ralph session with the
demo agents and scripted live signals (STEER scope change, INFO, PAUSE and resume,
APPROVE), then a second session ended by ABORT, with a timeline and the orchestrator's
diagram with the path each took.
"""

from __future__ import annotations

from pathlib import Path

from rich.console import Console
from rich.table import Table

from interlock.machines import Diagnostic, SpecError, compile, load, load_checked
from interlock.machines.compile import Target
from interlock.runtime.engine.builtin_specs import builtin_specs

PROMPT = "Review the plan in plan.md: is the adaptive polling design ready to build?\n"


def _targets(path: Path) -> tuple[str, str]:
    """Whether the spec compiles on each target, or why not."""
    results = []
    targets: tuple[Target, ...] = ("statemachine", "transitions")
    for target in targets:
        try:
            compile(load(path), target=target)
            results.append("[green]compiles[/]")
        except SpecError as exc:
            first = exc.diagnostics[0]
            results.append(f"[yellow]refused[/] {first.code} line {first.mark.line}")
    return results[0], results[1]


def _specs_table(console: Console) -> bool:
    table = Table(title="Built-in specs", title_justify="left")
    for column in ("spec", "states", "events", "lint", "statemachine", "transitions"):
        table.add_column(column)
    clean = True
    for path in builtin_specs():
        findings: list[Diagnostic] = []  # lint's warnings; its errors raise
        try:
            ir = load_checked(path, warnings=findings)
            states, events = str(len(ir.states)), str(len(ir.events))
        except SpecError as exc:
            findings, states, events = exc.diagnostics, "-", "-"
        clean = clean and not findings
        table.add_row(path.stem, states, events,
                      "[green]clean[/]" if not findings else f"[red]{len(findings)} finding(s)[/]",
                      *_targets(path))
    console.print(table)
    return clean


def _draw(console: Console, out_dir: Path) -> None:
    from interlock.runtime.diagrams.files import sync_diagrams
    from interlock.runtime.diagrams.graphviz import GraphvizError

    try:
        written = sync_diagrams(builtin_specs(), out_dir)
    except GraphvizError as exc:
        console.print(f"[yellow]diagrams skipped:[/] {exc}")
        return
    console.print(f"Diagrams: {len(written)} files in {out_dir}/ (Mermaid in .md, SVG via dot)")


def run_specs_tour(workdir: Path, console: Console) -> bool:
    """The tour's first part: every built-in spec validated, compiled on both targets and
    drawn into ``workdir/diagrams``; True when every spec is clean."""
    console.print("[bold]interlock demo[/]: offline, on the built-in specs\n")
    clean = _specs_table(console)
    _draw(console, workdir / "diagrams")
    console.print()
    return clean
