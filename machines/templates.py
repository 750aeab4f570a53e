"""Invoke templates: the Jinja2 dialect of ``prompt``, ``prompt_file`` and ``input`` strings.

The runtime renders them (with ``StrictUndefined``) from :data:`TEMPLATE_NAMES`; the
machines side only parses them, so that lint reports a syntax error at the spec's line
before anything runs.

>>> template_syntax_error("Task: {{ context.current_task }}") is None
True
>>> template_syntax_error("line one\\n{{ context.task }")
TemplateProblem(line=2, message="unexpected '}'")
"""

from __future__ import annotations

from dataclasses import dataclass

import jinja2

# The names a template may read: the session context, the invoke's rendered input, and
# the pending STEER/INFO signals.
TEMPLATE_NAMES: tuple[str, ...] = ("context", "input", "signals")


@dataclass(frozen=True, slots=True)
class TemplateProblem:
    """A syntax error: its 1-based line within the template, and Jinja2's message."""

    line: int
    message: str


_PARSER = jinja2.Environment(autoescape=False)  # parsing only; never renders


def template_syntax_error(source: str) -> TemplateProblem | None:
    """The first Jinja2 syntax error in ``source``, or None when it parses."""
    try:
        _PARSER.parse(source)
    except jinja2.TemplateSyntaxError as exc:
        return TemplateProblem(exc.lineno or 1, exc.message or "syntax error")
    return None
