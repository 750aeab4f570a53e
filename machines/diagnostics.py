"""Source marks and diagnostics: every problem interlock reports points at FILE:LINE:COL."""

from __future__ import annotations

import difflib
from collections.abc import Iterable
from dataclasses import dataclass, field
from enum import StrEnum
from typing import Any


@dataclass(frozen=True, slots=True, order=True)
class Mark:
    """A position in a source file; line and column are 1-based."""

    file: str
    line: int
    column: int

    def __str__(self) -> str:
        return f"{self.file}:{self.line}:{self.column}"


class Severity(StrEnum):
    ERROR = "error"
    WARNING = "warning"


@dataclass(frozen=True, slots=True)
class Diagnostic:
    """One finding, printed as ``FILE:LINE:COL: error|warning CODE: message``."""

    code: str
    severity: Severity
    message: str
    mark: Mark
    hint: str | None = field(default=None, compare=False)

    def __str__(self) -> str:
        text = f"{self.mark}: {self.severity.value} {self.code}: {self.message}"
        if self.hint:
            text += f" ({self.hint})"
        return text

    def to_json(self) -> dict[str, Any]:
        return {
            "file": self.mark.file,
            "line": self.mark.line,
            "column": self.mark.column,
            "severity": self.severity.value,
            "code": self.code,
            "message": self.message,
            "hint": self.hint,
        }

    @property
    def is_error(self) -> bool:
        return self.severity is Severity.ERROR


def error(code: str, message: str, mark: Mark, hint: str | None = None) -> Diagnostic:
    return Diagnostic(code, Severity.ERROR, message, mark, hint)


def warning(code: str, message: str, mark: Mark, hint: str | None = None) -> Diagnostic:
    return Diagnostic(code, Severity.WARNING, message, mark, hint)


def did_you_mean(word: str, options: Iterable[str]) -> str | None:
    """A hint naming the option closest to ``word``, or None when none is close."""
    close = difflib.get_close_matches(word, list(options), n=1, cutoff=0.6)
    return f"did you mean {close[0]!r}?" if close else None


def sort_diagnostics(diagnostics: Iterable[Diagnostic]) -> list[Diagnostic]:
    return sorted(diagnostics, key=lambda d: (d.mark, d.code, d.message))


class SpecError(Exception):
    """A spec could not be loaded; carries the diagnostics that say why."""

    def __init__(self, diagnostics: list[Diagnostic]) -> None:
        self.diagnostics = sort_diagnostics(diagnostics)
        super().__init__("\n".join(str(d) for d in self.diagnostics))


# The catalogue of codes. Lint, tests and docs/spec-language.md all read from here.
CODES: dict[str, str] = {
    # Y: reading the file and its YAML
    "Y001": "the file is empty",
    "Y002": "YAML syntax error",
    "Y003": "the top level is not a mapping",
    "Y004": "duplicate key",
    "Y005": "tab character used for indentation",
    "Y006": "the file is not UTF-8 text",
    "Y007": "the file is too large",
    "Y008": "the document is nested too deeply",
    "Y009": "the document expands to too many nodes (alias bomb)",
    "Y010": "more than one YAML document in the file",
    "Y011": "the file cannot be read",
    # S: the shape of the spec (the pydantic model)
    "S101": "unknown key",
    "S102": "missing required field",
    "S103": "invalid value",
    "S104": "invalid identifier or event name",
    "S105": "invalid duration",
    "S106": "unsupported spec version",
    "S107": "not a spec: a mapping with neither machine: nor states:",
    # M: the machine the spec describes
    "M201": "transition target or history default is not a state",
    "M202": "missing initial state",
    "M203": "initial state is not a child of its parent",
    "M204": "duplicate state id",
    "M205": "state is unreachable",
    "M206": "trap state: not final and no way out",
    "M207": "final state has outgoing transitions",
    "M208": "history state without a default",
    "M209": "nondeterminism: an earlier unguarded transition hides this one",
    "M210": "unguarded eventless loop",
    "M211": "guard or action is not bound",
    "M212": "delay or invoke timeout names an unknown or non-numeric context field",
    "M213": "reserved event name",
    "M214": "state kind does not allow this field",
    "M215": "context default does not match its type",
    "M216": "invoke names not exactly one of `agent`, `command` and `machine`, or an "
            "empty command",
    "M217": "invoke gives both `prompt` and `prompt_file`, either with `machine`, or "
            "`continue` without `agent`",
    "M218": "invoke `prompt_file` cannot be read",
    "M219": "Jinja2 syntax error in an invoke template",
    "M220": "done.invoke/error.invoke event for an id no state invokes",
    "M221": "duplicate invoke id",
    "M222": "invoke names an agent interlock.yaml does not define",
    "M223": "done/error.invoke event listened for where its invocation is never running",
    "M224": "invoke `machine` names a spec file that does not exist",
    "M225": "done.invoke.<id>.<final> for an invoke that is not a machine",
    "M226": "no active state hears an invoke's error.invoke event",
    "M227": "invoke `concurrency` without `each`",
    "M228": "invoke `concurrency` that is not an integer >= 1 or one {{ expression }}",
    "M229": "invoke `each` that is not a list or one {{ expression }}",
    "M230": "done.invoke.<id>.all for an invoke without `each`",
    "M231": "`item` or `index` in a template of an invoke without `each`",
    "M232": "a broader descriptor hears a fan-out's done.invoke.<id>.all",
    # B: backend refusals (compile targets that cannot express a feature)
    "B301": "the transitions backend cannot express this feature",
    # D: dispatch configuration (the `dispatch:` key of interlock.yaml, CLI flags)
    "D401": "unknown dispatch setting",
    "D402": "invalid value for a dispatch setting (wrong type or unknown choice)",
    "D403": "dispatch setting out of range",
    "D404": "invalid duration in a dispatch setting",
    "D405": "the dispatch configuration is not a mapping",
}
