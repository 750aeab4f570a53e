"""``interlock demo``: the offline tour on the embedded defaults.

It validates and compiles every built-in spec on both targets, draws them, and dispatches
the seed's four reviewers at once as real processes (``interlock demo-agent``): one exits,
one answers and then hangs like a stuck CLI, one closes its answer with an end marker and
hangs, one is slow. Each result comes back as soon as its answer is known complete: a
whole document followed by silence, never just a ``v:`` line (which would cut off the
issue list that follows it).
"""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path

from rich.console import Console
from rich.table import Table

from interlock.machines import Diagnostic, SpecError, compile, load, load_checked
from interlock.machines.compile import Target
from interlock.runtime.builtin.specs import builtin_specs

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


# The seed's four reviewers, each misbehaving like a real agent CLI in its own way.
REVIEWERS: tuple[tuple[str, tuple[str, ...], str], ...] = (
    ("TECHLEAD", (), "exits"),
    ("SECURITY", ("--linger", "600"), "hangs after answering"),
    ("QA", ("--end-marker", "--linger", "600"), "end marker, hangs"),
    ("ARCHITECT", ("--delay", "0.4"), "slow, exits"),
)
DEMO_CONFIG = {"dispatchTimeout": 60, "pollingInterval": 1, "idleTimeout": 20,
               "terminateGrace": 2}


def _dispatch_reviewers(console: Console, workdir: Path) -> bool:
    """Dispatch the four reviewers at once, as real processes, and show the results."""
    from interlock.runtime.dispatch import AgentCommand, dispatch_all
    from interlock.runtime.dispatch.config import parse_dispatch_config
    from interlock.runtime.host.orphans import StoreRegistry, reap_orphans
    from interlock.runtime.store import open_store

    config = parse_dispatch_config(DEMO_CONFIG)
    agent = (sys.executable, "-m", "interlock.runtime.cli", "demo-agent")
    commands = [AgentCommand((*agent, "--role", role, *extra), prompt=PROMPT, name=role)
                for role, extra, _ in REVIEWERS]
    store = open_store(None, workdir)
    try:
        reap_orphans(store)
        results = asyncio.run(dispatch_all(commands, config, spill_dir=workdir / "dispatch",
                                           registry=StoreRegistry(store)))
    finally:
        store.close()
    table = Table(title="Four reviewers dispatched in parallel (real processes, "
                  "demo agent, offline)", title_justify="left")
    for column in ("reviewer", "behaves", "status", "completion", "seconds", "verdict",
                   "issues"):
        table.add_column(column)
    ok = True
    for (role, _, behaves), result in zip(REVIEWERS, results, strict=True):
        polling = result.polling
        verdict = polling.verdict
        ok = ok and polling.success and verdict is not None and verdict.verdict is not None
        table.add_row(role, behaves, polling.status, str(polling.completion_method),
                      f"{polling.elapsed_time:.2f}", verdict.verdict if verdict else "-",
                      str(len(verdict.issues)) if verdict else "-")
    console.print(table)
    window = config.completion_markers.min_silence_cycles * config.polling_interval
    console.print(
        f"The hung reviewers were stopped after {window:g}s of silence following a complete "
        "answer, or at once after an end marker; a fixed wait would have taken "
        f"{config.dispatch_timeout:g}s. Try it: [bold]interlock dispatch -- interlock "
        "demo-agent --role QA --linger 600[/]")
    return ok


def run_demo(workdir: Path) -> int:
    """Run the demo, printing as it goes; 0 when every part worked, else 1."""
    console = Console(highlight=False)
    console.print("[bold]interlock demo[/]: offline, on the built-in specs\n")
    clean = _specs_table(console)
    _draw(console, workdir / "diagrams")
    ok = _dispatch_reviewers(console, workdir)
    console.print("\nNext: [bold]interlock validate specs/ --strict[/], "
                  "[bold]interlock diagram polling_state -f svg -o ps.svg[/]")
    return 0 if clean and ok else 1
