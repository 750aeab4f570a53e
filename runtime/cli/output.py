"""Printing for the CLI: diagnostics on stdout, summaries and errors on stderr."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterable
from datetime import datetime, tzinfo
from typing import TYPE_CHECKING, Any

from interlock.machines.diagnostics import Diagnostic
from interlock.machines.durations import format_duration

if TYPE_CHECKING:
    from rich.console import Console


class LazyConsole:
    """A rich ``Console`` made at its first ``print``: importing rich costs a CLI call
    ~25 ms, and many calls print nothing or one line."""

    def __init__(self, **options: Any) -> None:
        self._options = options
        self._console: Console | None = None

    def print(self, *objects: Any, **options: Any) -> None:
        if self._console is None:
            from rich.console import Console

            self._console = Console(**self._options)
        self._console.print(*objects, **options)


def escape(text: str) -> str:
    """``text`` with rich's markup escaped (rich.markup loaded on first use)."""
    from rich.markup import escape as rich_escape

    return rich_escape(text)


err = LazyConsole(stderr=True, highlight=False, soft_wrap=True)
out = LazyConsole(highlight=False, soft_wrap=True)


def print_table(columns: Iterable[str], rows: Iterable[Iterable[str]]) -> None:
    """A borderless table on stdout, one column per name."""
    from rich.table import Table

    table = Table(box=None, pad_edge=False)
    for column in columns:
        table.add_column(column)
    for row in rows:
        table.add_row(*row)
    out.print(table)

EXIT_OK = 0
EXIT_ERRORS = 1
EXIT_USAGE = 2


def print_diagnostics(diagnostics: Iterable[Diagnostic]) -> None:
    """Diagnostics as the command's output (validate): on stdout."""
    for diagnostic in diagnostics:
        print(diagnostic)


def report_diagnostics(diagnostics: Iterable[Diagnostic]) -> None:
    """Diagnostics as the reason a command failed: on stderr, one line each."""
    for diagnostic in diagnostics:
        sys.stderr.write(f"{diagnostic}\n")


def print_json(diagnostics: Iterable[Diagnostic]) -> None:
    json.dump([d.to_json() for d in diagnostics], sys.stdout, indent=2)
    sys.stdout.write("\n")


def fail(message: str, code: int = EXIT_ERRORS) -> int:
    err.print(f"[bold red]error:[/] {escape(message)}")
    return code


def relative(seconds: float) -> str:
    """How far a moment is from now: ``in 2m58s``, ``3s ago``, ``now``.

    >>> relative(178.4), relative(-3), relative(0.25), relative(0.0004)
    ('in 2m58s', '3s ago', 'in 250ms', 'now')
    """
    size = abs(seconds)
    if size < 0.001:
        return "now"
    text = format_duration(size if size < 1 else round(size))
    return f"in {text}" if seconds > 0 else f"{text} ago"


def when(ts: float, now: float, tz: tzinfo | None = None) -> str:
    """A moment (Unix seconds) as local ISO 8601 to the second, with how far it is from
    ``now``: ``2026-11-25T16:20:05+01:00 (in 2m58s)``. ``tz``: default the local zone.

    >>> from datetime import timedelta, timezone
    >>> when(1_764_087_605.0, 1_764_087_427.0, timezone(timedelta(hours=1)))
    '2025-11-25T17:20:05+01:00 (in 2m58s)'
    >>> when(1_764_087_424.6, 1_764_087_427.0, timezone.utc)
    '2025-11-25T16:17:04+00:00 (2s ago)'
    """
    return f"{timestamp(ts, tz)} ({relative(ts - now)})"


def timestamp(ts: float, tz: tzinfo | None = None) -> str:
    """A moment as local ISO 8601 to the second (for log lines): ``2026-11-25T16:20:05+01:00``.
    """
    moment = datetime.fromtimestamp(ts, tz) if tz is not None else (
        datetime.fromtimestamp(ts).astimezone())
    return moment.isoformat(timespec="seconds")
