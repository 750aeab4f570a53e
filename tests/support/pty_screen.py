"""A terminal UI in a real pty (pexpect), its screen read with pyte: the output recorded
with its times (an asciinema v2 cast), screen lines matched, keys pressed when a pattern
is on screen. Waits are bounded reads of the pty, never sleeps."""

from __future__ import annotations

import json
import re
import time

import pexpect
import pyte

COLUMNS, ROWS = 100, 60
DOWN, ESC, BACKSPACE = "\x1b[B", "\x1b", "\x7f"


class Recorder:
    """pexpect's logfile_read: keeps every byte of output with its time (a cast)."""

    def __init__(self) -> None:
        self.start = time.monotonic()
        self.events: list[tuple[float, str]] = []

    def write(self, data: str) -> None:
        self.events.append((round(time.monotonic() - self.start, 3), data))

    def flush(self) -> None:
        return None

    def text(self) -> str:
        return "".join(data for _, data in self.events)

    def cast(self, title: str = "interlock review: the seed 000 path") -> str:
        header = {"version": 2, "width": COLUMNS, "height": ROWS, "title": title}
        return "\n".join([json.dumps(header), *(json.dumps([t, "o", d])
                                                for t, d in self.events)]) + "\n"


class Terminal:
    """The child in a pty and its screen (pyte), fed as output arrives."""

    def __init__(self, child: pexpect.spawn, recorder: Recorder) -> None:
        self.child = child
        self.recorder = recorder
        self.screen = pyte.Screen(COLUMNS, ROWS)
        self.stream = pyte.Stream(self.screen)
        self.fed = 0

    def lines(self) -> list[str]:
        return [line.rstrip() for line in self.screen.display if line.strip()]

    def wait(self, pattern: str, timeout: float = 60) -> None:
        """Until a line of the screen matches ``pattern`` (a regex); reads the pty with a
        bounded wait, never sleeps."""
        deadline = time.monotonic() + timeout
        while True:
            text = self.recorder.text()
            self.stream.feed(text[self.fed:])
            self.fed = len(text)
            if any(re.search(pattern, line) for line in self.lines()):
                return
            assert time.monotonic() < deadline, f"{pattern!r} not on screen:\n" + "\n".join(
                self.lines())
            try:
                self.child.read_nonblocking(65536, timeout=0.5)
            except pexpect.TIMEOUT:
                continue


def screen_of(recorder: Recorder) -> list[str]:
    screen = pyte.Screen(COLUMNS, ROWS)
    pyte.Stream(screen).feed(recorder.text())
    return [line.rstrip() for line in screen.display if line.strip()]


def keys(child: pexpect.spawn, recorder: Recorder, steps: list[tuple[str, str]]) -> None:
    """Wait until each pattern is on the screen, then press the keys. A question on screen
    is ``? PROMPT``; once answered, it is replaced by ``PROMPT ANSWER``."""
    terminal = Terminal(child, recorder)
    for pattern, pressed in steps:
        terminal.wait(pattern)
        child.send(pressed)
