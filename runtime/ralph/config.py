"""The ``ralph:`` section of ``interlock.yaml`` and the agents the roles run.

::

    ralph:
      knowledge_approval_timeout: 30m
      invocation_timeout: 10m          # per subagent invocation; a hung agent is killed
      max_iterations: 5
      max_runtime: 2h
      max_cost: 10                     # USD, as the agents report usage
      retry: {attempts: 3, base: 1s, cap: 30s}   # transient failures (non-zero exit)
      gates: []                        # backpressure gates (runtime/ralph/gates.py)
    agents:
      executor: {cli: claude, model: sonnet}

No file is needed: every role defaults to its offline demo agent.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from interlock.machines.yamlsrc import parse_yaml
from interlock.runtime.agents.config import (
    ROLES,
    AgentConfig,
    Duration,
    load_agents,
    resolve_agent,
)

PROJECT_FILE = "interlock.yaml"
IDENTITIES: dict[str, str] = {
    "orchestrator": "Ralph-Orchestrator", "planner": "Ralph-Planner",
    "executor": "Ralph-Executor", "reviewer": "Ralph-Reviewer",
    "questioner": "Ralph-Questioner", "librarian": "Ralph-Librarian",
}


class RalphConfigError(ValueError):
    """``ralph:`` in interlock.yaml is invalid; the message names the field."""


class RetryPolicy(BaseModel):
    """Transient failures (non-zero exit, spawn error) are retried with capped, jittered
    exponential backoff."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    attempts: int = Field(default=3, ge=1)
    base: Duration = 0.2
    cap: Duration = 5.0


class RalphConfig(BaseModel):
    """Limits, retry policy, gates and the knowledge approval timeout of Ralph runs."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    knowledge_approval_timeout: Duration = 3600.0
    invocation_timeout: Duration = 600.0
    max_iterations: int | None = Field(default=None, ge=1)
    max_runtime: Duration | None = None
    max_cost: float | None = Field(default=None, ge=0)
    retry: RetryPolicy = Field(default_factory=RetryPolicy)
    gates: list[Any] = Field(default_factory=list)

    def with_overrides(self, **fields: Any) -> RalphConfig:
        return self.model_copy(update={k: v for k, v in fields.items() if v is not None})


def load_ralph_config(root: Path) -> RalphConfig:
    """``ralph:`` of ``ROOT/interlock.yaml`` (defaults when absent)."""
    file = root / PROJECT_FILE
    if not file.exists():
        return RalphConfig()
    document = parse_yaml(file.read_bytes(), str(file))
    data = document.data.get("ralph") if isinstance(document.data, Mapping) else None
    try:
        return RalphConfig.model_validate(data or {})
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in ("ralph", *first["loc"]))
        mark = document.source.value(("ralph", *first["loc"]))
        raise RalphConfigError(f"{mark}: {where}: {first['msg']}") from None


def role_agents(root: Path) -> dict[str, AgentConfig]:
    """The agent each role runs: ``agents:`` of interlock.yaml, else the demo role."""
    agents = load_agents(root / PROJECT_FILE)
    found = {role: resolve_agent(role, agents) for role in ROLES}
    return {role: config for role, config in found.items() if config is not None}
