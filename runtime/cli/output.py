"""Printing for the CLI: diagnostics on stdout, summaries and errors on stderr."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterable

from rich.console import Console
from rich.markup import escape

from interlock.machines.diagnostics import Diagnostic

err = Console(stderr=True, highlight=False, soft_wrap=True)

EXIT_OK = 0
EXIT_ERRORS = 1
EXIT_USAGE = 2


def print_diagnostics(diagnostics: Iterable[Diagnostic]) -> None:
    for diagnostic in diagnostics:
        print(diagnostic)


def print_json(diagnostics: Iterable[Diagnostic]) -> None:
    json.dump([d.to_json() for d in diagnostics], sys.stdout, indent=2)
    sys.stdout.write("\n")


def fail(message: str, code: int = EXIT_ERRORS) -> int:
    err.print(f"[bold red]error:[/] {escape(message)}")
    return code
