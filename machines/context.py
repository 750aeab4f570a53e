"""Context values against the spec's context types: one rule for defaults and for input.

Lint's M215 checks a field's ``default`` with :func:`fits`; ``interlock run --context``
checks the values a user passes with :func:`check_context`. The types are those of
docs/spec-language.md: ``int``, ``float``, ``str``, ``bool``, ``list``, ``dict``,
``duration`` and ``any``. ``true`` is not an ``int``; an ``int`` is a ``float``; a
``duration`` is seconds or duration text (``30s``, ``3m``); ``null`` means unset and fits
every type.

>>> from interlock.machines import build_ir, loads
>>> ir = build_ir(loads("machine: m\\ncontext:\\n  retries: {type: int, default: 0}\\n"
...                     "states:\\n  a: {}\\n"))
>>> for problem in check_context(ir, {"retries": True, "retry": 1}):
...     print(f"{problem.field}: {problem.message}")
retries: context field 'retries' must be an int, got a bool: true
retry: unknown context field 'retry'
>>> print(check_context(ir, {"retry": 1})[0].hint)
did you mean 'retries'? the spec declares: retries
>>> check_context(ir, {"retries": 3})
[]
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from interlock.machines.diagnostics import did_you_mean
from interlock.machines.durations import parse_duration
from interlock.machines.ir import MachineIR


def is_delay(value: object) -> bool:
    """Whether ``value`` is a delay: non-negative seconds or duration text.

    >>> is_delay("1h30m"), is_delay(20), is_delay(True), is_delay("soon")
    (True, True, False, False)
    """
    if isinstance(value, bool) or not isinstance(value, str | int | float):
        return False
    try:
        parse_duration(value)
    except ValueError:
        return False
    return True


TYPE_CHECKS: Mapping[str, Callable[[Any], bool]] = {
    "int": lambda v: isinstance(v, int) and not isinstance(v, bool),
    "float": lambda v: isinstance(v, int | float) and not isinstance(v, bool),
    "str": lambda v: isinstance(v, str),
    "bool": lambda v: isinstance(v, bool),
    "list": lambda v: isinstance(v, list),
    "dict": lambda v: isinstance(v, dict),
    "duration": is_delay,
}
TYPE_HINTS: Mapping[str, str] = {
    "int": "write a whole number such as 0; true and false are not numbers",
    "float": "write a number such as 1.5",
    "str": "quote the value to make it text",
    "bool": "write true or false; yes, no, on and off are text in YAML 1.2",
    "list": "write a list such as []",
    "dict": "write a mapping such as {}",
    "duration": "write seconds or a duration such as 500ms, 30s, 3m, 1h30m",
}


def fits(type_name: str, value: object) -> bool:
    """Whether ``value`` is of context type ``type_name`` (``None``: unset, always fits).

    >>> fits("int", True), fits("float", 2), fits("duration", "3m"), fits("any", {})
    (False, True, True, True)
    """
    check = TYPE_CHECKS.get(type_name)
    return value is None or check is None or check(value)


def kind_of(value: object) -> str:
    """What a value is, in the spec language's words: ``a bool``, ``an int``, ``text`` ...

    >>> kind_of(True), kind_of(3), kind_of("x"), kind_of({})
    ('a bool', 'an int', 'text', 'a mapping')
    """
    names = {bool: "a bool", int: "an int", float: "a float", str: "text", list: "a list",
             dict: "a mapping"}
    return names.get(type(value), f"a {type(value).__name__}")


def article(type_name: str) -> str:
    """``an int``, ``a str``."""
    return f"{'an' if type_name[0] in 'aeiou' else 'a'} {type_name}"


@dataclass(frozen=True, slots=True)
class Problem:
    """One context value that does not fit the spec: the field, what is wrong, a hint."""

    field: str
    message: str
    hint: str | None = None

    def __str__(self) -> str:
        return f"{self.message} ({self.hint})" if self.hint else self.message


def check_context(ir: MachineIR, values: Mapping[str, Any]) -> list[Problem]:
    """Every value in ``values`` that the spec's context does not declare or whose type it
    does not fit, in the order given. An empty list: the values may start a session."""
    problems: list[Problem] = []
    declared = list(ir.context)
    for name, value in values.items():
        field = ir.context.get(name)
        if field is None:
            listing = (f"the spec declares: {', '.join(declared)}" if declared
                       else f"machine {ir.name!r} declares no context fields")
            suggestion = did_you_mean(name, declared)
            hint = f"{suggestion} {listing}" if suggestion else listing
            problems.append(Problem(name, f"unknown context field {name!r}", hint))
        elif not fits(field.type, value):
            problems.append(Problem(
                name,
                f"context field {name!r} must be {article(field.type)}, got "
                f"{kind_of(value)}: {_shown(value)}",
                TYPE_HINTS.get(field.type)))
    return problems


def _shown(value: object, limit: int = 40) -> str:
    text = json.dumps(value, ensure_ascii=False)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def context_message(problems: Iterable[Problem], option: str = "--context") -> str:
    """One line for the user: every problem, separated by ``; ``.

    >>> context_message([Problem("a", "unknown context field 'a'")])
    "--context: unknown context field 'a'"
    """
    return f"{option}: " + "; ".join(str(p) for p in problems)
