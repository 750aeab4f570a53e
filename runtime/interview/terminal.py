"""The terminal front end: arrow keys and letter keys (prompt_toolkit), the echo in a Rich
panel.

Keys: Up/Down move, Enter picks (a multi-select: confirms), an option's key picks it at
once (a multi-select: toggles it; Space toggles the highlighted one; ``X`` confirms).
Back is ``<`` or Backspace where a question offers it, and ``B`` on the echo, where ``B``
is no option. Esc or Ctrl-C aborts. A question not answered by its deadline times out.
"""

from __future__ import annotations

import asyncio
from typing import Any

from prompt_toolkit.application import Application
from prompt_toolkit.buffer import Buffer
from prompt_toolkit.formatted_text import FormattedText
from prompt_toolkit.key_binding import KeyBindings, KeyPressEvent
from prompt_toolkit.layout import HSplit, Layout, Window
from prompt_toolkit.layout.controls import BufferControl, FormattedTextControl
from rich.console import Console
from rich.panel import Panel

from interlock.runtime.engine.clock import Clock, SystemClock
from interlock.runtime.interview.driver import Aborted, NoAnswer, Outcome
from interlock.runtime.interview.protocol import BACK, AnswerValue, Question

_ABORT = object()


class TerminalUI:
    """Asks in the terminal it runs in."""

    def __init__(self, console: Console | None = None, clock: Clock | None = None) -> None:
        self.console = console or Console(highlight=False)
        self.clock = clock or SystemClock()

    def show_output(self, node: str, text: str) -> None:
        self.console.print(Panel(text.rstrip() or "(empty)", title=f"output of {node}",
                                 title_align="left"))

    def finish(self, outcome: Outcome) -> None:
        return None  # the caller says how it ended (the CLI: one line on stderr)

    def ask(self, question: Question, *, session: str, default: AnswerValue | None,
            deadline: float | None) -> AnswerValue:
        if question.note:
            self.console.print(Panel(f"POLLER: {question.note}", title="interpretation",
                                     title_align="left"))
        app = (_text_app(question, default) if question.kind == "text"
               else _choice_app(question, default))
        timeout = None if deadline is None else max(0.0, deadline - self.clock.now())
        result = asyncio.run(_run(app, timeout))
        if result is _ABORT:
            self.console.print(f"[dim]{question.prompt}[/] [bold]Esc[/]")
            raise Aborted()
        shown = ("Back" if isinstance(result, str) and question.is_back(result)
                 else ", ".join(result) if isinstance(result, list) else result)
        self.console.print(f"[dim]{question.prompt}[/] [bold]{shown}[/]")
        return result  # type: ignore[no-any-return]


async def _run(app: Application[Any], timeout: float | None) -> Any:
    try:
        return await asyncio.wait_for(app.run_async(), timeout)
    except TimeoutError:
        raise NoAnswer() from None


def _shortcuts(question: Question) -> dict[str, str]:
    """Typed character -> option key: single-character keys themselves (both cases), else
    1, 2, 3... in order."""
    found: dict[str, str] = {}
    for number, option in enumerate(question.options, start=1):
        if len(option.key) == 1:
            found[option.key.lower()] = found[option.key.upper()] = option.key
        elif number <= 9:
            found[str(number)] = option.key
    return found


def _choice_app(question: Question, default: AnswerValue | None) -> Application[Any]:
    options = list(question.options) if question.kind != "confirm" else []
    if question.kind == "confirm":
        from interlock.runtime.interview.protocol import Option

        options = [Option(key="yes", label="Yes"), Option(key="no", label="No")]
    keys = [o.key for o in options]
    multi = question.kind == "multi"
    ticked: list[str] = list(default) if multi and isinstance(default, list) else []
    cursor = [keys.index(default) if isinstance(default, str) and default in keys else 0]
    shortcuts = _shortcuts(question)
    if question.kind == "confirm":
        shortcuts = {"y": "yes", "Y": "yes", "n": "no", "N": "no"}
    backs = set(question.back)
    shown = {key: char for char, key in shortcuts.items() if char == char.upper()}

    def text() -> FormattedText:
        lines: list[tuple[str, str]] = [("bold", f"? {question.prompt}\n")]
        for index, option in enumerate(options):
            mark = "> " if index == cursor[0] else "  "
            box = ("[x] " if option.key in ticked else "[ ] ") if multi else ""
            style = "reverse" if index == cursor[0] else ""
            lines.append((style, f"{mark}{box}{shown[option.key]}. {option.label}\n"))
        hint = "[A-C] Toggle   [X] Confirm" if multi else "Enter or key: select"
        if backs:
            hint += f"   [{'/'.join([*sorted(backs - {BACK}), '<'])}] Back"
        lines.append(("class:hint", f"  {hint}   Esc: abort"))
        return FormattedText(lines)

    bindings = KeyBindings()

    @bindings.add("up")
    def _up(event: KeyPressEvent) -> None:
        cursor[0] = (cursor[0] - 1) % len(options)

    @bindings.add("down")
    def _down(event: KeyPressEvent) -> None:
        cursor[0] = (cursor[0] + 1) % len(options)

    def toggle(key: str) -> None:
        if key in ticked:
            ticked.remove(key)
        else:
            ticked.append(key)

    def confirm(event: KeyPressEvent) -> None:
        if ticked:
            event.app.exit(result=[k for k in keys if k in ticked])

    @bindings.add("enter")
    def _enter(event: KeyPressEvent) -> None:
        if multi:
            confirm(event)
        else:
            event.app.exit(result=keys[cursor[0]])

    @bindings.add(" ")
    def _space(event: KeyPressEvent) -> None:
        if multi:
            toggle(keys[cursor[0]])

    @bindings.add("escape", eager=True)
    @bindings.add("c-c")
    def _abort(event: KeyPressEvent) -> None:
        event.app.exit(result=_ABORT)

    if backs:
        @bindings.add("backspace")
        @bindings.add("<")
        def _back(event: KeyPressEvent) -> None:
            event.app.exit(result=BACK)

    def typed(event: KeyPressEvent) -> None:
        char = event.data
        if multi and char in ("x", "X") and "X" not in keys:
            confirm(event)
            return
        if char in backs or (char.upper() in backs and char.upper() not in keys):
            event.app.exit(result=BACK if char == BACK else char.upper())
            return
        key = shortcuts.get(char)
        if key is None:
            return
        cursor[0] = keys.index(key)
        if multi:
            toggle(key)
        else:
            event.app.exit(result=key)

    bindings.add("<any>")(typed)
    control = FormattedTextControl(text, focusable=True, show_cursor=False)
    return Application(layout=Layout(Window(control, always_hide_cursor=True)),
                       key_bindings=bindings, full_screen=False, erase_when_done=True)


def _text_app(question: Question, default: AnswerValue | None) -> Application[Any]:
    buffer = Buffer(multiline=False)
    if isinstance(default, str):
        buffer.text = default
        buffer.cursor_position = len(default)
    bindings = KeyBindings()

    @bindings.add("enter")
    def _enter(event: KeyPressEvent) -> None:
        if buffer.text.strip():
            event.app.exit(result=buffer.text.strip())

    @bindings.add("escape", eager=True)
    @bindings.add("c-c")
    def _abort(event: KeyPressEvent) -> None:
        event.app.exit(result=_ABORT)

    if question.back:
        @bindings.add("c-b")
        def _back(event: KeyPressEvent) -> None:
            event.app.exit(result=BACK)

    prompt = Window(FormattedTextControl(FormattedText([("bold", f"? {question.prompt}")])),
                    height=1)
    field = Window(BufferControl(buffer=buffer), height=1)
    hint = Window(FormattedTextControl("  Enter: done   Esc: abort"), height=1)
    return Application(layout=Layout(HSplit([prompt, field, hint]), focused_element=field),
                       key_bindings=bindings, full_screen=False, erase_when_done=True)
