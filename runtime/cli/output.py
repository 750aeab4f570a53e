"""Printing for the CLI: diagnostics on stdout, summaries and errors on stderr."""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Iterable
from datetime import datetime, tzinfo
from typing import TYPE_CHECKING, Any

from interlock.machines.diagnostics import Diagnostic
from interlock.machines.durations import format_duration

if TYPE_CHECKING:
    from rich.console import Console, RenderableType

#: A piece of a line: plain text, or ``(text, style)``, text that a terminal shows in a
#: rich style ("bold red", "yellow"). Text is never markup: nothing in it needs escaping.
Part = str | tuple[str, str]


class Lines:
    """Lines for the process's stdout or stderr. Where the stream is not a terminal (a
    pipe, a file, a test) a line is its plain text, written at once; where it is, or
    where FORCE_COLOR or TTY_COMPATIBLE=1 asks for styles as rich reads them, rich
    (loaded then) shows the styles. Loading rich and printing through it costs a call
    about 25 ms, most calls print a line or two, and none of them to a terminal when a
    program reads them."""

    def __init__(self, name: str, **options: Any) -> None:
        self._name = name
        self._options = options
        self._console: Console | None = None

    def print(self, *parts: Part) -> None:
        """One line made of ``parts``."""
        stream = getattr(sys, self._name)
        if not _styled(stream):
            stream.write("".join(p if isinstance(p, str) else p[0] for p in parts) + "\n")
            return
        from rich.text import Text

        self.show(Text.assemble(*parts))

    def show(self, renderable: RenderableType) -> None:
        """A rich renderable (a table), as rich renders it for the stream."""
        if self._console is None:
            from rich.console import Console

            self._console = Console(stderr=self._name == "stderr", **self._options)
        self._console.print(renderable)


def _styled(stream: Any) -> bool:
    """Whether rich would style what it prints to ``stream``: a terminal, unless
    TTY_COMPATIBLE=0; or anything, when FORCE_COLOR or TTY_COMPATIBLE=1 says so."""
    compatible = os.environ.get("TTY_COMPATIBLE", "")
    if os.environ.get("FORCE_COLOR") or compatible == "1":
        return True
    try:
        return compatible != "0" and bool(stream.isatty())
    except (AttributeError, ValueError):
        return False


err = Lines("stderr", highlight=False, soft_wrap=True)
out = Lines("stdout", highlight=False, soft_wrap=True)


def print_table(columns: Iterable[str], rows: Iterable[Iterable[str]]) -> None:
    """A borderless table on stdout, one column per name."""
    from rich.table import Table

    table = Table(box=None, pad_edge=False)
    for column in columns:
        table.add_column(column)
    for row in rows:
        table.add_row(*row)
    out.show(table)

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
    err.print(("error:", "bold red"), f" {message}")
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
