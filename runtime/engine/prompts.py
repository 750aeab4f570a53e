"""Prompts: Jinja2 templates rendered from the session context, the invoke's input and the
pending STEER/INFO signals.

The template sees ``context`` (the session's context mapping), ``input`` (the invoke's
input, whose string values are rendered first, as templates of their own over ``context``
and ``signals``), ``signals`` (a list of ``{type, message, ...}`` mappings) and
``signal_text`` (those signals as ``TYPE: message`` lines, the form the demo agents read);
a fan-out's child (``each:``) also sees ``item`` and ``index`` (``scope``), in its input
too.

A string of the input that is one ``{{ expression }}`` alone gives the expression's value as
it is (a list stays a list), so ``task: "{{ context.current_task }}"`` hands a mapping on;
any other string is rendered as text.

The environment is sandboxed and strict: a missing variable is a :class:`PromptError`
naming the variable and the place (``prompt.j2:3`` or, for an inline prompt, the spec mark
given as ``origin`` moved down by the template line), never an empty string. A prompt that
renders to nothing but whitespace is an error too.

>>> render_prompt("Plan {{ input.request }}", context={}, input={"request": "x"}, signals=[])
'Plan x'
"""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any

import jinja2
from jinja2.sandbox import SandboxedEnvironment

from interlock.machines.diagnostics import Mark, SpecError, error

CODE_PROMPT = "A510"
_UNDEFINED = re.compile(r"^'([^']+)' is undefined$")
_NO_ATTRIBUTE = re.compile(r"has no attribute '([^']+)'$")
_ALONE = re.compile(r"^\{\{(?P<expr>(?:(?!\}\}|\{\{|\{%|\{#).)*)\}\}$", re.DOTALL)


class PromptError(SpecError):
    """A prompt could not be rendered; ``mark`` says where, ``variable`` which name was
    missing (None for other template errors)."""

    def __init__(self, message: str, mark: Mark, variable: str | None = None) -> None:
        super().__init__([error(CODE_PROMPT, message, mark)])
        self.mark = mark
        self.variable = variable


def _environment() -> SandboxedEnvironment:
    return SandboxedEnvironment(undefined=jinja2.StrictUndefined, autoescape=False,
                                keep_trailing_newline=True)


def signal_lines(signals: Sequence[Mapping[str, Any]]) -> str:
    """Signals as ``TYPE: message`` lines (one per signal, newlines in a message folded)."""
    lines = []
    for signal in signals:
        message = " ".join(str(signal.get("message", "")).split())
        lines.append(f"{signal.get('type', 'INFO')}: {message}".rstrip())
    return "\n".join(lines)


def _template_line(tb: TracebackType | None, filename: str) -> int | None:
    """The template line of the innermost traceback frame that belongs to the template."""
    line = None
    while tb is not None:
        if tb.tb_frame.f_code.co_filename == filename:
            line = tb.tb_lineno
        tb = tb.tb_next
    return line


def _place(origin: Mark | str | None, file: str, line: int | None) -> Mark:
    """Where line ``line`` of a template is: in its own file, or down from ``origin``."""
    offset = (line or 1) - 1
    if isinstance(origin, Mark):
        return Mark(origin.file, origin.line + offset, origin.column if not offset else 1)
    if isinstance(origin, str) and origin:
        head, _, rest = origin.rpartition(":")
        if head and rest.isdigit():
            base_file, _, base_line = head.rpartition(":")
            if base_file and base_line.isdigit():  # FILE:LINE:COL
                return Mark(base_file, int(base_line) + offset, 1 if offset else int(rest))
            return Mark(head, int(rest) + offset, 1)  # FILE:LINE
        return Mark(origin, line or 1, 1)
    return Mark(file, line or 1, 1)


def _undefined(exc: jinja2.UndefinedError, what: str, mark: Mark) -> PromptError:
    """The error for a name a template or an input expression does not have."""
    text = str(exc)
    m = _UNDEFINED.match(text) or _NO_ATTRIBUTE.search(text)
    variable = m.group(1) if m else None
    label = f"undefined variable {variable!r}" if variable else text
    return PromptError(f"{what}: {label} ({text})", mark, variable)


@functools.lru_cache(maxsize=128)
def _template(source: str, name: str, filename: str) -> jinja2.Template:
    """A template compiled once per process for the same text (a session renders the
    same few templates over and over); a syntax error is raised, and not kept."""
    env = _environment()
    env.loader = jinja2.FunctionLoader(lambda _: (source, filename, lambda: True))
    return env.get_template(name)


def _render(source: str, name: str, variables: Mapping[str, Any],
            origin: Mark | str | None, what: str) -> str:
    filename = f"<prompt {name}>" if origin is not None or not Path(name).exists() else name
    try:
        template = _template(source, name, filename)
        return template.render(variables)
    except jinja2.TemplateSyntaxError as exc:
        mark = _place(origin, name, exc.lineno)
        raise PromptError(f"{what}: template syntax error: {exc.message}", mark) from None
    except jinja2.UndefinedError as exc:
        mark = _place(origin, name, _template_line(exc.__traceback__, filename))
        raise _undefined(exc, what, mark) from None
    except jinja2.TemplateError as exc:
        mark = _place(origin, name, _template_line(exc.__traceback__, filename))
        raise PromptError(f"{what}: {exc}", mark) from None


@functools.lru_cache(maxsize=256)
def _expression(expression: str) -> Any:
    """A Jinja2 expression compiled once per process (raises TemplateSyntaxError)."""
    return _environment().compile_expression(expression, undefined_to_none=False)


def _evaluate(expression: str, variables: Mapping[str, Any], origin: Mark | str | None,
              what: str) -> Any:
    """The value of one Jinja2 expression (``{{ expression }}`` alone in an input string)."""
    try:
        value = _expression(expression)(**variables)
    except jinja2.TemplateSyntaxError as exc:
        raise PromptError(f"{what}: template syntax error: {exc.message}",
                          _place(origin, what, exc.lineno)) from None
    except jinja2.UndefinedError as exc:
        raise _undefined(exc, what, _place(origin, what, None)) from None
    except jinja2.TemplateError as exc:
        raise PromptError(f"{what}: {exc}", _place(origin, what, None)) from None
    if isinstance(value, jinja2.Undefined):  # e.g. a missing item of a mapping
        name = getattr(value, "_undefined_name", None)
        label = f"undefined variable {name!r}" if name else "undefined value"
        raise PromptError(f"{what}: {label} ({expression.strip()} is undefined)",
                          _place(origin, what, None), name)
    return value


def _render_input(value: Any, variables: Mapping[str, Any], origin: Mark | str | None,
                  key: str) -> Any:
    if isinstance(value, str):
        alone = _ALONE.match(value.strip())
        if alone is not None:
            return _evaluate(alone.group("expr"), variables, origin, f"input.{key}")
        return _render(value, f"input.{key}", variables, origin, f"input.{key}")
    if isinstance(value, Mapping):
        return {k: _render_input(v, variables, origin, f"{key}.{k}") for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_render_input(v, variables, origin, f"{key}.{i}") for i, v in enumerate(value)]
    return value


def _names(context: Mapping[str, Any], signals: Sequence[Mapping[str, Any]],
           scope: Mapping[str, Any] | None) -> dict[str, Any]:
    """What every template sees: the context, the signals, and ``scope`` (a fan-out
    child's ``item`` and ``index``)."""
    return {"context": dict(context), "signals": [dict(s) for s in signals],
            "signal_text": signal_lines(signals), **(scope or {})}


def render_input(input: Mapping[str, Any], *, context: Mapping[str, Any],
                 signals: Sequence[Mapping[str, Any]] = (),
                 origin: Mark | str | None = None,
                 scope: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """An invoke's ``input`` rendered over ``context``, ``signals`` and the names of
    ``scope`` (a child machine's context). Raises :class:`PromptError`."""
    base = _names(context, signals, scope)
    return {key: _render_input(value, base, origin, str(key)) for key, value in input.items()}


def render_prompt(template: str | Path, *, context: Mapping[str, Any],
                  input: Mapping[str, Any] | None = None,
                  signals: Sequence[Mapping[str, Any]] = (),
                  origin: Mark | str | None = None,
                  scope: Mapping[str, Any] | None = None) -> str:
    """Render a prompt: ``template`` is the text of an inline prompt or the Path of a
    prompt file. ``origin`` is where an inline prompt (and the input) is written in its
    spec (a Mark or ``FILE:LINE[:COL]``); ``scope`` holds more names (a fan-out child's
    ``item`` and ``index``). Raises :class:`PromptError`."""
    base = _names(context, signals, scope)
    rendered_input = render_input(input or {}, context=context, signals=signals,
                                  origin=origin, scope=scope)
    variables = {**base, "input": rendered_input}
    where: Mark | str | None = None
    if isinstance(template, Path):
        try:
            source = template.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            at = origin if origin is not None else str(template)
            raise PromptError(f"the prompt file {template} cannot be read: {exc}",
                              _place(at, str(template), None)) from None
        name = str(template)
    else:
        source, name, where = template, "prompt", origin if origin is not None else "<prompt>"
    text = _render(source, name, variables, where, "prompt")
    if not text.strip():
        raise PromptError("prompt: the prompt renders to an empty text",
                          _place(where, name, None))
    return text
