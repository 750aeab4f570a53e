"""The offline demo and its demo agents through the façade."""

from __future__ import annotations

from pathlib import Path

from interlock.runtime.agents.demo import AnswerFormat as DemoAnswerFormat
from interlock.runtime.agents.demo import run_demo_agent
from interlock.runtime.dispatch.verdict import VerdictValue as DemoVerdict

__all__ = ["DemoAnswerFormat", "DemoVerdict", "run_demo", "run_demo_agent"]


def run_demo(workdir: Path) -> int:
    """Run the offline demo in ``workdir``, printing as it goes; 0 when every part worked,
    else 1. (The demo's modules load here: the CLI's other commands do not pay for them.)"""
    from rich.console import Console

    from interlock.runtime.builtin.demo import run_specs_tour
    from interlock.runtime.ralph.demo import run_ralph_demo

    console = Console(highlight=False)
    clean = run_specs_tour(workdir, console)
    ok = run_ralph_demo(workdir, console)
    console.print("\nNext: [bold]interlock ralph init --request 'write the parser; test it'[/]"
                  ", then [bold]interlock ralph run ID[/] and, from another terminal, "
                  "[bold]interlock signal ID STEER 'scope: ...'[/]")
    return 0 if clean and ok else 1
