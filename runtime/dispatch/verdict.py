"""What a review document says: the reviewer's role, its verdict and its issues.

One model for both sides: :func:`parse_verdict` reads a parsed review document (``p``,
``v``, ``i``), and the demo agent (:mod:`interlock.runtime.agents.demo`) builds its answers
from the same :class:`Verdict` and :class:`Issue` values. This module is deliberately light
(the standard library only): the demo agent imports it in a subprocess whose start-up time
the latency benches measure.

>>> v = parse_verdict({"p": "QA", "v": "no go", "i": [{"c": "no test"}, "loose remark"]})
>>> v.verdict, v.verdict_recognized
('NO-GO', True)
>>> v.issues
(Issue(severity='C', text='no test'), Issue(severity=None, text='loose remark'))
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

__all__ = [
    "SEVERITIES",
    "VERDICTS",
    "Issue",
    "Verdict",
    "VerdictValue",
    "parse_verdict",
]


class VerdictValue(StrEnum):
    """A reviewer's verdict, as the seeds spell it."""

    GO = "GO"
    CONDITIONAL = "CONDITIONAL"
    NO_GO = "NO-GO"


VERDICTS: tuple[str, ...] = tuple(v.value for v in VerdictValue)
SEVERITIES: tuple[str, ...] = ("C", "H", "M", "L")  # critical, high, medium, low


@dataclass(frozen=True)
class Issue:
    """One review issue: ``- C: text`` gives severity ``C``; other shapes keep only text."""

    severity: str | None
    text: str

    def to_json(self) -> dict[str, Any]:
        return {"severity": self.severity, "text": self.text}


@dataclass(frozen=True)
class Verdict:
    """The review fields of a document: ``p`` (role), ``v`` (verdict), ``i`` (issues).

    ``verdict`` is a :class:`VerdictValue` (normalized to upper case, ``_``/space to ``-``);
    anything else is kept as given with ``verdict_recognized`` false. The demo agent's
    answers are values of this class too.
    """

    role: str | None
    verdict: str | None
    issues: tuple[Issue, ...] = ()
    verdict_recognized: bool = True

    def to_json(self) -> dict[str, Any]:
        return {
            "role": self.role,
            "verdict": None if self.verdict is None else str(self.verdict),  # plain text
            "verdictRecognized": self.verdict_recognized,
            "issues": [issue.to_json() for issue in self.issues],
        }


def _as_text(value: Any) -> str:
    if isinstance(value, str):
        return value
    try:
        return json.dumps(value, ensure_ascii=False, default=str)
    except (TypeError, ValueError):
        return str(value)


def _issues(value: Any) -> tuple[Issue, ...]:
    if value is None:
        return ()
    items = value if isinstance(value, list) else [value]
    out: list[Issue] = []
    for item in items:
        if isinstance(item, dict) and len(item) == 1:
            ((key, text),) = item.items()
            severity = str(key).strip().upper()
            if severity in SEVERITIES:
                out.append(Issue(severity, _as_text(text)))
                continue
        out.append(Issue(None, _as_text(item)))
    return tuple(out)


def parse_verdict(
    document: Mapping[str, Any],
    *,
    role_field: str = "p",
    verdict_field: str = "v",
    issues_field: str = "i",
) -> Verdict:
    """Read the review fields of a parsed document (see :class:`Verdict`)."""
    role = document.get(role_field)
    raw = document.get(verdict_field)
    verdict: str | None = None
    recognized = False
    if raw is not None:
        given = _as_text(raw)
        normal = re.sub(r"[\s_]+", "-", given.strip().upper())
        recognized = normal in VERDICTS
        verdict = normal if recognized else given
    return Verdict(
        role=None if role is None else _as_text(role),
        verdict=verdict,
        issues=_issues(document.get(issues_field)),
        verdict_recognized=recognized,
    )
