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

import functools
from dataclasses import dataclass

import jinja2
import jinja2.meta
import jinja2.nodes

# The names a template may read: the session context, the invoke's rendered input, and
# the pending STEER/INFO signals; in a fan-out's child (``each:``), its item and index too.
TEMPLATE_NAMES: tuple[str, ...] = ("context", "input", "signals")
EACH_NAMES: tuple[str, ...] = ("item", "index")


@dataclass(frozen=True, slots=True)
class TemplateProblem:
    """A syntax error: its 1-based line within the template, and Jinja2's message."""

    line: int
    message: str


_PARSER = jinja2.Environment(autoescape=False)  # parsing only; never renders


@functools.lru_cache(maxsize=1024)
def _parsed(source: str) -> jinja2.nodes.Template | TemplateProblem:
    """The parse of ``source`` (or its syntax error), once per text: lint asks it for each
    check, and every spec a process opens is linted."""
    try:
        return _PARSER.parse(source)
    except jinja2.TemplateSyntaxError as exc:
        return TemplateProblem(exc.lineno or 1, exc.message or "syntax error")


def template_syntax_error(source: str) -> TemplateProblem | None:
    """The first Jinja2 syntax error in ``source``, or None when it parses."""
    if "{" not in source:  # no tag, expression or comment: plain text
        return None
    parsed = _parsed(source)
    return parsed if isinstance(parsed, TemplateProblem) else None


def template_names(source: str) -> dict[str, int]:
    """The names ``source`` reads from outside (a loop's own variable is not one of them),
    each with the template line of its first use; empty when it does not parse.

    >>> template_names("{{ item.id }}\\n{% for t in context.tasks %}{{ t }}{% endfor %}")
    {'item': 1, 'context': 2}
    """
    return dict(_names(source))


@functools.lru_cache(maxsize=1024)
def _names(source: str) -> tuple[tuple[str, int], ...]:
    from jinja2 import nodes

    tree = _parsed(source) if "{" in source else None
    if not isinstance(tree, nodes.Template):
        return ()
    outside = jinja2.meta.find_undeclared_variables(tree)
    lines: dict[str, int] = {}
    for node in tree.find_all(nodes.Name):
        if node.name in outside:
            lines.setdefault(node.name, node.lineno)
    return tuple(sorted(lines.items(), key=lambda kv: kv[1]))
