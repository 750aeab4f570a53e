"""Dispatch configuration (seed 001): ``PollingConfiguration`` and ``CompletionMarkerConfig``.

Read from the ``dispatch:`` key of a project file ``interlock.yaml`` (or from a spec's
invoke block, through :func:`parse_dispatch_config`), with the seed's camelCase keys;
snake_case keys are accepted too. Every rule of the seed is enforced, plus interlock's
own limits (idle timeout, TERM->KILL grace, output memory cap). A problem is reported
as a :class:`ConfigError` whose diagnostics point at FILE:LINE:COL and name the field
in the seed's spelling, e.g. ``dispatchTimeout must be at least 10 s, got 5``.

>>> config = PollingConfiguration()
>>> config.dispatch_timeout, config.polling_interval, config.completion_markers.required_field
(180.0, 1.0, 'v')
>>> with_overrides(config, timeout="3m", output_format="json").dispatch_timeout
180.0
>>> with_overrides(config, timeout="5").dispatch_timeout  # a bare number is seconds
5.0
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import (
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    ValidationError,
    ValidationInfo,
    field_validator,
    model_validator,
)
from pydantic_core import PydanticCustomError

from interlock.machines.diagnostics import Diagnostic, SpecError, error
from interlock.machines.settings import Duration, Rule, Section, section_diagnostics
from interlock.machines.yamlsrc import Path as SourcePath
from interlock.machines.yamlsrc import SourceMap
from interlock.runtime.config.project_file import PROJECT_FILE, project_section, read_project_file

SECTION = "dispatch"
FLAGS_FILE = "<command line>"

KIB = 1024
MIB = 1024 * KIB
MIN_DISPATCH_TIMEOUT = 10.0
MIN_POLLING_INTERVAL = 1.0
MIN_OUTPUT_MEMORY_CAP = 64 * KIB
DEFAULT_IDLE_TIMEOUT = 60.0

OutputFormat = Literal["yaml", "json", "text"]

# Validation context key: dispatchTimeout comes from `--timeout` (no 10 s floor).
_FROM_FLAG = "timeout_from_flag"

# The error type of our own range checks, reported as CODE_OUT_OF_RANGE (DISPATCH).
_RANGE = "dispatch_range"


class ConfigError(SpecError):
    """The dispatch configuration is invalid; carries the diagnostics that say why.

    A :class:`SpecError` so that code printing spec diagnostics prints these too.
    """


class FlagError(ConfigError):
    """A command-line flag (``--timeout``, ``--interval`` ...) is invalid. ``message`` is
    one line naming the flag and its value: ``--timeout 0: dispatchTimeout must be ...``.
    """

    def __init__(self, diagnostics: list[Diagnostic], message: str) -> None:
        super().__init__(diagnostics)
        self.message = message

    def __str__(self) -> str:
        return self.message


def _range_error(message: str) -> PydanticCustomError:
    return PydanticCustomError(_RANGE, message)


def _seconds(value: float) -> str:
    return f"{value:g} s"


_SIZE = re.compile(r"^\s*(\d+)\s*(B|KiB|MiB|GiB|KB|MB|GB)?\s*$")
_SIZE_UNITS = {None: 1, "B": 1, "KiB": KIB, "MiB": MIB, "GiB": 1024 * MIB,
               "KB": 1000, "MB": 1000**2, "GB": 1000**3}


def _size(value: Any) -> Any:
    """Bytes from an integer or size text (``512KiB``, ``8MiB``); other input is left to
    pydantic's strict int check."""
    if isinstance(value, str):
        match = _SIZE.match(value)
        if match is None:
            raise PydanticCustomError(
                "int_type", "expected a number of bytes or a size like 512KiB, 8MiB"
            )
        return int(match[1]) * _SIZE_UNITS[match[2]]
    return value


ByteSize = Annotated[int, BeforeValidator(_size), Field(strict=True)]
StrictCount = Annotated[int, Field(strict=True)]
Markers = tuple[Annotated[str, Field(strict=True)], ...]

_CONFIG = ConfigDict(frozen=True, extra="forbid", populate_by_name=True)


def _check_markers(name: str, value: tuple[str, ...]) -> tuple[str, ...]:
    if not value:
        raise _range_error(f"{name} must list at least one pattern")
    if "" in value:
        raise _range_error(f"{name} must not contain an empty pattern")
    return value


class CompletionMarkerConfig(BaseModel):
    """How to recognise that a sub-agent's output is complete (seed 001).

    ``requiredField`` is the YAML key whose presence marks valid output. The seed writes
    it as ``"v:"``; both ``v:`` and ``v`` are accepted and normalised to the key name
    ``v``, so that a detector can match ``^v:`` itself without doubling the colon.
    The YAML keys ``yaml`` and ``json`` are the attributes ``yaml_markers`` and
    ``json_markers`` (``json`` would shadow a BaseModel method).
    """

    model_config = _CONFIG

    yaml_markers: Markers = Field(default=("---", "\n..."), alias="yaml")
    json_markers: Markers = Field(default=("}\n",), alias="json")
    required_field: Annotated[str, Field(strict=True)] = Field(
        default="v", alias="requiredField"
    )
    min_silence_cycles: StrictCount = Field(default=2, alias="minSilenceCycles")

    @field_validator("yaml_markers", "json_markers")
    @classmethod
    def _markers(cls, value: tuple[str, ...], info: ValidationInfo) -> tuple[str, ...]:
        return _check_markers(f"completionMarkers.{_alias_of(cls, info.field_name or '')}", value)

    @field_validator("required_field")
    @classmethod
    def _required_field(cls, value: str) -> str:
        key = value.strip().removesuffix(":").strip()
        if not key:
            raise _range_error(f"requiredField must name a YAML key, like v: or v; got {value!r}")
        return key

    @field_validator("min_silence_cycles")
    @classmethod
    def _silence(cls, value: int) -> int:
        if value < 1:
            raise _range_error(f"minSilenceCycles must be at least 1, got {value}")
        return value


class PollingConfiguration(BaseModel):
    """How a sub-agent is dispatched and polled (seed 001, plus interlock's limits).

    Durations are seconds (numbers or text like ``500ms``, ``3m``); ``outputMemoryCap``
    is bytes (a number or text like ``8MiB``). ``idleTimeout`` (no output for that long
    after the first output) defaults to 60 s, or to ``dispatchTimeout`` when shorter.
    """

    model_config = _CONFIG

    dispatch_timeout: Duration = Field(default=180.0, alias="dispatchTimeout")
    polling_interval: Duration = Field(default=1.0, alias="pollingInterval")
    completion_markers: CompletionMarkerConfig = Field(
        default_factory=CompletionMarkerConfig, alias="completionMarkers"
    )
    min_output_length: StrictCount = Field(default=100, alias="minOutputLength")
    idle_timeout: Duration = Field(default=DEFAULT_IDLE_TIMEOUT, alias="idleTimeout")
    terminate_grace: Duration = Field(default=5.0, alias="terminateGrace")
    output_memory_cap: ByteSize = Field(default=8 * MIB, alias="outputMemoryCap")
    output_format: OutputFormat = Field(default="yaml", alias="outputFormat")

    @model_validator(mode="after")
    def _default_idle(self) -> PollingConfiguration:
        """An unset idleTimeout is 60 s, or dispatchTimeout when that is shorter. It stays
        unset (not in ``model_fields_set``), so ``--timeout`` later derives it afresh."""
        if "idle_timeout" not in self.model_fields_set and (
                self.dispatch_timeout < self.idle_timeout):
            object.__setattr__(self, "idle_timeout", self.dispatch_timeout)  # frozen model
        return self

    @field_validator("dispatch_timeout")
    @classmethod
    def _timeout(cls, value: float, info: ValidationInfo) -> float:
        if isinstance(info.context, Mapping) and info.context.get(_FROM_FLAG):
            if value <= 0:  # `--timeout S`: any positive number of seconds, as asked
                raise _range_error(f"dispatchTimeout must be more than 0 s, got {value:g}")
            return value
        if value < MIN_DISPATCH_TIMEOUT:
            raise _range_error(
                f"dispatchTimeout must be at least {_seconds(MIN_DISPATCH_TIMEOUT)}, "
                f"got {value:g}"
            )
        return value

    @field_validator("polling_interval")
    @classmethod
    def _interval(cls, value: float, info: ValidationInfo) -> float:
        if value < MIN_POLLING_INTERVAL:
            raise _range_error(
                f"pollingInterval must be at least {_seconds(MIN_POLLING_INTERVAL)}, "
                f"got {value:g}"
            )
        return _within_timeout("pollingInterval", value, info)

    @field_validator("min_output_length")
    @classmethod
    def _min_output(cls, value: int) -> int:
        if value < 0:
            raise _range_error(f"minOutputLength must be at least 0, got {value}")
        return value

    @field_validator("idle_timeout")
    @classmethod
    def _idle(cls, value: float, info: ValidationInfo) -> float:
        if value <= 0:
            raise _range_error(f"idleTimeout must be more than 0 s, got {value:g}")
        return _within_timeout("idleTimeout", value, info)

    @field_validator("output_memory_cap")
    @classmethod
    def _memory_cap(cls, value: int) -> int:
        if value < MIN_OUTPUT_MEMORY_CAP:
            raise _range_error(
                f"outputMemoryCap must be at least {MIN_OUTPUT_MEMORY_CAP} bytes (64 KiB), "
                f"got {value}"
            )
        return value


def _within_timeout(name: str, value: float, info: ValidationInfo) -> float:
    """``value`` if it does not exceed dispatchTimeout (absent when that was invalid)."""
    timeout = info.data.get("dispatch_timeout")
    if timeout is not None and value > timeout:
        raise _range_error(
            f"{name} must be at most dispatchTimeout ({_seconds(timeout)}), got {value:g}"
        )
    return value


def _alias_of(model: type[BaseModel], name: str) -> str:
    field = model.model_fields.get(name)
    return field.alias if field is not None and field.alias else name


# ---------------------------------------------------------------------------------------
# From pydantic errors to diagnostics with marks

CODE_UNKNOWN_KEY = "D401"
CODE_INVALID_VALUE = "D402"
CODE_OUT_OF_RANGE = "D403"
CODE_INVALID_DURATION = "D404"
CODE_NOT_A_MAPPING = "D405"

DISPATCH = Section(SECTION, PollingConfiguration, unknown_key=CODE_UNKNOWN_KEY,
                   invalid_value=CODE_INVALID_VALUE, invalid_duration=CODE_INVALID_DURATION,
                   missing=CODE_INVALID_VALUE, rules={_RANGE: Rule(CODE_OUT_OF_RANGE, "{msg}")})


# ---------------------------------------------------------------------------------------
# Loading


def parse_dispatch_config(
    data: Any, source: SourceMap | None = None, base: SourcePath = (), *,
    timeout_from_flag: bool = False,
) -> PollingConfiguration:
    """Validate configuration data (a mapping, or None for the defaults).

    ``source`` and ``base`` locate the data in its YAML file, e.g. the project file's
    source map and ``("dispatch",)``, or a spec's invoke block; without them the
    diagnostics point at ``<string>:1:1``. ``timeout_from_flag``: dispatchTimeout was
    given as ``--timeout`` and may be any positive duration (a file's must be >= 10 s).
    """
    source = source if source is not None else SourceMap("<string>")
    if data is None:
        return PollingConfiguration()
    if not isinstance(data, Mapping):
        where = ".".join(str(p) for p in base) or SECTION
        raise ConfigError([error(
            CODE_NOT_A_MAPPING,
            f"{where} must be a mapping of settings, got {type(data).__name__}",
            source.value(base),
            "for example: dispatch: {dispatchTimeout: 3m, pollingInterval: 1}",
        )])
    try:
        return PollingConfiguration.model_validate(
            data, context={_FROM_FLAG: timeout_from_flag})
    except ValidationError as exc:
        raise ConfigError(section_diagnostics(exc, DISPATCH, source, base)) from None


def find_project_config(start: Path | None = None) -> Path | None:
    """The nearest ``interlock.yaml`` in ``start`` (default: cwd) or a folder above it.

    The walk stops at the first folder holding ``.git`` (the repository root, whose own
    ``interlock.yaml`` still counts) or at the filesystem root.
    """
    folder = (start if start is not None else Path.cwd()).resolve()
    for candidate in (folder, *folder.parents):
        path = candidate / PROJECT_FILE
        if path.is_file():
            return path
        if (candidate / ".git").exists():
            return None
    return None


def load_dispatch_config(path: Path | None = None, *, start: Path | None = None
                         ) -> PollingConfiguration:
    """The configuration under ``dispatch:`` in a project file.

    Without ``path`` the project file is found by :func:`find_project_config` from
    ``start``; when there is none, or it has no ``dispatch:`` key, the seed's defaults
    apply. A ``path`` given explicitly must exist. Raises :class:`ConfigError`.
    """
    if path is None:
        path = find_project_config(start)
        if path is None:
            return PollingConfiguration()
    try:
        data, source = project_section(read_project_file(path), str(path), SECTION)
    except SpecError as exc:
        raise ConfigError(exc.diagnostics) from None
    return parse_dispatch_config(data, source, (SECTION,))


def with_overrides(
    config: PollingConfiguration,
    timeout: float | str | None = None,
    interval: float | str | None = None,
    required_field: str | None = None,
    output_format: str | None = None,
) -> PollingConfiguration:
    """``config`` with the CLI flags ``--timeout``, ``--interval``, ``--required-field``
    and ``--format`` applied, validated again as a whole (``--timeout 20`` against a
    configured ``pollingInterval: 30`` is an error). Raises :class:`ConfigError`."""
    data = config.model_dump(by_alias=True, exclude_unset=True)
    given = {"--timeout": timeout, "--interval": interval, "--format": output_format,
             "--required-field": required_field}
    keys = {"--timeout": "dispatchTimeout", "--interval": "pollingInterval",
            "--format": "outputFormat"}
    for flag, key in keys.items():
        if given[flag] is not None:
            data[key] = given[flag]
    if required_field is not None:
        data["completionMarkers"] = {**data.get("completionMarkers", {}),
                                     "requiredField": required_field}
    try:
        return parse_dispatch_config(data, SourceMap(FLAGS_FILE),
                                     timeout_from_flag=timeout is not None)
    except ConfigError as exc:
        flags = {flag: value for flag, value in given.items() if value is not None}
        shown = " ".join(f"{flag} {shlex.quote(str(value))}" for flag, value in flags.items())
        raise FlagError([replace(d, hint=f"with {shown}") for d in exc.diagnostics],
                        _flags_message(exc.diagnostics, flags)) from None


_FLAG_KEYS = {"--timeout": "dispatchTimeout", "--interval": "pollingInterval",
              "--format": "outputFormat", "--required-field": "requiredField"}


def _flags_message(diagnostics: list[Diagnostic], flags: Mapping[str, object]) -> str:
    """One line, ``--timeout 0: <message>``, for the problems that name a flag's setting
    (or every problem, with every flag, when none does: e.g. a derived idleTimeout)."""
    def named(message: str) -> list[str]:
        return [f for f in flags if _FLAG_KEYS[f] in message]

    direct = [d.message for d in diagnostics if named(d.message)]
    lines = [" ".join(f"{f} {shlex.quote(str(flags[f]))}" for f in (named(m) or list(flags)))
             + f": {m}" for m in (direct or [d.message for d in diagnostics])]
    return "; ".join(dict.fromkeys(lines))
