"""``interlock watch ID``: a live terminal view of a Ralph session.

The view is drawn from a :class:`RalphStatus` (the same data ``interlock ralph status
--json`` prints): :func:`render` turns one status into a Rich renderable and is pure;
:func:`follow` redraws it with :class:`rich.live.Live` every ``interval`` seconds from a
``read_status`` callable until the session has ended (or ``until`` says so), and returns
the last status. docs/ralph-watch.md lists every field read.
"""

from __future__ import annotations

import io
import time
from collections.abc import Callable

from rich.console import Console, Group, RenderableType
from rich.live import Live
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from interlock.machines.durations import format_duration
from interlock.runtime.ralph.status import (
    FINISHED,
    LAST_LINES,
    Marker,
    RalphStatus,
    RunningAgent,
    SignalLine,
    Spend,
    TaskLine,
)

# The status models live in ralph/status.py; they are named here too (watch reads them).
__all__ = ["FINISHED", "LAST_LINES", "RECENT_SIGNALS", "Marker", "RalphStatus", "RunningAgent",
           "SignalLine", "Spend", "TaskLine", "follow", "render", "render_text"]

RECENT_SIGNALS = 5

_MARKER_STYLE = {" ": "dim", "/": "yellow", "x": "green", "F": "bold red"}
_STATUS_STYLE = {"running": "bold cyan", "paused": "bold yellow", "complete": "bold green",
                 "completed": "bold green", "failed": "bold red", "aborted": "bold red",
                 "stopped": "bold magenta", "cancelled": "bold red"}


def _header(status: RalphStatus) -> Table:
    grid = Table.grid(padding=(0, 2))
    grid.add_column(style="bold")
    grid.add_column()
    grid.add_row("session", Text(status.session_id))
    grid.add_row("state", Text(status.state, style="cyan"))
    grid.add_row("status", Text(status.status, style=_STATUS_STYLE.get(status.status, "")))
    of = f" of {status.max_iterations}" if status.max_iterations is not None else ""
    batch = ""
    if status.batch is not None:
        batch = f", batch {status.batch}" + (f"/{status.batches}" if status.batches else "")
    grid.add_row("iteration", Text(f"{status.iteration}{of}{batch}"))
    if status.elapsed is not None:
        grid.add_row("elapsed", Text(format_duration(round(status.elapsed))))
    grid.add_row("spend", Text(_spend(status.spend)))
    if status.inbox is not None:
        waiting = f", {status.inbox.pending} not yet taken" if status.inbox.pending else ""
        grid.add_row("inbox", Text(f"{status.inbox.delivered} delivered{waiting}"))
    if status.paused_for:
        grid.add_row("paused", Text(status.paused_for, style="bold yellow"))
    if status.stop is not None:
        grid.add_row("stopped", Text(f"{status.stop.reason}: {status.stop.detail}".rstrip(": "),
                                     style="bold magenta"))
    return grid


def _spend(spend: Spend) -> str:
    tokens = [f"{n:,} {label}" for n, label in ((spend.input_tokens, "in"),
                                                (spend.output_tokens, "out")) if n is not None]
    text = " / ".join(tokens) + " tokens" if tokens else "tokens not reported"
    if spend.cost_usd is not None:
        text += f", ${spend.cost_usd:.2f}"
    return text


def _tasks(status: RalphStatus) -> RenderableType:
    done = sum(t.marker == "x" for t in status.tasks)
    failed = sum(t.marker == "F" for t in status.tasks)
    table = Table(title=f"tasks: {done}/{len(status.tasks)} done, {failed} failed",
                  title_justify="left", show_header=False, box=None, padding=(0, 1))
    table.add_column(no_wrap=True)
    table.add_column(no_wrap=True)
    table.add_column()
    for task in status.tasks:
        title = Text(task.title)
        if task.note:
            title.append(f"  ({task.note})", style="dim")
        table.add_row(Text(f"[{task.marker}]", style=_MARKER_STYLE[task.marker]),
                      Text(task.id, style="bold"), title)
    return table


def _agent(agent: RunningAgent) -> RenderableType:
    head = Text(f"{agent.role}", style="bold")
    if agent.task:
        head.append(f" on {agent.task}")
    head.append(f"  {format_duration(round(agent.elapsed))}")
    if agent.attempt > 1:
        head.append(f"  attempt {agent.attempt}", style="yellow")
    lines = [Text(line, style="dim", no_wrap=True, overflow="ellipsis")
             for line in agent.last_lines[-LAST_LINES:]]
    return Panel(Group(head, *lines), title="running agent", title_align="left")


def _workers(workers: tuple[RunningAgent, ...]) -> RenderableType:
    """One line per Executor of a parallel batch: its task, elapsed, its last line."""
    table = Table(show_header=False, box=None, padding=(0, 1))
    for worker in workers:
        last = worker.last_lines[-1] if worker.last_lines else ""
        table.add_row(Text(worker.task or "?", style="bold"),
                      Text(format_duration(round(worker.elapsed))),
                      Text(last, style="dim", no_wrap=True, overflow="ellipsis"))
    return Panel(table, title=f"running Executors ({len(workers)})", title_align="left")


def _signals(signals: tuple[SignalLine, ...]) -> RenderableType:
    table = Table(title="recent signals", title_justify="left", show_header=False, box=None,
                  padding=(0, 1))
    for signal in signals[-RECENT_SIGNALS:]:
        action = Text(f"-> {signal.action}" if signal.action else "(pending)", style="dim")
        table.add_row(Text(signal.type, style="bold"), Text(signal.message), action)
    return table


def render(status: RalphStatus) -> RenderableType:
    """The whole view of ``status`` (pure: no clock, no I/O)."""
    parts: list[RenderableType] = [_header(status)]
    if status.tasks:
        parts.append(_tasks(status))
    if status.workers:
        parts.append(_workers(status.workers))
    elif status.agent is not None:
        parts.append(_agent(status.agent))
    if status.merge_queue:
        parts.append(Text.assemble(("merge queue: ", "bold"), " ".join(status.merge_queue),
                                   (f"  into {status.integration}" if status.integration
                                    else "", "dim")))
    if status.signals:
        parts.append(_signals(status.signals))
    return Panel(Group(*parts), title=f"ralph {status.session_id}", title_align="left")


def render_text(status: RalphStatus, width: int = 100) -> str:
    """``render`` as plain text, ``width`` columns wide (tests, logs, ``--once``)."""
    console = Console(width=width, record=True, color_system=None, force_terminal=False,
                      file=io.StringIO())
    console.print(render(status))
    return console.export_text()


def follow(read_status: Callable[[], RalphStatus], interval: float = 0.5, *,
           until: Callable[[RalphStatus], bool] | None = None,
           console: Console | None = None,
           sleep: Callable[[float], None] = time.sleep) -> RalphStatus:
    """Show the session live until it has finished (``until`` overrides that test);
    returns the last status read. The last view stays on the screen."""
    done = until or (lambda s: s.finished)
    status = read_status()
    with Live(render(status), console=console, auto_refresh=False,
              transient=False) as live:
        while not done(status):
            sleep(interval)
            status = read_status()
            live.update(render(status), refresh=True)
        live.update(render(status), refresh=True)
    return status
