"""Ralph configuration: the ``ralph:`` key of ``interlock.yaml``.

Every limit here is enforced by the engine, never left to the agent::

    ralph:
      gates:
        - {name: tests, command: [pytest, -q], timeout: 10m}
        - {name: lint, command: "ruff check . && mypy ."}   # a string runs under sh -c
      gate_attempts: 2          # gate failures sent back to the Executor before [F]
      max_iterations: 5
      max_runtime: 2h
      max_cost: 10.0            # USD
      invocation_timeout: 20m   # one agent invocation
      no_progress_limit: 3      # invocations in a row that change nothing
      knowledge_approval_timeout: 10m
      review_rejections: auto   # auto | wait | off: a rejected task opens the review menu
      parallel: 4               # Executors of a batch running at once (ralph run --parallel)
      batch_size: 4             # tasks per batch the Planner aims for (default: parallel)
      isolation: worktree       # worktree | none: each parallel task in its own git worktree
      retry: {exit_codes: [75], output_patterns: ["No messages returned"],
              attempts: 3, base_delay: 2s, max_delay: 1m}   # (base:, cap: also read)

Defaults: no gates, ``gate_attempts: 2``, no iteration/runtime/cost limit,
``invocation_timeout: 10m``, ``no_progress_limit: 5``, ``knowledge_approval_timeout: 1h``,
``retry: {attempts: 3, base_delay: 200ms, max_delay: 5s}`` with no exit code or pattern
called transient, ``review_rejections: auto``, ``parallel: 1`` (one task at a time),
``isolation: worktree``. ``null`` turns a limit off.

``review_rejections``: before replanning rejected tasks the session waits for the human's
correction of each (the review menu, seed 000) — ``auto`` when ``ralph run`` has a
terminal (the menu opens there; unattended runs go on), ``wait`` always (a correction
comes from ``interlock ralph review ID TASK``, or ``ralph resume`` goes on without),
``off`` never.

Problems are :class:`RalphConfigError` diagnostics at ``interlock.yaml:LINE:COL``.

>>> RalphConfig().gate_attempts
2
>>> Gate.model_validate({"name": "lint", "command": "ruff check ."}).argv
('sh', '-c', 'ruff check .')
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    AliasChoices,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)
from pydantic_core import PydanticCustomError

from interlock.machines.diagnostics import Mark, SpecError, error
from interlock.machines.settings import Duration, Rule, Section, section_diagnostics
from interlock.machines.yamlsrc import Path as SourcePath
from interlock.machines.yamlsrc import SourceMap
from interlock.runtime.config.agents import AgentConfig, load_agents, resolve_agent
from interlock.runtime.config.project_file import PROJECT_FILE, project_section, read_project_file
from interlock.runtime.config.role_names import ROLES

SECTION = "ralph"
IDENTITIES: dict[str, str] = {
    "orchestrator": "Ralph-Orchestrator", "planner": "Ralph-Planner",
    "executor": "Ralph-Executor", "reviewer": "Ralph-Reviewer",
    "questioner": "Ralph-Questioner", "librarian": "Ralph-Librarian",
    "merger": "Ralph-Merger",
}

#: Set in the environment of every agent a Ralph session starts (its session id): such an
#: agent cannot start a Ralph session of its own, and ``interlock ralph poll`` run by it
#: finds its session's folder from wherever it works (``ROOT_ENV``: a task's worktree).
WORKER_ENV = "INTERLOCK_RALPH_SESSION"
ROOT_ENV = "INTERLOCK_RALPH_ROOT"

CODE_UNKNOWN_KEY = "R601"
CODE_INVALID_VALUE = "R602"
CODE_NOT_A_MAPPING = "R603"
CODE_INVALID_DURATION = "R604"
CODE_INVALID_PATTERN = "R605"
CODES: dict[str, str] = {
    CODE_UNKNOWN_KEY: "unknown ralph setting",
    CODE_INVALID_VALUE: "invalid value for a ralph setting",
    CODE_NOT_A_MAPPING: "ralph: or one of its sections is not a mapping",
    CODE_INVALID_DURATION: "invalid duration in a ralph setting",
    CODE_INVALID_PATTERN: "invalid regular expression in retry.output_patterns",
}

_PATTERN = "ralph_pattern"


class RalphConfigError(SpecError):
    """The ``ralph:`` configuration is invalid; carries located diagnostics."""


Text = Annotated[str, Field(strict=True, min_length=1)]
Count = Annotated[int, Field(strict=True, ge=1)]


def _regex(pattern: str) -> str:
    try:
        re.compile(pattern)
    except re.error as exc:
        raise PydanticCustomError(_PATTERN, f"{pattern!r}: {exc}") from None
    return pattern


Pattern = Annotated[str, Field(strict=True, min_length=1), AfterValidator(_regex)]


def _argv(value: Any) -> Any:
    """A string command runs under ``sh -c``; a list is the argv itself."""
    if isinstance(value, str):
        return ("sh", "-c", value)
    return value


class Gate(BaseModel):
    """One backpressure gate: a command that must exit 0 before a task is ``[x]``."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: Text
    command: Annotated[tuple[Text, ...], BeforeValidator(_argv), Field(min_length=1)]
    timeout: Duration = 600.0
    cwd: Text | None = None  # relative to the project folder

    @property
    def argv(self) -> tuple[str, ...]:
        return self.command


class RetryPolicy(BaseModel):
    """Transient agent failures: which exits or output mean "try again", and how often."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    exit_codes: tuple[Annotated[int, Field(strict=True)], ...] = ()
    output_patterns: tuple[Pattern, ...] = ()
    attempts: Count = 3  # tries in all, the first included
    base_delay: Duration = Field(default=0.2, validation_alias=AliasChoices("base_delay", "base"))
    max_delay: Duration = Field(default=5.0, validation_alias=AliasChoices("max_delay", "cap"))

    @property
    def base(self) -> float:
        """``base_delay`` (the name the runner's first agent call used)."""
        return self.base_delay

    @property
    def cap(self) -> float:
        """``max_delay``."""
        return self.max_delay

    @model_validator(mode="after")
    def _delays(self) -> RetryPolicy:
        if self.max_delay < self.base_delay:
            raise PydanticCustomError(
                "ralph_delays", "retry.max_delay must not be below retry.base_delay")
        return self


class RalphConfig(BaseModel):
    """The ``ralph:`` section. ``None`` for a limit means no such limit."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    gates: tuple[Gate, ...] = ()
    gate_attempts: Count = 2
    knowledge_approval_timeout: Duration = 3600.0
    max_iterations: Count | None = None
    max_runtime: Duration | None = None
    max_cost: Annotated[float, Field(ge=0)] | None = None
    invocation_timeout: Duration | None = 600.0
    no_progress_limit: Count | None = 5
    retry: RetryPolicy = Field(default_factory=RetryPolicy)
    review_rejections: Literal["auto", "wait", "off"] = "auto"
    parallel: Count = 1
    batch_size: Count | None = None
    isolation: Literal["worktree", "none"] = "worktree"

    @property
    def planned_batch_size(self) -> int | None:
        """The batch size the Planner is told to aim for: ``batch_size``, else the
        parallelism when it is above 1; None leaves it to the Planner."""
        return self.batch_size or (self.parallel if self.parallel > 1 else None)

    def asks_corrections(self, terminal: bool) -> bool:
        """Whether a rejected task waits for the human's correction before replanning."""
        return self.review_rejections == "wait" or (
            self.review_rejections == "auto" and terminal)

    def with_overrides(self, **fields: Any) -> RalphConfig:
        """This configuration with the given settings (None: keep), validated again (the
        CLI's ``--max-iterations 3``, ``--max-runtime 1h``...). Raises
        :class:`RalphConfigError` naming the option."""
        given = {k: v for k, v in fields.items() if v is not None}
        data = {**self.model_dump(exclude_unset=True), **given}
        try:
            return RalphConfig.model_validate(data)
        except ValidationError as exc:
            raise RalphConfigError([error(
                CODE_INVALID_VALUE, f"invalid value for --{str(e['loc'][0]).replace('_', '-')}"
                f": {str(e['msg']).replace('Input should be', 'expected')}",
                Mark("<command line>", 1, 1)) for e in exc.errors()]) from None

    @field_validator("gates")
    @classmethod
    def _unique(cls, gates: tuple[Gate, ...]) -> tuple[Gate, ...]:
        seen: set[str] = set()
        for gate in gates:
            if gate.name in seen:
                raise PydanticCustomError("ralph_duplicate",
                                          f"two gates are named {gate.name!r}")
            seen.add(gate.name)
        return gates


# ---------------------------------------------------------------------------------------
# pydantic errors -> located diagnostics

RALPH = Section(SECTION, RalphConfig, unknown_key=CODE_UNKNOWN_KEY,
                invalid_value=CODE_INVALID_VALUE, invalid_duration=CODE_INVALID_DURATION,
                missing=CODE_INVALID_VALUE, rules={_PATTERN: Rule(
                    CODE_INVALID_PATTERN, "invalid regular expression in {name}: {msg}")})


def parse_ralph(data: Any, source: SourceMap | None = None,
                base: SourcePath = (SECTION,)) -> RalphConfig:
    """Validate the ``ralph:`` mapping (None: the defaults). Raises
    :class:`RalphConfigError` with every problem, each at its file:line:col."""
    source = source if source is not None else SourceMap("<string>")
    if data is None:
        return RalphConfig()
    if not isinstance(data, Mapping):
        raise RalphConfigError([error(
            CODE_NOT_A_MAPPING, f"{'.'.join(map(str, base))} must be a mapping of settings, "
            f"got {type(data).__name__}", source.value(base),
            "for example: ralph: {max_iterations: 5, gates: [{name: tests, command: [pytest]}]}"
        )])
    try:
        return RalphConfig.model_validate(dict(data))
    except ValidationError as exc:
        raise RalphConfigError(section_diagnostics(exc, RALPH, source, base)) from None


def load_ralph_config(path: Path | str) -> RalphConfig:
    """The settings under ``ralph:`` in the project file at ``path`` (a folder: its
    interlock.yaml); the defaults when the file or the key is absent. Raises
    :class:`RalphConfigError` (``FILE:LINE:COL: ...``)."""
    file = Path(path)
    if file.is_dir():
        file = file / PROJECT_FILE
    if not file.exists():
        return RalphConfig()
    try:
        data, source = project_section(read_project_file(file), str(file), SECTION)
    except SpecError as exc:
        raise RalphConfigError(exc.diagnostics) from None
    return parse_ralph(data, source, (SECTION,))


def role_agents(root: Path) -> dict[str, AgentConfig]:
    """The agent each role runs: ``agents:`` of ROOT/interlock.yaml, else the demo role."""
    agents = load_agents(root / PROJECT_FILE)
    found = {role: resolve_agent(role, agents) for role in ROLES}
    return {role: config for role, config in found.items() if config is not None}
