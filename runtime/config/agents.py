"""Agent configuration: the ``agents:`` key of ``interlock.yaml``, one AgentConfig per name.

Seed 001's SubAgentCommand fields (``cli``, ``model``, ``agent``, ``outputFormat``; the
prompt comes from the invoking state) plus ``args``, ``env``, ``cwd``, ``timeout``,
``permissions``, ``untrusted`` (codex, gemini), the argv of ``cli: command`` and the
``role``/``delay``/``script`` of the offline ``cli: demo`` agents::

    agents:
      reviewer: {cli: claude, model: sonnet, agent: code-reviewer}
      planner: {cli: demo, role: planner, delay: 100ms}
      lint: {cli: command, command: [ruff, check, --output-format, json]}

Problems are :class:`AgentConfigError` diagnostics at ``interlock.yaml:LINE:COL`` (unknown
key, wrong type, unknown cli, missing ``command``...). Relative ``cwd`` and ``script`` paths
are taken from the folder of the project file.

>>> default_agents()["planner"].role
'planner'
>>> default_agents()["poller"].role
'questioner'
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator
from pydantic_core import PydanticCustomError

from interlock.machines.diagnostics import Diagnostic, SpecError, error
from interlock.machines.settings import Duration, Rule, Section, section_diagnostics
from interlock.machines.yamlsrc import Path as SourcePath
from interlock.machines.yamlsrc import SourceMap
from interlock.runtime.config.project_file import project_section, read_project_file
from interlock.runtime.config.role_names import ALL_ROLES, EDITING_ROLES, Role

SECTION = "agents"

AgentCli = Literal["claude", "codex", "opencode", "gemini", "command", "demo"]
AGENT_CLIS: tuple[str, ...] = ("claude", "codex", "opencode", "gemini", "command", "demo")

# What an agent may do in its working folder (``permissions:`` of an agent): read only,
# edit files there, or run commands too. Each adapter maps it to its CLI's own flags.
Permissions = Literal["read-only", "edit", "full"]
PERMISSIONS: tuple[str, ...] = ("read-only", "edit", "full")


@dataclass(frozen=True, slots=True)
class AgentLaunch:
    """How to start the agent: an argv (never a shell line), the text for its stdin (then
    closed; None: /dev/null), extra environment, and a working folder (None: inherited)."""

    argv: tuple[str, ...]
    stdin: str | None = None
    env: Mapping[str, str] = field(default_factory=dict)
    cwd: str | None = None


# Agent names a built-in spec invokes that stand for a demo role offline: the poller of
# the review interview (specs/poller_interview.yaml, seed 000) asks as the questioner.
DEMO_STAND_INS: dict[str, Role] = {"poller": "questioner"}
OutputFormat = Literal["yaml", "json", "text"]
# What a CLI that checks its working folder (codex: a git repository; gemini: a folder
# trusted in ~/.gemini/trustedFolders.json) does in one it does not trust: ``allow`` runs
# anyway (the CLI's own skip flag), ``refuse`` leaves the CLI's check on.
Untrusted = Literal["allow", "refuse"]

# Diagnostic codes of the agents: section (printed like the spec codes of machines/).
CODE_UNKNOWN_KEY = "A501"
CODE_INVALID_VALUE = "A502"
CODE_MISSING = "A503"
CODE_NOT_A_MAPPING = "A504"
CODE_INVALID_DURATION = "A505"
CODES: dict[str, str] = {
    CODE_UNKNOWN_KEY: "unknown agent setting",
    CODE_INVALID_VALUE: "invalid value for an agent setting (wrong type or unknown choice)",
    CODE_MISSING: "a setting the agent's cli needs is missing, or one it does not use is set",
    CODE_NOT_A_MAPPING: "agents: or one agent is not a mapping",
    CODE_INVALID_DURATION: "invalid duration in an agent setting",
}

_MISSING = "agent_missing"


class AgentConfigError(SpecError):
    """The ``agents:`` configuration is invalid; carries located diagnostics."""


Text = Annotated[str, Field(strict=True, min_length=1)]
Argv = tuple[Annotated[str, Field(strict=True)], ...]

# The settings only some CLIs use, and those CLIs.
_ONLY_FOR: dict[str, tuple[str, ...]] = {
    "command": ("command",), "role": ("demo",), "delay": ("demo",), "script": ("demo",),
    "untrusted": ("codex", "gemini"),
}


class AgentConfig(BaseModel):
    """One agent: which CLI, how to call it, and (demo) which role it plays."""

    model_config = ConfigDict(frozen=True, extra="forbid", populate_by_name=True)

    cli: AgentCli
    model: Text | None = None
    agent: Text | None = None
    output_format: OutputFormat = Field(default="yaml", alias="outputFormat")
    args: Argv = ()
    env: dict[Annotated[str, Field(strict=True)], Annotated[str, Field(strict=True)]] = Field(
        default_factory=dict)
    cwd: Text | None = None
    timeout: Duration | None = None
    permissions: Permissions | None = None
    untrusted: Untrusted = "allow"
    command: Argv | None = None
    role: Role | None = None
    delay: Duration = 0.0
    script: Text | None = None

    @model_validator(mode="after")
    def _per_cli(self) -> AgentConfig:
        if self.cli == "command" and not self.command:
            raise PydanticCustomError(
                _MISSING, "cli: command needs command: the argv to run, e.g. [my-agent, --json]")
        if self.cli == "demo" and self.role is None:
            raise PydanticCustomError(
                _MISSING, "cli: demo needs role: one of " + ", ".join(ALL_ROLES))
        for key, clis in _ONLY_FOR.items():
            if key in self.model_fields_set and self.cli not in clis:
                raise PydanticCustomError(
                    _MISSING, f"{key} is only for cli: {' or '.join(clis)}, not cli: {self.cli}")
        return self

    @property
    def allowed(self) -> Permissions:
        """What the agent may do: its ``permissions``, read-only when unset."""
        return self.permissions or "read-only"

    def launch_with(self, head: tuple[str, ...], stdin: str | None,
                    tail: tuple[str, ...] = ()) -> AgentLaunch:
        """An :class:`AgentLaunch` of ``head`` + this agent's ``args`` + ``tail`` (a
        positional prompt), with the agent's env and cwd."""
        return AgentLaunch(argv=(*head, *self.args, *tail), stdin=stdin, env=dict(self.env),
                           cwd=self.cwd)


def default_agents() -> dict[str, AgentConfig]:
    """The offline demo roles, used for every role name no configuration defines, and the
    stand-ins of :data:`DEMO_STAND_INS` (``poller``: the demo questioner)."""
    agents = {role: AgentConfig.model_validate({"cli": "demo", "role": role}) for role in ALL_ROLES}
    return {**agents, **{name: agents[role] for name, role in DEMO_STAND_INS.items()}}


AGENTS = Section(SECTION, AgentConfig, unknown_key=CODE_UNKNOWN_KEY,
                 invalid_value=CODE_INVALID_VALUE, invalid_duration=CODE_INVALID_DURATION,
                 missing=CODE_MISSING, rules={_MISSING: Rule(CODE_MISSING, "{name}: {msg}")})


def _resolve(path: str | None, folder: Path | None) -> str | None:
    if path is None or folder is None or Path(path).is_absolute():
        return path
    return str(folder / path)


def parse_agents(data: Any, source: SourceMap | None = None, base: SourcePath = (SECTION,),
                 folder: Path | None = None) -> dict[str, AgentConfig]:
    """Validate the ``agents:`` mapping (None: no agents); ``folder`` anchors relative
    ``cwd`` and ``script`` paths. Raises :class:`AgentConfigError` with every problem."""
    source = source if source is not None else SourceMap("<string>")
    if data is None:
        return {}
    where = ".".join(str(p) for p in base)
    if not isinstance(data, Mapping):
        raise AgentConfigError([error(
            CODE_NOT_A_MAPPING, f"{where} must map agent names to settings, "
            f"got {type(data).__name__}", source.value(base),
            "for example: agents: {reviewer: {cli: claude, model: sonnet}}")])
    agents: dict[str, AgentConfig] = {}
    problems: list[Diagnostic] = []
    for name, settings in data.items():
        at = (*base, name)
        if not isinstance(settings, Mapping):
            problems.append(error(CODE_NOT_A_MAPPING, f"{where}.{name} must be a mapping of "
                                  f"settings, got {type(settings).__name__}", source.value(at)))
            continue
        values = dict(settings)
        if values.get("cli") == "demo" and "role" not in values and name in ALL_ROLES:
            values["role"] = name
        try:
            config = AgentConfig.model_validate(values)
        except ValidationError as exc:
            problems += section_diagnostics(exc, AGENTS, source, at)
            continue
        agents[str(name)] = config.model_copy(update={
            "cwd": _resolve(config.cwd, folder), "script": _resolve(config.script, folder)})
    if problems:
        raise AgentConfigError(problems)
    return agents


def load_agents(path: Path | str) -> dict[str, AgentConfig]:
    """The agents under ``agents:`` in the project file at ``path``; {} when the file or
    the key is absent. Raises :class:`AgentConfigError` (``interlock.yaml:LINE:COL: ...``)."""
    file = Path(path)
    if not file.exists():
        return {}
    try:
        raw = read_project_file(file)
    except SpecError as exc:
        raise AgentConfigError(exc.diagnostics) from None
    return dict(_parsed_agents(raw, str(file), str(file.resolve().parent)))


@functools.lru_cache(maxsize=16)
def _parsed_agents(raw: bytes, file: str, folder: str) -> tuple[tuple[str, AgentConfig], ...]:
    """The agents of one version of a project file, parsed once per process (every invoke
    resolves its agent through the file, read again each time so that an edit applies)."""
    try:
        data, source = project_section(raw, file, SECTION)
    except SpecError as exc:
        raise AgentConfigError(exc.diagnostics) from None
    return tuple(parse_agents(data, source, (SECTION,), Path(folder)).items())


def resolve_agent(name: str, agents: Mapping[str, AgentConfig]) -> AgentConfig | None:
    """The configured agent ``name`` (for ``poller``, else the ``questioner``) with its
    role's default permissions; the demo role of that name only when no agent is
    configured at all (a name missing from a project's ``agents:`` never runs a demo agent
    in its place); else None."""
    if not agents:
        config = default_agents().get(name)
    else:  # the poller asks as the questioner: the questioner's agent unless it has its own
        config = agents.get(name) or agents.get(DEMO_STAND_INS.get(name, name))
    if config is None:
        return None
    if config.permissions is None and (config.role or name) in EDITING_ROLES:
        return config.model_copy(update={"permissions": "edit"})
    return config


def must_edit(config: AgentConfig, name: str) -> bool:
    """Whether the agent is there to change files (an editing role, or granted edits),
    so that a tool call its CLI refused fails the call rather than being reported."""
    return (config.role or name) in EDITING_ROLES or config.allowed != "read-only"
