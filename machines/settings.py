"""Sections of ``interlock.yaml`` (``agents:``, ``ralph:``, ``dispatch:``, ``inbox:``): one
duration type and one mapping from pydantic's errors to diagnostics at FILE:LINE:COL.

Each section validates its data with a pydantic model and describes its diagnostic codes
in a :class:`Section`; :func:`section_diagnostics` turns every error of a
``ValidationError`` into one line, naming the setting in the spelling the file used
(``outputFormat`` or ``output_format``, ``base`` or ``base_delay``)::

    unknown key 'modle' in agents.reviewer (did you mean 'model'?)       at the key
    agents.r.cli is required                          at the key of the mapping lacking it
    invalid duration for ralph.max_runtime: 'soon' is not a duration; ...   at the value
    invalid value for agents.x.cli: expected 'claude', ..., got 'cursor'    at the value
    invalid value for ralph.gates: two gates are named 't'    (a section's own rule)

A section's own rules raise ``PydanticCustomError`` (or ``ValueError``): their message is
shown as is, without the input, under ``Section.invalid_value`` unless ``Section.rules``
gives the error type its own code and wording. An error about a whole mapping (a model
validator's) points at the key that names the mapping.

>>> from pydantic import BaseModel, ConfigDict, ValidationError
>>> from interlock.machines.yamlsrc import parse_yaml
>>> class Limits(BaseModel):
...     model_config = ConfigDict(extra="forbid")
...     timeout: Duration = 60.0
>>> LIMITS = Section("limits", Limits, unknown_key="L1", invalid_value="L2",
...                  invalid_duration="L3", missing="L4")
>>> document = parse_yaml("limits:\\n  timeout: -1\\n  timeot: 3\\n", "interlock.yaml")
>>> try:
...     Limits.model_validate(document.data["limits"])
... except ValidationError as exc:
...     for d in section_diagnostics(exc, LIMITS, document.source, ("limits",)):
...         print(d)
interlock.yaml:2:12: error L3: invalid duration for limits.timeout: a duration cannot be negative
interlock.yaml:3:3: error L1: unknown key 'timeot' in limits (did you mean 'timeout'?)
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Annotated, Any, get_args

from pydantic import AliasChoices, BaseModel, BeforeValidator, ValidationError
from pydantic.fields import FieldInfo
from pydantic_core import PydanticCustomError
from pydantic_core.core_schema import ErrorType

from interlock.machines.diagnostics import Diagnostic, error
from interlock.machines.durations import setting_duration
from interlock.machines.yamlsrc import Path, SourceMap

DURATION_ERROR = "setting_duration"
_PYDANTIC_ERRORS = frozenset(get_args(ErrorType))


def _duration(value: Any) -> float:
    try:
        return setting_duration(value)
    except ValueError as exc:
        raise PydanticCustomError(DURATION_ERROR, str(exc)) from None


Duration = Annotated[float, BeforeValidator(_duration)]
"""A duration setting in seconds (:func:`~interlock.machines.durations.setting_duration`);
a bad one is reported under ``Section.invalid_duration``."""


@dataclass(frozen=True)
class Rule:
    """How a section reports one error type of its own: the code, and the message with
    ``{name}`` (the setting's dotted path) and ``{msg}`` (the error's message)."""

    code: str
    message: str = "invalid value for {name}: {msg}"


@dataclass(frozen=True)
class Section:
    """One ``interlock.yaml`` section: its name, its model and its diagnostic codes."""

    name: str
    model: type[BaseModel]
    unknown_key: str
    invalid_value: str
    invalid_duration: str
    missing: str
    rules: Mapping[str, Rule] = field(default_factory=dict)
    unknown_key_message: str = "unknown key {key!r} in {where}"
    """``{key}``: the key as written, ``{where}``: the path of its mapping, ``{name}``: both."""


def section_diagnostics(exc: ValidationError, section: Section, source: SourceMap,
                        base: Path = ()) -> list[Diagnostic]:
    """One located diagnostic per error of ``exc``, raised by validating the data found at
    ``base`` in ``source`` with ``section.model``."""
    return [_diagnostic(dict(err), section, source, base) for err in exc.errors()]


def _spellings(name: str, info: FieldInfo) -> tuple[str, ...]:
    """Every key that sets a field, the one to suggest first."""
    names = [info.alias or name, name]
    alias = info.validation_alias
    if isinstance(alias, str):
        names.append(alias)
    elif isinstance(alias, AliasChoices):
        names += [choice for choice in alias.choices if isinstance(choice, str)]
    return tuple(dict.fromkeys(names))


def _keys(model: type[BaseModel]) -> dict[str, str]:
    """Each spelling of each field of ``model`` -> the spelling to suggest."""
    return {spelling: spellings[0]
            for name, info in model.model_fields.items()
            for spellings in (_spellings(name, info),) for spelling in spellings}


def _field(model: type[BaseModel], key: str) -> tuple[str, FieldInfo] | None:
    for name, info in model.model_fields.items():
        if key in _spellings(name, info):
            return name, info
    return None


def _model_in(annotation: Any) -> type[BaseModel] | None:
    """The model a field holds (itself, or as items of a tuple, list or optional)."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    for arg in get_args(annotation):
        model = _model_in(arg)
        if model is not None:
            return model
    return None


def _locate(loc: tuple[Any, ...], section: Section, source: SourceMap, base: Path
            ) -> tuple[Path, type[BaseModel] | None]:
    """The YAML path of a pydantic location, each key in the spelling the file used, and
    the model that owns its last key (None for the keys of a plain mapping)."""
    path = base
    model: type[BaseModel] | None = section.model
    owner = model
    for part in loc:
        owner = model
        if isinstance(part, str) and model is not None:
            found = _field(model, part)
            if found is not None and not source.has((*path, part)):
                part = next((s for s in _spellings(*found) if source.has((*path, s))), part)
            model = _model_in(found[1].annotation) if found is not None else None
        path = (*path, part)
    # Items a validator made up (a command string split into argv) are not in the file.
    while len(path) > len(base) and isinstance(path[-1], int) and not source.has(path):
        path = path[:-1]
    return path, owner


def _shown(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def _diagnostic(err: dict[str, Any], section: Section, source: SourceMap, base: Path
                ) -> Diagnostic:
    loc: tuple[Any, ...] = tuple(err["loc"])
    at, owner = _locate(loc, section, source, base)
    kind: str = err["type"]
    name = ".".join(str(p) for p in at) or section.name
    if kind == "extra_forbidden":
        key = str(loc[-1])
        keys = _keys(owner) if owner is not None else {}
        close = difflib.get_close_matches(key, list(keys), n=1, cutoff=0.6)
        hint = (f"did you mean {keys[close[0]]!r}?" if close
                else "expected one of: " + ", ".join(dict.fromkeys(keys.values())))
        where = ".".join(str(p) for p in at[:-1]) or section.name
        message = section.unknown_key_message.format(key=key, where=where, name=name)
        return error(section.unknown_key, message, source.key(at), hint)
    if kind == "missing":
        return error(section.missing, f"{name} is required", source.key(at[:-1]))
    if kind == DURATION_ERROR:
        return error(section.invalid_duration, f"invalid duration for {name}: {err['msg']}",
                     source.value(at))
    message = str(err["msg"]).replace("Input should be", "expected")
    if kind in section.rules or kind == "value_error" or kind not in _PYDANTIC_ERRORS:
        rule = section.rules.get(kind, Rule(section.invalid_value))
        whole = isinstance(err.get("input"), Mapping)  # a rule about a whole mapping
        return error(rule.code, rule.message.format(
            name=name, msg=message.removeprefix("Value error, ")),
            source.key(at) if whole else source.value(at))
    got = f", got {_shown(err['input'])}" if "input" in err else ""
    return error(section.invalid_value, f"invalid value for {name}: {message}{got}",
                 source.value(at))
