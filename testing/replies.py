"""What the scripted model answers: one :class:`Reply` per model request.

A reply is the model's turn, independent of the wire protocol: some text, tool calls the
CLI is asked to carry out (each wire module names them as its CLI's own tools: claude's
``Write``, codex's ``shell``, gemini's ``write_file``, opencode's ``write``), or an HTTP
error, after an optional delay; ``cut`` ends the stream mid-answer (the connection is
closed before the message ends).

>>> say("verdict: accept").text
'verdict: accept'
>>> write_file("hello.txt", "hi\\n").tools[0].kind
'write_file'
>>> fail(429, "slow down", retry_after=1).status
429
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

ToolKind = Literal["write_file", "run_shell"]


@dataclass(frozen=True, slots=True)
class ToolCall:
    """A tool the model asks the CLI to run: write ``content`` to ``path`` (relative to
    the CLI's working folder unless absolute), or run the shell ``command``."""

    kind: ToolKind
    path: str = ""
    content: str = ""
    command: str = ""


@dataclass(frozen=True, slots=True)
class Reply:
    """One model turn. ``status`` other than 200 answers with that HTTP error (and
    ``retry_after`` seconds in its Retry-After header), ``message`` its error text."""

    text: str = ""
    tools: tuple[ToolCall, ...] = ()
    delay: float = 0.0
    cut: bool = False
    status: int = 200
    message: str = ""
    retry_after: float | None = None
    input_tokens: int = 120
    output_tokens: int = 30
    extra: dict[str, object] = field(default_factory=dict)

    @property
    def failed(self) -> bool:
        return self.status != 200


def say(text: str, *, delay: float = 0.0, input_tokens: int = 120,
        output_tokens: int = 30) -> Reply:
    """Answer ``text`` and end the turn."""
    return Reply(text=text, delay=delay, input_tokens=input_tokens,
                 output_tokens=output_tokens)


def write_file(path: str, content: str, *, text: str = "", delay: float = 0.0) -> Reply:
    """Ask the CLI to write ``content`` to ``path`` with its own file-writing tool."""
    return Reply(text=text, tools=(ToolCall("write_file", path=path, content=content),),
                 delay=delay)


def run_shell(command: str, *, text: str = "", delay: float = 0.0) -> Reply:
    """Ask the CLI to run ``command`` with its own shell tool."""
    return Reply(text=text, tools=(ToolCall("run_shell", command=command),), delay=delay)


def fail(status: int, message: str = "", *, retry_after: float | None = None,
         delay: float = 0.0) -> Reply:
    """Answer with HTTP ``status`` and the API's error body carrying ``message``."""
    return Reply(status=status, message=message or f"scripted error {status}",
                 retry_after=retry_after, delay=delay)


def cut(text: str, *, delay: float = 0.0) -> Reply:
    """Start streaming ``text``, then close the connection before the message ends."""
    return Reply(text=text, cut=True, delay=delay)
