"""Label text shared by the renderers: one wording for transitions and state details.

Everything here returns plain text; each renderer escapes it for its own syntax.
"""

from __future__ import annotations

import re
import textwrap
from collections.abc import Callable

from interlock.machines.durations import format_duration
from interlock.machines.ir import (
    Delay,
    InvokeIR,
    MachineIR,
    StateIR,
    TransitionIR,
    TransitionKind,
)

DESCRIPTION_WIDTH = 40
DETAIL_WIDTH = 48
_BARE_NUMBER = re.compile(r"^\s*\d+(?:\.\d+)?\s*$")


def delay_text(delay: Delay | None) -> str:
    """``3m`` as written, bare seconds as a duration (``180`` -> ``3m``), or the context key."""
    if delay is None:
        return "?"
    if delay.seconds is not None and _BARE_NUMBER.match(delay.text):
        return format_duration(delay.seconds)
    return delay.text.strip()


Escape = Callable[[str], str]


def _same(text: str) -> str:
    return text


def trigger_text(t: TransitionIR, esc: Escape = _same) -> str:
    """What fires a transition: the event, ``after 3m``, or ``always`` (empty when guarded)."""
    if t.kind is TransitionKind.AFTER:
        return f"after {esc(delay_text(t.delay))}"
    if t.kind is TransitionKind.ALWAYS:
        return "" if t.guard is not None else "always"
    return esc(t.event or "")


def transition_label(t: TransitionIR, esc: Escape = _same) -> str:
    """``event [guard] / a, b``; negated guards read ``[!g]``.

    ``esc`` escapes the names taken from the spec; the punctuation around them is ours.
    """
    guard = f"[{'!' if t.guard.negated else ''}{esc(t.guard.name)}]" if t.guard else ""
    text = " ".join(p for p in (trigger_text(t, esc), guard) if p)
    if t.actions:
        actions = ", ".join(esc(a) for a in t.actions)
        text = f"{text} / {actions}" if text else f"/ {actions}"
    return text


def history_label(state: StateIR) -> str:
    return "H*" if state.history == "deep" else "H"


def wrap_description(text: str | None) -> list[str]:
    """A description as short lines (``DESCRIPTION_WIDTH``), words kept whole."""
    lines: list[str] = []
    for paragraph in (text or "").strip().splitlines():
        lines.extend(textwrap.wrap(paragraph, DESCRIPTION_WIDTH, break_on_hyphens=False))
    return lines


def invoke_text(invoke: InvokeIR, esc: Escape = _same) -> str:
    """``invoke / agent executor``, ``invoke / command sh`` or ``invoke / machine m``; the
    id when it is not the state's (``invoke review / agent reviewer``), since done/error
    events carry it. A fan-out's notation is a line of its own (:func:`fanout_text`)."""
    head = "invoke" if invoke.id == invoke.state else f"invoke {esc(invoke.id)}"
    if invoke.agent is not None:
        runs = f"agent {esc(invoke.agent)}"
    elif invoke.command:
        runs = f"command {esc(invoke.command[0])}"
    elif invoke.machine is not None:
        runs = f"machine {esc(invoke.machine)}"
    else:
        runs = "?"
    return f"{head} / {runs}"


def _expression(text: str) -> str:
    """``context.batch`` for ``{{ context.batch }}``; other text as it is."""
    text = text.strip()
    if text.startswith("{{") and text.endswith("}}"):
        return text[2:-2].strip()
    return text


FANOUT_MARK = "\u2225"  # PARALLEL TO: starts a fan-out's line (in DejaVu, unlike U+2AF4)
TIMES = "\u00d7"  # MULTIPLICATION SIGN: before a fan-out's concurrency


def fanout_text(invoke: InvokeIR, esc: Escape = _same) -> str | None:
    """A fan-out's notation, under its invoke: ``∥ each: context.batch`` then a times
    sign and the concurrency (``2``, ``context.parallel``; left out when all children run
    at once). A literal list reads ``[3 items]``. None for an invoke without ``each:``."""
    each = invoke.each
    if each is None:
        return None
    if isinstance(each, str):
        over = esc(_expression(each))
    else:
        over = esc(f"[{len(each)} item{'' if len(each) == 1 else 's'}]")
    limit = invoke.concurrency
    times = "" if limit is None else f" {TIMES}{esc(_expression(str(limit)))}"
    return f"{FANOUT_MARK} each: {over}{times}"


def detail_lines(state: StateIR, esc: Escape = _same, descriptions: bool = False) -> list[str]:
    """The compartment under a state's name: [description,] entry, invoke, exit, internal
    transitions."""
    lines = [esc(line) for line in wrap_description(state.description)] if descriptions else []
    behaviour: list[str] = []
    if state.entry:
        behaviour.append(f"entry / {', '.join(esc(a) for a in state.entry)}")
    if state.invoke is not None:
        behaviour.append(invoke_text(state.invoke, esc))
        fanout = fanout_text(state.invoke, esc)
        if fanout is not None:
            behaviour.append(fanout)
    if state.exit:
        behaviour.append(f"exit / {', '.join(esc(a) for a in state.exit)}")
    behaviour.extend(transition_label(t, esc) for t in state.transitions if t.internal)
    for line in behaviour:  # long action lists continue on indented lines
        lines.extend(textwrap.wrap(line, DETAIL_WIDTH, subsequent_indent="    ",
                                   break_long_words=False, break_on_hyphens=False))
    return lines


def is_container(state: StateIR) -> bool:
    """A state with children is drawn as a box around them.

    That is every compound and parallel state, and also a state that has children it may
    not have (``type: atomic`` with ``states:``, which lint reports): drawing it as a box
    keeps its children in the picture.
    """
    return bool(state.children)


def check_active(ir: MachineIR, active: frozenset[str]) -> None:
    unknown = sorted(a for a in active if a not in ir.states)
    if unknown:
        raise ValueError(f"active states not in machine {ir.name!r}: {', '.join(unknown)}")
